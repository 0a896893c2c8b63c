/* Unit tests for common/skip: skip, half-open, fail open, weighted pick, retry rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "skip.h"

static void test_three_failures_in_window_skip(void **state) {
  struct skip_params p;
  struct skip_rec r;
  skip_params_default(&p);
  skip_rec_init(&r);
  assert_int_equal(skip_record(&r, &p, 1000, 1), 0);
  assert_int_equal(skip_record(&r, &p, 2000, 1), 0);
  assert_int_equal(skip_usable(&r, &p, 2500), 1);
  assert_int_equal(skip_record(&r, &p, 3000, 1), 1);
  assert_int_equal(r.state, SKIP_SKIPPED);
  assert_int_equal(r.skipped_until, 3000 + 30000);
  assert_int_equal(skip_usable(&r, &p, 3001), 0);
  assert_int_equal(skip_usable(&r, &p, 32999), 0);
  assert_true(skip_is_skipped(&r, 4000));
  assert_int_equal(r.requests, 3);
  assert_int_equal(r.failures, 3);
  assert_int_equal(r.skips, 1);
}

static void test_failures_spread_beyond_window(void **state) {
  struct skip_params p;
  struct skip_rec r;
  skip_params_default(&p);
  skip_rec_init(&r);
  assert_int_equal(skip_record(&r, &p, 0, 1), 0);
  assert_int_equal(skip_record(&r, &p, 6000, 1), 0);
  assert_int_equal(skip_record(&r, &p, 12000, 1), 0); /* the first is now 12 s old */
  assert_int_equal(r.state, SKIP_HEALTHY);
  assert_int_equal(skip_record(&r, &p, 20000, 1), 0); /* 6000 dropped out too */
  assert_int_equal(r.state, SKIP_HEALTHY);
  assert_int_equal(skip_record(&r, &p, 21000, 1), 1); /* 12000, 20000, 21000 */
  assert_int_equal(r.state, SKIP_SKIPPED);
}

static void test_successes_do_not_reset_window(void **state) {
  struct skip_params p;
  struct skip_rec r;
  skip_params_default(&p);
  skip_rec_init(&r);
  skip_record(&r, &p, 100, 1);
  skip_record(&r, &p, 200, 0);
  skip_record(&r, &p, 300, 1);
  skip_record(&r, &p, 400, 0);
  assert_int_equal(skip_record(&r, &p, 500, 1), 1);
}

static void test_half_open_exact_trials(void **state) {
  struct skip_params p;
  struct skip_rec r;
  skip_params_default(&p);
  p.half_open_requests = 2;
  skip_rec_init(&r);
  for (int i = 0; i < 3; i++) skip_record(&r, &p, 1000, 1);
  assert_int_equal(r.state, SKIP_SKIPPED);
  assert_int_equal(skip_usable(&r, &p, 30999), 0);
  assert_int_equal(skip_peek_usable(&r, &p, 31000), 1);
  assert_int_equal(r.state, SKIP_SKIPPED); /* peek changes nothing */
  assert_int_equal(skip_usable(&r, &p, 31000), 1);
  assert_int_equal(r.state, SKIP_HALF_OPEN);
  assert_int_equal(skip_usable(&r, &p, 31001), 1);
  assert_int_equal(skip_usable(&r, &p, 31002), 0);
  assert_int_equal(skip_usable(&r, &p, 31003), 0);
  assert_int_equal(r.half_open_in_flight, 2);
  /* an abandoned trial gives its slot back */
  skip_release(&r);
  assert_int_equal(skip_usable(&r, &p, 31004), 1);
  assert_int_equal(skip_usable(&r, &p, 31005), 0);
}

static void test_half_open_default_one(void **state) {
  struct skip_params p;
  struct skip_rec r;
  skip_params_default(&p);
  skip_rec_init(&r);
  for (int i = 0; i < 3; i++) skip_record(&r, &p, 0, 1);
  assert_int_equal(skip_usable(&r, &p, 30000), 1);
  assert_int_equal(skip_usable(&r, &p, 30000), 0);
}

static void test_half_open_success_restores_and_clears(void **state) {
  struct skip_params p;
  struct skip_rec r;
  skip_params_default(&p);
  skip_rec_init(&r);
  skip_record(&r, &p, 0, 1);
  skip_record(&r, &p, 10, 1);
  skip_record(&r, &p, 20, 1);
  assert_int_equal(skip_usable(&r, &p, 30020), 1);
  assert_int_equal(skip_record(&r, &p, 30030, 0), 0);
  assert_int_equal(r.state, SKIP_HEALTHY);
  assert_int_equal(r.fail_n, 0);
  /* one new failure (and a second) does not re-skip: the history was cleared */
  assert_int_equal(skip_record(&r, &p, 30040, 1), 0);
  assert_int_equal(skip_record(&r, &p, 30050, 1), 0);
  assert_int_equal(r.state, SKIP_HEALTHY);
  assert_int_equal(skip_usable(&r, &p, 30060), 1);
  assert_int_equal(skip_record(&r, &p, 30070, 1), 1);
}

