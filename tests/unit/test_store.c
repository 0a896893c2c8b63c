/* Unit tests for controld/store: migrations, sites, origins, conflicts, publications, events.
   `test_store` runs them on a SQLite file per test; `test_store pg` on a PostgreSQL database
   per test, created in the cluster CDNCA_TEST_PG names (ctest: pg.test_store, fixture pg). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "clock.h"
#include "db.h"
#include "log.h"
#include "schema.h"
#include "store.h"
#include "store_applied.h"
#include "store_core.h"
#include "store_drills.h"
#include "store_enrol.h"
#include "store_events.h"
#include "store_health.h"
#include "store_incidents.h"
#include "store_node.h"
#include "store_pub.h"
#include "store_sites.h"
#include "store_tokens.h"

struct fx {
  char dir[64];
  char path[512]; /* what store_open gets: the SQLite file, or the PostgreSQL conninfo */
  char dbname[64];
  struct store *st;
  int64_t hook_seq;
  int hook_calls;
  int event_calls;
};

/* PostgreSQL mode: the cluster's conninfo (CDNCA_TEST_PG), else SQLite */
static const char *g_pg;
static int g_dbs;

static void on_pub(void *arg, int64_t seq) {
  struct fx *f = arg;
  f->hook_seq = seq;
  f->hook_calls++;
}

static void on_event(void *arg) {
  struct fx *f = arg;
  f->event_calls++;
}

/* Run one statement on the cluster's maintenance database (CREATE/DROP DATABASE). */
static int pg_admin(const char *sql) {
  struct db_conn *a = db_open(g_pg);
  int rc = a ? db_exec(a, sql) : -1;
  if (rc < 0) fprintf(stderr, "test_store pg: %s: %s\n", sql, a ? db_errmsg(a) : "no connection");
  db_close(a);
  return rc;
}

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof *f);
  if (!f) return -1;
  snprintf(f->dir, sizeof f->dir, "/tmp/cdnca-test-store-XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  if (g_pg) {
    char sql[128];
    snprintf(f->dbname, sizeof f->dbname, "t_store_%ld_%d", (long)getpid(), ++g_dbs);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", f->dbname);
    if (pg_admin(sql) < 0) return -1;
    /* later keywords win in a conninfo string */
    snprintf(f->path, sizeof f->path, "%s dbname=%s", g_pg, f->dbname);
  } else {
    snprintf(f->path, sizeof f->path, "%s/t.db", f->dir);
  }
  f->st = store_open(f->path);
  if (!f->st) return -1;
  store_set_pub_hook(f->st, on_pub, f);
  store_set_event_hook(f->st, on_event, f);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  char p[600];
  store_close(&f->st);
  if (g_pg) {
    snprintf(p, sizeof p, "DROP DATABASE IF EXISTS %s WITH (FORCE)", f->dbname);
    (void)pg_admin(p);
  } else {
    snprintf(p, sizeof p, "%s-wal", f->path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", f->path);
    unlink(p);
    unlink(f->path);
  }
  rmdir(f->dir);
  free(f);
  return 0;
}

/* A site record with n origins (level i/2 + 1, ports 8000 + i). Caller site_rec_fini's it. */
static void make_site(struct site_rec *s, const char *name, const char *host, int n) {
  site_rec_defaults(s);
  snprintf(s->name, sizeof s->name, "%s", name);
  s->n_hostnames = 1;
  snprintf(s->hostnames[0], sizeof s->hostnames[0], "%s", host);
  s->n_origins = n;
  s->origins = calloc((size_t)(n ? n : 1), sizeof *s->origins);
  assert_non_null(s->origins);
  for (int i = 0; i < n; i++) {
    struct origin_rec *o = &s->origins[i];
    o->level = i / 2 + 1;
    o->port = 8000 + i;
    o->weight = 1;
    o->enabled = 1;
    snprintf(o->address, sizeof o->address, "10.0.0.%d", i + 1);
    o->scheme = i % 2 ? SCHEME_HTTP : SCHEME_HTTPS;
  }
}

static int64_t create_site(struct fx *f, const char *name, const char *host, int n) {
  struct site_rec s;
  char conflict[64] = "";
  make_site(&s, name, host, n);
  assert_int_equal(store_site_create(f->st, &s, conflict, sizeof conflict), STORE_OK);
  assert_true(s.id > 0);
  site_rec_fini(&s);
  return s.id;
}

static int count_sites(struct fx *f) {
  struct site_rec *arr = NULL;
  int n = 0;
  assert_int_equal(store_site_list(f->st, 0, 1000, &arr, &n), STORE_OK);
  for (int i = 0; i < n; i++)
    site_rec_fini(&arr[i]);
  free(arr);
  return n;
}

/* Run SQL on a separate connection (to set state the store's API does not write). */
static void raw_sql(struct fx *f, const char *sql) {
  struct db_conn *c = db_open(f->path);
  if (!c) fail_msg("cannot open %s", f->path);
  if (db_exec(c, sql) < 0) fail_msg("%s: %s", sql, db_errmsg(c));
  db_close(c);
}

/* One integer read on a separate connection (the first column of the first row). */
static int64_t raw_i64(struct fx *f, const char *sql) {
  struct db_conn *c = db_open(f->path);
  struct db_stmt *q;
  int64_t v;
  if (!c) fail_msg("cannot open %s", f->path);
  if (!(q = db_prep(c, sql)) || db_step(q) != DB_ROW) fail_msg("%s: %s", sql, db_errmsg(c));
  v = db_col_i64(q, 0);
  db_reset(q);
  db_close(c);
  return v;
}

/* The newest migration of this build for the dialect under test. */
static int newest_version(void) {
  return g_pg ? schema_pg_migrations[schema_pg_migrations_count - 1].version
              : schema_migrations[schema_migrations_count - 1].version;
}

/* Make the database look migrated to version v (SQLite: user_version; PostgreSQL: a row in the
   driver's schema_migrations, or the rows above v deleted). */
static void set_version(struct fx *f, int v) {
  char sql[160];
  if (!g_pg)
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v);
  else if (v > newest_version())
    snprintf(sql, sizeof sql,
             "INSERT INTO schema_migrations (version, name) VALUES (%d, '%04d_future.sql')", v, v);
  else
    snprintf(sql, sizeof sql, "DELETE FROM schema_migrations WHERE version > %d", v);
  raw_sql(f, sql);
}

static void test_open_migrations(void **state) {
  struct fx *f = *state;
  char bad[200];
  assert_int_equal(store_schema_version(f->st), newest_version());
  assert_int_equal(store_pub_seq(f->st), 0);
  create_site(f, "a", "a.com", 1);
  /* reopening applies nothing again and keeps the data */
  store_close(&f->st);
  assert_null(f->st);
  f->st = store_open(f->path);
  assert_non_null(f->st);
  assert_int_equal(store_schema_version(f->st), newest_version());
  assert_int_equal(count_sites(f), 1);
  /* a database newer than this code is refused */
  store_close(&f->st);
  set_version(f, 99);
  assert_null(store_open(f->path));
  set_version(f, newest_version());
  f->st = store_open(f->path);
  assert_non_null(f->st);
  store_set_pub_hook(f->st, on_pub, f);
  /* an unopenable path fails cleanly */
  snprintf(bad, sizeof bad, "%s/no/such/dir/x.db", f->dir);
  assert_null(store_open(bad));
}

static void test_site_create_get(void **state) {
  struct fx *f = *state;
  struct site_rec s, g;
  char conflict[64] = "";
  make_site(&s, "shop", "shop.example.com", 3);
  s.n_hostnames = 2;
  snprintf(s.hostnames[1], sizeof s.hostnames[1], "www.shop.example.com");
  s.failback = HEALTH_FAILBACK_MANUAL;
  s.hc_enabled = 1;
  s.hc_timeout_ms = 1234;
  s.n_retry_on_status = 2;
  s.retry_on_status[0] = 500;
  s.retry_on_status[1] = 599;
  snprintf(s.origins[2].host_header, sizeof s.origins[2].host_header, "h.example.com");
  assert_int_equal(store_site_create(f->st, &s, conflict, sizeof conflict), STORE_OK);
  assert_true(s.id > 0);
  assert_int_equal(s.config_version, 1);
  for (int i = 0; i < 3; i++) {
    assert_true(s.origins[i].id > 0);
    assert_int_equal(s.origins[i].site_id, s.id);
  }
  assert_int_equal(store_site_get(f->st, s.id, &g), STORE_OK);
  assert_string_equal(g.name, "shop");
  assert_int_equal(g.n_hostnames, 2);
  assert_string_equal(g.hostnames[0], "shop.example.com");
  assert_string_equal(g.hostnames[1], "www.shop.example.com");
  assert_int_equal(g.failback, HEALTH_FAILBACK_MANUAL);
  assert_int_equal(g.hc_enabled, 1);
  assert_int_equal(g.hc_timeout_ms, 1234);
  assert_int_equal(g.n_retry_on_status, 2);
  assert_int_equal(g.retry_on_status[0], 500);
  assert_int_equal(g.retry_on_status[1], 599);
  assert_int_equal(g.nr_skip_ms, 30000);
  assert_int_equal(g.current_level, 1);
  assert_int_equal(g.config_version, 1);
  assert_true(g.created_at > 0);
  assert_int_equal(g.n_origins, 3);
  /* ordered by level, then id */
  assert_int_equal(g.origins[0].level, 1);
  assert_int_equal(g.origins[1].level, 1);
  assert_int_equal(g.origins[2].level, 2);
  assert_true(g.origins[0].id < g.origins[1].id);
  assert_int_equal(g.origins[0].port, 8000);
  assert_int_equal(g.origins[1].scheme, SCHEME_HTTP);
  assert_string_equal(g.origins[2].host_header, "h.example.com");
  assert_string_equal(g.origins[0].host_header, "");
  for (int i = 0; i < 3; i++) {
    assert_int_equal(g.origins[i].health, HEALTH_UNKNOWN);
    assert_int_equal(g.origins[i].enabled, 1);
  }
  site_rec_fini(&g);
  assert_int_equal(store_site_get(f->st, s.id + 100, &g), STORE_NOT_FOUND);
  site_rec_fini(&g);
  site_rec_fini(&s);
}

