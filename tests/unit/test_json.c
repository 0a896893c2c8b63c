/* Unit tests for common/json. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"

static void test_parse_strict(void **state) {
  cJSON *v = json_parse("{\"a\":1}  \n", 10);
  assert_non_null(v);
  cJSON_Delete(v);
  assert_null(json_parse("{\"a\":1} x", 9));
  assert_null(json_parse("{\"a\":", 5));
  assert_null(json_parse("", 0));
  /* not NUL-terminated: only len bytes are read */
  v = json_parse("[1,2]garbage", 5);
  assert_non_null(v);
  cJSON_Delete(v);
}

static void test_int(void **state) {
  const char *txt = "{\"a\":5,\"b\":5.5,\"c\":\"5\",\"d\":1700000000123}";
  cJSON *v = json_parse(txt, strlen(txt));
  int64_t out = 0;
  assert_non_null(v);
  assert_int_equal(json_int(v, "a", 1, 10, &out), 0);
  assert_int_equal(out, 5);
  assert_int_equal(json_int(v, "a", 6, 10, &out), -1);
  assert_int_equal(json_int(v, "b", 0, 10, &out), -1);
  assert_int_equal(json_int(v, "c", 0, 10, &out), -1);
  assert_int_equal(json_int(v, "zz", 0, 10, &out), 1);
  /* beyond INT_MAX: read through valuedouble, not valueint */
  assert_int_equal(json_int(v, "d", 0, INT64_MAX, &out), 0);
  assert_true(out == 1700000000123LL);
  cJSON_Delete(v);
}

static void test_bool_str(void **state) {
  const char *txt = "{\"t\":true,\"n\":1,\"s\":\"abc\",\"z\":null}";
  cJSON *v = json_parse(txt, strlen(txt));
  int b = -1;
  const char *s = NULL;
  assert_int_equal(json_bool(v, "t", &b), 0);
  assert_int_equal(b, 1);
  assert_int_equal(json_bool(v, "n", &b), -1);
  assert_int_equal(json_bool(v, "x", &b), 1);
  assert_int_equal(json_str(v, "s", 10, &s), 0);
  assert_string_equal(s, "abc");
  assert_int_equal(json_str(v, "s", 2, &s), -1);
  assert_int_equal(json_str(v, "z", 10, &s), 1);
  assert_int_equal(json_str(v, "n", 10, &s), -1);
  cJSON_Delete(v);
}

static void test_only_keys(void **state) {
  static const char *const allowed[] = {"a", "b", NULL};
  const char *txt = "{\"a\":1,\"c\":2}";
  cJSON *v = json_parse(txt, strlen(txt));
  const char *bad = NULL;
  assert_int_equal(json_only_keys(v, allowed, &bad), -1);
  assert_string_equal(bad, "c");
  cJSON_DeleteItemFromObject(v, "c");
  assert_int_equal(json_only_keys(v, allowed, &bad), 0);
  cJSON_Delete(v);
}

static void test_words(void **state) {
  static const char *const three[] = {"a", "bb", "c", NULL}, *const none[] = {NULL};
  char out[16];
  (void)state;
  assert_string_equal(json_words(three, out, sizeof out), "a, bb, c");
  assert_string_equal(json_words(none, out, sizeof out), "");
  assert_string_equal(json_words(three, out, 6), "a, bb"); /* cut short, terminated */
  assert_string_equal(json_words(three, out, 4), "a, ");
}

static void test_writers(void **state) {
  cJSON *o = cJSON_CreateObject();
  char *p;
  json_add_i64(o, "id", 123456789012345LL);
  json_add_str_or_null(o, "s", NULL);
  json_add_time(o, "t", 1796205600000LL);
  json_add_time(o, "never", 0);
  p = json_print(o);
  assert_string_equal(
      p, "{\"id\":123456789012345,\"s\":null,\"t\":\"2026-12-02T10:00:00Z\",\"never\":null}");
  free(p);
  cJSON_Delete(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_strict), cmocka_unit_test(test_int),
      cmocka_unit_test(test_bool_str),     cmocka_unit_test(test_only_keys),
      cmocka_unit_test(test_words),        cmocka_unit_test(test_writers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
