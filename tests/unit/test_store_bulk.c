/* Unit tests for the store's bulk loads (store_sites_get, the site list, the full config set):
   the same records as one store_site_get per site, in the caller's order, on SQLite and, with the
   argument "pg", on PostgreSQL (CDNCA_TEST_PG: a conninfo; ctest's `pg` fixture sets it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "db.h"
#include "fleet.h"
#include "log.h"
#include "store.h"
#include "store_core.h"
#include "store_fleet.h"
#include "store_health.h"
#include "store_node.h"
#include "store_sites.h"

#define N_SITES 200

static char g_target[600];
static int64_t g_ids[N_SITES]; /* the sites created, ascending; 0 = deleted again */
static int64_t g_max;          /* the last id created */

/* ---- pure ---- */

static void test_dense(void **state) {
  (void)state;
  assert_true(store_bulk_dense(1, 1, 1));
  assert_true(store_bulk_dense(1, 100, 100));
  assert_true(store_bulk_dense(1, 2 * 40 + 64, 40));      /* span 144 for 40 ids */
  assert_false(store_bulk_dense(1, 2 * 40 + 65, 40));     /* span 145 */
  assert_false(store_bulk_dense(5, 4, 1));                /* not ascending */
  assert_false(store_bulk_dense(1, 1, 0));                /* nothing asked */
  assert_false(store_bulk_dense(1, INT64_MAX / 2, 1000)); /* far apart: IN lists */
}

/* ---- against a database ---- */

/* The same record, byte for byte (the origins compared apart: their pointers differ). */
static void assert_same_site(const struct site_rec *a, const struct site_rec *b) {
  struct site_rec x = *a, y = *b;
  assert_int_equal(a->id, b->id);
  assert_string_equal(a->name, b->name);
  assert_int_equal(a->n_hostnames, b->n_hostnames);
  for (int i = 0; i < a->n_hostnames; i++)
    assert_string_equal(a->hostnames[i], b->hostnames[i]);
  assert_int_equal(a->n_origins, b->n_origins);
  for (int i = 0; i < a->n_origins; i++) {
    assert_int_equal(a->origins[i].id, b->origins[i].id);
    assert_memory_equal(&a->origins[i], &b->origins[i], sizeof a->origins[i]);
  }
  x.origins = y.origins = NULL;
  assert_memory_equal(&x, &y, sizeof x);
}

static void assert_as_single(struct store *st, const struct site_rec *got) {
  struct site_rec one;
  assert_int_equal(store_site_get(st, got->id, &one), STORE_OK);
  assert_same_site(got, &one);
  site_rec_fini(&one);
}

/* Site i: (i % 4) hostnames, (i % 6) origins over levels 1..3; every 7th deleted again. */
static void populate(struct store *st) {
  char conflict[64];
  for (int i = 0; i < N_SITES; i++) {
    struct site_rec s;
    int nh = i % 4 ? i % 4 : 1, no = i % 6;
    site_rec_defaults(&s);
    snprintf(s.name, sizeof s.name, "bulk-%03d", i);
    s.n_hostnames = nh;
    for (int h = 0; h < nh; h++) /* reverse alphabetical: the order must be position, not name */
      snprintf(s.hostnames[h], sizeof s.hostnames[h], "%c%03d.bulk.test", 'z' - h, i);
    s.n_origins = no;
    s.origins = calloc((size_t)(no ? no : 1), sizeof *s.origins);
    assert_non_null(s.origins);
    for (int k = 0; k < no; k++) {
      struct origin_rec *o = &s.origins[k];
      o->level = 3 - k % 3; /* created out of level order */
      o->port = 8000 + k;
      o->weight = 1 + k;
      o->enabled = k != 4;
      snprintf(o->address, sizeof o->address, "10.%d.%d.%d", i / 250, i % 250, k + 1);
      o->scheme = k % 2 ? SCHEME_HTTP : SCHEME_HTTPS;
    }
    conflict[0] = '\0';
    assert_int_equal(store_site_create(st, &s, conflict, sizeof conflict), STORE_OK);
    g_ids[i] = g_max = s.id;
    site_rec_fini(&s);
  }
  for (int i = 3; i < N_SITES; i += 7) {
    assert_int_equal(store_site_delete(st, g_ids[i]), STORE_OK);
    g_ids[i] = 0;
  }
}

