/* httphead — the rules a request head must keep before controld's API or noded's admin port
   reads its body or routes it (docs/design.md, One message, one reading): a header name that is a
   token, at most one copy of each header whose second copy could be read two ways, a Host on
   HTTP/1.1, and one framing of the body (a Content-Length of digits, or Transfer-Encoding: chunked
   alone). A head that breaks one is refused and its connection closed: what follows it cannot be
   told apart from a next request. Pure: the caller hands over the headers as parsed. */
#ifndef CDNCA_HTTPHEAD_H
#define CDNCA_HTTPHEAD_H

#include <stddef.h>

/* One header as the HTTP server parsed it. */
struct httphead_field {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
};

/* What a refused head is answered. field points at static text or at out's own copy. */
struct httphead_verdict {
  unsigned status;  /* 400 or 501 */
  const char *code; /* "invalid_header", "duplicate_header", "unsupported_transfer_coding" */
  const char *field;
  char name[65]; /* the offending header's name, printable ASCII, cut to fit */
  char message[200];
};

/* Check the n headers f of a request of HTTP/1.minor: 0, or -1 with *v filled. */
int httphead_check(const struct httphead_field *f, size_t n, int minor, struct httphead_verdict *v);

#endif