static void test_site_list(void **state) {
  struct fx *f = *state;
  int64_t ids[5];
  struct site_rec *arr = NULL;
  int n = 0;
  char name[16], host[32];
  for (int i = 0; i < 5; i++) {
    snprintf(name, sizeof name, "s%d", i);
    snprintf(host, sizeof host, "s%d.com", i);
    ids[i] = create_site(f, name, host, i % 3);
  }
  assert_int_equal(store_site_list(f->st, 0, 2, &arr, &n), STORE_OK);
  assert_int_equal(n, 2);
  assert_int_equal(arr[0].id, ids[0]);
  assert_int_equal(arr[1].id, ids[1]);
  assert_int_equal(arr[1].n_origins, 1);
  assert_string_equal(arr[1].hostnames[0], "s1.com");
  for (int i = 0; i < n; i++)
    site_rec_fini(&arr[i]);
  free(arr);
  assert_int_equal(store_site_list(f->st, ids[1], 10, &arr, &n), STORE_OK);
  assert_int_equal(n, 3);
  assert_int_equal(arr[0].id, ids[2]);
  assert_int_equal(arr[0].n_origins, 2);
  assert_int_equal(arr[2].id, ids[4]);
  for (int i = 0; i < n; i++)
    site_rec_fini(&arr[i]);
  free(arr);
  assert_int_equal(store_site_list(f->st, ids[4], 10, &arr, &n), STORE_OK);
  assert_int_equal(n, 0);
  free(arr);
}

static void test_site_update_delete(void **state) {
  struct fx *f = *state;
  struct site_rec g;
  char conflict[64] = "";
  int64_t id = create_site(f, "a", "a.com", 2);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  memcpy(g.name, "b", 2);
  g.n_hostnames = 2;
  memcpy(g.hostnames[0], "b.com", 6);
  memcpy(g.hostnames[1], "c.com", 6);
  g.nr_retries = 7;
  assert_int_equal(store_site_update(f->st, &g, conflict, sizeof conflict), STORE_OK);
  site_rec_fini(&g);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  assert_string_equal(g.name, "b");
  assert_int_equal(g.n_hostnames, 2);
  assert_string_equal(g.hostnames[1], "c.com");
  assert_int_equal(g.nr_retries, 7);
  assert_int_equal(g.config_version, 2);
  assert_int_equal(g.n_origins, 2); /* origins untouched */
  /* the old hostname is free */
  create_site(f, "other", "a.com", 0);
  g.id = id + 100;
  assert_int_equal(store_site_update(f->st, &g, conflict, sizeof conflict), STORE_NOT_FOUND);
  site_rec_fini(&g);
  assert_int_equal(store_site_delete(f->st, id), STORE_OK);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_NOT_FOUND);
  site_rec_fini(&g);
  assert_int_equal(store_site_delete(f->st, id), STORE_NOT_FOUND);
  /* its hostnames and name are free again */
  create_site(f, "b", "b.com", 0);
}

static void test_conflicts_leave_nothing(void **state) {
  struct fx *f = *state;
  struct site_rec s, g;
  char conflict[64];
  int64_t seq, a, b;
  int calls;
  a = create_site(f, "a", "a.com", 2);
  b = create_site(f, "b", "b.com", 1);
  seq = store_pub_seq(f->st);
  calls = f->hook_calls;

  /* hostname taken (second one): nothing of the new site is written */
  make_site(&s, "new", "new.com", 2);
  s.n_hostnames = 2;
  memcpy(s.hostnames[1], "a.com", 6);
  conflict[0] = '\0';
  assert_int_equal(store_site_create(f->st, &s, conflict, sizeof conflict), STORE_CONFLICT);
  assert_string_equal(conflict, "hostnames[1]");
  site_rec_fini(&s);
  /* name taken */
  make_site(&s, "a", "free.com", 1);
  conflict[0] = '\0';
  assert_int_equal(store_site_create(f->st, &s, conflict, sizeof conflict), STORE_CONFLICT);
  assert_string_equal(conflict, "name");
  site_rec_fini(&s);
  assert_int_equal(count_sites(f), 2);
  assert_int_equal(store_pub_seq(f->st), seq);
  assert_int_equal(f->hook_calls, calls);
  /* the rolled-back hostname new.com and name "new" are free: no half-written rows */
  make_site(&s, "new", "new.com", 0);
  assert_int_equal(store_site_create(f->st, &s, conflict, sizeof conflict), STORE_OK);
  /* rolled-back inserts used no id on SQLite; a PostgreSQL identity is not rolled back (site ids
     may have gaps; publication seqs may not, see test_store_op) */
  if (g_pg)
    assert_true(s.id > b);
  else
    assert_int_equal(s.id, b + 1);
  site_rec_fini(&s);
  assert_int_equal(store_site_delete(f->st, s.id), STORE_OK);
  seq = store_pub_seq(f->st);

  /* update conflicts leave the site as it was */
  assert_int_equal(store_site_get(f->st, b, &g), STORE_OK);
  g.n_hostnames = 2;
  memcpy(g.hostnames[0], "zz.com", 7);
  memcpy(g.hostnames[1], "a.com", 6);
  assert_int_equal(store_site_update(f->st, &g, conflict, sizeof conflict), STORE_CONFLICT);
  assert_string_equal(conflict, "hostnames[1]");
  memcpy(g.name, "a", 2);
  g.n_hostnames = 1;
  assert_int_equal(store_site_update(f->st, &g, conflict, sizeof conflict), STORE_CONFLICT);
  assert_string_equal(conflict, "name");
  site_rec_fini(&g);
  assert_int_equal(store_site_get(f->st, b, &g), STORE_OK);
  assert_string_equal(g.name, "b");
  assert_int_equal(g.n_hostnames, 1);
  assert_string_equal(g.hostnames[0], "b.com");
  assert_int_equal(g.config_version, 1);
  site_rec_fini(&g);
  assert_int_equal(store_pub_seq(f->st), seq);
  /* zz.com did not stick */
  create_site(f, "zz", "zz.com", 0);
  (void)a;
}

static void test_origins(void **state) {
  struct fx *f = *state;
  struct site_rec g;
  struct origin_rec o;
  int64_t id = create_site(f, "a", "a.com", 1), seq = store_pub_seq(f->st);
  memset(&o, 0, sizeof o);
  o.site_id = id;
  o.level = 3;
  o.port = 9000;
  o.weight = 4;
  o.enabled = 1;
  memcpy(o.address, "up.example.com", 15);
  o.scheme = SCHEME_HTTP;
  assert_int_equal(store_origin_add(f->st, &o), STORE_OK);
  assert_true(o.id > 0);
  assert_int_equal(store_pub_seq(f->st), seq + 1);
  assert_int_equal(f->hook_seq, seq + 1);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  assert_int_equal(g.n_origins, 2);
  assert_int_equal(g.origins[1].id, o.id);
  assert_int_equal(g.origins[1].level, 3);
  assert_int_equal(g.origins[1].weight, 4);
  assert_string_equal(g.origins[1].address, "up.example.com");
  assert_int_equal(g.config_version, 2);
  site_rec_fini(&g);

  o.port = 9001;
  memcpy(o.host_header, "hh.com", 7);
  assert_int_equal(store_origin_update(f->st, &o), STORE_OK);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  assert_int_equal(g.origins[1].port, 9001);
  assert_string_equal(g.origins[1].host_header, "hh.com");
  assert_int_equal(g.config_version, 3);
  site_rec_fini(&g);

  /* wrong site or unknown id */
  o.site_id = id + 100;
  assert_int_equal(store_origin_update(f->st, &o), STORE_NOT_FOUND);
  assert_int_equal(store_origin_add(f->st, &o), STORE_NOT_FOUND);
  assert_int_equal(store_origin_delete(f->st, id + 100, o.id), STORE_NOT_FOUND);
  o.site_id = id;
  o.id += 100;
  assert_int_equal(store_origin_update(f->st, &o), STORE_NOT_FOUND);
  o.id -= 100;
  assert_int_equal(store_pub_seq(f->st), seq + 2);

  assert_int_equal(store_origin_delete(f->st, id, o.id), STORE_OK);
  assert_int_equal(store_origin_delete(f->st, id, o.id), STORE_NOT_FOUND);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  assert_int_equal(g.n_origins, 1);
  site_rec_fini(&g);
  assert_int_equal(store_pub_seq(f->st), seq + 3);
}