static int setup(void **state) {
  struct store *st = store_open(g_target);
  if (!st) return -1;
  populate(st);
  *state = st;
  return 0;
}

static int teardown(void **state) {
  struct store *st = *state;
  int64_t ids[N_SITES];
  int n = 0;
  for (int i = 0; i < N_SITES; i++)
    if (g_ids[i]) ids[n++] = g_ids[i];
  for (int i = 0; i < n; i++)
    store_site_delete(st, ids[i]);
  store_close(&st);
  return 0;
}

/* Load ids[0..n) in bulk; each must equal its single load (or be absent: id 0). */
static void check_load(struct store *st, const int64_t *ids, int n, const int *present) {
  struct site_rec *out = calloc((size_t)n, sizeof *out);
  assert_non_null(out);
  assert_int_equal(store_sites_get(st, ids, n, out), STORE_OK);
  for (int i = 0; i < n; i++) {
    if (present[i]) {
      assert_int_equal(out[i].id, ids[i]);
      assert_as_single(st, &out[i]);
    } else {
      assert_int_equal(out[i].id, 0);
      assert_int_equal(out[i].n_origins, 0);
    }
    site_rec_fini(&out[i]);
  }
  free(out);
}

/* Ascending and dense (one range, with the deleted ones inside it): the same as single loads. */
static void test_load_dense(void **state) {
  struct store *st = *state;
  int64_t ids[N_SITES];
  int present[N_SITES];
  for (int i = 0; i < N_SITES; i++) {
    present[i] = g_ids[i] != 0;
    ids[i] = g_ids[i] ? g_ids[i] : g_ids[i - 1] + 1; /* a deleted site's own id */
  }
  check_load(st, ids, N_SITES, present);
}

/* Every 5th site (sparse: IN lists of 32, a short last one), in descending order, with ids that
   never existed mixed in. */
static void test_load_sparse_any_order(void **state) {
  struct store *st = *state;
  int64_t ids[N_SITES];
  int present[N_SITES], n = 0;
  int64_t lo = INT64_MAX, hi = 0;
  for (int i = N_SITES - 1; i >= 0; i -= 5) {
    if (!g_ids[i]) continue;
    ids[n] = g_ids[i];
    present[n++] = 1;
    if (n % 9 == 0) {
      ids[n] = g_max + 1000 + n; /* not there */
      present[n++] = 0;
    }
  }
  for (int i = 0; i < n; i++) {
    if (ids[i] < lo) lo = ids[i];
    if (ids[i] > hi) hi = ids[i];
  }
  assert_false(store_bulk_dense(lo, hi, n));
  assert_true(n > 32);
  check_load(st, ids, n, present);
}

/* Shuffled, dense: the permutation back to the caller's order. */
static void test_load_shuffled(void **state) {
  struct store *st = *state;
  int64_t ids[N_SITES];
  int present[N_SITES], n = 0;
  for (int i = 0; i < N_SITES; i++)
    if (g_ids[i]) ids[n++] = g_ids[i];
  srand(14);
  for (int i = n - 1; i > 0; i--) {
    int j = rand() % (i + 1);
    int64_t t = ids[i];
    ids[i] = ids[j];
    ids[j] = t;
  }
  for (int i = 0; i < n; i++)
    present[i] = 1;
  check_load(st, ids, n, present);
  /* one site, and none */
  check_load(st, ids, 1, present);
  assert_int_equal(store_sites_get(st, ids, 0, NULL), STORE_OK);
}

static void test_load_duplicate_refused(void **state) {
  struct store *st = *state;
  int64_t ids[3] = {g_ids[1], g_ids[0], g_ids[1]};
  struct site_rec out[3];
  assert_int_equal(store_sites_get(st, ids, 3, out), STORE_ERROR);
  for (int i = 0; i < 3; i++)
    assert_null(out[i].origins);
}

