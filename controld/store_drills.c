/* store_drills — the failover drills' SQL (see store_drills.h). */
#include "store_drills.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_core.h"

#define LIVE "state <> 'finished'"
/* a finished drill's switch back is still being applied for this long after it */
#define APPLIED_AFTER_MS 600000

static int read_drill(const void *ctx, struct db_stmt *s, void *rec) {
  (void)ctx;
  store_fields_read(s, 0, drill_fields, 0, rec);
  return 0;
}

/* The columns of every row but id, for INSERT and UPDATE. */
static const struct field_def *cols(void) {
  return drill_fields + 1; /* row 0 is id */
}

int store_drill_insert_locked(struct store_tx *tx, struct drill_rec *d) {
  struct store *st = store_tx_store(tx);
  static struct store_sql q;
  char tail[512];
  size_t len = 0;
  int ncol = 0;
  for (const struct field_def *f = cols(); f->name; f++)
    if (f->column) ncol++;
  len += (size_t)snprintf(tail + len, sizeof tail - len, ") VALUES (");
  for (int i = 0; i < ncol && len < sizeof tail; i++)
    len += (size_t)snprintf(tail + len, sizeof tail - len, "%s?", i ? ", " : "");
  if (len >= sizeof tail - 20) return -1;
  snprintf(tail + len, sizeof tail - len, ") RETURNING id");
  const char *sql = store_sql(&q, "INSERT INTO drills (", cols(), tail);
  struct db_stmt *s = sql ? db_prep(st->w, sql) : NULL;
  if (!s) return -1;
  if (store_fields_bind(s, 1, cols(), 0, d) < 0) {
    db_reset(s);
    return -1;
  }
  return store_step_i64(st->w, s, "creating a drill", &d->id);
}

int store_drill_save_locked(struct store_tx *tx, const struct drill_rec *d) {
  struct store *st = store_tx_store(tx);
  static struct store_sql q;
  const char *sql = store_sql_update(&q, "drills", cols());
  struct db_stmt *s;
  int next;
  if (!sql || !(s = db_prep(st->w, sql))) return -1;
  if ((next = store_fields_bind(s, 1, cols(), 0, d)) < 0) {
    db_reset(s);
    return -1;
  }
  db_bind_i64(s, next, d->id);
  return store_step_done(st->w, s, "saving a drill");
}

enum store_rc store_drill_get_locked(struct store_tx *tx, int64_t id, struct drill_rec *out) {
  struct store *st = store_tx_store(tx);
  static struct store_sql q;
  const char *sql = store_sql(&q, "SELECT ", drill_fields, " FROM drills WHERE id = ?");
  struct db_stmt *s = sql ? db_prep(st->w, sql) : NULL;
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  return store_one(st->w, s, sizeof *out, read_drill, NULL, NULL, out, "reading a drill");
}

int store_drill_site_locked(struct store_tx *tx, int64_t site_id, int64_t drill_id) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "UPDATE sites SET drill_id = ? WHERE id = ?";
  return store_exec(st->w, "marking a site's drill", q, "PI", drill_id, site_id);
}

int store_drill_site_claim_locked(struct store_tx *tx, int64_t site_id, int64_t drill_id) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "UPDATE sites SET drill_id = ? WHERE id = ? AND drill_id IS NULL";
  if (store_exec(st->w, "claiming a site for a drill", q, "II", drill_id, site_id) < 0) return -1;
  return db_changes(st->w) > 0;
}

enum store_rc store_drill_get(struct store *st, int64_t id, struct drill_rec *out) {
  static struct store_sql q;
  struct drill_rec *arr = NULL;
  int n = 0;
  enum store_rc rc = store_select(st, &q, drill_fields, " FROM drills WHERE id = ?", sizeof *arr, 1,
                                  (void **)&arr, &n, "reading a drill", "I", id);
  if (rc == STORE_OK && n == 0) rc = STORE_NOT_FOUND;
  if (rc == STORE_OK) *out = arr[0];
  free(arr);
  return rc;
}

enum store_rc store_drill_list(struct store *st, int64_t site_id, int64_t after, int limit,
                               struct drill_rec **out, int *n) {
  static struct store_sql q;
  return store_select(
      st, &q, drill_fields,
      " FROM drills WHERE id > ?1 AND (?2 = 0 OR site_id = ?2) ORDER BY id LIMIT ?3", sizeof **out,
      limit, (void **)out, n, "listing drills", "III", after, site_id, (int64_t)limit);
}

