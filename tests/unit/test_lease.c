/* test_lease — the engine lease: the pure decision logic (when to renew, when to step down, what
   a late or lost answer means) and, on SQLite, the lease row and the fencing check of engine
   write transactions (store_lease.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lease.h"
#include "store.h"
#include "store_health.h"
#include "store_lease.h"
#include "store_notify.h"
#include "store_tokens.h"

/* ---- policy ---- */

static void test_policy(void **state) {
  struct lease_policy p;
  (void)state;
  lease_policy_init(&p, 15000);
  assert_int_equal(p.ttl_ms, 15000);
  assert_int_equal(p.renew_ms, 5000);
  assert_int_equal(p.margin_ms, 3000);
  assert_int_equal(p.retry_ms, 1250);
  lease_policy_init(&p, 300); /* the smallest --lease-ttl-ms: floors */
  assert_int_equal(p.renew_ms, 100);
  assert_int_equal(p.margin_ms, 60);
  lease_policy_init(&p, 200);
  assert_int_equal(p.margin_ms, 50);
  assert_int_equal(p.retry_ms, 20);
}

/* ---- acquire, renew, self-demotion ---- */

static void test_gain_renew_and_schedule(void **state) {
  struct lease_policy p;
  struct lease_state s;
  (void)state;
  lease_policy_init(&p, 3000); /* renew 1000, margin 600 */
  lease_state_init(&s, 100);
  assert_int_equal(s.role, LEASE_REPLICA);
  assert_true(lease_attempt_due(&s, 100));
  assert_false(lease_attempt_due(&s, 99));
  /* acquired: engine until sent + ttl - margin, next attempt a third of the ttl later */
  assert_int_equal(lease_after_attempt(&s, &p, 100, 130, LEASE_HELD, 7), LEASE_GAINED);
  assert_int_equal(s.role, LEASE_ENGINE);
  assert_int_equal(s.epoch, 7);
  assert_int_equal(s.valid_until, 100 + 3000 - 600);
  assert_int_equal(s.next_try, 1100);
  assert_int_equal(lease_wake_at(&s), 1100);
  assert_false(lease_attempt_due(&s, 1099));
  /* renewed with the same epoch: no change, validity moves with the send time */
  assert_int_equal(lease_after_attempt(&s, &p, 1100, 1180, LEASE_HELD, 7), LEASE_SAME);
  assert_int_equal(s.valid_until, 1100 + 2400);
  assert_int_equal(s.next_try, 2100);
  assert_int_equal(lease_tick(&s, 3499), LEASE_SAME);
  /* a HELD answer with another epoch: the lease changed hands in between (a new term) */
  assert_int_equal(lease_after_attempt(&s, &p, 2100, 2110, LEASE_HELD, 8), LEASE_GAINED);
  assert_int_equal(s.epoch, 8);
}

static void test_self_demotion_when_renewals_fail(void **state) {
  struct lease_policy p;
  struct lease_state s;
  (void)state;
  lease_policy_init(&p, 3000); /* renew 1000, margin 600, retry 250 */
  lease_state_init(&s, 0);
  assert_int_equal(lease_after_attempt(&s, &p, 0, 10, LEASE_HELD, 1), LEASE_GAINED);
  /* the database stops answering: still the engine, retried sooner than the renew period */
  assert_int_equal(lease_after_attempt(&s, &p, 1000, 1500, LEASE_ERROR, 0), LEASE_SAME);
  assert_int_equal(s.role, LEASE_ENGINE);
  assert_int_equal(s.next_try, 1750);
  assert_int_equal(lease_after_attempt(&s, &p, 1750, 2000, LEASE_ERROR, 0), LEASE_SAME);
  /* the thread wakes at valid_until even if the next attempt is later */
  s.next_try = 5000;
  assert_int_equal(lease_wake_at(&s), 2400);
  assert_int_equal(lease_tick(&s, 2399), LEASE_SAME);
  /* ttl - margin after the last renewal SENT: it stops by itself, before the row expires
     (at 0 + 3000 by the database clock) */
  assert_int_equal(lease_tick(&s, 2400), LEASE_LOST);
  assert_int_equal(s.role, LEASE_REPLICA);
  assert_int_equal(s.epoch, 0);
  assert_int_equal(lease_tick(&s, 9999), LEASE_SAME);
  /* a replica whose attempt fails retries at the renew period */
  assert_int_equal(lease_after_attempt(&s, &p, 2500, 2600, LEASE_ERROR, 0), LEASE_SAME);
  assert_int_equal(s.next_try, 3600);
  assert_int_equal(lease_wake_at(&s), 3600);
}

