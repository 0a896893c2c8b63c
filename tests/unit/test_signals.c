/* Unit tests for controld/signals: payload format and parse, the poll / resync / notification
   decisions, the reconnect backoff, and SQLite mode (no thread, caches on; caches off make every
   generation new). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "coord.h"
#include "db.h"
#include "signals.h"
#include "store.h"
#include "store_node.h"
#include "store_signal.h"

static void test_channels(void **state) {
  assert_string_equal(sigmsg_channel(SIGNAL_PUB), "cdnca_pub");
  assert_string_equal(sigmsg_channel(SIGNAL_INVAL), "cdnca_inval");
  assert_string_equal(sigmsg_channel(SIGNAL_TASKS), "cdnca_tasks");
  assert_string_equal(sigmsg_channel(SIGNAL_VOTES), "cdnca_votes");
  assert_null(sigmsg_channel(SIGNAL_KINDS));
  assert_null(sigmsg_channel((enum signal_kind) - 1));
  for (int k = 0; k < SIGNAL_KINDS; k++)
    assert_int_equal(sigmsg_kind(sigmsg_channel((enum signal_kind)k)), k);
  assert_int_equal(sigmsg_kind("cdnca_other"), -1);
  assert_int_equal(sigmsg_kind("CDNCA_PUB"), -1);
  assert_int_equal(sigmsg_kind(NULL), -1);
}

static void test_pub_payload(void **state) {
  char buf[64];
  int64_t seq = -7, gen = -7;
  assert_int_equal(sigmsg_pub_format(buf, sizeof buf, 12, 345), 14);
  assert_string_equal(buf, "seq=12 gen=345");
  assert_int_equal(sigmsg_pub_parse(buf, &seq, &gen), 0);
  assert_int_equal(seq, 12);
  assert_int_equal(gen, 345);
  assert_int_equal(sigmsg_pub_format(buf, sizeof buf, 0, INT64_MAX), 29);
  assert_int_equal(sigmsg_pub_parse(buf, &seq, &gen), 0);
  assert_int_equal(seq, 0);
  assert_true(gen == INT64_MAX);
  assert_int_equal(sigmsg_pub_format(buf, 8, 12, 345), -1); /* does not fit */
  assert_int_equal(sigmsg_pub_format(buf, sizeof buf, -1, 3), -1);
  assert_int_equal(sigmsg_pub_format(buf, sizeof buf, 1, -3), -1);

  static const char *const bad[] = {
      "",
      "seq=",
      "seq=1",
      "seq=1 gen=",
      "seq=1 gen=2 ",
      " seq=1 gen=2",
      "seq=1  gen=2",
      "seq=-1 gen=2",
      "seq=+1 gen=2",
      "seq=1 gen=-2",
      "seq=1 gen=2x",
      "seq=x gen=2",
      "gen=2 seq=1",
      "seq=9223372036854775808 gen=1",
      "seq=1 gen=99999999999999999999",
      "SEQ=1 GEN=2",
      "seq=1\tgen=2",
      "tokens",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    seq = gen = -7;
    assert_int_equal(sigmsg_pub_parse(bad[i], &seq, &gen), -1);
    assert_int_equal(seq, -7); /* untouched */
    assert_int_equal(gen, -7);
  }
  assert_int_equal(sigmsg_pub_parse(NULL, &seq, &gen), -1);
  assert_int_equal(sigmsg_pub_parse("seq=9223372036854775807 gen=0", &seq, &gen), 0);
  assert_true(seq == INT64_MAX);
}

