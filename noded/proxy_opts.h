/* proxy_opts — what an embedder hands the proxy: its options (struct proxy_opts; [n] is the
 * default proxy_opts_default fills in) and the record of one finished request it gets for the
 * access log. proxy.h includes it; the proxy's own modules see these types without proxy.h. */
#ifndef CDNCA_PROXY_OPTS_H
#define CDNCA_PROXY_OPTS_H

#include <stdint.h>

/* One finished visitor request, for the access log. Strings are borrowed for the call. */
struct proxy_access {
  int64_t site_id;    /* 0 when no site matched */
  const char *site;   /* site name or "" */
  int64_t origin_id;  /* last origin tried, 0 when none */
  const char *client; /* the visitor's address (docs/design.md#noded-behind-an-edge-cache) */
  int level;          /* that origin's level (0 when none): above the site's current level when
                         a backup level served (node_retry.backup_levels) */
  int attempts;
  int status; /* status sent to the visitor; 499 when the visitor went away first */
  int64_t duration_ms;
  const char *method;
  const char *host;
  const char *path;
  uint64_t bytes;    /* response bytes sent to the visitor */
  const char *error; /* the code of noded's own error answer ("origin_unreachable", ...), else
                        NULL */
};

typedef void (*proxy_access_fn)(void *arg, const struct proxy_access *a);

struct proxy_opts {
  const char *listen;          /* "127.0.0.1:7480", "[::1]:7480", "unix:/path", each with
                                  options (listen.h), several joined by '\n'; port 0 picks a
                                  free one */
  const int *inherited_fds;    /* NULL, or one per --listen value in order: a listening socket
                                  received (socket activation, upgrade) or -1 to open one */
  const char *trusted_proxies; /* "CIDR,...,unix" trusted with X-Forwarded-For; NULL = none */
  const char *origin_ca_file;  /* CA bundle for HTTPS origins; NULL = system default */
  const char *deny_targets;    /* the node's own --deny-targets (CIDRs; NULL = none): origin
                                  addresses never connected to, besides the built-in ones and
                                  controld's (docs/design.md#errors-and-limits) */
  int threads;                 /* [2] worker threads, each with its own epoll and listener */
  int connect_timeout_ms;      /* [5000] TCP connect + TLS handshake to an origin */
  int origin_timeout_ms;       /* [60000] origin silent while we wait for it */
  int visitor_timeout_ms;      /* [60000] visitor not taking the bytes written to it */
  int header_timeout_ms;       /* [10000] a whole request head must arrive within this (from
                                  accept, or from its first byte on a keep-alive connection) */
  int keepalive_timeout_ms;    /* [60000] idle keep-alive connection between requests */
  int body_timeout_ms;         /* [60000] visitor silent while noded waits for body bytes */
  int max_connections;         /* [10000] open visitor connections (all threads); lowered to fit
                                  the descriptor limit; at the cap accepting pauses */
  int stop_grace_ms;           /* [30000] a drain waits this long for in-flight requests */
  int origin_idle_ms;          /* [30000] idle origin connections are closed after this */
  int max_idle_per_origin;     /* [32] idle origin connections kept per origin and thread */
  proxy_access_fn access_log;  /* NULL: one JSON line per request, formatted as a log_info line
                                  and written in batches (proxy_flush_log) */
  void *access_arg;
};

#endif
