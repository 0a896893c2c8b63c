/* store_incidents — the incidents' SQL (see store_incidents.h). */
#include "store_incidents.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_core.h"
#include "store_drills.h"

#define ACTIVE "state <> 'resolved'"
/* the publications a switch records (engine: health_reason_to_string of a switch's reason) */
#define SWITCH_REASONS "('auto_failover', 'auto_failback', 'manual', 'no_enabled_origins')"
#define SWITCH_PUB "p.reason IN " SWITCH_REASONS

static int read_incident(const void *ctx, struct db_stmt *s, void *rec) {
  (void)ctx;
  store_fields_read(s, 0, incident_fields, 0, rec);
  return 0;
}

enum store_rc store_incident_active_locked(struct store_tx *tx, struct incident_rec **out, int *n) {
  struct store *st = store_tx_store(tx);
  static struct store_sql q;
  const char *sql = store_sql(&q, "SELECT ", incident_fields,
                              " FROM incidents WHERE " ACTIVE " ORDER BY site_id, id");
  struct db_stmt *s = sql ? db_prep(st->w, sql) : NULL;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  return store_list_read(st->w, s, sizeof **out, 0, read_incident, NULL, NULL, (void **)out, n,
                         "reading active incidents");
}

enum store_rc store_incident_latest_locked(struct store_tx *tx, int64_t site_id,
                                           struct incident_rec *out) {
  struct store *st = store_tx_store(tx);
  static struct store_sql q;
  const char *sql = store_sql(&q, "SELECT ", incident_fields,
                              " FROM incidents WHERE site_id = ? ORDER BY id DESC LIMIT 1");
  struct db_stmt *s = sql ? db_prep(st->w, sql) : NULL;
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, site_id);
  return store_one(st->w, s, sizeof *out, read_incident, NULL, NULL, out,
                   "reading a site's incident");
}

enum store_rc store_incident_get_locked(struct store_tx *tx, int64_t id, struct incident_rec *out) {
  struct store *st = store_tx_store(tx);
  static struct store_sql q;
  const char *sql = store_sql(&q, "SELECT ", incident_fields, " FROM incidents WHERE id = ?");
  struct db_stmt *s = sql ? db_prep(st->w, sql) : NULL;
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  return store_one(st->w, s, sizeof *out, read_incident, NULL, NULL, out, "reading an incident");
}

/* The columns of every row but id, for INSERT and UPDATE. */
static const struct field_def *cols(void) {
  return incident_fields + 1; /* row 0 is id */
}

int store_incident_insert_locked(struct store_tx *tx, struct incident_rec *r) {
  struct store *st = store_tx_store(tx);
  static struct store_sql q;
  char tail[256];
  int ncol = 0;
  for (const struct field_def *d = cols(); d->name; d++)
    if (d->column) ncol++;
  /* "(cols) VALUES (?, ?, ...) RETURNING id": the placeholders follow the table */
  {
    size_t len = 0;
    len += (size_t)snprintf(tail + len, sizeof tail - len, ") VALUES (");
    for (int i = 0; i < ncol && len < sizeof tail; i++)
      len += (size_t)snprintf(tail + len, sizeof tail - len, "%s?", i ? ", " : "");
    if (len >= sizeof tail - 20) return -1;
    snprintf(tail + len, sizeof tail - len, ") RETURNING id");
  }
  const char *sql = store_sql(&q, "INSERT INTO incidents (", cols(), tail);
  struct db_stmt *s = sql ? db_prep(st->w, sql) : NULL;
  if (!s) return -1;
  store_fields_bind(s, 1, cols(), 0, r);
  return store_step_i64(st->w, s, "opening an incident", &r->id);
}

int store_incident_save_locked(struct store_tx *tx, const struct incident_rec *r) {
  struct store *st = store_tx_store(tx);
  static struct store_sql q;
  const char *sql = store_sql_update(&q, "incidents", cols());
  struct db_stmt *s;
  if (!sql || !(s = db_prep(st->w, sql))) return -1;
  db_bind_i64(s, store_fields_bind(s, 1, cols(), 0, r), r->id);
  return store_defer(st->w, s, "saving an incident");
}

