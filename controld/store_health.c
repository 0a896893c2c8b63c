/* store_health — the health engine's SQL (see store_health.h). */
#include "store_health.h"

#include <stdlib.h>
#include <string.h>

#include "fleet_state.h"
#include "log.h"
#include "store_core.h"
#include "store_events.h"
#include "store_fleet.h"
#include "store_node.h"
#include "store_pub.h"
#include "store_sites.h"

/* ---- reads ---- */

enum store_rc store_health_due_sites(struct store *st, int64_t due_before, int limit, int64_t **ids,
                                     int *n) {
  static const char q[] =
      "SELECT s.id FROM sites s WHERE s.hc_enabled = 1 "
      "AND (s.next_probe_at IS NULL OR s.next_probe_at <= ?1) "
      "AND (SELECT COUNT(*) FROM origins o WHERE o.site_id = s.id AND o.enabled = 1) >= 2 "
      "ORDER BY s.last_probed_at IS NOT NULL, s.last_probed_at, s.id LIMIT ?2";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  *ids = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  store_bind(s, 1, "Ii", due_before, limit);
  return store_ids_read(c, s, 0, ids, n, "selecting due sites");
}

int store_health_own_interval_due(struct store *st, int64_t *due_at, int64_t *min_interval) {
  static const char q[] =
      "SELECT MIN(COALESCE(s.next_probe_at, 0)), MIN(s.hc_interval_ms), COUNT(*) FROM sites s "
      "WHERE s.hc_interval_ms IS NOT NULL AND s.hc_enabled = 1 "
      "AND (SELECT COUNT(*) FROM origins o WHERE o.site_id = s.id AND o.enabled = 1) >= 2";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  int ret = -1;
  if (!s) return -1;
  if (db_step(s) == DB_ROW) {
    ret = db_col_i64(s, 2) > 0 ? 1 : 0;
    if (ret) {
      *due_at = db_col_i64(s, 0);
      *min_interval = db_col_i64(s, 1);
    }
  } else {
    log_error("selecting the next site due: %s", db_errmsg(c));
  }
  db_reset(s);
  return ret;
}

int64_t store_health_next_round_id(struct store *st) {
  static const char q[] = "SELECT COALESCE(MAX(id), 0) + 1 FROM probe_rounds";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  int64_t v = -1;
  if (!s) return -1;
  if (db_step(s) == DB_ROW) v = db_col_i64(s, 0);
  db_reset(s);
  return v;
}

int store_health_online_nodes(struct store *st, int64_t seen_since, int64_t **ids, int *n) {
  static const char q[] = "SELECT id FROM nodes WHERE last_seen_at >= ? ORDER BY id";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  *ids = NULL;
  *n = 0;
  if (!s) return -1;
  db_bind_i64(s, 1, seen_since);
  return store_ids_read(c, s, STORE_MAX_NODES, ids, n, "selecting online nodes") == STORE_OK ? 0
                                                                                             : -1;
}

static int propagation_on(struct db_conn *c, int64_t site_id, int64_t seen_since, int *online,
                          int *on_current, int64_t *seq) {
  static const char q[] =
      "SELECT COUNT(*), COALESCE(SUM(CASE WHEN config_seq >= "
      "(SELECT COALESCE(MAX(seq), 0) FROM publications WHERE site_id = ?2) THEN 1 ELSE 0 END), 0), "
      "(SELECT COALESCE(MAX(seq), 0) FROM publications WHERE site_id = ?2) "
      "FROM nodes WHERE last_seen_at >= ?1";
  struct db_stmt *s = db_prep(c, q);
  int rc;
  *online = *on_current = 0;
  *seq = 0;
  if (!s) return -1;
  db_bind_i64(s, 1, seen_since);
  db_bind_i64(s, 2, site_id);
  rc = db_step(s);
  if (rc == DB_ROW) {
    *online = db_col_int(s, 0);
    *on_current = db_col_int(s, 1);
    *seq = db_col_i64(s, 2);
  }
  db_reset(s);
  if (rc != DB_ROW) {
    log_error("reading propagation of site %lld: %s", (long long)site_id, db_errmsg(c));
    return -1;
  }
  return 0;
}

