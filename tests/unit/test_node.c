/* test_node — the node module's pure rule: node_first_repeat (an origin of a site listed twice
   in one heartbeat). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "node.h"

static void test_first_repeat(void **state) {
  static const struct node_obs_key none[] = {{1, 5}, {1, 3}, {2, 9}, {1, 1}};
  static const struct node_obs_key one[] = {{1, 5}, {1, 3}, {2, 9}, {1, 3}, {1, 1}};
  static const struct node_obs_key two[] = {{1, 7}, {1, 8}, {1, 9}, {1, 8}, {1, 7}, {1, 7}};
  static const struct node_obs_key same[] = {{4, 4}, {4, 4}, {4, 4}};
  /* one origin under two sites: the copy under the wrong site counts nowhere */
  static const struct node_obs_key sites[] = {{1, 5}, {2, 5}};
  (void)state;
  assert_int_equal(node_first_repeat(none, 0), -1);
  assert_int_equal(node_first_repeat(none, 1), -1);
  assert_int_equal(node_first_repeat(none, 4), -1);
  assert_int_equal(node_first_repeat(one, 5), 3);
  /* 8 repeats at 3 and 7 at 4 and 5: the earliest repeat is named */
  assert_int_equal(node_first_repeat(two, 6), 3);
  assert_int_equal(node_first_repeat(same, 3), 1);
  assert_int_equal(node_first_repeat(sites, 2), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first_repeat),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
