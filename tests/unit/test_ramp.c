/* Unit tests for common/ramp: the failback_ramp validator row by row, the column codec, the
   published run, share(t) at every step edge with clock offsets, and the abort rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ramp.h"

static int apply_text(const char *text, struct ramp_policy *p, struct field_err *err) {
  cJSON *j = cJSON_Parse(text);
  int r;
  assert_non_null(j);
  r = ramp_policy_apply(j, p, "", err);
  cJSON_Delete(j);
  return r;
}

static void expect_error(const char *text, unsigned status, const char *code, const char *field) {
  struct ramp_policy p, before;
  struct field_err err;
  memset(&p, 0, sizeof p);
  p.n_steps = 2; /* a policy already there stays on error */
  p.steps[0] = 50;
  p.steps[1] = 100;
  p.step_ms = 5000;
  before = p;
  memset(&err, 0, sizeof err);
  assert_int_equal(apply_text(text, &p, &err), -1);
  assert_int_equal(err.status, status);
  assert_string_equal(err.code, code);
  assert_string_equal(err.field, field);
  assert_true(err.message[0] != '\0');
  assert_memory_equal(&p, &before, sizeof p);
}

static void test_valid(void **state) {
  struct ramp_policy p;
  struct field_err err;
  (void)state;
  memset(&p, 0, sizeof p);
  assert_int_equal(
      apply_text("{\"steps\": [1, 10, 50, 100], \"step_ms\": 60000, \"max_failure_ratio\": 0.05, "
                 "\"min_requests\": 50}",
                 &p, &err),
      0);
  assert_int_equal(p.n_steps, 4);
  assert_int_equal(p.steps[0], 1);
  assert_int_equal(p.steps[3], 100);
  assert_int_equal(p.step_ms, 60000);
  assert_true(p.max_failure_ratio > 0.049 && p.max_failure_ratio < 0.051);
  assert_int_equal(p.min_requests, 50);
  /* defaults for the two optional keys; the bounds are inclusive */
  assert_int_equal(apply_text("{\"steps\": [99, 100], \"step_ms\": 1000}", &p, &err), 0);
  assert_int_equal(p.n_steps, 2);
  assert_int_equal(p.min_requests, 50);
  assert_int_equal(apply_text("{\"steps\": [1,2,3,4,5,6,7,8,9,100], \"step_ms\": 3600000, "
                              "\"max_failure_ratio\": 1, \"min_requests\": 1}",
                              &p, &err),
                   0);
  assert_int_equal(p.n_steps, 10);
  /* null = none */
  assert_int_equal(apply_text("null", &p, &err), 0);
  assert_int_equal(p.n_steps, 0);
}

static void test_invalid(void **state) {
  (void)state;
  expect_error("{\"steps\": [100], \"step_ms\": 1000}", 422, "out_of_range", "failback_ramp.steps");
  expect_error("{\"steps\": [1,2,3,4,5,6,7,8,9,10,100], \"step_ms\": 1000}", 422, "out_of_range",
               "failback_ramp.steps");
  expect_error("{\"steps\": [10, 50], \"step_ms\": 1000}", 422, "invalid_value",
               "failback_ramp.steps");
  expect_error("{\"steps\": [10, 10, 100], \"step_ms\": 1000}", 422, "invalid_value",
               "failback_ramp.steps[1]");
  expect_error("{\"steps\": [50, 10, 100], \"step_ms\": 1000}", 422, "invalid_value",
               "failback_ramp.steps[1]");
  expect_error("{\"steps\": [0, 100], \"step_ms\": 1000}", 422, "out_of_range",
               "failback_ramp.steps[0]");
  expect_error("{\"steps\": [10, 101], \"step_ms\": 1000}", 422, "out_of_range",
               "failback_ramp.steps[1]");
  expect_error("{\"steps\": [10.5, 100], \"step_ms\": 1000}", 422, "out_of_range",
               "failback_ramp.steps[0]");
  expect_error("{\"steps\": \"10,100\", \"step_ms\": 1000}", 422, "invalid_type",
               "failback_ramp.steps");
  expect_error("{\"step_ms\": 1000}", 422, "required", "failback_ramp.steps");
  expect_error("{\"steps\": [10, 100]}", 422, "required", "failback_ramp.step_ms");
  expect_error("{\"steps\": [10, 100], \"step_ms\": 999}", 422, "out_of_range",
               "failback_ramp.step_ms");
  expect_error("{\"steps\": [10, 100], \"step_ms\": 3600001}", 422, "out_of_range",
               "failback_ramp.step_ms");
  expect_error("{\"steps\": [10, 100], \"step_ms\": 1000, \"max_failure_ratio\": 0}", 422,
               "out_of_range", "failback_ramp.max_failure_ratio");
  expect_error("{\"steps\": [10, 100], \"step_ms\": 1000, \"max_failure_ratio\": 1.01}", 422,
               "out_of_range", "failback_ramp.max_failure_ratio");
  expect_error("{\"steps\": [10, 100], \"step_ms\": 1000, \"max_failure_ratio\": \"x\"}", 422,
               "out_of_range", "failback_ramp.max_failure_ratio");
  expect_error("{\"steps\": [10, 100], \"step_ms\": 1000, \"min_requests\": 0}", 422,
               "out_of_range", "failback_ramp.min_requests");
  expect_error("{\"steps\": [10, 100], \"step_ms\": 1000, \"extra\": 1}", 400, "unknown_field",
               "failback_ramp.extra");
  expect_error("[10, 100]", 422, "invalid_type", "failback_ramp");
}

