/* Unit tests for common/jsonstrict: one row per rule, the path of each refusal, UTF-8 repair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"
#include "jsonstrict.h"

struct row {
  const char *text;
  size_t len; /* 0 = strlen(text) */
  enum jsonstrict_rc rc;
  const char *path; /* expected error path (NULL: not checked) */
};

#define R(t, rc, p)                                                                                \
  { t, 0, rc, p }
#define RL(t, rc, p)                                                                               \
  { t, sizeof(t) - 1, rc, p } /* with embedded NUL bytes */

static const struct row rows[] = {
    /* accepted */
    R("{}", JSONSTRICT_OK, NULL),
    R(" {\"a\": [1, -2.5e+3, 0, true, false, null, \"x\"]} \r\n", JSONSTRICT_OK, NULL),
    R("[]", JSONSTRICT_OK, NULL),
    R("\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", JSONSTRICT_OK, NULL),
    R("\"\\ud83d\\ude00 \\u00e9 \\\" \\\\ \\/ \\b\\f\\n\\r\\t\"", JSONSTRICT_OK, NULL),
    R("{\"a\":{\"a\":1},\"b\":{\"a\":2}}", JSONSTRICT_OK, NULL), /* same key, other objects */
    R("[{\"a\":1},{\"a\":1}]", JSONSTRICT_OK, NULL),
    R("{\"a\":1,\"A\":2}", JSONSTRICT_OK, NULL), /* keys are case-sensitive */
    /* syntax */
    R("", JSONSTRICT_SYNTAX, NULL),
    R("   ", JSONSTRICT_SYNTAX, NULL),
    R("{", JSONSTRICT_SYNTAX, NULL),
    R("{\"a\":1,}", JSONSTRICT_SYNTAX, NULL),
    R("[1,]", JSONSTRICT_SYNTAX, NULL),
    R("{\"a\" 1}", JSONSTRICT_SYNTAX, NULL),
    R("{a:1}", JSONSTRICT_SYNTAX, NULL),
    R("{} {}", JSONSTRICT_SYNTAX, NULL),
    R("{}x", JSONSTRICT_SYNTAX, NULL),
    RL("{}\0", JSONSTRICT_SYNTAX, NULL), /* a NUL after the value */
    R("01", JSONSTRICT_SYNTAX, NULL),
    R("1.", JSONSTRICT_SYNTAX, NULL),
    R(".5", JSONSTRICT_SYNTAX, NULL),
    R("+1", JSONSTRICT_SYNTAX, NULL),
    R("1e", JSONSTRICT_SYNTAX, NULL),
    R("NaN", JSONSTRICT_SYNTAX, NULL),
    R("tru", JSONSTRICT_SYNTAX, NULL),
    R("nul", JSONSTRICT_SYNTAX, NULL),
    R("\"\\x\"", JSONSTRICT_SYNTAX, NULL),
    R("\"\\u12\"", JSONSTRICT_SYNTAX, NULL),
    R("\"\\u12g4\"", JSONSTRICT_SYNTAX, NULL),
    R("\"a\tb\"", JSONSTRICT_SYNTAX, NULL), /* raw control character */
    R("\"open", JSONSTRICT_SYNTAX, NULL),
    R("\xef\xbb\xbf{}", JSONSTRICT_SYNTAX, NULL), /* a byte order mark */
    R("{'a':1}", JSONSTRICT_SYNTAX, NULL),
    R("[1 2]", JSONSTRICT_SYNTAX, NULL),
    /* numbers a double cannot hold */
    R("[1e400]", JSONSTRICT_NUMBER, "[0]"),
    R("{\"port\":-1e309}", JSONSTRICT_NUMBER, "port"),
    R("1e-400", JSONSTRICT_OK, NULL), /* underflow reads as 0 everywhere */
    /* a fraction that reads as a whole number would be stored as another number */
    R("{\"failback_hold_ms\":1000.00000000000001}", JSONSTRICT_NUMBER, "failback_hold_ms"),
    R("[0.99999999999999999]", JSONSTRICT_NUMBER, "[0]"),
    R("[-7.0000000000000000001e1]", JSONSTRICT_NUMBER, "[0]"),
    /* whole numbers past 2^53 read as the nearest double, as a double's own digits printed back */
    R("[9007199254740993, 1e23, 99999999999999991611392, 1.152921504606847e+18]", JSONSTRICT_OK,
      NULL),
    R("[1e22, 1000.0, 1e3, 100e-2, 0.1, 1.5, 5e-324, -0, 0e5]", JSONSTRICT_OK, NULL),
    /* U+0000 */
    R("{\"hostnames\":[\"shop.example.com\\u0000.attacker.net\"]}", JSONSTRICT_NUL, "hostnames[0]"),
    RL("{\"secret\":\"abc\0def\"}", JSONSTRICT_NUL, "secret"),
    R("{\"a\\u0000\":1}", JSONSTRICT_NUL, ""),
    /* invalid UTF-8 */
    R("{\"health_check\":{\"path\":\"/\xff\"}}", JSONSTRICT_BAD_UTF8, "health_check.path"),
    R("\"\xc0\xaf\"", JSONSTRICT_BAD_UTF8, ""),         /* overlong '/' */
    R("\"\xe0\x80\xaf\"", JSONSTRICT_BAD_UTF8, ""),     /* overlong, 3 bytes */
    R("\"\xed\xa0\x80\"", JSONSTRICT_BAD_UTF8, ""),     /* an encoded surrogate */
    R("\"\xf4\x90\x80\x80\"", JSONSTRICT_BAD_UTF8, ""), /* above U+10FFFF */
    R("\"\xc3\"", JSONSTRICT_BAD_UTF8, ""),             /* truncated */
    R("\"\x80\"", JSONSTRICT_BAD_UTF8, ""),             /* a lone continuation byte */
    R("{\"a\":1,\"\xfe\":2}", JSONSTRICT_BAD_UTF8, ""), /* in a key: the object's path */
    R("[1,{\"v\":\"\xf8\"}]", JSONSTRICT_BAD_UTF8, "[1].v"),
    /* surrogate escapes */
    R("{\"version\":\"\\ud800\"}", JSONSTRICT_LONE_SURROGATE, "version"),
    R("\"\\udc00\"", JSONSTRICT_LONE_SURROGATE, ""),
    R("\"\\ud800\\u0041\"", JSONSTRICT_LONE_SURROGATE, ""),
    R("\"\\ud800x\"", JSONSTRICT_LONE_SURROGATE, ""),
    R("\"\\ude00\\ud83d\"", JSONSTRICT_LONE_SURROGATE, ""), /* reversed pair */
    /* duplicate keys, also when written differently */
    R("{\"name\":\"a\",\"name\":\"b\"}", JSONSTRICT_DUPLICATE_KEY, "name"),
    R("{\"name\":\"a\",\"n\\u0061me\":\"b\"}", JSONSTRICT_DUPLICATE_KEY, "name"),
    R("{\"origins\":[{\"port\":1,\"level\":1,\"port\":2}]}", JSONSTRICT_DUPLICATE_KEY,
      "origins[0].port"),
    R("{\"a\":{},\"b\":1,\"a\":[]}", JSONSTRICT_DUPLICATE_KEY, "a"),
    /* a long key is named by its first whole characters: a 2-byte one that does not fit is left
       out, never cut in two */
    R("{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9"
      "b\":1,\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9"
      "b\":2}",
      JSONSTRICT_DUPLICATE_KEY, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
    R("{\"\\u00e9\":1,\"\xc3\xa9\":2}", JSONSTRICT_DUPLICATE_KEY, "\xc3\xa9"),
};

static void test_rows(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const struct row *r = &rows[i];
    size_t len = r->len ? r->len : strlen(r->text);
    struct jsonstrict_err err;
    int rc = jsonstrict_check(r->text, len, &err);
    if ((rc == 0) != (r->rc == JSONSTRICT_OK) || (rc < 0 && err.rc != r->rc) ||
        (rc < 0 && r->path && strcmp(err.path, r->path) != 0))
      fail_msg("row %zu (%s): got rc %d (%s) path '%s', expected %d path '%s'", i, r->text,
               rc < 0 ? (int)err.rc : 0, rc < 0 ? jsonstrict_message(err.rc) : "ok",
               rc < 0 ? err.path : "", (int)r->rc, r->path ? r->path : "?");
  }
}

