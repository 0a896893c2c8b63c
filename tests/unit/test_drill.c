/* Unit tests for controld/drill: the create body's validation row by row, the preconditions'
   reason codes in their order, the state machine row by row on a fake clock, and the next start
   of a recurring drill. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drill.h"

#define NOW 1700000000000LL

static int apply_text(const char *text, struct drill_rec *d, struct field_err *err) {
  cJSON *j = cJSON_Parse(text);
  int r;
  assert_non_null(j);
  r = drill_apply(j, d, NOW, err);
  cJSON_Delete(j);
  return r;
}

static void test_apply_defaults(void **state) {
  struct drill_rec d;
  struct field_err err;
  (void)state;
  assert_int_equal(apply_text("{\"to_level\": 2}", &d, &err), 0);
  assert_int_equal(d.to_level, 2);
  assert_int_equal(d.duration_ms, 600000);
  assert_true(d.max_failure_ratio > 0.0199 && d.max_failure_ratio < 0.0201);
  assert_int_equal(d.min_requests, 100);
  assert_int_equal(d.start_at, NOW); /* null: at once */
  assert_int_equal(d.every_ms, 0);
  assert_int_equal(d.state, DRILL_SCHEDULED);
  assert_int_equal(d.result, DRILL_RESULT_NONE);
  assert_int_equal(d.created_at, NOW);
  assert_int_equal(apply_text("{\"to_level\": 3, \"duration_ms\": 10000, \"max_failure_ratio\": 1, "
                              "\"min_requests\": 1, \"start_at\": 1700000060000, "
                              "\"every_ms\": 3600000}",
                              &d, &err),
                   0);
  assert_int_equal(d.to_level, 3);
  assert_int_equal(d.duration_ms, 10000);
  assert_int_equal(d.min_requests, 1);
  assert_int_equal(d.start_at, NOW + 60000);
  assert_int_equal(d.every_ms, 3600000);
  /* a start in the past starts now */
  assert_int_equal(apply_text("{\"to_level\": 2, \"start_at\": 5}", &d, &err), 0);
  assert_int_equal(d.start_at, NOW);
}

static void test_apply_errors(void **state) {
  static const struct {
    const char *body;
    unsigned status;
    const char *field;
  } rows[] = {
      {"{}", 422, "to_level"},
      {"{\"to_level\": 1}", 422, "to_level"},
      {"{\"to_level\": \"2\"}", 422, "to_level"},
      {"{\"to_level\": 2, \"duration_ms\": 9999}", 422, "duration_ms"},
      {"{\"to_level\": 2, \"duration_ms\": 86400001}", 422, "duration_ms"},
      {"{\"to_level\": 2, \"max_failure_ratio\": 0}", 422, "max_failure_ratio"},
      {"{\"to_level\": 2, \"max_failure_ratio\": 1.5}", 422, "max_failure_ratio"},
      {"{\"to_level\": 2, \"max_failure_ratio\": -0.1}", 422, "max_failure_ratio"},
      {"{\"to_level\": 2, \"min_requests\": 0}", 422, "min_requests"},
      {"{\"to_level\": 2, \"every_ms\": 0}", 422, "every_ms"},
      {"{\"to_level\": 2, \"every_ms\": 3599999}", 422, "every_ms"},
      {"{\"to_level\": 2, \"start_at\": 1900000000000}", 422, "start_at"},
      {"{\"to_level\": 2, \"state\": \"running\"}", 400, "state"},
      {"{\"to_level\": 2, \"bogus\": 1}", 400, "bogus"},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct drill_rec d;
    struct field_err err;
    memset(&d, 0x5a, sizeof d);
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_text(rows[i].body, &d, &err), -1);
    assert_int_equal(err.status, rows[i].status);
    assert_string_equal(err.field, rows[i].field);
    assert_true(err.message[0] != '\0');
    assert_int_equal(d.id, 0x5a5a5a5a5a5a5a5aLL); /* nothing written on error */
  }
}

static void test_check_level(void **state) {
  int levels[] = {1, 1, 3};
  struct field_err err;
  (void)state;
  assert_int_equal(drill_check_level(3, levels, 3, &err), 0);
  assert_int_equal(drill_check_level(2, levels, 3, &err), -1);
  assert_string_equal(err.field, "to_level");
  assert_int_equal(err.status, 422);
  assert_int_equal(drill_check_level(1, levels, 3, &err), -1);
  assert_int_equal(drill_check_level(4, levels, 3, &err), -1);
}

static struct drill_site good_site(void) {
  struct drill_site s;
  memset(&s, 0, sizeof s);
  s.current_level = s.first_level = 1;
  s.current_healthy = s.target_healthy = 1;
  return s;
}