int store_incident_entry_locked(struct store_tx *tx, struct incident_rec *r, const char *kind,
                                int64_t event_id, const char *type, const char *title,
                                const char *data, int64_t at) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "INSERT INTO incident_entries (incident_id, at, kind, event_id, type, "
                          "title, data) VALUES (?, ?, ?, ?, ?, ?, ?)";
  char t[160];
  if (r->entries >= INCIDENT_MAX_ENTRIES) {
    r->dropped++;
    return 0;
  }
  snprintf(t, sizeof t, "%s", title ? title : "");
  if (store_exec(st->w, "adding to an incident's timeline", q, "IItPttt", r->id, at, kind, event_id,
                 type, t, data && *data ? data : "{}") < 0)
    return -1;
  r->entries++;
  return 0;
}

int store_incident_failed_locked(struct store_tx *tx, int64_t incident_id, int64_t origin_id,
                                 int level, int64_t at) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "INSERT INTO incident_origins (incident_id, origin_id, level, failed_at) "
                          "VALUES (?, ?, ?, ?) ON CONFLICT (incident_id, origin_id) DO NOTHING";
  return store_exec(st->w, "recording a failed origin", q, "IIiI", incident_id, origin_id, level,
                    at);
}

int store_incident_failed_ids_locked(struct store_tx *tx, int64_t incident_id, int64_t *ids,
                                     int cap) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "SELECT origin_id FROM incident_origins WHERE incident_id = ? "
                          "ORDER BY origin_id";
  struct db_stmt *s = db_prep(st->w, q);
  int n = 0, rc;
  if (!s) return -1;
  db_bind_i64(s, 1, incident_id);
  while (n < cap && (rc = db_step(s)) == DB_ROW)
    ids[n++] = db_col_i64(s, 0);
  db_reset(s);
  return n;
}

int64_t store_incident_streak_start_locked(struct store_tx *tx, int64_t origin_id) {
  struct store *st = store_tx_store(tx);
  static const char q[] =
      "SELECT MIN(round_at) FROM verdicts WHERE origin_id = ?1 AND verdict = 'failure' AND id > "
      "COALESCE((SELECT MAX(id) FROM verdicts WHERE origin_id = ?1 AND verdict = 'success'), 0)";
  struct db_stmt *s = db_prep(st->w, q);
  int64_t at = 0;
  if (!s) return 0;
  db_bind_i64(s, 1, origin_id);
  if (db_step(s) == DB_ROW && !db_col_null(s, 0)) at = db_col_i64(s, 0);
  db_reset(s);
  return at;
}

