/* proxy_state — per-(site, origin) skip records keyed by ids, kept across snapshots. */
#include "proxy_state.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "resolve.h"
#include "targets.h"

/* Most hostname origins re-resolved in one pass of the resolver (the rest wait a second). */
#define RESOLVE_BATCH 64

struct pentry {
  int used;
  int carried;
  int64_t site_id, origin_id;
  char *address;
  int port, https;
  struct skip_rec rec;
  /* the origin's answers: their latency (attempt start to response head) summed, and counted;
     since the entry was made, carried over like rec (heartbeats, docs/design.md, Drills) */
  uint64_t latency_sum_ms, latency_count;
  struct skip_params retry; /* the site's, for outcomes that arrive without a site (probes) */
  int behind; /* on a level before the one its site's requests start on: sent no visitors */
  int resolved;
  int literal;          /* an IP literal: never re-resolved */
  int64_t resolve_due;  /* monotonic ms of the next re-resolution of a name */
  int64_t refresh_ms;   /* the interval that set resolve_due */
  uint64_t readdressed; /* re-resolutions that changed the address */
  socklen_t salen;
  struct sockaddr_storage sa;
};

struct ptable {
  size_t cap; /* power of two */
  size_t n;
  struct pentry *e;
};

/* Records are locked per site: the entries of one site share a stripe mutex, so workers
 * serving different sites never wait for each other, and one site's pick sees its origins
 * consistently. 64 stripes keep collisions rare at a node's tens to hundreds of sites. */
#define SITE_STRIPES 64

struct proxy_state {
  pthread_rwlock_t tab_lock; /* the table itself: read for every use, written by the swap */
  pthread_mutex_t stripe[SITE_STRIPES]; /* an entry's record and address, by its site id */
  pthread_mutex_t sync_mu;              /* serialises proxy_state_sync */
  struct ptable tab;
  proxy_resolve_fn *resolve; /* resolve_origin unless a test substitutes its own */
  /* the destinations never connected to (docs/design.md#errors-and-limits): the built-in ones,
     controld's published --deny-targets and the node's own; written with the table */
  struct targets deny;
  char local_deny[1024]; /* the node's own --deny-targets */
  /* the resolver thread */
  pthread_mutex_t rmu;
  pthread_cond_t rcond;
  atomic_int rstop; /* also read between lookups: a stop never waits for a whole batch */
  int rstarted;
  pthread_t rthr;
};

static pthread_mutex_t *site_lock(struct proxy_state *t, int64_t site_id) {
  uint64_t h = (uint64_t)site_id * UINT64_C(0x9E3779B97F4A7C15);
  return &t->stripe[(h >> 32) % SITE_STRIPES];
}

static size_t slot_of(const struct ptable *t, int64_t site_id, int64_t origin_id) {
  uint64_t h = (uint64_t)site_id * UINT64_C(0x9E3779B97F4A7C15) ^
               (uint64_t)origin_id * UINT64_C(0xC2B2AE3D27D4EB4F);
  h ^= h >> 29;
  return (size_t)h & (t->cap - 1);
}

static struct pentry *find(const struct ptable *t, int64_t site_id, int64_t origin_id) {
  size_t i;
  if (t->cap == 0) return NULL;
  i = slot_of(t, site_id, origin_id);
  for (size_t k = 0; k < t->cap; k++, i = (i + 1) & (t->cap - 1)) {
    struct pentry *e = &t->e[i];
    if (!e->used) return NULL;
    if (e->site_id == site_id && e->origin_id == origin_id) return e;
  }
  return NULL;
}

static struct pentry *insert(struct ptable *t, int64_t site_id, int64_t origin_id) {
  size_t i = slot_of(t, site_id, origin_id);
  for (size_t k = 0; k < t->cap; k++, i = (i + 1) & (t->cap - 1)) {
    struct pentry *e = &t->e[i];
    if (e->used && e->site_id == site_id && e->origin_id == origin_id) return e;
    if (!e->used) {
      e->used = 1;
      e->site_id = site_id;
      e->origin_id = origin_id;
      t->n++;
      return e;
    }
  }
  return NULL;
}

