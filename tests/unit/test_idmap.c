/* Unit tests for common/idmap: random puts, gets and deletes against a plain array, with ids
 * close together and far apart (long probe runs, deletions inside them, growth). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "idmap.h"
#include "rng.h"

#define IDS 3000

static void check_against_array(int64_t stride, uint64_t seed) {
  static void *want[IDS];
  static char vals[IDS];
  struct idmap m;
  struct rng r = {seed};
  size_t n = 0;
  idmap_init(&m);
  for (int i = 0; i < IDS; i++)
    want[i] = NULL;
  for (int op = 0; op < 200000; op++) {
    int k = (int)rng_below(&r, IDS);
    int64_t id = 1 + (int64_t)k * stride;
    switch (rng_below(&r, 3)) {
    case 0:
      assert_int_equal(idmap_put(&m, id, &vals[k]), 0);
      if (!want[k]) n++;
      want[k] = &vals[k];
      break;
    case 1:
      assert_ptr_equal(idmap_del(&m, id), want[k]);
      if (want[k]) n--;
      want[k] = NULL;
      break;
    default:
      assert_ptr_equal(idmap_get(&m, id), want[k]);
    }
    assert_int_equal(m.n, n);
  }
  for (int k = 0; k < IDS; k++)
    assert_ptr_equal(idmap_get(&m, 1 + (int64_t)k * stride), want[k]);
  assert_true(2 * m.n <= m.cap);
  idmap_fini(&m);
  assert_int_equal(m.n, 0);
  assert_null(idmap_get(&m, 1));
}

static void test_random_ops(void **state) {
  (void)state;
  check_against_array(1, 1);
  check_against_array(1 << 20, 2); /* ids the hash spreads alike at small sizes */
  check_against_array(INT64_C(1) << 40, 3);
}

static void test_edges(void **state) {
  struct idmap m;
  int a, b;
  (void)state;
  idmap_init(&m);
  assert_null(idmap_get(&m, 5));
  assert_null(idmap_del(&m, 5));
  assert_int_equal(idmap_put(&m, 0, &a), -1); /* ids are > 0 */
  assert_int_equal(idmap_put(&m, -3, &a), -1);
  assert_int_equal(idmap_put(&m, 5, &a), 0);
  assert_int_equal(idmap_put(&m, 5, &b), 0); /* replaced */
  assert_int_equal(m.n, 1);
  assert_ptr_equal(idmap_get(&m, 5), &b);
  assert_ptr_equal(idmap_del(&m, 5), &b);
  assert_null(idmap_get(&m, 5));
  idmap_fini(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_ops),
      cmocka_unit_test(test_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
