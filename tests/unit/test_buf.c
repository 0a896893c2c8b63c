/* Unit tests for common/buf. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"

static void test_append_and_take(void **state) {
  struct buf b;
  char *p;
  buf_init(&b, 0);
  assert_int_equal(buf_puts(&b, "hello"), 0);
  assert_int_equal(buf_printf(&b, " %d-%s", 42, "x"), 0);
  assert_string_equal(b.data, "hello 42-x");
  assert_int_equal(b.len, 10);
  p = buf_take(&b);
  assert_string_equal(p, "hello 42-x");
  assert_null(b.data);
  assert_int_equal(b.len, 0);
  free(p);
}

static void test_growth(void **state) {
  struct buf b;
  char chunk[1000];
  memset(chunk, 'a', sizeof chunk);
  buf_init(&b, 0);
  for (int i = 0; i < 100; i++)
    assert_int_equal(buf_append(&b, chunk, sizeof chunk), 0);
  assert_int_equal(b.len, 100000);
  assert_int_equal(b.data[99999], 'a');
  assert_int_equal(b.data[100000], '\0');
  buf_fini(&b);
}

static void test_max(void **state) {
  struct buf b;
  buf_init(&b, 8);
  assert_int_equal(buf_puts(&b, "12345678"), 0);
  assert_int_equal(buf_puts(&b, "9"), -1);
  assert_int_equal(b.len, 8);
  assert_int_equal(buf_printf(&b, "%s", "x"), -1);
  buf_fini(&b);
}

static void test_take_empty(void **state) {
  struct buf b;
  char *p;
  buf_init(&b, 0);
  p = buf_take(&b);
  assert_non_null(p);
  assert_string_equal(p, "");
  free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_append_and_take),
      cmocka_unit_test(test_growth),
      cmocka_unit_test(test_max),
      cmocka_unit_test(test_take_empty),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
