/* tasks — the node's probe tasks: long-poll GET /v1/node/tasks, run them with common/probe
   (User-Agent cdnca-node/origin-probe) within the round's deadline, POST /v1/node/votes.
   Prefix ntasks_ (controld has a tasks module of its own). */
#ifndef CDNCA_NODE_TASKS_H
#define CDNCA_NODE_TASKS_H

#include <stddef.h>
#include <stdint.h>

#include "hcheck.h"
#include "probe.h"

struct ctl;
struct ntasks;

/* One task of a round, as received. */
struct ntask {
  int64_t task_id, origin_id;
  char url[600];
  char host[256];
  int timeout_ms;
  struct hcheck_opts check; /* the site's probe options ("check"; absent = the defaults) */
};

/* A parsed GET /v1/node/tasks answer. */
struct ntask_round {
  int64_t round_id;
  int64_t deadline_ms; /* relative: ms left until the round's deadline when controld answered */
  int n;
  struct ntask *tasks; /* owned */
};

/* New task runner against ctl (not owned); origin_ca_file may be NULL or "". curl_only = every
 * probe through libcurl (--probe-client curl; probe.h). NULL on failure. */
struct ntasks *ntasks_new(struct ctl *ctl, const char *origin_ca_file, int curl_only);

/* Called with each probe outcome of a round (origin id, ok), on the task thread, before the votes
 * are posted; unusable targets and cancelled probes are not reported. */
typedef void ntasks_result_fn(void *arg, int64_t origin_id, int ok);

/* Set the outcome callback (before ntasks_start; fn NULL = none). */
void ntasks_on_result(struct ntasks *t, ntasks_result_fn *fn, void *arg);

/* Fills *out with the destinations probes may not connect to (targets.h), on the task thread
   before each round. */
typedef void ntasks_deny_fn(void *arg, struct targets *out);

/* Set where the refused targets come from (before ntasks_start; NULL = the built-in ones only).
   Every address a probe would connect to, after DNS, is checked against them. */
void ntasks_on_deny(struct ntasks *t, ntasks_deny_fn *fn, void *arg);

/* Start the thread. 0 or -1. */
int ntasks_start(struct ntasks *t);

/* Join the thread (set ctl->stop first; running probes are cancelled). */
void ntasks_join(struct ntasks *t);

/* Free (after ntasks_join). NULLs *t. */
void ntasks_free(struct ntasks **t);

/* Rounds run, probes run, vote posts refused as late (409). */
void ntasks_stats(struct ntasks *t, int64_t *rounds, int64_t *probes, int64_t *late);

/* Pure: parse and validate a tasks answer into *out (caller ntasks_round_fini's it, also on
   error). 0, or -1 with the offending field named in err. Unknown keys are ignored. */
int ntasks_parse(const char *json, size_t len, struct ntask_round *out, char *err, size_t errlen);

/* Free what a round owns. */
void ntasks_round_fini(struct ntask_round *r);

/* Pure: split "scheme://address:port/path" (IPv6 in brackets) into t, with its strings stored
   in store (cap bytes); host and timeout are left to the caller. 0 or -1. */
int ntasks_url_target(const char *url, char *store, size_t cap, struct probe_target *t);

/* Pure: the probe timeout for a task: min(timeout_ms, deadline_ms - margin), at least 100 ms;
   0 when the deadline is too close to run anything. */
int ntasks_effective_timeout(int timeout_ms, int64_t deadline_ms);

#endif
