/* store_sites — the sites and origins SQL (see store_sites.h). */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "store_core.h"
#include "store_pub.h"
#include "store_sites.h"

/* Cleared first: records are compared whole (memcmp), so the bytes after a string's end must be
   zero too. */
static void site_from_row(struct db_stmt *s, struct site_rec *o) {
  memset(o, 0, sizeof *o);
  store_fields_read(s, 0, site_fields, 0, o);
}

/* ---- the sites' and origins' SQL, from their field tables (site_fields, site_origin_fields) ----
 */

/* Built once; the texts live as long as the process (db_prep keys its cache by their address). */
struct sites_sql {
  char one[1536];         /* a site's origins */
  char bulk_range[1536];  /* the origins of a range of sites */
  char bulk_in[1792];     /* the origins of up to 32 sites */
  char insert[1024];      /* one origin (site_id, the configuration, created_at), RETURNING id */
  char insert_lite[1280]; /* the same on SQLite, with an id never given out before */
  char insert_id[1024];   /* the same with its id first (import) */
  char insert_pg[2048];   /* every origin of a new site in one statement (PostgreSQL) */
  char update[2048];      /* one origin's configuration: ?1..?ncfg, then its id and site */
  int ncfg;               /* configuration columns */
  /* sites, from the site field table (site_fields) */
  char site_one[1024];         /* one site */
  char site_range[1024];       /* the sites of an id range */
  char site_in[1024];          /* up to 32 sites */
  char site_page[1024];        /* the sites after an id, up to a limit */
  char site_insert[1024];      /* the configuration, current_level, created_at, updated_at */
  char site_insert_lite[1280]; /* the same on SQLite, with an id never given out before */
  char site_update[1024];      /* the configuration, then the id */
  int ok;
};
static struct sites_sql ssql;
static pthread_once_t ssql_once = PTHREAD_ONCE_INIT;

