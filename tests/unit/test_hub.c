/* test_hub — config polls through the hub's callbacks, without HTTP: answered at once (behind,
 * ahead of the database, may not wait), held and woken by a publication, ended by wait_ms, by a
 * revoked node and by shutdown; suspend comes before every hold, done exactly once. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "hub.h"
#include "publish.h"
#include "store_node.h"
#include "store_pub.h"
#include "store_sites.h"

struct fx {
  char dir[64];
  char path[128];
  struct store *st;
  struct hub *hub;
};

/* What the callbacks of one poll saw. */
struct rec {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int suspended; /* suspend calls */
  int done;      /* done calls */
  int held;      /* suspend had been called when done came */
  enum hub_outcome outcome;
  int64_t blob_seq; /* the blob's seq (HUB_CONFIG), else -1 */
  int blob_full;
  int bad; /* done twice, suspend twice, or a blob that does not match the outcome */
};

static void rec_init(struct rec *r) {
  memset(r, 0, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->blob_seq = -1;
}

static void rec_fini(struct rec *r) {
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
}

static void on_suspend(void *arg) {
  struct rec *r = arg;
  pthread_mutex_lock(&r->mu);
  if (r->suspended || r->done) r->bad = 1;
  r->suspended++;
  pthread_mutex_unlock(&r->mu);
}

static void on_done(void *arg, enum hub_outcome outcome, struct pub_blob *b) {
  struct rec *r = arg;
  /* maybe on the hub's thread: no cmocka assertion here, the test checks bad */
  pthread_mutex_lock(&r->mu);
  if (r->done || (outcome == HUB_CONFIG) != (b != NULL)) r->bad = 1;
  r->done++;
  r->held = r->suspended;
  r->outcome = outcome;
  r->blob_seq = b ? pub_blob_seq(b) : -1;
  r->blob_full = b ? pub_blob_full(b) : 0;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

/* Wait up to ms for r's done; 1 when it came. */
static int wait_done(struct rec *r, int ms) {
  struct timespec ts;
  int got, bad;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&r->mu);
  while (!r->done && pthread_cond_timedwait(&r->cv, &r->mu, &ts) == 0) {
  }
  got = r->done;
  bad = r->bad;
  pthread_mutex_unlock(&r->mu);
  assert_int_equal(bad, 0);
  return got;
}

/* node_id's poll holding since: 0 answered at once, 1 held. */
static int config_poll(struct hub *h, struct rec *r, int64_t node_id, int64_t since,
                       int64_t wait_ms) {
  struct hub_poll p = {node_id, on_suspend, on_done, r};
  return hub_config_poll(h, since, wait_ms, &p);
}

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof *f);
  memcpy(f->dir, "/tmp/test_hub.XXXXXX", 21);
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->path, sizeof f->path, "%s/c.db", f->dir);
  f->st = store_open(f->path);
  if (!f->st) return -1;
  f->hub = hub_new(f->st);
  if (!f->hub) return -1;
  store_set_pub_hook(f->st, hub_on_publication, f->hub);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  char p[160];
  store_set_pub_hook(f->st, NULL, NULL);
  hub_shutdown(f->hub);
  hub_free(&f->hub);
  store_close(&f->st);
  snprintf(p, sizeof p, "rm -rf '%s'", f->dir);
  if (system(p) != 0) return -1;
  free(f);
  return 0;
}

/* Create a site named name with one enabled origin (one publication). */
static void make_site(struct store *st, const char *name, const char *host) {
  struct site_rec s;
  char conflict[64];
  site_rec_defaults(&s);
  memcpy(s.name, name, strlen(name) + 1);
  s.n_hostnames = 1;
  memcpy(s.hostnames[0], host, strlen(host) + 1);
  s.origins = calloc(1, sizeof *s.origins);
  s.n_origins = 1;
  s.origins[0].level = 1;
  s.origins[0].port = 8080;
  s.origins[0].weight = 1;
  s.origins[0].enabled = 1;
  memcpy(s.origins[0].address, "127.0.0.1", 10);
  s.origins[0].scheme = SCHEME_HTTP;
  assert_int_equal(store_site_create(st, &s, conflict, sizeof conflict), STORE_OK);
  site_rec_fini(&s);
}

