/* test_tasks — the controld probe-task board in memory: rounds, votes, deadlines, early wake, and
   the node side: task polls answered at once, held until a round opens or wait_ms passes, ended
   by a revoked token or the shutdown. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "hcheck.h"
#include "json.h"
#include "tasks.h"

#define T0 1700000000000LL

static void spec(struct task_spec *t, int64_t id, int64_t origin) {
  memset(t, 0, sizeof *t);
  t->task_id = id;
  t->origin_id = origin;
  memcpy(t->url, "http://127.0.0.1:9/", 20);
  memcpy(t->host, "a.test", 7);
  t->timeout_ms = 1000;
}

/* A task carries its site's probe options as "check" (defaults when it has none). */
static void test_task_json_carries_check(void **state) {
  struct task_spec t;
  struct hcheck_opts o;
  cJSON *j;
  char *text;
  (void)state;
  spec(&t, 7, 70);
  j = tasks_spec_json(&t);
  text = json_print(j);
  assert_string_equal(text, "{\"task_id\":7,\"origin_id\":70,\"url\":\"http://127.0.0.1:9/\","
                            "\"host\":\"a.test\",\"timeout_ms\":1000,\"check\":{\"type\":\"http\","
                            "\"method\":\"GET\",\"headers\":{},\"expected_codes\":null,"
                            "\"expected_body\":null,\"port\":null}}");
  free(text);
  cJSON_Delete(j);
  hcheck_defaults(&o);
  o.method = HCHECK_HEAD;
  o.port = 8081;
  o.n_codes = 1;
  o.codes[0].lo = 200;
  o.codes[0].hi = 299;
  o.interval_ms = 1000; /* controld's own: not sent */
  t.check = &o;
  j = tasks_spec_json(&t);
  text = json_print(cJSON_GetObjectItem(j, "check"));
  assert_string_equal(text, "{\"type\":\"http\",\"method\":\"HEAD\",\"headers\":{},"
                            "\"expected_codes\":[\"200-299\"],\"expected_body\":null,"
                            "\"port\":8081}");
  free(text);
  cJSON_Delete(j);
}

static struct task_vote vote(int64_t task_id, int ok) {
  struct task_vote v;
  memset(&v, 0, sizeof v);
  v.task_id = task_id;
  v.ok = ok;
  v.status = ok ? 200 : 503;
  v.latency_ms = 3;
  return v;
}

/* Node 1 gets tasks 1 and 2, node 2 gets task 3. */
static struct task_board *open_round(int64_t round_id, int64_t deadline) {
  static struct task_spec a[2], b[1];
  const struct task_spec *lists[2] = {a, b};
  int64_t nodes[2] = {1, 2};
  int counts[2] = {2, 1};
  struct task_board *bd = tasks_new(NULL);
  assert_non_null(bd);
  spec(&a[0], 1, 10);
  spec(&a[1], 2, 11);
  spec(&b[0], 3, 10);
  assert_int_equal(tasks_round_open(bd, round_id, deadline, 2, nodes, lists, counts), 0);
  return bd;
}

struct watchdog {
  atomic_int stop;
  atomic_int fired, done;
};

static void *watchdog_thread(void *arg) {
  struct watchdog *w = arg;
  for (int i = 0; i < 200 && !atomic_load(&w->done); i++)
    usleep(50000);
  if (!atomic_load(&w->done)) {
    atomic_store(&w->fired, 1);
    w->stop = 1;
  }
  return NULL;
}

