/* store_shadow — the SQL of shadow health policies (see store_shadow.h). */
#include "store_shadow.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "store_core.h"

static enum store_rc read_rows(struct db_conn *c, struct store_sql *q, const struct field_def *defs,
                               const char *tail, size_t elem, int limit, void **out, int *n,
                               const char *what, int64_t id) {
  const char *sql = store_sql(q, "SELECT ", defs, tail);
  struct db_stmt *s = sql ? db_prep(c, sql) : NULL;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  return store_rows_read(c, s, defs, elem, limit, out, n, what);
}

static enum store_rc load_site(struct db_conn *c, int64_t site_id, struct shadow_site *ss) {
  static struct store_sql q;
  void *rows = NULL;
  int n = 0;
  enum store_rc rc = read_rows(c, &q, shadow_site_fields, " FROM shadow_sites WHERE site_id = ?",
                               sizeof *ss, 1, &rows, &n, "reading a shadow state", site_id);
  memset(ss, 0, sizeof *ss);
  if (rc == STORE_OK && n == 0) rc = STORE_NOT_FOUND;
  if (rc == STORE_OK) memcpy(ss, rows, sizeof *ss);
  free(rows);
  return rc;
}

enum store_rc store_shadow_site_get(struct store *st, struct store_tx *tx, int64_t site_id,
                                    struct shadow_site *ss) {
  struct db_conn *c = tx ? store_tx_store(tx)->w : store_reader(st);
  memset(ss, 0, sizeof *ss);
  return c ? load_site(c, site_id, ss) : STORE_ERROR;
}

static enum store_rc load_origins(struct db_conn *c, int64_t site_id, struct shadow_origin **so,
                                  int *n) {
  static struct store_sql q;
  return read_rows(c, &q, shadow_origin_fields,
                   " FROM shadow_origins WHERE site_id = ? ORDER BY origin_id", sizeof **so, 0,
                   (void **)so, n, "reading shadow origins", site_id);
}

enum store_rc store_shadow_load_locked(struct store_tx *tx, int64_t site_id, struct shadow_site *ss,
                                       struct shadow_origin **so, int *n) {
  struct store *st = store_tx_store(tx);
  enum store_rc rc = load_site(st->w, site_id, ss);
  *so = NULL;
  *n = 0;
  if (rc != STORE_OK) return rc;
  if (load_origins(st->w, site_id, so, n) != STORE_OK) return STORE_ERROR;
  return STORE_OK;
}

int store_shadow_save_locked(struct store_tx *tx, const struct shadow_site *ss,
                             const struct shadow_origin *so, int n,
                             const struct shadow_switch *sw) {
  struct store *st = store_tx_store(tx);
  if (store_exec(st->w, "storing a shadow state",
                 "INSERT INTO shadow_sites (site_id, current_level, all_unhealthy, "
                 "failback_notified, rounds, skipped, since, updated_at) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (site_id) DO UPDATE SET "
                 "current_level = excluded.current_level, all_unhealthy = excluded.all_unhealthy, "
                 "failback_notified = excluded.failback_notified, rounds = excluded.rounds, "
                 "skipped = excluded.skipped, since = excluded.since, "
                 "updated_at = excluded.updated_at",
                 "IiiiIIII", ss->site_id, ss->current_level, ss->all_unhealthy,
                 ss->failback_notified, ss->rounds, ss->skipped, ss->since, ss->updated_at) < 0)
    return -1;
  for (int i = 0; i < n; i++) {
    const struct shadow_origin *o = &so[i];
    const char *lv =
        o->last_verdict == VERDICT_NONE ? NULL : health_verdict_to_string(o->last_verdict);
    const char *lr = o->last_real == VERDICT_NONE ? NULL : health_verdict_to_string(o->last_real);
    if (store_exec(st->w, "storing a shadow origin",
                   "INSERT INTO shadow_origins (origin_id, site_id, health, success_streak, "
                   "failure_streak, health_changed_at, healthy_since, last_verdict, last_real, "
                   "last_error, compared, disagreements) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (origin_id) DO UPDATE "
                   "SET health = excluded.health, success_streak = excluded.success_streak, "
                   "failure_streak = excluded.failure_streak, "
                   "health_changed_at = excluded.health_changed_at, "
                   "healthy_since = excluded.healthy_since, last_verdict = excluded.last_verdict, "
                   "last_real = excluded.last_real, last_error = excluded.last_error, "
                   "compared = excluded.compared, disagreements = excluded.disagreements",
                   "IItiiIItttII", o->origin_id, o->site_id, health_state_to_string(o->health),
                   o->success_streak, o->failure_streak, o->health_changed_at, o->healthy_since, lv,
                   lr, o->last_error, o->compared, o->disagreements) < 0)
      return -1;
  }
  if (!sw) return 0;
  if (store_exec(st->w, "storing a shadow switch",
                 "INSERT INTO shadow_switches (site_id, at, from_level, to_level, reason, why) "
                 "VALUES (?, ?, ?, ?, ?, ?)",
                 "IIiitt", ss->site_id, sw->at, sw->from_level, sw->to_level, sw->reason,
                 sw->why) < 0)
    return -1;
  return store_exec(st->w, "pruning shadow switches",
                    "DELETE FROM shadow_switches WHERE site_id = ? AND id NOT IN (SELECT id FROM "
                    "shadow_switches WHERE site_id = ? ORDER BY id DESC LIMIT ?)",
                    "IIi", ss->site_id, ss->site_id, SHADOW_SWITCHES_KEPT) < 0
             ? -1
             : 0;
}