static void table_fini(struct ptable *t) {
  for (size_t i = 0; i < t->cap; i++)
    if (t->e[i].used) free(t->e[i].address);
  free(t->e);
  memset(t, 0, sizeof *t);
}

struct proxy_state *proxy_state_new(void) {
  struct proxy_state *t = calloc(1, sizeof *t);
  pthread_rwlockattr_t ra;
  if (!t) return NULL;
  /* a config swap must not starve behind the workers' continuous reads */
  pthread_rwlockattr_init(&ra);
  pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&t->tab_lock, &ra);
  pthread_rwlockattr_destroy(&ra);
  for (int i = 0; i < SITE_STRIPES; i++)
    pthread_mutex_init(&t->stripe[i], NULL);
  pthread_mutex_init(&t->sync_mu, NULL);
  pthread_mutex_init(&t->rmu, NULL);
  pthread_cond_init(&t->rcond, NULL);
  t->resolve = resolve_origin;
  (void)targets_init(&t->deny, NULL, NULL, 0); /* the built-in list always parses */
  return t;
}

void proxy_state_free(struct proxy_state **tp) {
  struct proxy_state *t = tp ? *tp : NULL;
  if (!t) return;
  if (t->rstarted) {
    pthread_mutex_lock(&t->rmu);
    atomic_store(&t->rstop, 1);
    pthread_cond_signal(&t->rcond);
    pthread_mutex_unlock(&t->rmu);
    pthread_join(t->rthr, NULL);
  }
  table_fini(&t->tab);
  pthread_rwlock_destroy(&t->tab_lock);
  for (int i = 0; i < SITE_STRIPES; i++)
    pthread_mutex_destroy(&t->stripe[i]);
  pthread_mutex_destroy(&t->sync_mu);
  pthread_mutex_destroy(&t->rmu);
  pthread_cond_destroy(&t->rcond);
  free(t);
  *tp = NULL;
}

static int same_identity(const struct pentry *a, const struct pentry *b) {
  return a->port == b->port && a->https == b->https && strcmp(a->address, b->address) == 0;
}

/* First resolution of an entry (getaddrinfo only: a name's TTL is learnt by the resolver). */
static void resolve(struct proxy_state *t, struct pentry *e, int64_t now) {
  struct resolve_result rr;
  char err[300];
  e->resolved = 0;
  e->refresh_ms = SKIP_DNS_MIN_MS;
  e->resolve_due = now + SKIP_DNS_MIN_MS;
  e->literal = resolve_is_literal(e->address);
  if (t->resolve(e->address, e->port, 0, &rr, err, sizeof err) < 0) {
    log_warn("origin %lld of site %lld: %s", (long long)e->origin_id, (long long)e->site_id, err);
    return;
  }
  e->sa = rr.sa;
  e->salen = rr.salen;
  e->resolved = 1;
}

