/* store_fleet — fleet view SQL (see store_fleet.h). */
#include "store_fleet.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_core.h"
#include "store_sites.h"

int store_fleet_set_locked(struct store_tx *tx, int64_t site_id, unsigned flags) {
  struct store *st = store_tx_store(tx);
  /* rows already right are skipped: an unchanged site dirties no page (the flags are NOT NULL,
     so <> is exact) */
  static const char q[] =
      "UPDATE sites SET state_on_backup = ?1, state_all_down = ?2, "
      "state_failback_available = ?3, state_paused = ?4 WHERE id = ?5 AND "
      "(state_on_backup <> ?1 OR state_all_down <> ?2 OR state_failback_available <> ?3 OR "
      "state_paused <> ?4)";
  struct db_stmt *s = db_prep(st->w, q);
  if (!s) return -1;
  for (int i = 0; i < 4; i++) /* FLEET_* bit i is parameter i + 1 */
    db_bind_int(s, i + 1, (flags & (1u << i)) != 0);
  db_bind_i64(s, 5, site_id);
  return store_defer(st->w, s, "storing site fleet state");
}

int store_fleet_summary(struct store *st, int64_t online_since, struct fleet_summary *out) {
  /* each state count walks only its partial index (few rows); the total walks the smallest index */
  static const char q[] = "SELECT (SELECT COUNT(*) FROM sites), "
                          "(SELECT COUNT(*) FROM sites WHERE state_on_backup = 1), "
                          "(SELECT COUNT(*) FROM sites WHERE state_all_down = 1), "
                          "(SELECT COUNT(*) FROM sites WHERE state_failback_available = 1), "
                          "(SELECT COUNT(*) FROM sites WHERE state_paused = 1), "
                          "(SELECT COUNT(*) FROM nodes WHERE last_seen_at >= ?1), "
                          "(SELECT COUNT(*) FROM nodes WHERE last_seen_at >= ?1 AND config_seq < "
                          "(SELECT COALESCE(MAX(seq), 0) FROM publications))";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  int rc;
  memset(out, 0, sizeof *out);
  if (!s) return -1;
  db_bind_i64(s, 1, online_since);
  rc = db_step(s);
  if (rc == DB_ROW) {
    out->sites = db_col_i64(s, 0);
    out->on_backup = db_col_i64(s, 1);
    out->all_down = db_col_i64(s, 2);
    out->failback_available = db_col_i64(s, 3);
    out->paused = db_col_i64(s, 4);
    out->nodes_online = db_col_i64(s, 5);
    out->nodes_lagging = db_col_i64(s, 6);
    out->on_primary = out->sites - out->on_backup;
  }
  db_reset(s);
  if (rc != DB_ROW) {
    log_error("reading the fleet summary: %s", db_errmsg(c));
    return -1;
  }
  return 0;
}

/* ?1 = after, ?2 = a LIKE pattern ("%q%", escaped) or NULL (typed: PostgreSQL cannot infer a
   type from IS NULL), ?3 = limit. With a state, the walk
   follows that state's partial index and tests each of its (few) sites. */
#define FLEET_STATE_SQL(cond)                                                                      \
  "SELECT id FROM sites WHERE " cond " AND id > ?1 AND (CAST(?2 AS TEXT) IS NULL OR "              \
  "LOWER(name) LIKE ?2 ESCAPE '\\' OR EXISTS (SELECT 1 FROM hostnames h "                          \
  "WHERE h.site_id = sites.id AND LOWER(h.hostname) LIKE ?2 ESCAPE '\\')) ORDER BY id LIMIT ?3"

/* Without a state, q alone: two scans in id order merged (a full scan only when few match). */
static const char sql_q_only[] =
    "SELECT id FROM sites WHERE id > ?1 AND LOWER(name) LIKE ?2 ESCAPE '\\' UNION "
    "SELECT site_id FROM hostnames WHERE site_id > ?1 AND LOWER(hostname) LIKE ?2 ESCAPE '\\' "
    "ORDER BY 1 LIMIT ?3";

