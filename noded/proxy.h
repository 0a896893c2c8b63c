/* proxy — the node's HTTP/1.1 reverse proxy for visitor traffic: epoll workers, Host routing,
 * origin pick with skip/retry (docs/design.md#node-skip-and-retry, docs/design.md#visitor-traffic),
 * streaming both ways, origin keep-alive pools, and the internet-facing rules of
 * docs/design.md#the-edge-http-path (strict framing, re-framed bodies, local answers end the
 * request, 1xx and Upgrade, timeouts and a connection cap).
 *
 * Embedding: proxy_new (binds) -> proxy_set_config (any time, from any thread) -> proxy_start
 * -> ... -> proxy_stop (graceful) -> proxy_free. Skip state is kept in a table keyed by
 * (site id, origin id) owned by the proxy; each proxy_set_config carries an origin's record
 * over when its (address, port, scheme) is unchanged, so it survives config updates. */
#ifndef CDNCA_PROXY_H
#define CDNCA_PROXY_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "buf.h"
#include "proxy_opts.h"
#include "sitecfg.h"
#include "targets.h"

struct proxy;

/* Fill o with the defaults of proxy_opts.h ([n] after a field; listen = "127.0.0.1:7480",
 * nobody trusted with X-Forwarded-For). */
void proxy_opts_default(struct proxy_opts *o);

/* Create a proxy and bind its listeners (nothing is served before proxy_start; Unix socket files
 * are removed by proxy_free). NULL on error (logged). Free with proxy_free. Strings in o are
 * copied. */
struct proxy *proxy_new(const struct proxy_opts *o);

/* The port of the first TCP listener (useful with port 0); 0 when every listener is Unix. */
int proxy_port(const struct proxy *p);

/* The listening sockets, one per --listen value in order (at most max): how many. */
int proxy_listen_fds(const struct proxy *p, int *fds, int max);

/* Serve snapshot s from now on (takes its own reference; the caller keeps its own). Syncs the
 * skip table first (may resolve new origin hostnames, blocking). Thread-safe; in-flight
 * requests finish on the snapshot they started with. 0, or -1 on OOM (old config stays). */
int proxy_set_config(struct proxy *p, struct sitecfg_set *s);

/* Where the proxy reads controld's clock offset for a failback ramp's share (the ctl's
   clock_offset_ms; NULL = 0). Before proxy_start. */
void proxy_set_clock(struct proxy *p, _Atomic int64_t *offset_ms);

/* Start the worker threads and the origin resolver thread. 0 or -1. */
int proxy_start(struct proxy *p);

/* Start draining (docs/design.md, Restarts and upgrades) and return at once: stop accepting
 * (Unix socket files are removed at once unless handed_over: a new process serves them), close
 * idle keep-alive connections, answer the next request on a busy one with Connection: close, let
 * in-flight requests and tunnels finish within stop_grace_ms, then close the rest. Safe to call
 * twice; proxy_drained tells when it is over. */
void proxy_drain(struct proxy *p, int handed_over);

/* End a drain now: every connection is closed (a second SIGTERM). Thread-safe. */
void proxy_end_now(struct proxy *p);

/* 1 once every started worker has ended its loop (drained or ended), else 0. */
int proxy_drained(struct proxy *p);

/* Graceful stop: proxy_drain (if not begun), then join the workers. Safe to call twice or without
 * proxy_start. */
void proxy_stop(struct proxy *p);

/* Write out the access lines the workers buffer (they are written in batches, at most 100 ms
 * late): before the log file is reopened (SIGHUP), so they land in the file they belong to.
 * Thread-safe. */
void proxy_flush_log(struct proxy *p);

/* Stop if needed and free everything; sets *p to NULL. */
void proxy_free(struct proxy **p);

/* Append the node proxy metrics (cdnca_node_requests_total{code}, ..._origin_attempts_total
 * {result}, ..._retries_total, ..._origin_skips_total, ..._fail_open_total,
 * ..._backup_picks_total, ..._proxy_header_errors_total{reason}, ..._config_seq) in Prometheus
 * text format to out. 0 or -1. */
int proxy_metrics(struct proxy *p, struct buf *out);

/* Append the per-origin skip state metrics (proxy_state_skip_metrics, at most max_labelled
   labelled origins) to out. 0 or -1. */
int proxy_skip_metrics(struct proxy *p, int max_labelled, struct buf *out);

/* Copy the destinations origin connections are refused (proxy_state_deny_copy) into *out.
 * Thread-safe. */
void proxy_deny_copy(struct proxy *p, struct targets *out);

/* Feed the node's own probe of origin_id (a probe task's outcome) into the skip state of every
 * site entry of that origin (proxy_state_probe). Thread-safe. */
void proxy_probe_result(struct proxy *p, int64_t origin_id, int ok);

/* Heartbeat observations: a cJSON array [{"site_id","origin_id","requests","failures",
 * "skipped"}], counts cumulative since the origin entry was created; caller frees. */
cJSON *proxy_observations(struct proxy *p);

/* /status view: {"seq", "sites": [{"id","name","config_version","current_level","origins":
 * [per-origin skip state]}]}; caller frees. NULL on OOM. */
cJSON *proxy_status(struct proxy *p);

#endif
