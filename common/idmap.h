/* idmap — a map from ids (int64_t > 0) to pointers: open addressing with linear probing and
   backward-shift deletion, grown to keep it at most half full. Not thread-safe: its owner's
   lock guards it. */
#ifndef CDNCA_IDMAP_H
#define CDNCA_IDMAP_H

#include <stddef.h>
#include <stdint.h>

struct idmap {
  int64_t *keys; /* 0 = empty slot */
  void **vals;
  size_t cap, n; /* cap: 0 or a power of two */
};

/* An empty map (no allocation until the first put). */
void idmap_init(struct idmap *m);

/* Free what m holds (not the values); m is empty again. */
void idmap_fini(struct idmap *m);

/* The value of id, or NULL. */
void *idmap_get(const struct idmap *m, int64_t id);

/* Set id's value (replacing one there): 0, or -1 when out of memory (m unchanged) or id <= 0. */
int idmap_put(struct idmap *m, int64_t id, void *val);

/* Remove id: its value, or NULL when it was not there. */
void *idmap_del(struct idmap *m, int64_t id);

#endif