int proxy_state_sync(struct proxy_state *t, const struct sitecfg_set *s) {
  struct ptable nt = {0, 0, NULL};
  struct targets *deny = malloc(sizeof *deny);
  char terr[160];
  size_t total = 0;
  int64_t now = clock_mono_ms();
  int rc = -1;
  pthread_mutex_lock(&t->sync_mu);
  if (!deny) goto out;
  /* both lists were validated (the decoder, the option check): a failure here is a bug, and the
     node then refuses what it can instead of nothing */
  if (targets_init(deny, t->local_deny, terr, sizeof terr) < 0 ||
      targets_add(deny, s ? s->deny_targets : NULL, terr, sizeof terr) < 0)
    log_error("deny-targets: %s (the rest of the list applies)", terr);
  for (int i = 0; s && i < s->n_sites; i++)
    total += (size_t)s->sites[i]->n_origins;
  nt.cap = 16;
  while (nt.cap < total * 2)
    nt.cap *= 2;
  if (!(nt.e = calloc(nt.cap, sizeof *nt.e))) goto out;
  for (int i = 0; s && i < s->n_sites; i++) {
    const struct sitecfg_site *site = s->sites[i];
    for (int k = 0; k < site->n_origins; k++) {
      const struct sitecfg_origin *o = &site->origins[k];
      struct pentry *e = insert(&nt, site->id, o->id);
      size_t n;
      if (!e) goto out;
      if (e->address) continue; /* duplicate id: parse rejects these */
      n = strlen(o->address);
      if (!(e->address = malloc(n + 1))) goto out;
      memcpy(e->address, o->address, n + 1);
      e->port = o->port;
      e->https = o->https;
      e->retry = site->retry;
      e->behind = o->level < (site->ramp.from_level == site->current_level &&
                                      site->ramp.to_level < site->current_level
                                  ? site->ramp.to_level
                                  : site->current_level);
      skip_rec_init(&e->rec);
    }
  }
  /* carry over addresses of unchanged origins; resolve the others outside the lock */
  pthread_rwlock_wrlock(&t->tab_lock);
  for (size_t i = 0; i < nt.cap; i++) {
    struct pentry *e = &nt.e[i], *old;
    if (!e->used) continue;
    old = find(&t->tab, e->site_id, e->origin_id);
    if (old && same_identity(old, e) && old->resolved) {
      e->carried = 1;
      e->resolved = 1;
      e->sa = old->sa;
      e->salen = old->salen;
    }
  }
  pthread_rwlock_unlock(&t->tab_lock);
  for (size_t i = 0; i < nt.cap; i++)
    if (nt.e[i].used && !nt.e[i].resolved) resolve(t, &nt.e[i], clock_mono_ms());
  pthread_rwlock_wrlock(&t->tab_lock);
  for (size_t i = 0; i < nt.cap; i++) {
    struct pentry *e = &nt.e[i], *old;
    if (!e->used) continue;
    old = find(&t->tab, e->site_id, e->origin_id);
    if (!old || !same_identity(old, e)) continue;
    e->rec = old->rec;
    e->latency_sum_ms = old->latency_sum_ms;
    e->latency_count = old->latency_count;
    /* docs/design.md, Failback ramp: controld switched back to this origin's level (or ramps to
       it): its skip ends now and its half-open trial starts with the next request, so the node
       sends visitors where the config says they go */
    if (old->behind && !e->behind && e->rec.state == SKIP_SKIPPED) e->rec.skipped_until = now;
    if (e->carried && old->resolved) { /* the resolver may have moved it meanwhile */
      e->sa = old->sa;
      e->salen = old->salen;
      e->literal = old->literal;
      e->resolve_due = old->resolve_due;
      e->refresh_ms = old->refresh_ms;
      e->readdressed = old->readdressed;
    }
  }
  {
    struct ptable tmp = t->tab;
    t->tab = nt;
    nt = tmp;
  }
  t->deny = *deny;
  pthread_rwlock_unlock(&t->tab_lock);
  rc = 0;
out:
  free(deny);
  if (nt.e) table_fini(&nt);
  pthread_mutex_unlock(&t->sync_mu);
  return rc;
}

int proxy_state_pick(struct proxy_state *t, const struct sitecfg_site *site, uint64_t tried,
                     int64_t now, struct proxy_pick *out) {
  return proxy_state_pick_from(t, site, site->current_level, tried, now, out);
}

int proxy_state_start_level(const struct sitecfg_site *site, int64_t wall_ms, int64_t offset_ms,
                            int draw) {
  const struct ramp_run *r = &site->ramp;
  if (r->from_level != site->current_level || r->to_level >= site->current_level)
    return site->current_level; /* no ramp, or one this config does not describe */
  return draw < ramp_share(r, wall_ms, offset_ms) ? r->to_level : site->current_level;
}