/* snprintf into a fixed buffer; 0, or -1 when it does not fit */
static int fmt(char *out, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));
static int fmt(char *out, size_t cap, const char *f, ...) {
  va_list ap;
  int n;
  va_start(ap, f);
  n = vsnprintf(out, cap, f, ap);
  va_end(ap);
  return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* SQLite: the next id of a table, past every id it ever gave out. SQLite hands a deleted highest
   rowid out again, and a site's or origin's history (incidents, events, publications, drills)
   keeps its id after it is deleted: the next site took that history over. A trigger of schema 20
   keeps the highest deleted id in cdnca_meta's column; PostgreSQL's identities never reuse. */
#define LITE_NEXT_ID(table, col)                                                                   \
  "(SELECT MAX(COALESCE((SELECT MAX(id) FROM " table "), 0), (SELECT " col " FROM cdnca_meta "     \
  "WHERE id = 1)) + 1)"

/* The sites' statements into ssql; 0 or -1. Parameters: the configuration columns in table
   order (site_fields' FORM_CONFIG rows), then what each statement names after them. */
static int site_sql_build(const char *q32) {
  char cols[1024], cfg[512], marks[256], sets[768];
  if (fields_columns(site_fields, 0, "", cols, sizeof cols) < 0 ||
      fields_columns(site_fields, FORM_CONFIG, "", cfg, sizeof cfg) < 0 ||
      fields_sql_list(site_fields, FORM_CONFIG, FIELDS_SQL_MARKS, marks, sizeof marks) < 0 ||
      fields_sql_list(site_fields, FORM_CONFIG, FIELDS_SQL_SETS, sets, sizeof sets) < 0)
    return -1;
  if (fmt(ssql.site_one, sizeof ssql.site_one, "SELECT %s FROM sites WHERE id = ?", cols) < 0 ||
      fmt(ssql.site_range, sizeof ssql.site_range,
          "SELECT %s FROM sites WHERE id BETWEEN ? AND ? ORDER BY id", cols) < 0 ||
      fmt(ssql.site_in, sizeof ssql.site_in, "SELECT %s FROM sites WHERE id IN (%s) ORDER BY id",
          cols, q32) < 0 ||
      fmt(ssql.site_page, sizeof ssql.site_page,
          "SELECT %s FROM sites WHERE id > ? ORDER BY id LIMIT ?", cols) < 0 ||
      /* config_version 0: the site's first publication makes it 1 */
      fmt(ssql.site_insert, sizeof ssql.site_insert,
          "INSERT INTO sites (%s, current_level, config_version, created_at, updated_at) "
          "VALUES (%s, ?, 0, ?, ?) RETURNING id",
          cfg, marks) < 0 ||
      fmt(ssql.site_insert_lite, sizeof ssql.site_insert_lite,
          "INSERT INTO sites (id, %s, current_level, config_version, created_at, updated_at) "
          "VALUES (" LITE_NEXT_ID("sites", "site_id_max") ", %s, ?, 0, ?, ?) RETURNING id",
          cfg, marks) < 0 ||
      fmt(ssql.site_update, sizeof ssql.site_update, "UPDATE sites SET %s WHERE id = ?", sets) < 0)
    return -1;
  return 0;
}

static void ssql_build(void) {
  char cols[1024], cfg[512], tcfg[512], arrs[512], marks[256], sets[1024], q32[64];
  int enabled = 0, k = 0, nc = fields_columns(site_origin_fields, 0, "", cols, sizeof cols);
  size_t la = 0;
  ssql.ncfg = fields_columns(site_origin_fields, FORM_CONFIG, "", cfg, sizeof cfg);
  if (nc < 0 || ssql.ncfg < 0 ||
      fields_columns(site_origin_fields, FORM_CONFIG, "t.", tcfg, sizeof tcfg) < 0)
    return;
  for (size_t i = 0, p = 0; i < 32; i++) { /* "?,?,…": 32 placeholders */
    if (i) q32[p++] = ',';
    q32[p++] = '?';
    q32[p] = '\0';
  }
  if (fields_sql_list(site_origin_fields, FORM_CONFIG, FIELDS_SQL_MARKS, marks, sizeof marks) < 0 ||
      fields_sql_list(site_origin_fields, FORM_CONFIG, FIELDS_SQL_SETS_NUMBERED, sets,
                      sizeof sets) < 0)
    return;
  arrs[0] = '\0';
  for (const struct field_def *d = site_origin_fields; d->name; d++) {
    if (!d->column || !(d->forms & FORM_CONFIG)) continue;
    k++;
    if (strcmp(d->column, "enabled") == 0) enabled = k;
    la += (size_t)snprintf(arrs + la, sizeof arrs - la, "%s?::%s[]", k > 1 ? ", " : "",
                           store_fields_pg_type(d));
    if (la >= sizeof arrs) return;
  }
  if (!enabled || site_sql_build(q32) < 0) return;
  if (fmt(ssql.one, sizeof ssql.one, "SELECT %s FROM origins WHERE site_id = ? ORDER BY level, id",
          cols) < 0 ||
      fmt(ssql.bulk_range, sizeof ssql.bulk_range,
          "SELECT %s FROM origins WHERE site_id BETWEEN ? AND ? ORDER BY site_id, level, id",
          cols) < 0 ||
      fmt(ssql.bulk_in, sizeof ssql.bulk_in,
          "SELECT %s FROM origins WHERE site_id IN (%s) ORDER BY site_id, level, id", cols,
          q32) < 0 ||
      fmt(ssql.insert, sizeof ssql.insert,
          "INSERT INTO origins (site_id, %s, created_at) VALUES (?, %s, ?) RETURNING id", cfg,
          marks) < 0 ||
      fmt(ssql.insert_lite, sizeof ssql.insert_lite,
          "INSERT INTO origins (id, site_id, %s, created_at) VALUES (" LITE_NEXT_ID(
              "origins", "origin_id_max") ", ?, %s, ?) RETURNING id",
          cfg, marks) < 0 ||
      fmt(ssql.insert_id, sizeof ssql.insert_id,
          "INSERT INTO origins (id, site_id, %s, created_at) VALUES (?, ?, %s, ?)", cfg,
          marks) < 0 ||
      /* the rows go in in list order, so the identity hands out ascending ids in that order */
      fmt(ssql.insert_pg, sizeof ssql.insert_pg,
          "INSERT INTO origins (site_id, %s, created_at) SELECT ?::bigint, %s, ?::bigint FROM "
          "unnest(%s) WITH ORDINALITY AS t(%s, n) ORDER BY t.n RETURNING id",
          cfg, tcfg, arrs, cfg) < 0 ||
      /* re-enabling (enabled 0 -> 1) starts the origin over as unknown */
      fmt(ssql.update, sizeof ssql.update,
          "UPDATE origins SET "
          "health = CASE WHEN enabled = 0 AND ?%d = 1 THEN 'unknown' ELSE health END, "
          "success_streak = CASE WHEN enabled = 0 AND ?%d = 1 THEN 0 ELSE success_streak END, "
          "failure_streak = CASE WHEN enabled = 0 AND ?%d = 1 THEN 0 ELSE failure_streak END, "
          "healthy_since = CASE WHEN enabled = 0 AND ?%d = 1 THEN NULL ELSE healthy_since END, "
          "%s WHERE id = ?%d AND site_id = ?%d",
          enabled, enabled, enabled, enabled, sets, k + 1, k + 2) < 0)
    return;
  ssql.ok = 1;
}

/* The sites' and origins' SQL, or NULL when it could not be built (logged once). */
static const struct sites_sql *sites_sql(void) {
  static atomic_int said;
  pthread_once(&ssql_once, ssql_build);
  if (ssql.ok) return &ssql;
  if (!atomic_exchange(&said, 1)) log_error("the sites' and origins' SQL does not fit its buffers");
  return NULL;
}

/* Cleared first: records are compared whole (memcmp), so the bytes after a string's end must be
   zero too. */
static void origin_from_row(struct db_stmt *s, struct origin_rec *o) {
  memset(o, 0, sizeof *o);
  store_fields_read(s, 0, site_origin_fields, 0, o);
}

static const char site_hosts_q[] =
    "SELECT hostname FROM hostnames WHERE site_id = ? ORDER BY position";

/* Prepare, bind to site id and send ahead (db_prefetch) one of the three reads of a site. */
static struct db_stmt *site_read_sent(struct db_conn *c, const char *q, int64_t id) {
  struct db_stmt *s = db_prep(c, q);
  if (!s) return NULL;
  db_bind_i64(s, 1, id);
  if (db_prefetch(s) < 0) return NULL;
  return s;
}

/* Read the hostnames (sh) and origins (so) of an already-filled site row. */
static enum store_rc site_read_children(struct db_conn *c, struct db_stmt *sh, struct db_stmt *so,
                                        struct site_rec *out) {
  int rc, cap = 0;
  while ((rc = db_step(sh)) == DB_ROW && out->n_hostnames < SITE_MAX_HOSTNAMES)
    store_col_text(sh, 0, out->hostnames[out->n_hostnames++], sizeof out->hostnames[0]);
  db_reset(sh);
  if (rc == DB_ERR) {
    db_reset(so);
    log_error("loading hostnames of site %lld: %s", (long long)out->id, db_errmsg(c));
    return STORE_ERROR;
  }
  while ((rc = db_step(so)) == DB_ROW) {
    if (out->n_origins == cap) {
      int ncap = cap ? cap * 2 : 4;
      struct origin_rec *no = realloc(out->origins, (size_t)ncap * sizeof *no);
      if (!no) {
        db_reset(so);
        return STORE_ERROR;
      }
      out->origins = no;
      cap = ncap;
    }
    origin_from_row(so, &out->origins[out->n_origins++]);
  }
  db_reset(so);
  if (rc != DB_DONE) {
    log_error("loading origins of site %lld: %s", (long long)out->id, db_errmsg(c));
    return STORE_ERROR;
  }
  return STORE_OK;
}

/* The site row, its hostnames and its origins: three statements, sent together (one round trip
   on PostgreSQL). */
enum store_rc store_site_load(struct db_conn *c, int64_t id, struct site_rec *out) {
  const struct sites_sql *osq = sites_sql();
  struct db_stmt *s, *sh = NULL, *so = NULL;
  int rc;
  memset(out, 0, sizeof *out);
  s = osq ? site_read_sent(c, osq->site_one, id) : NULL;
  if (s) sh = site_read_sent(c, site_hosts_q, id);
  if (sh) so = site_read_sent(c, osq->one, id);
  if (!so) {
    if (s) db_reset(s);
    if (sh) db_reset(sh);
    return STORE_ERROR;
  }
  rc = db_step(s);
  if (rc != DB_ROW) {
    db_reset(s);
    db_reset(sh);
    db_reset(so);
    return rc == DB_DONE ? STORE_NOT_FOUND : STORE_ERROR;
  }
  site_from_row(s, out);
  db_reset(s);
  rc = site_read_children(c, sh, so, out);
  if (rc != STORE_OK) site_rec_fini(out);
  return rc;
}

/* ---- bulk loads: a set of sites in a constant number of statements per table ----

   The ids are read in spans: one id range `BETWEEN first AND last` when the ids are dense (the
   range holds at most twice as many ids as asked for, plus a little), else IN lists of
   BULK_IN ids. Rows come ordered by site, and each is placed by a binary search over the sorted
   ids, so rows of sites not asked for (inside a range) are skipped. */
#define BULK_IN 32
#define BULK_Q4 "?,?,?,?"
#define BULK_Q16 BULK_Q4 "," BULK_Q4 "," BULK_Q4 "," BULK_Q4
#define BULK_Q32 BULK_Q16 "," BULK_Q16

static const char bulk_hosts_range[] = "SELECT site_id, hostname FROM hostnames WHERE site_id "
                                       "BETWEEN ? AND ? ORDER BY site_id, position";
static const char bulk_hosts_in[] = "SELECT site_id, hostname FROM hostnames WHERE site_id IN "
                                    "(" BULK_Q32 ") ORDER BY site_id, position";

struct bulk {
  const int64_t *ids; /* ascending, distinct */
  int n;
  struct site_rec *arr; /* arr[i] belongs to ids[i] */
  int *cap;             /* origins capacity per site */
  int nomem;
};

int store_bulk_dense(int64_t first, int64_t last, int n) {
  return n > 0 && last >= first && last - first < 2 * (int64_t)n + 64;
}

static int bulk_find(const struct bulk *b, int64_t id) {
  int lo = 0, hi = b->n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (b->ids[mid] == id) return mid;
    if (b->ids[mid] < id)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

static void bulk_site_row(struct bulk *b, struct db_stmt *s) {
  int i = bulk_find(b, db_col_i64(s, 0));
  if (i >= 0) site_from_row(s, &b->arr[i]);
}

static void bulk_host_row(struct bulk *b, struct db_stmt *s) {
  int i = bulk_find(b, db_col_i64(s, 0));
  struct site_rec *r;
  if (i < 0) return;
  r = &b->arr[i];
  if (r->id && r->n_hostnames < SITE_MAX_HOSTNAMES)
    store_col_text(s, 1, r->hostnames[r->n_hostnames++], sizeof r->hostnames[0]);
}

static void bulk_origin_row(struct bulk *b, struct db_stmt *s) {
  int i = bulk_find(b, db_col_i64(s, 1));
  struct site_rec *r;
  struct origin_rec *no;
  if (i < 0 || !b->arr[i].id) return;
  r = &b->arr[i];
  no = store_grow(r->origins, &b->cap[i], r->n_origins, sizeof *no, 4);
  if (!no) {
    b->nomem = 1;
    return;
  }
  r->origins = no;
  origin_from_row(s, &r->origins[r->n_origins++]);
}

/* Run the range or IN-list form of one query over every id of b, handing each row to fn. */
static enum store_rc bulk_read(struct db_conn *c, struct bulk *b, int range, const char *q_range,
                               const char *q_in, void (*fn)(struct bulk *, struct db_stmt *),
                               const char *what) {
  for (int at = 0; at < b->n;) {
    struct db_stmt *s = db_prep(c, range ? q_range : q_in);
    int rc, take;
    if (!s) return STORE_ERROR;
    if (range) {
      db_bind_i64(s, 1, b->ids[0]);
      db_bind_i64(s, 2, b->ids[b->n - 1]);
      take = b->n;
    } else {
      take = b->n - at < BULK_IN ? b->n - at : BULK_IN;
      for (int k = 0; k < BULK_IN; k++) /* a short last list repeats its last id */
        db_bind_i64(s, k + 1, b->ids[at + (k < take ? k : take - 1)]);
    }
    while ((rc = db_step(s)) == DB_ROW && !b->nomem)
      fn(b, s);
    db_reset(s);
    if (b->nomem || (rc != DB_DONE && rc != DB_ROW)) {
      log_error("loading %s of %d sites: %s", what, b->n,
                b->nomem ? "out of memory" : db_errmsg(c));
      return STORE_ERROR;
    }
    at += take;
  }
  return STORE_OK;
}

/* Hostnames and origins of arr[0..n), whose rows are filled (id 0: not there, skipped) and whose
   ids are ids[0..n), ascending. range: read one id range even when sparse (a page of the id
   order has no other sites in between). */
static enum store_rc bulk_children(struct db_conn *c, const int64_t *ids, int n,
                                   struct site_rec *arr, int range) {
  const struct sites_sql *osq = sites_sql();
  struct bulk b = {ids, n, arr, NULL, 0};
  enum store_rc rc;
  if (n == 0) return STORE_OK;
  range = range || store_bulk_dense(ids[0], ids[n - 1], n);
  b.cap = calloc((size_t)n, sizeof *b.cap);
  if (!b.cap) return STORE_ERROR;
  rc = bulk_read(c, &b, range, bulk_hosts_range, bulk_hosts_in, bulk_host_row, "hostnames");
  if (rc == STORE_OK)
    rc = osq ? bulk_read(c, &b, range, osq->bulk_range, osq->bulk_in, bulk_origin_row, "origins")
             : STORE_ERROR;
  free(b.cap);
  return rc;
}

struct id_at {
  int64_t id;
  int at; /* position in the caller's list */
};

static int id_at_cmp(const void *a, const void *b) {
  int64_t x = ((const struct id_at *)a)->id, y = ((const struct id_at *)b)->id;
  return x < y ? -1 : x > y;
}

enum store_rc store_sites_load(struct db_conn *c, const int64_t *ids, int n, struct site_rec *out) {
  const struct sites_sql *osq = sites_sql();
  int64_t *sorted = NULL;
  struct id_at *pairs = NULL;
  int *ord = NULL, in_order = 1;
  unsigned char *done = NULL;
  struct bulk b;
  enum store_rc rc = STORE_ERROR;
  if (n <= 0) return n == 0 ? STORE_OK : STORE_ERROR;
  memset(out, 0, (size_t)n * sizeof *out);
  for (int i = 1; i < n; i++)
    if (ids[i] <= ids[i - 1]) in_order = 0;
  if (!in_order) {
    sorted = malloc((size_t)n * sizeof *sorted);
    pairs = malloc((size_t)n * sizeof *pairs);
    ord = malloc((size_t)n * sizeof *ord);
    done = calloc((size_t)n, 1);
    if (!sorted || !pairs || !ord || !done) goto out;
    for (int i = 0; i < n; i++)
      pairs[i] = (struct id_at){ids[i], i};
    qsort(pairs, (size_t)n, sizeof *pairs, id_at_cmp);
    for (int k = 0; k < n; k++) {
      sorted[k] = pairs[k].id;
      ord[k] = pairs[k].at;
      if (k > 0 && sorted[k] == sorted[k - 1]) {
        log_error("loading sites: site %lld asked for twice", (long long)sorted[k]);
        goto out;
      }
    }
  }
  b = (struct bulk){in_order ? ids : sorted, n, out, NULL, 0};
  rc = osq ? bulk_read(c, &b, store_bulk_dense(b.ids[0], b.ids[n - 1], n), osq->site_range,
                       osq->site_in, bulk_site_row, "sites")
           : STORE_ERROR;
  if (rc == STORE_OK) rc = bulk_children(c, b.ids, n, out, 0);
  if (rc != STORE_OK) {
    for (int i = 0; i < n; i++)
      site_rec_fini(&out[i]);
    memset(out, 0, (size_t)n * sizeof *out);
    goto out;
  }
  /* out[k] holds sorted[k]; move each to ord[k], the caller's position, one cycle at a time */
  for (int k = 0; !in_order && k < n; k++) {
    struct site_rec carry;
    int pos;
    if (done[k]) continue;
    carry = out[k];
    done[k] = 1;
    for (pos = ord[k]; pos != k; pos = ord[pos]) {
      struct site_rec t = out[pos];
      out[pos] = carry;
      carry = t;
      done[pos] = 1;
    }
    out[k] = carry;
  }
out:
  free(sorted);
  free(pairs);
  free(ord);
  free(done);
  return rc;
}

enum store_rc store_site_get(struct store *st, int64_t id, struct site_rec *out) {
  struct db_conn *c = store_reader(st);
  enum store_rc rc;
  if (!c || store_read_begin(c) < 0) return STORE_ERROR;
  rc = store_site_load(c, id, out);
  store_read_end(c);
  return rc;
}

enum store_rc store_sites_get(struct store *st, const int64_t *ids, int n, struct site_rec *out) {
  struct db_conn *c = store_reader(st);
  enum store_rc rc;
  if (!c || store_read_begin(c) < 0) return STORE_ERROR;
  rc = store_sites_load(c, ids, n, out);
  store_read_end(c);
  return rc;
}

enum store_rc store_site_list(struct store *st, int64_t after, int limit, struct site_rec **out,
                              int *n) {
  const struct sites_sql *osq = sites_sql();
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c && osq ? db_prep(c, osq->site_page) : NULL;
  struct site_rec *arr = NULL, *na;
  int64_t *ids = NULL;
  int cnt = 0, cap = 0, rc, grown = 1;
  *out = NULL;
  *n = 0;
  if (!s || store_read_begin(c) < 0) return STORE_ERROR;
  db_bind_i64(s, 1, after);
  db_bind_int(s, 2, limit);
  /* grown as rows come: a record is about 16 KiB, and a page is often shorter than its limit */
  while ((rc = db_step(s)) == DB_ROW && cnt < limit) {
    if (!(na = store_grow(arr, &cap, cnt, sizeof *arr, 8))) {
      grown = 0;
      break;
    }
    arr = na;
    memset(&arr[cnt], 0, sizeof *arr);
    site_from_row(s, &arr[cnt++]);
  }
  db_reset(s);
  ids = calloc((size_t)(cnt ? cnt : 1), sizeof *ids);
  for (int i = 0; ids && i < cnt; i++)
    ids[i] = arr[i].id;
  /* the page is every site from its first id to its last: one range holds all their children */
  if (rc == DB_ERR || !grown || !ids || bulk_children(c, ids, cnt, arr, 1) != STORE_OK) {
    store_read_end(c);
    for (int j = 0; j < cnt; j++)
      site_rec_fini(&arr[j]);
    free(arr);
    free(ids);
    return STORE_ERROR;
  }
  free(ids);
  store_read_end(c);
  *out = arr;
  *n = cnt;
  return STORE_OK;
}

/* PostgreSQL: every hostname of s in one statement, sent ahead (db_prefetch) so it can share a
   round trip with the next statement; NULL on failure. hostnames_pg_read reads its answer. */
static struct db_stmt *hostnames_pg_send(struct store *st, const struct site_rec *s) {
  static const char ins[] =
      "INSERT INTO hostnames (hostname, site_id, position) SELECT t.h, ?::bigint, t.p - 1 "
      "FROM unnest(?::text[]) WITH ORDINALITY AS t(h, p) ON CONFLICT (hostname) DO NOTHING "
      "RETURNING position";
  struct db_arr a;
  struct db_stmt *q;
  memset(&a, 0, sizeof a);
  for (int i = 0; i < s->n_hostnames; i++)
    db_arr_text(&a, s->hostnames[i]);
  q = db_prep(st->w, ins);
  if (q) {
    db_bind_i64(q, 1, s->id);
    db_bind_arr(q, 2, &a);
    if (db_prefetch(q) < 0) {
      log_error("inserting hostnames: %s", db_errmsg(st->w));
      db_reset(q);
      q = NULL;
    }
  }
  db_arr_free(&a);
  return q;
}

/* The answer of hostnames_pg_send: the positions it did not insert were taken, and the first of
   them is the conflict reported (as the one-by-one inserts would). */
static enum store_rc hostnames_pg_read(struct store *st, struct db_stmt *q,
                                       const struct site_rec *s, char *conflict, size_t clen) {
  unsigned char done[SITE_MAX_HOSTNAMES];
  int rc;
  memset(done, 0, sizeof done);
  while ((rc = db_step(q)) == DB_ROW) {
    int64_t pos = db_col_i64(q, 0);
    if (pos >= 0 && pos < s->n_hostnames) done[pos] = 1;
  }
  db_reset(q);
  if (rc != DB_DONE) {
    log_error("inserting hostnames: %s", db_errmsg(st->w));
    return STORE_ERROR;
  }
  for (int i = 0; i < s->n_hostnames; i++)
    if (!done[i]) {
      snprintf(conflict, clen, "hostnames[%d]", i);
      return STORE_CONFLICT;
    }
  return STORE_OK;
}

/* Write the hostnames of s (after deleting the old ones, unless the site is new). STORE_CONFLICT
   names the field. */
static enum store_rc write_hostnames(struct store *st, const struct site_rec *s, char *conflict,
                                     size_t clen, int fresh) {
  static const char del[] = "DELETE FROM hostnames WHERE site_id = ?";
  static const char ins[] = "INSERT INTO hostnames (hostname, site_id, position) VALUES (?, ?, ?)";
  struct db_stmt *q;
  if (!fresh) {
    q = db_prep(st->w, del);
    if (!q) return STORE_ERROR;
    db_bind_i64(q, 1, s->id);
    if (store_step_done(st->w, q, "deleting hostnames") < 0) return STORE_ERROR;
  }
  if (db_kind(st->w) == DB_PG && s->n_hostnames > 0) {
    q = hostnames_pg_send(st, s);
    return q ? hostnames_pg_read(st, q, s, conflict, clen) : STORE_ERROR;
  }
  for (int i = 0; i < s->n_hostnames; i++) {
    char field[32];
    enum store_rc rc;
    q = db_prep(st->w, ins);
    if (!q) return STORE_ERROR;
    store_bind(q, 1, "tIi", s->hostnames[i], s->id, i);
    snprintf(field, sizeof field, "hostnames[%d]", i);
    if ((rc = store_step_unique(st->w, q, 0, field, conflict, clen, "inserting a hostname")) !=
        STORE_OK)
      return rc;
  }
  return STORE_OK;
}

static enum store_rc insert_origin(struct store *st, struct origin_rec *o) {
  const struct sites_sql *osq = sites_sql();
  struct db_stmt *q =
      osq ? db_prep(st->w, db_kind(st->w) == DB_SQLITE ? osq->insert_lite : osq->insert) : NULL;
  int next;
  if (!q) return STORE_ERROR;
  db_bind_i64(q, 1, o->site_id);
  next = store_fields_bind(q, 2, site_origin_fields, FORM_CONFIG, o);
  o->created_at = clock_wall_ms();
  db_bind_i64(q, next, o->created_at);
  /* RETURNING: the id without a second round trip */
  if (store_step_i64(st->w, q, "inserting origin", &o->id) < 0) return STORE_ERROR;
  o->health = HEALTH_UNKNOWN;
  return STORE_OK;
}

/* PostgreSQL: every origin of a new site s in one statement. The rows go in in list order, so the
   identity hands out ascending ids in that order: the ids returned, sorted, are the origins' ids
   in list order. */
static enum store_rc insert_origins_pg(struct store *st, struct site_rec *s) {
  const struct sites_sql *osq = sites_sql();
  struct db_arr a[32];
  struct db_stmt *q;
  int64_t *ids = calloc((size_t)s->n_origins, sizeof *ids), now = clock_wall_ms();
  int n = 0, rc = DB_ERR, ncfg = osq ? osq->ncfg : 0;
  enum store_rc ret = STORE_ERROR;
  memset(a, 0, sizeof a);
  if (!ids || !osq || ncfg > 32) {
    free(ids);
    return STORE_ERROR;
  }
  for (int i = 0; i < s->n_origins; i++)
    store_fields_arr(a, site_origin_fields, FORM_CONFIG, &s->origins[i]);
  q = db_prep(st->w, osq->insert_pg);
  if (q) {
    db_bind_i64(q, 1, s->id);
    db_bind_i64(q, 2, now);
    for (int k = 0; k < ncfg; k++)
      db_bind_arr(q, k + 3, &a[k]);
    while ((rc = db_step(q)) == DB_ROW)
      if (n < s->n_origins) ids[n++] = db_col_i64(q, 0);
    db_reset(q);
  }
  if (rc != DB_DONE || n != s->n_origins) {
    log_error("inserting origins: %s", rc == DB_DONE ? "ids missing" : db_errmsg(st->w));
    goto out;
  }
  qsort(ids, (size_t)n, sizeof *ids, store_id_cmp);
  for (int i = 0; i < n; i++) {
    s->origins[i].id = ids[i];
    s->origins[i].created_at = now;
    s->origins[i].health = HEALTH_UNKNOWN;
  }
  ret = STORE_OK;
out:
  for (int k = 0; k < ncfg; k++)
    db_arr_free(&a[k]);
  free(ids);
  return ret;
}

/* A change to the site's configuration or origins: revision + 1. 0 or -1. */
int store_site_bump_revision_locked(struct store_tx *tx, int64_t site_id) {
  struct store *st = store_tx_store(tx);
  /* a change of the site whether nodes are sent it or not: updated_at too (sort=changed) */
  static const char q[] = "UPDATE sites SET revision = revision + 1, updated_at = ? WHERE id = ?";
  return store_exec(st->w, "bumping revision", q, "II", clock_wall_ms(), site_id);
}

enum store_rc store_site_revision_locked(struct store_tx *tx, int64_t site_id, int64_t *revision) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "SELECT revision FROM sites WHERE id = ?";
  struct db_stmt *s = db_prep(st->w, q);
  int rc;
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, site_id);
  rc = db_step(s);
  if (rc == DB_ROW) *revision = db_col_i64(s, 0);
  db_reset(s);
  if (rc == DB_ROW) return STORE_OK;
  return rc == DB_DONE ? STORE_NOT_FOUND : STORE_ERROR;
}