int store_health_propagation(struct store *st, int64_t site_id, int64_t seen_since, int *online,
                             int *on_current, int64_t *seq) {
  struct db_conn *c = store_reader(st);
  if (!c) return -1;
  return propagation_on(c, site_id, seen_since, online, on_current, seq);
}

int store_health_propagation_locked(struct store_tx *tx, int64_t site_id, int64_t seen_since,
                                    int *online, int *on_current, int64_t *seq) {
  struct store *st = store_tx_store(tx);
  return propagation_on(st->w, site_id, seen_since, online, on_current, seq);
}

#define M(t, m) .offset = offsetof(struct t, m), .size = sizeof(((struct t *)0)->m)
/* The columns of the per-origin sums, as the query reads them. */
static const struct field_def obs_cols[] = {
    {.name = "origin_id", .column = "origin_id", .type = FIELD_INT, M(origin_obs, origin_id)},
    {.name = "requests", .column = "SUM(requests)", .type = FIELD_INT, M(origin_obs, requests)},
    {.name = "failures", .column = "SUM(failures)", .type = FIELD_INT, M(origin_obs, failures)},
    {.name = NULL},
};

/* The columns of a verdict before its votes (an owned string, read by verdict_row). */
static const struct field_def verdict_cols[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, M(verdict_rec, id)},
    {.name = "round_id", .column = "round_id", .type = FIELD_INT, M(verdict_rec, round_id)},
    {.name = "round_at", .column = "round_at", .type = FIELD_INT, M(verdict_rec, round_at)},
    {.name = "source", .column = "source", .type = FIELD_STR, M(verdict_rec, source)},
    {.name = "verdict", .column = "verdict", .type = FIELD_STR, M(verdict_rec, verdict)},
    {.name = "state_after",
     .column = "state_after",
     .type = FIELD_STR,
     M(verdict_rec, state_after)},
    {.name = NULL},
};
#undef M

static enum store_rc observations_on(struct db_conn *c, int64_t site_id, struct origin_obs **out,
                                     int *n) {
  static struct store_sql q;
  const char *sql = store_sql(&q, "SELECT ", obs_cols,
                              " FROM node_observations WHERE site_id = ? GROUP BY origin_id "
                              "ORDER BY origin_id");
  struct db_stmt *s = sql ? db_prep(c, sql) : NULL;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, site_id);
  return store_rows_read(c, s, obs_cols, sizeof **out, 0, (void **)out, n,
                         "reading a site's observations");
}

enum store_rc store_health_observations(struct store *st, int64_t site_id, struct origin_obs **out,
                                        int *n) {
  struct db_conn *c = store_reader(st);
  if (!c) return STORE_ERROR;
  return observations_on(c, site_id, out, n);
}

enum store_rc store_health_observations_locked(struct store_tx *tx, int64_t site_id,
                                               struct origin_obs **out, int *n) {
  struct store *st = store_tx_store(tx);
  return observations_on(st->w, site_id, out, n);
}

static int verdict_read(const void *ctx, struct db_stmt *s, void *rec) {
  struct verdict_rec *v = rec;
  int col = store_fields_read(s, 0, ctx, 0, v);
  const char *votes = db_col_text(s, col);
  return (v->votes = strdup(votes ? votes : "[]")) ? 0 : -1;
}

static void verdict_fini(void *rec) {
  struct verdict_rec *v = rec;
  free(v->votes);
  v->votes = NULL;
}

enum store_rc store_health_verdicts(struct store *st, int64_t origin_id, int limit,
                                    struct verdict_rec **out, int *n) {
  static struct store_sql q;
  const char *sql = store_sql(&q, "SELECT ", verdict_cols,
                              ", votes FROM verdicts WHERE origin_id = ? ORDER BY id DESC LIMIT ?");
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c && sql ? db_prep(c, sql) : NULL;
  *out = NULL;
  *n = 0;
  if (!s || limit < 1) return STORE_ERROR;
  store_bind(s, 1, "Ii", origin_id, limit);
  return store_list_read(c, s, sizeof **out, limit, verdict_read, verdict_cols, verdict_fini,
                         (void **)out, n, "reading an origin's verdicts");
}

void store_health_verdicts_free(struct verdict_rec *arr, int n) {
  if (!arr) return;
  for (int i = 0; i < n; i++)
    free(arr[i].votes);
  free(arr);
}

/* ---- writes ---- */