int store_incident_applied_batch(struct store *st, const struct incident_ask *a, int n) {
  /* the first time each node asked holding a seq at or past each switch publication of an
     active incident, for its first INCIDENT_MAX_SWITCHES switches (p at or before the last of
     them, read once, rather than a count of the switches before each p); later asks change
     nothing */
  static const char q[] =
      "INSERT INTO incident_applied (incident_id, seq, node_id, node_name, applied_at) "
      "SELECT i.id, p.seq, n.id, n.name, CAST(?3 AS BIGINT) FROM incidents i "
      "JOIN publications p ON p.site_id = i.site_id AND p.created_at >= i.opened_at "
      "JOIN nodes n ON n.id = ?1 "
      "WHERE i." ACTIVE " AND " SWITCH_PUB " AND p.seq <= ?2 AND p.seq <= COALESCE((SELECT e.seq "
      "FROM publications e WHERE e.site_id = i.site_id AND e.created_at >= i.opened_at AND "
      "e.reason IN " SWITCH_REASONS " ORDER BY e.seq LIMIT 1 OFFSET " STORE_SQL_NUM(
          INCIDENT_MAX_SWITCHES) " - 1), ?2) "
                                 "ON CONFLICT (incident_id, seq, node_id) DO NOTHING";
  static const char any[] = "SELECT 1 FROM incidents WHERE " ACTIVE " LIMIT 1";
  struct store_tx *tx;
  struct db_stmt *s;
  int rc = -1, some, drills;
  if (n <= 0) return 0;
  /* most batches come while nothing is active: one read, no write transaction; a failover
     drill's switches are recorded the same way (docs/design.md, Drills) */
  {
    struct db_conn *c = store_reader(st);
    if (!c || !(s = db_prep(c, any))) return -1;
    some = db_step(s) == DB_ROW;
    db_reset(s);
    drills = store_drill_any_recent(st, a[n - 1].at);
    if (!some && drills <= 0) return 0;
  }
  tx = store_tx_begin_unordered(st);
  if (!tx) return -1;
  for (int i = 0; i < n; i++) {
    if (a[i].seq <= 0) continue;
    if (some && store_exec(st->w, "recording a switch's propagation", q, "III", a[i].node_id,
                           a[i].seq, a[i].at) < 0)
      goto out;
    if (drills > 0 && store_drill_applied_locked(tx, a[i].node_id, a[i].seq, a[i].at) < 0) goto out;
  }
  rc = 0;
out:
  if (rc == 0) return store_tx_commit(tx);
  store_tx_rollback(tx);
  return -1;
}

int store_incident_sites_active_locked(struct store_tx *tx, int64_t **ids, int64_t **sites) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "SELECT id, site_id FROM incidents WHERE " ACTIVE " ORDER BY site_id";
  struct db_stmt *s = db_prep(st->w, q);
  int n = 0, cap = 0, rc;
  *ids = *sites = NULL;
  if (!s) return -1;
  while ((rc = db_step(s)) == DB_ROW) {
    if (n == cap) {
      int ncap = cap ? cap * 2 : 16;
      int64_t *a = realloc(*ids, (size_t)ncap * sizeof *a), *b;
      if (!a) break;
      *ids = a;
      b = realloc(*sites, (size_t)ncap * sizeof *b);
      if (!b) break;
      *sites = b;
      cap = ncap;
    }
    (*ids)[n] = db_col_i64(s, 0);
    (*sites)[n] = db_col_i64(s, 1);
    n++;
  }
  db_reset(s);
  if (rc != DB_DONE) {
    log_error("reading active incidents: %s", db_errmsg(st->w));
    free(*ids);
    free(*sites);
    *ids = *sites = NULL;
    return -1;
  }
  return n;
}

