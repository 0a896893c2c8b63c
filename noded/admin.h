/* admin — noded's admin listener (libmicrohttpd): GET /healthz, GET /status (JSON), GET /metrics.
 */
#ifndef CDNCA_ADMIN_H
#define CDNCA_ADMIN_H

#include <cjson/cJSON.h>

#include "buf.h"

struct admin;

/* Where the admin pages get their content; every callback may be NULL. */
struct admin_src {
  /* fill the /status object (the listener adds nothing of its own); 0 or -1 (500) */
  int (*status)(void *arg, cJSON *out);
  /* append Prometheus text to out; 0 or -1 (500) */
  int (*metrics)(void *arg, struct buf *out);
  void *arg;
};

/* Listen on "host:port" ("[v6]:port") and serve; NULL on failure (logged). src is copied. */
struct admin *admin_start(const char *listen, const struct admin_src *src);

/* Stop the listener and free; NULLs *a. */
void admin_stop(struct admin **a);

#endif