int proxy_state_pick_from(struct proxy_state *t, const struct sitecfg_site *site, int start_level,
                          uint64_t tried, int64_t now, struct proxy_pick *out) {
  struct skip_cand cand[SKIP_MAX_PICK];
  int map[SKIP_MAX_PICK];
  struct pentry *ents[SKIP_MAX_PICK];
  struct skip_choice ch;
  int n = 0, idx, rc = -1;
  pthread_mutex_t *sl = site_lock(t, site->id);
  pthread_rwlock_rdlock(&t->tab_lock);
  pthread_mutex_lock(sl);
  for (int i = 0; i < site->n_origins && i < SKIP_MAX_PICK; i++) {
    const struct sitecfg_origin *o = &site->origins[i];
    struct pentry *e;
    /* the current level, and with backup_levels the following ones; never an earlier one */
    if (o->level < start_level) continue;
    /* a ramp request: the ramp level, then the current one (its fallback whatever backup_levels
       says), never the levels in between */
    if (o->level > start_level && o->level < site->current_level) continue;
    if (o->level != start_level && o->level != site->current_level && !site->retry.backup_levels)
      continue;
    if (tried & (UINT64_C(1) << i)) continue;
    e = find(&t->tab, site->id, o->id);
    if (!e) continue; /* published after this snapshot was replaced */
    cand[n] = (struct skip_cand){&e->rec, o->weight, 0, o->level};
    map[n] = i;
    ents[n] = e;
    n++;
  }
  if (start_level == site->current_level) {
    idx = skip_pick_levels(cand, n, &site->retry, start_level, now, &ch);
  } else {
    /* the candidates are already the ramp request's: go on from the ramp level to the others */
    struct skip_params rp = site->retry;
    rp.backup_levels = 1;
    idx = skip_pick_levels(cand, n, &rp, start_level, now, &ch);
    /* the current level is no backup pick */
    if (idx >= 0 && ch.level == site->current_level && cand[idx].rec->backup_picks > 0)
      cand[idx].rec->backup_picks--;
  }
  if (idx >= 0) {
    out->index = map[idx];
    out->fail_open = ch.fail_open;
    out->level = ch.level;
    out->backup = ch.level > site->current_level;
    out->resolved = ents[idx]->resolved;
    out->sa = ents[idx]->sa;
    out->salen = ents[idx]->salen;
    out->refused = NULL;
    if (out->resolved) (void)targets_refused_sa(&t->deny, &out->sa, &out->refused);
    rc = 0;
  }
  pthread_mutex_unlock(sl);
  pthread_rwlock_unlock(&t->tab_lock);
  return rc;
}

int proxy_state_record(struct proxy_state *t, const struct sitecfg_site *site, int origin_index,
                       int64_t now, int failed) {
  struct pentry *e;
  int r = 0;
  if (origin_index < 0 || origin_index >= site->n_origins) return 0;
  pthread_rwlock_rdlock(&t->tab_lock);
  pthread_mutex_lock(site_lock(t, site->id));
  e = find(&t->tab, site->id, site->origins[origin_index].id);
  if (e) r = skip_record(&e->rec, &site->retry, now, failed);
  pthread_mutex_unlock(site_lock(t, site->id));
  pthread_rwlock_unlock(&t->tab_lock);
  return r;
}

void proxy_state_latency(struct proxy_state *t, const struct sitecfg_site *site, int origin_index,
                         int64_t ms) {
  struct pentry *e;
  if (origin_index < 0 || origin_index >= site->n_origins) return;
  pthread_rwlock_rdlock(&t->tab_lock);
  pthread_mutex_lock(site_lock(t, site->id));
  e = find(&t->tab, site->id, site->origins[origin_index].id);
  if (e) {
    e->latency_sum_ms += (uint64_t)(ms > 0 ? ms : 0);
    e->latency_count++;
  }
  pthread_mutex_unlock(site_lock(t, site->id));
  pthread_rwlock_unlock(&t->tab_lock);
}

int proxy_state_probe(struct proxy_state *t, int64_t origin_id, int64_t now, int ok) {
  int skips = 0;
  pthread_rwlock_rdlock(&t->tab_lock);
  for (size_t i = 0; i < t->tab.cap; i++) {
    struct pentry *e = &t->tab.e[i];
    if (!e->used || e->origin_id != origin_id) continue;
    pthread_mutex_lock(site_lock(t, e->site_id));
    skips += skip_probe(&e->rec, &e->retry, now, ok);
    pthread_mutex_unlock(site_lock(t, e->site_id));
  }
  pthread_rwlock_unlock(&t->tab_lock);
  return skips;
}

/* A name to re-resolve, copied out of the table so the lookup runs without the lock. */
struct due {
  int64_t site_id, origin_id;
  int port;
  char address[256];
};

