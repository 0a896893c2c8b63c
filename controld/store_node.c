/* store_node — presence, heartbeats, observations and config snapshots for the node protocol. */
#include "store_node.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "sigmsg.h"
#include "store_core.h"
#include "store_drills.h"
#include "store_incidents.h"
#include "store_pub.h"
#include "store_signal.h"
#include "store_sites.h"
#include "store_tokens.h"

int store_node_seen_batch(struct store *st, const int64_t *ids, const int64_t *seen_ms, int n) {
  static const char upd[] =
      "UPDATE nodes SET last_seen_at = CASE WHEN COALESCE(last_seen_at, 0) > ?1 THEN last_seen_at "
      "ELSE ?1 END WHERE id = ?2";
  int rc = -1;
  if (n <= 0) return 0;
  struct store_tx *tx = store_tx_begin_unordered(st);
  if (!tx) return -1;
  for (int i = 0; i < n; i++) {
    struct db_stmt *q = db_prep(st->w, upd);
    if (!q) goto out;
    db_bind_i64(q, 1, seen_ms[i]);
    db_bind_i64(q, 2, ids[i]);
    if (store_step_done(st->w, q, "marking node seen") < 0) goto out;
  }
  rc = 0;
out:
  if (rc == 0) return store_tx_commit(tx);
  store_tx_rollback(tx);
  return -1;
}

/* docs/design.md, Failback ramp and Drills: inside a heartbeat's transaction, before the node's
   observations are overwritten, add the growth of each counter of an origin on a running ramp's
   level to its site's window, and on a running drill's level to the drill (its window, its
   totals and its per-origin figures with the latency). 0 or -1. */
static int window_observe(struct store_tx *tx, int64_t node_id, const struct node_obs *obs,
                          int n_obs) {
  struct store *st = store_tx_store(tx);
  static const char sites_q[] =
      "SELECT id FROM sites WHERE ramp_to_level IS NOT NULL OR drill_id IS NOT NULL ORDER BY id";
  static const char old_q[] = "SELECT requests, failures, latency_sum_ms, latency_count FROM "
                              "node_observations WHERE node_id = ? AND origin_id = ?";
  /* the window's sums saturate as a drill's do (DRILL_SUM_MAX, ?6): an enrolled node's counters
     are bounded, but several heartbeats' deltas in one window are not */
  static const char add_q[] =
      "UPDATE sites SET "
      "ramp_requests = CASE WHEN ramp_requests + ?1 > ?6 THEN ?6 ELSE ramp_requests + ?1 END, "
      "ramp_failures = CASE WHEN ramp_failures + ?2 > ?6 THEN ?6 ELSE ramp_failures + ?2 END "
      "WHERE id = ?3 AND ramp_to_level = (SELECT level FROM origins WHERE id = ?4 AND "
      "site_id = ?5)";
  /* every site with a window open, however many (by id, looked up by bisection) */
  int64_t *ramping = NULL;
  int nr = 0, rc, ret = -1;
  struct db_stmt *q = db_prep(st->w, sites_q);
  if (!q ||
      store_ids_read(st->w, q, 0, &ramping, &nr, "reading the sites with a window") != STORE_OK)
    return -1;
  for (int i = 0; i < n_obs && nr > 0; i++) {
    int64_t req = obs[i].requests, fail = obs[i].failures, lsum = obs[i].latency_sum_ms,
            lcnt = obs[i].latency_count;
    if (!bsearch(&obs[i].site_id, ramping, (size_t)nr, sizeof *ramping, store_id_cmp)) continue;
    if (!(q = db_prep(st->w, old_q))) goto out;
    db_bind_i64(q, 1, node_id);
    db_bind_i64(q, 2, obs[i].origin_id);
    if ((rc = db_step(q)) == DB_ROW) {
      int64_t oreq = db_col_i64(q, 0), ofail = db_col_i64(q, 1), olsum = db_col_i64(q, 2),
              olcnt = db_col_i64(q, 3);
      /* counters since the node's entry was made: smaller ones started again */
      if (req >= oreq && fail >= ofail) {
        req -= oreq;
        fail -= ofail;
      }
      if (lsum >= olsum && lcnt >= olcnt) {
        lsum -= olsum;
        lcnt -= olcnt;
      }
    }
    db_reset(q);
    if (rc == DB_ERR) goto out;
    req = drill_sum_clamp(req);
    fail = drill_sum_clamp(fail);
    if ((req > 0 || fail > 0) &&
        store_exec(st->w, "counting a ramp's requests", add_q, "IIIIII", req, fail, obs[i].site_id,
                   obs[i].origin_id, obs[i].site_id, (int64_t)DRILL_SUM_MAX) < 0)
      goto out;
    if (store_drill_observe_locked(tx, obs[i].site_id, obs[i].origin_id, req, fail, lsum, lcnt) < 0)
      goto out;
  }
  ret = 0;
out:
  free(ramping);
  return ret;
}

