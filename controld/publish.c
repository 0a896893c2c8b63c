/* publish — node site-config JSON, its small answer cache and zero-copy replies. */
#include "publish.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "site.h"
#include "sitewire.h"
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
  char deny_targets[1024]; /* the operator's --deny-targets, in every answer */
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

/* The site record holds what the wire carries (checked at build time for the lists, and by the
   origin plan below for each origin key). */
_Static_assert(SITE_MAX_HOSTNAMES <= SITEWIRE_MAX_HOSTNAMES, "a site's hostnames fit the wire");
_Static_assert(SITE_MAX_ORIGINS <= SITEWIRE_MAX_ORIGINS, "a site's origins fit the wire");

/* For each published origin key (common/sitewire's origin table), the origin record's row of the
   same name: a published origin is copied out of the record through it. */
static const struct field_def *origin_plan[32];
static int origin_plan_ok;
static pthread_once_t origin_plan_once = PTHREAD_ONCE_INIT;

static void origin_plan_build(void) {
  const char *missing = NULL;
  origin_plan_ok = fields_match(sitewire_origin_fields, site_origin_fields, origin_plan,
                                (int)(sizeof origin_plan / sizeof origin_plan[0]), &missing) >= 0;
  if (!origin_plan_ok)
    log_error("published origin key '%s' has no row of a matching type in the origin record",
              missing ? missing : "(more keys than the plan holds)");
}

/* The site as published (its enabled origins only) into *w. 0, or -1 when a value does not fit
   the wire. */
static int site_wire(const struct site_rec *s, struct sitewire_site *w) {
  w->id = s->id;
  snprintf(w->name, sizeof w->name, "%s", s->name);
  w->n_hostnames = s->n_hostnames;
  for (int i = 0; i < s->n_hostnames; i++)
    snprintf(w->hostnames[i], sizeof w->hostnames[i], "%s", s->hostnames[i]);
  w->config_version = s->config_version;
  w->current_level = s->current_level;
  w->n_origins = 0;
  for (int i = 0; i < s->n_origins; i++) {
    if (!s->origins[i].enabled) continue;
    if (fields_copy(sitewire_origin_fields, &w->origins[w->n_origins], origin_plan,
                    &s->origins[i]) < 0)
      return -1;
    w->n_origins++;
  }
  site_rec_retry(s, &w->retry);
  /* a running failback ramp (docs/design.md, Failback ramp) that still starts from this level */
  memset(&w->ramp, 0, sizeof w->ramp);
  if (s->ramp.from_level && s->ramp.from_level == s->current_level) w->ramp = s->ramp;
  return 0;
}

char *publish_json(const struct config_snapshot *s, const char *deny_targets, size_t *len) {
  struct sitewire_doc d = {.seq = s->seq, .full = s->full};
  if (deny_targets) snprintf(d.deny_targets, sizeof d.deny_targets, "%s", deny_targets);
  struct sitewire_site *w = NULL;
  cJSON *root = NULL;
  char *text = NULL;
  pthread_once(&origin_plan_once, origin_plan_build);
  if (!origin_plan_ok || !(w = malloc(sizeof *w))) goto out;
  if (!(root = sitewire_doc_json(&d, s->deleted, s->n_deleted))) goto out;
  for (int i = 0; i < s->n_sites; i++) {
    if (site_wire(&s->sites[i], w) < 0) {
      log_error("site %lld: a value does not fit the published config", (long long)s->sites[i].id);
      goto out;
    }
    if (sitewire_doc_add_site(root, sitewire_site_json(w)) < 0) goto out;
  }
  text = json_print(root);
out:
  cJSON_Delete(root);
  free(w);
  if (text) *len = strlen(text);
  return text;
}

/* The site as published, as JSON text with config_version 0; NULL when it cannot be encoded. */
static char *site_wire_text(const struct site_rec *s) {
  struct sitewire_site *w = malloc(sizeof *w);
  cJSON *j = NULL;
  char *text = NULL;
  pthread_once(&origin_plan_once, origin_plan_build);
  if (origin_plan_ok && w && site_wire(s, w) == 0) {
    w->config_version = 0;
    if ((j = sitewire_site_json(w))) text = json_print(j);
  }
  cJSON_Delete(j);
  free(w);
  return text;
}

int publish_site_same(const struct site_rec *a, const struct site_rec *b) {
  char *x = site_wire_text(a), *y = x ? site_wire_text(b) : NULL;
  int same = x && y && strcmp(x, y) == 0;
  free(x);
  free(y);
  return same;
}

/* ---- cache ---- */

struct publish *publish_new(struct store *st) {
  struct publish *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->st = st;
  pthread_mutex_init(&p->mu, NULL);
  return p;
}

void publish_set_deny_targets(struct publish *p, const char *list) {
  snprintf(p->deny_targets, sizeof p->deny_targets, "%s", list ? list : "");
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

int64_t publish_since(int64_t since, int64_t cur) {
  return since > cur || since < cur - PUB_DELTA_MAX ? 0 : since;
}

struct pub_blob *publish_get(struct publish *p, int64_t since) {
  struct config_snapshot snap;
  struct pub_blob *b = NULL;
  int64_t cur = store_pub_seq(p->st);
  if (cur < 0) return NULL;
  since = publish_since(since, cur);
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
    b->data = publish_json(&snap, p->deny_targets, &b->len);
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
