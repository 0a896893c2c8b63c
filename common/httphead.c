/* httphead — the rules a request head must keep (httphead.h). */
#include "httphead.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "http1.h"

/* Headers a request may carry at most once (Host first: httphead_check counts it as count[0]): a
   second copy of any of them could be read two ways (which length frames the body, which token or
   revision counts, which host is meant). */
static const char *const single_headers[] = {
    "Host",         "Content-Length", "Transfer-Encoding", "Authorization",
    "Content-Type", "If-Match",       "Idempotency-Key",
};
#define NSINGLE (sizeof single_headers / sizeof single_headers[0])

static int name_is(const struct httphead_field *f, const char *name) {
  return http1_ieq(f->name, f->name_len, name);
}

/* The value without the optional whitespace around it. */
static void trim(const char *s, size_t len, const char **out, size_t *out_len) {
  while (len && (*s == ' ' || *s == '\t')) {
    s++;
    len--;
  }
  while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
    len--;
  *out = s;
  *out_len = len;
}

static void copy_name(struct httphead_verdict *v, const struct httphead_field *f) {
  size_t i = 0;
  for (; i < f->name_len && i < sizeof v->name - 1; i++) {
    unsigned char c = (unsigned char)f->name[i];
    v->name[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
  }
  v->name[i] = '\0';
}

static int refuse(struct httphead_verdict *v, unsigned status, const char *code, const char *field,
                  const char *message) {
  v->status = status;
  v->code = code;
  v->field = field;
  if (message) snprintf(v->message, sizeof v->message, "%s", message);
  return -1;
}

int httphead_check(const struct httphead_field *f, size_t n, int minor,
                   struct httphead_verdict *v) {
  size_t count[NSINGLE] = {0};
  const struct httphead_field *cl = NULL, *te = NULL;
  const char *s;
  size_t len;
  memset(v, 0, sizeof *v);
  for (size_t i = 0; i < n; i++) {
    if (!http1_token(f[i].name, f[i].name_len)) {
      copy_name(v, &f[i]);
      snprintf(v->message, sizeof v->message,
               "the header name '%s' is not a token (no white space before the colon)", v->name);
      return refuse(v, 400, "invalid_header", v->name, NULL);
    }
    for (size_t k = 0; k < NSINGLE; k++)
      if (name_is(&f[i], single_headers[k]) && ++count[k] > 1) {
        snprintf(v->message, sizeof v->message, "the %s header may be sent only once",
                 single_headers[k]);
        return refuse(v, 400, "duplicate_header", single_headers[k], NULL);
      }
    if (name_is(&f[i], "Content-Length")) cl = &f[i];
    if (name_is(&f[i], "Transfer-Encoding")) te = &f[i];
  }
  if (minor >= 1 && count[0] == 0)
    return refuse(v, 400, "invalid_header", "Host", "an HTTP/1.1 request needs a Host header");
  if (te) {
    trim(te->value, te->value_len, &s, &len);
    if (!http1_ieq(s, len, "chunked"))
      return refuse(v, 501, "unsupported_transfer_coding", "Transfer-Encoding",
                    "the only transfer coding taken is chunked, alone");
    if (cl)
      return refuse(v, 400, "invalid_header", "Content-Length",
                    "Content-Length and Transfer-Encoding together frame one body two ways");
  }
  if (cl) {
    uint64_t bytes;
    trim(cl->value, cl->value_len, &s, &len);
    /* 1-18 digits; a longer value is refused before its length is narrowed */
    if (len > 18 || http1_parse_length(s, (unsigned)len, &bytes) < 0)
      return refuse(v, 400, "invalid_header", "Content-Length",
                    "Content-Length must be a number of bytes");
  }
  return 0;
}
