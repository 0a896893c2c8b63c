/* idmap — open addressing, linear probing, backward-shift deletion (see idmap.h). */
#include "idmap.h"

#include <stdlib.h>

static size_t slot_of(int64_t id, size_t cap) {
  return (size_t)(((uint64_t)id * 0x9e3779b97f4a7c15ULL) >> 32) & (cap - 1);
}

void idmap_init(struct idmap *m) {
  m->keys = NULL;
  m->vals = NULL;
  m->cap = m->n = 0;
}

void idmap_fini(struct idmap *m) {
  free(m->keys);
  free(m->vals);
  idmap_init(m);
}

void *idmap_get(const struct idmap *m, int64_t id) {
  if (!m->cap || id <= 0) return NULL;
  for (size_t i = slot_of(id, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == id) return m->vals[i];
    if (m->keys[i] == 0) return NULL;
  }
}

/* Place (id, val) in a map known to have room and not to hold id. */
static void place(int64_t *keys, void **vals, size_t cap, int64_t id, void *val) {
  size_t i = slot_of(id, cap);
  while (keys[i] != 0)
    i = (i + 1) & (cap - 1);
  keys[i] = id;
  vals[i] = val;
}

int idmap_put(struct idmap *m, int64_t id, void *val) {
  if (id <= 0) return -1;
  if (m->cap) {
    for (size_t i = slot_of(id, m->cap); m->keys[i] != 0; i = (i + 1) & (m->cap - 1))
      if (m->keys[i] == id) {
        m->vals[i] = val;
        return 0;
      }
  }
  if (2 * (m->n + 1) > m->cap) { /* at most half full */
    size_t cap = m->cap ? 2 * m->cap : 16;
    int64_t *keys = calloc(cap, sizeof *keys);
    void **vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
      free(keys);
      free(vals);
      return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
      if (m->keys[i] != 0) place(keys, vals, cap, m->keys[i], m->vals[i]);
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
  }
  place(m->keys, m->vals, m->cap, id, val);
  m->n++;
  return 0;
}

void *idmap_del(struct idmap *m, int64_t id) {
  size_t i, j, mask = m->cap - 1;
  void *val;
  if (!m->cap || id <= 0) return NULL;
  for (i = slot_of(id, m->cap); m->keys[i] != id; i = (i + 1) & mask)
    if (m->keys[i] == 0) return NULL;
  val = m->vals[i];
  /* backward shift: move each later entry of the run into the hole when its home slot allows */
  for (j = (i + 1) & mask; m->keys[j] != 0; j = (j + 1) & mask) {
    size_t home = slot_of(m->keys[j], m->cap);
    /* the entry at j may move to i when i lies cyclically in [home, j) */
    if (((j - home) & mask) >= ((j - i) & mask)) {
      m->keys[i] = m->keys[j];
      m->vals[i] = m->vals[j];
      i = j;
    }
  }
  m->keys[i] = 0;
  m->vals[i] = NULL;
  m->n--;
  return val;
}