enum store_rc store_site_create_locked(struct store_tx *tx, struct site_rec *s, char *conflict,
                                       size_t clen) {
  struct store *st = store_tx_store(tx);
  const struct sites_sql *osq = sites_sql();
  struct db_stmt *q, *hq = NULL;
  enum store_rc rc = STORE_ERROR, orc = STORE_OK;
  int64_t now = clock_wall_ms();
  int next;

  q = osq ? db_prep(st->w, db_kind(st->w) == DB_SQLITE ? osq->site_insert_lite : osq->site_insert)
          : NULL;
  if (!q) goto fail;
  next = store_fields_bind(q, 1, site_fields, FORM_CONFIG, s);
  if (next < 0) {
    db_reset(q);
    goto fail;
  }
  store_bind(q, next, "iII", s->current_level, now, now);
  /* RETURNING: the id without a second round trip */
  rc = store_step_unique(st->w, q, 1, "name", conflict, clen, "inserting a site");
  if (rc != STORE_OK) goto fail;
  rc = STORE_ERROR;
  s->id = db_col_i64(q, 0);
  db_reset(q);
  /* PostgreSQL: the hostnames go out with the origins, in one round trip */
  if (db_kind(st->w) == DB_PG && s->n_hostnames > 0) {
    hq = hostnames_pg_send(st, s);
    if (!hq) goto fail;
  } else {
    rc = write_hostnames(st, s, conflict, clen, 1);
    if (rc != STORE_OK) goto fail;
  }
  for (int i = 0; i < s->n_origins; i++)
    s->origins[i].site_id = s->id;
  if (db_kind(st->w) == DB_PG && s->n_origins > 1) {
    orc = insert_origins_pg(st, s);
  } else {
    for (int i = 0; i < s->n_origins && orc == STORE_OK; i++)
      orc = insert_origin(st, &s->origins[i]);
  }
  /* a taken hostname is the answer even when the origins failed with it */
  if (hq && (rc = hostnames_pg_read(st, hq, s, conflict, clen)) != STORE_OK) goto fail;
  rc = STORE_ERROR;
  if (orc != STORE_OK) goto fail;
  if (store_publish_locked(tx, s->id, "created", 0) < 0) goto fail;
  s->config_version = 1;
  s->created_at = s->updated_at = now;
  return STORE_OK;
fail:
  return rc;
}

