/* Unit tests for common/httphead: the rules a request head must keep, as an outcome table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "httphead.h"

#define MAXF 6

struct hcase {
  const char *what;
  int minor;
  const char *fields[MAXF][2]; /* name, value; ends at a NULL name */
  unsigned status;             /* 0: accepted */
  const char *code;
  const char *field;
};

static const struct hcase cases[] = {
    {"a plain GET", 1, {{"Host", "x"}, {"Accept", "*/*"}}, 0, NULL, NULL},
    {"a body by length", 1, {{"Host", "x"}, {"Content-Length", " 17 "}}, 0, NULL, NULL},
    {"a chunked body", 1, {{"Host", "x"}, {"Transfer-Encoding", "Chunked"}}, 0, NULL, NULL},
    {"HTTP/1.0 without Host", 0, {{"Accept", "*/*"}}, 0, NULL, NULL},
    {"names in any case", 1, {{"host", "x"}, {"if-match", "\"3\""}}, 0, NULL, NULL},
    {"a repeatable header twice",
     1,
     {{"Host", "x"}, {"Accept", "a"}, {"Accept", "b"}},
     0,
     NULL,
     NULL},
    {"HTTP/1.1 without Host", 1, {{"Accept", "*/*"}}, 400, "invalid_header", "Host"},
    {"two Host", 1, {{"Host", "a"}, {"host", "b"}}, 400, "duplicate_header", "Host"},
    {"two equal lengths",
     1,
     {{"Host", "x"}, {"Content-Length", "5"}, {"Content-Length", "5"}},
     400,
     "duplicate_header",
     "Content-Length"},
    {"two Authorization",
     1,
     {{"Host", "x"}, {"Authorization", "a"}, {"authorization", "b"}},
     400,
     "duplicate_header",
     "Authorization"},
    {"two Content-Type",
     1,
     {{"Host", "x"}, {"Content-Type", "a"}, {"Content-Type", "b"}},
     400,
     "duplicate_header",
     "Content-Type"},
    {"two If-Match",
     1,
     {{"Host", "x"}, {"If-Match", "\"1\""}, {"If-Match", "\"2\""}},
     400,
     "duplicate_header",
     "If-Match"},
    {"two Idempotency-Key",
     1,
     {{"Host", "x"}, {"Idempotency-Key", "a"}, {"Idempotency-Key", "a"}},
     400,
     "duplicate_header",
     "Idempotency-Key"},
    {"two Transfer-Encoding",
     1,
     {{"Host", "x"}, {"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}},
     400,
     "duplicate_header",
     "Transfer-Encoding"},
    {"a space before the colon",
     1,
     {{"Host", "x"}, {"Content-Length ", "5"}},
     400,
     "invalid_header",
     "Content-Length "},
    {"a tab in a name", 1, {{"Host", "x"}, {"X-A\t", "1"}}, 400, "invalid_header", "X-A?"},
    {"an empty name", 1, {{"Host", "x"}, {"", "1"}}, 400, "invalid_header", ""},
    {"length and chunked",
     1,
     {{"Host", "x"}, {"Content-Length", "5"}, {"Transfer-Encoding", "chunked"}},
     400,
     "invalid_header",
     "Content-Length"},
    {"identity",
     1,
     {{"Host", "x"}, {"Transfer-Encoding", "identity"}},
     501,
     "unsupported_transfer_coding",
     "Transfer-Encoding"},
    {"gzip then chunked",
     1,
     {{"Host", "x"}, {"Transfer-Encoding", "gzip, chunked"}},
     501,
     "unsupported_transfer_coding",
     "Transfer-Encoding"},
    {"chunked listed twice",
     1,
     {{"Host", "x"}, {"Transfer-Encoding", "chunked, chunked"}},
     501,
     "unsupported_transfer_coding",
     "Transfer-Encoding"},
    {"a signed length",
     1,
     {{"Host", "x"}, {"Content-Length", "+5"}},
     400,
     "invalid_header",
     "Content-Length"},
    {"a length list",
     1,
     {{"Host", "x"}, {"Content-Length", "5, 5"}},
     400,
     "invalid_header",
     "Content-Length"},
    {"an empty length",
     1,
     {{"Host", "x"}, {"Content-Length", ""}},
     400,
     "invalid_header",
     "Content-Length"},
    {"a length of 19 digits",
     1,
     {{"Host", "x"}, {"Content-Length", "1000000000000000000"}},
     400,
     "invalid_header",
     "Content-Length"},
};

static void test_outcomes(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct hcase *c = &cases[i];
    struct httphead_field f[MAXF];
    struct httphead_verdict v;
    size_t n = 0;
    int rc;
    for (; n < MAXF && c->fields[n][0]; n++)
      f[n] = (struct httphead_field){c->fields[n][0], strlen(c->fields[n][0]), c->fields[n][1],
                                     strlen(c->fields[n][1])};
    rc = httphead_check(f, n, c->minor, &v);
    print_message("%s\n", c->what);
    if (!c->status) {
      assert_int_equal(rc, 0);
      continue;
    }
    assert_int_equal(rc, -1);
    assert_int_equal(v.status, c->status);
    assert_string_equal(v.code, c->code);
    assert_string_equal(v.field, c->field);
    assert_true(v.message[0] != '\0');
  }
}

/* Only the bytes a field's lengths give count: a value is not read past its length. */
static void test_lengths_not_terminators(void **state) {
  struct httphead_field f[2] = {{"Hostile", 4, "x", 1}, {"Content-Length5", 14, "12", 1}};
  struct httphead_verdict v;
  (void)state;
  assert_int_equal(httphead_check(f, 2, 1, &v), 0); /* "Host", and a length of "1" */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_outcomes),
      cmocka_unit_test(test_lengths_not_terminators),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
