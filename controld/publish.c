/* publish — node site-config JSON, its small answer cache and zero-copy replies. */
#include "publish.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "model.h"
#include "store_pub.h"

#define PUB_CACHE 16

struct pub_blob {
  atomic_int refs;
  int64_t seq;
  int full;
  size_t len;
  char *data;
};

struct pub_slot {
  int64_t since, seq; /* key: answer for `since` built when the newest seq was `seq` */
  struct pub_blob *blob;
  uint64_t used;
};

struct publish {
  struct store *st;
  pthread_mutex_t mu; /* guards the cache; held while building so one build serves all */
  struct pub_slot slots[PUB_CACHE];
  uint64_t tick;
};

/* ---- blobs ---- */

struct pub_blob *pub_blob_ref(struct pub_blob *b) {
  atomic_fetch_add(&b->refs, 1);
  return b;
}

void pub_blob_unref(struct pub_blob *b) {
  if (!b || atomic_fetch_sub(&b->refs, 1) != 1) return;
  free(b->data);
  free(b);
}

int64_t pub_blob_seq(const struct pub_blob *b) {
  return b->seq;
}
int pub_blob_full(const struct pub_blob *b) {
  return b->full;
}
const char *pub_blob_data(const struct pub_blob *b) {
  return b->data;
}
size_t pub_blob_len(const struct pub_blob *b) {
  return b->len;
}

/* ---- JSON ---- */

static cJSON *site_config_json(const struct site_rec *s) {
  cJSON *o = cJSON_CreateObject(), *h, *arr;
  json_add_i64(o, "id", s->id);
  cJSON_AddStringToObject(o, "name", s->name);
  h = cJSON_AddArrayToObject(o, "hostnames");
  for (int i = 0; i < s->n_hostnames; i++)
    cJSON_AddItemToArray(h, cJSON_CreateString(s->hostnames[i]));
  json_add_i64(o, "config_version", s->config_version);
  cJSON_AddNumberToObject(o, "current_level", s->current_level);
  arr = cJSON_AddArrayToObject(o, "origins");
  for (int i = 0; i < s->n_origins; i++) {
    const struct origin_rec *g = &s->origins[i];
    cJSON *x;
    if (!g->enabled) continue;
    x = cJSON_CreateObject();
    if (x) fields_json_add(x, site_origin_fields, FORM_WIRE, g);
    cJSON_AddItemToArray(arr, x);
  }
  cJSON_AddItemToObject(o, "node_retry", model_node_retry_json(s));
  return o;
}

char *publish_json(const struct config_snapshot *s, size_t *len) {
  cJSON *root = cJSON_CreateObject(), *sites, *del;
  char *text = NULL;
  if (!root) return NULL;
  json_add_i64(root, "seq", s->seq);
  cJSON_AddBoolToObject(root, "full", s->full);
  sites = cJSON_AddArrayToObject(root, "sites");
  for (int i = 0; i < s->n_sites; i++)
    cJSON_AddItemToArray(sites, site_config_json(&s->sites[i]));
  del = cJSON_AddArrayToObject(root, "deleted");
  for (int i = 0; i < s->n_deleted; i++)
    cJSON_AddItemToArray(del, cJSON_CreateNumber((double)s->deleted[i]));
  text = json_print(root);
  cJSON_Delete(root);
  if (text) *len = strlen(text);
  return text;
}

/* ---- cache ---- */

struct publish *publish_new(struct store *st) {
  struct publish *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->st = st;
  pthread_mutex_init(&p->mu, NULL);
  return p;
}

void publish_free(struct publish **pp) {
  struct publish *p = *pp;
  if (!p) return;
  for (int i = 0; i < PUB_CACHE; i++)
    pub_blob_unref(p->slots[i].blob);
  pthread_mutex_destroy(&p->mu);
  free(p);
  *pp = NULL;
}

static struct pub_blob *cache_find(struct publish *p, int64_t since, int64_t seq) {
  for (int i = 0; i < PUB_CACHE; i++)
    if (p->slots[i].blob && p->slots[i].since == since && p->slots[i].seq == seq) {
      p->slots[i].used = ++p->tick;
      return pub_blob_ref(p->slots[i].blob);
    }
  return NULL;
}

static void cache_put(struct publish *p, int64_t since, int64_t seq, struct pub_blob *b) {
  int victim = 0;
  for (int i = 0; i < PUB_CACHE; i++) {
    if (!p->slots[i].blob) {
      victim = i;
      break;
    }
    if (p->slots[i].used < p->slots[victim].used) victim = i;
  }
  pub_blob_unref(p->slots[victim].blob);
  p->slots[victim].since = since;
  p->slots[victim].seq = seq;
  p->slots[victim].blob = pub_blob_ref(b);
  p->slots[victim].used = ++p->tick;
}

struct pub_blob *publish_get(struct publish *p, int64_t since) {
  struct config_snapshot snap;
  struct pub_blob *b = NULL;
  int64_t cur = store_pub_seq(p->st);
  if (cur < 0) return NULL;
  if (since > cur) since = 0; /* the database is behind the node (reset): start over */
  pthread_mutex_lock(&p->mu);
  b = cache_find(p, since, cur);
  if (b) goto out;
  if (store_config_snapshot(p->st, since, &snap) != STORE_OK) {
    store_config_snapshot_free(&snap);
    goto out;
  }
  /* a commit may have landed since cur was read: the cache may hold that answer already */
  if (snap.seq != cur && (b = cache_find(p, since, snap.seq)) != NULL) {
    store_config_snapshot_free(&snap);
    goto out;
  }
  b = calloc(1, sizeof *b);
  if (b) {
    atomic_init(&b->refs, 1);
    b->seq = snap.seq;
    b->full = snap.full;
    b->data = publish_json(&snap, &b->len);
    if (!b->data) {
      free(b);
      b = NULL;
    }
  }
  if (b) {
    cache_put(p, since, snap.seq, b);
    if (snap.full && since != 0) cache_put(p, 0, snap.seq, b);
  }
  store_config_snapshot_free(&snap);
out:
  pthread_mutex_unlock(&p->mu);
  return b;
}

/* ---- replies ---- */