static void test_inval_payload(void **state) {
  char buf[32];
  int64_t id = -1;
  assert_int_equal(sigmsg_inval_parse("tokens", &id), SIGMSG_INVAL_TOKENS);
  assert_int_equal(sigmsg_inval_parse("webhooks", &id), SIGMSG_INVAL_WEBHOOKS);
  assert_int_equal(sigmsg_inval_parse("events", &id), SIGMSG_INVAL_EVENTS);
  assert_int_equal(id, -1);
  assert_int_equal(sigmsg_node_format(buf, sizeof buf, 42), 7);
  assert_string_equal(buf, "node:42");
  assert_int_equal(sigmsg_inval_parse(buf, &id), SIGMSG_INVAL_NODE);
  assert_int_equal(id, 42);
  assert_int_equal(sigmsg_node_format(buf, sizeof buf, 0), -1);
  assert_int_equal(sigmsg_node_format(buf, sizeof buf, -5), -1);
  assert_int_equal(sigmsg_node_format(buf, 4, 42), -1);
  static const char *const bad[] = {"",        "token",       "tokens ",
                                    "node:",   "node:0",      "node:-1",
                                    "node:1x", "node: 1",     "node:99999999999999999999",
                                    "NODE:1",  "seq=1 gen=2", "event",
                                    "events:1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    id = -1;
    assert_int_equal(sigmsg_inval_parse(bad[i], &id), SIGMSG_INVAL_BAD);
    assert_int_equal(id, -1);
  }
  assert_int_equal(sigmsg_inval_parse(NULL, &id), SIGMSG_INVAL_BAD);
}

static void test_pub_decide(void **state) {
  struct signal_view v = {10, 100, -1};
  assert_int_equal(signal_pub_decide(&v, 11, 101), SIGNAL_ACT_WAKE | SIGNAL_ACT_GEN);
  assert_int_equal(v.seq, 11);
  assert_int_equal(v.gen, 101);
  /* an ordered write without a publication: only the generation */
  assert_int_equal(signal_pub_decide(&v, 0, 102), SIGNAL_ACT_GEN);
  assert_int_equal(v.seq, 11);
  /* an old notification (our own, already acted on): nothing */
  assert_int_equal(signal_pub_decide(&v, 11, 101), 0);
  assert_int_equal(v.gen, 102);
}

static void test_poll_decide(void **state) {
  struct signal_view v = {5, 50, -1};
  /* first poll: nothing known about missed notifications yet; a newer seq wakes */
  assert_int_equal(signal_poll_decide(&v, 6, 52), SIGNAL_ACT_WAKE);
  assert_int_equal(v.seq, 6);
  assert_int_equal(v.polled_gen, 52);
  /* the notifications brought gen to 52 in the meantime: all is well */
  signal_pub_decide(&v, 6, 52);
  assert_int_equal(signal_poll_decide(&v, 6, 55), 0);
  /* 53..55 never notified within a whole interval: missed, resync */
  assert_int_equal(signal_poll_decide(&v, 6, 55),
                   SIGNAL_ACT_GEN | SIGNAL_ACT_CLEAR | SIGNAL_ACT_NOTIFY);
  assert_int_equal(v.gen, 55);
  assert_int_equal(signal_poll_decide(&v, 6, 55), 0);
  /* a publication read by the poll before its notification: wake at once, no resync */
  assert_int_equal(signal_poll_decide(&v, 7, 56), SIGNAL_ACT_WAKE);
  signal_pub_decide(&v, 7, 56);
  assert_int_equal(signal_poll_decide(&v, 7, 56), 0);
  /* a seq behind the view (a database reset or a lagging read) is no wake */
  assert_int_equal(signal_poll_decide(&v, 3, 56), 0);
  assert_int_equal(v.seq, 7);
}

static void test_resync_decide(void **state) {
  struct signal_view v = {9, 90, 95};
  unsigned all = SIGNAL_ACT_WAKE | SIGNAL_ACT_GEN | SIGNAL_ACT_CLEAR | SIGNAL_ACT_NOTIFY;
  assert_int_equal(signal_resync_decide(&v, 12, 120), all);
  assert_int_equal(v.seq, 12);
  assert_int_equal(v.gen, 120);
  assert_int_equal(v.polled_gen, 120);
  /* the next poll at the same state finds nothing missed */
  assert_int_equal(signal_poll_decide(&v, 12, 120), 0);
  /* behind the view: everything is still redone, the seq kept */
  assert_int_equal(signal_resync_decide(&v, 4, 40), all);
  assert_int_equal(v.seq, 12);
  assert_int_equal(v.gen, 40);
}