static void test_codec(void **state) {
  struct ramp_policy p, q;
  struct field_err err;
  char *t;
  cJSON *o;
  (void)state;
  memset(&p, 0, sizeof p);
  assert_true(ramp_policy_codec.is_default(&p));
  assert_null(ramp_policy_codec.to_text(&p));
  assert_int_equal(apply_text("{\"steps\": [5, 50, 100], \"step_ms\": 2000, \"max_failure_ratio\": "
                              "0.2, \"min_requests\": 7}",
                              &p, &err),
                   0);
  t = ramp_policy_codec.to_text(&p);
  assert_non_null(t);
  assert_int_equal(ramp_policy_codec.from_text(t, &q), 0);
  free(t);
  assert_memory_equal(&p, &q, sizeof p);
  /* bad stored text leaves none */
  assert_int_equal(ramp_policy_codec.from_text("{\"steps\": [5]}", &q), -1);
  assert_int_equal(q.n_steps, 0);
  /* the API's key */
  o = cJSON_CreateObject();
  assert_int_equal(ramp_policy_codec.add_json(o, &p), 0);
  assert_int_equal(ramp_policy_codec.apply(o, &q, &err), 0);
  assert_memory_equal(&p, &q, sizeof p);
  cJSON_Delete(o);
}

static struct ramp_run run3(int64_t at) {
  struct ramp_run r;
  memset(&r, 0, sizeof r);
  r.from_level = 2;
  r.to_level = 1;
  r.started_at = at;
  r.n_steps = 3;
  r.steps[0] = 10;
  r.steps[1] = 50;
  r.steps[2] = 100;
  r.step_ms = 2000;
  return r;
}

static void test_run_wire(void **state) {
  struct ramp_run r = run3(1700000000000), back;
  struct field_err err;
  cJSON *j = ramp_run_json(&r), *bad;
  (void)state;
  assert_non_null(j);
  assert_int_equal(ramp_run_read(j, "sites[0].ramp", &back, &err), 0);
  assert_memory_equal(&r, &back, sizeof r);
  cJSON_Delete(j);
  assert_int_equal(ramp_run_read(NULL, "ramp", &back, &err), 0);
  assert_int_equal(back.from_level, 0);
  /* a ramp must go back to an earlier level */
  bad = cJSON_Parse("{\"from_level\": 1, \"to_level\": 2, \"started_at\": 1, \"step_ms\": 1000, "
                    "\"steps\": [10, 100]}");
  assert_int_equal(ramp_run_read(bad, "ramp", &back, &err), -1);
  assert_string_equal(err.field, "ramp.to_level");
  cJSON_Delete(bad);
}