/* Pages of the site list: ascending, complete, each site as its single load. */
static void test_list_pages(void **state) {
  struct store *st = *state;
  int64_t after = 0;
  int seen = 0, expect = 0, pages = 0;
  for (int i = 0; i < N_SITES; i++)
    expect += g_ids[i] != 0;
  for (;;) {
    struct site_rec *arr = NULL;
    int n = 0;
    assert_int_equal(store_site_list(st, after, 17, &arr, &n), STORE_OK);
    for (int i = 0; i < n; i++) {
      assert_true(arr[i].id > after);
      after = arr[i].id;
      assert_as_single(st, &arr[i]);
      site_rec_fini(&arr[i]);
    }
    free(arr);
    seen += n;
    pages++;
    if (n < 17) break;
  }
  assert_int_equal(seen, expect);
  assert_int_equal(pages, expect / 17 + 1);
}

/* The full config set (since=0) and a delta with deleted sites. */
static void test_config_snapshot(void **state) {
  struct store *st = *state;
  struct config_snapshot snap;
  int expect = 0, k = 0;
  int64_t seq;
  for (int i = 0; i < N_SITES; i++)
    expect += g_ids[i] != 0;
  assert_int_equal(store_config_snapshot(st, 0, &snap), STORE_OK);
  assert_true(snap.full);
  assert_int_equal(snap.n_sites, expect);
  assert_int_equal(snap.n_deleted, 0);
  for (int i = 0; i < N_SITES; i++) {
    if (!g_ids[i]) continue;
    assert_int_equal(snap.sites[k].id, g_ids[i]);
    assert_as_single(st, &snap.sites[k]);
    k++;
  }
  seq = snap.seq;
  store_config_snapshot_free(&snap);

  /* delta: one site deleted, one changed */
  struct site_rec s;
  char conflict[64] = "";
  assert_int_equal(store_site_delete(st, g_ids[12]), STORE_OK);
  assert_int_equal(store_site_get(st, g_ids[11], &s), STORE_OK);
  snprintf(s.name, sizeof s.name, "bulk-renamed");
  assert_int_equal(store_site_update(st, &s, conflict, sizeof conflict), STORE_OK);
  site_rec_fini(&s);
  assert_int_equal(store_config_snapshot(st, seq, &snap), STORE_OK);
  assert_false(snap.full);
  assert_int_equal(snap.n_sites, 1);
  assert_int_equal(snap.sites[0].id, g_ids[11]);
  assert_string_equal(snap.sites[0].name, "bulk-renamed");
  assert_as_single(st, &snap.sites[0]);
  assert_int_equal(snap.n_deleted, 1);
  assert_int_equal(snap.deleted[0], g_ids[12]);
  store_config_snapshot_free(&snap);
  g_ids[12] = 0;
}

/* Verdict rows written in batches of 16 (and one by one for the rest) keep each origin's 100
   newest rows and none older than the age limit, as the per-row prune does. */
static void test_verdicts_batched(void **state) {
  struct store_tx *tx;
  struct store *st = *state;
  enum { NO = 20, ROUNDS = STORE_HEALTH_VERDICTS_KEEP + 5 };
  struct verdict_row rows[NO];
  int64_t origin[NO], site[NO], base = 1000000;
  int no = 0;
  for (int i = 0; i < N_SITES && no < NO; i++) {
    struct site_rec s;
    if (!g_ids[i] || store_site_get(st, g_ids[i], &s) != STORE_OK) continue;
    for (int k = 0; k < s.n_origins && no < NO; k++) {
      origin[no] = s.origins[k].id;
      site[no++] = s.id;
    }
    site_rec_fini(&s);
  }
  assert_int_equal(no, NO);
  for (int r = 1; r <= ROUNDS + 1; r++) {
    /* the last round comes after the age limit: everything before it goes */
    int64_t at = r <= ROUNDS ? base + r : base + ROUNDS + STORE_HEALTH_VERDICTS_MAX_AGE_MS + 1;
    for (int i = 0; i < NO; i++) {
      memset(&rows[i], 0, sizeof rows[i]);
      rows[i] = (struct verdict_row){r, site[i], origin[i], at, "control", "success", "", "[]"};
      snprintf(rows[i].state_after, sizeof rows[i].state_after, "healthy");
    }
    assert_non_null(tx = store_health_begin(st));
    assert_int_equal(store_health_verdicts_add_locked(tx, rows, NO), 0);
    assert_int_equal(store_health_commit(tx), 0);
    if (r == ROUNDS || r == ROUNDS + 1) {
      for (int i = 0; i < NO; i++) {
        struct verdict_rec *arr = NULL;
        int n = 0;
        assert_int_equal(store_health_verdicts(st, origin[i], 1000, &arr, &n), STORE_OK);
        assert_int_equal(n, r == ROUNDS ? STORE_HEALTH_VERDICTS_KEEP : 1);
        assert_int_equal(arr[0].round_id, r); /* newest first */
        if (r == ROUNDS)
          assert_int_equal(arr[n - 1].round_id, ROUNDS - STORE_HEALTH_VERDICTS_KEEP + 1);
        assert_string_equal(arr[0].verdict, "success");
        assert_string_equal(arr[0].state_after, "healthy");
        store_health_verdicts_free(arr, n);
      }
    }
  }
}