static void test_reenable_resets_health(void **state) {
  struct fx *f = *state;
  struct site_rec g;
  struct origin_rec o;
  char sql[200];
  int64_t id = create_site(f, "a", "a.com", 2);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  o = g.origins[0];
  site_rec_fini(&g);
  snprintf(sql, sizeof sql,
           "UPDATE origins SET health = 'healthy', success_streak = 2, failure_streak = 1, "
           "healthy_since = 1000 WHERE id = %lld",
           (long long)o.id);
  raw_sql(f, sql);
  /* a config change that keeps it enabled keeps its health */
  o.port = 1111;
  assert_int_equal(store_origin_update(f->st, &o), STORE_OK);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  assert_int_equal(g.origins[0].health, HEALTH_HEALTHY);
  assert_int_equal(g.origins[0].success_streak, 2);
  site_rec_fini(&g);
  /* disabling keeps it too */
  o.enabled = 0;
  assert_int_equal(store_origin_update(f->st, &o), STORE_OK);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  assert_int_equal(g.origins[0].enabled, 0);
  assert_int_equal(g.origins[0].health, HEALTH_HEALTHY);
  site_rec_fini(&g);
  /* re-enabling starts over as unknown */
  o.enabled = 1;
  assert_int_equal(store_origin_update(f->st, &o), STORE_OK);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  assert_int_equal(g.origins[0].enabled, 1);
  assert_int_equal(g.origins[0].health, HEALTH_UNKNOWN);
  assert_int_equal(g.origins[0].success_streak, 0);
  assert_int_equal(g.origins[0].failure_streak, 0);
  assert_int_equal(g.origins[0].healthy_since, 0);
  assert_int_equal(g.origins[0].port, 1111);
  site_rec_fini(&g);
}

static void test_publication_seq(void **state) {
  struct fx *f = *state;
  struct site_rec g;
  char conflict[64];
  int64_t seq = store_pub_seq(f->st), id;
  assert_int_equal(seq, 0);
  id = create_site(f, "a", "a.com", 2);
  assert_int_equal(store_pub_seq(f->st), 1);
  assert_int_equal(f->hook_seq, 1);
  assert_int_equal(f->hook_calls, 1);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  g.hc_path[1] = 'x';
  g.hc_path[2] = '\0';
  assert_int_equal(store_site_update(f->st, &g, conflict, sizeof conflict), STORE_OK);
  assert_int_equal(store_pub_seq(f->st), 2);
  g.origins[0].port = 1;
  assert_int_equal(store_origin_update(f->st, &g.origins[0]), STORE_OK);
  assert_int_equal(store_pub_seq(f->st), 3);
  assert_int_equal(store_origin_delete(f->st, id, g.origins[1].id), STORE_OK);
  assert_int_equal(store_pub_seq(f->st), 4);
  site_rec_fini(&g);
  assert_int_equal(store_site_delete(f->st, id), STORE_OK);
  assert_int_equal(store_pub_seq(f->st), 5);
  assert_int_equal(f->hook_seq, 5);
  assert_int_equal(f->hook_calls, 5);
  /* failures publish nothing */
  assert_int_equal(store_site_delete(f->st, id), STORE_NOT_FOUND);
  assert_int_equal(store_pub_seq(f->st), 5);
  assert_int_equal(f->hook_calls, 5);
  /* seq never goes back, even after deletes (AUTOINCREMENT) */
  create_site(f, "b", "b.com", 0);
  assert_int_equal(store_pub_seq(f->st), 6);
}

static void test_events(void **state) {
  struct fx *f = *state;
  struct event_rec *ev = NULL;
  int n = 0;
  int64_t ids[6];
  int64_t s1 = create_site(f, "one", "one.com", 0), s2 = create_site(f, "two", "two.com", 0);
  for (int i = 0; i < 6; i++) {
    char data[32];
    snprintf(data, sizeof data, "{\"i\":%d}", i);
    ids[i] = store_event_add(f->st, i % 2 ? s2 : s1, i % 2 ? "two" : "one", "level.switched",
                             "Origin level switched automatically", data);
    assert_true(ids[i] > 0);
    if (i) assert_true(ids[i] > ids[i - 1]);
  }
  assert_int_equal(f->event_calls, 6);
  /* every site, oldest first */
  assert_int_equal(store_event_list(f->st, 0, 0, 100, &ev, &n), STORE_OK);
  assert_int_equal(n, 6);
  for (int i = 0; i < 6; i++)
    assert_int_equal(ev[i].id, ids[i]);
  assert_string_equal(ev[1].site_name, "two");
  assert_int_equal(ev[1].site_id, s2);
  assert_string_equal(ev[1].type, "level.switched");
  assert_string_equal(ev[1].title, "Origin level switched automatically");
  assert_string_equal(ev[1].data, "{\"i\":1}");
  assert_true(ev[1].created_at > 0);
  store_events_free(ev, n);
  /* after + limit */
  assert_int_equal(store_event_list(f->st, 0, ids[1], 2, &ev, &n), STORE_OK);
  assert_int_equal(n, 2);
  assert_int_equal(ev[0].id, ids[2]);
  assert_int_equal(ev[1].id, ids[3]);
  store_events_free(ev, n);
  /* one site */
  assert_int_equal(store_event_list(f->st, s2, 0, 100, &ev, &n), STORE_OK);
  assert_int_equal(n, 3);
  for (int i = 0; i < 3; i++)
    assert_int_equal(ev[i].site_id, s2);
  store_events_free(ev, n);
  assert_int_equal(store_event_list(f->st, s1, ids[4], 100, &ev, &n), STORE_OK);
  assert_int_equal(n, 0);
  store_events_free(ev, n);
  /* events outlive their site, and NULL data is stored as {} */
  assert_int_equal(store_site_delete(f->st, s1), STORE_OK);
  assert_true(store_event_add(f->st, 0, NULL, "site.recovered", "t", NULL) > 0);
  assert_int_equal(store_event_list(f->st, 0, 0, 100, &ev, &n), STORE_OK);
  assert_int_equal(n, 7);
  assert_int_equal(ev[0].site_id, s1);
  assert_string_equal(ev[6].data, "{}");
  assert_int_equal(ev[6].site_id, 0);
  store_events_free(ev, n);
}

static void test_tokens_and_nodes(void **state) {
  struct fx *f = *state;
  struct node_rec n1, n2, *arr = NULL;
  int kind = 0, cnt = 0;
  int64_t node_id = -1;
  const char *adm = "1111111111111111111111111111111111111111111111111111111111111111";
  const char *adm2 = "2222222222222222222222222222222222222222222222222222222222222222";
  const char *nt1 = "aaaa000000000000000000000000000000000000000000000000000000000000";
  const char *nt2 = "bbbb000000000000000000000000000000000000000000000000000000000000";
  assert_int_equal(store_token_lookup(f->st, adm, &kind, &node_id), 1);
  assert_int_equal(store_token_put(f->st, STORE_TOKEN_ADMIN, adm, 0), 0);
  assert_int_equal(store_token_put(f->st, STORE_TOKEN_ADMIN, adm, 0), 0); /* kept, no error */
  assert_int_equal(store_token_lookup(f->st, adm, &kind, &node_id), 0);
  assert_int_equal(kind, STORE_TOKEN_ADMIN);
  assert_int_equal(node_id, 0);

  memset(&n1, 0, sizeof n1);
  memcpy(n1.name, "edge-1", 7);
  assert_int_equal(store_node_create(f->st, &n1, nt1), STORE_OK);
  assert_true(n1.id > 0);
  n2 = n1;
  assert_int_equal(store_node_create(f->st, &n2, nt2), STORE_CONFLICT); /* name taken */
  assert_int_equal(store_token_lookup(f->st, nt2, &kind, &node_id), 1); /* rolled back */
  memcpy(n2.name, "edge-2", 7);
  assert_int_equal(store_node_create(f->st, &n2, nt2), STORE_OK);
  assert_int_equal(store_token_lookup(f->st, nt1, &kind, &node_id), 0);
  assert_int_equal(kind, STORE_TOKEN_NODE);
  assert_int_equal(node_id, n1.id);
  assert_int_equal(store_node_list(f->st, &arr, &cnt), STORE_OK);
  assert_int_equal(cnt, 2);
  assert_string_equal(arr[0].name, "edge-1");
  assert_string_equal(arr[1].name, "edge-2");
  assert_int_equal(arr[0].last_seen_at, 0);
  free(arr);

  /* enrolling adm makes it the bootstrap token; rotating the bootstrap token drops the old one,
     not node tokens */
  assert_int_equal(store_admin_token_set(f->st, adm), 0);
  assert_int_equal(store_token_lookup(f->st, adm, &kind, &node_id), 0);
  assert_int_equal(store_admin_token_set(f->st, adm2), 0);
  assert_int_equal(store_token_lookup(f->st, adm, &kind, &node_id), 1);
  assert_int_equal(store_token_lookup(f->st, adm2, &kind, &node_id), 0);
  assert_int_equal(kind, STORE_TOKEN_ADMIN);
  assert_int_equal(store_admin_token_set(f->st, adm2), 0); /* same token again: kept */
  assert_int_equal(store_token_lookup(f->st, adm2, &kind, &node_id), 0);
  assert_int_equal(store_token_lookup(f->st, nt1, &kind, &node_id), 0);

  /* deleting a node revokes its token at once */
  assert_int_equal(store_node_delete(f->st, n1.id), STORE_OK);
  assert_int_equal(store_token_lookup(f->st, nt1, &kind, &node_id), 1);
  assert_int_equal(store_token_lookup(f->st, nt2, &kind, &node_id), 0);
  assert_int_equal(store_node_delete(f->st, n1.id), STORE_NOT_FOUND);
  /* tokens survive a reopen */
  store_close(&f->st);
  f->st = store_open(f->path);
  assert_non_null(f->st);
  assert_int_equal(store_token_lookup(f->st, adm2, &kind, &node_id), 0);
  assert_int_equal(store_token_lookup(f->st, nt2, &kind, &node_id), 0);
  assert_int_equal(node_id, n2.id);
}

