/* http1 — HTTP/1.x message head parsing and incremental body framing (Content-Length, chunked):
 * noded's edge path and the probes' own HTTP client read origins with it. */
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

/* c in ASCII lower case. */
int http1_lc(int c);

/* 1 when a[0..an) equals the C string b, ASCII case-insensitively. */
int http1_ieq(const char *a, size_t an, const char *b);

/* 1 when s[0..n) is a token (RFC 9110 §5.6.2: one or more tchar), as a field name must be. */
int http1_token(const char *s, size_t n);

/* 1 when the header's name equals name (ASCII case-insensitive). */
int http1_name_is(const struct http1_header *h, const char *name);

/* 1 when the comma-separated list v[0..len) holds token tok (case-insensitive). */
int http1_list_has(const char *v, unsigned len, const char *tok);

/* Parse a Content-Length value: 0 and *out, or -1 when not a plain decimal number. */
int http1_parse_length(const char *v, unsigned len, uint64_t *out);

/* Classification of a Transfer-Encoding field value. */
enum http1_te {
  HTTP1_TE_CHUNKED = 0, /* exactly "chunked" (any case) */
  HTTP1_TE_UNKNOWN = 1, /* a well-formed list with a coding other than chunked: 501 */
  HTTP1_TE_BAD = -1     /* malformed or obfuscated ("chunked, chunked", "chunked;x", ""): 400 */
};

/* Classify the Transfer-Encoding value v[0..len) (enum http1_te). */
int http1_te_classify(const char *v, unsigned len);

/* 1 when v[0..len) is uri-host [":" port] as a Host value or an absolute-form authority may be:
 * an [IPv6] literal or a name of letters, digits, "-._~", and a port of at most 5 digits. */
int http1_host_valid(const char *v, unsigned len);

/* The form of a request target (RFC 9112 §3.2). */
enum http1_target_form {
  HTTP1_TARGET_BAD = 0,     /* empty, or with a fragment ('#') */
  HTTP1_TARGET_ORIGIN,      /* "/path?query" */
  HTTP1_TARGET_ABSOLUTE,    /* "http://authority/path?query" (http or https) */
  HTTP1_TARGET_ASTERISK,    /* "*" */
  HTTP1_TARGET_AUTHORITY,   /* anything else, e.g. "host:443" (CONNECT) */
  HTTP1_TARGET_OTHER_SCHEME /* "ftp://..." and other schemes */
};

/* A request target split by http1_parse_target; pointers borrow from the target. */
struct http1_target {
  int form;              /* enum http1_target_form */
  int https;             /* ABSOLUTE with the https scheme */
  const char *authority; /* ABSOLUTE: up to the first '/' or '?' */
  unsigned authority_len;
  const char *path; /* ORIGIN, ABSOLUTE: the path and query to send on */
  unsigned path_len;
  int need_slash; /* ABSOLUTE: the path is empty or starts with '?': send "/" before it */
};

/* Split the target t[0..len); returns out->form. */
int http1_parse_target(const char *t, unsigned len, struct http1_target *out);

enum http1_body_kind {
  HTTP1_BODY_NONE = 0,   /* no body */
  HTTP1_BODY_LENGTH = 1, /* Content-Length bytes */
  HTTP1_BODY_CHUNKED = 2,
  HTTP1_BODY_CLOSE = 3 /* until the connection closes */
};

/* How a response head frames its body (RFC 9112 §6.3), by the edge's rule: none after HEAD
 * (is_head), 1xx, 204 and 304; chunked; else Content-Length; else up to the close. Sets *kind
 * and *len (HTTP1_BODY_LENGTH). Returns 0, or -1 for framing the edge refuses (502): a repeated
 * or invalid Content-Length (also where no body follows: it would be passed on), and, where a
 * body follows, a Transfer-Encoding other than one exactly "chunked", or one with a
 * Content-Length. */
int http1_response_framing(const struct http1_msg *m, int is_head, int *kind, uint64_t *len);

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
 * bytes, or with decode only the chunk data (moved to the front of p, in place). On -1,
 * *out_len counts those of the bytes before the malformed one.
 * Chunked framing is parsed strictly (RFC 9112 §7.1): lines end only at CRLF; chunk-size is
 * 1-16 hex digits; an extension is ";" name ["=" token / quoted-string] with optional
 * whitespace around ";" and "="; trailer lines are name ":" value without control bytes. */
long http1_body_feed(struct http1_body *b, char *p, size_t n, size_t *out_len, int decode);

/* Longest chunk header http1_chunk_header writes. */
#define HTTP1_CHUNK_HEADER_MAX 18

/* Write the canonical chunk-size line of n bytes ("<lowercase hex>\r\n") to dst; returns its
 * length (at most HTTP1_CHUNK_HEADER_MAX). n must be above 0 (0 is the last chunk). */
size_t http1_chunk_header(char *dst, size_t n);

/* Write n bytes of data (n > 0) at dst as one canonical chunk: size line, data, CRLF. dst needs
 * n + HTTP1_CHUNK_HEADER_MAX + 2 bytes; data may not overlap dst. Returns the bytes written. */
size_t http1_chunk_encode(char *dst, const char *data, size_t n);

/* The last chunk and the empty trailer section that end a re-framed chunked body. */
#define HTTP1_LAST_CHUNK "0\r\n\r\n"

#endif
