/* Unit tests for controld/rcache: hits only at the same generation, no older overwrite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rcache.h"

static void test_hit_and_miss(void **state) {
  struct rcache *c = rcache_new(8);
  char *out = NULL;
  size_t len = 0;
  assert_int_equal(rcache_get(c, 1, 5, &out, &len, NULL), 0);
  rcache_put(c, 1, 5, "{\"a\":1}", 7, 0);
  assert_int_equal(rcache_get(c, 1, 5, &out, &len, NULL), 1);
  assert_int_equal(len, 7);
  assert_string_equal(out, "{\"a\":1}");
  free(out);
  assert_int_equal(rcache_get(c, 1, 6, &out, &len, NULL), 0); /* a write happened since */
  assert_int_equal(rcache_get(c, 9, 5, &out, &len, NULL), 0); /* same slot (9 % 8), other key */
  rcache_free(&c);
  assert_null(c);
}

static void test_no_older_overwrite(void **state) {
  struct rcache *c = rcache_new(8);
  char *out = NULL;
  size_t len = 0;
  rcache_put(c, 2, 10, "new", 3, 0);
  rcache_put(c, 2, 9, "old", 3, 0);
  assert_int_equal(rcache_get(c, 2, 10, &out, &len, NULL), 1);
  assert_string_equal(out, "new");
  free(out);
  rcache_put(c, 10, 3, "other", 5, 0); /* another key takes the slot */
  assert_int_equal(rcache_get(c, 2, 10, &out, &len, NULL), 0);
  assert_int_equal(rcache_get(c, 10, 3, &out, &len, NULL), 1);
  free(out);
  rcache_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hit_and_miss),
      cmocka_unit_test(test_no_older_overwrite),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