static void test_rec_copy(void **state) {
  struct site_rec a, b;
  make_site(&a, "a", "a.com", 3);
  assert_int_equal(site_rec_copy(&b, &a), 0);
  assert_ptr_not_equal(a.origins, b.origins);
  assert_int_equal(b.n_origins, 3);
  assert_string_equal(b.origins[2].address, "10.0.0.3");
  a.origins[2].port = 1;
  assert_int_equal(b.origins[2].port, 8002);
  site_rec_fini(&a);
  site_rec_fini(&b);
  assert_null(b.origins);
  assert_int_equal(b.n_origins, 0);
}

/* store_op: a body that refuses after writing leaves nothing and runs no hook. */
struct op_arg {
  int64_t site_id;
  enum store_rc result; /* what the body returns after its writes */
};

static enum store_rc op_disable_first(struct store_tx *tx, void *arg) {
  struct op_arg *a = arg;
  struct site_rec s;
  enum store_rc rc = store_site_get_locked(tx, a->site_id, &s);
  if (rc != STORE_OK) return rc;
  s.origins[0].enabled = 0;
  rc = store_origin_update_locked(tx, &s.origins[0], 1);
  site_rec_fini(&s);
  return rc != STORE_OK ? rc : a->result;
}

static void test_store_op(void **state) {
  struct fx *f = *state;
  struct op_arg a;
  struct site_rec g;
  int64_t id = create_site(f, "a", "a.com", 2), seq = store_pub_seq(f->st);
  int calls = f->hook_calls;
  a.site_id = id;
  a.result = STORE_CONFLICT; /* refused after the write: rolled back */
  assert_int_equal(store_op(f->st, op_disable_first, &a), STORE_CONFLICT);
  assert_int_equal(store_pub_seq(f->st), seq);
  assert_int_equal(f->hook_calls, calls);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  assert_int_equal(g.origins[0].enabled, 1);
  assert_int_equal(g.config_version, 1);
  site_rec_fini(&g);
  a.result = STORE_OK; /* committed with its publication */
  assert_int_equal(store_op(f->st, op_disable_first, &a), STORE_OK);
  assert_int_equal(store_pub_seq(f->st), seq + 1);
  assert_int_equal(f->hook_calls, calls + 1);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  assert_int_equal(g.origins[0].enabled, 0);
  assert_int_equal(g.config_version, 2);
  site_rec_fini(&g);
  a.site_id = id + 100; /* the body's own error code comes back */
  assert_int_equal(store_op(f->st, op_disable_first, &a), STORE_NOT_FOUND);
}

/* ---- count caps (store_room_locked) ---- */

#define G_ "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?) "

struct fill_arg {
  const char *sql; /* G_ and an INSERT ... SELECT over g(i), i = 1..n (a literal: statements are
                      cached by their text's address) */
  int64_t n;
};

static enum store_rc op_fill(struct store_tx *tx, void *arg) {
  const struct fill_arg *a = arg;
  return store_exec(store_tx_store(tx)->w, "filling", a->sql, "I", a->n) < 0 ? STORE_ERROR
                                                                             : STORE_OK;
}

struct key_arg {
  struct enrolkey_rec k;
  const char *hash;
  int64_t revoke;
};

static enum store_rc op_key(struct store_tx *tx, void *arg) {
  struct key_arg *a = arg;
  if (a->revoke) return store_enrolkey_revoke_locked(tx, a->revoke, 1);
  return store_enrolkey_create_locked(tx, &a->k, a->hash, 1);
}

static void test_caps(void **state) {
  struct fx *f = *state;
  struct fill_arg nodes = {G_ "INSERT INTO nodes (name, created_at) SELECT 'bulk-' || i, 0 FROM g",
                           STORE_MAX_NODES - 1};
  struct fill_arg tokens = {G_ "INSERT INTO tokens (kind, hash, name, role, created_at) "
                               "SELECT 'admin', 'hash-' || i, 'bulk-' || i, 'admin', 0 FROM g",
                            STORE_MAX_TOKENS - 1};
  struct fill_arg keys = {G_ "INSERT INTO enrolment_keys (name, hash, created_at) "
                             "SELECT 'bulk-' || i, 'hash-' || i, 0 FROM g",
                          STORE_MAX_ENROLKEYS - 1};
  const char *h1 = "c100000000000000000000000000000000000000000000000000000000000000";
  const char *h2 = "c200000000000000000000000000000000000000000000000000000000000000";
  const char *h3 = "c300000000000000000000000000000000000000000000000000000000000000";
  struct node_rec n;
  struct token_rec t;
  struct key_arg ka;
  int kind = 0;
  int64_t node_id = 0;
  /* nodes: the last one fits, the next is refused with nothing stored, a deletion makes room */
  assert_int_equal(store_op(f->st, op_fill, &nodes), STORE_OK);
  memset(&n, 0, sizeof n);
  memcpy(n.name, "last", 5);
  assert_int_equal(store_node_create(f->st, &n, h1), STORE_OK);
  memcpy(n.name, "over", 5);
  assert_int_equal(store_node_create(f->st, &n, h2), STORE_LIMIT);
  assert_int_equal(store_token_lookup(f->st, h2, &kind, &node_id), 1);
  assert_int_equal(store_node_delete(f->st, n.id), STORE_OK);
  assert_int_equal(store_node_create(f->st, &n, h2), STORE_OK);
  /* API tokens: node tokens do not count (a full fleet leaves room for every API token) */
  assert_int_equal(store_op(f->st, op_fill, &tokens), STORE_OK);
  memset(&t, 0, sizeof t);
  memcpy(t.name, "last", 5);
  memcpy(t.role, "read", 5);
  assert_int_equal(store_token_create(f->st, &t, h3), STORE_OK);
  memcpy(t.name, "over", 5);
  assert_int_equal(store_token_create(f->st, &t, h1), STORE_LIMIT);
  /* enrolment keys: unrevoked ones count */
  assert_int_equal(store_op(f->st, op_fill, &keys), STORE_OK);
  memset(&ka, 0, sizeof ka);
  memcpy(ka.k.name, "last", 5);
  ka.hash = h1;
  assert_int_equal(store_op(f->st, op_key, &ka), STORE_OK);
  memcpy(ka.k.name, "over", 5);
  ka.hash = h2;
  assert_int_equal(store_op(f->st, op_key, &ka), STORE_LIMIT);
  ka.revoke = 1;
  assert_int_equal(store_op(f->st, op_key, &ka), STORE_OK);
  ka.revoke = 0;
  assert_int_equal(store_op(f->st, op_key, &ka), STORE_OK);
}

/* A node named name whose token hash is 64 hex digits of tag (each test its own); what
   store_node_create answered. */
static enum store_rc node_new(struct fx *f, struct node_rec *n, const char *name, char tag) {
  char hash[65];
  memset(hash, tag, 64);
  hash[64] = '\0';
  memset(n, 0, sizeof *n);
  snprintf(n->name, sizeof n->name, "%s", name);
  return store_node_create(f->st, n, hash);
}

/* A node id is never given out twice: a deleted node's history (incident impact, applied
   times) keeps its id, and the next node must not take it over. */
static void test_node_ids_not_reused(void **state) {
  struct fx *f = *state;
  struct node_rec a, b;
  assert_int_equal(node_new(f, &a, "edge-a", 'a'), STORE_OK);
  assert_int_equal(store_node_delete(f->st, a.id), STORE_OK);
  assert_int_equal(node_new(f, &b, "edge-b", 'b'), STORE_OK);
  assert_int_equal(b.id, a.id + 1);
  /* a taken name still answers the conflict, and uses no id */
  assert_int_equal(node_new(f, &b, "edge-b", 'c'), STORE_CONFLICT);
  assert_int_equal(node_new(f, &b, "edge-c", 'c'), STORE_OK);
  assert_int_equal(b.id, a.id + 2);
  if (g_pg) {
    /* a replica of a release before schema 18 (a rolling upgrade, docs/cluster.md) takes its
       ids from the identity sequence: it goes on past the ids given out here, and an id it gave
       out and deleted is not given out again here */
    int64_t old_id;
    raw_sql(f, "INSERT INTO nodes (name, created_at) VALUES ('edge-old', 1)");
    old_id = raw_i64(f, "SELECT id FROM nodes WHERE name = 'edge-old'");
    assert_int_equal(old_id, b.id + 1);
    raw_sql(f, "DELETE FROM nodes WHERE name = 'edge-old'");
    assert_int_equal(node_new(f, &b, "edge-d", 'd'), STORE_OK);
    assert_int_equal(b.id, old_id + 1);
    /* a database of schema 19 whose node_id_max (from 0018) is behind the sequence: migration
       0020 raises it, so the next id is past every id the sequence gave out */
    store_close(&f->st);
    raw_sql(f, "DROP INDEX incident_entries_event");
    raw_sql(f, "ALTER TABLE cdnca_meta DROP COLUMN site_id_max, DROP COLUMN origin_id_max");
    raw_sql(f, "UPDATE cdnca_meta SET node_id_max = 1 WHERE id = 1");
    raw_sql(f, "INSERT INTO nodes (name, created_at) VALUES ('edge-old2', 1)");
    raw_sql(f, "DELETE FROM nodes WHERE name IN ('edge-old2', 'edge-d')");
    set_version(f, 19);
    f->st = store_open(f->path);
    assert_non_null(f->st);
    assert_int_equal(store_schema_version(f->st), newest_version());
    assert_int_equal(raw_i64(f, "SELECT node_id_max FROM cdnca_meta"), old_id + 2);
    assert_int_equal(node_new(f, &b, "edge-e", 'e'), STORE_OK);
    assert_int_equal(b.id, old_id + 3);
  }
}

