/* store_drills — the failover drills' SQL (docs/design.md#drills): the drill record, the site's
   running drill, the target level's figures per origin from the nodes' heartbeats and the nodes'
   apply times of the drill's switches. */
#ifndef CDNCA_STORE_DRILLS_H
#define CDNCA_STORE_DRILLS_H

#include <stdint.h>

#include "drill.h"
#include "store.h"

struct store_tx;

/* ---- inside the engine's or an API write's transaction ---- */

/* Insert d (d->id 0) and set d->id; 0 or -1. */
int store_drill_insert_locked(struct store_tx *tx, struct drill_rec *d);

/* Write every column of d (by d->id); 0 or -1. */
int store_drill_save_locked(struct store_tx *tx, const struct drill_rec *d);

/* One drill by id, on the writer: STORE_OK, STORE_NOT_FOUND or STORE_ERROR. */
enum store_rc store_drill_get_locked(struct store_tx *tx, int64_t id, struct drill_rec *out);

/* Set the site's running drill (0: none). 0 or -1. */
int store_drill_site_locked(struct store_tx *tx, int64_t site_id, int64_t drill_id);

/* Make drill_id the site's running drill if it has none: 1, 0 when another drill holds it (a
   concurrent start on another replica committed first: the row is re-read after its lock), or
   -1. */
int store_drill_site_claim_locked(struct store_tx *tx, int64_t site_id, int64_t drill_id);

/* ---- reads ---- */

/* One drill by id: STORE_OK, STORE_NOT_FOUND or STORE_ERROR. */
enum store_rc store_drill_get(struct store *st, int64_t id, struct drill_rec *out);

/* The drills of a site (every site when site_id is 0) with an id over after, oldest first, at
   most limit; *out malloc'd (caller frees). */
enum store_rc store_drill_list(struct store *st, int64_t site_id, int64_t after, int limit,
                               struct drill_rec **out, int *n);

/* The ids of the drills the engine decides on at now (running, or scheduled with start_at at or
   before now), at most max, into ids; the count or -1. */
int store_drill_due(struct store *st, int64_t now, int64_t *ids, int max);

/* The running drills' count (the status and the metrics); -1 on error. */
int store_drill_running_count(struct store *st);

/* Delete the drills finished before before_ms (wall ms) with their drill_origins and
   drill_applied rows, 100 a transaction (docs/design.md#drills, retention); the count or -1. */
int64_t store_drill_prune(struct store *st, int64_t before_ms);

/* A drill's figures of one origin of its target level. */
struct drill_origin {
  int64_t origin_id;
  char address[256];
  int64_t requests, failures, latency_sum_ms, latency_count;
};

/* The per-origin figures of drill id; *out malloc'd (caller frees). */
enum store_rc store_drill_origins(struct store *st, int64_t id, struct drill_origin **out, int *n);

/* The nodes' apply times of a drill's switches: store_applied_rows (store_applied.h). */

/* ---- from the node protocol ---- */

/* Inside an API write's transaction: the scheduled (not yet started) drills of site_id, or -1.
   Locks the site's row first, so concurrent creates for one site count one after the other. */
int store_drill_scheduled_count_locked(struct store_tx *tx, int64_t site_id);

/* Inside a heartbeat's transaction, for a site with a running drill: add the growth of an
   origin's counters (requests, failures, latency sum and count since the node's last report) to
   the drill when the origin is on its target level; each delta is clamped to [0, DRILL_SUM_MAX]
   and every sum saturates at DRILL_SUM_MAX. 0 or -1. */
int store_drill_observe_locked(struct store_tx *tx, int64_t site_id, int64_t origin_id,
                               int64_t requests, int64_t failures, int64_t latency_sum_ms,
                               int64_t latency_count);

/* 1 when a drill's switches may still be applied at now (a drill running or just finished), 0
   when none, -1 on error. */
int store_drill_any_recent(struct store *st, int64_t now);

/* Inside the propagation batch's transaction: node_id held publication seq first at `at`; every
   drill switch of a live or just finished drill at or below seq gets that time. 0 or -1. */
int store_drill_applied_locked(struct store_tx *tx, int64_t node_id, int64_t seq, int64_t at);

#endif
