/* store_health — the health engine's SQL: due sites, round evidence, origin health, levels, status
 * reads. */
#ifndef CDNCA_STORE_HEALTH_H
#define CDNCA_STORE_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Verdict rows kept per origin; older ones are pruned when a round writes a new one. */
#define STORE_HEALTH_VERDICTS_KEEP 100
/* ... and none older than a day (with long probe intervals the count alone keeps weeks: the
   evidence is for recent decisions, the events keep the history). */
#define STORE_HEALTH_VERDICTS_MAX_AGE_MS (24LL * 3600 * 1000)
/* Probe round rows kept (the newest ones). */
#define STORE_HEALTH_ROUNDS_KEEP 1000

/* One stored verdict (GET .../verdicts). */
struct verdict_rec {
  int64_t id, round_id, round_at;
  char source[16];      /* "" when no source reached a verdict */
  char verdict[12];     /* "" | success | failure */
  char state_after[12]; /* unknown | healthy | unhealthy */
  char *votes;          /* JSON array text, owned */
};

/* Per-origin sums of the nodes' visitor-traffic observations. */
struct origin_obs {
  int64_t origin_id, requests, failures;
};

/* ---- reads (the calling thread's reader connection) ---- */

/* Ids of sites due for probing: health checks active (enabled, >= 2 enabled origins) and
   next_probe_at NULL or <= due_before, never probed first, then probed longest ago, at most
   limit. *ids is malloc'd (caller frees), *n entries. */
enum store_rc store_health_due_sites(struct store *st, int64_t due_before, int limit, int64_t **ids,
                                     int *n);

/* Id the next probe round can use: one above the highest recorded (1 when none); -1 on error. */
/* Among the sites whose checks are active (enabled, two enabled origins) and that have their own
   interval_ms: the earliest next_probe_at (wall ms; never probed = 0, due now) and the smallest
   interval. 1 with both set, 0 when there is no such site, -1 on error. */
int store_health_own_interval_due(struct store *st, int64_t *due_at, int64_t *min_interval);

int64_t store_health_next_round_id(struct store *st);

/* The ids of the nodes seen at or after seen_since, by id, into *ids (malloc'd, caller frees;
   at most STORE_MAX_NODES), *n of them. 0 or -1. */
int store_health_online_nodes(struct store *st, int64_t seen_since, int64_t **ids, int *n);

/* For the status card: nodes online (seen at or after seen_since), how many of those applied a
   config seq >= the site's latest publication, and that publication's seq (*seq, 0 = none).
   0 or -1. */
int store_health_propagation(struct store *st, int64_t site_id, int64_t seen_since, int *online,
                             int *on_current, int64_t *seq);

/* Observation sums for every origin of a site that has any; *out malloc'd (caller frees). */
enum store_rc store_health_observations(struct store *st, int64_t site_id, struct origin_obs **out,
                                        int *n);

/* The newest limit verdicts of an origin, newest first; *out malloc'd (caller frees with
   store_health_verdicts_free). */
enum store_rc store_health_verdicts(struct store *st, int64_t origin_id, int limit,
                                    struct verdict_rec **out, int *n);

/* The two status-card reads above on the writer, inside a store_op (see the uncommitted change). */
int store_health_propagation_locked(struct store_tx *tx, int64_t site_id, int64_t seen_since,
                                    int *online, int *on_current, int64_t *seq);
enum store_rc store_health_observations_locked(struct store_tx *tx, int64_t site_id,
                                               struct origin_obs **out, int *n);

/* Free a list from store_health_verdicts. */
void store_health_verdicts_free(struct verdict_rec *arr, int n);

/* ---- writes: only between store_health_begin and store_health_commit/rollback ---- */

/* Open the engine's write transaction (takes the writer lock; in cluster mode the lease's fencing
   check comes first, store_lease.h); the open transaction, or NULL (also when fenced). */
struct store_tx *store_health_begin(struct store *st);

/* Commit and release (publication/event hooks run after); 0 or -1 (rolled back). */
int store_health_commit(struct store_tx *tx);

/* Roll back and release. */
void store_health_rollback(struct store_tx *tx);

/* Load a site with hostnames and origins on the writer (caller site_rec_fini's it). */
enum store_rc store_health_site_load_locked(struct store_tx *tx, int64_t site_id,
                                            struct site_rec *out);

/* Load the n distinct sites ids[0..n) on the writer into out[0..n), in that order, with a few
   statements in all; a site not there leaves out[i].id == 0 (caller site_rec_fini's each). */