/* Site and origin ids are never given out twice either: a deleted site's incidents, events,
   publications and drills keep its id (SQLite handed a deleted highest id out again, and the next
   site took that history over). */
static void test_site_ids_not_reused(void **state) {
  struct fx *f = *state;
  struct site_rec b, c;
  int64_t a = create_site(f, "a", "a.com", 2), b_id, b_last_origin;
  assert_true(a > 0);
  b_id = create_site(f, "b", "b.com", 3);
  assert_int_equal(store_site_get(f->st, b_id, &b), STORE_OK);
  b_last_origin = b.origins[b.n_origins - 1].id;
  site_rec_fini(&b);
  /* the highest site, with the highest origins, deleted: the next ids are past them */
  assert_int_equal(store_site_delete(f->st, b_id), STORE_OK);
  assert_int_equal(store_site_get(f->st, create_site(f, "c", "c.com", 1), &c), STORE_OK);
  assert_int_equal(c.id, b_id + 1);
  assert_int_equal(c.origins[0].id, b_last_origin + 1);
  /* an origin deleted on its own (the newest) is not given out again either */
  assert_int_equal(store_origin_delete(f->st, c.id, c.origins[0].id), STORE_OK);
  site_rec_fini(&c);
  assert_int_equal(store_site_get(f->st, create_site(f, "d", "d.com", 1), &c), STORE_OK);
  assert_int_equal(c.origins[0].id, b_last_origin + 2);
  site_rec_fini(&c);
  if (!g_pg) {
    /* a SQLite database of schema 19: migration 0020 starts past the highest ids its history
       still names (an event of site 50 naming origin 80, an incident's origin 70) */
    store_close(&f->st);
    raw_sql(f, "DROP TRIGGER sites_id_kept; DROP TRIGGER origins_id_kept; DROP INDEX "
               "incident_entries_event; ALTER TABLE cdnca_meta DROP COLUMN site_id_max; ALTER "
               "TABLE cdnca_meta DROP COLUMN origin_id_max");
    raw_sql(f, "INSERT INTO events (site_id, type, title, data, created_at) VALUES (50, "
               "'origin.health_changed', 't', '{\"origin_id\": 80}', 1); "
               "INSERT INTO incident_origins (incident_id, origin_id, level, failed_at) VALUES (1, "
               "70, 1, 1)");
    set_version(f, 19);
    f->st = store_open(f->path);
    assert_non_null(f->st);
    assert_int_equal(store_site_get(f->st, create_site(f, "e", "e.com", 1), &c), STORE_OK);
    assert_int_equal(c.id, 51);
    assert_int_equal(c.origins[0].id, 81);
    site_rec_fini(&c);
  }
}

/* A deleted site's last publication (its tombstone) goes once it is more than PUB_DELTA_MAX
   behind the newest: a node that far behind gets the full set (store_config_snapshot decides it
   on the seqs it reads itself). One within that stays: a node in step learns the deletion from
   its delta. Before, every deleted site kept a row for good. */
static void test_tombstones_pruned(void **state) {
  struct fx *f = *state;
  struct config_snapshot snap;
  int64_t w = create_site(f, "w", "w.com", 1), x1 = create_site(f, "x1", "x1.com", 1);
  int64_t x2 = create_site(f, "x2", "x2.com", 1), y = create_site(f, "y", "y.com", 1);
  int64_t y_made = store_pub_seq(f->st), t1, newest;
  char sql[400];
  (void)w;
  assert_int_equal(store_site_delete(f->st, x1), STORE_OK);
  t1 = store_pub_seq(f->st);
  assert_int_equal(store_site_delete(f->st, x2), STORE_OK); /* t1 + 1 */
  snprintf(sql, sizeof sql,
           "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d) "
           "INSERT INTO publications (seq, site_id, config_version, reason, created_at) "
           "SELECT (SELECT MAX(seq) FROM publications) + i, %lld, i + 1, 'updated', 1 FROM n",
           PUB_DELTA_MAX, (long long)y);
  raw_sql(f, sql);
  raw_sql(f, "UPDATE publications SET created_at = 1");
  newest = raw_i64(f, "SELECT MAX(seq) FROM publications");
  assert_true(t1 == newest - PUB_DELTA_MAX - 1);
  /* gone: the replaced ones and x1's tombstone, PUB_DELTA_MAX + 1 behind; kept: w's (its only),
     x2's tombstone (PUB_DELTA_MAX behind) and y's newest */
  assert_true(store_pub_prune(f->st, 2) == PUB_DELTA_MAX + 3);
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM publications WHERE seq IN (1, %lld, %lld)",
           (long long)(t1 + 1), (long long)newest);
  assert_int_equal(raw_i64(f, sql), 3);
  assert_int_equal(raw_i64(f, "SELECT COUNT(*) FROM publications"), 3);
  /* a node holding y's creation: x1's deletion is no longer in the history, so it gets the full
     set (w's old publication keeps the history's first seq low: that bound alone let a delta
     through, without x1 in its deleted) */
  assert_int_equal(store_config_snapshot(f->st, y_made, &snap), STORE_OK);
  assert_true(snap.full && snap.n_sites == 2 && snap.n_deleted == 0);
  store_config_snapshot_free(&snap);
  /* the edge: x1's tombstone (PUB_DELTA_MAX + 1 behind) gets the full set, x2's (PUB_DELTA_MAX
     behind, kept) a delta: y changed since */
  assert_int_equal(store_config_snapshot(f->st, t1, &snap), STORE_OK);
  assert_true(snap.full);
  store_config_snapshot_free(&snap);
  assert_int_equal(store_config_snapshot(f->st, t1 + 1, &snap), STORE_OK);
  assert_true(!snap.full && snap.n_sites == 1 && snap.sites[0].id == y && snap.n_deleted == 0);
  store_config_snapshot_free(&snap);
}

/* An incident records every node's propagation of its first INCIDENT_MAX_SWITCHES switches only:
   a site flapping for hours switched hundreds of times, each a row per node. */
static void test_incident_switches_capped(void **state) {
  struct fx *f = *state;
  struct node_rec n;
  struct incident_rec rec;
  struct incident_pub *pubs = NULL;
  struct incident_ask ask;
  int np = 0;
  char sql[400];
  int64_t site = create_site(f, "flap", "flap.com", 1);
  assert_int_equal(node_new(f, &n, "edge-f", 'f'), STORE_OK);
  snprintf(sql, sizeof sql,
           "INSERT INTO incidents (site_id, site_name, state, trigger, opened_at, opened_level) "
           "VALUES (%lld, 'flap', 'open', 'origin_unhealthy', 1, 1)",
           (long long)site);
  raw_sql(f, sql);
  snprintf(sql, sizeof sql,
           "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < %d) "
           "INSERT INTO publications (seq, site_id, config_version, reason, created_at) SELECT "
           "(SELECT MAX(seq) FROM publications) + i, %lld, i + 1, 'auto_failover', 2 FROM k",
           INCIDENT_MAX_SWITCHES + 6, (long long)site);
  raw_sql(f, sql);
  ask.node_id = n.id;
  ask.seq = raw_i64(f, "SELECT MAX(seq) FROM publications");
  ask.at = 3;
  assert_int_equal(store_incident_applied_batch(f->st, &ask, 1), 0);
  assert_int_equal(raw_i64(f, "SELECT COUNT(*) FROM incident_applied"), INCIDENT_MAX_SWITCHES);
  /* the first ones: the oldest switch and not the newest */
  assert_int_equal(raw_i64(f, "SELECT MAX(seq) FROM incident_applied"), ask.seq - 6);
  rec.id = raw_i64(f, "SELECT MAX(id) FROM incidents");
  assert_int_equal(store_incident_get(f->st, rec.id, &rec), STORE_OK);
  assert_int_equal(store_incident_pubs(f->st, &rec, &pubs, &np), STORE_OK);
  assert_int_equal(np, INCIDENT_MAX_SWITCHES);
  free(pubs);
}

/* A switch applied by 1,001 nodes: the reader gives its 100 slowest rows and its median one,
   ranked, and the figures count all 1,001 (the answer's list stays small, and so does the read). */
static void test_incident_propagation_read_bounded(void **state) {
  struct fx *f = *state;
  struct applied_row *rows = NULL;
  struct incident_prop p;
  char sql[600];
  int n = 0;
  int64_t site = create_site(f, "many", "many.com", 1), seq;
  snprintf(sql, sizeof sql,
           "INSERT INTO publications (seq, site_id, config_version, reason, created_at) SELECT "
           "(SELECT MAX(seq) FROM publications) + 1, %lld, 9, 'auto_failover', 1000",
           (long long)site);
  raw_sql(f, sql);
  seq = raw_i64(f, "SELECT MAX(seq) FROM publications");
  snprintf(sql, sizeof sql,
           "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 1000) "
           "INSERT INTO incident_applied (incident_id, seq, node_id, node_name, applied_at) "
           "SELECT 77, %lld, i + 1, 'n' || i, 2000 + 3 * i FROM k",
           (long long)seq);
  raw_sql(f, sql);
  assert_int_equal(store_applied_rows(f->st, APPLIED_OF_INCIDENT, 77, &rows, &n), STORE_OK);
  assert_int_equal(n, INCIDENT_PROP_NODES_MAX + 1);
  assert_int_equal(rows[0].rank, 501); /* the median, first in applied order */
  assert_int_equal(rows[1].rank, 1001 - INCIDENT_PROP_NODES_MAX + 1);
  assert_int_equal(rows[n - 1].rank, 1001);
  for (int i = 0; i < n; i++)
    assert_int_equal(rows[i].count, 1001);
  incident_propagation(rows, n, seq, 1000, &p);
  assert_int_equal(p.applied, 1001);
  assert_int_equal(p.p50_ms, 2000 + 3 * 500 - 1000);
  assert_int_equal(p.max_ms, 2000 + 3 * 1000 - 1000);
  assert_string_equal(p.slowest, "n1000");
  free(rows);
}

