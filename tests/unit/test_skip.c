/* Unit tests for common/skip: skip, failure ratio, half-open (by request or probe), fail open,
 * weighted pick across levels, retry rules, DNS refresh bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "noderetry.h"
#include "skip.h"

static void test_three_failures_in_window_skip(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p);
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
  noderetry_defaults(&p);
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
  noderetry_defaults(&p);
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
  noderetry_defaults(&p);
  p.half_open_requests = 2;
  skip_rec_init(&r);
  for (int i = 0; i < 3; i++)
    skip_record(&r, &p, 1000, 1);
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
  noderetry_defaults(&p);
  skip_rec_init(&r);
  for (int i = 0; i < 3; i++)
    skip_record(&r, &p, 0, 1);
  assert_int_equal(skip_usable(&r, &p, 30000), 1);
  assert_int_equal(skip_usable(&r, &p, 30000), 0);
}

static void test_half_open_success_restores_and_clears(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p);
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
  noderetry_defaults(&p);
  p.skip_ms = 300;
  skip_rec_init(&r);
  for (int i = 0; i < 3; i++)
    skip_record(&r, &p, 0, 1);
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
  noderetry_defaults(&p);
  p.skip_ms = 1000;
  skip_rec_init(&r);
  for (int i = 0; i < 3; i++)
    skip_record(&r, &p, 0, 1);
  assert_int_equal(skip_usable(&r, &p, 1000), 1);
  assert_int_equal(skip_usable(&r, &p, 1500), 0);
  assert_int_equal(skip_usable(&r, &p, 2000), 1); /* the first trial never reported */
}

static void test_all_skipped_fail_open(void **state) {
  struct skip_params p;
  struct skip_rec a, b;
  struct skip_cand c[2];
  int open = -1, idx;
  noderetry_defaults(&p);
  skip_rec_init(&a);
  skip_rec_init(&b);
  for (int i = 0; i < 3; i++) {
    skip_record(&a, &p, 100, 1);
    skip_record(&b, &p, 100, 1);
  }
  c[0] = (struct skip_cand){&a, 1, 0, 1};
  c[1] = (struct skip_cand){&b, 1, 0, 1};
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
  noderetry_defaults(&p);
  skip_rec_init(&a);
  skip_rec_init(&b);
  c[0] = (struct skip_cand){&a, 1, 0, 1};
  c[1] = (struct skip_cand){&b, 3, 0, 1};
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
  noderetry_defaults(&p);
  for (int i = 0; i < 3; i++)
    skip_rec_init(&r[i]);
  c[0] = (struct skip_cand){&r[0], 5, 0, 1};
  c[1] = (struct skip_cand){&r[1], 1, 0, 1};
  c[2] = (struct skip_cand){&r[2], 1, 0, 1};
  for (int i = 0; i < 7; i++)
    seq[i] = skip_pick(c, 3, &p, 0, &open);
  /* smooth WRR spreads the heavy origin out: a a b a c a a */
  int want[7] = {0, 0, 1, 0, 2, 0, 0};
  assert_memory_equal(seq, want, sizeof want);
}

static void test_tried_excluded(void **state) {
  struct skip_params p;
  struct skip_rec r[3];
  struct skip_cand c[3];
  int open;
  noderetry_defaults(&p);
  for (int i = 0; i < 3; i++) {
    skip_rec_init(&r[i]);
    c[i] = (struct skip_cand){&r[i], 1, 0, 1};
  }
  c[0].tried = 1;
  for (int i = 0; i < 20; i++)
    assert_int_not_equal(skip_pick(c, 3, &p, 0, &open), 0);
  c[1].tried = 1;
  for (int i = 0; i < 5; i++)
    assert_int_equal(skip_pick(c, 3, &p, 0, &open), 2);
  c[2].tried = 1;
  assert_int_equal(skip_pick(c, 3, &p, 0, &open), -1);
  assert_int_equal(skip_pick(c, 0, &p, 0, &open), -1);
  /* untried but skipped + tried healthy -> fail open on the untried one */
  c[2].tried = 0;
  for (int i = 0; i < 3; i++)
    skip_record(&r[2], &p, 0, 1);
  assert_int_equal(skip_pick(c, 3, &p, 10, &open), 2);
  assert_int_equal(open, 1);
}

