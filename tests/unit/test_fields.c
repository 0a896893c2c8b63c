/* Unit tests for common/fields: each row type, the error vocabulary and paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fields.h"
#include "json.h"

struct thing {
  int small;
  int64_t big;
  int flag;
  char name[8];
  char kind[8];
  char host[16];
  int n_codes;
  int codes[3];
};

static int lower_only(char *s) {
  for (; *s; s++)
    if (*s < 'a' || *s > 'z') return 0;
  return 1;
}

static const char *const kinds[] = {"a", "b", NULL};

#define T(m) FIELD_AT(struct thing, m)
static const struct field_def defs[] = {
    {"small", FIELD_INT, 0, T(small), -5, 5, 1, NULL, NULL, NULL, 0},
    {"big", FIELD_INT, FIELD_REQUIRED, T(big), 0, 5000000000LL, 7, NULL, NULL, NULL, 0},
    {"flag", FIELD_BOOL, 0, T(flag), 0, 0, 0, NULL, NULL, NULL, 0},
    {"name", FIELD_STR, 0, T(name), 2, 0, 0, NULL, lower_only, "lowercase letters", 0},
    {"kind", FIELD_ENUM, 0, T(kind), 0, 0, 0, kinds, NULL, "\"a\" or \"b\"", 0},
    {"host", FIELD_STR, FIELD_NULLABLE, T(host), 0, 0, 0, NULL, lower_only, "lowercase", 0},
    {"codes", FIELD_INT_LIST, 0, offsetof(struct thing, codes), 3, 400, 599, 0, NULL, NULL, NULL,
     offsetof(struct thing, n_codes)},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0},
};

struct row {
  const char *body;
  unsigned flags;
  unsigned status; /* 0 = accepted */
  const char *code, *field;
};

static const struct row rows[] = {
    {"{\"big\":1}", FIELDS_CREATE, 0, NULL, NULL},
    {"{}", 0, 0, NULL, NULL},
    {"{}", FIELDS_CREATE, 422, "required", "p.big"},
    {"{\"big\":1,\"x\":1}", FIELDS_CREATE, 400, "unknown_field", "p.x"},
    {"{\"big\":1,\"x\":1}", FIELDS_CREATE | FIELDS_ALLOW_UNKNOWN, 0, NULL, NULL},
    {"{\"small\":6}", 0, 422, "out_of_range", "p.small"},
    {"{\"small\":1.5}", 0, 422, "out_of_range", "p.small"},
    {"{\"small\":\"1\"}", 0, 422, "invalid_type", "p.small"},
    {"{\"big\":5000000000}", 0, 0, NULL, NULL},
    {"{\"big\":5000000001}", 0, 422, "out_of_range", "p.big"},
    {"{\"flag\":1}", 0, 422, "invalid_type", "p.flag"},
    {"{\"name\":\"abcdefg\"}", 0, 0, NULL, NULL},
    {"{\"name\":\"abcdefgh\"}", 0, 422, "too_long", "p.name"},
    {"{\"name\":\"a\"}", 0, 422, "out_of_range", "p.name"},
    {"{\"name\":\"aB\"}", 0, 422, "invalid_value", "p.name"},
    {"{\"name\":null}", 0, 422, "invalid_type", "p.name"},
    {"{\"host\":null}", 0, 0, NULL, NULL},
    {"{\"kind\":\"c\"}", 0, 422, "invalid_value", "p.kind"},
    {"{\"codes\":[400,599,404]}", 0, 0, NULL, NULL},
    {"{\"codes\":[400,599,404,500]}", 0, 422, "out_of_range", "p.codes"},
    {"{\"codes\":[400,600]}", 0, 422, "out_of_range", "p.codes[1]"},
    {"{\"codes\":[\"x\"]}", 0, 422, "invalid_type", "p.codes[0]"},
    {"{\"codes\":{}}", 0, 422, "invalid_type", "p.codes"},
    {"[]", 0, 422, "invalid_type", "p"},
};

static void test_rows(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct thing t;
    struct field_err err;
    cJSON *j = json_parse(rows[i].body, strlen(rows[i].body));
    int rc;
    assert_non_null(j);
    memset(&t, 0, sizeof t);
    rc = fields_apply(j, defs, NULL, "p", rows[i].flags, &t, &err);
    cJSON_Delete(j);
    if (rows[i].status == 0) {
      if (rc != 0) fail_msg("row %zu (%s): refused: %s %s", i, rows[i].body, err.code, err.field);
    } else if (rc != -1 || err.status != rows[i].status || strcmp(err.code, rows[i].code) != 0 ||
               strcmp(err.field, rows[i].field) != 0) {
      fail_msg("row %zu (%s): got %d %u %s %s", i, rows[i].body, rc, rc ? err.status : 0,
               rc ? err.code : "", rc ? err.field : "");
    }
  }
}

static void test_values_written(void **state) {
  struct thing t;
  struct field_err err;
  const char *body =
      "{\"small\":-5,\"big\":4000000000,\"flag\":true,\"name\":\"ok\",\"kind\":\"b\","
      "\"host\":\"h\",\"codes\":[502,503]}";
  cJSON *j = json_parse(body, strlen(body));
  (void)state;
  memset(&t, 0, sizeof t);
  fields_defaults(defs, &t);
  assert_int_equal(t.small, 1);
  assert_int_equal(t.big, 7);
  assert_int_equal(fields_apply(j, defs, NULL, "", 0, &t, &err), 0);
  cJSON_Delete(j);
  assert_int_equal(t.small, -5);
  assert_int_equal(t.big, 4000000000LL);
  assert_int_equal(t.flag, 1);
  assert_string_equal(t.name, "ok");
  assert_string_equal(t.kind, "b");
  assert_string_equal(t.host, "h");
  assert_int_equal(t.n_codes, 2);
  assert_int_equal(t.codes[1], 503);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rows),
      cmocka_unit_test(test_values_written),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