int proxy_state_refresh(struct proxy_state *t, int64_t now) {
  struct due due[RESOLVE_BATCH];
  int n = 0;
  int64_t started = clock_mono_ms();
  /* only this thread writes the due times and a swap needs the write lock: a read lock will do */
  pthread_rwlock_rdlock(&t->tab_lock);
  for (size_t i = 0; i < t->tab.cap && n < RESOLVE_BATCH; i++) {
    const struct pentry *e = &t->tab.e[i];
    if (!e->used || e->literal || e->resolve_due > now || strlen(e->address) >= 256) continue;
    due[n].site_id = e->site_id;
    due[n].origin_id = e->origin_id;
    due[n].port = e->port;
    memcpy(due[n].address, e->address, strlen(e->address) + 1);
    n++;
  }
  pthread_rwlock_unlock(&t->tab_lock);
  for (int k = 0; k < n && !atomic_load(&t->rstop); k++) {
    struct resolve_result rr;
    struct pentry *e;
    char err[300];
    int ok = t->resolve(due[k].address, due[k].port, 1, &rr, err, sizeof err) == 0;
    int64_t done = now + (clock_mono_ms() - started); /* now plus the time the lookups took */
    pthread_rwlock_rdlock(&t->tab_lock);
    pthread_mutex_lock(site_lock(t, due[k].site_id));
    e = find(&t->tab, due[k].site_id, due[k].origin_id);
    if (e && e->port == due[k].port && strcmp(e->address, due[k].address) == 0) {
      if (ok) {
        if (e->resolved && (e->salen != rr.salen || memcmp(&e->sa, &rr.sa, rr.salen) != 0)) {
          e->readdressed++;
          log_info("origin %lld of site %lld: %s moved to a new address", (long long)e->origin_id,
                   (long long)e->site_id, e->address);
        }
        e->sa = rr.sa;
        e->salen = rr.salen;
        e->resolved = 1;
        e->refresh_ms = skip_dns_refresh_ms(rr.have_ttl, rr.ttl_s);
      } else {
        /* keep the last good address: a DNS outage must not take a working origin away */
        e->refresh_ms = SKIP_DNS_MIN_MS;
      }
      e->resolve_due = done + e->refresh_ms;
    }
    pthread_mutex_unlock(site_lock(t, due[k].site_id));
    pthread_rwlock_unlock(&t->tab_lock);
    if (!ok)
      log_warn("origin %lld of site %lld: %s (the last address is kept)",
               (long long)due[k].origin_id, (long long)due[k].site_id, err);
  }
  return n;
}

static void *resolver_main(void *arg) {
  struct proxy_state *t = arg;
  pthread_mutex_lock(&t->rmu);
  while (!atomic_load(&t->rstop)) {
    struct timespec ts;
    pthread_mutex_unlock(&t->rmu);
    (void)proxy_state_refresh(t, clock_mono_ms());
    pthread_mutex_lock(&t->rmu);
    if (atomic_load(&t->rstop)) break;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1; /* due times are checked once a second */
    pthread_cond_timedwait(&t->rcond, &t->rmu, &ts);
  }
  pthread_mutex_unlock(&t->rmu);
  return NULL;
}

int proxy_state_set_deny(struct proxy_state *t, const char *list, char *err, size_t errlen) {
  struct targets *d = malloc(sizeof *d);
  int rc = -1;
  if (!d) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (!list) list = "";
  if (strlen(list) >= sizeof t->local_deny) {
    snprintf(err, errlen, "the list is longer than %zu bytes", sizeof t->local_deny - 1);
  } else if (targets_init(d, list, err, errlen) == 0) {
    pthread_rwlock_wrlock(&t->tab_lock);
    memcpy(t->local_deny, list, strlen(list) + 1);
    t->deny = *d;
    pthread_rwlock_unlock(&t->tab_lock);
    rc = 0;
  }
  free(d);
  return rc;
}

void proxy_state_deny_copy(struct proxy_state *t, struct targets *out) {
  pthread_rwlock_rdlock(&t->tab_lock);
  *out = t->deny;
  pthread_rwlock_unlock(&t->tab_lock);
}

void proxy_state_set_resolver(struct proxy_state *t, proxy_resolve_fn *fn) {
  t->resolve = fn ? fn : resolve_origin;
}

int proxy_state_resolver_start(struct proxy_state *t) {
  if (t->rstarted) return 0;
  if (pthread_create(&t->rthr, NULL, resolver_main, t) != 0) return -1;
  t->rstarted = 1;
  return 0;
}

