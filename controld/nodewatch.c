/* nodewatch — a sorted array of (node id, last sighting, online), binary-searched. */
#include "nodewatch.h"

#include <stdlib.h>
#include <string.h>

struct watched {
  int64_t id, last_seen;
  int online;
};

struct nodewatch {
  int64_t online_ms;
  struct watched *v; /* sorted by id */
  int n, cap;
};

struct nodewatch *nodewatch_new(int64_t online_ms) {
  struct nodewatch *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->online_ms = online_ms;
  return w;
}

void nodewatch_free(struct nodewatch **wp) {
  struct nodewatch *w = *wp;
  if (!w) return;
  free(w->v);
  free(w);
  *wp = NULL;
}

/* Index of id, or of where it would go (*found = 0). */
static int find(const struct nodewatch *w, int64_t id, int *found) {
  int lo = 0, hi = w->n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (w->v[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = lo < w->n && w->v[lo].id == id;
  return lo;
}

int nodewatch_seen(struct nodewatch *w, int64_t id, int64_t now) {
  int found, i = find(w, id, &found), came;
  struct watched *e;
  if (!found) {
    if (w->n == w->cap) {
      int ncap = w->cap ? w->cap * 2 : 16;
      struct watched *nv = realloc(w->v, (size_t)ncap * sizeof *nv);
      if (!nv) return -1;
      w->v = nv;
      w->cap = ncap;
    }
    memmove(&w->v[i + 1], &w->v[i], (size_t)(w->n - i) * sizeof *w->v);
    w->n++;
    w->v[i].id = id;
    w->v[i].last_seen = now;
    w->v[i].online = 1;
    return 1;
  }
  e = &w->v[i];
  came = !e->online || now - e->last_seen > w->online_ms;
  if (now > e->last_seen) e->last_seen = now;
  e->online = 1;
  return came;
}

int nodewatch_sweep(struct nodewatch *w, int64_t now, int64_t *out, int max) {
  int k = 0;
  for (int i = 0; i < w->n; i++) {
    struct watched *e = &w->v[i];
    if (!e->online || now - e->last_seen <= w->online_ms) continue;
    if (k >= max) break; /* the rest go at the next sweep */
    e->online = 0;
    out[k++] = e->id;
  }
  return k;
}

void nodewatch_forget(struct nodewatch *w, int64_t id) {
  int found, i = find(w, id, &found);
  if (!found) return;
  memmove(&w->v[i], &w->v[i + 1], (size_t)(w->n - i - 1) * sizeof *w->v);
  w->n--;
}