/* The id query for a filter (one statement per state so each uses its partial index). */
static const char *list_sql(unsigned state, int has_q) {
  static const char any[] = FLEET_STATE_SQL("1 = 1");
  static const char backup[] = FLEET_STATE_SQL("state_on_backup = 1");
  static const char down[] = FLEET_STATE_SQL("state_all_down = 1");
  static const char failback[] = FLEET_STATE_SQL("state_failback_available = 1");
  static const char paused[] = FLEET_STATE_SQL("state_paused = 1");
  switch (state) {
  case FLEET_ON_BACKUP:
    return backup;
  case FLEET_ALL_DOWN:
    return down;
  case FLEET_FAILBACK_AVAILABLE:
    return failback;
  case FLEET_PAUSED:
    return paused;
  default:
    return has_q ? sql_q_only : any;
  }
}

/* "%q%" in ASCII lower case (the statements compare LOWER(name), the same in both dialects),
   with LIKE's own characters (%, _ and the escape \) escaped; malloc'd or NULL. */
static char *like_pattern(const char *q) {
  size_t n = strlen(q);
  char *p = malloc(2 * n + 3), *w = p;
  if (!p) return NULL;
  *w++ = '%';
  for (const char *s = q; *s; s++) {
    if (*s == '%' || *s == '_' || *s == '\\') *w++ = '\\';
    *w++ = (*s >= 'A' && *s <= 'Z') ? (char)(*s - 'A' + 'a') : *s;
  }
  *w++ = '%';
  *w = '\0';
  return p;
}

/* Newest change first (updated_at, then id, descending); after = the previous page's last site,
   whose (updated_at, id) the page continues below. ?4..?7 = the state flags asked for (no partial
   index: this order reads every site, about 40 ms at 100,000). */
static const char sql_changed[] =
    "SELECT id FROM sites WHERE (CAST(?1 AS BIGINT) = 0 OR (updated_at, id) < "
    "(SELECT updated_at, id FROM sites WHERE id = ?1)) "
    "AND (?4 = 0 OR state_on_backup = 1) AND (?5 = 0 OR state_all_down = 1) "
    "AND (?6 = 0 OR state_failback_available = 1) AND (?7 = 0 OR state_paused = 1) "
    "AND (CAST(?2 AS TEXT) IS NULL OR LOWER(name) LIKE ?2 ESCAPE '\\' "
    "OR EXISTS (SELECT 1 FROM hostnames h "
    "WHERE h.site_id = sites.id AND LOWER(h.hostname) LIKE ?2 ESCAPE '\\')) "
    "ORDER BY updated_at DESC, id DESC LIMIT ?3";

static enum store_rc site_list(struct store *st, const char *sql, int bind_state, unsigned state,
                               const char *q, int64_t after, int limit, struct site_rec **out,
                               int *n);

enum store_rc store_fleet_site_list(struct store *st, unsigned state, const char *q, int64_t after,
                                    int limit, struct site_rec **out, int *n) {
  return site_list(st, list_sql(state, q && *q), 0, state, q, after, limit, out, n);
}

enum store_rc store_fleet_site_list_changed(struct store *st, unsigned state, const char *q,
                                            int64_t after, int limit, struct site_rec **out,
                                            int *n) {
  return site_list(st, sql_changed, 1, state, q, after, limit, out, n);
}