void proxy_state_release(struct proxy_state *t, const struct sitecfg_site *site, int origin_index) {
  struct pentry *e;
  if (origin_index < 0 || origin_index >= site->n_origins) return;
  pthread_rwlock_rdlock(&t->tab_lock);
  pthread_mutex_lock(site_lock(t, site->id));
  e = find(&t->tab, site->id, site->origins[origin_index].id);
  if (e) skip_release(&e->rec);
  pthread_mutex_unlock(site_lock(t, site->id));
  pthread_rwlock_unlock(&t->tab_lock);
}

static const char *state_name(enum skip_state s) {
  switch (s) {
  case SKIP_HEALTHY:
    return "healthy";
  case SKIP_SKIPPED:
    return "skipped";
  case SKIP_HALF_OPEN:
    return "half_open";
  }
  return "unknown";
}

cJSON *proxy_state_observations(struct proxy_state *t, int64_t now) {
  cJSON *arr = cJSON_CreateArray();
  if (!arr) return NULL;
  pthread_rwlock_rdlock(&t->tab_lock);
  for (size_t i = 0; i < t->tab.cap; i++) {
    const struct pentry *e = &t->tab.e[i];
    struct skip_rec rec;
    uint64_t lsum, lcnt;
    cJSON *o;
    if (!e->used) continue;
    pthread_mutex_lock(site_lock(t, e->site_id));
    rec = e->rec;
    lsum = e->latency_sum_ms;
    lcnt = e->latency_count;
    pthread_mutex_unlock(site_lock(t, e->site_id));
    if (!(o = cJSON_CreateObject())) break;
    json_add_i64(o, "site_id", e->site_id);
    json_add_i64(o, "origin_id", e->origin_id);
    json_add_i64(o, "requests", (int64_t)rec.requests);
    json_add_i64(o, "failures", (int64_t)rec.failures);
    cJSON_AddBoolToObject(o, "skipped", skip_is_skipped(&rec, now));
    json_add_i64(o, "backup_picks", (int64_t)rec.backup_picks);
    json_add_i64(o, "fail_open", (int64_t)rec.fail_open);
    json_add_i64(o, "latency_sum_ms", (int64_t)lsum);
    json_add_i64(o, "latency_count", (int64_t)lcnt);
    cJSON_AddItemToArray(arr, o);
  }
  pthread_rwlock_unlock(&t->tab_lock);
  return arr;
}

cJSON *proxy_state_site_json(struct proxy_state *t, const struct sitecfg_site *site, int64_t now) {
  cJSON *arr = cJSON_CreateArray();
  if (!arr) return NULL;
  pthread_rwlock_rdlock(&t->tab_lock);
  pthread_mutex_lock(site_lock(t, site->id));
  for (int i = 0; i < site->n_origins; i++) {
    const struct sitecfg_origin *o = &site->origins[i];
    const struct pentry *e = find(&t->tab, site->id, o->id);
    cJSON *j = cJSON_CreateObject();
    const char *why = NULL;
    if (!j) break;
    json_add_i64(j, "id", o->id);
    json_add_i64(j, "level", o->level);
    cJSON_AddStringToObject(j, "address", o->address);
    json_add_i64(j, "port", o->port);
    cJSON_AddStringToObject(j, "scheme", o->https ? "https" : "http");
    if (e) {
      int64_t left = e->rec.state == SKIP_SKIPPED ? e->rec.skipped_until - now : 0;
      cJSON_AddStringToObject(j, "state", state_name(e->rec.state));
      json_add_i64(j, "skipped_for_ms", left > 0 ? left : 0);
      json_add_i64(j, "requests", (int64_t)e->rec.requests);
      json_add_i64(j, "failures", (int64_t)e->rec.failures);
      json_add_i64(j, "skips", (int64_t)e->rec.skips);
      json_add_i64(j, "fail_open", (int64_t)e->rec.fail_open);
      json_add_i64(j, "backup_picks", (int64_t)e->rec.backup_picks);
      json_add_i64(j, "probes", (int64_t)e->rec.probes);
      cJSON_AddBoolToObject(j, "resolved", e->resolved);
      if (e->resolved && targets_refused_sa(&t->deny, &e->sa, &why)) {
        char txt[160];
        snprintf(txt, sizeof txt, "the address is %s: never connected to", why);
        cJSON_AddStringToObject(j, "refused_target", txt);
      }
      if (!e->literal) {
        int64_t due_in = e->resolve_due - now;
        json_add_i64(j, "dns_refresh_in_ms", due_in > 0 ? due_in : 0);
        json_add_i64(j, "dns_readdressed", (int64_t)e->readdressed);
      }
    } else {
      cJSON_AddStringToObject(j, "state", "unknown");
    }
    cJSON_AddItemToArray(arr, j);
  }
  pthread_mutex_unlock(site_lock(t, site->id));
  pthread_rwlock_unlock(&t->tab_lock);
  return arr;
}

