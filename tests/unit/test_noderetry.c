/* Unit tests for common/noderetry: the node_retry table, validation row by row, the writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "noderetry.h"

/* Apply text (a JSON object) strictly onto defaults; returns the apply result. */
static int apply_text(const char *text, struct skip_params *p, int strict, struct field_err *err) {
  cJSON *j = cJSON_Parse(text);
  int r;
  assert_non_null(j);
  r = noderetry_apply(j, p, strict, "node_retry", err);
  cJSON_Delete(j);
  return r;
}

static void expect_error(const char *text, unsigned status, const char *code, const char *field) {
  struct skip_params p, before;
  struct field_err err;
  noderetry_defaults(&p);
  before = p;
  memset(&err, 0, sizeof err);
  assert_int_equal(apply_text(text, &p, 1, &err), -1);
  assert_int_equal(err.status, status);
  assert_string_equal(err.code, code);
  assert_string_equal(err.field, field);
  assert_true(err.message[0] != '\0');
  assert_memory_equal(&p, &before, sizeof p); /* nothing changes on error */
}

static void test_defaults(void **state) {
  struct skip_params p;
  noderetry_defaults(&p);
  assert_int_equal(p.retries, 2);
  assert_int_equal(p.retry_budget_ms, 15000);
  assert_int_equal(p.fail_count, 3);
  assert_int_equal(p.fail_window_ms, 10000);
  assert_int_equal(p.skip_ms, 30000);
  assert_int_equal(p.half_open_requests, 1);
  assert_int_equal(p.n_retry_on_status, 3);
  assert_int_equal(p.retry_on_status[0], 502);
  assert_int_equal(p.retry_on_status[2], 504);
  assert_int_equal(p.backup_levels, 1);
  assert_true(p.failure_ratio == 0);
  assert_int_equal(p.failure_min_volume, 20);
}

static void test_every_field_applies(void **state) {
  struct skip_params p;
  struct field_err err;
  noderetry_defaults(&p);
  assert_int_equal(apply_text("{\"retries\": 0, \"retry_budget_ms\": 600000, \"fail_count\": 1000,"
                              " \"fail_window_ms\": 100, \"skip_ms\": 3600000,"
                              " \"half_open_requests\": 100, \"retry_on_status\": [500, 599],"
                              " \"backup_levels\": false, \"failure_ratio\": 0.25,"
                              " \"failure_min_volume\": 1}",
                              &p, 1, &err),
                   0);
  assert_int_equal(p.retries, 0);
  assert_int_equal(p.retry_budget_ms, 600000);
  assert_int_equal(p.fail_count, 1000);
  assert_int_equal(p.fail_window_ms, 100);
  assert_int_equal(p.skip_ms, 3600000);
  assert_int_equal(p.half_open_requests, 100);
  assert_int_equal(p.n_retry_on_status, 2);
  assert_int_equal(p.retry_on_status[1], 599);
  assert_int_equal(p.backup_levels, 0);
  assert_true(p.failure_ratio == 0.25);
  assert_int_equal(p.failure_min_volume, 1);
  /* absent fields keep the current values; null turns the ratio off */
  assert_int_equal(apply_text("{\"failure_ratio\": null}", &p, 1, &err), 0);
  assert_true(p.failure_ratio == 0);
  assert_int_equal(p.fail_count, 1000);
  assert_int_equal(apply_text("{\"failure_ratio\": 1}", &p, 1, &err), 0);
  assert_true(p.failure_ratio == 1);
  assert_int_equal(apply_text("{\"retry_on_status\": []}", &p, 1, &err), 0);
  assert_int_equal(p.n_retry_on_status, 0);
}