static void test_answers_at_once(void **state) {
  struct fx *f = *state;
  struct rec behind, ahead, nowait;
  int64_t seq;
  rec_init(&behind);
  rec_init(&ahead);
  rec_init(&nowait);
  make_site(f->st, "a", "a.test");
  make_site(f->st, "b", "b.test");
  seq = hub_seq(f->hub);
  assert_true(seq >= 2);
  assert_int_equal(seq, store_pub_seq(f->st));

  /* behind: the delta since, at once, on the caller's thread, never suspended */
  assert_int_equal(config_poll(f->hub, &behind, 7, seq - 1, 25000), 0);
  assert_int_equal(behind.done, 1);
  assert_int_equal(behind.suspended, 0);
  assert_int_equal(behind.outcome, HUB_CONFIG);
  assert_int_equal(behind.blob_seq, seq);
  assert_int_equal(behind.blob_full, 0);

  /* ahead of the database (a reset database): the full set at once */
  assert_int_equal(config_poll(f->hub, &ahead, 7, seq + 100, 25000), 0);
  assert_int_equal(ahead.done, 1);
  assert_int_equal(ahead.suspended, 0);
  assert_int_equal(ahead.outcome, HUB_CONFIG);
  assert_int_equal(ahead.blob_seq, seq);
  assert_int_equal(ahead.blob_full, 1);

  /* up to date and may not wait: unchanged at once */
  assert_int_equal(config_poll(f->hub, &nowait, 7, seq, 0), 0);
  assert_int_equal(nowait.done, 1);
  assert_int_equal(nowait.suspended, 0);
  assert_int_equal(nowait.outcome, HUB_UNCHANGED);
  assert_int_equal(nowait.blob_seq, -1);
  assert_int_equal(nowait.bad + behind.bad + ahead.bad, 0);
  assert_int_equal(hub_waiters(f->hub), 0);
  rec_fini(&behind);
  rec_fini(&ahead);
  rec_fini(&nowait);
}

static void test_publication_wakes(void **state) {
  struct fx *f = *state;
  struct rec r1, r2;
  int64_t seq = hub_seq(f->hub);
  rec_init(&r1);
  rec_init(&r2);
  /* two nodes held at the same seq: one publication answers both with the same delta */
  assert_int_equal(config_poll(f->hub, &r1, 7, seq, 25000), 1);
  assert_int_equal(config_poll(f->hub, &r2, 8, seq, 25000), 1);
  assert_int_equal(r1.suspended, 1);
  assert_int_equal(r2.suspended, 1);
  assert_int_equal(r1.done + r2.done, 0);
  assert_int_equal(hub_waiters(f->hub), 2);
  make_site(f->st, "c", "c.test");
  assert_true(wait_done(&r1, 5000));
  assert_true(wait_done(&r2, 5000));
  assert_int_equal(r1.held, 1);
  assert_int_equal(r1.outcome, HUB_CONFIG);
  assert_int_equal(r2.outcome, HUB_CONFIG);
  assert_true(r1.blob_seq > seq);
  assert_int_equal(r1.blob_seq, r2.blob_seq);
  assert_int_equal(r1.blob_seq, hub_seq(f->hub));
  assert_int_equal(hub_waiters(f->hub), 0);
  rec_fini(&r1);
  rec_fini(&r2);
}

static void test_wait_ms_ends_unchanged(void **state) {
  struct fx *f = *state;
  struct rec r;
  struct timespec t0, t1;
  long ms;
  rec_init(&r);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(config_poll(f->hub, &r, 7, hub_seq(f->hub), 200), 1);
  assert_int_equal(r.suspended, 1);
  assert_true(wait_done(&r, 5000));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  ms = (t1.tv_sec - t0.tv_sec) * 1000L + (t1.tv_nsec - t0.tv_nsec) / 1000000L;
  assert_true(ms >= 190); /* not before wait_ms */
  assert_int_equal(r.held, 1);
  assert_int_equal(r.outcome, HUB_UNCHANGED);
  assert_int_equal(r.blob_seq, -1);
  assert_int_equal(r.done, 1);
  assert_int_equal(hub_waiters(f->hub), 0);
  rec_fini(&r);
}