/* Where an origin stands for the metrics: SKIP_SKIPPED while its skip runs, SKIP_HALF_OPEN once
   it ran out (trials decide), else SKIP_HEALTHY. */
static enum skip_state phase_of(const struct skip_rec *r, int64_t now) {
  if (r->state == SKIP_SKIPPED) return r->skipped_until > now ? SKIP_SKIPPED : SKIP_HALF_OPEN;
  return r->state; /* a skip that ran out turns half-open lazily, at its next pick */
}

struct untrusted {
  int64_t site_id, origin_id;
};

static int cmp_untrusted(const void *a, const void *b) {
  const struct untrusted *x = a, *y = b;
  if (x->site_id != y->site_id) return x->site_id < y->site_id ? -1 : 1;
  return x->origin_id < y->origin_id ? -1 : x->origin_id > y->origin_id;
}

int proxy_state_skip_metrics(struct proxy_state *t, int64_t now, int max_labelled,
                             struct buf *out) {
  int64_t count[3] = {0, 0, 0};
  struct untrusted *u = NULL;
  size_t nu = 0, cap = 0;
  int rc = -1;
  pthread_rwlock_rdlock(&t->tab_lock);
  for (size_t i = 0; i < t->tab.cap; i++) {
    const struct pentry *e = &t->tab.e[i];
    enum skip_state ph;
    if (!e->used) continue;
    pthread_mutex_lock(site_lock(t, e->site_id));
    ph = phase_of(&e->rec, now);
    pthread_mutex_unlock(site_lock(t, e->site_id));
    count[ph]++;
    if (ph == SKIP_HEALTHY) continue;
    if (nu == cap) {
      size_t nc = cap ? cap * 2 : 64;
      struct untrusted *nuarr = realloc(u, nc * sizeof *u);
      if (!nuarr) {
        pthread_rwlock_unlock(&t->tab_lock);
        goto out;
      }
      u = nuarr;
      cap = nc;
    }
    u[nu].site_id = e->site_id;
    u[nu].origin_id = e->origin_id;
    nu++;
  }
  pthread_rwlock_unlock(&t->tab_lock);
  if (nu > 1) qsort(u, nu, sizeof *u, cmp_untrusted);
  if (buf_printf(out,
                 "# HELP cdnca_node_origins Origins in the node's table by skip state.\n"
                 "# TYPE cdnca_node_origins gauge\n"
                 "cdnca_node_origins{state=\"healthy\"} %lld\n"
                 "cdnca_node_origins{state=\"skipped\"} %lld\n"
                 "cdnca_node_origins{state=\"half_open\"} %lld\n"
                 "# HELP cdnca_node_origin_skipped 1 while the node skips the origin or runs its "
                 "half-open trial (first origins by id only).\n"
                 "# TYPE cdnca_node_origin_skipped gauge\n",
                 (long long)count[SKIP_HEALTHY], (long long)count[SKIP_SKIPPED],
                 (long long)count[SKIP_HALF_OPEN]) < 0)
    goto out;
  for (size_t i = 0; i < nu && (int64_t)i < max_labelled; i++)
    if (buf_printf(out, "cdnca_node_origin_skipped{site=\"%lld\",origin=\"%lld\"} 1\n",
                   (long long)u[i].site_id, (long long)u[i].origin_id) < 0)
      goto out;
  rc = 0;
out:
  free(u);
  return rc;
}