static void test_half_open_pick_reserves(void **state) {
  struct skip_params p;
  struct skip_rec a;
  struct skip_cand c[1];
  int open;
  noderetry_defaults(&p);
  p.skip_ms = 100;
  skip_rec_init(&a);
  for (int i = 0; i < 3; i++)
    skip_record(&a, &p, 0, 1);
  c[0] = (struct skip_cand){&a, 1, 0, 1};
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
  noderetry_defaults(&p);
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
  noderetry_defaults(&p);
  /* attempts: retries 2 -> at most 3 attempts */
  assert_int_equal(skip_may_retry(1, 0, &p, 1, 1, 0), 1);
  assert_int_equal(skip_may_retry(2, 0, &p, 1, 1, 0), 1);
  assert_int_equal(skip_may_retry(3, 0, &p, 1, 1, 0), 0);
  p.retries = 0;
  assert_int_equal(skip_may_retry(1, 0, &p, 1, 0, 0), 0);
  noderetry_defaults(&p);
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
  noderetry_defaults(&p);
  p.fail_count = 1000;
  skip_rec_init(&r);
  for (int i = 0; i < SKIP_RING - 1; i++)
    assert_int_equal(skip_record(&r, &p, i, 1), 0);
  assert_int_equal(skip_record(&r, &p, SKIP_RING, 1), 1);
}

/* ---- failure ratio (off by default; share within fail_window_ms over failure_min_volume) ---- */

/* Feed n outcomes at now, every k-th a failure (k = 0: none); returns the last skip_record. */
static int feed(struct skip_rec *r, const struct skip_params *p, int64_t now, int n, int k) {
  int last = 0;
  for (int i = 1; i <= n; i++)
    last = skip_record(r, p, now, k > 0 && i % k == 0);
  return last;
}

static void test_ratio_off_by_default(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p);
  assert_true(p.failure_ratio == 0);
  assert_int_equal(p.failure_min_volume, 20);
  p.fail_count = 1000; /* only the ratio could skip here */
  skip_rec_init(&r);
  feed(&r, &p, 100, 40, 2); /* 50 % failures over 40 outcomes */
  assert_int_equal(r.state, SKIP_HEALTHY);
}

static void test_ratio_skips_at_share_with_volume(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p);
  p.fail_count = 1000;
  p.failure_ratio = 0.5;
  p.failure_min_volume = 20;
  skip_rec_init(&r);
  /* 19 outcomes, 9 failed: below the volume */
  for (int i = 0; i < 10; i++)
    assert_int_equal(skip_record(&r, &p, 100, 0), 0);
  for (int i = 0; i < 9; i++)
    assert_int_equal(skip_record(&r, &p, 100, 1), 0);
  assert_int_equal(r.state, SKIP_HEALTHY);
  /* the 20th outcome is a failure: 10 of 20 = 0.5 >= 0.5 */
  assert_int_equal(skip_record(&r, &p, 100, 1), 1);
  assert_int_equal(r.state, SKIP_SKIPPED);
  assert_int_equal(r.skipped_until, 100 + p.skip_ms);
}

static void test_ratio_without_volume_does_not_skip(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p);
  p.fail_count = 1000;
  p.failure_ratio = 0.1;
  p.failure_min_volume = 20;
  skip_rec_init(&r);
  /* every outcome fails, but only 19 of them */
  assert_int_equal(feed(&r, &p, 100, 19, 1), 0);
  assert_int_equal(r.state, SKIP_HEALTHY);
  assert_int_equal(skip_record(&r, &p, 100, 1), 1);
}

static void test_ratio_below_share(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p);
  p.fail_count = 1000;
  p.failure_ratio = 0.5;
  skip_rec_init(&r);
  feed(&r, &p, 100, 60, 3); /* 33 % (20 failures: under the fail_count cap of SKIP_RING) */
  assert_int_equal(r.state, SKIP_HEALTHY);
}