struct store_tx *store_health_begin(struct store *st) {
  return store_tx_begin_engine(st, 1);
}

int store_health_commit(struct store_tx *tx) {
  return store_tx_commit(tx);
}

void store_health_rollback(struct store_tx *tx) {
  store_tx_rollback(tx);
}

enum store_rc store_health_site_load_locked(struct store_tx *tx, int64_t site_id,
                                            struct site_rec *out) {
  struct store *st = store_tx_store(tx);
  return store_site_load(st->w, site_id, out);
}

enum store_rc store_health_sites_load_locked(struct store_tx *tx, const int64_t *ids, int n,
                                             struct site_rec *out) {
  struct store *st = store_tx_store(tx);
  return store_sites_load(st->w, ids, n, out);
}

int store_health_origin_save_locked(struct store_tx *tx, const struct origin_rec *o) {
  struct store *st = store_tx_store(tx);
  static const char q[] =
      "UPDATE origins SET health = ?, success_streak = ?, failure_streak = ?, "
      "health_changed_at = ?, healthy_since = ?, last_verdict = ?, last_source = ?, "
      "last_votes_success = ?, last_votes_failure = ?, last_checked_at = ?, last_error = ? "
      "WHERE id = ?";
  return store_exec(
      st->w, "saving origin health", q, "tiiPPzziiPzI", health_state_to_string(o->health),
      o->success_streak, o->failure_streak, o->health_changed_at, o->healthy_since,
      health_verdict_to_string(o->last_verdict), health_source_to_string(o->last_source),
      o->votes_success, o->votes_failure, o->last_checked_at, o->last_error, o->id);
}

int store_health_verdict_add_locked(struct store_tx *tx, int64_t round_id, int64_t site_id,
                                    int64_t origin_id, int64_t round_at, const char *source,
                                    const char *verdict, const char *state_after,
                                    const char *votes_json) {
  struct store *st = store_tx_store(tx);
  static const char ins[] =
      "INSERT INTO verdicts (round_id, site_id, origin_id, round_at, source, verdict, "
      "state_after, votes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
  static const char prune[] =
      "DELETE FROM verdicts WHERE origin_id = ?1 AND (round_at < ?3 OR id <= "
      "(SELECT id FROM verdicts WHERE origin_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2))";
  if (store_exec(st->w, "inserting verdict", ins, "IIIIzztt", round_id, site_id, origin_id,
                 round_at, source, verdict, state_after, votes_json ? votes_json : "[]") < 0)
    return -1;
  return store_exec(st->w, "pruning verdicts", prune, "IiI", origin_id,
                    (int)STORE_HEALTH_VERDICTS_KEEP,
                    (int64_t)(round_at - STORE_HEALTH_VERDICTS_MAX_AGE_MS));
}

/* 16 rows of 8 parameters; the prune's 16 origin ids then KEEP and the cutoff. */
#define VROW "(?, ?, ?, ?, ?, ?, ?, ?)"
#define VROW4 VROW ", " VROW ", " VROW ", " VROW
#define IN4 "?, ?, ?, ?"
#define VBATCH 16

static void arrays_free(struct db_arr *a, int n) {
  for (int i = 0; i < n; i++)
    db_arr_free(&a[i]);
}

/* An array element for a time: NULL when v <= 0 (as store_bind's 'P'). */
static void arr_time(struct db_arr *a, int64_t v) {
  if (v > 0)
    db_arr_i64(a, v);
  else
    db_arr_null(a);
}

/* An array element for text: NULL when empty (as store_bind's 'z'). */
static void arr_text_or_null(struct db_arr *a, const char *v) {
  db_arr_text(a, v && *v ? v : NULL);
}

