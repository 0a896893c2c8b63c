/* engine — applies probe verdicts to origins (common/health), decides levels, switches, events. */
#ifndef CDNCA_ENGINE_H
#define CDNCA_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "drill.h"
#include "health.h"
#include "outlook.h"
#include "shadow.h"
#include "store.h"

struct metrics;

/* What the engine works with; borrowed, the owner keeps it alive while the engine runs. */
struct engine_env {
  struct store *store;         /* verdicts, levels, events and fleet flags are written here */
  struct metrics *metrics;     /* cdnca_level_switches_total */
  int64_t probe_interval_ms;   /* the global probe interval (a site's own interval_ms wins) */
  int64_t suspect_interval_ms; /* fast re-probe of a site with a pending change; 0 = off */
  int64_t incident_quiet_ms;   /* docs/design.md#incidents: a trigger this soon after a
                                  resolution reopens it; the resolution's quiet time */
  int no_incidents;            /* a benchmark seam (tests/bench/bench_incidents.c measures the
                                  rounds with and without incident records); 0 in the daemon */
};

/* One vote behind a verdict, as recorded in the evidence. */
struct engine_vote {
  enum health_source source; /* who cast it */
  int64_t node_id;           /* SOURCE_NODES: the node; else 0 */
  char checkpoint[64];       /* SOURCE_CHECKPOINTS: the checkpoint's name; else "" */
  int ok;                    /* 1 = success */
  int status;                /* HTTP status, 0 when none */
  int latency_ms;            /* -1 when unknown */
  char error[128];           /* "" when ok or none given */
};

/* One origin's outcome of a round. */
struct engine_verdict {
  int64_t origin_id;
  enum health_verdict verdict;      /* VERDICT_NONE: no source decided */
  enum health_source source;        /* meaningful when verdict != VERDICT_NONE */
  int votes_success, votes_failure; /* the votes the verdict was taken on */
  char error[256];                  /* for a failure: the first failing vote's error */
  int n_votes;
  const struct engine_vote *votes; /* every vote collected (borrowed) */
};

/* One site's outcomes of a round (verdicts borrowed). */
struct engine_site_round {
  int64_t site_id;
  int n;
  const struct engine_verdict *v;
};

enum engine_switch_rc {
  ENGINE_SWITCH_OK = 0,
  ENGINE_SWITCH_NOT_FOUND = 1, /* no such site */
  ENGINE_SWITCH_NO_ORIGIN = 2, /* the level has no enabled origin */
  ENGINE_SWITCH_NO_RAMP = 3,   /* a ramp was asked: the site has no failback_ramp, or the level
                                  is not before the current one */
  ENGINE_SWITCH_ERROR = -1,
};

/* Tally votes[0..n) in the order of docs/design.md#votes-and-verdicts into out->verdict, source,
   votes_success/failure and error (other fields kept): node votes alone (>= 2 and a strict
   majority), else node + checkpoint votes, else the control probe's vote. VERDICT_NONE when none
   decides. Pure. */
void engine_tally(const struct engine_vote *votes, int n, struct engine_verdict *out);

/* Fill *out with the health-check state of s and its level decision at now (wall ms). Without
   active health checks the origins' states are ignored (every non-empty level counts as
   unknown): only a current level with no enabled origin switches. Pure. */
void engine_outlook(const struct site_rec *s, int64_t now, struct outlook *out);

/* Ms from a site's round to its next probe: its own interval_ms (> 0) or the global interval,
   shortened to suspect_interval_ms (> 0) while a state change is pending (suspect). At least 1.
   Pure. */
int64_t engine_next_probe_ms(int64_t own_interval_ms, int64_t probe_interval_ms,
                             int64_t suspect_interval_ms, int suspect);

/* In one transaction: record round round_id (started_at..finished_at) and, per site, apply its
   verdicts to the origins, write the evidence, evaluate the level decision and act on it (switch
   = republication, events), set last/next probe times. Sites deleted meanwhile are skipped.
   0 or -1 (nothing written). */
int engine_apply_round(const struct engine_env *env, int64_t round_id, int64_t started_at,
                       int64_t finished_at, const struct engine_site_round *sites, int n_sites);

