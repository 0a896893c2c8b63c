/* store_node — the node protocol's SQL: presence, heartbeats, observations, config snapshots. */
#ifndef CDNCA_STORE_NODE_H
#define CDNCA_STORE_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"
#include "store.h"

/* What a node holding `since` needs, read in one read transaction. */
struct config_snapshot {
  int64_t seq; /* highest publication seq in the snapshot (0 = none yet) */
  int full;    /* 1: sites is the whole set and deleted is empty */
  int n_sites;
  struct site_rec *sites; /* owned, ordered by id */
  int n_deleted;
  int64_t *deleted; /* owned: ids of sites deleted since `since` (delta only) */
};

/* Write last_seen_at for n nodes in one transaction (ids of deleted nodes are ignored). 0 or -1. */
int store_node_seen_batch(struct store *st, const int64_t *ids, const int64_t *seen_ms, int n);

/* Record a heartbeat: version, config_seq (the publication seq the node applied), last_seen_at =
   now, and upsert its observations. STORE_NOT_FOUND when the node no longer exists. */
enum store_rc store_node_heartbeat(struct store *st, int64_t node_id, const char *version,
                                   int64_t config_seq, int64_t now, const struct node_obs *obs,
                                   int n_obs);

/* Fill *out for a node holding `since`: the full set when since is 0, ahead of the database
   (reset) or older than the kept history, else the sites published after since plus the ids of
   those deleted. out->seq == since (and nothing else) when nothing is newer. Caller frees with
   store_config_snapshot_free (also after an error). */
enum store_rc store_config_snapshot(struct store *st, int64_t since, struct config_snapshot *out);

/* Free what a snapshot owns. */
void store_config_snapshot_free(struct config_snapshot *s);

/* ---- nodes: the records behind /v1/nodes ---- */

/* At most this many nodes exist (docs/design.md#errors-and-limits): an enrolment key without a
   use limit cannot grow the fleet, its heartbeats and GET /v1/nodes without bound. */
#define STORE_MAX_NODES 10000

/* Create a node and its token hash; sets n->id. STORE_CONFLICT when the name is taken,
   STORE_LIMIT when STORE_MAX_NODES exist. */
enum store_rc store_node_create(struct store *st, struct node_rec *n, const char *token_hash);

/* All nodes ordered by id; *out malloc'd (caller frees). */
enum store_rc store_node_list(struct store *st, struct node_rec **out, int *n);

/* Delete a node and its token (revocation is immediate: the token cache is cleared when the
   transaction commits, and a lookup racing the delete cannot re-cache the token). */
enum store_rc store_node_delete(struct store *st, int64_t id);

/* The same, inside a store_op. */
enum store_rc store_node_create_locked(struct store_tx *tx, struct node_rec *n,
                                       const char *token_hash);
enum store_rc store_node_delete_locked(struct store_tx *tx, int64_t id);

#endif