static void test_backoff(void **state) {
  assert_int_equal(signal_backoff_ms(0), SIGNAL_BACKOFF_MIN_MS);
  assert_int_equal(signal_backoff_ms(1), 2 * SIGNAL_BACKOFF_MIN_MS);
  assert_int_equal(signal_backoff_ms(2), 4 * SIGNAL_BACKOFF_MIN_MS);
  for (int i = 0; i < 100; i++) {
    assert_true(signal_backoff_ms(i) <= SIGNAL_BACKOFF_MAX_MS);
    assert_true(signal_backoff_ms(i + 1) >= signal_backoff_ms(i));
  }
  assert_int_equal(signal_backoff_ms(1000000), SIGNAL_BACKOFF_MAX_MS);
}

static int g_calls;
static void count(void *arg, enum signal_kind kind, const char *payload) {
  g_calls++;
}

static int g_roles, g_engine = -1;
static int64_t g_epoch = -1;
static void role(void *arg, int engine, int64_t epoch) {
  (void)arg;
  g_roles++;
  g_engine = engine;
  g_epoch = epoch;
}

/* SQLite: the local coordination (no thread, the engine at once), caches on; turning caches off
   makes every generation new and turning them on again keeps it stable. */
static void test_sqlite_mode(void **state) {
  char dir[] = "/tmp/test_signals.XXXXXX", path[64];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/c.db", dir);
  struct store *st = store_open(path);
  assert_non_null(st);
  assert_int_equal(store_cluster_mode(st), 0);
  assert_int_equal(store_caches_on(st), 1);
  /* one process: the local coordination, always the engine, nothing to hear */
  struct coord *co = coord_local_new();
  assert_non_null(co);
  assert_int_equal(coord_subscribe(co, SIGNAL_TASKS, count, NULL), 0);
  assert_int_equal(coord_subscribe(co, SIGNAL_KINDS, count, NULL), -1);
  assert_int_equal(coord_subscribe(co, SIGNAL_VOTES, NULL, NULL), -1);
  assert_int_equal(coord_on_role(co, role, NULL), 0);
  assert_int_equal(coord_is_engine(co), 0);
  assert_int_equal(coord_start(co), 0);
  assert_int_equal(g_roles, 1); /* reported before coord_start returned */
  assert_int_equal(g_engine, 1);
  assert_int_equal(g_epoch, 0);
  assert_int_equal(coord_is_engine(co), 1);
  assert_int_equal(coord_epoch(co), 0);
  assert_int_equal(coord_listening(co), 1);
  assert_int_equal(coord_received(co), 0);
  assert_int_equal(g_calls, 0);
  coord_stop(co); /* the engine work stops: reported once */
  assert_int_equal(g_roles, 2);
  assert_int_equal(g_engine, 0);
  assert_int_equal(coord_is_engine(co), 0);
  coord_free(&co);
  assert_null(co);
  assert_int_equal(g_roles, 2);

  int64_t g0 = store_generation(st);
  assert_int_equal(store_generation(st), g0);
  store_gen_observe(st, 5); /* a newer cluster gen moves it */
  int64_t g1 = store_generation(st);
  assert_true(g1 > g0);
  store_gen_observe(st, 5); /* the same again does not */
  store_gen_observe(st, 3);
  assert_int_equal(store_generation(st), g1);

  store_caches_set(st, 0);
  assert_int_equal(store_caches_on(st), 0);
  int64_t a = store_generation(st), b = store_generation(st);
  assert_true(a > g1);
  assert_true(b > a);
  store_caches_set(st, 1);
  int64_t c = store_generation(st);
  assert_true(c > b);
  assert_int_equal(store_generation(st), c);

  store_close(&st);
  snprintf(path, sizeof path, "rm -rf %s", dir);
  assert_int_equal(system(path), 0);
}

/* ---- PostgreSQL (`test_signals pg`): the store's NOTIFYs at commit ---- */

static char g_pg[600]; /* conninfo of this run's database */

struct note {
  char ch[64], pl[SIGNAL_PAYLOAD_MAX];
};

/* Every notification that arrives on l within ms (at most cap). */
static int drain(struct store_listener *l, struct note *out, int cap, int ms) {
  int n = 0;
  while (n < cap &&
         store_listener_wait(l, ms, out[n].ch, sizeof out[n].ch, out[n].pl, sizeof out[n].pl) == 1)
    n++;
  return n;
}