/* Nesting is bounded, and the bound itself is accepted. */
static void test_depth(void **state) {
  char buf[2 * JSONSTRICT_MAX_DEPTH + 8];
  struct jsonstrict_err err;
  size_t n = 0;
  (void)state;
  for (int i = 0; i < JSONSTRICT_MAX_DEPTH; i++)
    buf[n++] = '[';
  for (int i = 0; i < JSONSTRICT_MAX_DEPTH; i++)
    buf[n++] = ']';
  assert_int_equal(jsonstrict_check(buf, n, &err), 0);
  n = 0;
  for (int i = 0; i <= JSONSTRICT_MAX_DEPTH; i++)
    buf[n++] = '[';
  for (int i = 0; i <= JSONSTRICT_MAX_DEPTH; i++)
    buf[n++] = ']';
  assert_int_equal(jsonstrict_check(buf, n, &err), -1);
  assert_int_equal(err.rc, JSONSTRICT_TOO_DEEP);
}

/* Many keys: found by sorting, not pairwise; the duplicate is the last one. */
static void test_many_keys(void **state) {
  size_t cap = 20000 * 16, n = 0;
  char *buf = malloc(cap);
  struct jsonstrict_err err;
  (void)state;
  assert_non_null(buf);
  buf[n++] = '{';
  for (int i = 0; i < 20000; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s\"k%d\":1", i ? "," : "", i);
  buf[n++] = '}';
  assert_int_equal(jsonstrict_check(buf, n, &err), 0);
  n--;
  n += (size_t)snprintf(buf + n, cap - n, ",\"k7\":2}");
  assert_int_equal(jsonstrict_check(buf, n, &err), -1);
  assert_int_equal(err.rc, JSONSTRICT_DUPLICATE_KEY);
  assert_string_equal(err.path, "k7");
  free(buf);
}

/* json_parse refuses what the check refuses; json_print never emits invalid UTF-8. */
static void test_parse_and_print(void **state) {
  cJSON *v;
  char *text;
  (void)state;
  assert_null(json_parse("{\"a\":1,\"a\":2}", 13));
  assert_null(json_parse("{\"a\":\"x\\u0000y\"}", 16));
  v = json_parse("{\"a\":\"\\u00e9\"}", 14);
  assert_non_null(v);
  assert_string_equal(cJSON_GetObjectItem(v, "a")->valuestring, "\xc3\xa9");
  cJSON_Delete(v);
  v = cJSON_CreateObject();
  cJSON_AddStringToObject(v, "version", "1.0\xff\xc3");
  text = json_print(v);
  cJSON_Delete(v);
  assert_non_null(text);
  assert_string_equal(text, "{\"version\":\"1.0\xef\xbf\xbd\xef\xbf\xbd\"}");
  assert_true(jsonstrict_utf8_valid(text, strlen(text)));
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rows),
      cmocka_unit_test(test_depth),
      cmocka_unit_test(test_many_keys),
      cmocka_unit_test(test_parse_and_print),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
