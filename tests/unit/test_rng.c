/* Unit tests for common/rng: the splitmix64 reference values, draws in range and uniform, the
 * same sequence for one seed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rng.h"

static void test_reference_values(void **state) {
  /* splitmix64 from seed 0, as its authors' reference code gives them */
  struct rng r = {0};
  (void)state;
  assert_true(rng_next(&r) == UINT64_C(0xe220a8397b1dcdaf));
  assert_true(rng_next(&r) == UINT64_C(0x6e789e6aa1b965f4));
  assert_true(rng_next(&r) == UINT64_C(0x06c45d188009454f));
}

static void test_same_seed_same_sequence(void **state) {
  struct rng a = {12345}, b = {12345}, c = {12346};
  int differ = 0;
  (void)state;
  for (int i = 0; i < 100; i++) {
    uint64_t x = rng_next(&a), z = rng_next(&c);
    assert_true(x == rng_next(&b));
    differ += x != z;
  }
  assert_int_equal(differ, 100);
}

static void test_below_in_range_and_uniform(void **state) {
  struct rng r = {7};
  int count[10] = {0};
  (void)state;
  assert_true(rng_below(&r, 0) == 0);
  for (int i = 0; i < 1000; i++)
    assert_true(rng_below(&r, 1) == 0);
  for (int i = 0; i < 100000; i++) {
    uint64_t x = rng_below(&r, 10);
    assert_true(x < 10);
    count[x]++;
  }
  /* 10,000 expected each, with a standard deviation of 95: 400 is over four of them */
  for (int i = 0; i < 10; i++)
    assert_true(count[i] > 10000 - 400 && count[i] < 10000 + 400);
}

static void test_fresh_seeds_differ(void **state) {
  uint64_t a = rng_seed_fresh(), b = rng_seed_fresh();
  (void)state;
  assert_true(a != b); /* the kernel's: equal with probability 2^-64 */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_values),
      cmocka_unit_test(test_same_seed_same_sequence),
      cmocka_unit_test(test_below_in_range_and_uniform),
      cmocka_unit_test(test_fresh_seeds_differ),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
