/* Unit tests for controld/api_op: If-Match matching (RFC 9110 strong comparison). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api_op.h"

static void test_etag_matches(void **state) {
  static const struct {
    const char *header;
    int64_t revision;
    int match;
  } rows[] = {
      {"\"7\"", 7, 1},       {"\"7\"", 8, 0},   {"*", 8, 1}, {" \"3\" , \"7\" ", 7, 1},
      {"\"3\",\"4\"", 7, 0}, {"W/\"7\"", 7, 0}, /* weak tags never match If-Match */
      {"7", 7, 0},                              /* an entity tag is quoted */
      {"\"77\"", 7, 0},      {"\"7", 7, 0},     {"", 7, 0},  {",", 7, 0},
      {"\"7\", *", 9, 1},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (api_op_etag_matches(rows[i].header, rows[i].revision) != rows[i].match)
      fail_msg("row %zu: If-Match '%s' vs %lld", i, rows[i].header, (long long)rows[i].revision);
}

/* docs/design.md#safe-concurrent-edits: the key stands for method, path, query and body; each one
 * changes it.
 */
static void test_request_hash(void **state) {
  char a[65], b[65];
  (void)state;
  api_op_request_hash("POST", "/v1/sites", "?", "{}", 2, a);
  api_op_request_hash("POST", "/v1/sites", "?", "{}", 2, b);
  assert_string_equal(a, b);
  assert_int_equal(strlen(a), 64);
  api_op_request_hash("POST", "/v1/sites", "?x=1&", "{}", 2, b);
  assert_string_not_equal(a, b);
  api_op_request_hash("POST", "/v1/nodes", "?", "{}", 2, b);
  assert_string_not_equal(a, b);
  api_op_request_hash("POST", "/v1/sites", "?", "{ }", 3, b);
  assert_string_not_equal(a, b);
  api_op_request_hash("PATCH", "/v1/sites", "?", "{}", 2, b);
  assert_string_not_equal(a, b);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_etag_matches),
                                     cmocka_unit_test(test_request_hash)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