static void test_ratio_window_forgets(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p); /* window 10 s in slices of 1 s */
  p.fail_count = 1000;
  p.failure_ratio = 0.5;
  p.failure_min_volume = 20;
  skip_rec_init(&r);
  feed(&r, &p, 0, 15, 1); /* 15 failures at t=0 */
  assert_int_equal(r.state, SKIP_HEALTHY);
  /* 10 s later those have left the window: 10 failures of 10 is under the volume */
  assert_int_equal(feed(&r, &p, 10000, 10, 1), 0);
  assert_int_equal(r.state, SKIP_HEALTHY);
  /* within the same window they add up: 10 more failures -> 20 of 20 */
  assert_int_equal(feed(&r, &p, 10500, 10, 1), 1);
}

static void test_ratio_history_cleared_by_recovery(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p);
  p.fail_count = 1000;
  p.failure_ratio = 0.5;
  p.failure_min_volume = 4;
  p.skip_ms = 100;
  skip_rec_init(&r);
  feed(&r, &p, 0, 4, 2); /* 2 of 4 */
  assert_int_equal(r.state, SKIP_SKIPPED);
  assert_int_equal(skip_usable(&r, &p, 100), 1);
  skip_record(&r, &p, 110, 0); /* trial succeeds: history cleared */
  assert_int_equal(r.state, SKIP_HEALTHY);
  /* one failure after recovery: 1 of 1, under the volume */
  assert_int_equal(skip_record(&r, &p, 120, 1), 0);
  assert_int_equal(skip_record(&r, &p, 120, 0), 0);
  assert_int_equal(skip_record(&r, &p, 120, 0), 0);
  assert_int_equal(skip_record(&r, &p, 120, 1), 1); /* 2 of 4 */
}

/* ---- probe results feed the machine ---- */

static void test_probe_failure_counts(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p);
  skip_rec_init(&r);
  assert_int_equal(skip_probe(&r, &p, 100, 0), 0);
  assert_int_equal(skip_record(&r, &p, 200, 1), 0);
  assert_int_equal(skip_probe(&r, &p, 300, 0), 1); /* third failure in the window */
  assert_int_equal(r.state, SKIP_SKIPPED);
  assert_int_equal(r.probes, 2);
  assert_int_equal(r.requests, 1); /* probes are not visitor requests */
  assert_int_equal(r.failures, 1);
}

static void test_probe_success_healthy_changes_nothing(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p);
  skip_rec_init(&r);
  skip_record(&r, &p, 100, 1);
  skip_record(&r, &p, 200, 1);
  assert_int_equal(skip_probe(&r, &p, 300, 1), 0);
  assert_int_equal(r.state, SKIP_HEALTHY);
  for (int k = 0; k < SKIP_SLICES; k++) /* the ratio window holds the two failures only */
    assert_int_equal(r.slice_total[k], r.slice_failed[k]);
  /* a success does not reset the failure window (as for requests) */
  assert_int_equal(skip_record(&r, &p, 400, 1), 1);
}

static void test_probe_half_open_by_probe(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p);
  skip_rec_init(&r);
  for (int i = 0; i < 3; i++)
    skip_record(&r, &p, 1000, 1);
  assert_int_equal(r.state, SKIP_SKIPPED);
  /* before the skip time a good probe changes nothing */
  assert_int_equal(skip_probe(&r, &p, 30999, 1), 0);
  assert_int_equal(r.state, SKIP_SKIPPED);
  assert_int_equal(skip_usable(&r, &p, 30999), 0);
  /* past it, a good probe is the trial: restored without any visitor request */
  assert_int_equal(skip_probe(&r, &p, 31000, 1), 0);
  assert_int_equal(r.state, SKIP_HEALTHY);
  assert_int_equal(r.fail_n, 0);
  assert_int_equal(r.requests, 3);
  /* history cleared: two failures do not skip */
  assert_int_equal(skip_record(&r, &p, 31001, 1), 0);
  assert_int_equal(skip_record(&r, &p, 31002, 1), 0);
}

static void test_probe_failed_trial_reskips(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p);
  skip_rec_init(&r);
  for (int i = 0; i < 3; i++)
    skip_record(&r, &p, 1000, 1);
  /* a failed probe before the skip time: nothing (the skip is not extended) */
  assert_int_equal(skip_probe(&r, &p, 2000, 0), 0);
  assert_int_equal(r.skipped_until, 31000);
  /* past the skip time: a failed trial, skipped again from now */
  assert_int_equal(skip_probe(&r, &p, 31500, 0), 1);
  assert_int_equal(r.state, SKIP_SKIPPED);
  assert_int_equal(r.skipped_until, 31500 + 30000);
  assert_int_equal(r.skips, 2);
}