int store_health_origins_save_locked(struct store_tx *tx, const struct origin_rec *const *os,
                                     int n) {
  struct store *st = store_tx_store(tx);
  static const char q[] =
      "UPDATE origins AS o SET health = v.health, success_streak = v.ss, failure_streak = v.fs, "
      "health_changed_at = v.hca, healthy_since = v.hs, last_verdict = v.lv, last_source = v.ls, "
      "last_votes_success = v.vs, last_votes_failure = v.vf, last_checked_at = v.lca, "
      "last_error = v.le FROM unnest(?::bigint[], ?::text[], ?::bigint[], ?::bigint[], "
      "?::bigint[], ?::bigint[], ?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::bigint[], "
      "?::text[]) AS v(id, health, ss, fs, hca, hs, lv, ls, vs, vf, lca, le) WHERE o.id = v.id";
  struct db_arr a[12];
  int rc;
  if (n <= 0) return 0;
  if (db_kind(st->w) != DB_PG) {
    for (int i = 0; i < n; i++)
      if (store_health_origin_save_locked(tx, os[i]) < 0) return -1;
    return 0;
  }
  memset(a, 0, sizeof a);
  for (int i = 0; i < n; i++) {
    const struct origin_rec *o = os[i];
    db_arr_i64(&a[0], o->id);
    db_arr_text(&a[1], health_state_to_string(o->health));
    db_arr_i64(&a[2], o->success_streak);
    db_arr_i64(&a[3], o->failure_streak);
    arr_time(&a[4], o->health_changed_at);
    arr_time(&a[5], o->healthy_since);
    arr_text_or_null(&a[6], health_verdict_to_string(o->last_verdict));
    arr_text_or_null(&a[7], health_source_to_string(o->last_source));
    db_arr_i64(&a[8], o->votes_success);
    db_arr_i64(&a[9], o->votes_failure);
    arr_time(&a[10], o->last_checked_at);
    arr_text_or_null(&a[11], o->last_error);
  }
  rc = store_step_arrays(st->w, q, a, 12, "saving origin health");
  arrays_free(a, 12);
  return rc;
}

int store_health_sites_round_locked(struct store_tx *tx, const struct site_round_row *rows, int n) {
  struct store *st = store_tx_store(tx);
  static const char q[] =
      "UPDATE sites AS s SET last_probed_at = v.pa, next_probe_at = v.np, "
      "state_on_backup = v.b, state_all_down = v.d, state_failback_available = v.f, "
      "state_paused = v.p FROM unnest(?::bigint[], ?::bigint[], ?::bigint[], ?::bigint[], "
      "?::bigint[], ?::bigint[], ?::bigint[]) AS v(id, pa, np, b, d, f, p) WHERE s.id = v.id";
  struct db_arr a[7];
  int rc;
  if (n <= 0) return 0;
  if (db_kind(st->w) != DB_PG) {
    for (int i = 0; i < n; i++)
      if (store_health_site_probed_locked(tx, rows[i].site_id, rows[i].probed_at,
                                          rows[i].next_probe_at) < 0 ||
          store_fleet_set_locked(tx, rows[i].site_id, rows[i].fleet) < 0)
        return -1;
    return 0;
  }
  memset(a, 0, sizeof a);
  for (int i = 0; i < n; i++) {
    const struct site_round_row *r = &rows[i];
    db_arr_i64(&a[0], r->site_id);
    db_arr_i64(&a[1], r->probed_at);
    db_arr_i64(&a[2], r->next_probe_at);
    db_arr_i64(&a[3], (r->fleet & FLEET_ON_BACKUP) != 0);
    db_arr_i64(&a[4], (r->fleet & FLEET_ALL_DOWN) != 0);
    db_arr_i64(&a[5], (r->fleet & FLEET_FAILBACK_AVAILABLE) != 0);
    db_arr_i64(&a[6], (r->fleet & FLEET_PAUSED) != 0);
  }
  rc = store_step_arrays(st->w, q, a, 7, "recording probe times");
  arrays_free(a, 7);
  return rc;
}

/* PostgreSQL: all rows in one INSERT from arrays (unnest keeps their order, so ids follow it) and
   one prune of their origins. */