static void test_votes_and_early_wait(void **state) {
  struct task_board *bd;
  struct task_vote v[2], *got = NULL;
  struct watchdog wd;
  pthread_t th;
  int n = 0, bad = -1;
  (void)state;
  clock_set_fake_ms(T0); /* frozen clock: only a complete vote set can end the wait */
  bd = open_round(7, T0 + 30000);
  v[0] = vote(1, 1);
  v[1] = vote(2, 0);
  assert_int_equal(tasks_vote(bd, 1, 7, v, 2, T0 + 10, NULL), TASKS_VOTE_OK);
  /* node 2 may not vote on node 1's task: nothing of that post is kept */
  v[0] = vote(3, 1);
  v[1] = vote(1, 1);
  assert_int_equal(tasks_vote(bd, 2, 7, v, 2, T0 + 20, &bad), TASKS_VOTE_NOT_YOURS);
  assert_int_equal(bad, 1);
  /* an unknown node has no tasks at all */
  assert_int_equal(tasks_vote(bd, 9, 7, v, 1, T0 + 20, &bad), TASKS_VOTE_NOT_YOURS);
  /* a repeat of a vote already counted is ignored */
  v[0] = vote(1, 0);
  assert_int_equal(tasks_vote(bd, 1, 7, v, 1, T0 + 25, NULL), TASKS_VOTE_OK);
  v[0] = vote(3, 1);
  assert_int_equal(tasks_vote(bd, 2, 7, v, 1, T0 + 30, NULL), TASKS_VOTE_OK);

  memset(&wd, 0, sizeof wd);
  assert_int_equal(pthread_create(&th, NULL, watchdog_thread, &wd), 0);
  tasks_round_wait(bd, 7, &wd.stop);
  atomic_store(&wd.done, 1);
  pthread_join(th, NULL);
  assert_int_equal(atomic_load(&wd.fired), 0); /* returned because every vote was in */

  assert_int_equal(tasks_round_close(bd, 7, &got, &n), 0);
  assert_int_equal(n, 3);
  for (int i = 0; i < n; i++) {
    if (got[i].task_id == 1) {
      assert_int_equal(got[i].node_id, 1);
      assert_int_equal(got[i].ok, 1); /* the first vote, not the repeat */
    } else if (got[i].task_id == 2) {
      assert_int_equal(got[i].node_id, 1);
      assert_int_equal(got[i].ok, 0);
      assert_int_equal(got[i].status, 503);
    } else {
      assert_int_equal(got[i].task_id, 3);
      assert_int_equal(got[i].node_id, 2);
    }
  }
  free(got);
  /* closed: later votes are refused */
  assert_int_equal(tasks_vote(bd, 2, 7, v, 1, T0 + 40, NULL), TASKS_VOTE_LATE);
  assert_int_equal(tasks_round_close(bd, 7, &got, &n), -1);
  tasks_free(&bd);
  assert_null(bd);
  clock_set_fake_ms(-1);
}

static void test_late_votes_refused(void **state) {
  struct task_board *bd;
  struct task_vote v[1], *got = NULL;
  int n = -1;
  (void)state;
  clock_set_fake_ms(T0);
  bd = open_round(8, T0 + 1000);
  v[0] = vote(1, 1);
  assert_int_equal(tasks_vote(bd, 1, 8, v, 1, T0 + 1001, NULL), TASKS_VOTE_LATE);
  assert_int_equal(tasks_vote(bd, 1, 99, v, 1, T0 + 10, NULL), TASKS_VOTE_LATE);
  assert_int_equal(tasks_vote(bd, 1, 8, v, 1, T0 + 1000, NULL), TASKS_VOTE_OK);
  /* a second round with the same id is refused */
  {
    const struct task_spec *lists[1] = {NULL};
    int64_t nodes[1] = {1};
    int counts[1] = {0};
    assert_int_equal(tasks_round_open(bd, 8, T0 + 5000, 1, nodes, lists, counts), -1);
  }
  assert_int_equal(tasks_round_close(bd, 8, &got, &n), 0);
  assert_int_equal(n, 1);
  free(got);
  tasks_free(&bd);
  clock_set_fake_ms(-1);
}

struct waitarg {
  struct task_board *bd;
  atomic_int returned;
};

static void *wait_thread(void *arg) {
  struct waitarg *w = arg;
  tasks_round_wait(w->bd, 9, NULL);
  atomic_store(&w->returned, 1);
  return NULL;
}

static void test_wait_ends_at_deadline(void **state) {
  struct waitarg w;
  pthread_t th;
  struct task_vote *got = NULL;
  int n = -1;
  (void)state;
  clock_set_fake_ms(T0);
  memset(&w, 0, sizeof w);
  w.bd = open_round(9, T0 + 1000);
  assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
  usleep(300000);
  assert_int_equal(atomic_load(&w.returned), 0); /* votes missing, deadline not reached */
  clock_set_fake_ms(T0 + 1001);
  for (int i = 0; i < 200 && !atomic_load(&w.returned); i++)
    usleep(50000);
  assert_int_equal(atomic_load(&w.returned), 1);
  pthread_join(th, NULL);
  assert_int_equal(tasks_round_close(w.bd, 9, &got, &n), 0);
  assert_int_equal(n, 0);
  free(got);
  tasks_free(&w.bd);
  clock_set_fake_ms(-1);
}