/* An incident's impact summed over every (node, origin) row, however many: the API's totals. */
static void test_incident_impact_totals(void **state) {
  struct fx *f = *state;
  struct incident_totals t;
  raw_sql(f, "INSERT INTO incident_impact (incident_id, node_id, origin_id, requests, failures, "
             "backup_picks, fail_open, first_failure_at, last_failure_at) VALUES "
             "(1, 1, 10, 100, 3, 0, 0, 50, 70), (1, 1, 11, 40, 0, 40, 0, NULL, NULL), "
             "(1, 2, 10, 10, 1, 0, 2, 40, 40), (2, 3, 10, 999, 9, 9, 9, 1, 99)");
  assert_int_equal(store_incident_impact_totals(f->st, 1, &t), STORE_OK);
  assert_true(t.requests == 150 && t.failures == 4 && t.backup_picks == 40 && t.fail_open == 2);
  assert_int_equal(t.nodes, 2);
  assert_true(t.first_failure_at == 40 && t.last_failure_at == 70);
  assert_int_equal(store_incident_impact_totals(f->st, 7, &t), STORE_OK); /* none */
  assert_true(t.requests == 0 && t.nodes == 0 && t.first_failure_at == 0);
  /* past the rows the list reads: 10,000 rows of one origin and 1,000 nodes, one request each */
  raw_sql(f, "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 10049) "
             "INSERT INTO incident_impact (incident_id, node_id, origin_id, requests, failures, "
             "backup_picks, fail_open) SELECT 5, 1 + i % 1000, 100 + i / 1000, 1, 0, 0, 0 FROM k");
  assert_int_equal(store_incident_impact_totals(f->st, 5, &t), STORE_OK);
  assert_true(t.requests == 10050 && t.nodes == 1000);
}

/* ---- one snapshot per answer (store_snapshot) ---- */

struct snap_arg {
  int64_t id;
  int before, after;
  enum store_rc wrc;
};

/* Read the site, let a write commit (as another API thread's would), read it again. */
static enum store_rc snap_read(struct store *st, void *arg) {
  struct snap_arg *a = arg;
  struct site_rec g;
  char conflict[64] = "";
  if (store_site_get(st, a->id, &g) != STORE_OK) return STORE_ERROR;
  a->before = g.nr_retries;
  g.nr_retries = a->before + 1;
  a->wrc = store_site_update(st, &g, conflict, sizeof conflict);
  site_rec_fini(&g);
  if (store_site_get(st, a->id, &g) != STORE_OK) return STORE_ERROR;
  a->after = g.nr_retries;
  site_rec_fini(&g);
  return STORE_OK;
}

static enum store_rc snap_missing(struct store *st, void *arg) {
  struct site_rec g;
  enum store_rc rc = store_site_get(st, *(int64_t *)arg, &g);
  if (rc == STORE_OK) site_rec_fini(&g);
  return rc;
}

static void test_snapshot(void **state) {
  struct fx *f = *state;
  struct snap_arg a = {.id = create_site(f, "a", "a.com", 1)};
  struct site_rec g;
  int64_t missing = a.id + 100;
  /* without a snapshot the second read sees the write: what store_snapshot is for */
  assert_int_equal(snap_read(f->st, &a), STORE_OK);
  assert_int_equal(a.wrc, STORE_OK);
  assert_int_equal(a.after, a.before + 1);
  /* inside one, both reads see the state from before it, and the write still commits */
  assert_int_equal(store_snapshot(f->st, snap_read, &a), STORE_OK);
  assert_int_equal(a.wrc, STORE_OK);
  assert_int_equal(a.after, a.before);
  /* the snapshot ended: the next read sees the write */
  assert_int_equal(store_site_get(f->st, a.id, &g), STORE_OK);
  assert_int_equal(g.nr_retries, a.before + 1);
  site_rec_fini(&g);
  /* fn's answer comes back, and the reader is usable after it */
  assert_int_equal(store_snapshot(f->st, snap_missing, &missing), STORE_NOT_FOUND);
  assert_int_equal(store_snapshot(f->st, snap_missing, &a.id), STORE_OK);
}

/* ---- the store core's statement helpers (store_core.h) ---- */

struct row_t {
  int64_t id, z_null, p_null;
  int n;
  char t[8];
};

#define M(m) .offset = offsetof(struct row_t, m), .size = sizeof(((struct row_t *)0)->m)
static const struct field_def row_t_cols[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, M(id)},
    {.name = "n", .column = "n", .type = FIELD_INT, M(n)},
    {.name = "t", .column = "t", .type = FIELD_STR, M(t)},
    {.name = "z_null", .column = "z IS NULL", .type = FIELD_INT, M(z_null)},
    {.name = "p_null", .column = "p IS NULL", .type = FIELD_INT, M(p_null)},
    {.name = NULL},
};
#undef M

static enum store_rc op_rows(struct store_tx *tx, void *arg) {
  struct store *st = store_tx_store(tx);
  (void)arg;
  if (store_exec(st->w, "creating",
                 "CREATE TABLE rows_t (id BIGINT PRIMARY KEY, n INTEGER, "
                 "t TEXT, z TEXT, p BIGINT)",
                 "") < 0)
    return STORE_ERROR;
  /* the letters: I int64, i int, t text (NULL = NULL), z text ("" = NULL), P int64 (<= 0 = NULL) */
  if (store_exec(st->w, "row 1", "INSERT INTO rows_t VALUES (?, ?, ?, ?, ?)", "IitzP", (int64_t)1,
                 7, "a", "", (int64_t)0) < 0 ||
      store_exec(st->w, "row 2", "INSERT INTO rows_t VALUES (?, ?, ?, ?, ?)", "IitzP", (int64_t)2,
                 8, (const char *)NULL, "b", (int64_t)5) < 0)
    return STORE_ERROR;
  return STORE_OK;
}

/* A second row 1: refused by the primary key, named by the caller's field. */
static enum store_rc op_clash(struct store_tx *tx, void *arg) {
  struct store *st = store_tx_store(tx);
  struct db_stmt *q = db_prep(st->w, "INSERT INTO rows_t (id) VALUES (?)");
  enum store_rc rc;
  assert_non_null(q);
  store_bind(q, 1, "I", (int64_t)1);
  rc = store_step_unique(st->w, q, 0, "rows[0].id", arg, 32, "clashing");
  return rc;
}

static int fail_second(const void *ctx, struct db_stmt *s, void *rec) {
  int *calls = (int *)ctx;
  store_read_fields(row_t_cols, s, rec);
  return ++*calls == 2 ? -1 : 0;
}

static int finis;
static void count_fini(void *rec) {
  (void)rec;
  finis++;
}

static void test_statement_helpers(void **state) {
  struct fx *f = *state;
  static struct store_sql q1, q2;
  struct row_t *rows = NULL, one;
  struct db_conn *c;
  struct db_stmt *s;
  char conflict[32] = "";
  int n = -1, calls = 0;
  assert_int_equal(store_op(f->st, op_rows, NULL), STORE_OK);
  assert_int_equal(store_op(f->st, op_clash, conflict), STORE_CONFLICT);
  assert_string_equal(conflict, "rows[0].id");
  assert_int_equal(store_select(f->st, &q1, row_t_cols, " FROM rows_t WHERE id >= ? ORDER BY id",
                                sizeof *rows, 0, (void **)&rows, &n, "listing", "I", (int64_t)1),
                   STORE_OK);
  assert_int_equal(n, 2);
  assert_int_equal(rows[0].n, 7);
  assert_string_equal(rows[0].t, "a");
  assert_int_equal(rows[0].z_null, 1); /* "" as 'z' */
  assert_int_equal(rows[0].p_null, 1); /* 0 as 'P' */
  assert_string_equal(rows[1].t, "");  /* NULL as 't' reads back as "" */
  assert_int_equal(rows[1].z_null, 0);
  assert_int_equal(rows[1].p_null, 0);
  free(rows);
  /* one row, and none */
  c = store_reader(f->st);
  s = db_prep(c, store_sql(&q2, "SELECT ", row_t_cols, " FROM rows_t WHERE id = ?"));
  assert_non_null(s);
  db_bind_i64(s, 1, 2);
  assert_int_equal(store_one(c, s, sizeof one, store_read_fields, row_t_cols, NULL, &one, "one"),
                   STORE_OK);
  assert_int_equal(one.n, 8);
  db_bind_i64(s, 1, 3);
  assert_int_equal(store_one(c, s, sizeof one, store_read_fields, row_t_cols, NULL, &one, "one"),
                   STORE_NOT_FOUND);
  assert_int_equal(one.id, 0);
  /* a reader that fails: nothing is returned and every record read is finished */
  s = db_prep(c, store_sql(&q1, "SELECT ", row_t_cols, " FROM rows_t WHERE id >= ? ORDER BY id"));
  assert_non_null(s);
  db_bind_i64(s, 1, 1);
  finis = 0;
  rows = (struct row_t *)1;
  assert_int_equal(store_list_read(c, s, sizeof *rows, 0, fail_second, &calls, count_fini,
                                   (void **)&rows, &n, "failing"),
                   STORE_ERROR);
  assert_null(rows);
  assert_int_equal(n, 0);
  assert_int_equal(finis, 2);
}