enum store_rc store_site_create(struct store *st, struct site_rec *s, char *conflict, size_t clen) {
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return STORE_ERROR;
  return store_tx_end(tx, store_site_create_locked(tx, s, conflict, clen));
}

enum store_rc store_site_update_locked(struct store_tx *tx, struct site_rec *s, int publish,
                                       char *conflict, size_t clen) {
  struct store *st = store_tx_store(tx);
  const struct sites_sql *osq = sites_sql();
  struct db_stmt *q;
  enum store_rc rc = STORE_ERROR;
  int next;

  q = osq ? db_prep(st->w, osq->site_update) : NULL;
  if (!q) goto fail;
  next = store_fields_bind(q, 1, site_fields, FORM_CONFIG, s);
  if (next < 0) {
    db_reset(q);
    goto fail;
  }
  db_bind_i64(q, next, s->id);
  rc = store_step_unique(st->w, q, 0, "name", conflict, clen, "updating a site");
  if (rc != STORE_OK) goto fail;
  rc = STORE_ERROR;
  if (db_changes(st->w) == 0) {
    rc = STORE_NOT_FOUND;
    goto fail;
  }
  rc = write_hostnames(st, s, conflict, clen, 0);
  if (rc != STORE_OK) goto fail;
  rc = STORE_ERROR;
  if (publish && store_publish_locked(tx, s->id, "updated", 0) < 0) goto fail;
  if (store_site_bump_revision_locked(tx, s->id) < 0) goto fail;
  return STORE_OK;
fail:
  return rc;
}

