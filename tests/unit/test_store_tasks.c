/* Unit tests for the probe task board in tables (store_tasks.h, cluster mode's board) and the
   board's database mode (tasks_new with the store): open, hand out, vote, close, the 409 rules by
   the database clock, aborting older epochs, pruning, fencing. On SQLite, and with the argument
   "pg" on PostgreSQL (CDNCA_TEST_PG: a conninfo; ctest's `pg` fixture sets it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "db.h"
#include "log.h"
#include "store.h"
#include "store_lease.h"
#include "store_tasks.h"
#include "tasks.h"

static char g_target[600];

/* Two tasks for node 1 (task ids 1, 2) and two for node 2 (3, 4); origin 100 + task id. */
static const char tasks_json[] =
    "[{\"node_id\":1,\"task_id\":1,\"origin_id\":101,\"url\":\"http://10.0.0.1:80/hc\","
    "\"host\":\"a.example\",\"timeout_ms\":2000,\"check\":{\"type\":\"http\",\"method\":\"GET\"}},"
    "{\"node_id\":1,\"task_id\":2,\"origin_id\":102,\"url\":\"http://10.0.0.2:80/hc\","
    "\"host\":\"b.example\",\"timeout_ms\":3000,\"check\":{\"type\":\"tcp\"}},"
    "{\"node_id\":2,\"task_id\":3,\"origin_id\":101,\"url\":\"http://10.0.0.1:80/hc\","
    "\"host\":\"a.example\",\"timeout_ms\":2000,\"check\":{\"type\":\"http\",\"method\":\"GET\"}},"
    "{\"node_id\":2,\"task_id\":4,\"origin_id\":102,\"url\":\"http://10.0.0.2:80/hc\","
    "\"host\":\"b.example\",\"timeout_ms\":3000,\"check\":{\"type\":\"tcp\"}}]";

static struct task_vote vote(int64_t task_id, int ok, int status, const char *err) {
  struct task_vote v;
  memset(&v, 0, sizeof v);
  v.task_id = task_id;
  v.ok = ok;
  v.status = status;
  v.latency_ms = 7;
  snprintf(v.error, sizeof v.error, "%s", err);
  return v;
}

static int64_t vote_count(struct store *st, int64_t round_id) {
  return store_tasks_vote_count(st, round_id);
}

static void state_is(struct store *st, int64_t round_id, const char *want) {
  char s[16] = "";
  assert_int_equal(store_tasks_round_state(st, round_id, s, sizeof s), 1);
  assert_string_equal(s, want);
}