/* The origin cap is counted inside the transaction that adds. */
static void test_origin_cap(void **state) {
  struct fx *f = *state;
  struct site_rec g;
  struct origin_rec o;
  int64_t id = create_site(f, "a", "a.com", 2);
  memset(&o, 0, sizeof o);
  o.site_id = id;
  o.level = 1;
  o.port = 80;
  o.weight = 1;
  o.enabled = 1;
  snprintf(o.address, sizeof o.address, "10.1.0.1");
  o.scheme = SCHEME_HTTP;
  for (int i = 2; i < SITE_MAX_ORIGINS; i++)
    assert_int_equal(store_origin_add(f->st, &o), STORE_OK);
  assert_int_equal(store_origin_add(f->st, &o), STORE_LIMIT);
  assert_int_equal(store_site_get(f->st, id, &g), STORE_OK);
  assert_int_equal(g.n_origins, SITE_MAX_ORIGINS);
  site_rec_fini(&g);
}

/* Revocation cannot be undone by a lookup racing the delete: readers look 100 node tokens up
   without pause while the nodes are deleted one by one (each delete empties the cache, so the
   lookups keep reading the database); once the deletes have returned, no lookup may find any
   token (the cache's generation refuses an answer read before a clear). */
#define RACE_NODES 100

struct racer {
  struct store *st;
  char hash[RACE_NODES][65];
  atomic_int stop;
};

static void *lookup_loop(void *arg) {
  struct racer *rc = arg;
  int kind;
  int64_t node_id;
  for (int i = 0; !atomic_load(&rc->stop); i = (i + 7) % RACE_NODES)
    (void)store_token_lookup(rc->st, rc->hash[i], &kind, &node_id);
  return NULL;
}

static void test_revocation_race(void **state) {
  struct fx *f = *state;
  static struct racer rc;
  int64_t ids[RACE_NODES];
  pthread_t th[3];
  int kind;
  int64_t node_id;
  rc.st = f->st;
  atomic_init(&rc.stop, 0);
  for (int i = 0; i < RACE_NODES; i++) {
    struct node_rec n;
    memset(&n, 0, sizeof n);
    snprintf(n.name, sizeof n.name, "edge-%d", i);
    snprintf(rc.hash[i], sizeof rc.hash[i], "%064d", i + 1);
    assert_int_equal(store_node_create(f->st, &n, rc.hash[i]), STORE_OK);
    ids[i] = n.id;
  }
  for (int i = 0; i < 3; i++)
    assert_int_equal(pthread_create(&th[i], NULL, lookup_loop, &rc), 0);
  for (int i = 0; i < RACE_NODES; i++)
    assert_int_equal(store_node_delete(f->st, ids[i]), STORE_OK);
  atomic_store(&rc.stop, 1);
  for (int i = 0; i < 3; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < RACE_NODES; i++)
    if (store_token_lookup(f->st, rc.hash[i], &kind, &node_id) != 1)
      fail_msg("the token of deleted node %d is accepted again", i);
}

/* Verdicts carry no foreign keys (schema 10): deleting an origin deletes its verdicts and
   deleting a site deletes the verdicts of all its origins; other origins' verdicts stay. */
static int verdict_count(struct fx *f, int64_t origin_id) {
  struct verdict_rec *v = NULL;
  int n = -1;
  assert_int_equal(store_health_verdicts(f->st, origin_id, 100, &v, &n), STORE_OK);
  store_health_verdicts_free(v, n);
  return n;
}

static void test_verdicts_go_with_origins(void **state) {
  struct store_tx *tx;
  struct fx *f = *state;
  struct site_rec g;
  struct verdict_row rows[6];
  int64_t a = create_site(f, "va", "va.com", 3), b = create_site(f, "vb", "vb.com", 2);
  int64_t oa[3], ob[2];
  assert_int_equal(store_site_get(f->st, a, &g), STORE_OK);
  for (int i = 0; i < 3; i++)
    oa[i] = g.origins[i].id;
  site_rec_fini(&g);
  assert_int_equal(store_site_get(f->st, b, &g), STORE_OK);
  for (int i = 0; i < 2; i++)
    ob[i] = g.origins[i].id;
  site_rec_fini(&g);
  memset(rows, 0, sizeof rows);
  for (int i = 0; i < 5; i++) {
    rows[i].round_id = 1;
    rows[i].site_id = i < 3 ? a : b;
    rows[i].origin_id = i < 3 ? oa[i] : ob[i - 3];
    rows[i].round_at = clock_wall_ms();
    rows[i].source = "control";
    rows[i].verdict = "success";
    snprintf(rows[i].state_after, sizeof rows[i].state_after, "unknown");
  }
  assert_non_null(tx = store_health_begin(f->st));
  assert_int_equal(store_health_verdicts_add_locked(tx, rows, 5), 0);
  assert_int_equal(store_health_commit(tx), 0);
  for (int i = 0; i < 3; i++)
    assert_int_equal(verdict_count(f, oa[i]), 1);
  assert_int_equal(store_origin_delete(f->st, a, oa[1]), STORE_OK);
  assert_int_equal(verdict_count(f, oa[1]), 0);
  assert_int_equal(verdict_count(f, oa[0]), 1);
  /* an origin id under the wrong site is not found and deletes nothing */
  assert_int_equal(store_origin_delete(f->st, b, oa[0]), STORE_NOT_FOUND);
  assert_int_equal(verdict_count(f, oa[0]), 1);
  assert_int_equal(store_site_delete(f->st, a), STORE_OK);
  assert_int_equal(verdict_count(f, oa[0]), 0);
  assert_int_equal(verdict_count(f, oa[2]), 0);
  assert_int_equal(verdict_count(f, ob[0]), 1);
  assert_int_equal(verdict_count(f, ob[1]), 1);
}

/* The ids a create hands back belong to the origins they are set on, whatever the list's order
   (PostgreSQL inserts them all in one statement). */
static void test_origin_ids_follow_the_list(void **state) {
  struct fx *f = *state;
  struct site_rec s, g;
  char conflict[64] = "";
  make_site(&s, "ids", "ids.com", 5);
  for (int i = 0; i < 5; i++)
    s.origins[i].level = 5 - i; /* listed from the last level to the first */
  assert_int_equal(store_site_create(f->st, &s, conflict, sizeof conflict), STORE_OK);
  assert_int_equal(store_site_get(f->st, s.id, &g), STORE_OK);
  assert_int_equal(g.n_origins, 5);
  for (int i = 0; i < 5; i++) {
    int found = 0;
    for (int j = 0; j < g.n_origins; j++)
      if (g.origins[j].id == s.origins[i].id) {
        assert_int_equal(g.origins[j].port, s.origins[i].port);
        assert_int_equal(g.origins[j].level, s.origins[i].level);
        assert_string_equal(g.origins[j].address, s.origins[i].address);
        assert_int_equal(g.origins[j].created_at, s.origins[i].created_at);
        found = 1;
      }
    assert_true(found);
  }
  site_rec_fini(&g);
  site_rec_fini(&s);
}

/* The test seam of controld --test-max-pages: a SQLite database capped at its size (SQLite does
   not go below it) fills up within a few writes; the write that does not fit answers STORE_FULL
   with nothing of it stored, and store_storage_full says so. PostgreSQL has no cap to set. */
static void test_max_pages(void **state) {
  struct fx *f = *state;
  int before = count_sites(f), made = 0;
  enum store_rc rc = STORE_OK;
  assert_int_equal(store_set_max_pages(f->st, 0), -1);
  assert_int_equal(store_set_max_pages(f->st, 1), g_pg ? -1 : 0); /* PostgreSQL: no cap */
  for (int i = 0; i < 2000 && rc == STORE_OK; i++) {
    struct site_rec s;
    char name[32], host[64], conflict[64] = "";
    snprintf(name, sizeof name, "full%d", i);
    snprintf(host, sizeof host, "full%d.example.com", i);
    make_site(&s, name, host, 10);
    rc = store_site_create(f->st, &s, conflict, sizeof conflict);
    if (rc == STORE_OK) made++;
    site_rec_fini(&s);
    if (g_pg && made == 3) break; /* no cap there: enough to see writes go on */
  }
  assert_int_equal(count_sites(f), before + made);
  if (g_pg) {
    assert_int_equal(rc, STORE_OK);
    assert_int_equal(store_storage_full(f->st), 0);
    return;
  }
  assert_int_equal(rc, STORE_FULL);
  assert_int_equal(store_storage_full(f->st), 1);
}

/* A running drill's sums saturate at DRILL_SUM_MAX however large the heartbeats' growth (no
   bigint overflow on PostgreSQL), and the drill, once finished, is pruned past its retention with
   its per-origin figures. */