static int verdicts_add_pg(struct store *st, const struct verdict_row *rows, int n) {
  static const char ins[] =
      "INSERT INTO verdicts (round_id, site_id, origin_id, round_at, source, verdict, "
      "state_after, votes) SELECT * FROM unnest(?::bigint[], ?::bigint[], ?::bigint[], "
      "?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[])";
  static const char prune[] =
      "DELETE FROM verdicts WHERE id IN (SELECT id FROM (SELECT id, round_at, ROW_NUMBER() "
      "OVER (PARTITION BY origin_id ORDER BY id DESC) AS rn FROM verdicts WHERE origin_id = "
      "ANY(?::bigint[])) AS t WHERE rn > ?::bigint OR round_at < ?::bigint)";
  struct db_arr a[8];
  int64_t oldest = rows[0].round_at;
  int rc = -1;
  struct db_stmt *s;
  memset(a, 0, sizeof a);
  for (int i = 0; i < n; i++) {
    const struct verdict_row *r = &rows[i];
    db_arr_i64(&a[0], r->round_id);
    db_arr_i64(&a[1], r->site_id);
    db_arr_i64(&a[2], r->origin_id);
    db_arr_i64(&a[3], r->round_at);
    arr_text_or_null(&a[4], r->source);
    arr_text_or_null(&a[5], r->verdict);
    db_arr_text(&a[6], r->state_after);
    db_arr_text(&a[7], r->votes_json ? r->votes_json : "[]");
    if (r->round_at < oldest) oldest = r->round_at;
  }
  if (store_step_arrays(st->w, ins, a, 8, "inserting verdicts") < 0) goto out;
  if (a[2].oom) goto out;
  s = db_prep(st->w, prune);
  if (!s) goto out;
  db_bind_arr(s, 1, &a[2]);
  db_bind_int(s, 2, STORE_HEALTH_VERDICTS_KEEP);
  db_bind_i64(s, 3, oldest - STORE_HEALTH_VERDICTS_MAX_AGE_MS);
  rc = store_step_done(st->w, s, "pruning verdicts");
out:
  arrays_free(a, 8);
  return rc;
}

int store_health_verdicts_add_locked(struct store_tx *tx, const struct verdict_row *rows, int n) {
  struct store *st = store_tx_store(tx);
  if (n <= 0) return 0;
  if (db_kind(st->w) == DB_PG) return verdicts_add_pg(st, rows, n);
  static const char ins[] =
      "INSERT INTO verdicts (round_id, site_id, origin_id, round_at, source, "
      "verdict, state_after, votes) VALUES " VROW4 ", " VROW4 ", " VROW4 ", " VROW4;
  /* keeps each origin's KEEP newest rows (by id) not older than the cutoff, as the per-row prune */
  static const char prune[] =
      "DELETE FROM verdicts WHERE id IN (SELECT id FROM (SELECT id, round_at, ROW_NUMBER() "
      "OVER (PARTITION BY origin_id ORDER BY id DESC) AS rn FROM verdicts WHERE origin_id IN "
      "(" IN4 ", " IN4 ", " IN4 ", " IN4 ")) AS t WHERE rn > ? OR round_at < ?)";
  int at = 0;
  for (; n - at >= VBATCH; at += VBATCH) {
    struct db_stmt *s = db_prep(st->w, ins);
    int64_t oldest = rows[at].round_at;
    if (!s) return -1;
    for (int i = 0; i < VBATCH; i++) {
      const struct verdict_row *r = &rows[at + i];
      store_bind(s, i * 8 + 1, "IIIIzztt", r->round_id, r->site_id, r->origin_id, r->round_at,
                 r->source, r->verdict, r->state_after, r->votes_json ? r->votes_json : "[]");
      if (r->round_at < oldest) oldest = r->round_at;
    }
    if (store_step_done(st->w, s, "inserting verdicts") < 0) return -1;
    s = db_prep(st->w, prune);
    if (!s) return -1;
    for (int i = 0; i < VBATCH; i++)
      db_bind_i64(s, i + 1, rows[at + i].origin_id);
    db_bind_int(s, VBATCH + 1, STORE_HEALTH_VERDICTS_KEEP);
    db_bind_i64(s, VBATCH + 2, oldest - STORE_HEALTH_VERDICTS_MAX_AGE_MS);
    if (store_step_done(st->w, s, "pruning verdicts") < 0) return -1;
  }
  for (; at < n; at++) { /* the rest one by one */
    const struct verdict_row *r = &rows[at];
    if (store_health_verdict_add_locked(tx, r->round_id, r->site_id, r->origin_id, r->round_at,
                                        r->source, r->verdict, r->state_after, r->votes_json) < 0)
      return -1;
  }
  return 0;
}