static void test_probe_during_half_open(void **state) {
  struct skip_params p;
  struct skip_rec r;
  noderetry_defaults(&p);
  skip_rec_init(&r);
  for (int i = 0; i < 3; i++)
    skip_record(&r, &p, 1000, 1);
  assert_int_equal(skip_usable(&r, &p, 31000), 1); /* a visitor trial is out */
  assert_int_equal(r.state, SKIP_HALF_OPEN);
  assert_int_equal(skip_probe(&r, &p, 31100, 1), 0);
  assert_int_equal(r.state, SKIP_HEALTHY);
  assert_int_equal(r.half_open_in_flight, 0);
  /* the trial's late success changes nothing more */
  assert_int_equal(skip_record(&r, &p, 31200, 0), 0);
  assert_int_equal(r.state, SKIP_HEALTHY);
  /* and a failed probe in half-open skips again */
  for (int i = 0; i < 3; i++)
    skip_record(&r, &p, 40000, 1);
  assert_int_equal(skip_usable(&r, &p, 70000), 1);
  assert_int_equal(skip_probe(&r, &p, 70001, 0), 1);
  assert_int_equal(r.state, SKIP_SKIPPED);
}

/* ---- backup levels on the request path ---- */

static void skip_now(struct skip_rec *r, const struct skip_params *p, int64_t now) {
  for (int i = 0; i < p->fail_count; i++)
    skip_record(r, p, now, 1);
}

static void test_levels_current_first(void **state) {
  struct skip_params p;
  struct skip_rec r[3];
  struct skip_cand c[3];
  struct skip_choice ch;
  noderetry_defaults(&p);
  for (int i = 0; i < 3; i++)
    skip_rec_init(&r[i]);
  /* listed out of level order on purpose */
  c[0] = (struct skip_cand){&r[0], 1, 0, 2};
  c[1] = (struct skip_cand){&r[1], 1, 0, 1};
  c[2] = (struct skip_cand){&r[2], 1, 0, 3};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(skip_pick_levels(c, 3, &p, 1, 10, &ch), 1);
    assert_int_equal(ch.level, 1);
    assert_int_equal(ch.backup, 0);
    assert_int_equal(ch.fail_open, 0);
  }
  assert_int_equal(r[0].backup_picks + r[2].backup_picks, 0);
}

static void test_levels_all_tried_goes_on_in_order(void **state) {
  struct skip_params p;
  struct skip_rec r[4];
  struct skip_cand c[4];
  struct skip_choice ch;
  noderetry_defaults(&p);
  for (int i = 0; i < 4; i++)
    skip_rec_init(&r[i]);
  c[0] = (struct skip_cand){&r[0], 1, 0, 3};
  c[1] = (struct skip_cand){&r[1], 1, 0, 1};
  c[2] = (struct skip_cand){&r[2], 1, 0, 2};
  c[3] = (struct skip_cand){&r[3], 1, 0, 1};
  /* both level-1 origins failed in this request: level 2 next, then level 3 */
  c[1].tried = c[3].tried = 1;
  assert_int_equal(skip_pick_levels(c, 4, &p, 1, 10, &ch), 2);
  assert_int_equal(ch.level, 2);
  assert_int_equal(ch.backup, 1);
  assert_int_equal(ch.fail_open, 0);
  assert_int_equal(r[2].backup_picks, 1);
  c[2].tried = 1;
  assert_int_equal(skip_pick_levels(c, 4, &p, 1, 10, &ch), 0);
  assert_int_equal(ch.level, 3);
  c[0].tried = 1;
  assert_int_equal(skip_pick_levels(c, 4, &p, 1, 10, &ch), -1);
}