enum store_rc store_health_sites_load_locked(struct store_tx *tx, const int64_t *ids, int n,
                                             struct site_rec *out);

/* Store an origin's health fields (health, streaks, changed/healthy since, last verdict, source,
   votes, checked at, error) from o. 0 or -1. */
int store_health_origin_save_locked(struct store_tx *tx, const struct origin_rec *o);

/* Store the health fields of os[0..n) (distinct origins) as store_health_origin_save_locked does
   for each: on PostgreSQL in one set-based statement (arrays), on SQLite row by row. 0 or -1. */
int store_health_origins_save_locked(struct store_tx *tx, const struct origin_rec *const *os,
                                     int n);

/* A site's writes at the end of its part of a round: probe times and fleet flags. */
struct site_round_row {
  int64_t site_id, probed_at, next_probe_at;
  unsigned fleet; /* FLEET_* flags (fleet_state.h) */
};

/* For each row: store_health_site_probed_locked and store_fleet_set_locked, on PostgreSQL in
   one set-based statement, on SQLite row by row (sites distinct). 0 or -1. */
int store_health_sites_round_locked(struct store_tx *tx, const struct site_round_row *rows, int n);

/* One verdict row for store_health_verdicts_add_locked (the strings are the caller's). */
struct verdict_row {
  int64_t round_id, site_id, origin_id, round_at;
  const char *source;     /* NULL or "" = none */
  const char *verdict;    /* NULL or "" = none */
  char state_after[12];   /* the origin's health after the verdict */
  const char *votes_json; /* NULL = "[]" */
};

/* Add rows[0..n) and prune each of their origins as store_health_verdict_add_locked does (the
   cutoff age from the earliest round_at among them): on PostgreSQL with two set-based statements
   (arrays) for all of them, on SQLite with two statements per 16 rows instead of two per row.
   0 or -1. */
int store_health_verdicts_add_locked(struct store_tx *tx, const struct verdict_row *rows, int n);

/* Add one verdict row (source/verdict NULL or "" = none; votes_json NULL = "[]") and prune the
   origin's rows beyond STORE_HEALTH_VERDICTS_KEEP or older than STORE_HEALTH_VERDICTS_MAX_AGE_MS
   before round_at. 0 or -1. */
int store_health_verdict_add_locked(struct store_tx *tx, int64_t round_id, int64_t site_id,
                                    int64_t origin_id, int64_t round_at, const char *source,
                                    const char *verdict, const char *state_after,
                                    const char *votes_json);

/* Record a finished probe round and prune old round rows. 0 or -1. */
int store_health_round_add_locked(struct store_tx *tx, int64_t round_id, int64_t started_at,
                                  int64_t finished_at, int sites, int origins);

/* Set a site's last_probed_at and next_probe_at. 0 or -1. */
int store_health_site_probed_locked(struct store_tx *tx, int64_t site_id, int64_t probed_at,
                                    int64_t next_probe_at);

/* Set a site's incident flags (all_unhealthy; failback_notified = level notified, 0 = none). */
int store_health_site_flags_locked(struct store_tx *tx, int64_t site_id, int all_unhealthy,
                                   int failback_notified);

/* Switch a site's current level and republish it (reason recorded with the publication).
   Returns 0 or -1. */
int store_health_site_level_locked(struct store_tx *tx, int64_t site_id, int level,
                                   const char *reason, int manual_pin);

/* docs/design.md, Failback ramp: set a site's running ramp (r NULL or from_level 0: none) and
   its hold time, start a new window (the counters at 0), and republish it (reason recorded with
   the publication) when reason is not NULL. 0 or -1. */
int store_health_site_ramp_locked(struct store_tx *tx, int64_t site_id, const struct ramp_run *r,
                                  int64_t hold_until, const char *reason);

/* Start a new window of a site's running ramp: its counters back to 0. 0 or -1. */
int store_health_ramp_window_locked(struct store_tx *tx, int64_t site_id);

/* 1 when every enabled origin of level of site_id is reported skipped by a node in a heartbeat
   at or after since, 0 when not (or the level has none), -1 on error. */
int store_health_level_skipped_locked(struct store_tx *tx, int64_t site_id, int level,
                                      int64_t since);

/* The ids of the sites with a running ramp, ascending, at most max into ids: the count, or -1. */
int store_health_ramp_sites(struct store *st, int64_t *ids, int max);

#endif