static void test_half_open_failure_reskips(void **state) {
  struct skip_params p;
  struct skip_rec r;
  skip_params_default(&p);
  p.skip_ms = 300;
  skip_rec_init(&r);
  for (int i = 0; i < 3; i++) skip_record(&r, &p, 0, 1);
  assert_int_equal(skip_usable(&r, &p, 300), 1);
  assert_int_equal(skip_record(&r, &p, 350, 1), 1);
  assert_int_equal(r.state, SKIP_SKIPPED);
  assert_int_equal(r.skipped_until, 650);
  assert_int_equal(skip_usable(&r, &p, 649), 0);
  assert_int_equal(skip_usable(&r, &p, 650), 1);
  assert_int_equal(r.skips, 2);
}

static void test_lost_trial_recovers(void **state) {
  struct skip_params p;
  struct skip_rec r;
  skip_params_default(&p);
  p.skip_ms = 1000;
  skip_rec_init(&r);
  for (int i = 0; i < 3; i++) skip_record(&r, &p, 0, 1);
  assert_int_equal(skip_usable(&r, &p, 1000), 1);
  assert_int_equal(skip_usable(&r, &p, 1500), 0);
  assert_int_equal(skip_usable(&r, &p, 2000), 1); /* the first trial never reported */
}

static void test_all_skipped_fail_open(void **state) {
  struct skip_params p;
  struct skip_rec a, b;
  struct skip_cand c[2];
  int open = -1, idx;
  skip_params_default(&p);
  skip_rec_init(&a);
  skip_rec_init(&b);
  for (int i = 0; i < 3; i++) {
    skip_record(&a, &p, 100, 1);
    skip_record(&b, &p, 100, 1);
  }
  c[0] = (struct skip_cand){&a, 1, 0};
  c[1] = (struct skip_cand){&b, 1, 0};
  idx = skip_pick(c, 2, &p, 200, &open);
  assert_true(idx == 0 || idx == 1);
  assert_int_equal(open, 1);
  assert_int_equal(a.fail_open + b.fail_open, 1);
  idx = skip_pick(c, 2, &p, 300, &open);
  assert_int_equal(open, 1);
  assert_int_equal(a.fail_open + b.fail_open, 2);
  assert_int_equal(a.state, SKIP_SKIPPED); /* fail open does not end the skip */
  /* one usable origin -> no fail open, the usable one is chosen */
  skip_rec_init(&b);
  for (int i = 0; i < 5; i++) {
    idx = skip_pick(c, 2, &p, 400, &open);
    assert_int_equal(idx, 1);
    assert_int_equal(open, 0);
  }
}

static void test_weighted_distribution(void **state) {
  struct skip_params p;
  struct skip_rec a, b;
  struct skip_cand c[2];
  int count[2] = {0, 0}, open;
  skip_params_default(&p);
  skip_rec_init(&a);
  skip_rec_init(&b);
  c[0] = (struct skip_cand){&a, 1, 0};
  c[1] = (struct skip_cand){&b, 3, 0};
  for (int i = 0; i < 400; i++) {
    int idx = skip_pick(c, 2, &p, i, &open);
    assert_true(idx == 0 || idx == 1);
    assert_int_equal(open, 0);
    count[idx]++;
  }
  assert_int_equal(count[0], 100);
  assert_int_equal(count[1], 300);
}

static void test_smooth_interleaving(void **state) {
  struct skip_params p;
  struct skip_rec r[3];
  struct skip_cand c[3];
  int seq[7], open;
  skip_params_default(&p);
  for (int i = 0; i < 3; i++) skip_rec_init(&r[i]);
  c[0] = (struct skip_cand){&r[0], 5, 0};
  c[1] = (struct skip_cand){&r[1], 1, 0};
  c[2] = (struct skip_cand){&r[2], 1, 0};
  for (int i = 0; i < 7; i++) seq[i] = skip_pick(c, 3, &p, 0, &open);
  /* smooth WRR spreads the heavy origin out: a a b a c a a */
  int want[7] = {0, 0, 1, 0, 2, 0, 0};
  assert_memory_equal(seq, want, sizeof want);
}

static void test_tried_excluded(void **state) {
  struct skip_params p;
  struct skip_rec r[3];
  struct skip_cand c[3];
  int open;
  skip_params_default(&p);
  for (int i = 0; i < 3; i++) {
    skip_rec_init(&r[i]);
    c[i] = (struct skip_cand){&r[i], 1, 0};
  }
  c[0].tried = 1;
  for (int i = 0; i < 20; i++) assert_int_not_equal(skip_pick(c, 3, &p, 0, &open), 0);
  c[1].tried = 1;
  for (int i = 0; i < 5; i++) assert_int_equal(skip_pick(c, 3, &p, 0, &open), 2);
  c[2].tried = 1;
  assert_int_equal(skip_pick(c, 3, &p, 0, &open), -1);
  assert_int_equal(skip_pick(c, 0, &p, 0, &open), -1);
  /* untried but skipped + tried healthy -> fail open on the untried one */
  c[2].tried = 0;
  for (int i = 0; i < 3; i++) skip_record(&r[2], &p, 0, 1);
  assert_int_equal(skip_pick(c, 3, &p, 10, &open), 2);
  assert_int_equal(open, 1);
}

