/* ramp — failback without a storm (docs/design.md#failback-ramp): a site's failback_ramp policy
 * (its JSON form, validation and column codec), the ramp a publication carries, the share of new
 * requests a node sends to the ramp level at a time, and controld's decision on a running ramp.
 * Pure: every function takes the time it needs. */
#ifndef CDNCA_RAMP_H
#define CDNCA_RAMP_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "fields.h"

#define RAMP_MIN_STEPS 2
#define RAMP_MAX_STEPS 10
#define RAMP_STEP_MS_MIN 1000
#define RAMP_STEP_MS_MAX 3600000
#define RAMP_MIN_REQUESTS_MAX 100000000

/* A site's failback_ramp; n_steps 0 = none (null: a failback switches at once). */
struct ramp_policy {
  int n_steps;
  int steps[RAMP_MAX_STEPS]; /* percent of new requests, strictly increasing, the last 100 */
  int64_t step_ms;           /* how long each step lasts: 1 s to 1 h */
  double max_failure_ratio;  /* (0, 1]: the ramp level's failure share that aborts */
  int64_t min_requests;      /* >= 1: the requests a window needs before its share counts */
};

/* Apply the value of the key "failback_ramp" (an object, or null = none) onto *p; prefix is the
   path of the object holding that key ("" at the top). 0, or -1 with *err filled (422 with the
   field, e.g. "failback_ramp.steps[2]"; 400 unknown_field) and *p unchanged. */
int ramp_policy_apply(const cJSON *v, struct ramp_policy *p, const char *prefix,
                      struct field_err *err);

/* The JSON value of a policy: the object, or null when none. NULL on out of memory. */
cJSON *ramp_policy_json(const struct ramp_policy *p);

/* The codec of a site's failback_ramp row (FIELD_JSON, key "failback_ramp"; column text: the
   object, NULL = none). */
extern const struct field_codec ramp_policy_codec;

/* A running ramp, as a publication carries it ("ramp" of a site config): new requests go to
   to_level for share(t) percent and to from_level (still the site's current level) for the rest.
   started_at is controld's wall clock (epoch ms). from_level 0 = no ramp. */
struct ramp_run {
  int from_level, to_level;
  int64_t started_at;
  int n_steps;
  int steps[RAMP_MAX_STEPS];
  int64_t step_ms;
};

/* The codec of a site's running ramp (FIELD_JSON, key "ramp"; column text: the run, NULL = none).
 */
extern const struct field_codec ramp_run_codec;

/* The published object of a running ramp (NULL on out of memory; callers publish null for no
   ramp). */
cJSON *ramp_run_json(const struct ramp_run *r);

/* Read a published "ramp" value (null or absent: *r cleared, no ramp). path names it in errors.
   0, or -1 with *err filled. */
int ramp_run_read(const cJSON *v, const char *path, struct ramp_run *r, struct field_err *err);

/* Percent (0 to 100) of new requests for r->to_level at local time now_ms, where controld's clock
   reads now_ms + offset_ms: the step at (controld time - started_at) / step_ms; before the start
   the first step (the ramp is published, so it has begun), past the last step 100. 0 when r is no
   ramp. */
int ramp_share(const struct ramp_run *r, int64_t now_ms, int64_t offset_ms);

/* The step index (0-based) at controld time t; n_steps once every step has run. */
int ramp_step_at(const struct ramp_run *r, int64_t t);

/* When the ramp's last step ends (controld time). */
int64_t ramp_ends_at(const struct ramp_run *r);

/* controld's decision on a running ramp after a heartbeat window. */
enum ramp_action {
  RAMP_GO_ON = 0,   /* keep ramping */
  RAMP_ABORT = 1,   /* republish without the ramp, failback.aborted, hold */
  RAMP_COMPLETE = 2 /* the last step has run: the switch completes (auto_failback) */
};

/* One window's evidence of the ramp level, as nodes observed it. */
struct ramp_window {
  int64_t requests, failures; /* requests sent to the ramp level's origins, and failed */
  int level_unhealthy;        /* controld's own health of the ramp level: unhealthy */
  int level_skipped;          /* the nodes skip every origin of the ramp level (their own verdict
                                 on its visitors' failures, which then stop reaching it) */
};

/* The decision at controld time now: abort when the ramp level is unhealthy, or skipped by the
   nodes after a failure in the window (a skip without one is older than the ramp: a node ends
   it when the ramp reaches it, reporting it until its trial), or when the window
   holds at least min_requests and its failure share is over max_failure_ratio; else complete once
   every step has run; else go on. why (may be NULL) gets the reason in words. */
enum ramp_action ramp_decide(const struct ramp_policy *p, const struct ramp_run *r,
                             const struct ramp_window *w, int64_t now, char *why, size_t cap);

/* The run a failback from level from to level to starts at now under policy p. */
void ramp_run_start(const struct ramp_policy *p, int from, int to, int64_t now,
                    struct ramp_run *out);

#endif