static void test_preconditions(void **state) {
  struct drill_site s = good_site();
  (void)state;
  assert_null(drill_precondition(&s));
  s.target_healthy = 0;
  assert_string_equal(drill_precondition(&s), "level_unhealthy");
  s = good_site();
  s.current_healthy = 0;
  assert_string_equal(drill_precondition(&s), "level_unhealthy");
  s.current_level = 2;
  assert_string_equal(drill_precondition(&s), "not_on_first_level");
  s.first_level = 0; /* no enabled origin anywhere */
  s.current_level = 1;
  assert_string_equal(drill_precondition(&s), "not_on_first_level");
  s.incident_open = 1;
  assert_string_equal(drill_precondition(&s), "incident_open");
  s.drill_running = 1;
  assert_string_equal(drill_precondition(&s), "drill_running");
  /* a site whose first enabled level is 2 is on its first level there */
  s = good_site();
  s.current_level = s.first_level = 2;
  assert_null(drill_precondition(&s));
}

static struct drill_rec scheduled(void) {
  struct drill_rec d;
  memset(&d, 0, sizeof d);
  d.to_level = 2;
  d.from_level = 1;
  d.duration_ms = 60000;
  d.max_failure_ratio = 0.02;
  d.min_requests = 100;
  d.start_at = NOW + 5000;
  d.state = DRILL_SCHEDULED;
  return d;
}

/* One row: the drill's state, what the engine sees, the time, the decision. */
static void expect(const struct drill_rec *d, const struct drill_obs *o, int64_t now,
                   enum drill_action want, const char *why_has) {
  char why[160];
  assert_int_equal(drill_decide(d, o, now, why, sizeof why), want);
  if (why_has) assert_non_null(strstr(why, why_has));
  assert_int_equal(drill_decide(d, o, now, NULL, 0), want); /* why may be NULL */
}

static void test_machine_rows(void **state) {
  struct drill_rec d = scheduled();
  struct drill_obs o;
  (void)state;
  memset(&o, 0, sizeof o);
  o.site = good_site();
  /* scheduled: waits for start_at, then starts or fails with the reason code */
  expect(&d, &o, NOW, DRILL_WAIT, "scheduled");
  expect(&d, &o, NOW + 4999, DRILL_WAIT, NULL);
  expect(&d, &o, NOW + 5000, DRILL_START, "level 2");
  o.site.incident_open = 1;
  expect(&d, &o, NOW + 5000, DRILL_FAIL, "incident_open");
  o.site = good_site();
  o.site.current_level = 2;
  expect(&d, &o, NOW + 5000, DRILL_FAIL, "not_on_first_level");
  o.site = good_site();
  o.site.target_healthy = 0;
  expect(&d, &o, NOW + 5000, DRILL_FAIL, "level_unhealthy");

  /* running on level 2 since NOW + 5000 */
  d.state = DRILL_RUNNING;
  d.started_at = NOW + 5000;
  o.site = good_site();
  o.site.current_level = 2;
  expect(&d, &o, NOW + 6000, DRILL_GO_ON, "watching");
  /* under min_requests every failure is not enough */
  o.requests = 99;
  o.failures = 99;
  expect(&d, &o, NOW + 6000, DRILL_GO_ON, NULL);
  /* at min_requests: 2 of 100 is at the ratio (not over), 3 is over */
  o.requests = 100;
  o.failures = 2;
  expect(&d, &o, NOW + 6000, DRILL_GO_ON, NULL);
  o.failures = 3;
  expect(&d, &o, NOW + 6000, DRILL_ABORT, "failed 3 of 100");
  /* 30 % of a bad backup aborts */
  o.requests = 1000;
  o.failures = 300;
  expect(&d, &o, NOW + 6000, DRILL_ABORT, NULL);
  o.requests = o.failures = 0;
  /* the target turns unhealthy */
  o.site.target_healthy = 0;
  expect(&d, &o, NOW + 6000, DRILL_ABORT, "unhealthy");
  /* an incident cancels before anything else */
  o.site.incident_open = 1;
  o.requests = 1000;
  o.failures = 1000;
  expect(&d, &o, NOW + 6000, DRILL_CANCEL, "incident");
  o.site.incident_open = 0;
  o.site.target_healthy = 1;
  o.requests = o.failures = 0;
  /* the site left the level (the operator's switch) */
  o.site.current_level = 1;
  expect(&d, &o, NOW + 6000, DRILL_CANCEL, "left level 2");
  o.site.current_level = 2;
  /* the end: duration_ms after the start, not before */
  expect(&d, &o, NOW + 5000 + 59999, DRILL_GO_ON, NULL);
  expect(&d, &o, NOW + 5000 + 60000, DRILL_PASS, "carried");
  /* failures over the ratio at the end still abort */
  o.requests = 200;
  o.failures = 50;
  expect(&d, &o, NOW + 5000 + 60000, DRILL_ABORT, NULL);
  /* a finished drill does nothing */
  d.state = DRILL_FINISHED;
  expect(&d, &o, NOW + 999999, DRILL_WAIT, NULL);
}