/* A node's task poll as the API layer holds it: what the board answered, and whether it was
   resumed (then the poll completes and frees the board's waiter, as a request does). */
struct client {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned status;
  char code[32];
  cJSON *body;
  void *waiter;
  void (*free_waiter)(void *);
  int held, resumed;
};

static void c_reply(void *client, unsigned status, cJSON *body) {
  struct client *c = client;
  pthread_mutex_lock(&c->mu);
  c->status = status;
  cJSON_Delete(c->body);
  c->body = body;
  pthread_mutex_unlock(&c->mu);
}

static void c_error(void *client, unsigned status, const char *code, const char *message) {
  struct client *c = client;
  (void)message;
  pthread_mutex_lock(&c->mu);
  c->status = status;
  snprintf(c->code, sizeof c->code, "%s", code);
  pthread_mutex_unlock(&c->mu);
}

static void c_hold(void *client, void *waiter, void (*free_waiter)(void *)) {
  struct client *c = client;
  pthread_mutex_lock(&c->mu);
  c->waiter = waiter;
  c->free_waiter = free_waiter;
  c->held = 1;
  pthread_mutex_unlock(&c->mu);
}

static void c_resume(void *client) {
  struct client *c = client;
  pthread_mutex_lock(&c->mu);
  c->free_waiter(c->waiter); /* the request completes */
  c->waiter = NULL;
  c->resumed = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static const struct tasks_client_ops client_ops = {c_reply, c_error, c_hold, c_resume};

static void client_init(struct client *c) {
  memset(c, 0, sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
}

static void client_done(struct client *c) {
  cJSON_Delete(c->body);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
}

/* Wait (up to 10 s of real time) until the held poll was resumed; 1 when it was. */
static int resumed(struct client *c) {
  struct timespec ts;
  int r;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 10;
  pthread_mutex_lock(&c->mu);
  while (!c->resumed)
    if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) != 0) break;
  r = c->resumed;
  pthread_mutex_unlock(&c->mu);
  return r;
}

/* Whether the poll was resumed by now (no wait). */
static int resumed_now(struct client *c) {
  int r;
  pthread_mutex_lock(&c->mu);
  r = c->resumed;
  pthread_mutex_unlock(&c->mu);
  return r;
}

/* The task ids of an answer's "tasks", in order, as "1,2". */
static void task_ids(const cJSON *body, char *out, size_t cap) {
  const cJSON *t;
  size_t len = 0;
  out[0] = '\0';
  cJSON_ArrayForEach(t, cJSON_GetObjectItem(body, "tasks")) {
    int k = snprintf(out + len, cap - len, "%s%lld", len ? "," : "",
                     (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(t, "task_id")));
    if (k < 0 || (size_t)k >= cap - len) break;
    len += (size_t)k;
  }
}

static int64_t num(const cJSON *body, const char *key) {
  return (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(body, key));
}

/* A poll finds its node's tasks of an open round at once, only once; other nodes get theirs. */
static void test_poll_answered_at_once(void **state) {
  struct task_board *bd;
  struct client c;
  char ids[64];
  (void)state;
  clock_set_fake_ms(T0);
  bd = open_round(7, T0 + 30000);
  client_init(&c);
  assert_int_equal(tasks_poll(bd, &client_ops, &c, 1, 25000), 0);
  assert_int_equal(c.status, 200);
  assert_int_equal(num(c.body, "round_id"), 7);
  assert_int_equal(num(c.body, "deadline_ms"), 30000); /* relative: ms left */
  task_ids(c.body, ids, sizeof ids);
  assert_string_equal(ids, "1,2");
  /* delivered: the next poll without waiting is 304 */
  assert_int_equal(tasks_poll(bd, &client_ops, &c, 1, 0), 0);
  assert_int_equal(c.status, 304);
  assert_int_equal(tasks_poll(bd, &client_ops, &c, 2, 0), 0);
  assert_int_equal(c.status, 200);
  task_ids(c.body, ids, sizeof ids);
  assert_string_equal(ids, "3");
  assert_int_equal(tasks_poll(bd, &client_ops, &c, 9, 0), 0); /* no tasks for node 9 */
  assert_int_equal(c.status, 304);
  assert_int_equal(c.held, 0);
  client_done(&c);
  tasks_free(&bd);
  clock_set_fake_ms(-1);
}

