/* Unit tests for controld/sitemetrics: when the cached block is rebuilt, health values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sitemetrics.h"

static void test_stale(void **state) {
  /* never built */
  assert_true(sitemetrics_stale(-1, 0, 0, 0));
  /* same generation: kept until the max age */
  assert_false(sitemetrics_stale(1000, 7, 1000, 7));
  assert_false(sitemetrics_stale(1000, 7, 1000 + SITEMETRICS_MAX_AGE_MS - 1, 7));
  assert_true(sitemetrics_stale(1000, 7, 1000 + SITEMETRICS_MAX_AGE_MS, 7));
  /* the database changed: rebuilt, but not more than once per min age */
  assert_false(sitemetrics_stale(1000, 7, 1000 + SITEMETRICS_MIN_AGE_MS - 1, 8));
  assert_true(sitemetrics_stale(1000, 7, 1000 + SITEMETRICS_MIN_AGE_MS, 8));
}

static void test_health_value(void **state) {
  assert_int_equal(sitemetrics_health_value("unknown"), 0);
  assert_int_equal(sitemetrics_health_value("healthy"), 1);
  assert_int_equal(sitemetrics_health_value("unhealthy"), 2);
  assert_int_equal(sitemetrics_health_value(""), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stale),
      cmocka_unit_test(test_health_value),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