static void test_half_open_pick_reserves(void **state) {
  struct skip_params p;
  struct skip_rec a;
  struct skip_cand c[1];
  int open;
  skip_params_default(&p);
  p.skip_ms = 100;
  skip_rec_init(&a);
  for (int i = 0; i < 3; i++) skip_record(&a, &p, 0, 1);
  c[0] = (struct skip_cand){&a, 1, 0};
  assert_int_equal(skip_pick(c, 1, &p, 100, &open), 0);
  assert_int_equal(open, 0);
  assert_int_equal(a.state, SKIP_HALF_OPEN);
  assert_int_equal(a.half_open_in_flight, 1);
  /* the only trial is out: the next pick is a fail open */
  assert_int_equal(skip_pick(c, 1, &p, 101, &open), 0);
  assert_int_equal(open, 1);
}

static void test_classification(void **state) {
  struct skip_params p;
  skip_params_default(&p);
  assert_int_equal(skip_is_failure(&p, 1, 0), 1);
  assert_int_equal(skip_is_failure(&p, 0, 502), 1);
  assert_int_equal(skip_is_failure(&p, 0, 503), 1);
  assert_int_equal(skip_is_failure(&p, 0, 504), 1);
  assert_int_equal(skip_is_failure(&p, 0, 500), 0);
  assert_int_equal(skip_is_failure(&p, 0, 200), 0);
  assert_int_equal(skip_is_failure(&p, 0, 404), 0);
  p.n_retry_on_status = 1;
  p.retry_on_status[0] = 500;
  assert_int_equal(skip_is_failure(&p, 0, 500), 1);
  assert_int_equal(skip_is_failure(&p, 0, 502), 0);
}

static void test_retry_rules(void **state) {
  struct skip_params p;
  skip_params_default(&p);
  /* attempts: retries 2 -> at most 3 attempts */
  assert_int_equal(skip_may_retry(1, 0, &p, 1, 1, 0), 1);
  assert_int_equal(skip_may_retry(2, 0, &p, 1, 1, 0), 1);
  assert_int_equal(skip_may_retry(3, 0, &p, 1, 1, 0), 0);
  p.retries = 0;
  assert_int_equal(skip_may_retry(1, 0, &p, 1, 0, 0), 0);
  skip_params_default(&p);
  /* budget */
  assert_int_equal(skip_may_retry(1, 15000, &p, 1, 1, 0), 1);
  assert_int_equal(skip_may_retry(1, 15001, &p, 1, 1, 0), 0);
  /* POST: retried only when nothing was sent */
  assert_int_equal(skip_may_retry(1, 10, &p, 0, 0, 0), 1);
  assert_int_equal(skip_may_retry(1, 10, &p, 0, 1, 0), 0);
  /* a body already sent is never replayed, even for PUT */
  assert_int_equal(skip_may_retry(1, 10, &p, 1, 1, 1), 0);
  assert_int_equal(skip_may_retry(1, 10, &p, 0, 1, 1), 0);
  /* methods */
  assert_int_equal(skip_method_idempotent("GET", 3), 1);
  assert_int_equal(skip_method_idempotent("HEAD", 4), 1);
  assert_int_equal(skip_method_idempotent("PUT", 3), 1);
  assert_int_equal(skip_method_idempotent("DELETE", 6), 1);
  assert_int_equal(skip_method_idempotent("OPTIONS", 7), 1);
  assert_int_equal(skip_method_idempotent("TRACE", 5), 1);
  assert_int_equal(skip_method_idempotent("POST", 4), 0);
  assert_int_equal(skip_method_idempotent("PATCH", 5), 0);
  assert_int_equal(skip_method_idempotent("GETX", 4), 0);
  assert_int_equal(skip_method_idempotent("get", 3), 0);
}

static void test_fail_count_cap(void **state) {
  struct skip_params p;
  struct skip_rec r;
  skip_params_default(&p);
  p.fail_count = 1000;
  skip_rec_init(&r);
  for (int i = 0; i < SKIP_RING - 1; i++) assert_int_equal(skip_record(&r, &p, i, 1), 0);
  assert_int_equal(skip_record(&r, &p, SKIP_RING, 1), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_three_failures_in_window_skip),
      cmocka_unit_test(test_failures_spread_beyond_window),
      cmocka_unit_test(test_successes_do_not_reset_window),
      cmocka_unit_test(test_half_open_exact_trials),
      cmocka_unit_test(test_half_open_default_one),
      cmocka_unit_test(test_half_open_success_restores_and_clears),
      cmocka_unit_test(test_half_open_failure_reskips),
      cmocka_unit_test(test_lost_trial_recovers),
      cmocka_unit_test(test_all_skipped_fail_open),
      cmocka_unit_test(test_weighted_distribution),
      cmocka_unit_test(test_smooth_interleaving),
      cmocka_unit_test(test_tried_excluded),
      cmocka_unit_test(test_half_open_pick_reserves),
      cmocka_unit_test(test_classification),
      cmocka_unit_test(test_retry_rules),
      cmocka_unit_test(test_fail_count_cap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
