/* rcache — direct-mapped slots under one mutex; entries are tagged with the generation they were
 * rendered at. */
#include "rcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct slot {
  int64_t key, gen, tag;
  char *body;
  size_t len;
};

struct rcache {
  pthread_mutex_t mu;
  int n;
  struct slot *slots;
};

struct rcache *rcache_new(int slots) {
  struct rcache *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->n = slots > 0 ? slots : 1;
  c->slots = calloc((size_t)c->n, sizeof *c->slots);
  if (!c->slots) {
    free(c);
    return NULL;
  }
  pthread_mutex_init(&c->mu, NULL);
  return c;
}

void rcache_free(struct rcache **cp) {
  struct rcache *c = *cp;
  if (!c) return;
  for (int i = 0; i < c->n; i++)
    free(c->slots[i].body);
  free(c->slots);
  pthread_mutex_destroy(&c->mu);
  free(c);
  *cp = NULL;
}

static struct slot *slot_of(struct rcache *c, int64_t key) {
  return &c->slots[(uint64_t)key % (uint64_t)c->n];
}

int rcache_get(struct rcache *c, int64_t key, int64_t gen, char **out, size_t *len, int64_t *tag) {
  struct slot *s;
  int hit = 0;
  pthread_mutex_lock(&c->mu);
  s = slot_of(c, key);
  if (s->body && s->key == key && s->gen == gen) {
    *out = malloc(s->len + 1);
    if (*out) {
      memcpy(*out, s->body, s->len + 1);
      *len = s->len;
      if (tag) *tag = s->tag;
      hit = 1;
    }
  }
  pthread_mutex_unlock(&c->mu);
  return hit;
}

void rcache_put(struct rcache *c, int64_t key, int64_t gen, const char *body, size_t len,
                int64_t tag) {
  char *copy = malloc(len + 1);
  struct slot *s;
  if (!copy) return;
  memcpy(copy, body, len);
  copy[len] = '\0';
  pthread_mutex_lock(&c->mu);
  s = slot_of(c, key);
  /* never replace a newer rendering by an older one */
  if (s->body && s->key == key && s->gen > gen) {
    pthread_mutex_unlock(&c->mu);
    free(copy);
    return;
  }
  free(s->body);
  s->key = key;
  s->gen = gen;
  s->tag = tag;
  s->body = copy;
  s->len = len;
  pthread_mutex_unlock(&c->mu);
}