/* After a config change of site_id: evaluate its levels and act (switch, events), in its own
   transaction. 0 (also for a deleted site) or -1 (nothing written). */
int engine_site_changed(const struct engine_env *env, int64_t site_id);

/* The same inside the caller's write transaction (store_op), so the change, this re-evaluation,
   its publication and its events commit together. 0 or -1 (the caller must roll back). */
int engine_site_changed_locked(const struct engine_env *env, struct store_tx *tx, int64_t site_id);

/* The same, handing the site record back when it is still exactly what is stored: 1 with *out
   the site as now stored (the caller releases it with site_rec_fini), 0 when the evaluation
   switched the level (which bumps columns the record does not follow) or the site is gone, so
   the caller reads it again (*out untouched), -1 on error. Saves a caller that answers with the
   site a second read. */
int engine_site_changed_keep_locked(const struct engine_env *env, struct store_tx *tx,
                                    int64_t site_id, struct site_rec *out);

/* docs/design.md, Failback ramp: decide every running ramp at now (wall ms), one transaction
   per site: abort (republish without it, failback.aborted, hold the level back), complete
   (level.switched, auto_failback) or go on (a window with min_requests starts a new one).
   0, or -1 when any failed (logged; the next tick tries again). */
int engine_ramp_tick(const struct engine_env *env, int64_t now);

/* docs/design.md, Drills: decide every drill due at now (wall ms; running, or scheduled with its
   start_at come), one transaction per drill: start it (switch, reason drill, drill.started),
   fail it (a precondition does not hold), watch it (a window with min_requests starts a new
   one), abort or pass it (switch back, drill.finished) or cancel it (an incident opened, the site
   left the level: the engine's rules take over). A recurring drill schedules the next one when it
   finishes. 0, or -1 when any failed (logged; the next tick tries again). */
int engine_drill_tick(const struct engine_env *env, int64_t now);

enum engine_drill_rc {
  ENGINE_DRILL_OK = 0,
  ENGINE_DRILL_NOT_FOUND = 1, /* no such site or drill */
  ENGINE_DRILL_INVALID = 2,   /* *err filled (422: to_level) */
  ENGINE_DRILL_CONFLICT = 3,  /* *reason: a 409 reason code */
  ENGINE_DRILL_ERROR = -1,
};

/* Inside the caller's write transaction: create drill d (drill_apply's) on site_id by the token
   named by; its preconditions must hold now (else CONFLICT with *reason) and one that starts now
   starts at once (d is the record as stored after). On anything but OK the caller rolls back. */
enum engine_drill_rc engine_drill_create_locked(const struct engine_env *env, struct store_tx *tx,
                                                int64_t site_id, struct drill_rec *d,
                                                const char *by, struct field_err *err,
                                                const char **reason);

/* Inside the caller's write transaction: the operator's cancel of drill id (a running one
   switches back; *reason "drill_finished" on CONFLICT). d gets the record as stored after. */
enum engine_drill_rc engine_drill_cancel_locked(const struct engine_env *env, struct store_tx *tx,
                                                int64_t id, const char *by, struct drill_rec *d,
                                                const char **reason);

/* At start: re-evaluate every site's levels (one transaction per site), repairing a site left on
   a level with no enabled origin by an older controld. 0, or -1 when any failed (logged). */
int engine_reevaluate_all(const struct engine_env *env);

/* The operator's switch of site_id to level (reason manual; also the manual failback, which
   clears the failback notice). Switching to the current level changes nothing. */
enum engine_switch_rc engine_switch_manual(const struct engine_env *env, int64_t site_id,
                                           int level);

/* The same inside the caller's write transaction; on anything but ENGINE_SWITCH_OK the caller
   must roll back. */
enum engine_switch_rc engine_switch_manual_locked(const struct engine_env *env, struct store_tx *tx,
                                                  int64_t site_id, int level);

/* The same, for the operator named by (the token's name, carried as data.by of the
   level.switched event; NULL = none). *changed (may be NULL) is set to 1 when the level moved. */
