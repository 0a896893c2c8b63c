/* probe — batch HTTP(S) origin health probes over one libcurl multi handle, on the calling thread.
 */
#ifndef CDNCA_PROBE_H
#define CDNCA_PROBE_H

#include <stdatomic.h>
#include <stddef.h>

#include "targets.h"

/*
 * One probe is `GET scheme://host:port/path` whose TCP connection goes to address:port, while
 * the Host header, TLS SNI and certificate verification use `host`. Success is a response with
 * status < 500 (3xx and 404 included; redirects are never followed). Failure is status >= 500,
 * a resolve/connect error, a TLS error (peer and host name are always verified), a timeout, or
 * a connection closed before a complete response header block.
 *
 * Every probe opens a fresh connection that is closed when it ends (no reuse across probes or
 * rounds, no TLS session resumption), so each result reflects the origin as it is right now.
 * The verdict is decided once the header block is complete: the body is read and dropped up to
 * PROBE_BODY_MAX bytes and the transfer is then cut; errors while reading the body do not
 * change the verdict. Proxy environment variables are ignored.
 *
 * Share-nothing: a struct probe belongs to one thread at a time; use one per thread.
 */

#define PROBE_ERROR_MAX 128
#define PROBE_BODY_MAX (64 * 1024)
#define PROBE_DEFAULT_TIMEOUT_MS 5000
#define PROBE_DEFAULT_CONCURRENCY 2048
/* The connect phase (resolve + TCP + TLS) is capped at min(timeout_ms, this). */
#define PROBE_CONNECT_TIMEOUT_CAP_MS 10000

#define PROBE_UA_CONTROL "cdnca-control-api/origin-probe"
#define PROBE_UA_NODE "cdnca-node/origin-probe"

struct probe_opts {
  const char *user_agent; /* User-Agent header; NULL = PROBE_UA_CONTROL */
  const char *ca_file;    /* PEM CA bundle for HTTPS; NULL = the system CAs */
  int max_concurrency;    /* probes in flight at once; <= 0 = PROBE_DEFAULT_CONCURRENCY;
                             more targets wait in a queue, in order */
  const struct targets *deny; /* addresses never connected to, also after DNS (targets.h);
                                 NULL = none. Must outlive the prober. */
};

struct probe_target {
  const char *scheme;  /* "http" or "https" */
  const char *address; /* where to connect: IPv4, IPv6 literal (no brackets) or DNS name */
  int port;            /* 1..65535 */
  const char *host;    /* Host header, SNI and certificate name; NULL or "" = address */
  const char *path;    /* starts with '/', may carry a query; NULL or "" = "/" */
  int timeout_ms;      /* whole probe, connect + response; <= 0 = PROBE_DEFAULT_TIMEOUT_MS */
  void *user;          /* caller's; not used by the prober */
};

struct probe_result {
  int ok;                      /* 1 = success (status < 500), 0 = failure */
  int status;                  /* HTTP status seen, 0 when no response */
  char error[PROBE_ERROR_MAX]; /* "" on success, else e.g. "status 503", "timeout",
                                  "connect failed: Connection refused",
                                  "tls: <detail>", "resolve failed: <name>",
                                  "empty reply", "invalid target: <why>", "cancelled" */
  int latency_ms;              /* start of the transfer to its end; 0 when never started */
};

struct probe;

/* New prober (copies opts; NULL opts = defaults); NULL on failure (logged). Free with probe_free.
 */
struct probe *probe_new(const struct probe_opts *opts);

/* Free the prober and its handles; sets *p to NULL. NULL or *p NULL is a no-op. */
void probe_free(struct probe **p);

/*
 * Probe targets[0..n) concurrently (at most max_concurrency in flight) and fill results[i] for
 * targets[i]; blocks until all are done. Each result is filled, even on error. The target
 * strings only need to live for the duration of the call. When cancel is non-NULL it is read
 * every loop turn (at least every 100 ms): once it is non-zero, in-flight probes are abandoned
 * and every unfinished result gets error "cancelled". Returns 0 (whatever the probes' outcomes),
 * -1 on bad arguments or an internal libcurl failure (unfinished results then carry an error).
 */
int probe_run(struct probe *p, const struct probe_target *targets, size_t n,
              struct probe_result *results, atomic_int *cancel);

#endif
