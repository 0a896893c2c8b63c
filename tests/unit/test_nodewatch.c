/* Unit tests for controld/nodewatch: online on the first sighting, offline once after online_ms,
   online again at the next sighting, the sweep bound, forgetting a node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "nodewatch.h"

static void test_transitions(void **state) {
  struct nodewatch *w = nodewatch_new(1000);
  int64_t out[8];
  assert_non_null(w);
  assert_int_equal(nodewatch_seen(w, 7, 10000), 1); /* first sighting: online */
  assert_int_equal(nodewatch_seen(w, 3, 10000), 1);
  assert_int_equal(nodewatch_seen(w, 7, 10500), 0);       /* still online */
  assert_int_equal(nodewatch_sweep(w, 11000, out, 8), 0); /* 3: exactly online_ms old */
  assert_int_equal(nodewatch_sweep(w, 11001, out, 8), 1); /* 3 goes offline, 7 is 501 ms old */
  assert_int_equal(out[0], 3);
  assert_int_equal(nodewatch_sweep(w, 11002, out, 8), 0); /* once */
  assert_int_equal(nodewatch_sweep(w, 11600, out, 8), 1);
  assert_int_equal(out[0], 7);
  assert_int_equal(nodewatch_seen(w, 3, 12000), 1); /* back online */
  assert_int_equal(nodewatch_seen(w, 3, 12100), 0);
  /* a gap longer than online_ms between sightings counts as a return even without a sweep */
  assert_int_equal(nodewatch_seen(w, 3, 13200), 1);
  nodewatch_free(&w);
  assert_null(w);
}

static void test_sweep_bound_and_forget(void **state) {
  struct nodewatch *w = nodewatch_new(100);
  int64_t out[2];
  for (int64_t id = 10; id >= 1; id--)
    assert_int_equal(nodewatch_seen(w, id, 0), 1);
  nodewatch_forget(w, 1);
  nodewatch_forget(w, 99); /* unknown: nothing */
  assert_int_equal(nodewatch_sweep(w, 1000, out, 2), 2);
  assert_int_equal(out[0], 2); /* lowest first; 1 was forgotten */
  assert_int_equal(out[1], 3);
  assert_int_equal(nodewatch_sweep(w, 1000, out, 2), 2);
  assert_int_equal(out[0], 4);
  int total = 4;
  while (nodewatch_sweep(w, 1000, out, 2) > 0)
    total += 2;
  assert_int_equal(total, 10);
  assert_int_equal(nodewatch_seen(w, 1, 1000), 1); /* forgotten, then seen: online again */
  nodewatch_free(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transitions),
      cmocka_unit_test(test_sweep_bound_and_forget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