enum store_rc store_site_update(struct store *st, struct site_rec *s, char *conflict, size_t clen) {
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return STORE_ERROR;
  return store_tx_end(tx, store_site_update_locked(tx, s, 1, conflict, clen));
}

/* Forget the nodes' observations and the verdicts of an origin (or of every origin of a site:
   origin_id 0), before the origin or the site is deleted: on PostgreSQL verdicts carry no foreign
   keys (schema/pg/0010), so nothing deletes them by cascade. Verdicts go by origin, through the
   index on verdicts (origin_id, id). */
static int drop_origin_rows_locked(struct store_tx *tx, int64_t site_id, int64_t origin_id) {
  struct store *st = store_tx_store(tx);
  static const char *const q[2][2] = {
      {"DELETE FROM node_observations WHERE site_id = ?",
       "DELETE FROM verdicts WHERE origin_id IN (SELECT id FROM origins WHERE site_id = ?)"},
      {"DELETE FROM node_observations WHERE origin_id = ?",
       "DELETE FROM verdicts WHERE origin_id = ?"}};
  for (int i = 0; i < 2; i++) {
    struct db_stmt *s = db_prep(st->w, q[origin_id != 0][i]);
    if (!s) return -1;
    db_bind_i64(s, 1, origin_id ? origin_id : site_id);
    if (store_step_done(st->w, s, i ? "dropping verdicts" : "dropping observations") < 0) return -1;
  }
  return 0;
}