enum store_rc store_node_heartbeat(struct store *st, int64_t node_id, const char *version,
                                   int64_t config_seq, int64_t now, const struct node_obs *obs,
                                   int n_obs) {
  static const char upd[] =
      "UPDATE nodes SET version = ?1, config_seq = ?2, last_seen_at = CASE WHEN "
      "COALESCE(last_seen_at, 0) > ?3 THEN last_seen_at ELSE ?3 END WHERE id = ?4";
  /* only for an origin of that site: a node token cannot grow the table beyond one row per
     origin, nor with ids that do not exist. A disabled one keeps its row: until the node has
     applied the config without it, its visitors still reach it, and the incident's and the
     windows' deltas are taken against this row (without one, every report counted whole) */
  static const char ups[] =
      "INSERT INTO node_observations (node_id, site_id, origin_id, requests, failures, skipped, "
      "updated_at, backup_picks, fail_open, latency_sum_ms, latency_count) SELECT "
      "CAST(?1 AS BIGINT), CAST(?2 AS BIGINT), "
      "CAST(?3 AS BIGINT), CAST(?4 AS BIGINT), CAST(?5 AS BIGINT), CAST(?6 AS BIGINT), "
      "CAST(?7 AS BIGINT), CAST(?8 AS BIGINT), CAST(?9 AS BIGINT), CAST(?10 AS BIGINT), "
      "CAST(?11 AS BIGINT) WHERE EXISTS "
      "(SELECT 1 FROM origins WHERE id = ?3 AND site_id = ?2) "
      "ON CONFLICT (node_id, origin_id) DO UPDATE SET "
      "site_id = excluded.site_id, requests = excluded.requests, failures = excluded.failures, "
      "skipped = excluded.skipped, updated_at = excluded.updated_at, "
      "backup_picks = excluded.backup_picks, fail_open = excluded.fail_open, "
      "latency_sum_ms = excluded.latency_sum_ms, latency_count = excluded.latency_count";
  struct db_stmt *q;
  enum store_rc rc = STORE_ERROR;
  struct store_tx *tx = store_tx_begin_unordered(st);
  if (!tx) return STORE_ERROR;
  q = db_prep(st->w, upd);
  if (!q) goto fail;
  db_bind_text(q, 1, version);
  db_bind_i64(q, 2, config_seq);
  db_bind_i64(q, 3, now);
  db_bind_i64(q, 4, node_id);
  if (store_step_done(st->w, q, "recording heartbeat") < 0) goto fail;
  if (db_changes(st->w) == 0) {
    rc = STORE_NOT_FOUND;
    goto fail;
  }
  if (n_obs > 0) {
    /* visitor impact: the reports of sites with an active incident count towards it */
    int64_t *inc = NULL, *sites = NULL;
    int ni = store_incident_sites_active_locked(tx, &inc, &sites), bad = ni < 0;
    for (int i = 0; i < n_obs && ni > 0 && !bad; i++)
      for (int k = 0; k < ni; k++)
        if (sites[k] == obs[i].site_id &&
            store_incident_observe_locked(tx, inc[k], node_id, obs[i].origin_id, obs[i].requests,
                                          obs[i].failures, obs[i].backup_picks, obs[i].fail_open,
                                          now) < 0)
          bad = 1;
    free(inc);
    free(sites);
    if (bad) goto fail;
  }
  if (n_obs > 0 && window_observe(tx, node_id, obs, n_obs) < 0) goto fail;
  for (int i = 0; i < n_obs; i++) {
    q = db_prep(st->w, ups);
    if (!q) goto fail;
    db_bind_i64(q, 1, node_id);
    db_bind_i64(q, 2, obs[i].site_id);
    db_bind_i64(q, 3, obs[i].origin_id);
    db_bind_i64(q, 4, obs[i].requests);
    db_bind_i64(q, 5, obs[i].failures);
    db_bind_int(q, 6, obs[i].skipped ? 1 : 0);
    db_bind_i64(q, 7, now);
    db_bind_i64(q, 8, obs[i].backup_picks);
    db_bind_i64(q, 9, obs[i].fail_open);
    db_bind_i64(q, 10, obs[i].latency_sum_ms);
    db_bind_i64(q, 11, obs[i].latency_count);
    if (store_step_done(st->w, q, "storing observation") < 0) goto fail;
  }
  if (store_tx_commit(tx) < 0) return STORE_ERROR;
  return STORE_OK;
fail:
  store_tx_rollback(tx);
  return rc;
}

