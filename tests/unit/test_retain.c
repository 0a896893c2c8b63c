/* Unit tests for controld/retain: the jobs run when the engine role is gained, with
 * before_ms = now - keep_ms, not while the role is away, and again at each gain. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "clock.h"
#include "retain.h"

static int64_t calls[2], last_before[2];

static int64_t prune_a(struct store *st, int64_t before_ms) {
  (void)st;
  __atomic_add_fetch(&calls[0], 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&last_before[0], before_ms, __ATOMIC_SEQ_CST);
  return 0;
}

static int64_t prune_b(struct store *st, int64_t before_ms) {
  (void)st;
  __atomic_add_fetch(&calls[1], 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&last_before[1], before_ms, __ATOMIC_SEQ_CST);
  return -1; /* a failing job is logged and the others still run */
}

/* Wait up to 5 s for the pruner's runs to reach n; the runs seen. */
static int64_t wait_runs(struct retain *r, int64_t n) {
  struct timespec ts = {0, 5000000};
  for (int i = 0; i < 1000 && retain_runs(r) < n; i++)
    nanosleep(&ts, NULL);
  return retain_runs(r);
}

static void test_runs_on_each_gain(void **state) {
  const struct retain_job jobs[] = {{1000, prune_a, "a"}, {86400000, prune_b, "b"}};
  struct retain *r = retain_new(NULL, jobs, 2);
  struct timespec ts = {0, 50000000};
  int64_t t0;
  (void)state;
  assert_non_null(r);
  nanosleep(&ts, NULL);
  assert_int_equal(retain_runs(r), 0); /* not the engine: nothing */
  t0 = clock_wall_ms();
  retain_set_active(r, 1);
  assert_int_equal(wait_runs(r, 1), 1);
  assert_int_equal(__atomic_load_n(&calls[0], __ATOMIC_SEQ_CST), 1);
  assert_int_equal(__atomic_load_n(&calls[1], __ATOMIC_SEQ_CST), 1);
  assert_true(last_before[0] >= t0 - 1000 && last_before[0] <= clock_wall_ms() - 1000);
  assert_true(last_before[1] >= t0 - 86400000 && last_before[1] <= clock_wall_ms() - 86400000);
  nanosleep(&ts, NULL);
  assert_int_equal(retain_runs(r), 1); /* the next run is an hour away */
  retain_set_active(r, 1);             /* still the engine: no run of its own */
  nanosleep(&ts, NULL);
  assert_int_equal(retain_runs(r), 1);
  retain_set_active(r, 0);
  retain_set_active(r, 1); /* the role lost and gained again: at once */
  assert_int_equal(wait_runs(r, 2), 2);
  retain_free(&r);
  assert_null(r);
  assert_null(retain_new(NULL, jobs, RETAIN_JOBS_MAX + 1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_runs_on_each_gain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
