/* Unit tests for common/buf. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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

/* printf into the room left (one pass) and after growing (two) give the same text; a failure
   leaves the contents as they were, still NUL-terminated */
static void test_printf_room_and_growth(void **state) {
  struct buf b;
  char big[600];
  (void)state;
  buf_init(&b, 0);
  assert_int_equal(buf_puts(&b, "ab"), 0); /* capacity 256 now */
  assert_int_equal(buf_printf(&b, "[%d %s]", -7, "x"), 0);
  assert_string_equal(b.data, "ab[-7 x]");
  memset(big, 'q', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(buf_printf(&b, "<%s>", big), 0); /* does not fit in 256: grows */
  assert_int_equal(b.len, 8 + 2 + 599);
  assert_int_equal(b.data[8], '<');
  assert_int_equal(b.data[b.len - 1], '>');
  assert_int_equal(b.data[b.len], '\0');
  buf_fini(&b);
  /* over max with room in the allocation: -1, the old text and its NUL kept */
  buf_init(&b, 10);
  assert_int_equal(buf_puts(&b, "12345"), 0);
  assert_int_equal(buf_printf(&b, "%s", "abcdefg"), -1);
  assert_int_equal(b.len, 5);
  assert_string_equal(b.data, "12345");
  assert_int_equal(buf_printf(&b, "%d", 67890), 0);
  assert_string_equal(b.data, "1234567890");
  buf_fini(&b);
}

static void test_put_numbers(void **state) {
  struct buf b;
  (void)state;
  buf_init(&b, 0);
  assert_int_equal(buf_put_u64(&b, 0), 0);
  assert_int_equal(buf_puts(&b, " "), 0);
  assert_int_equal(buf_put_u64(&b, UINT64_MAX), 0);
  assert_int_equal(buf_puts(&b, " "), 0);
  assert_int_equal(buf_put_i64(&b, INT64_MIN), 0);
  assert_int_equal(buf_puts(&b, " "), 0);
  assert_int_equal(buf_put_i64(&b, -42), 0);
  assert_int_equal(buf_puts(&b, " "), 0);
  assert_int_equal(buf_put_i64(&b, 1234567), 0);
  assert_string_equal(b.data, "0 18446744073709551615 -9223372036854775808 -42 1234567");
  buf_fini(&b);
  buf_init(&b, 3);
  assert_int_equal(buf_put_u64(&b, 1234), -1);
  assert_int_equal(b.len, 0);
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
      cmocka_unit_test(test_printf_room_and_growth),
      cmocka_unit_test(test_put_numbers),
      cmocka_unit_test(test_take_empty),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
