/* store_fleet — the fleet view's SQL: per-site state flags, summary counts, filtered site pages,
   and cheap per-site / per-origin rows for metrics (all indexed; no status rendering). */
#ifndef CDNCA_STORE_FLEET_H
#define CDNCA_STORE_FLEET_H

#include <stdint.h>

#include "fleet_state.h"
#include "store.h"

/* GET /v1/summary: sites = on_primary + on_backup; the other site counts are flags counted
   across both (fleet_state.h). Nodes online were seen at or after the cut-off; lagging ones are
   online with a config seq below the last publication. */
struct fleet_summary {
  int64_t sites, on_primary, on_backup, all_down, failback_available, paused;
  int64_t nodes_online, nodes_lagging;
};

/* One site as the metrics see it; name is valid only during the callback. */
struct fleet_site_row {
  int64_t id;
  const char *name;
  int current_level;
  unsigned state; /* FLEET_* flags */
};

/* One origin as the metrics see it; health ("unknown" | "healthy" | "unhealthy") is valid only
   during the callback. */
struct fleet_origin_row {
  int64_t site_id, origin_id;
  int level, enabled;
  const char *health;
};

/* Inside a write transaction (store_core.h / store_health_begin): store site_id's FLEET_* flags;
   a row whose flags are already these is not rewritten. 0 or -1. */
int store_fleet_set_locked(struct store_tx *tx, int64_t site_id, unsigned flags);

/* Fill *out (one read snapshot): site counts from the state columns' partial indexes, nodes
   online since online_since and lagging. 0 or -1 (logged). */
int store_fleet_summary(struct store *st, int64_t online_since, struct fleet_summary *out);

/* Sites with id > after, in state (one FLEET_* flag, 0 = any) and whose name or a hostname
   contains q (NULL or "" = any; ASCII case-insensitive), ascending by id, at most limit. *out is
   malloc'd: the caller site_rec_fini's each of the *n records and frees the array. */
enum store_rc store_fleet_site_list(struct store *st, unsigned state, const char *q, int64_t after,
                                    int limit, struct site_rec **out, int *n);

/* The same filters in the order of the last change: newest updated_at first (id breaks ties),
   continuing after site `after` (0 = from the newest; a site no longer there ends the walk). */
enum store_rc store_fleet_site_list_changed(struct store *st, unsigned state, const char *q,
                                            int64_t after, int limit, struct site_rec **out,
                                            int *n);

/* Call fn for each of the first max sites by id, in id order, from one read snapshot; fn returns
   0 to go on, anything else stops the walk. 0, or -1 on a storage error (logged). */
int store_fleet_each_site(struct store *st, int max,
                          int (*fn)(void *arg, const struct fleet_site_row *row), void *arg);

/* Call fn for each origin of the first max sites by id, ordered by site, level, id (same rules
   as store_fleet_each_site). 0 or -1. */
int store_fleet_each_origin(struct store *st, int max,
                            int (*fn)(void *arg, const struct fleet_origin_row *row), void *arg);

#endif