int store_health_round_add_locked(struct store_tx *tx, int64_t round_id, int64_t started_at,
                                  int64_t finished_at, int sites, int origins) {
  struct store *st = store_tx_store(tx);
  static const char ins[] =
      "INSERT INTO probe_rounds (id, started_at, finished_at, sites, origins) "
      "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET started_at = excluded.started_at, "
      "finished_at = excluded.finished_at, sites = excluded.sites, origins = excluded.origins";
  static const char prune[] = "DELETE FROM probe_rounds WHERE id <= ?";
  if (store_exec(st->w, "recording probe round", ins, "IIIii", round_id, started_at, finished_at,
                 sites, origins) < 0)
    return -1;
  if (round_id <= STORE_HEALTH_ROUNDS_KEEP) return 0;
  return store_exec(st->w, "pruning probe rounds", prune, "I",
                    (int64_t)(round_id - STORE_HEALTH_ROUNDS_KEEP));
}

int store_health_site_probed_locked(struct store_tx *tx, int64_t site_id, int64_t probed_at,
                                    int64_t next_probe_at) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "UPDATE sites SET last_probed_at = ?, next_probe_at = ? WHERE id = ?";
  return store_exec(st->w, "recording probe time", q, "III", probed_at, next_probe_at, site_id);
}

int store_health_site_flags_locked(struct store_tx *tx, int64_t site_id, int all_unhealthy,
                                   int failback_notified) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "UPDATE sites SET all_unhealthy = ?, failback_notified = ? WHERE id = ?";
  return store_exec(st->w, "storing site health flags", q, "iiI", all_unhealthy, failback_notified,
                    site_id);
}

int store_health_site_level_locked(struct store_tx *tx, int64_t site_id, int level,
                                   const char *reason, int manual_pin) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "UPDATE sites SET current_level = ?, manual_pin = ? WHERE id = ?";
  if (store_exec(st->w, "switching level", q, "iiI", level, manual_pin, site_id) < 0) return -1;
  return store_publish_locked(tx, site_id, reason, 0);
}

int store_health_site_ramp_locked(struct store_tx *tx, int64_t site_id, const struct ramp_run *r,
                                  int64_t hold_until, const char *reason) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "UPDATE sites SET ramp = ?, ramp_to_level = ?, ramp_requests = 0, "
                          "ramp_failures = 0, ramp_hold_until = ? WHERE id = ?";
  int on = r && r->from_level;
  char *text = on ? ramp_run_codec.to_text(r) : NULL;
  int rc;
  if (on && !text) return -1;
  rc = store_exec(st->w, "storing the failback ramp", q, "tPII", text,
                  (int64_t)(on ? r->to_level : 0), hold_until, site_id);
  free(text);
  if (rc < 0) return -1;
  return reason ? store_publish_locked(tx, site_id, reason, 0) : 0;
}

int store_health_ramp_window_locked(struct store_tx *tx, int64_t site_id) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "UPDATE sites SET ramp_requests = 0, ramp_failures = 0 WHERE id = ?";
  return store_exec(st->w, "starting a ramp window", q, "I", site_id);
}

int store_health_level_skipped_locked(struct store_tx *tx, int64_t site_id, int level,
                                      int64_t since) {
  struct store *st = store_tx_store(tx);
  static const char q[] =
      "SELECT COUNT(*), COALESCE(SUM(CASE WHEN EXISTS (SELECT 1 FROM node_observations n WHERE "
      "n.origin_id = o.id AND n.skipped = 1 AND n.updated_at >= ?) THEN 0 ELSE 1 END), 0) "
      "FROM origins o WHERE o.site_id = ? AND o.level = ? AND o.enabled = 1";
  struct db_stmt *s = db_prep(st->w, q);
  int ret = -1;
  if (!s) return -1;
  db_bind_i64(s, 1, since);
  db_bind_i64(s, 2, site_id);
  db_bind_i64(s, 3, level);
  if (db_step(s) == DB_ROW) ret = db_col_i64(s, 0) > 0 && db_col_i64(s, 1) == 0;
  db_reset(s);
  return ret;
}

int store_health_ramp_sites(struct store *st, int64_t *ids, int max) {
  static const char q[] = "SELECT id FROM sites WHERE ramp_to_level IS NOT NULL ORDER BY id";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  int n = 0, rc;
  if (!s) return -1;
  while ((rc = db_step(s)) == DB_ROW)
    if (n < max) ids[n++] = db_col_i64(s, 0);
  db_reset(s);
  if (rc != DB_DONE) {
    log_error("selecting the ramping sites: %s", db_errmsg(c));
    return -1;
  }
  return n;
}