static void test_levels_skipped_current_goes_on(void **state) {
  struct skip_params p;
  struct skip_rec r[3];
  struct skip_cand c[3];
  struct skip_choice ch;
  noderetry_defaults(&p);
  for (int i = 0; i < 3; i++)
    skip_rec_init(&r[i]);
  c[0] = (struct skip_cand){&r[0], 1, 0, 1};
  c[1] = (struct skip_cand){&r[1], 1, 0, 1};
  c[2] = (struct skip_cand){&r[2], 1, 0, 2};
  skip_now(&r[0], &p, 0);
  /* one level-1 origin left: it is used before any backup */
  assert_int_equal(skip_pick_levels(c, 3, &p, 1, 10, &ch), 1);
  assert_int_equal(ch.backup, 0);
  /* one skipped, the other failed in this request: the backup */
  c[1].tried = 1;
  assert_int_equal(skip_pick_levels(c, 3, &p, 1, 10, &ch), 2);
  assert_int_equal(ch.backup, 1);
  assert_int_equal(ch.fail_open, 0);
  /* both skipped, new request: the backup at once */
  c[1].tried = 0;
  skip_now(&r[1], &p, 0);
  assert_int_equal(skip_pick_levels(c, 3, &p, 1, 10, &ch), 2);
  assert_int_equal(ch.backup, 1);
  assert_int_equal(r[2].backup_picks, 2);
}

static void test_levels_never_earlier(void **state) {
  struct skip_params p;
  struct skip_rec r[3];
  struct skip_cand c[3];
  struct skip_choice ch;
  noderetry_defaults(&p);
  for (int i = 0; i < 3; i++)
    skip_rec_init(&r[i]);
  c[0] = (struct skip_cand){&r[0], 1, 0, 1};
  c[1] = (struct skip_cand){&r[1], 1, 0, 2};
  c[2] = (struct skip_cand){&r[2], 1, 0, 3};
  /* current level 2 failed: level 3, never level 1 */
  c[1].tried = 1;
  assert_int_equal(skip_pick_levels(c, 3, &p, 2, 10, &ch), 2);
  assert_int_equal(ch.level, 3);
  c[2].tried = 1;
  assert_int_equal(skip_pick_levels(c, 3, &p, 2, 10, &ch), -1);
  /* even when levels 2 and 3 are skipped, fail open stays off level 1 */
  c[1].tried = c[2].tried = 0;
  skip_now(&r[1], &p, 0);
  skip_now(&r[2], &p, 0);
  assert_int_equal(skip_pick_levels(c, 3, &p, 2, 10, &ch), 1);
  assert_int_equal(ch.fail_open, 1);
  assert_int_equal(ch.level, 2);
  assert_int_equal(r[0].requests + r[0].fail_open + r[0].backup_picks, 0);
}

static void test_levels_fail_open_order(void **state) {
  struct skip_params p;
  struct skip_rec r[3];
  struct skip_cand c[3];
  struct skip_choice ch;
  noderetry_defaults(&p);
  for (int i = 0; i < 3; i++)
    skip_rec_init(&r[i]);
  c[0] = (struct skip_cand){&r[0], 1, 0, 1};
  c[1] = (struct skip_cand){&r[1], 1, 0, 2};
  c[2] = (struct skip_cand){&r[2], 1, 0, 3};
  skip_now(&r[0], &p, 0);
  skip_now(&r[1], &p, 0);
  /* level 3 is not skipped: no fail open, the backup serves */
  assert_int_equal(skip_pick_levels(c, 3, &p, 1, 10, &ch), 2);
  assert_int_equal(ch.fail_open, 0);
  assert_int_equal(ch.level, 3);
  /* every level skipped: fail open on the current level */
  skip_now(&r[2], &p, 0);
  assert_int_equal(skip_pick_levels(c, 3, &p, 1, 10, &ch), 0);
  assert_int_equal(ch.fail_open, 1);
  assert_int_equal(ch.backup, 0);
  assert_int_equal(r[0].fail_open, 1);
  /* the current level already failed in this request: fail open on the next level in order */
  c[0].tried = 1;
  assert_int_equal(skip_pick_levels(c, 3, &p, 1, 10, &ch), 1);
  assert_int_equal(ch.fail_open, 1);
  assert_int_equal(ch.level, 2);
  assert_int_equal(r[1].fail_open, 1);
  assert_int_equal(r[1].backup_picks, 1);
}

