/* test_node — the node module's pure rule: node_first_repeat (an origin listed twice in one
   heartbeat). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "node.h"

static void test_first_repeat(void **state) {
  static const int64_t none[] = {5, 3, 9, 1};
  static const int64_t one[] = {5, 3, 9, 3, 1};
  static const int64_t two[] = {7, 8, 9, 8, 7, 7};
  static const int64_t same[] = {4, 4, 4};
  (void)state;
  assert_int_equal(node_first_repeat(none, 0), -1);
  assert_int_equal(node_first_repeat(none, 1), -1);
  assert_int_equal(node_first_repeat(none, 4), -1);
  assert_int_equal(node_first_repeat(one, 5), 3);
  /* 8 repeats at 3 and 7 at 4 and 5: the earliest repeat is named */
  assert_int_equal(node_first_repeat(two, 6), 3);
  assert_int_equal(node_first_repeat(same, 3), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first_repeat),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