static enum store_rc site_list(struct store *st, const char *sql, int bind_state, unsigned state,
                               const char *q, int64_t after, int limit, struct site_rec **out,
                               int *n) {
  int has_q = q && *q;
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, sql) : NULL;
  struct site_rec *arr = NULL;
  int64_t *ids = NULL;
  char *lq = NULL;
  int cnt = 0, loaded = 0;
  enum store_rc ret = STORE_ERROR;
  *out = NULL;
  *n = 0;
  if (!s || limit < 1) return STORE_ERROR;
  /* LOWER(..) LIKE a lower-case pattern is ASCII case-insensitive: "Shop" finds "shop" and
   * "SHOP.example.com" */
  if (has_q && !(lq = like_pattern(q))) return STORE_ERROR;
  if (store_read_begin(c) < 0) goto out_nosnap;
  store_bind(s, 1, "Iti", after, lq, limit);
  if (bind_state) /* the statements with the state as parameters */
    for (int i = 0; i < 4; i++)
      db_bind_int(s, 4 + i, (state & (1u << i)) != 0);
  if (store_ids_read(c, s, limit, &ids, &cnt, "listing sites by state") != STORE_OK) goto out;
  /* the records for the ids found (about 16 KiB each), not for the page's limit */
  if (!(arr = calloc((size_t)(cnt ? cnt : 1), sizeof *arr))) goto out;
  if (store_sites_load(c, ids, cnt, arr) != STORE_OK) goto out;
  loaded = cnt;
  for (int i = 0; i < cnt; i++)
    if (arr[i].id == 0) goto out; /* listed and gone within one snapshot: cannot happen */
  *out = arr;
  *n = cnt;
  arr = NULL;
  ret = STORE_OK;
out:
  store_read_end(c);
out_nosnap:
  if (arr) {
    for (int i = 0; i < loaded; i++)
      site_rec_fini(&arr[i]);
    free(arr);
  }
  free(ids);
  free(lq);
  return ret;
}

/* The caller's callback of a walk and its argument. */
struct site_walk {
  int (*fn)(void *arg, const struct fleet_site_row *row);
  void *arg;
};
struct origin_walk {
  int (*fn)(void *arg, const struct fleet_origin_row *row);
  void *arg;
};

static int site_row(void *arg, struct db_stmt *s) {
  const struct site_walk *w = arg;
  struct fleet_site_row row;
  row.id = db_col_i64(s, 0);
  row.name = db_col_text(s, 1);
  if (!row.name) row.name = "";
  row.current_level = db_col_int(s, 2);
  row.state = (db_col_int(s, 3) ? FLEET_ON_BACKUP : 0) | (db_col_int(s, 4) ? FLEET_ALL_DOWN : 0) |
              (db_col_int(s, 5) ? FLEET_FAILBACK_AVAILABLE : 0) |
              (db_col_int(s, 6) ? FLEET_PAUSED : 0);
  return w->fn(w->arg, &row);
}

static int origin_row(void *arg, struct db_stmt *s) {
  const struct origin_walk *w = arg;
  struct fleet_origin_row row;
  row.site_id = db_col_i64(s, 0);
  row.origin_id = db_col_i64(s, 1);
  row.level = db_col_int(s, 2);
  row.enabled = db_col_int(s, 3);
  row.health = db_col_text(s, 4);
  if (!row.health) row.health = "unknown";
  return w->fn(w->arg, &row);
}

/* Prepare q on the reader, bind max, walk its rows with row. */
static int walk(struct store *st, const char *q, int max, int (*row)(void *, struct db_stmt *),
                void *w, const char *what) {
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  if (!s) return -1;
  db_bind_int(s, 1, max);
  return store_each(c, s, what, row, w);
}

int store_fleet_each_site(struct store *st, int max,
                          int (*fn)(void *arg, const struct fleet_site_row *row), void *arg) {
  static const char q[] = "SELECT id, name, current_level, state_on_backup, state_all_down, "
                          "state_failback_available, state_paused FROM sites ORDER BY id LIMIT ?";
  struct site_walk w = {fn, arg};
  return walk(st, q, max, site_row, &w, "walking sites");
}

int store_fleet_each_origin(struct store *st, int max,
                            int (*fn)(void *arg, const struct fleet_origin_row *row), void *arg) {
  static const char q[] =
      "SELECT site_id, id, level, enabled, health FROM origins WHERE site_id IN "
      "(SELECT id FROM sites ORDER BY id LIMIT ?) ORDER BY site_id, level, id";
  struct origin_walk w = {fn, arg};
  return walk(st, q, max, origin_row, &w, "walking origins");
}