int store_incident_observe_locked(struct store_tx *tx, int64_t incident_id, int64_t node_id,
                                  int64_t origin_id, int64_t requests, int64_t failures,
                                  int64_t backup_picks, int64_t fail_open, int64_t now) {
  struct store *st = store_tx_store(tx);
  /* the counters' growth since the node's last report (all of it when they went back: the node
     restarted), added to the incident's row; read before the observation row is overwritten */
#define DELTA(c, p)                                                                                \
  "CASE WHEN o." c " IS NULL OR CAST(" p " AS BIGINT) < o." c " THEN CAST(" p " AS BIGINT) "       \
  "ELSE CAST(" p " AS BIGINT) - o." c " END"
  static const char q[] =
      "INSERT INTO incident_impact (incident_id, node_id, origin_id, requests, failures, "
      "backup_picks, fail_open, first_failure_at, last_failure_at) "
      "SELECT CAST(?1 AS BIGINT), CAST(?2 AS BIGINT), CAST(?3 AS BIGINT), d.r, d.f, d.b, d.o, "
      "CASE WHEN d.f > 0 THEN CAST(?8 AS BIGINT) END, CASE WHEN d.f > 0 THEN CAST(?8 AS BIGINT) "
      "END "
      "FROM (SELECT " DELTA("requests", "?4") " AS r, " DELTA("failures", "?5") " AS f, " DELTA(
          "backup_picks",
          "?6") " AS b, " DELTA("fail_open",
                                "?7") " AS o "
                                      "FROM (SELECT 1 AS one) x LEFT JOIN node_observations o ON "
                                      "o.node_id = ?2 AND "
                                      "o.origin_id = ?3) d "
                                      "WHERE EXISTS (SELECT 1 FROM origins g JOIN incidents i ON "
                                      "i.site_id = g.site_id "
                                      "WHERE g.id = ?3 AND i.id = ?1) "
                                      "ON CONFLICT (incident_id, node_id, origin_id) DO UPDATE SET "
                                      "requests = incident_impact.requests + excluded.requests, "
                                      "failures = incident_impact.failures + excluded.failures, "
                                      "backup_picks = incident_impact.backup_picks + "
                                      "excluded.backup_picks, "
                                      "fail_open = incident_impact.fail_open + excluded.fail_open, "
                                      "first_failure_at = "
                                      "COALESCE(incident_impact.first_failure_at, "
                                      "excluded.first_failure_at), "
                                      "last_failure_at = COALESCE(excluded.last_failure_at, "
                                      "incident_impact.last_failure_at)";
#undef DELTA
  return store_exec(st->w, "recording an incident's visitor impact", q, "IIIIIIII", incident_id,
                    node_id, origin_id, requests, failures, backup_picks, fail_open, now);
}

enum store_rc store_incident_list(struct store *st, int64_t site_id, const char *state,
                                  int64_t before, int limit, struct incident_rec **out, int *n) {
  static struct store_sql q;
  if (before <= 0) before = INT64_MAX;
  return store_select(st, &q, incident_fields,
                      " FROM incidents WHERE id < ?1 AND (?2 = 0 OR site_id = ?2) AND "
                      "(?3 = '' OR state = ?3 OR (?3 = 'active' AND state <> 'resolved')) "
                      "ORDER BY id DESC LIMIT ?4",
                      sizeof **out, limit, (void **)out, n, "listing incidents", "IItI", before,
                      site_id, state ? state : "", (int64_t)limit);
}

enum store_rc store_incident_get(struct store *st, int64_t id, struct incident_rec *out) {
  static struct store_sql q;
  struct incident_rec *arr = NULL;
  int n = 0;
  enum store_rc rc =
      store_select(st, &q, incident_fields, " FROM incidents WHERE id = ?", sizeof *arr, 1,
                   (void **)&arr, &n, "reading an incident", "I", id);
  if (rc == STORE_OK && n == 0) rc = STORE_NOT_FOUND;
  if (rc == STORE_OK) *out = arr[0];
  free(arr);
  return rc;
}

static int read_entry(const void *ctx, struct db_stmt *s, void *rec) {
  struct incident_entry *e = rec;
  int col = store_fields_read(s, 0, incident_entry_fields, 0, e);
  const char *d = db_col_text(s, col);
  (void)ctx;
  e->data = strdup(d ? d : "{}");
  return e->data ? 0 : -1;
}

static void fini_entry(void *rec) {
  incident_entry_fini(rec);
}

enum store_rc store_incident_entries(struct store *st, int64_t id, struct incident_entry **out,
                                     int *n) {
  static struct store_sql q;
  struct db_conn *c = store_reader(st);
  const char *sql = store_sql(&q, "SELECT ", incident_entry_fields,
                              ", data FROM incident_entries WHERE incident_id = ? ORDER BY id");
  struct db_stmt *s = c && sql ? db_prep(c, sql) : NULL;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  return store_list_read(c, s, sizeof **out, INCIDENT_MAX_ENTRIES, read_entry, NULL, fini_entry,
                         (void **)out, n, "reading an incident's timeline");
}

void store_incident_entries_free(struct incident_entry *e, int n) {
  for (int i = 0; i < n; i++)
    incident_entry_fini(&e[i]);
  free(e);
}

