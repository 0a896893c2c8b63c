/* httphead_mhd — httphead's rules on a libmicrohttpd request (httphead_mhd.h). */
#include "httphead_mhd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct head_scan {
  struct httphead_field f[HTTPHEAD_MHD_FIELDS];
  size_t n;
  int over;
};

static enum MHD_Result add_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size) {
  struct head_scan *h = cls;
  (void)kind;
  if (h->n == HTTPHEAD_MHD_FIELDS) {
    h->over = 1;
    return MHD_NO;
  }
  h->f[h->n++] = (struct httphead_field){key ? key : "", key ? key_size : 0, value ? value : "",
                                         value ? value_size : 0};
  return MHD_YES;
}

static int verdict(struct httphead_verdict *v, unsigned status, const char *code,
                   const char *message) {
  memset(v, 0, sizeof *v);
  v->status = status;
  v->code = code;
  snprintf(v->message, sizeof v->message, "%s", message);
  return -1;
}

int httphead_mhd_check(struct MHD_Connection *c, const char *version, struct httphead_verdict *v) {
  struct head_scan *h = malloc(sizeof *h);
  int rc;
  if (!h) return verdict(v, 500, "internal", "out of memory");
  h->n = 0;
  h->over = 0;
  MHD_get_connection_values_n(c, MHD_HEADER_KIND, add_field, h);
  if (h->over) {
    char m[64];
    snprintf(m, sizeof m, "more than %d header fields", HTTPHEAD_MHD_FIELDS);
    rc = verdict(v, 400, "invalid_header", m);
  } else
    rc = httphead_check(h->f, h->n, version && strcmp(version, MHD_HTTP_VERSION_1_0) == 0 ? 0 : 1,
                        v);
  free(h);
  return rc;
}
