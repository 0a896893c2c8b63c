/* dlist — see dlist.h. */
#include "dlist.h"

int dl_insert(struct dl_list *l, struct dl_link *e) {
  struct dl_link *after = l->tail;
  while (after && after->deadline > e->deadline)
    after = after->prev;
  e->prev = after;
  e->next = after ? after->next : l->head;
  if (e->next)
    e->next->prev = e;
  else
    l->tail = e;
  if (after)
    after->next = e;
  else
    l->head = e;
  l->n++;
  return !after;
}

void dl_unlink(struct dl_list *l, struct dl_link *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    l->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    l->tail = e->prev;
  e->prev = e->next = NULL;
  l->n--;
}

struct dl_link *dl_expired(const struct dl_list *l, int64_t now) {
  return l->head && l->head->deadline <= now ? l->head : NULL;
}

int64_t dl_on_tick(int64_t t, int64_t tick) {
  int64_t r = t % tick;
  if (r == 0) return t;
  return r > 0 ? t + (tick - r) : t - r;
}

int64_t dl_hold_deadline(int64_t now, int64_t wait_ms) {
  return dl_on_tick(now + wait_ms, DL_TICK_MS);
}
