/* Unit tests for common/dlist: random inserts, removals from anywhere and takes of the expired
 * head against a plain array kept in (deadline, arrival) order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dlist.h"
#include "rng.h"

#define N 500

struct item {
  int on;
  int64_t arrival;
  struct dl_link link;
};

/* The list, walked both ways, is the entries that are on, in (deadline, arrival) order. */
static void check(const struct dl_list *l, const struct item *items) {
  const struct dl_link *e, *prev = NULL;
  size_t n = 0, on = 0;
  for (int i = 0; i < N; i++)
    on += items[i].on != 0;
  for (e = l->head; e; prev = e, e = e->next) {
    const struct item *it = DL_ENTRY(e, const struct item, link);
    assert_true(it->on);
    assert_ptr_equal(e->prev, prev);
    if (prev) {
      const struct item *p = DL_ENTRY(prev, const struct item, link);
      assert_true(prev->deadline < e->deadline ||
                  (prev->deadline == e->deadline && p->arrival < it->arrival));
    }
    n++;
  }
  assert_ptr_equal(l->tail, prev);
  assert_int_equal(n, on);
  assert_int_equal(l->n, on);
}

static void test_random_ops(void **state) {
  static struct item items[N];
  struct dl_list l = {0};
  struct rng r = {7};
  int64_t arrivals = 0, now = 0;
  (void)state;
  for (int op = 0; op < 100000; op++) {
    int k = (int)rng_below(&r, N);
    struct item *it = &items[k];
    switch (rng_below(&r, 3)) {
    case 0: /* hold: a deadline a little after now, often the same as others */
      if (it->on) dl_unlink(&l, &it->link);
      it->link.deadline = now + (int64_t)rng_below(&r, 50);
      it->arrival = ++arrivals;
      {
        const struct dl_link *old_head = l.head;
        int first = !old_head || it->link.deadline < old_head->deadline;
        assert_int_equal(dl_insert(&l, &it->link), first);
      }
      it->on = 1;
      break;
    case 1: /* answered early (a newer poll, a revocation) */
      if (it->on) {
        dl_unlink(&l, &it->link);
        assert_null(it->link.prev);
        assert_null(it->link.next);
        it->on = 0;
      }
      break;
    default: { /* time passes: the expired ones leave from the head, in order */
      struct dl_link *e;
      now += (int64_t)rng_below(&r, 5);
      while ((e = dl_expired(&l, now)) != NULL) {
        assert_true(e->deadline <= now);
        dl_unlink(&l, e);
        DL_ENTRY(e, struct item, link)->on = 0;
      }
      assert_true(!l.head || l.head->deadline > now);
    }
    }
    if (op % 97 == 0) check(&l, items);
  }
  check(&l, items);
}

static void test_edges(void **state) {
  struct dl_list l = {0};
  struct item a = {0}, b = {0}, c = {0};
  (void)state;
  assert_null(dl_expired(&l, INT64_MAX));
  a.link.deadline = 10;
  b.link.deadline = 10;
  c.link.deadline = 5;
  assert_int_equal(dl_insert(&l, &a.link), 1);
  assert_int_equal(dl_insert(&l, &b.link), 0); /* same deadline: after a */
  assert_ptr_equal(l.tail, &b.link);
  assert_int_equal(dl_insert(&l, &c.link), 1); /* earlier: the new head */
  assert_null(dl_expired(&l, 4));
  assert_ptr_equal(dl_expired(&l, 5), &c.link);
  dl_unlink(&l, &a.link); /* from the middle */
  assert_ptr_equal(c.link.next, &b.link);
  assert_ptr_equal(b.link.prev, &c.link);
  dl_unlink(&l, &b.link);
  dl_unlink(&l, &c.link);
  assert_null(l.head);
  assert_null(l.tail);
  assert_int_equal(l.n, 0);
}

/* Deadlines on ticks: rounded up, never down, by less than a tick. */
static void test_on_tick(void **state) {
  static const struct {
    int64_t t, tick, want;
  } rows[] = {
      {0, 50, 0},
      {1, 50, 50},
      {49, 50, 50},
      {50, 50, 50},
      {51, 50, 100},
      {-1, 50, 0},
      {-50, 50, -50},
      {-51, 50, -50},
      {1234567, 1, 1234567},
      {INT64_C(1733600000123), 50, INT64_C(1733600000150)},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    assert_true(dl_on_tick(rows[i].t, rows[i].tick) == rows[i].want);
  for (int64_t t = -200; t <= 200; t++) {
    int64_t r = dl_on_tick(t, DL_TICK_MS);
    assert_true(r >= t && r - t < DL_TICK_MS && r % DL_TICK_MS == 0);
  }
  /* a hold's deadline: the tick at or after its end */
  assert_true(dl_hold_deadline(1000, 0) == 1000);
  assert_true(dl_hold_deadline(1000, 1) == 1050);
  assert_true(dl_hold_deadline(1001, 49) == 1050);
  assert_true(dl_hold_deadline(1001, 50) == 1100);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_ops),
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_on_tick),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