enum store_rc store_site_delete_locked(struct store_tx *tx, int64_t id) {
  struct store *st = store_tx_store(tx);
  static const char del[] = "DELETE FROM sites WHERE id = ?";
  struct db_stmt *q;
  enum store_rc rc = STORE_ERROR;
  if (drop_origin_rows_locked(tx, id, 0) < 0) goto fail; /* while its origins are there */
  q = db_prep(st->w, del);
  if (!q) goto fail;
  db_bind_i64(q, 1, id);
  if (store_step_done(st->w, q, "deleting site") < 0) goto fail;
  if (db_changes(st->w) == 0) {
    rc = STORE_NOT_FOUND;
    goto fail;
  }
  if (store_publish_locked(tx, id, "deleted", 1) < 0) goto fail;
  return STORE_OK;
fail:
  return rc;
}

enum store_rc store_site_delete(struct store *st, int64_t id) {
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return STORE_ERROR;
  return store_tx_end(tx, store_site_delete_locked(tx, id));
}

/* 1 when the site exists (writer connection, inside a transaction). */
static int site_exists_locked(struct store_tx *tx, int64_t site_id) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "SELECT 1 FROM sites WHERE id = ?";
  struct db_stmt *s = db_prep(st->w, q);
  int rc;
  if (!s) return 0;
  db_bind_i64(s, 1, site_id);
  rc = db_step(s);
  db_reset(s);
  return rc == DB_ROW;
}