/* A round's origin and site writes in one call each (set-based on PostgreSQL, row by row on
   SQLite) store exactly what store_health_origin_save_locked / store_health_site_probed_locked /
   store_fleet_set_locked store one by one: empty text and zero times as NULL (read back as "" and
   0), quotes and backslashes as data. */
static void test_round_writes_batched(void **state) {
  struct store_tx *tx;
  struct store *st = *state;
  enum { NS = 6 };
  struct site_rec s[NS];
  const struct origin_rec *op[3 * NS];
  struct site_round_row rows[NS];
  struct fleet_summary before, after;
  int no = 0, ns = 0;
  assert_int_equal(store_fleet_summary(st, 0, &before), 0);
  for (int i = 0; i < N_SITES && ns < NS; i++) {
    if (!g_ids[i] || i % 6 < 2) continue; /* sites with two origins or more */
    assert_int_equal(store_site_get(st, g_ids[i], &s[ns]), STORE_OK);
    ns++;
  }
  assert_int_equal(ns, NS);
  for (int i = 0; i < NS; i++) {
    for (int k = 0; k < s[i].n_origins && k < 3; k++) {
      struct origin_rec *o = &s[i].origins[k];
      int v = i * 3 + k;
      o->health = v % 3 == 0 ? HEALTH_HEALTHY : v % 3 == 1 ? HEALTH_UNHEALTHY : HEALTH_UNKNOWN;
      o->success_streak = v;
      o->failure_streak = 100 + v;
      o->health_changed_at = v % 2 ? 5000 + v : 0;
      o->healthy_since = v % 2 ? 0 : 6000 + v;
      o->last_verdict = v % 4 ? VERDICT_FAILURE : VERDICT_NONE;
      o->last_source = v % 4 ? SOURCE_NODES : SOURCE_NONE;
      o->votes_success = 2 * v;
      o->votes_failure = 3 * v;
      o->last_checked_at = 7000 + v;
      snprintf(o->last_error, sizeof o->last_error, "%s",
               v % 2 ? "connect \"refused\" \\ {x,y} NULL" : "");
      op[no++] = o;
    }
    rows[i].site_id = s[i].id;
    rows[i].probed_at = 8000 + i;
    rows[i].next_probe_at = 9000 + i;
    rows[i].fleet = i == 0 ? FLEET_ON_BACKUP | FLEET_ALL_DOWN : i == 1 ? FLEET_PAUSED : 0;
  }
  assert_non_null(tx = store_health_begin(st));
  assert_int_equal(store_health_origins_save_locked(tx, op, no), 0);
  assert_int_equal(store_health_sites_round_locked(tx, rows, NS), 0);
  assert_int_equal(store_health_commit(tx), 0);
  for (int i = 0; i < NS; i++) {
    struct site_rec got;
    assert_int_equal(store_site_get(st, s[i].id, &got), STORE_OK);
    assert_int_equal(got.last_probed_at, 8000 + i);
    assert_int_equal(got.next_probe_at, 9000 + i);
    assert_int_equal(got.n_origins, s[i].n_origins);
    for (int k = 0; k < got.n_origins; k++) /* the origins written and the others unchanged */
      assert_memory_equal(&got.origins[k], &s[i].origins[k], sizeof got.origins[k]);
    site_rec_fini(&got);
  }
  assert_int_equal(store_fleet_summary(st, 0, &after), 0);
  assert_int_equal(after.on_backup, before.on_backup + 1);
  assert_int_equal(after.all_down, before.all_down + 1);
  assert_int_equal(after.paused, before.paused + 1);
  /* nothing to write is no statement and no error */
  assert_non_null(tx = store_health_begin(st));
  assert_int_equal(store_health_origins_save_locked(tx, op, 0), 0);
  assert_int_equal(store_health_sites_round_locked(tx, rows, 0), 0);
  assert_int_equal(store_health_commit(tx), 0);
  /* the flags back to none, for the other tests */
  for (int i = 0; i < NS; i++)
    rows[i].fleet = 0;
  assert_non_null(tx = store_health_begin(st));
  assert_int_equal(store_health_sites_round_locked(tx, rows, NS), 0);
  assert_int_equal(store_health_commit(tx), 0);
  for (int i = 0; i < NS; i++)
    site_rec_fini(&s[i]);
}