static void test_share_edges(void **state) {
  const int64_t t0 = 1700000000000;
  struct ramp_run r = run3(t0), none;
  (void)state;
  memset(&none, 0, sizeof none);
  assert_int_equal(ramp_share(&none, t0, 0), 0);
  /* before the start (a clock behind): the first step */
  assert_int_equal(ramp_share(&r, t0 - 5000, 0), 10);
  assert_int_equal(ramp_share(&r, t0, 0), 10);
  assert_int_equal(ramp_share(&r, t0 + 1999, 0), 10);
  assert_int_equal(ramp_share(&r, t0 + 2000, 0), 50);
  assert_int_equal(ramp_share(&r, t0 + 3999, 0), 50);
  assert_int_equal(ramp_share(&r, t0 + 4000, 0), 100);
  assert_int_equal(ramp_share(&r, t0 + 5999, 0), 100);
  /* a ramp that has ended, one long in the past */
  assert_int_equal(ramp_share(&r, t0 + 6000, 0), 100);
  assert_int_equal(ramp_share(&r, t0 + 86400000, 0), 100);
  assert_int_equal(ramp_step_at(&r, t0 + 6000), 3);
  assert_int_equal(ramp_ends_at(&r), t0 + 6000);
  /* a node whose clock is 2 s behind controld's (offset +2 s) is one step further */
  assert_int_equal(ramp_share(&r, t0 - 2000, 2000), 10);
  assert_int_equal(ramp_share(&r, t0 + 1, 2000), 50);
  assert_int_equal(ramp_share(&r, t0 + 1999, 2000), 50);
  assert_int_equal(ramp_share(&r, t0 + 2000, 2000), 100);
  /* 2 s ahead (offset -2 s): one step behind */
  assert_int_equal(ramp_share(&r, t0 + 2000, -2000), 10);
  assert_int_equal(ramp_share(&r, t0 + 3999, -2000), 10);
  assert_int_equal(ramp_share(&r, t0 + 4000, -2000), 50);
  assert_int_equal(ramp_share(&r, t0 + 6000, -2000), 100);
}

static void test_decide(void **state) {
  const int64_t t0 = 1700000000000;
  struct ramp_run r = run3(t0);
  struct ramp_policy p;
  struct ramp_window w;
  char why[128];
  (void)state;
  memset(&p, 0, sizeof p);
  p.n_steps = 3;
  p.step_ms = 2000;
  p.max_failure_ratio = 0.05;
  p.min_requests = 50;
  /* row by row: requests, failures, unhealthy, now -> action */
  static const struct {
    int64_t req, fail;
    int unhealthy;
    int skipped;
    int64_t at;
    enum ramp_action want;
  } rows[] = {
      {0, 0, 0, 0, 0, RAMP_GO_ON},         /* nothing yet */
      {49, 49, 0, 0, 0, RAMP_GO_ON},       /* below min_requests: no verdict */
      {50, 2, 0, 0, 100, RAMP_GO_ON},      /* 4 % */
      {100, 5, 0, 0, 100, RAMP_GO_ON},     /* exactly the ratio is not over it */
      {100, 6, 0, 0, 100, RAMP_ABORT},     /* over */
      {50, 50, 0, 0, 5999, RAMP_ABORT},    /* every request failed */
      {0, 0, 1, 0, 100, RAMP_ABORT},       /* the level turned unhealthy */
      {0, 0, 0, 0, 5999, RAMP_GO_ON},      /* the last step still runs */
      {0, 0, 0, 0, 6000, RAMP_COMPLETE},   /* every step ran */
      {10, 10, 0, 0, 6000, RAMP_COMPLETE}, /* failures below min_requests do not stop it */
      {200, 100, 0, 0, 9000, RAMP_ABORT},  /* an abort wins over completion */
      {1000, 50, 0, 0, 60000, RAMP_COMPLETE},
      {1, 1, 0, 1, 100, RAMP_ABORT}, /* the nodes skip the level: its visitors failed */
      {5, 0, 0, 1, 100, RAMP_GO_ON}, /* a skip with no failure in the window is old */
      {0, 0, 0, 1, 6000, RAMP_COMPLETE},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    w.requests = rows[i].req;
    w.failures = rows[i].fail;
    w.level_unhealthy = rows[i].unhealthy;
    w.level_skipped = rows[i].skipped;
    assert_int_equal(ramp_decide(&p, &r, &w, t0 + rows[i].at, why, sizeof why), rows[i].want);
    assert_true(why[0] != '\0');
  }
  /* the run a failback starts carries the policy's steps */
  p.steps[0] = 10;
  p.steps[1] = 50;
  p.steps[2] = 100;
  struct ramp_run s;
  ramp_run_start(&p, 2, 1, t0, &s);
  assert_memory_equal(&s, &r, sizeof s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid),       cmocka_unit_test(test_invalid),
      cmocka_unit_test(test_codec),       cmocka_unit_test(test_run_wire),
      cmocka_unit_test(test_share_edges), cmocka_unit_test(test_decide),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