/* Number of origins of a site on the writer, or -1. */
static int origin_count_locked(struct store_tx *tx, int64_t site_id) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "SELECT COUNT(*) FROM origins WHERE site_id = ?";
  struct db_stmt *s = db_prep(st->w, q);
  int n = -1;
  if (!s) return -1;
  db_bind_i64(s, 1, site_id);
  if (db_step(s) == DB_ROW) n = db_col_int(s, 0);
  db_reset(s);
  return n;
}

enum store_rc store_origin_add_locked(struct store_tx *tx, struct origin_rec *o) {
  struct store *st = store_tx_store(tx);
  enum store_rc rc = STORE_ERROR;
  int count;
  if (!site_exists_locked(tx, o->site_id)) {
    rc = STORE_NOT_FOUND;
    goto fail;
  }
  /* counted under the writer lock, so concurrent adds cannot pass the cap together */
  count = origin_count_locked(tx, o->site_id);
  if (count < 0) goto fail;
  if (count >= SITE_MAX_ORIGINS) {
    rc = STORE_LIMIT;
    goto fail;
  }
  if (insert_origin(st, o) != STORE_OK) goto fail;
  if (store_publish_locked(tx, o->site_id, "origin_added", 0) < 0) goto fail;
  if (store_site_bump_revision_locked(tx, o->site_id) < 0) goto fail;
  return STORE_OK;
fail:
  return rc;
}

