/* Unit tests for controld/route: patterns, parameters, 404 vs 405. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "route.h"

static enum http_rc nop(struct req *r) {
  (void)r;
  return HTTP_DONE;
}

static const struct route t1[] = {
    {"GET", "/v1/sites", AUTH_ADMIN, nop, "after,limit,q,sort,state", 0},
    {"POST", "/v1/sites", AUTH_ADMIN, nop, NULL, 0},
    {"GET", "/v1/sites/:id", AUTH_ADMIN, nop, NULL, 0},
    {"PATCH", "/v1/sites/:id/origins/:id", AUTH_ADMIN, nop, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
static const struct route t2[] = {
    {"GET", "/ui*", AUTH_NONE, nop, "*", 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
static const struct route *const tables[] = {t1, t2, NULL};

static void test_match_params(void **state) {
  int64_t p[ROUTE_MAX_PARAMS];
  int n = -1;
  assert_true(route_match("/v1/sites/:id/origins/:id", "/v1/sites/12/origins/345", p, &n));
  assert_int_equal(n, 2);
  assert_int_equal(p[0], 12);
  assert_int_equal(p[1], 345);
  assert_true(route_match("/v1/sites", "/v1/sites/", p, &n));
  assert_false(route_match("/v1/sites/:id", "/v1/sites/0", p, &n));
  assert_false(route_match("/v1/sites/:id", "/v1/sites/-1", p, &n));
  assert_false(route_match("/v1/sites/:id", "/v1/sites/12x", p, &n));
  assert_false(route_match("/v1/sites/:id", "/v1/sites/", p, &n));
  assert_false(route_match("/v1/sites/:id", "/v1/sites/99999999999999999999999", p, &n));
  assert_false(route_match("/v1/sites", "/v1/sitesx", p, &n));
  assert_false(route_match("/v1/sites", "/v1/site", p, &n));
  assert_false(route_match("/v1/sites/:id", "/v1/sites/1/2", p, &n));
}

static void test_star(void **state) {
  int64_t p[ROUTE_MAX_PARAMS];
  int n;
  assert_true(route_match("/ui*", "/ui", p, &n));
  assert_true(route_match("/ui*", "/ui/", p, &n));
  assert_true(route_match("/ui*", "/ui/app.js", p, &n));
  assert_false(route_match("/ui*", "/u", p, &n));
}

static void test_find(void **state) {
  int64_t p[ROUTE_MAX_PARAMS];
  int n, known;
  const struct route *r = route_find(tables, "POST", "/v1/sites", p, &n, &known);
  assert_non_null(r);
  assert_string_equal(r->method, "POST");
  r = route_find(tables, "HEAD", "/v1/sites/3", p, &n, &known);
  assert_non_null(r);
  assert_int_equal(p[0], 3);
  r = route_find(tables, "DELETE", "/v1/sites", p, &n, &known);
  assert_null(r);
  assert_int_equal(known, 1); /* 405 */
  r = route_find(tables, "GET", "/v2/x", p, &n, &known);
  assert_null(r);
  assert_int_equal(known, 0); /* 404 */
}

/* docs/design.md#query-parameters-and-lists: a route's list is exact names, "*" any, NULL none. */
static void test_query_allowed(void **state) {
  (void)state;
  assert_true(route_query_allowed("after,limit", "after"));
  assert_true(route_query_allowed("after,limit", "limit"));
  assert_false(route_query_allowed("after,limit", "before"));
  assert_false(route_query_allowed("after,limit", "aft"));
  assert_false(route_query_allowed("after,limit", "after,limit"));
  assert_false(route_query_allowed("after,limit", "limitx"));
  assert_false(route_query_allowed("after,limit", ""));
  assert_false(route_query_allowed(NULL, "limit"));
  assert_true(route_query_allowed("*", "anything"));
  assert_true(route_query_allowed("q", "q"));
}

static void test_query_index(void **state) {
  (void)state;
  assert_int_equal(route_query_index("after,limit,q", "after"), 0);
  assert_int_equal(route_query_index("after,limit,q", "limit"), 1);
  assert_int_equal(route_query_index("after,limit,q", "q"), 2);
  assert_int_equal(route_query_index("after,limit,q", "li"), -1);
  assert_int_equal(route_query_index("after,limit,q", ""), -1);
  assert_int_equal(route_query_index(NULL, "q"), -1);
  assert_int_equal(route_query_index("*", "q"), -1); /* any name, none counted */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_match_params), cmocka_unit_test(test_star),
      cmocka_unit_test(test_find),         cmocka_unit_test(test_query_allowed),
      cmocka_unit_test(test_query_index),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