int store_drill_due(struct store *st, int64_t now, int64_t *ids, int max) {
  static const char q[] = "SELECT id FROM drills WHERE " LIVE
                          " AND (state = 'running' OR start_at <= ?) ORDER BY id LIMIT ?";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  int n = 0, rc;
  if (!s) return -1;
  db_bind_i64(s, 1, now);
  db_bind_i64(s, 2, max);
  while ((rc = db_step(s)) == DB_ROW)
    if (n < max) ids[n++] = db_col_i64(s, 0);
  db_reset(s);
  return rc == DB_DONE ? n : -1;
}

int store_drill_running_count(struct store *st) {
  static const char q[] = "SELECT COUNT(*) FROM drills WHERE state = 'running'";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  int n = -1;
  if (!s) return -1;
  if (db_step(s) == DB_ROW) n = (int)db_col_i64(s, 0);
  db_reset(s);
  return n;
}

#define DO(m)                                                                                      \
  .offset = offsetof(struct drill_origin, m), .size = sizeof(((struct drill_origin *)0)->m)
static const struct field_def origin_cols[] = {
    {.name = "origin_id", .column = "d.origin_id", .type = FIELD_INT, DO(origin_id)},
    {.name = "address", .column = "COALESCE(o.address, '')", .type = FIELD_STR, DO(address)},
    {.name = "requests", .column = "d.requests", .type = FIELD_INT, DO(requests)},
    {.name = "failures", .column = "d.failures", .type = FIELD_INT, DO(failures)},
    {.name = "latency_sum_ms", .column = "d.latency_sum_ms", .type = FIELD_INT, DO(latency_sum_ms)},
    {.name = "latency_count", .column = "d.latency_count", .type = FIELD_INT, DO(latency_count)},
    {.name = NULL},
};
#undef DO

enum store_rc store_drill_origins(struct store *st, int64_t id, struct drill_origin **out, int *n) {
  static struct store_sql q;
  return store_select(st, &q, origin_cols,
                      " FROM drill_origins d LEFT JOIN origins o ON o.id = d.origin_id "
                      "WHERE d.drill_id = ? ORDER BY d.origin_id",
                      sizeof **out, 0, (void **)out, n, "reading a drill's origins", "I", id);
}

int store_drill_observe_locked(struct store_tx *tx, int64_t site_id, int64_t origin_id,
                               int64_t requests, int64_t failures, int64_t latency_sum_ms,
                               int64_t latency_count) {
  struct store *st = store_tx_store(tx);
  /* the site's running drill, when the origin is on its target level */
  /* every sum saturates at DRILL_SUM_MAX (the last parameter): a stored sum and a clamped delta
     are both at most that, so their sum cannot overflow a bigint before the CASE caps it */
  static const char add_q[] =
      "UPDATE drills SET "
      "requests = CASE WHEN requests + ?1 > ?5 THEN ?5 ELSE requests + ?1 END, "
      "failures = CASE WHEN failures + ?2 > ?5 THEN ?5 ELSE failures + ?2 END, "
      "window_requests = CASE WHEN window_requests + ?1 > ?5 THEN ?5 "
      "ELSE window_requests + ?1 END, "
      "window_failures = CASE WHEN window_failures + ?2 > ?5 THEN ?5 "
      "ELSE window_failures + ?2 END "
      "WHERE id = (SELECT drill_id FROM sites WHERE id = ?3) AND state = 'running' AND "
      "to_level = (SELECT level FROM origins WHERE id = ?4 AND site_id = ?3)";
  static const char org_q[] =
      "INSERT INTO drill_origins (drill_id, origin_id, requests, failures, latency_sum_ms, "
      "latency_count) SELECT d.id, CAST(?4 AS BIGINT), CAST(?1 AS BIGINT), CAST(?2 AS BIGINT), "
      "CAST(?5 AS BIGINT), CAST(?6 AS BIGINT) FROM drills d JOIN sites s ON s.drill_id = d.id "
      "JOIN origins o ON o.id = ?4 AND o.site_id = s.id AND o.level = d.to_level "
      "WHERE s.id = ?3 AND d.state = 'running' "
      "ON CONFLICT (drill_id, origin_id) DO UPDATE SET "
      "requests = CASE WHEN drill_origins.requests + excluded.requests > ?7 THEN ?7 "
      "ELSE drill_origins.requests + excluded.requests END, "
      "failures = CASE WHEN drill_origins.failures + excluded.failures > ?7 THEN ?7 "
      "ELSE drill_origins.failures + excluded.failures END, "
      "latency_sum_ms = CASE WHEN drill_origins.latency_sum_ms + excluded.latency_sum_ms > ?7 "
      "THEN ?7 ELSE drill_origins.latency_sum_ms + excluded.latency_sum_ms END, "
      "latency_count = CASE WHEN drill_origins.latency_count + excluded.latency_count > ?7 "
      "THEN ?7 ELSE drill_origins.latency_count + excluded.latency_count END";
  requests = drill_sum_clamp(requests);
  failures = drill_sum_clamp(failures);
  latency_sum_ms = drill_sum_clamp(latency_sum_ms);
  latency_count = drill_sum_clamp(latency_count);
  if (requests <= 0 && failures <= 0 && latency_count <= 0) return 0;
  if (store_exec(st->w, "counting a drill's requests", add_q, "IIIII", requests, failures, site_id,
                 origin_id, (int64_t)DRILL_SUM_MAX) < 0)
    return -1;
  return store_exec(st->w, "counting a drill's origin", org_q, "IIIIIII", requests, failures,
                    site_id, origin_id, latency_sum_ms, latency_count, (int64_t)DRILL_SUM_MAX);
}