/* Append id to a growable id array. 0 or -1. */
static int ids_push(int64_t **arr, int *n, int *cap, int64_t id) {
  if (*n == *cap) {
    int ncap = *cap ? *cap * 2 : 64;
    int64_t *na = realloc(*arr, (size_t)ncap * sizeof *na);
    if (!na) return -1;
    *arr = na;
    *cap = ncap;
  }
  (*arr)[(*n)++] = id;
  return 0;
}

/* Run a query with one optional int64 parameter and collect column 0 of every row. */
static int collect_ids(struct db_conn *c, const char *sql, int64_t param, int bind, int64_t **ids,
                       int *n) {
  struct db_stmt *s = db_prep(c, sql);
  int rc, cap = 0;
  *ids = NULL;
  *n = 0;
  if (!s) return -1;
  if (bind) db_bind_i64(s, 1, param);
  while ((rc = db_step(s)) == DB_ROW)
    if (ids_push(ids, n, &cap, db_col_i64(s, 0)) < 0) {
      rc = DB_ERR;
      break;
    }
  db_reset(s);
  if (rc != DB_DONE) {
    log_error("listing ids for node config: %s", db_errmsg(c));
    free(*ids);
    *ids = NULL;
    *n = 0;
    return -1;
  }
  return 0;
}

enum store_rc store_config_snapshot(struct store *st, int64_t since, struct config_snapshot *out) {
  static const char bounds[] =
      "SELECT COALESCE(MAX(seq), 0), COALESCE(MIN(seq), 0) FROM publications";
  static const char all_ids[] = "SELECT id FROM sites ORDER BY id";
  static const char changed[] =
      "SELECT DISTINCT site_id FROM publications WHERE seq > ? ORDER BY site_id";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s;
  int64_t max_seq = 0, min_seq = 0, *ids = NULL;
  int n_ids = 0, cap_del = 0;
  enum store_rc rc = STORE_ERROR;

  memset(out, 0, sizeof *out);
  if (!c || store_read_begin(c) < 0) return STORE_ERROR;
  s = db_prep(c, bounds);
  if (!s) goto out;
  if (db_step(s) == DB_ROW) {
    max_seq = db_col_i64(s, 0);
    min_seq = db_col_i64(s, 1);
  }
  db_reset(s);
  out->seq = max_seq;
  if (since == max_seq) {
    rc = STORE_OK;
    goto out;
  }
  /* a delta needs every publication after since: since must lie within the kept history, and
     within PUB_DELTA_MAX of the newest, as read here (a deleted site's last publication further
     behind may be pruned: store_pub_prune; the newest seq only grows, so a prune's cut-off is
     never past this one) */
  out->full =
      since <= 0 || since > max_seq || since < min_seq - 1 || since < max_seq - PUB_DELTA_MAX;
  if (collect_ids(c, out->full ? all_ids : changed, since, !out->full, &ids, &n_ids) < 0) goto out;
  out->sites = calloc((size_t)(n_ids ? n_ids : 1), sizeof *out->sites);
  if (!out->sites) goto out;
  if (store_sites_load(c, ids, n_ids, out->sites) != STORE_OK) goto out;
  for (int i = 0; i < n_ids; i++) { /* compact: the sites not there were deleted */
    if (out->sites[i].id != 0) {
      if (out->n_sites != i) {
        out->sites[out->n_sites] = out->sites[i];
        memset(&out->sites[i], 0, sizeof out->sites[i]);
      }
      out->n_sites++;
    } else if (!out->full && ids_push(&out->deleted, &out->n_deleted, &cap_del, ids[i]) < 0) {
      for (int j = i + 1; j < n_ids; j++)
        site_rec_fini(&out->sites[j]);
      goto out;
    }
  }
  rc = STORE_OK;
out:
  free(ids);
  store_read_end(c);
  return rc;
}

void store_config_snapshot_free(struct config_snapshot *s) {
  for (int i = 0; i < s->n_sites; i++)
    site_rec_fini(&s->sites[i]);
  free(s->sites);
  free(s->deleted);
  memset(s, 0, sizeof *s);
}

/* ---- nodes: the records behind /v1/nodes ---- */

