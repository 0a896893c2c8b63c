/* http1 — HTTP/1.x message head parsing and incremental body framing (Content-Length, chunked). */
#ifndef CDNCA_HTTP1_H
#define CDNCA_HTTP1_H

#include <stddef.h>
#include <stdint.h>

#define HTTP1_MAX_HEADERS 128

struct http1_header {
  const char *name;
  unsigned name_len;
  const char *value; /* leading and trailing whitespace removed */
  unsigned value_len;
};

/* A parsed head; the pointers borrow from the parsed buffer. */
struct http1_msg {
  const char *method; /* requests */
  unsigned method_len;
  const char *target;
  unsigned target_len;
  int status; /* responses */
  const char *reason;
  unsigned reason_len;
  int minor; /* HTTP/1.<minor> */
  int n_headers;
  struct http1_header headers[HTTP1_MAX_HEADERS];
};

enum http1_result { HTTP1_OK = 0, HTTP1_BAD = -1, HTTP1_TOO_MANY_HEADERS = -2 };

/* Length of a complete head (through the empty line) at buf[0..len), or 0 while incomplete.
 * *scan holds where to resume the search (start at 0; keep between calls on the same buffer). */
size_t http1_head_end(const char *buf, size_t len, size_t *scan);

/* Parse a complete request head of len bytes into m. HTTP1_OK or a negative http1_result. */
int http1_parse_request(const char *buf, size_t len, struct http1_msg *m);

/* Parse a complete response head of len bytes into m. HTTP1_OK or a negative http1_result. */
int http1_parse_response(const char *buf, size_t len, struct http1_msg *m);

/* 1 when the header's name equals name (ASCII case-insensitive). */
int http1_name_is(const struct http1_header *h, const char *name);

/* 1 when the comma-separated list v[0..len) holds token tok (case-insensitive). */
int http1_list_has(const char *v, unsigned len, const char *tok);

/* Parse a Content-Length value: 0 and *out, or -1 when not a plain decimal number. */
int http1_parse_length(const char *v, unsigned len, uint64_t *out);

enum http1_body_kind {
  HTTP1_BODY_NONE = 0,   /* no body */
  HTTP1_BODY_LENGTH = 1, /* Content-Length bytes */
  HTTP1_BODY_CHUNKED = 2,
  HTTP1_BODY_CLOSE = 3 /* until the connection closes */
};

/* Incremental body framing state. */
struct http1_body {
  enum http1_body_kind kind;
  uint64_t remaining; /* LENGTH: bytes left; CHUNKED: bytes left in the current chunk */
  int cstate;         /* chunked parser state */
  int digits;
  unsigned trailer_bytes;
  int done;
};

/* Start framing a body of this kind (length for HTTP1_BODY_LENGTH). */
void http1_body_init(struct http1_body *b, enum http1_body_kind kind, uint64_t length);

/* Feed n bytes at p. Returns how many were consumed (it stops at the end of the body) or -1 on
 * malformed chunked framing; *out_len = how many bytes at p are to be forwarded: all consumed
 * bytes, or with decode only the chunk data (moved to the front of p, in place). */
long http1_body_feed(struct http1_body *b, char *p, size_t n, size_t *out_len, int decode);

#endif