static void test_drill_sums_and_prune(void **state) {
  struct fx *f = *state;
  struct site_rec s;
  struct drill_rec d, got;
  struct drill_origin *o = NULL;
  struct store_tx *tx;
  char conflict[64] = "";
  int no = 0;
  int64_t t0 = 1800000000000LL, big = INT64_MAX / 2;
  make_site(&s, "drilled", "drilled.example.com", 3); /* origins[2] on level 2 */
  assert_int_equal(store_site_create(f->st, &s, conflict, sizeof conflict), STORE_OK);
  memset(&d, 0, sizeof d);
  d.site_id = s.id;
  d.to_level = 2;
  d.from_level = 1;
  d.duration_ms = 60000;
  d.max_failure_ratio = 0.05;
  d.min_requests = 20;
  d.start_at = d.created_at = d.started_at = t0;
  d.state = DRILL_RUNNING;
  tx = store_health_begin(f->st);
  assert_non_null(tx);
  assert_int_equal(store_drill_insert_locked(tx, &d), 0);
  assert_int_equal(store_drill_site_locked(tx, s.id, d.id), 0);
  assert_int_equal(store_health_commit(tx), 0);
  for (int i = 0; i < 3; i++) {
    tx = store_health_begin(f->st);
    assert_non_null(tx);
    assert_int_equal(store_drill_observe_locked(tx, s.id, s.origins[2].id, big, big, big, big), 0);
    assert_int_equal(store_health_commit(tx), 0);
  }
  assert_int_equal(store_drill_get(f->st, d.id, &got), STORE_OK);
  assert_true(got.requests == DRILL_SUM_MAX && got.failures == DRILL_SUM_MAX);
  assert_true(got.window_requests == DRILL_SUM_MAX && got.window_failures == DRILL_SUM_MAX);
  assert_int_equal(store_drill_origins(f->st, d.id, &o, &no), STORE_OK);
  assert_int_equal(no, 1);
  assert_true(o[0].requests == DRILL_SUM_MAX && o[0].failures == DRILL_SUM_MAX);
  assert_true(o[0].latency_sum_ms == DRILL_SUM_MAX && o[0].latency_count == DRILL_SUM_MAX);
  free(o);
  o = NULL;
  /* finished at t0 + 1000: kept by a retention that ends there, pruned by one just after */
  got.state = DRILL_FINISHED;
  got.result = DRILL_PASSED;
  got.finished_at = t0 + 1000;
  tx = store_health_begin(f->st);
  assert_non_null(tx);
  assert_int_equal(store_drill_save_locked(tx, &got), 0);
  assert_int_equal(store_drill_site_locked(tx, s.id, 0), 0);
  assert_int_equal(store_health_commit(tx), 0);
  assert_true(store_drill_prune(f->st, t0 + 1000) == 0);
  assert_int_equal(store_drill_get(f->st, d.id, &got), STORE_OK);
  assert_true(store_drill_prune(f->st, t0 + 1001) == 1);
  assert_int_equal(store_drill_get(f->st, d.id, &got), STORE_NOT_FOUND);
  assert_int_equal(store_drill_origins(f->st, d.id, &o, &no), STORE_OK);
  assert_int_equal(no, 0);
  free(o);
  site_rec_fini(&s);
}

/* Open a failback ramp on site_id from level 2 back to 1 (two steps of a minute from t0). */
static void ramp_open(struct fx *f, int64_t site_id, int64_t t0) {
  struct ramp_run r = {.from_level = 2, .to_level = 1, .n_steps = 2, .steps = {50, 100}};
  struct store_tx *tx = store_health_begin(f->st);
  r.started_at = t0;
  r.step_ms = 60000;
  assert_non_null(tx);
  assert_int_equal(store_health_site_ramp_locked(tx, site_id, &r, 0, NULL), 0);
  assert_int_equal(store_health_commit(tx), 0);
}

/* A running ramp's window counts the growth of the nodes' counters on its level; an enrolled
   node reporting counters near their bound (INT64_MAX / 2) in every heartbeat, each one smaller
   than the last (read as a restart, so counted whole), saturates the window at DRILL_SUM_MAX
   instead of overflowing it (a bigint error on PostgreSQL would fail the node's heartbeats). */
static void test_ramp_window_saturates(void **state) {
  struct fx *f = *state;
  struct site_rec s, got;
  struct node_rec n;
  char conflict[64] = "";
  int64_t t0 = 1800000000000LL, big = INT64_MAX / 2;
  make_site(&s, "ramped", "ramped.example.com", 3); /* origins[0] on level 1 */
  assert_int_equal(store_site_create(f->st, &s, conflict, sizeof conflict), STORE_OK);
  ramp_open(f, s.id, t0);
  assert_int_equal(node_new(f, &n, "edge-r", 'e'), STORE_OK);
  for (int i = 0; i < 4; i++) {
    struct node_obs o = {
        .site_id = s.id, .origin_id = s.origins[0].id, .requests = big - i, .failures = big - i};
    assert_int_equal(store_node_heartbeat(f->st, n.id, "test", 0, t0 + i, &o, 1), STORE_OK);
  }
  assert_int_equal(store_site_get(f->st, s.id, &got), STORE_OK);
  assert_true(got.ramp_requests == DRILL_SUM_MAX && got.ramp_failures == DRILL_SUM_MAX);
  site_rec_fini(&got);
  site_rec_fini(&s);
}

/* Every site with an open window counts its node reports, however many are open (the first 64
   only, once), and a disabled origin's reports count by their growth like any other (without a
   stored row, each report counted whole). */
static void test_windows_every_site_and_disabled_origins(void **state) {
  enum { SITES = 70 };
  struct fx *f = *state;
  struct site_rec s[SITES], got;
  struct node_rec n;
  char conflict[64] = "", name[32];
  int64_t t0 = 1800000000000LL;
  for (int i = 0; i < SITES; i++) {
    snprintf(name, sizeof name, "w%02d", i);
    make_site(&s[i], name, name, 3); /* origins[0] and [1] on level 1 */
    if (i == SITES - 1) s[i].origins[0].enabled = 0;
    assert_int_equal(store_site_create(f->st, &s[i], conflict, sizeof conflict), STORE_OK);
    ramp_open(f, s[i].id, t0);
  }
  assert_int_equal(node_new(f, &n, "edge-w", 'f'), STORE_OK);
  for (int b = 0; b < 3; b++) { /* the same totals three times: they grew once */
    struct node_obs o[2] = {{.site_id = s[SITES - 1].id,
                             .origin_id = s[SITES - 1].origins[0].id,
                             .requests = 100,
                             .failures = 40},
                            {.site_id = s[SITES - 2].id,
                             .origin_id = s[SITES - 2].origins[1].id,
                             .requests = 10,
                             .failures = 1}};
    assert_int_equal(store_node_heartbeat(f->st, n.id, "test", 0, t0 + b, o, 2), STORE_OK);
  }
  assert_int_equal(store_site_get(f->st, s[SITES - 1].id, &got), STORE_OK);
  assert_int_equal(got.ramp_requests, 100);
  assert_int_equal(got.ramp_failures, 40);
  site_rec_fini(&got);
  assert_int_equal(store_site_get(f->st, s[SITES - 2].id, &got), STORE_OK);
  assert_int_equal(got.ramp_requests, 10);
  assert_int_equal(got.ramp_failures, 1);
  site_rec_fini(&got);
  for (int i = 0; i < SITES; i++)
    site_rec_fini(&s[i]);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_open_migrations, setup, teardown),
      cmocka_unit_test_setup_teardown(test_site_create_get, setup, teardown),
      cmocka_unit_test_setup_teardown(test_site_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_site_update_delete, setup, teardown),
      cmocka_unit_test_setup_teardown(test_conflicts_leave_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_origins, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reenable_resets_health, setup, teardown),
      cmocka_unit_test_setup_teardown(test_publication_seq, setup, teardown),
      cmocka_unit_test_setup_teardown(test_events, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tokens_and_nodes, setup, teardown),
      cmocka_unit_test(test_rec_copy),
      cmocka_unit_test_setup_teardown(test_store_op, setup, teardown),
      cmocka_unit_test_setup_teardown(test_snapshot, setup, teardown),
      cmocka_unit_test_setup_teardown(test_caps, setup, teardown),
      cmocka_unit_test_setup_teardown(test_node_ids_not_reused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_site_ids_not_reused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tombstones_pruned, setup, teardown),
      cmocka_unit_test_setup_teardown(test_incident_switches_capped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_incident_impact_totals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_incident_propagation_read_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_origin_cap, setup, teardown),
      cmocka_unit_test_setup_teardown(test_statement_helpers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_max_pages, setup, teardown),
      cmocka_unit_test_setup_teardown(test_revocation_race, setup, teardown),
      cmocka_unit_test_setup_teardown(test_verdicts_go_with_origins, setup, teardown),
      cmocka_unit_test_setup_teardown(test_origin_ids_follow_the_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_drill_sums_and_prune, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ramp_window_saturates, setup, teardown),
      cmocka_unit_test_setup_teardown(test_windows_every_site_and_disabled_origins, setup,
                                      teardown),
  };
  log_init("test_store", LOG_TEXT, LOG_ERROR);
  if (argc > 1 && strcmp(argv[1], "pg") == 0) {
    g_pg = getenv("CDNCA_TEST_PG");
    if (!g_pg || !*g_pg) {
      fprintf(stderr, "test_store pg: CDNCA_TEST_PG (a conninfo) is not set; run it through "
                      "ctest (fixture pg) or set it\n");
      return 1;
    }
    if (db_kind_of(g_pg) != DB_PG) {
      fprintf(stderr, "test_store pg: CDNCA_TEST_PG is not a PostgreSQL conninfo\n");
      return 1;
    }
    return cmocka_run_group_tests_name("store pg", tests, NULL, NULL);
  }
  if (argc > 1) {
    fprintf(stderr, "usage: test_store [pg]\n");
    return 2;
  }
  return cmocka_run_group_tests_name("store sqlite", tests, NULL, NULL);
}