#define IP(m)                                                                                      \
  .offset = offsetof(struct incident_pub, m), .size = sizeof(((struct incident_pub *)0)->m)
static const struct field_def pub_cols[] = {
    {.name = "seq", .column = "p.seq", .type = FIELD_INT, IP(seq)},
    {.name = "created_at", .column = "p.created_at", .type = FIELD_INT, IP(created_at)},
    {.name = "reason", .column = "p.reason", .type = FIELD_STR, IP(reason)},
    {.name = NULL},
};
#undef IP

enum store_rc store_incident_pubs(struct store *st, const struct incident_rec *r,
                                  struct incident_pub **out, int *n) {
  static struct store_sql q;
  return store_select(st, &q, pub_cols,
                      " FROM publications p WHERE p.site_id = ? AND p.created_at >= ? AND "
                      "p.created_at <= ? AND " SWITCH_PUB " ORDER BY p.seq",
                      sizeof **out, INCIDENT_MAX_SWITCHES, (void **)out, n,
                      "reading an incident's switches", "III", r->site_id, r->opened_at,
                      r->resolved_at > 0 ? r->resolved_at : INT64_MAX);
}

#define II(m)                                                                                      \
  .offset = offsetof(struct incident_impact, m), .size = sizeof(((struct incident_impact *)0)->m)
static const struct field_def impact_cols[] = {
    {.name = "node_id", .column = "m.node_id", .type = FIELD_INT, II(node_id)},
    {.name = "origin_id", .column = "m.origin_id", .type = FIELD_INT, II(origin_id)},
    {.name = "requests", .column = "m.requests", .type = FIELD_INT, II(requests)},
    {.name = "failures", .column = "m.failures", .type = FIELD_INT, II(failures)},
    {.name = "backup_picks", .column = "m.backup_picks", .type = FIELD_INT, II(backup_picks)},
    {.name = "fail_open", .column = "m.fail_open", .type = FIELD_INT, II(fail_open)},
    {.name = "first_failure_at",
     .column = "m.first_failure_at",
     .type = FIELD_INT,
     II(first_failure_at)},
    {.name = "last_failure_at",
     .column = "m.last_failure_at",
     .type = FIELD_INT,
     II(last_failure_at)},
    {.name = "node_name", .column = "COALESCE(n.name, '')", .type = FIELD_STR, II(node_name)},
    {.name = NULL},
};
#undef II

enum store_rc store_incident_impact(struct store *st, int64_t id, struct incident_impact **out,
                                    int *n) {
  static struct store_sql q;
  return store_select(st, &q, impact_cols,
                      " FROM incident_impact m LEFT JOIN nodes n ON n.id = m.node_id "
                      "WHERE m.incident_id = ? ORDER BY m.node_id, m.origin_id",
                      sizeof **out, STORE_IMPACT_ROWS_MAX, (void **)out, n,
                      "reading an incident's impact", "I", id);
}

#define IT(m)                                                                                      \
  .offset = offsetof(struct incident_totals, m), .size = sizeof(((struct incident_totals *)0)->m)
#define SUM_OF(c) "CAST(COALESCE(SUM(" c "), 0) AS BIGINT)"
static const struct field_def totals_cols[] = {
    {.name = "requests", .column = SUM_OF("requests"), .type = FIELD_INT, IT(requests)},
    {.name = "failures", .column = SUM_OF("failures"), .type = FIELD_INT, IT(failures)},
    {.name = "backup_picks", .column = SUM_OF("backup_picks"), .type = FIELD_INT, IT(backup_picks)},
    {.name = "fail_open", .column = SUM_OF("fail_open"), .type = FIELD_INT, IT(fail_open)},
    {.name = "first_failure_at",
     .column = "COALESCE(MIN(CASE WHEN first_failure_at > 0 THEN first_failure_at END), 0)",
     .type = FIELD_INT,
     IT(first_failure_at)},
    {.name = "last_failure_at",
     .column = "COALESCE(MAX(last_failure_at), 0)",
     .type = FIELD_INT,
     IT(last_failure_at)},
    {.name = "nodes", .column = "COUNT(DISTINCT node_id)", .type = FIELD_INT, IT(nodes)},
    {.name = NULL},
};
#undef SUM_OF
#undef IT

