/* test_node — the node module's pure rule: node_first_repeat (an origin of a site listed twice
   in one heartbeat). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "node.h"

/* an observation naming origin o of site s (the counters do not take part) */
#define K(s, o)                                                                                    \
  { .site_id = (s), .origin_id = (o), .requests = (s)*100 + (o) }

static void test_first_repeat(void **state) {
  static const struct node_obs none[] = {K(1, 5), K(1, 3), K(2, 9), K(1, 1)};
  static const struct node_obs one[] = {K(1, 5), K(1, 3), K(2, 9), K(1, 3), K(1, 1)};
  static const struct node_obs two[] = {K(1, 7), K(1, 8), K(1, 9), K(1, 8), K(1, 7), K(1, 7)};
  static const struct node_obs same[] = {K(4, 4), K(4, 4), K(4, 4)};
  /* one origin under two sites: the copy under the wrong site counts nowhere */
  static const struct node_obs sites[] = {K(1, 5), K(2, 5)};
  (void)state;
  assert_int_equal(node_first_repeat(none, 0), -1);
  assert_int_equal(node_first_repeat(none, 1), -1);
  assert_int_equal(node_first_repeat(none, 4), -1);
  assert_int_equal(node_first_repeat(one, 5), 3);
  /* 8 repeats at 3 and 7 at 4 and 5: the earliest repeat is named */
  assert_int_equal(node_first_repeat(two, 6), 3);
  assert_int_equal(node_first_repeat(same, 3), 1);
  assert_int_equal(node_first_repeat(sites, 2), -1);
  /* the same origin with other counters is still a copy */
  {
    struct node_obs again[] = {K(3, 6), K(3, 6)};
    again[1].requests = 1;
    again[1].skipped = 1;
    assert_int_equal(node_first_repeat(again, 2), 1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first_repeat),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
