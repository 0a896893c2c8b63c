/* store_incidents — the incidents' SQL (docs/design.md#incidents): the record, its timeline, the
   origins that failed during it, the nodes' propagation of its switches and the visitor impact
   the nodes' heartbeats reported while it was active. */
#ifndef CDNCA_STORE_INCIDENTS_H
#define CDNCA_STORE_INCIDENTS_H

#include <stdint.h>

#include "incident.h"
#include "store.h"

/* ---- inside the engine's or an API write's transaction ---- */

/* Every active (open or mitigated) incident, by site id; *out malloc'd (caller frees). */
enum store_rc store_incident_active_locked(struct store_tx *tx, struct incident_rec **out, int *n);

/* The site's latest incident (the active one, else the last resolved): STORE_OK, STORE_NOT_FOUND
   or STORE_ERROR. */
enum store_rc store_incident_latest_locked(struct store_tx *tx, int64_t site_id,
                                           struct incident_rec *out);

/* One incident by id, on the writer. */
enum store_rc store_incident_get_locked(struct store_tx *tx, int64_t id, struct incident_rec *out);

/* Insert r (r->id 0) and set r->id; 0 or -1. */
int store_incident_insert_locked(struct store_tx *tx, struct incident_rec *r);

/* Write every column of r (by r->id); 0 or -1. */
int store_incident_save_locked(struct store_tx *tx, const struct incident_rec *r);

/* Append a timeline entry to r at `at` (data: JSON text, NULL = {}): stored while r has fewer
   than INCIDENT_MAX_ENTRIES, else counted in r->dropped. r->entries / r->dropped move in memory:
   the caller saves r. 0 or -1. */
int store_incident_entry_locked(struct store_tx *tx, struct incident_rec *r, const char *kind,
                                int64_t event_id, const char *type, const char *title,
                                const char *data, int64_t at);

/* Record that origin_id (on level) failed at `at` during incident_id (the first time counts). */
int store_incident_failed_locked(struct store_tx *tx, int64_t incident_id, int64_t origin_id,
                                 int level, int64_t at);

/* The origins that failed during incident_id into ids[0..cap); their count (at most cap) or -1. */
int store_incident_failed_ids_locked(struct store_tx *tx, int64_t incident_id, int64_t *ids,
                                     int cap);

/* The time of the first failed verdict of origin_id's current failure streak (its verdicts after
   its last success), or 0 when none is stored. */
int64_t store_incident_streak_start_locked(struct store_tx *tx, int64_t origin_id);

/* ---- from the node protocol (their own transactions, unordered) ---- */

/* A node asked for the config holding publication seq, first at `at`. */
struct incident_ask {
  int64_t node_id, seq, at;
};

/* For each ask a[0..n): every switch publication of an active incident at or below its seq gets
   the node's first time. 0 or -1. */
int store_incident_applied_batch(struct store *st, const struct incident_ask *a, int n);

/* Inside a heartbeat's transaction: the active incidents' ids and sites (by site), *n of each,
   malloc'd (caller frees both); the count or -1. */
int store_incident_sites_active_locked(struct store_tx *tx, int64_t **ids, int64_t **sites);

/* Inside a heartbeat's transaction, before the node's observation of origin_id is overwritten:
   add the growth of its counters since its last report to incident_id's impact (a failure in it
   marks now as a visitor failure). 0 or -1. */
int store_incident_observe_locked(struct store_tx *tx, int64_t incident_id, int64_t node_id,
                                  int64_t origin_id, int64_t requests, int64_t failures,
                                  int64_t backup_picks, int64_t fail_open, int64_t now);

/* ---- reads for the API ---- */

/* Incidents with id < before (0 = from the newest), newest first, of site_id (0 = all), in state
   (a state's word, "active" = open or mitigated, "" = any), at most limit. */
enum store_rc store_incident_list(struct store *st, int64_t site_id, const char *state,
                                  int64_t before, int limit, struct incident_rec **out, int *n);

/* One incident by id (STORE_NOT_FOUND when none). */
enum store_rc store_incident_get(struct store *st, int64_t id, struct incident_rec *out);

/* Its timeline, oldest first; *out malloc'd, free with store_incident_entries_free. */
enum store_rc store_incident_entries(struct store *st, int64_t id, struct incident_entry **out,
                                     int *n);
void store_incident_entries_free(struct incident_entry *e, int n);

/* Every propagation row of an incident: store_applied_rows (store_applied.h). */

/* The switch publications (seq, time, reason) of an incident's site between from and to (0 =
   now); *out malloc'd. */
enum store_rc store_incident_pubs(struct store *st, const struct incident_rec *r,
                                  struct incident_pub **out, int *n);

/* Incident id's impact rows (node, origin), in node order: the first STORE_IMPACT_ROWS_MAX. */
#define STORE_IMPACT_ROWS_MAX 10000
enum store_rc store_incident_impact(struct store *st, int64_t id, struct incident_impact **out,
                                    int *n);

/* Incident id's impact summed over all its rows (a fleet of 1,000 nodes in front of a site of
   10 origins has more than STORE_IMPACT_ROWS_MAX). STORE_OK or STORE_ERROR. */
enum store_rc store_incident_impact_totals(struct store *st, int64_t id,
                                           struct incident_totals *out);

/* Nodes seen at or after since (wall ms): the online nodes a propagation is measured against. */
int store_incident_nodes_seen_since(struct store *st, int64_t since);

/* Webhook deliveries of the events on incident id's timeline. */
enum store_rc store_incident_deliveries(struct store *st, int64_t id,
                                        struct incident_delivery **out, int *n);

/* Delete incidents resolved before before_ms with everything of theirs (its own transactions, in
   batches; an engine write). Incidents deleted, or -1. */
int64_t store_incident_prune(struct store *st, int64_t before_ms);

/* The number of active incidents (for /metrics); -1 on error. */
int64_t store_incident_open_count(struct store *st);

#endif