enum store_rc store_origin_add(struct store *st, struct origin_rec *o) {
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return STORE_ERROR;
  return store_tx_end(tx, store_origin_add_locked(tx, o));
}

enum store_rc store_origin_update_locked(struct store_tx *tx, const struct origin_rec *o,
                                         int publish) {
  struct store *st = store_tx_store(tx);
  const struct sites_sql *osq = sites_sql();
  struct db_stmt *q;
  enum store_rc rc = STORE_ERROR;
  int next;
  q = osq ? db_prep(st->w, osq->update) : NULL;
  if (!q) goto fail;
  /* ?1..?ncfg: PostgreSQL needs every number up to the highest used */
  next = store_fields_bind(q, 1, site_origin_fields, FORM_CONFIG, o);
  db_bind_i64(q, next, o->id);
  db_bind_i64(q, next + 1, o->site_id);
  if (store_step_done(st->w, q, "updating origin") < 0) goto fail;
  if (db_changes(st->w) == 0) {
    rc = STORE_NOT_FOUND;
    goto fail;
  }
  if (publish && store_publish_locked(tx, o->site_id, "origin_updated", 0) < 0) goto fail;
  if (store_site_bump_revision_locked(tx, o->site_id) < 0) goto fail;
  return STORE_OK;
fail:
  return rc;
}

enum store_rc store_origin_update(struct store *st, const struct origin_rec *o) {
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return STORE_ERROR;
  return store_tx_end(tx, store_origin_update_locked(tx, o, 1));
}

enum store_rc store_origin_delete_locked(struct store_tx *tx, int64_t site_id, int64_t origin_id) {
  struct store *st = store_tx_store(tx);
  static const char del[] = "DELETE FROM origins WHERE id = ? AND site_id = ?";
  struct db_stmt *q;
  enum store_rc rc = STORE_ERROR;
  q = db_prep(st->w, del);
  if (!q) goto fail;
  db_bind_i64(q, 1, origin_id);
  db_bind_i64(q, 2, site_id);
  if (store_step_done(st->w, q, "deleting origin") < 0) goto fail;
  if (db_changes(st->w) == 0) {
    rc = STORE_NOT_FOUND;
    goto fail;
  }
  if (drop_origin_rows_locked(tx, site_id, origin_id) < 0) goto fail;
  if (store_publish_locked(tx, site_id, "origin_deleted", 0) < 0) goto fail;
  if (store_site_bump_revision_locked(tx, site_id) < 0) goto fail;
  return STORE_OK;
fail:
  return rc;
}

enum store_rc store_origin_delete(struct store *st, int64_t site_id, int64_t origin_id) {
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return STORE_ERROR;
  return store_tx_end(tx, store_origin_delete_locked(tx, site_id, origin_id));
}

enum store_rc store_site_get_locked(struct store_tx *tx, int64_t id, struct site_rec *out) {
  struct store *st = store_tx_store(tx);
  return store_site_load(st->w, id, out);
}

enum store_rc store_site_ids(struct store *st, int64_t after, int limit, int64_t *ids, int *n) {
  static const char q[] = "SELECT id FROM sites WHERE id > ? ORDER BY id LIMIT ?";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  int rc;
  *n = 0;
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, after);
  db_bind_int(s, 2, limit);
  while ((rc = db_step(s)) == DB_ROW && *n < limit)
    ids[(*n)++] = db_col_i64(s, 0);
  db_reset(s);
  return rc == DB_DONE || rc == DB_ROW ? STORE_OK : STORE_ERROR;
}

struct db_stmt *store_origin_insert_with_id(struct store *st, int64_t site_id,
                                            const struct origin_rec *o) {
  const struct sites_sql *osq = sites_sql();
  struct db_stmt *q = osq ? db_prep(st->w, osq->insert_id) : NULL;
  int next;
  if (!q) return NULL;
  db_bind_i64(q, 1, o->id);
  db_bind_i64(q, 2, site_id);
  next = store_fields_bind(q, 3, site_origin_fields, FORM_CONFIG, o);
  db_bind_i64(q, next, o->created_at);
  return q;
}