static void test_late_answer_makes_no_engine(void **state) {
  struct lease_policy p;
  struct lease_state s;
  (void)state;
  lease_policy_init(&p, 3000);
  lease_state_init(&s, 0);
  /* the upsert was sent at 0 and answered at 2400 (= 0 + ttl - margin): nothing to rely on */
  assert_int_equal(lease_after_attempt(&s, &p, 0, 2400, LEASE_HELD, 1), LEASE_SAME);
  assert_int_equal(s.role, LEASE_REPLICA);
  assert_int_equal(s.next_try, 2400); /* try again at once */
  /* the engine whose renewal answer comes that late steps down */
  assert_int_equal(lease_after_attempt(&s, &p, 2400, 2410, LEASE_HELD, 1), LEASE_GAINED);
  assert_int_equal(lease_after_attempt(&s, &p, 3400, 5800, LEASE_HELD, 1), LEASE_LOST);
  assert_int_equal(s.role, LEASE_REPLICA);
  assert_int_equal(s.next_try, 5800);
}

static void test_taken_and_fenced(void **state) {
  struct lease_policy p;
  struct lease_state s;
  (void)state;
  lease_policy_init(&p, 3000);
  lease_state_init(&s, 0);
  /* another holder: stays a replica, next try a renew period after the send */
  assert_int_equal(lease_after_attempt(&s, &p, 0, 20, LEASE_TAKEN, 0), LEASE_SAME);
  assert_int_equal(s.next_try, 1000);
  assert_int_equal(lease_after_attempt(&s, &p, 1000, 1020, LEASE_HELD, 4), LEASE_GAINED);
  /* someone else took it (our row expired while we were stalled): step down */
  assert_int_equal(lease_after_attempt(&s, &p, 2000, 2020, LEASE_TAKEN, 0), LEASE_LOST);
  assert_int_equal(s.role, LEASE_REPLICA);
  assert_int_equal(lease_after_attempt(&s, &p, 3000, 3020, LEASE_HELD, 5), LEASE_GAINED);
  /* a fenced write: down at once, next attempt now */
  assert_int_equal(lease_fenced(&s, 3500), LEASE_LOST);
  assert_int_equal(s.role, LEASE_REPLICA);
  assert_int_equal(s.next_try, 3500);
  assert_int_equal(lease_fenced(&s, 3600), LEASE_SAME); /* a replica has nothing to lose */
  assert_int_equal(s.next_try, 3500);
}

/* ---- the lease row and fencing, on SQLite ---- */

struct fx {
  char dir[64], path[96];
  struct store *st;
  int fenced_calls;
};

static void on_fenced(void *arg) {
  ((struct fx *)arg)->fenced_calls++;
}

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof *f);
  if (!f) return -1;
  snprintf(f->dir, sizeof f->dir, "/tmp/cdnca-test-lease-XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->path, sizeof f->path, "%s/t.db", f->dir);
  f->st = store_open(f->path);
  if (!f->st) return -1;
  store_lease_set_fenced_hook(f->st, on_fenced, f);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  char p[160];
  store_close(&f->st);
  snprintf(p, sizeof p, "%s-wal", f->path);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", f->path);
  unlink(p);
  unlink(f->path);
  rmdir(f->dir);
  free(f);
  return 0;
}

static void test_row_acquire_renew_takeover(void **state) {
  struct fx *f = *state;
  int64_t epoch = 0, left = 0;
  char holder[64];
  assert_int_equal(store_lease_read(f->st, holder, sizeof holder, &epoch, NULL), 0);
  assert_int_equal(store_lease_acquire(f->st, "a#1", 60000, &epoch), 1);
  assert_int_equal(epoch, 1);
  assert_int_equal(store_lease_acquire(f->st, "a#1", 60000, &epoch), 1); /* renew: same epoch */
  assert_int_equal(epoch, 1);
  assert_int_equal(store_lease_acquire(f->st, "b#2", 60000, &epoch), 0); /* not expired */
  assert_int_equal(store_lease_read(f->st, holder, sizeof holder, &epoch, &left), 1);
  assert_string_equal(holder, "a#1");
  assert_int_equal(epoch, 1);
  assert_true(left > 50000 && left <= 60000);
  /* a's lease runs out (ttl 1 ms): b takes it with the next epoch */
  assert_int_equal(store_lease_acquire(f->st, "a#1", 1, &epoch), 1);
  usleep(20000);
  assert_int_equal(store_lease_acquire(f->st, "b#2", 60000, &epoch), 1);
  assert_int_equal(epoch, 2);
  assert_int_equal(store_lease_acquire(f->st, "a#1", 60000, &epoch), 0);
  /* release by the holder only; the epoch stays (a later holder gets 3) */
  assert_int_equal(store_lease_release(f->st, "a#1", 2), 0);
  assert_int_equal(store_lease_acquire(f->st, "a#1", 60000, &epoch), 0);
  assert_int_equal(store_lease_release(f->st, "b#2", 2), 0);
  assert_int_equal(store_lease_acquire(f->st, "a#1", 60000, &epoch), 1);
  assert_int_equal(epoch, 3);
}