static void test_open_take_vote_close(void **state) {
  struct store *st = *state;
  struct store_task *t = NULL;
  struct task_vote v[2], *got = NULL;
  int64_t *ids = NULL, rid = 0, left = 0;
  int n = 0, bad = -1;

  assert_int_equal(store_tasks_round_open(st, 10, 60000, tasks_json), STORE_OK);
  assert_int_equal(store_tasks_round_open(st, 10, 60000, "[]"), STORE_CONFLICT);
  assert_int_equal(store_tasks_next_round_id(st), 11);
  state_is(st, 10, "open");
  assert_int_equal(store_tasks_pending_nodes(st, &ids, &n), 0);
  assert_int_equal(n, 2);
  assert_true((ids[0] == 1 && ids[1] == 2) || (ids[0] == 2 && ids[1] == 1));
  free(ids);

  /* node 1 gets its two tasks once, by task id, with the deadline left by the database clock */
  assert_int_equal(store_tasks_take(st, 1, &rid, &left, &t, &n), 1);
  assert_int_equal(rid, 10);
  assert_true(left > 0 && left <= 60000);
  assert_int_equal(n, 2);
  assert_int_equal(t[0].task_id, 1);
  assert_int_equal(t[0].origin_id, 101);
  assert_string_equal(t[0].url, "http://10.0.0.1:80/hc");
  assert_string_equal(t[0].host, "a.example");
  assert_int_equal(t[0].timeout_ms, 2000);
  assert_non_null(strstr(t[0].check, "\"method\""));
  assert_int_equal(t[1].task_id, 2);
  assert_non_null(strstr(t[1].check, "tcp"));
  store_tasks_free(t, n);
  assert_int_equal(store_tasks_take(st, 1, &rid, &left, &t, &n), 0);
  assert_null(t);
  assert_int_equal(store_tasks_take(st, 9, &rid, &left, &t, &n), 0); /* not asked */
  assert_int_equal(store_tasks_pending_nodes(st, &ids, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(ids[0], 2);
  free(ids);

  /* votes: recorded once; another node's task or an unknown one refuses the whole post */
  v[0] = vote(1, 1, 200, "");
  v[1] = vote(2, 0, 0, "connect: refused \"x\"");
  assert_int_equal(store_tasks_vote(st, 1, 10, v, 2, &bad), TASKS_VOTE_OK);
  assert_int_equal(store_tasks_vote(st, 1, 10, v, 2, &bad), TASKS_VOTE_OK);
  assert_int_equal(vote_count(st, 10), 2);
  v[0] = vote(3, 1, 200, "");
  assert_int_equal(store_tasks_vote(st, 1, 10, v, 1, &bad), TASKS_VOTE_NOT_YOURS);
  assert_int_equal(bad, 0);
  v[1] = vote(99, 1, 200, "");
  assert_int_equal(store_tasks_vote(st, 2, 10, v, 2, &bad), TASKS_VOTE_NOT_YOURS);
  assert_int_equal(bad, 1);
  assert_int_equal(vote_count(st, 10), 2); /* all or nothing: task 3 was not kept */
  assert_int_equal(store_tasks_vote(st, 2, 10, v, 0, &bad), TASKS_VOTE_OK);
  assert_int_equal(store_tasks_vote(st, 2, 11, v, 1, &bad), TASKS_VOTE_LATE); /* unknown round */

  /* close: every vote recorded, by node and task; later votes are late, a second close fails */
  assert_int_equal(store_tasks_round_close(st, 10, &got, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(got[0].node_id, 1);
  assert_int_equal(got[0].task_id, 1);
  assert_int_equal(got[0].ok, 1);
  assert_int_equal(got[0].status, 200);
  assert_int_equal(got[0].latency_ms, 7);
  assert_int_equal(got[1].task_id, 2);
  assert_int_equal(got[1].ok, 0);
  assert_string_equal(got[1].error, "connect: refused \"x\"");
  free(got);
  state_is(st, 10, "closed");
  v[0] = vote(3, 1, 200, "");
  assert_int_equal(store_tasks_vote(st, 2, 10, v, 1, &bad), TASKS_VOTE_LATE);
  assert_int_equal(vote_count(st, 10), 2);
  assert_int_equal(store_tasks_round_close(st, 10, &got, &n), -1);
  /* a closed round hands nothing out */
  assert_int_equal(store_tasks_take(st, 2, &rid, &left, &t, &n), 0);
}

static void test_late_by_database_clock(void **state) {
  struct store *st = *state;
  struct store_task *t = NULL;
  struct task_vote v = vote(3, 1, 200, ""), *got = NULL;
  int64_t *ids = NULL, rid, left;
  int n = -1, bad;
  /* a deadline 1 ms away: past once the database clock moved on */
  assert_int_equal(store_tasks_round_open(st, 20, 1, tasks_json), STORE_OK);
  sleep_ms(50);
  state_is(st, 20, "open"); /* still open, but past its deadline */
  assert_int_equal(store_tasks_vote(st, 2, 20, &v, 1, &bad), TASKS_VOTE_LATE);
  assert_int_equal(vote_count(st, 20), 0);
  assert_int_equal(store_tasks_take(st, 2, &rid, &left, &t, &n), 0);
  assert_int_equal(store_tasks_pending_nodes(st, &ids, &n), 0);
  assert_int_equal(n, 0);
  free(ids);
  assert_int_equal(store_tasks_round_close(st, 20, &got, &n), 0);
  assert_int_equal(n, 0);
  free(got);
}

static void test_abort_older_epochs(void **state) {
  struct store *st = *state;
  struct task_vote v = vote(1, 1, 200, ""), *got;
  int n, bad;
  store_lease_fence_set(st, "a#1", 3); /* the fence's epoch stamps the round (fencing is off) */
  assert_int_equal(store_tasks_round_open(st, 30, 60000, tasks_json), STORE_OK);
  store_lease_fence_set(st, "b#2", 4);
  assert_int_equal(store_tasks_round_open(st, 31, 60000, tasks_json), STORE_OK);
  /* the engine of epoch 4 took over: the epoch-3 round takes no more votes, its own does */
  assert_int_equal(store_tasks_abort_older(st, 4), 1);
  assert_int_equal(store_tasks_abort_older(st, 4), 0);
  state_is(st, 30, "aborted");
  state_is(st, 31, "open");
  assert_int_equal(store_tasks_vote(st, 1, 30, &v, 1, &bad), TASKS_VOTE_LATE);
  assert_int_equal(store_tasks_vote(st, 1, 31, &v, 1, &bad), TASKS_VOTE_OK);
  assert_int_equal(store_tasks_round_close(st, 30, &got, &n), -1); /* not open: no tally */
  assert_int_equal(store_tasks_round_close(st, 31, &got, &n), 0);
  assert_int_equal(n, 1);
  free(got);
  store_lease_fence_set(st, "", 0);
}

static void test_prune(void **state) {
  struct store *st = *state;
  struct task_vote v = vote(1, 1, 200, "");
  char s[16];
  int bad;
  /* a round whose deadline is two hours gone, and a fresh one */
  assert_int_equal(store_tasks_round_open(st, 40, -7200000, tasks_json), STORE_OK);
  assert_int_equal(store_tasks_round_open(st, 41, 60000, tasks_json), STORE_OK);
  assert_int_equal(store_tasks_vote(st, 1, 41, &v, 1, &bad), TASKS_VOTE_OK);
  assert_true(store_tasks_prune(st, STORE_TASKS_KEEP_MS) >= 1);
  assert_int_equal(store_tasks_round_state(st, 40, s, sizeof s), 0);
  state_is(st, 41, "open");
  assert_int_equal(vote_count(st, 41), 1);
  assert_int_equal(store_tasks_prune(st, STORE_TASKS_KEEP_MS), 0);
}

static double mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* A large round (500 sites x 3 origins x 3 nodes = 4,500 tasks): one insert, every
   task handed out, every vote recorded and tallied. Prints the times (no bound asserted). */
static void test_volume(void **state) {
  struct store *st = *state;
  enum { PER_NODE = 1500, NODES = 3 };
  size_t cap = (size_t)PER_NODE * NODES * 256 + 16, len = 0;
  char *json = malloc(cap);
  struct task_vote *v = calloc(PER_NODE, sizeof *v), *got = NULL;
  struct store_task *t = NULL;
  int64_t id = store_tasks_next_round_id(st), rid, left;
  int n = 0, bad;
  double t0, t_open, t_take = 0, t_vote = 0, t_close;
  assert_non_null(json);
  assert_non_null(v);
  len += (size_t)snprintf(json + len, cap - len, "[");
  for (int k = 0; k < NODES; k++)
    for (int i = 0; i < PER_NODE; i++)
      len += (size_t)snprintf(json + len, cap - len,
                              "%s{\"node_id\":%d,\"task_id\":%d,\"origin_id\":%d,\"url\":"
                              "\"http://10.1.%d.%d:80/hc\",\"host\":\"s%d.example\","
                              "\"timeout_ms\":5000,\"check\":{\"type\":\"http\"}}",
                              k || i ? "," : "", 100 + k, k * PER_NODE + i + 1, i + 1, i / 250,
                              i % 250, i / 3);
  snprintf(json + len, cap - len, "]");
  t0 = mono_ms();
  assert_int_equal(store_tasks_round_open(st, id, 600000, json), STORE_OK);
  t_open = mono_ms() - t0;
  for (int k = 0; k < NODES; k++) {
    t0 = mono_ms();
    assert_int_equal(store_tasks_take(st, 100 + k, &rid, &left, &t, &n), 1);
    t_take += mono_ms() - t0;
    assert_int_equal(rid, id);
    assert_int_equal(n, PER_NODE);
    assert_int_equal(t[0].task_id, k * PER_NODE + 1);
    assert_int_equal(t[PER_NODE - 1].task_id, (k + 1) * PER_NODE);
    store_tasks_free(t, n);
    for (int i = 0; i < PER_NODE; i++)
      v[i] = vote(k * PER_NODE + i + 1, i % 2, 200, i % 2 ? "" : "status 503");
    t0 = mono_ms();
    assert_int_equal(store_tasks_vote(st, 100 + k, id, v, PER_NODE, &bad), TASKS_VOTE_OK);
    t_vote += mono_ms() - t0;
  }
  assert_int_equal(store_tasks_vote_count(st, id), PER_NODE * NODES);
  t0 = mono_ms();
  assert_int_equal(store_tasks_round_close(st, id, &got, &n), 0);
  t_close = mono_ms() - t0;
  assert_int_equal(n, PER_NODE * NODES);
  free(got);
  print_message("%d tasks: open (one insert) %.1f ms, hand-out %.1f ms per node, %d votes %.1f "
                "ms per node, close + read %.1f ms\n",
                PER_NODE * NODES, t_open, t_take / NODES, PER_NODE, t_vote / NODES, t_close);
  free(json);
  free(v);
}

/* The board in database mode (no HTTP: the engine's side and votes). */
static void test_board_db_mode(void **state) {
  struct store *st = *state;
  struct task_board *b = tasks_new(NULL);
  struct task_spec specs[2];
  const struct task_spec *per[1] = {specs};
  int64_t node = 5, id;
  int counts[1] = {2}, n, bad;
  struct task_vote v[2], *got;
  assert_non_null(b);
  assert_int_equal(tasks_next_round_id(b), 1); /* memory: no table */
  tasks_free(&b);
  b = tasks_new(st);
  assert_non_null(b);
  id = tasks_next_round_id(b);
  assert_true(id >= 42);
  memset(specs, 0, sizeof specs);
  for (int i = 0; i < 2; i++) {
    specs[i].task_id = i + 1;
    specs[i].origin_id = 200 + i;
    snprintf(specs[i].url, sizeof specs[i].url, "http://127.0.0.1:%d/", 8000 + i);
    snprintf(specs[i].host, sizeof specs[i].host, "h%d.example", i);
    specs[i].timeout_ms = 1000;
  }
  assert_int_equal(tasks_round_open(b, id, time(NULL) * 1000LL + 60000, 1, &node, per, counts), 0);
  v[0] = vote(1, 1, 204, "");
  v[1] = vote(2, 0, 503, "status 503");
  assert_int_equal(tasks_vote(b, node, id, v, 2, 0, &bad), TASKS_VOTE_OK);
  /* every expected vote is in: the wait returns at once, long before the 60 s deadline */
  time_t t0 = time(NULL);
  tasks_round_wait(b, id, NULL);
  assert_true(time(NULL) - t0 < 30);
  assert_int_equal(tasks_round_close(b, id, &got, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(got[0].node_id, node);
  assert_int_equal(got[1].status, 503);
  free(got);
  assert_int_equal(tasks_vote(b, node, id, v, 1, 0, &bad), TASKS_VOTE_LATE);
  tasks_shutdown(b);
  tasks_free(&b);
}

/* Fencing on and no lease row: the engine's writes are refused, nothing is stored. Last: the
   fence cannot be turned off again. */
static void test_fenced(void **state) {
  struct store *st = *state;
  int64_t next = store_tasks_next_round_id(st);
  store_lease_fence_enable(st);
  store_lease_fence_set(st, "gone#1", 7);
  assert_int_equal(store_tasks_round_open(st, next, 60000, tasks_json), STORE_ERROR);
  assert_int_equal(store_tasks_next_round_id(st), next);
  assert_int_equal(store_tasks_abort_older(st, 9), -1);
  assert_int_equal(store_tasks_prune(st, 0), -1);
}

static int setup(void **state) {
  struct store *st = store_open(g_target);
  if (!st) return -1;
  *state = st;
  return 0;
}

static int teardown(void **state) {
  struct store *st = *state;
  store_close(&st);
  return 0;
}

static int run_db_tests(const char *name) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open_take_vote_close),
      cmocka_unit_test(test_late_by_database_clock),
      cmocka_unit_test(test_abort_older_epochs),
      cmocka_unit_test(test_prune),
      cmocka_unit_test(test_board_db_mode),
      cmocka_unit_test(test_volume),
      cmocka_unit_test(test_fenced),
  };
  return cmocka_run_group_tests_name(name, tests, setup, teardown);
}

static int run_sqlite(void) {
  char dir[] = "/tmp/cdnca-test-tasks-XXXXXX", p[700];
  const char *suffix[] = {"", "-wal", "-shm"};
  int rc;
  if (!mkdtemp(dir)) return 1;
  snprintf(g_target, sizeof g_target, "%s/t.db", dir);
  rc = run_db_tests("store tasks sqlite");
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
  if (!base || !*base) {
    fprintf(stderr, "test_store_tasks pg: CDNCA_TEST_PG (a conninfo) is not set; run it through "
                    "ctest (fixture pg) or set it\n");
    return 1;
  }
  a = db_open(base);
  if (!a) return 1;
  snprintf(dbname, sizeof dbname, "t_tasks_%ld", (long)getpid());
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", dbname);
  if (db_exec(a, sql) < 0) goto fail;
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", dbname);
  if (db_exec(a, sql) < 0) goto fail;
  snprintf(g_target, sizeof g_target, "%s dbname=%s", base, dbname); /* the later keyword wins */
  rc = run_db_tests("store tasks pg");
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", dbname);
  if (db_exec(a, sql) < 0) fprintf(stderr, "test_store_tasks pg: %s\n", db_errmsg(a));
  db_close(a);
  return rc;
fail:
  fprintf(stderr, "test_store_tasks pg: %s\n", db_errmsg(a));
  db_close(a);
  return 1;
}

int main(int argc, char **argv) {
  const char *which = argc > 1 ? argv[1] : "sqlite";
  log_init("test_store_tasks", LOG_TEXT, LOG_ERROR);
  if (!strcmp(which, "sqlite")) return run_sqlite();
  if (!strcmp(which, "pg")) return run_pg();
  fprintf(stderr, "usage: test_store_tasks [sqlite|pg]\n");
  return 2;
}