/* A held poll gets its tasks when a round for its node opens; another node's stays held until
   its wait_ms passes (304). */
static void test_held_poll_woken_by_round(void **state) {
  static struct task_spec a[1];
  const struct task_spec *lists[1] = {a};
  int64_t nodes[1] = {1};
  int counts[1] = {1};
  struct task_board *bd;
  struct client c1, c2;
  char ids[64];
  (void)state;
  clock_set_fake_ms(T0);
  bd = tasks_new(NULL);
  assert_non_null(bd);
  client_init(&c1);
  client_init(&c2);
  assert_int_equal(tasks_poll(bd, &client_ops, &c1, 1, 25000), 1);
  assert_int_equal(tasks_poll(bd, &client_ops, &c2, 2, 200), 1);
  assert_int_equal(c1.held, 1);
  spec(&a[0], 5, 50);
  assert_int_equal(tasks_round_open(bd, 3, T0 + 10000, 1, nodes, lists, counts), 0);
  assert_true(resumed(&c1));
  assert_int_equal(c1.status, 200);
  assert_int_equal(num(c1.body, "round_id"), 3);
  assert_int_equal(num(c1.body, "deadline_ms"), 10000);
  task_ids(c1.body, ids, sizeof ids);
  assert_string_equal(ids, "5");
  assert_false(resumed_now(&c2));
  clock_set_fake_ms(T0 + 201); /* node 2's wait_ms passed */
  assert_true(resumed(&c2));
  assert_int_equal(c2.status, 304);
  assert_null(c2.body);
  client_done(&c1);
  client_done(&c2);
  tasks_free(&bd);
  clock_set_fake_ms(-1);
}

/* A revoked node's held polls end 401; the shutdown ends the others 304, and later polls are
   answered at once. */
static void test_held_polls_end(void **state) {
  struct task_board *bd;
  struct client c1, c2, c3;
  (void)state;
  bd = tasks_new(NULL);
  assert_non_null(bd);
  client_init(&c1);
  client_init(&c2);
  client_init(&c3);
  assert_int_equal(tasks_poll(bd, &client_ops, &c3, 1, 25000), 1);
  /* one held poll per node: a second one ends the first at once, 304 */
  assert_int_equal(tasks_poll(bd, &client_ops, &c1, 1, 25000), 1);
  assert_true(resumed(&c3));
  assert_int_equal(c3.status, 304);
  client_done(&c3);
  client_init(&c3);
  assert_int_equal(tasks_poll(bd, &client_ops, &c2, 2, 25000), 1);
  tasks_node_revoked(bd, 1);
  assert_true(resumed(&c1));
  assert_int_equal(c1.status, 401);
  assert_string_equal(c1.code, "unauthorized");
  assert_false(resumed_now(&c2));
  tasks_shutdown(bd);
  assert_int_equal(c2.resumed, 1);
  assert_int_equal(c2.status, 304);
  assert_int_equal(tasks_poll(bd, &client_ops, &c3, 3, 25000), 0);
  assert_int_equal(c3.status, 304);
  assert_int_equal(c3.held, 0);
  client_done(&c1);
  client_done(&c2);
  client_done(&c3);
  tasks_free(&bd);
}

/* In memory there are no other engines: nothing to abort, and round ids start at 1. */
static void test_memory_home(void **state) {
  struct task_board *bd = tasks_new(NULL);
  (void)state;
  assert_non_null(bd);
  assert_int_equal(tasks_abort_older(bd, 5), 0);
  assert_int_equal(tasks_next_round_id(bd), 1);
  tasks_free(&bd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_task_json_carries_check),
      cmocka_unit_test(test_votes_and_early_wait),
      cmocka_unit_test(test_late_votes_refused),
      cmocka_unit_test(test_wait_ends_at_deadline),
      cmocka_unit_test(test_poll_answered_at_once),
      cmocka_unit_test(test_held_poll_woken_by_round),
      cmocka_unit_test(test_held_polls_end),
      cmocka_unit_test(test_memory_home),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
