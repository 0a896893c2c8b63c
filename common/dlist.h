/* dlist — an intrusive doubly linked list kept in deadline order, the earliest first, for things
   held until a deadline (a node's held config or task poll): the expired ones are its head, and
   an entry is taken off in O(1) wherever it sits. Not thread-safe: its owner's lock guards it. */
#ifndef CDNCA_DLIST_H
#define CDNCA_DLIST_H

#include <stddef.h>
#include <stdint.h>

/* Embedded in the held thing; deadline is the caller's (e.g. monotonic ms), set before insert. */
struct dl_link {
  int64_t deadline;
  struct dl_link *prev, *next;
};

struct dl_list {
  struct dl_link *head, *tail; /* earliest deadline first */
  size_t n;
};

/* The struct of type holding link as its member. */
#define DL_ENTRY(link, type, member) ((type *)(void *)((char *)(link)-offsetof(type, member)))

/* Put e in deadline order, after every entry with the same deadline (first in, first out). The
   search starts at the tail: a hold is mostly as long as the one before it, so it goes last.
   1 when e is the new head (the list's earliest deadline changed), else 0. */
int dl_insert(struct dl_list *l, struct dl_link *e);

/* Holds end on ticks of DL_TICK_MS: deadlines that fall in one tick are one deadline, so the
   holds that expire in it are taken in one batch, by one wake-up of their owner's thread,
   instead of one wake-up (and one answer's worth of work elsewhere) each. A hold ends at most a
   tick after its own deadline. */
#define DL_TICK_MS 50

/* t rounded up to a multiple of tick (> 0); t itself when it is one. Pure. */
int64_t dl_on_tick(int64_t t, int64_t tick);

/* The deadline of a hold of wait_ms asked at now: the first DL_TICK_MS tick at or after
   now + wait_ms. Pure. */
int64_t dl_hold_deadline(int64_t now, int64_t wait_ms);

/* Take e off l (e must be on l); e's links are cleared. */
void dl_unlink(struct dl_list *l, struct dl_link *e);

/* The head when its deadline is <= now, else NULL (nothing has expired). */
struct dl_link *dl_expired(const struct dl_list *l, int64_t now);

#endif