static int has(const struct note *ns, int n, const char *ch, const char *pl) {
  for (int i = 0; i < n; i++)
    if (!strcmp(ns[i].ch, ch) && (!pl || !strcmp(ns[i].pl, pl))) return 1;
  return 0;
}

static enum store_rc delete_then_fail(struct store_tx *tx, void *arg) {
  assert_int_equal(store_node_delete_locked(tx, *(int64_t *)arg), STORE_OK);
  return STORE_CONFLICT; /* rolled back */
}

static void test_pg_notify_at_commit(void **state) {
  struct store *st = store_open(g_pg);
  assert_non_null(st);
  assert_int_equal(store_cluster_mode(st), 1);
  assert_int_equal(store_caches_on(st), 0); /* nothing listens yet */
  struct store_listener *l = store_listener_open(st);
  assert_non_null(l);
  assert_int_equal(store_listener_listen(l, "cdnca_pub"), 0);
  assert_int_equal(store_listener_listen(l, "cdnca_inval"), 0);
  struct note ns[16];
  int64_t seq0, gen0, seq, gen;
  assert_int_equal(store_listener_state(l, &seq0, &gen0), 0);

  /* an ordered write without a publication: cdnca_pub with seq 0 and the row's gen */
  struct node_rec n = {0};
  snprintf(n.name, sizeof n.name, "edge");
  assert_int_equal(
      store_node_create(st, &n, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"),
      STORE_OK);
  int k = drain(l, ns, 16, 2000);
  char want[64];
  snprintf(want, sizeof want, "seq=0 gen=%lld", (long long)(gen0 + 1));
  assert_int_equal(k, 1);
  assert_string_equal(ns[0].ch, "cdnca_pub");
  assert_string_equal(ns[0].pl, want);
  assert_int_equal(store_listener_state(l, &seq, &gen), 0);
  assert_int_equal(gen, gen0 + 1);
  assert_int_equal(seq, seq0);

  /* rolled back: nothing at all */
  int64_t id = n.id;
  assert_int_equal(store_op(st, delete_then_fail, &id), STORE_CONFLICT);
  assert_int_equal(drain(l, ns, 16, 300), 0);

  /* a deleted node: the gen, the token cache and the node's poll, delivered at commit */
  assert_int_equal(store_node_delete(st, id), STORE_OK);
  k = drain(l, ns, 16, 500);
  snprintf(want, sizeof want, "node:%lld", (long long)id);
  assert_true(has(ns, k, "cdnca_inval", want));
  assert_true(has(ns, k, "cdnca_inval", "tokens"));
  assert_true(has(ns, k, "cdnca_pub", NULL));
  assert_int_equal(k, 3);

  store_listener_close(&l);
  assert_null(l);
  store_close(&st);
}

static int run_pg(void) {
  const char *base = getenv("CDNCA_TEST_PG");
  char sql[200], name[64];
  if (!base || !*base) {
    fprintf(stderr, "test_signals pg: CDNCA_TEST_PG (a conninfo) is not set; run it through "
                    "ctest (fixture pg)\n");
    return 1;
  }
  snprintf(name, sizeof name, "t_signals_%ld", (long)getpid());
  struct db_conn *a = db_open(base);
  if (!a) return 1;
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", name);
  int bad = db_exec(a, sql) < 0;
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
  if (bad || db_exec(a, sql) < 0) {
    fprintf(stderr, "test_signals pg: %s\n", db_errmsg(a));
    db_close(a);
    return 1;
  }
  snprintf(g_pg, sizeof g_pg, "%s dbname=%s", base, name);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_pg_notify_at_commit)};
  int rc = cmocka_run_group_tests_name("signals pg", tests, NULL, NULL);
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
  db_exec(a, sql);
  db_close(a);
  return rc;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "pg")) return run_pg();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_channels),      cmocka_unit_test(test_pub_payload),
      cmocka_unit_test(test_inval_payload), cmocka_unit_test(test_pub_decide),
      cmocka_unit_test(test_poll_decide),   cmocka_unit_test(test_resync_decide),
      cmocka_unit_test(test_backoff),       cmocka_unit_test(test_sqlite_mode),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