enum store_rc store_incident_impact_totals(struct store *st, int64_t id,
                                           struct incident_totals *out) {
  static struct store_sql q;
  struct incident_totals *one = NULL;
  int n = 0;
  enum store_rc rc =
      store_select(st, &q, totals_cols, " FROM incident_impact WHERE incident_id = ?", sizeof *one,
                   1, (void **)&one, &n, "summing an incident's impact", "I", id);
  memset(out, 0, sizeof *out);
  if (rc == STORE_OK && n == 1) *out = one[0];
  free(one);
  return rc;
}

int store_incident_nodes_seen_since(struct store *st, int64_t since) {
  static const char q[] = "SELECT COUNT(*) FROM nodes WHERE last_seen_at >= ?";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  int n = -1;
  if (!s) return -1;
  db_bind_i64(s, 1, since);
  if (db_step(s) == DB_ROW) n = db_col_int(s, 0);
  db_reset(s);
  return n;
}

#define ID(m)                                                                                      \
  .offset = offsetof(struct incident_delivery, m),                                                 \
  .size = sizeof(((struct incident_delivery *)0)->m)
static const struct field_def delivery_cols[] = {
    {.name = "event_id", .column = "d.event_id", .type = FIELD_INT, ID(event_id)},
    {.name = "webhook_id", .column = "d.webhook_id", .type = FIELD_INT, ID(webhook_id)},
    {.name = "attempts", .column = "d.attempts", .type = FIELD_INT, ID(attempts)},
    {.name = "last_attempt_at",
     .column = "COALESCE(d.delivered_at, 0)",
     .type = FIELD_INT,
     ID(last_attempt_at)},
    {.name = "state", .column = "d.state", .type = FIELD_STR, ID(state)},
    {.name = "last_status",
     .column = "COALESCE(d.last_status, 0)",
     .type = FIELD_INT,
     ID(last_status)},
    {.name = "event_type", .column = "e.type", .type = FIELD_STR, ID(event_type)},
    {.name = NULL},
};
#undef ID

enum store_rc store_incident_deliveries(struct store *st, int64_t id,
                                        struct incident_delivery **out, int *n) {
  static struct store_sql q;
  return store_select(st, &q, delivery_cols,
                      " FROM incident_entries e JOIN deliveries d ON d.event_id = e.event_id "
                      "WHERE e.incident_id = ? ORDER BY d.event_id, d.webhook_id",
                      sizeof **out, 10000, (void **)out, n, "reading an incident's deliveries", "I",
                      id);
}

int64_t store_incident_prune(struct store *st, int64_t before_ms) {
  static const char pick[] =
      "SELECT id FROM incidents WHERE state = 'resolved' AND resolved_at < ? ORDER BY id LIMIT ?";
  static const char *const del[] = {
      "DELETE FROM incident_entries WHERE incident_id = ?",
      "DELETE FROM incident_origins WHERE incident_id = ?",
      "DELETE FROM incident_applied WHERE incident_id = ?",
      "DELETE FROM incident_impact WHERE incident_id = ?",
      "DELETE FROM incidents WHERE id = ?",
  };
  return store_prune_ids(st, pick, del, sizeof del / sizeof del[0], 100, before_ms,
                         "pruning incidents");
}

int64_t store_incident_open_count(struct store *st) {
  static const char q[] = "SELECT COUNT(*) FROM incidents WHERE " ACTIVE;
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  int64_t n = -1;
  if (!s) return -1;
  if (db_step(s) == DB_ROW) n = db_col_i64(s, 0);
  db_reset(s);
  return n;
}