int store_shadow_skipped_locked(struct store_tx *tx, int64_t site_id, int level, int64_t now) {
  struct store *st = store_tx_store(tx);
  return store_exec(st->w, "counting skipped shadow probes",
                    "INSERT INTO shadow_sites (site_id, current_level, skipped, since, updated_at) "
                    "VALUES (?, ?, 1, 0, ?) ON CONFLICT (site_id) DO UPDATE SET "
                    "skipped = shadow_sites.skipped + 1, updated_at = excluded.updated_at",
                    "IiI", site_id, level, now) < 0
             ? -1
             : 0;
}

int store_shadow_reset_locked(struct store_tx *tx, int64_t site_id) {
  struct store *st = store_tx_store(tx);
  if (store_exec(st->w, "resetting a shadow state", "DELETE FROM shadow_sites WHERE site_id = ?",
                 "I", site_id) < 0 ||
      store_exec(st->w, "resetting a shadow state", "DELETE FROM shadow_origins WHERE site_id = ?",
                 "I", site_id) < 0 ||
      store_exec(st->w, "resetting a shadow state", "DELETE FROM shadow_switches WHERE site_id = ?",
                 "I", site_id) < 0)
    return -1;
  return 0;
}

/* One level.switched event as a switch. */
static int read_real(const void *ctx, struct db_stmt *s, void *rec) {
  struct shadow_switch *sw = rec;
  const char *data = db_col_text(s, 1);
  cJSON *j = data ? json_parse(data, strlen(data)) : NULL;
  const cJSON *v;
  (void)ctx;
  sw->at = db_col_i64(s, 0);
  if ((v = cJSON_GetObjectItemCaseSensitive(j, "from_level")) && cJSON_IsNumber(v))
    sw->from_level = v->valueint;
  if ((v = cJSON_GetObjectItemCaseSensitive(j, "to_level")) && cJSON_IsNumber(v))
    sw->to_level = v->valueint;
  if ((v = cJSON_GetObjectItemCaseSensitive(j, "reason")) && cJSON_IsString(v))
    snprintf(sw->reason, sizeof sw->reason, "%s", v->valuestring);
  if ((v = cJSON_GetObjectItemCaseSensitive(j, "why")) && cJSON_IsString(v))
    snprintf(sw->why, sizeof sw->why, "%s", v->valuestring);
  cJSON_Delete(j);
  return 0;
}

enum store_rc store_shadow_report(struct store *st, int64_t site_id, struct shadow_site *ss,
                                  struct shadow_origin **so, int *n, struct shadow_switch **sw,
                                  int *nsw, struct shadow_switch **real, int *nreal) {
  static struct store_sql qs;
  struct db_conn *c = store_reader(st);
  struct db_stmt *s;
  enum store_rc rc, out;
  *so = NULL;
  *sw = *real = NULL;
  *n = *nsw = *nreal = 0;
  /* one snapshot: a round committed between two of these reads would show its switch beside
     the origins' state from before it */
  if (!c || store_read_begin(c) < 0) return STORE_ERROR;
  out = load_site(c, site_id, ss);
  rc = out == STORE_ERROR ? STORE_ERROR : load_origins(c, site_id, so, n);
  if (rc == STORE_OK)
    rc = read_rows(c, &qs, shadow_switch_fields,
                   " FROM shadow_switches WHERE site_id = ? ORDER BY id DESC", sizeof **sw,
                   SHADOW_SWITCHES_SHOWN, (void **)sw, nsw, "reading shadow switches", site_id);
  if (rc == STORE_OK) {
    s = db_prep(c, "SELECT created_at, data FROM events WHERE site_id = ? AND type = "
                   "'level.switched' ORDER BY id DESC");
    if (!s) rc = STORE_ERROR;
  }
  if (rc == STORE_OK) {
    db_bind_i64(s, 1, site_id);
    rc = store_list_read(c, s, sizeof **real, SHADOW_SWITCHES_SHOWN, read_real, NULL, NULL,
                         (void **)real, nreal, "reading real switches");
  }
  store_read_end(c);
  return rc == STORE_OK ? out : STORE_ERROR;
}