static int round_count(struct fx *f) {
  int64_t id = store_health_next_round_id(f->st);
  return (int)id - 1;
}

static void test_fencing_engine_transactions(void **state) {
  struct store_tx *tx;
  struct fx *f = *state;
  int64_t epoch = 0;
  struct delivery_result res;
  memset(&res, 0, sizeof res);
  res.id = 12345; /* no such row: the record is a no-op that still needs the fence */
  res.state = DELIVERY_DELIVERED;
  res.error = "";
  /* no fence configured (SQLite, one process): engine transactions run */
  assert_non_null(tx = store_health_begin(f->st));
  assert_int_equal(store_health_round_add_locked(tx, 1, 1000, 1001, 0, 0), 0);
  assert_int_equal(store_health_commit(tx), 0);
  assert_int_equal(round_count(f), 1);
  /* fencing on, holding nothing: refused without a round trip, the hook runs */
  store_lease_fence_enable(f->st);
  assert_null(store_health_begin(f->st));
  assert_int_equal(f->fenced_calls, 1);
  assert_int_equal(store_delivery_record(f->st, &res, 1), -1);
  assert_int_equal(store_delivery_prune(f->st, 0), -1);
  /* holding epoch 1: allowed */
  assert_int_equal(store_lease_acquire(f->st, "a#1", 1, &epoch), 1);
  store_lease_fence_set(f->st, "a#1", epoch);
  assert_non_null(tx = store_health_begin(f->st));
  assert_int_equal(store_health_round_add_locked(tx, 2, 2000, 2001, 0, 0), 0);
  assert_int_equal(store_health_commit(tx), 0);
  assert_int_equal(store_delivery_record(f->st, &res, 1), 0);
  assert_int_equal(store_delivery_prune(f->st, 0), 0);
  f->fenced_calls = 0;
  /* another replica took over (a's row expired): a's next engine write is fenced, rolled back */
  usleep(20000);
  assert_int_equal(store_lease_acquire(f->st, "b#2", 60000, &epoch), 1);
  assert_int_equal(epoch, 2);
  assert_null(store_health_begin(f->st));
  assert_int_equal(f->fenced_calls, 1);
  assert_int_equal(round_count(f), 2);
  /* the fence was cleared by the failed check: later writes are refused locally */
  assert_int_equal(store_delivery_record(f->st, &res, 1), -1);
  assert_int_equal(f->fenced_calls, 2);
  /* the API's writes are not engine writes: they go on on every replica */
  assert_int_equal(store_token_put(f->st, STORE_TOKEN_ADMIN, "h-api", 0), 0);
  /* b with its epoch may write */
  store_lease_fence_set(f->st, "b#2", 2);
  assert_non_null(tx = store_health_begin(f->st));
  store_health_rollback(tx);
}

static void test_admin_token_ensure(void **state) {
  struct fx *f = *state;
  int kind = 0;
  int64_t node = 0;
  const char *h1 = "1111111111111111111111111111111111111111111111111111111111111111";
  const char *h2 = "2222222222222222222222222222222222222222222222222222222222222222";
  assert_int_equal(store_admin_token_ensure(f->st, h1), 0);
  assert_int_equal(store_admin_token_ensure(f->st, h2), 0); /* "bootstrap" taken: named apart */
  assert_int_equal(store_admin_token_ensure(f->st, h1), 0); /* again: nothing changes */
  assert_int_equal(store_token_lookup(f->st, h1, &kind, &node), 0);
  assert_int_equal(kind, STORE_TOKEN_ADMIN);
  assert_int_equal(store_token_lookup(f->st, h2, &kind, &node), 0);
  /* a node token's hash cannot become an admin token */
  assert_int_equal(store_token_put(f->st, STORE_TOKEN_NODE, "node-hash", 0), 0);
  assert_int_equal(store_admin_token_ensure(f->st, "node-hash"), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_policy),
      cmocka_unit_test(test_gain_renew_and_schedule),
      cmocka_unit_test(test_self_demotion_when_renewals_fail),
      cmocka_unit_test(test_late_answer_makes_no_engine),
      cmocka_unit_test(test_taken_and_fenced),
      cmocka_unit_test_setup_teardown(test_row_acquire_renew_takeover, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fencing_engine_transactions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_admin_token_ensure, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