static void test_levels_off(void **state) {
  struct skip_params p;
  struct skip_rec r[2];
  struct skip_cand c[2];
  struct skip_choice ch;
  noderetry_defaults(&p);
  p.backup_levels = 0;
  for (int i = 0; i < 2; i++)
    skip_rec_init(&r[i]);
  c[0] = (struct skip_cand){&r[0], 1, 0, 1};
  c[1] = (struct skip_cand){&r[1], 1, 0, 2};
  skip_now(&r[0], &p, 0);
  /* off: the current level only, fail open on it */
  assert_int_equal(skip_pick_levels(c, 2, &p, 1, 10, &ch), 0);
  assert_int_equal(ch.fail_open, 1);
  c[0].tried = 1;
  assert_int_equal(skip_pick_levels(c, 2, &p, 1, 10, &ch), -1);
  assert_int_equal(r[1].backup_picks, 0);
}

static void test_levels_backup_half_open_and_weights(void **state) {
  struct skip_params p;
  struct skip_rec r[3];
  struct skip_cand c[3];
  struct skip_choice ch;
  int n1 = 0, n2 = 0;
  noderetry_defaults(&p);
  p.skip_ms = 100;
  for (int i = 0; i < 3; i++)
    skip_rec_init(&r[i]);
  c[0] = (struct skip_cand){&r[0], 1, 0, 1};
  c[1] = (struct skip_cand){&r[1], 3, 0, 2};
  c[2] = (struct skip_cand){&r[2], 1, 0, 2};
  skip_now(&r[0], &p, 0);
  /* the same weighted pick on the backup level: 3:1 */
  for (int i = 0; i < 40; i++) {
    int k = skip_pick_levels(c, 3, &p, 1, 10, &ch);
    n1 += k == 1;
    n2 += k == 2;
  }
  assert_int_equal(n1, 30);
  assert_int_equal(n2, 10);
  /* the current level's skip ends: its half-open trial goes first, once */
  assert_int_equal(skip_pick_levels(c, 3, &p, 1, 100, &ch), 0);
  assert_int_equal(ch.backup, 0);
  assert_int_equal(r[0].state, SKIP_HALF_OPEN);
  assert_int_equal(skip_pick_levels(c, 3, &p, 1, 101, &ch) > 0, 1);
  assert_int_equal(ch.backup, 1);
}

static void test_dns_refresh_bounds(void **state) {
  assert_int_equal(skip_dns_refresh_ms(0, 0), 30000);
  assert_int_equal(skip_dns_refresh_ms(1, 0), 30000);
  assert_int_equal(skip_dns_refresh_ms(1, 5), 30000);
  assert_int_equal(skip_dns_refresh_ms(1, 30), 30000);
  assert_int_equal(skip_dns_refresh_ms(1, 120), 120000);
  assert_int_equal(skip_dns_refresh_ms(1, 300), 300000);
  assert_int_equal(skip_dns_refresh_ms(1, 86400), 300000);
  assert_int_equal(skip_dns_refresh_ms(1, INT64_MAX), 300000);
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
      cmocka_unit_test(test_ratio_off_by_default),
      cmocka_unit_test(test_ratio_skips_at_share_with_volume),
      cmocka_unit_test(test_ratio_without_volume_does_not_skip),
      cmocka_unit_test(test_ratio_below_share),
      cmocka_unit_test(test_ratio_window_forgets),
      cmocka_unit_test(test_ratio_history_cleared_by_recovery),
      cmocka_unit_test(test_probe_failure_counts),
      cmocka_unit_test(test_probe_success_healthy_changes_nothing),
      cmocka_unit_test(test_probe_half_open_by_probe),
      cmocka_unit_test(test_probe_failed_trial_reskips),
      cmocka_unit_test(test_probe_during_half_open),
      cmocka_unit_test(test_levels_current_first),
      cmocka_unit_test(test_levels_all_tried_goes_on_in_order),
      cmocka_unit_test(test_levels_skipped_current_goes_on),
      cmocka_unit_test(test_levels_never_earlier),
      cmocka_unit_test(test_levels_fail_open_order),
      cmocka_unit_test(test_levels_off),
      cmocka_unit_test(test_levels_backup_half_open_and_weights),
      cmocka_unit_test(test_dns_refresh_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