int store_drill_scheduled_count_locked(struct store_tx *tx, int64_t site_id) {
  struct store *st = store_tx_store(tx);
  /* the site's row locked first (an update that changes nothing): two creates for one site on
     two replicas count one after the other, the second seeing the first's drill once it commits
     (PostgreSQL, READ COMMITTED; SQLite has one writer) */
  static const char lock_q[] = "UPDATE sites SET drill_id = drill_id WHERE id = ?";
  static const char q[] = "SELECT COUNT(*) FROM drills WHERE site_id = ? AND state = 'scheduled'";
  struct db_stmt *s;
  int n = -1;
  if (store_exec(st->w, "locking a site for its drills", lock_q, "I", site_id) < 0) return -1;
  if (!(s = db_prep(st->w, q))) return -1;
  db_bind_i64(s, 1, site_id);
  if (db_step(s) == DB_ROW) n = (int)db_col_i64(s, 0);
  db_reset(s);
  return n;
}

int64_t store_drill_prune(struct store *st, int64_t before_ms) {
  static const char pick[] = "SELECT id FROM drills WHERE state = 'finished' AND finished_at < ? "
                             "ORDER BY id LIMIT ?";
  static const char *const del[] = {
      "DELETE FROM drill_origins WHERE drill_id = ?",
      "DELETE FROM drill_applied WHERE drill_id = ?",
      "DELETE FROM drills WHERE id = ?",
  };
  return store_prune_ids(st, pick, del, sizeof del / sizeof del[0], 100, before_ms,
                         "pruning drills");
}

int store_drill_applied_locked(struct store_tx *tx, int64_t node_id, int64_t seq, int64_t at) {
  struct store *st = store_tx_store(tx);
  /* a drill's switches are its site's publications with reason drill from its start on (the
     switch, and the switch back at its end) */
  static const char q[] =
      "INSERT INTO drill_applied (drill_id, seq, node_id, node_name, applied_at) "
      "SELECT d.id, p.seq, n.id, n.name, CAST(?3 AS BIGINT) FROM drills d "
      "JOIN publications p ON p.site_id = d.site_id AND p.reason = 'drill' "
      "AND p.created_at >= d.started_at - 1000 "
      "AND (d.finished_at IS NULL OR p.created_at <= d.finished_at + 1000) "
      "JOIN nodes n ON n.id = ?1 "
      "WHERE d.started_at IS NOT NULL AND (d.state = 'running' OR d.finished_at >= ?4) "
      "AND p.seq <= ?2 ON CONFLICT (drill_id, seq, node_id) DO NOTHING";
  return store_exec(st->w, "recording a drill switch's propagation", q, "IIII", node_id, seq, at,
                    at - APPLIED_AFTER_MS);
}

int store_drill_any_recent(struct store *st, int64_t now) {
  static const char q[] = "SELECT 1 FROM drills WHERE started_at IS NOT NULL AND "
                          "(state = 'running' OR finished_at >= ?) LIMIT 1";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  int rc;
  if (!s) return -1;
  db_bind_i64(s, 1, now - APPLIED_AFTER_MS);
  rc = db_step(s);
  db_reset(s);
  return rc == DB_ROW ? 1 : rc == DB_DONE ? 0 : -1;
}