static void test_revoked_node(void **state) {
  struct fx *f = *state;
  struct rec r7a, r7b, r8;
  int64_t seq = hub_seq(f->hub);
  rec_init(&r7a);
  rec_init(&r7b);
  rec_init(&r8);
  assert_int_equal(config_poll(f->hub, &r7a, 7, seq, 25000), 1);
  /* one held poll per node: a second one ends the first at once, unchanged */
  assert_int_equal(config_poll(f->hub, &r7b, 7, seq, 25000), 1);
  assert_true(wait_done(&r7a, 0));
  assert_int_equal(r7a.outcome, HUB_UNCHANGED);
  assert_int_equal(r7a.held, 1);
  assert_int_equal(config_poll(f->hub, &r8, 8, seq, 25000), 1);
  assert_int_equal(hub_waiters(f->hub), 2);

  /* only node 7's poll ends, at once, on the caller's thread */
  hub_node_revoked(f->hub, 7);
  assert_true(wait_done(&r7b, 0));
  assert_int_equal(r7b.outcome, HUB_REVOKED);
  assert_int_equal(r7b.held, 1);
  assert_int_equal(r8.done, 0);
  assert_int_equal(hub_waiters(f->hub), 1);

  /* node 8's poll still gets the next publication */
  make_site(f->st, "d", "d.test");
  assert_true(wait_done(&r8, 5000));
  assert_int_equal(r8.outcome, HUB_CONFIG);
  assert_int_equal(r7a.done + r7b.done, 2);
  rec_fini(&r7a);
  rec_fini(&r7b);
  rec_fini(&r8);
}

static void test_shutdown_answers_everyone(void **state) {
  struct fx *f = *state;
  struct rec rs[3], late, behind;
  int64_t seq;
  make_site(f->st, "e", "e.test");
  seq = hub_seq(f->hub);
  for (int i = 0; i < 3; i++) {
    rec_init(&rs[i]);
    assert_int_equal(config_poll(f->hub, &rs[i], 7 + i, seq, 25000), 1);
  }
  rec_init(&late);
  rec_init(&behind);
  assert_int_equal(hub_waiters(f->hub), 3);

  /* every held poll is answered unchanged before hub_shutdown returns */
  hub_shutdown(f->hub);
  for (int i = 0; i < 3; i++) {
    assert_true(wait_done(&rs[i], 0));
    assert_int_equal(rs[i].outcome, HUB_UNCHANGED);
    assert_int_equal(rs[i].held, 1);
  }
  assert_int_equal(hub_waiters(f->hub), 0);

  /* later polls are answered at once: unchanged when up to date, the config when behind */
  assert_int_equal(config_poll(f->hub, &late, 9, seq, 25000), 0);
  assert_int_equal(late.suspended, 0);
  assert_int_equal(late.outcome, HUB_UNCHANGED);
  assert_int_equal(config_poll(f->hub, &behind, 9, 0, 25000), 0);
  assert_int_equal(behind.suspended, 0);
  assert_int_equal(behind.outcome, HUB_CONFIG);
  assert_int_equal(behind.blob_seq, seq);
  assert_int_equal(behind.blob_full, 1);
  assert_int_equal(late.bad + behind.bad, 0);
  assert_int_equal(hub_waiters(f->hub), 0);
  for (int i = 0; i < 3; i++)
    rec_fini(&rs[i]);
  rec_fini(&late);
  rec_fini(&behind);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_answers_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_publication_wakes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wait_ms_ends_unchanged, setup, teardown),
      cmocka_unit_test_setup_teardown(test_revoked_node, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shutdown_answers_everyone, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