static void test_bounds_row_by_row(void **state) {
  expect_error("{\"retries\": 11}", 422, "out_of_range", "node_retry.retries");
  expect_error("{\"retries\": -1}", 422, "out_of_range", "node_retry.retries");
  expect_error("{\"retries\": 1.5}", 422, "out_of_range", "node_retry.retries");
  expect_error("{\"retries\": \"2\"}", 422, "invalid_type", "node_retry.retries");
  expect_error("{\"retry_budget_ms\": 600001}", 422, "out_of_range", "node_retry.retry_budget_ms");
  expect_error("{\"fail_count\": 0}", 422, "out_of_range", "node_retry.fail_count");
  expect_error("{\"fail_window_ms\": 99}", 422, "out_of_range", "node_retry.fail_window_ms");
  expect_error("{\"fail_window_ms\": null}", 422, "invalid_type", "node_retry.fail_window_ms");
  expect_error("{\"skip_ms\": 3600001}", 422, "out_of_range", "node_retry.skip_ms");
  expect_error("{\"half_open_requests\": 0}", 422, "out_of_range", "node_retry.half_open_requests");
  expect_error("{\"retry_on_status\": [502, 399]}", 422, "out_of_range",
               "node_retry.retry_on_status[1]");
  expect_error("{\"retry_on_status\": 502}", 422, "invalid_value", "node_retry.retry_on_status");
  expect_error("{\"retry_on_status\": [500,501,502,503,504,505,506,507,508,509,510,511,512,513,"
               "514,515,516]}",
               422, "invalid_value", "node_retry.retry_on_status");
  expect_error("{\"backup_levels\": 1}", 422, "invalid_type", "node_retry.backup_levels");
  expect_error("{\"backup_levels\": null}", 422, "invalid_type", "node_retry.backup_levels");
  expect_error("{\"failure_ratio\": 0}", 422, "out_of_range", "node_retry.failure_ratio");
  expect_error("{\"failure_ratio\": 1.01}", 422, "out_of_range", "node_retry.failure_ratio");
  expect_error("{\"failure_ratio\": -0.5}", 422, "out_of_range", "node_retry.failure_ratio");
  expect_error("{\"failure_ratio\": \"half\"}", 422, "invalid_type", "node_retry.failure_ratio");
  expect_error("{\"failure_min_volume\": 0}", 422, "out_of_range", "node_retry.failure_min_volume");
  expect_error("{\"failure_min_volume\": 1000001}", 422, "out_of_range",
               "node_retry.failure_min_volume");
  /* an error after a valid field still leaves everything unchanged */
  expect_error("{\"retries\": 5, \"skip_ms\": 1}", 422, "out_of_range", "node_retry.skip_ms");
}

static void test_unknown_keys(void **state) {
  struct skip_params p, before;
  struct field_err err;
  expect_error("{\"retries\": 1, \"bogus\": 1}", 400, "unknown_field", "node_retry.bogus");
  /* lenient (the node): ignored, the rest applies */
  noderetry_defaults(&p);
  before = p;
  assert_int_equal(apply_text("{\"retries\": 1, \"bogus\": 1}", &p, 0, &err), 0);
  assert_int_equal(p.retries, 1);
  p.retries = before.retries;
  assert_memory_equal(&p, &before, sizeof p);
}

static void test_not_an_object(void **state) {
  struct skip_params p;
  struct field_err err;
  cJSON *j = cJSON_CreateNumber(5);
  noderetry_defaults(&p);
  assert_int_equal(noderetry_apply(j, &p, 0, "sites[0].node_retry", &err), -1);
  assert_int_equal(err.status, 422);
  assert_string_equal(err.field, "sites[0].node_retry");
  cJSON_Delete(j);
}

static void test_json_round_trip(void **state) {
  struct skip_params p, q;
  struct field_err err;
  cJSON *j;
  char *txt;
  noderetry_defaults(&p);
  j = noderetry_json(&p);
  txt = cJSON_PrintUnformatted(j);
  assert_string_equal(txt, "{\"retries\":2,\"retry_budget_ms\":15000,\"fail_count\":3,"
                           "\"fail_window_ms\":10000,\"skip_ms\":30000,\"half_open_requests\":1,"
                           "\"retry_on_status\":[502,503,504],\"backup_levels\":true,"
                           "\"failure_ratio\":null,\"failure_min_volume\":20}");
  free(txt);
  cJSON_Delete(j);
  p.failure_ratio = 0.5;
  p.backup_levels = 0;
  p.retries = 7;
  j = noderetry_json(&p);
  noderetry_defaults(&q);
  assert_int_equal(noderetry_apply(j, &q, 1, "node_retry", &err), 0);
  assert_memory_equal(&p, &q, sizeof p);
  cJSON_Delete(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),          cmocka_unit_test(test_every_field_applies),
      cmocka_unit_test(test_bounds_row_by_row), cmocka_unit_test(test_unknown_keys),
      cmocka_unit_test(test_not_an_object),     cmocka_unit_test(test_json_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
