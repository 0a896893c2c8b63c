/* Unit tests for common/hostname. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "hostname.h"

static void test_valid_hostname(void **state) {
  char h[300];
  assert_true(hostname_valid("a"));
  assert_true(hostname_valid("a.b"));
  assert_true(hostname_valid("a-b.c-d.e"));
  assert_true(hostname_valid("123.example"));
  assert_true(hostname_valid("xn--bcher-kva.example"));
  assert_false(hostname_valid(""));
  assert_false(hostname_valid("-a"));
  assert_false(hostname_valid("a-"));
  assert_false(hostname_valid("a-.b"));
  assert_false(hostname_valid("a.-b"));
  assert_false(hostname_valid("a..b"));
  assert_false(hostname_valid(".a"));
  assert_false(hostname_valid("a."));
  assert_false(hostname_valid("A.b")); /* callers lowercase first */
  assert_false(hostname_valid("a_b.c"));
  assert_false(hostname_valid("a b"));
  assert_false(hostname_valid("a:80"));
  /* labels of 63 are fine, 64 are not */
  memset(h, 'a', 63);
  h[63] = '\0';
  assert_true(hostname_valid(h));
  memset(h, 'a', 64);
  h[64] = '\0';
  assert_false(hostname_valid(h));
  /* 253 characters in total are fine, 254 are not */
  for (int i = 0; i < 253; i++)
    h[i] = (i % 2) ? '.' : 'a';
  h[253] = '\0';
  assert_true(hostname_valid(h));
  h[253] = 'a';
  h[254] = '\0';
  assert_false(hostname_valid(h));
}

static void test_lower(void **state) {
  char h[] = "Shop.EXAMPLE.com";
  hostname_lower(h);
  assert_string_equal(h, "shop.example.com");
  assert_true(hostname_valid(h));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_hostname),
      cmocka_unit_test(test_lower),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
