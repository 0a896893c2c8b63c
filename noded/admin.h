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

/* Listen on "host:port" ("[v6]:port") (on fd, a socket received for it, when >= 0) and serve, at
   most max_per_ip connections from one address (0 = no cap) and each request head whole within 10
   s; NULL on failure (logged). src is copied. */
struct admin *admin_start(const char *listen, int fd, int max_per_ip, const struct admin_src *src);

/* The admin listener's listening socket (to hand to an upgraded process), or -1. */
int admin_listen_fd(const struct admin *a);

/* Append cdnca_node_admin_refused_total{reason} (Prometheus text) to out. a may be NULL. 0 or
   -1. */
int admin_metrics(struct admin *a, struct buf *out);

/* Stop the listener and free; NULLs *a. */
void admin_stop(struct admin **a);

#endif