enum store_rc store_node_create_locked(struct store_tx *tx, struct node_rec *n,
                                       const char *token_hash) {
  struct store *st = store_tx_store(tx);
  /* the next id after any ever given out (schema 0018): a deleted node's history keeps its id,
     and a new node must not take it over; the ids of rows made some other way count too */
  static const char ins[] =
      "INSERT INTO nodes (id, name, created_at) SELECT CASE WHEN m.node_id_max > n.mx THEN "
      "m.node_id_max ELSE n.mx END + 1, ?, ? FROM cdnca_meta m, "
      "(SELECT COALESCE(MAX(id), 0) AS mx FROM nodes) n WHERE m.id = 1 RETURNING id";
  /* PostgreSQL: the identity sequence counts too, both ways. A replica of a release before
     schema 18, still running in a rolling upgrade (docs/cluster.md), takes its ids from the
     sequence: the next id is past the sequence's, and the sequence is moved past it. */
  static const char ins_pg[] =
      "INSERT INTO nodes (id, name, created_at) SELECT GREATEST(m.node_id_max, n.mx, "
      "COALESCE(pg_sequence_last_value(pg_get_serial_sequence('nodes', 'id')::regclass), 0)) "
      "+ 1, ?, ? FROM cdnca_meta m, (SELECT COALESCE(MAX(id), 0) AS mx FROM nodes) n WHERE "
      "m.id = 1 RETURNING id";
  static const char seq_pg[] =
      "SELECT setval(pg_get_serial_sequence('nodes', 'id'), GREATEST(?, "
      "COALESCE(pg_sequence_last_value(pg_get_serial_sequence('nodes', 'id')::regclass), 0)))";
  static const char bump[] = "UPDATE cdnca_meta SET node_id_max = ? WHERE id = 1";
  int pg = db_kind(st->w) == DB_PG;
  static const char tok[] =
      "INSERT INTO tokens (kind, hash, node_id, created_at) VALUES ('node', ?, ?, ?)";
  struct db_stmt *q;
  char conflict[8];
  int64_t now = clock_wall_ms();
  enum store_rc rc =
      store_room_locked(tx, "SELECT COUNT(*) FROM nodes", STORE_MAX_NODES, "counting nodes", "");
  if (rc != STORE_OK) return rc;
  if (!(q = db_prep(st->w, pg ? ins_pg : ins))) return STORE_ERROR;
  store_bind(q, 1, "tI", n->name, now);
  rc = store_step_unique(st->w, q, 1, "name", conflict, sizeof conflict, "inserting a node");
  if (rc != STORE_OK) return rc; /* STORE_CONFLICT: the name is taken */
  n->id = db_col_i64(q, 0);
  db_reset(q);
  n->created_at = now;
  if ((pg && store_exec(st->w, "numbering nodes", seq_pg, "I", n->id) < 0) ||
      store_exec(st->w, "numbering nodes", bump, "I", n->id) < 0 ||
      store_exec(st->w, "inserting node token", tok, "tII", token_hash, n->id, now) < 0)
    return STORE_ERROR;
  return STORE_OK;
}

enum store_rc store_node_create(struct store *st, struct node_rec *n, const char *token_hash) {
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return STORE_ERROR;
  return store_tx_end(tx, store_node_create_locked(tx, n, token_hash));
}

enum store_rc store_node_list(struct store *st, struct node_rec **out, int *n) {
  static struct store_sql q;
  return store_select(st, &q, node_fields, " FROM nodes ORDER BY id", sizeof **out, 0, (void **)out,
                      n, "listing nodes", "");
}

enum store_rc store_node_delete_locked(struct store_tx *tx, int64_t id) {
  struct store *st = store_tx_store(tx);
  static const char del[] = "DELETE FROM nodes WHERE id = ?";
  struct db_stmt *q = db_prep(st->w, del);
  if (!q) return STORE_ERROR;
  db_bind_i64(q, 1, id);
  if (store_step_done(st->w, q, "deleting node") < 0) return STORE_ERROR;
  if (db_changes(st->w) == 0) return STORE_NOT_FOUND;
  store_tokens_removed_locked(tx); /* the token cache is cleared once this commits */
  {
    /* the other replicas cut the node's suspended poll too */
    char payload[SIGNAL_PAYLOAD_MAX];
    if (sigmsg_node_format(payload, sizeof payload, id) < 0 ||
        store_signal_locked(tx, sigmsg_channel(SIGNAL_INVAL), payload) < 0)
      return STORE_ERROR;
  }
  return STORE_OK;
}

enum store_rc store_node_delete(struct store *st, int64_t id) {
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return STORE_ERROR;
  return store_tx_end(tx, store_node_delete_locked(tx, id));
}
