/* probe — batch HTTP(S) and tcp origin health probes on the calling thread: plain HTTP and tcp
 * checks of address literals on sockets of our own (probenat.h), HTTPS and DNS names through one
 * libcurl multi handle, all on one epoll loop. */
#ifndef CDNCA_PROBE_H
#define CDNCA_PROBE_H

#include <stdatomic.h>
#include <stddef.h>

#include "targets.h"

struct hcheck_opts;

/*
 * One probe is `GET scheme://host:port/path` (HEAD with method HEAD) whose TCP connection goes
 * to address:port (the check's port when it has one), while the Host header, TLS SNI and
 * certificate verification use `host`; the check's extra headers are sent too. Its outcome is
 * judged by hcheck_judge with the target's options: by default success is a response with
 * status < 500 (3xx and 404 included; redirects are never followed), failure is status >= 500,
 * a resolve/connect error, a TLS error (peer and host name are always verified), a timeout, or
 * a connection closed before a complete response header block. A check of type tcp only opens
 * a TCP connection (no TLS, no request) and closes it: success = it was established.
 *
 * Every probe opens a fresh connection that is closed when it ends (no reuse across probes or
 * rounds, no TLS session resumption), so each result reflects the origin as it is right now.
 * Every HTTPS probe verifies the certificate chain and host name in full; what is reused is the
 * trusted CA store, built once from the CA file (ca_file, else libcurl's built-in bundle; the CA
 * directory is then not read) and read again after 10 minutes, so CA updates are seen then.
 * There is no DNS cache: an address that is a DNS name is resolved for every probe.
 * The status is known once the header block is complete: the body is read up to PROBE_BODY_MAX
 * bytes and the transfer is then cut; its first HCHECK_BODY_MAX bytes are kept only when the
 * check has an expected_body. Errors while reading the body do not change the verdict. Proxy
 * environment variables are ignored.
 *
 * Two HTTP clients, one rule. Under PROBE_ENGINE_EPOLL a plain-HTTP or tcp check whose address
 * is an IPv4 or IPv6 literal runs on a socket of our own: the request has the lines libcurl
 * sends, in its order (method and target, Host with the port unless 80, User-Agent, Accept,
 * Connection: close, the check's headers), and the answer is read by proberesp.h with the HTTP/1
 * parser noded's edge path uses. An answer that parser refuses (a malformed head, framing the
 * edge answers 502, a head over 32 KiB) is a failure, as the edge could not pass it on to a
 * visitor either; where libcurl reads such an answer differently, tests/unit/test_probe_diff.c
 * lists it. Everything else — HTTPS, DNS names — runs on libcurl. The deny list is checked
 * before the connect either way.
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

/* How probe_run runs its probes. Both give the same results; they differ in CPU. */
enum probe_engine {
  /* One epoll loop with timers; plain-HTTP and tcp checks of an address literal run on sockets
     of our own (probenat.h: connect, one request, proberesp reads the answer), HTTPS and DNS
     names through libcurl's curl_multi_socket_action on the same loop. Each wake-up touches only
     the sockets that are ready: a turn costs O(ready), not O(in flight). The default
     (--probe-client own). */
  PROBE_ENGINE_EPOLL = 0,
  /* The epoll loop with every probe through libcurl (curl_multi_socket_action): --probe-client
     curl, and the comparison of the two HTTP clients in tests (same outcomes) and in
     tests/bench (CPU). */
  PROBE_ENGINE_EPOLL_CURL = 1,
};

struct probe_opts {
  const char *user_agent;     /* User-Agent header; NULL = PROBE_UA_CONTROL */
  enum probe_engine engine;   /* [PROBE_ENGINE_EPOLL] */
  const char *ca_file;        /* PEM CA bundle for HTTPS; NULL = the system CAs */
  int max_concurrency;        /* probes in flight at once; <= 0 = PROBE_DEFAULT_CONCURRENCY;
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
  const struct hcheck_opts *check; /* type, method, headers, expectations, port; NULL = defaults
                                      (the seed's rule); must live for the duration of the call */
  void *user;                      /* caller's; not used by the prober */
};

struct probe_result {
  int ok;                      /* 1 = success (hcheck_judge), 0 = failure */
  int status;                  /* HTTP status seen, 0 when no response */
  char error[PROBE_ERROR_MAX]; /* "" on success, else which rule failed: "status 503",
                                  "unexpected status 403", "body mismatch",
                                  "connect timeout", "timeout" (connected, no answer),
                                  "connect failed: Connection refused",
                                  "tls: <detail>", "resolve failed: <name>",
                                  "empty reply", "invalid target: <why>", "cancelled" */
  int latency_ms;              /* start of the transfer to its end; 0 when never started */
  int local;                   /* 1 = not a verdict on the origin: the probe was never made, for
                                  want of the prober's own resources (no descriptor, no memory:
                                  EMFILE, ENFILE, ENOBUFS, ENOMEM) or an internal failure; ok is
                                  0 and error says why */
};

struct probe;

/* New prober (copies opts; NULL opts = defaults); NULL on failure (logged). Free with probe_free.
 */
struct probe *probe_new(const struct probe_opts *opts);

/* "epoll" | "epoll-curl". Static. */
const char *probe_engine_name(enum probe_engine e);

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

/*
 * Test seams. controld and noded call none of these: they are for tests/bench (other loops and
 * libcurl settings to measure against the engines above) and the unit tests that check those
 * give the same results.
 */

/* One turn of a loop that stands in for the epoll loop (probe_set_loop): drive the transfers
 * of multi (the prober's libcurl multi handle, a CURLM *), hand the finished ones back with
 * probe_loop_collect, then wait for activity for at most wait_ms (so that probe_run sees its
 * cancel flag) unless a slot is free and more_to_start is set, or nothing is in flight. 0, or
 * -1 on a libcurl failure (probe_run then abandons the probes in flight). */
typedef int probe_loop_fn(struct probe *p, void *multi, int more_to_start, int wait_ms);

/* Run every probe through libcurl on loop's turns instead of the epoll loop (NULL restores the
 * engine); after probe_new, before probe_run. 0, or -1 when libcurl refuses the change. */
int probe_set_loop(struct probe *p, probe_loop_fn *loop);

/* For a loop's turn: put the finished transfers' outcomes in their results and free their
 * slots. Returns how many probes are still in flight; *idle (when not NULL) = free slots. */
int probe_loop_collect(struct probe *p, int *idle);

/* Called with each transfer's libcurl easy handle (a CURL *) after the prober has set the
 * options every probe shares, and with ud. 0, or -1 to fail the probe ("internal: curl option
 * rejected"). */
typedef int probe_easy_fn(void *easy, void *ud);

/* Install fn (NULL removes it) between probe_run calls. fn runs whenever a handle is set up
 * afresh (its first probe, and after a tcp check, which resets it), so what it sets lasts. */
void probe_set_easy_hook(struct probe *p, probe_easy_fn *fn, void *ud);

#endif