enum engine_switch_rc engine_switch_manual_by_locked(const struct engine_env *env,
                                                     struct store_tx *tx, int64_t site_id,
                                                     int level, const char *by, int *changed);

/* ---- shadow health policies (docs/design.md, Shadow health policies) ---- */

/* One origin's shadow verdict of a round (controld's own probe under the shadow policy) beside
   its real verdict of the same round. */
struct engine_shadow_verdict {
  int64_t origin_id;
  enum health_verdict shadow, real;
  char error[256]; /* the shadow failure's evidence */
};

/* One site's shadow outcome of a round: its verdicts, or skipped (--probe-batch left its shadow
   probes out; n = 0). */
struct engine_shadow_round {
  int64_t site_id;
  int skipped;
  int n;
  const struct engine_shadow_verdict *v;
};

/* The shadow machines of site s (its shadow policy in s->shadow) for one round at now: so[i] is
   the shadow state of s->origins[i] (fresh ones from shadow_origin_init), ss the site's (since
   0: the first round, started on s's current level). Each origin's shadow verdict in v[0..nv)
   drives its machine with the shadow thresholds and is compared with its real one
   (shadow_origin_round); then the level rules of engine_outlook run on a copy of s carrying the
   shadow policy, the shadow origin states and the shadow level (never a manual pin). Returns 1
   with *sw filled (at, from_level, to_level, reason, why) and ss->current_level moved when the
   shadow policy would have switched, else 0; -1 when memory runs out. Pure. */
int engine_shadow_step(const struct site_rec *s, struct shadow_site *ss, struct shadow_origin *so,
                       const struct engine_shadow_verdict *v, int nv, int64_t now,
                       struct shadow_switch *sw);

/* In one transaction: each site's shadow round (engine_shadow_step) into its stored shadow
   state, or its skipped count. Acts on nothing: no publication, no switch, no incident, no
   event. Sites deleted or without a shadow policy meanwhile are passed over. 0 or -1 (nothing
   written). */
int engine_apply_shadow(const struct engine_env *env, int64_t now,
                        const struct engine_shadow_round *sites, int n);

/* The operator's switch back to an earlier level as a failback ramp (docs/design.md, Failback
   ramp; "ramp": true), inside the caller's write transaction: the ramp starts (the operator's
   name in failback.ramp_started's data.by) and completes like an automatic one. A ramp already
   running to that level changes nothing; one to another level is replaced. On anything but
   ENGINE_SWITCH_OK the caller must roll back. *changed (may be NULL) is set to 1 when a ramp
   started. */
enum engine_switch_rc engine_switch_ramp_by_locked(const struct engine_env *env,
                                                   struct store_tx *tx, int64_t site_id, int level,
                                                   const char *by, int *changed);

enum engine_incident_rc {
  ENGINE_INCIDENT_OK = 0,
  ENGINE_INCIDENT_NOT_FOUND = 1, /* no such incident */
  ENGINE_INCIDENT_RESOLVED = 2,  /* resolving one that is resolved already */
  ENGINE_INCIDENT_ERROR = -1,
};

/* Inside the caller's write transaction: an operator's note on incident id (text: NULL or "" =
   none) by the token named by, and with resolve, its resolution (docs/design.md#incidents: the
   incident.resolved event, resolved_by). On anything but ENGINE_INCIDENT_OK the caller rolls
   back. */
enum engine_incident_rc engine_incident_note_locked(const struct engine_env *env,
                                                    struct store_tx *tx, int64_t id, const char *by,
                                                    const char *text, int resolve);

/* Inside the caller's write transaction, before site_id's row is deleted: its active incident,
   if it has one, is resolved by the token named by with the note "site deleted" (the
   incident.resolved event goes out, so a pager's alert for it closes); else nothing. A deleted
   site's incident left active was never resolved nor pruned, and held its publications for good
   (docs/design.md#incidents). On anything but ENGINE_INCIDENT_OK the caller rolls back. */
enum engine_incident_rc engine_site_deleting_locked(const struct engine_env *env,
                                                    struct store_tx *tx, int64_t site_id,
                                                    const char *by);

#endif