#define DB_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

static int run_db_tests(const char *name) {
  const struct CMUnitTest tests[] = {
      DB_TEST(test_load_dense),       DB_TEST(test_load_sparse_any_order),
      DB_TEST(test_load_shuffled),    DB_TEST(test_load_duplicate_refused),
      DB_TEST(test_list_pages),       DB_TEST(test_config_snapshot),
      DB_TEST(test_verdicts_batched), DB_TEST(test_round_writes_batched),
  };
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}

static int run_sqlite(void) {
  char dir[] = "/tmp/cdnca-test-bulk-XXXXXX", p[700];
  const char *suffix[] = {"", "-wal", "-shm"};
  int rc;
  if (!mkdtemp(dir)) return 1;
  snprintf(g_target, sizeof g_target, "%s/t.db", dir);
  rc = run_db_tests("store bulk sqlite");
  for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
    snprintf(p, sizeof p, "%s%s", g_target, suffix[i]);
    unlink(p);
  }
  rmdir(dir);
  return rc;
}

static int run_pg(void) {
  const char *base = getenv("CDNCA_TEST_PG");
  char dbname[64], sql[160];
  struct db_conn *a;
  int rc;
#ifndef CDNCA_HAVE_PG
  fprintf(stderr, "test_store_bulk pg: this build has no PostgreSQL driver\n");
  return 1;
#endif
  if (!base || !*base) {
    fprintf(stderr, "test_store_bulk pg: CDNCA_TEST_PG (a conninfo) is not set; run it through "
                    "ctest (fixture pg) or set it\n");
    return 1;
  }
  a = db_open(base);
  if (!a) return 1;
  snprintf(dbname, sizeof dbname, "t_bulk_%ld", (long)getpid());
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", dbname);
  if (db_exec(a, sql) < 0) goto fail;
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", dbname);
  if (db_exec(a, sql) < 0) goto fail;
  snprintf(g_target, sizeof g_target, "%s dbname=%s", base, dbname); /* the later keyword wins */
  rc = run_db_tests("store bulk pg");
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", dbname);
  if (db_exec(a, sql) < 0) fprintf(stderr, "test_store_bulk pg: %s\n", db_errmsg(a));
  db_close(a);
  return rc;
fail:
  fprintf(stderr, "test_store_bulk pg: %s\n", db_errmsg(a));
  db_close(a);
  return 1;
}

int main(int argc, char **argv) {
  const char *which = argc > 1 ? argv[1] : "sqlite";
  const struct CMUnitTest pure[] = {cmocka_unit_test(test_dense)};
  log_init("test_store_bulk", LOG_TEXT, LOG_ERROR);
  if (!strcmp(which, "sqlite"))
    return cmocka_run_group_tests_name("store bulk pure", pure, NULL, NULL) | run_sqlite();
  if (!strcmp(which, "pg")) return run_pg();
  fprintf(stderr, "usage: test_store_bulk [sqlite|pg]\n");
  return 2;
}