/* A drill walked on a fake clock second by second, with windows as the engine makes them. */
static void test_machine_clock(void **state) {
  struct drill_rec d = scheduled();
  struct drill_obs o;
  int64_t now = NOW;
  enum drill_action a;
  (void)state;
  memset(&o, 0, sizeof o);
  o.site = good_site();
  while ((a = drill_decide(&d, &o, now, NULL, 0)) == DRILL_WAIT)
    now += 1000;
  assert_int_equal(a, DRILL_START);
  assert_int_equal(now, NOW + 5000);
  d.state = DRILL_RUNNING;
  d.started_at = now;
  o.site.current_level = 2;
  for (;;) {
    now += 1000;
    o.requests += 30; /* 30 requests a second, 1 of them failed (3.3 %) */
    o.failures += 1;
    a = drill_decide(&d, &o, now, NULL, 0);
    if (a != DRILL_GO_ON) break;
    if (o.requests >= d.min_requests) o.requests = o.failures = 0; /* a new window */
  }
  /* 3.3 % > 2 %: the first window with min_requests aborts */
  assert_int_equal(a, DRILL_ABORT);
  assert_int_equal(now - d.started_at, 4000);
  /* a clean level runs to the end */
  o.requests = o.failures = 0;
  now = d.started_at;
  for (;;) {
    now += 1000;
    o.requests += 30;
    a = drill_decide(&d, &o, now, NULL, 0);
    if (a != DRILL_GO_ON) break;
    if (o.requests >= d.min_requests) o.requests = o.failures = 0;
  }
  assert_int_equal(a, DRILL_PASS);
  assert_int_equal(now, d.started_at + d.duration_ms);
}

static void test_next_start(void **state) {
  struct drill_rec d = scheduled();
  (void)state;
  assert_int_equal(drill_next_start(&d, NOW), 0);
  d.every_ms = 3600000;
  assert_int_equal(drill_next_start(&d, NOW + 6000), d.start_at + 3600000);
  /* runs missed while controld was down are not made up: the next one after now */
  assert_int_equal(drill_next_start(&d, d.start_at + 3 * 3600000 + 1), d.start_at + 4 * 3600000);
  assert_int_equal(drill_next_start(&d, d.start_at + 3600000), d.start_at + 2 * 3600000);
}

static void test_names_and_json(void **state) {
  struct drill_rec d = scheduled();
  cJSON *j = cJSON_CreateObject();
  (void)state;
  d.id = 7;
  d.state = DRILL_FINISHED;
  d.result = DRILL_ABORTED;
  assert_int_equal(fields_json_add(j, drill_fields, FORM_OUT, &d), 0);
  assert_string_equal(cJSON_GetObjectItem(j, "state")->valuestring, "finished");
  assert_string_equal(cJSON_GetObjectItem(j, "result")->valuestring, "aborted");
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "every_ms")));
  cJSON_Delete(j);
  j = cJSON_CreateObject();
  d.result = DRILL_RESULT_NONE;
  assert_int_equal(fields_json_add(j, drill_fields, FORM_OUT, &d), 0);
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "result")));
  cJSON_Delete(j);
}

static void test_sum_clamp(void **state) {
  (void)state;
  assert_true(drill_sum_clamp(-5) == 0);
  assert_true(drill_sum_clamp(0) == 0);
  assert_true(drill_sum_clamp(1234) == 1234);
  assert_true(drill_sum_clamp(DRILL_SUM_MAX) == DRILL_SUM_MAX);
  assert_true(drill_sum_clamp(DRILL_SUM_MAX + 1) == DRILL_SUM_MAX);
  assert_true(drill_sum_clamp(INT64_MAX) == DRILL_SUM_MAX);
  /* two clamped values never overflow when added */
  assert_true(drill_sum_clamp(INT64_MAX) + drill_sum_clamp(INT64_MAX) > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_apply_defaults), cmocka_unit_test(test_apply_errors),
      cmocka_unit_test(test_check_level),    cmocka_unit_test(test_preconditions),
      cmocka_unit_test(test_machine_rows),   cmocka_unit_test(test_machine_clock),
      cmocka_unit_test(test_next_start),     cmocka_unit_test(test_names_and_json),
      cmocka_unit_test(test_sum_clamp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
