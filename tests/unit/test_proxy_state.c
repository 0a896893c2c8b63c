/* Unit tests for noded/proxy_state's skip metrics: counts by state, labelled untrusted origins in
   id order, the label cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "proxy_state.h"
#include "sitecfg.h"

/* fail_count 2 within 10 s skips an origin for 300 ms */
static const char *CFG =
    "{\"seq\": 3, \"full\": true, \"deleted\": [], \"sites\": ["
    "{\"id\": 2, \"name\": \"blog\", \"hostnames\": [\"blog.test\"], \"config_version\": 1,"
    " \"current_level\": 1, \"origins\": [{\"id\": 20, \"level\": 1, \"address\": \"127.0.0.1\","
    " \"port\": 80, \"scheme\": \"http\"}],"
    " \"node_retry\": {\"fail_count\": 2, \"fail_window_ms\": 10000, \"skip_ms\": 300}},"
    "{\"id\": 1, \"name\": \"shop\", \"hostnames\": [\"shop.test\"], \"config_version\": 1,"
    " \"current_level\": 1, \"origins\": ["
    "  {\"id\": 10, \"level\": 1, \"address\": \"127.0.0.1\", \"port\": 8080, \"scheme\": \"http\"},"
    "  {\"id\": 11, \"level\": 2, \"address\": \"127.0.0.2\", \"port\": 8080, \"scheme\": \"http\"}],"
    " \"node_retry\": {\"fail_count\": 2, \"fail_window_ms\": 10000, \"skip_ms\": 300}}]}";

static char *render(struct proxy_state *t, int64_t now, int max) {
  struct buf b;
  buf_init(&b, 0);
  assert_int_equal(proxy_state_skip_metrics(t, now, max, &b), 0);
  assert_int_equal(buf_puts(&b, ""), 0);
  return buf_take(&b);
}

static void fail_twice(struct proxy_state *t, struct sitecfg_site *s, int idx, int64_t now) {
  proxy_state_record(t, s, idx, now, 1);
  proxy_state_record(t, s, idx, now + 1, 1);
}

static void test_skip_metrics(void **state) {
  char err[256] = "", *m;
  struct sitecfg_set *set = sitecfg_load(CFG, strlen(CFG), err, sizeof err);
  struct proxy_state *t = proxy_state_new();
  struct sitecfg_site *shop, *blog;
  assert_non_null(set);
  assert_non_null(t);
  assert_int_equal(proxy_state_sync(t, set), 0);
  shop = sitecfg_find(set, 1);
  blog = sitecfg_find(set, 2);

  m = render(t, 1000, 1000);
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"healthy\"} 3\n"));
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"skipped\"} 0\n"));
  assert_non_null(strstr(m, "# TYPE cdnca_node_origin_skipped gauge\n"));
  assert_null(strstr(m, "cdnca_node_origin_skipped{"));
  free(m);

  /* blog's origin 20 and shop's origin 11 fail twice: both skipped, listed by (site, origin) */
  fail_twice(t, blog, 0, 1000);
  fail_twice(t, shop, 1, 1000);
  m = render(t, 1100, 1000);
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"healthy\"} 1\n"));
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"skipped\"} 2\n"));
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"half_open\"} 0\n"));
  assert_non_null(strstr(m, "cdnca_node_origin_skipped{site=\"1\",origin=\"11\"} 1\n"));
  assert_non_null(strstr(m, "cdnca_node_origin_skipped{site=\"2\",origin=\"20\"} 1\n"));
  assert_true(strstr(m, "site=\"1\"") < strstr(m, "site=\"2\""));
  assert_null(strstr(m, "origin=\"10\""));
  free(m);

  /* the label cap: only the lowest ids carry labels, the counts still cover all */
  m = render(t, 1100, 1);
  assert_non_null(strstr(m, "cdnca_node_origin_skipped{site=\"1\",origin=\"11\"} 1\n"));
  assert_null(strstr(m, "site=\"2\""));
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"skipped\"} 2\n"));
  free(m);
  m = render(t, 1100, 0);
  assert_null(strstr(m, "cdnca_node_origin_skipped{"));
  free(m);

  /* past skip_ms: half-open (still untrusted, still labelled) */
  m = render(t, 1000 + 400, 1000);
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"half_open\"} 2\n"));
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"skipped\"} 0\n"));
  assert_non_null(strstr(m, "cdnca_node_origin_skipped{site=\"2\",origin=\"20\"} 1\n"));
  free(m);

  /* a successful trial (picked, then a success) restores the origin: its series goes away */
  {
    struct proxy_pick pk;
    assert_int_equal(proxy_state_pick(t, blog, 0, 1500, &pk), 0);
    assert_int_equal(pk.index, 0);
    assert_int_equal(pk.fail_open, 0);
  }
  proxy_state_record(t, blog, 0, 1500, 0);
  m = render(t, 1500, 1000);
  assert_null(strstr(m, "origin=\"20\""));
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"healthy\"} 2\n"));
  free(m);

  proxy_state_free(&t);
  sitecfg_set_unref(set);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_skip_metrics),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
