/* Unit tests for common/metrics: Prometheus text of counters, gauges and histograms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "metrics.h"

static char *render(struct metrics *m, struct buf *b) {
  buf_init(b, 0);
  assert_int_equal(metrics_render(m, b), 0);
  return b->data;
}

static void test_counter_and_gauge(void **state) {
  struct metrics *m = metrics_new();
  struct buf b;
  char *t;
  metrics_declare(m, "x_total", "counter", "things");
  metrics_declare(m, "never_total", "counter", "declared, no samples");
  metrics_add(m, "x_total", "code=\"200\"", 1);
  metrics_add(m, "x_total", "code=\"200\"", 2);
  metrics_add(m, "x_total", "code=\"500\"", 1);
  metrics_set(m, "g", "", 7);
  metrics_set(m, "g", "", 5);
  t = render(m, &b);
  assert_non_null(strstr(t, "# HELP x_total things\n# TYPE x_total counter\n"));
  assert_non_null(strstr(t, "x_total{code=\"200\"} 3\n"));
  assert_non_null(strstr(t, "x_total{code=\"500\"} 1\n"));
  assert_non_null(strstr(t, "# TYPE never_total counter\n"));
  assert_non_null(strstr(t, "# TYPE g gauge\ng 5\n"));
  buf_fini(&b);
  metrics_free(&m);
  assert_null(m);
}

static void test_histogram(void **state) {
  struct metrics *m = metrics_new();
  struct buf b;
  char *t;
  metrics_observe(m, "h_seconds", "", 0.003);
  metrics_observe(m, "h_seconds", "", 0.2);
  metrics_observe(m, "h_seconds", "", 100);
  t = render(m, &b);
  assert_non_null(strstr(t, "h_seconds_bucket{le=\"0.005\"} 1\n"));
  assert_non_null(strstr(t, "h_seconds_bucket{le=\"0.25\"} 2\n"));
  assert_non_null(strstr(t, "h_seconds_bucket{le=\"60\"} 2\n"));
  assert_non_null(strstr(t, "h_seconds_bucket{le=\"+Inf\"} 3\n"));
  assert_non_null(strstr(t, "h_seconds_count 3\n"));
  assert_non_null(strstr(t, "h_seconds_sum 100.203"));
  buf_fini(&b);
  metrics_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counter_and_gauge),
      cmocka_unit_test(test_histogram),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
