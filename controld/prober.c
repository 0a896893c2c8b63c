/* prober — the probe round thread and one round's three sources (see prober.h). */
#include "prober.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "clock.h"
#include "engine.h"
#include "hcheck.h"
#include "log.h"
#include "metrics.h"
#include "model.h"
#include "names.h"
#include "probe.h"
#include "rng.h"
#include "store.h"
#include "store_health.h"
#include "store_sites.h"
#include "tasks.h"

/* Nodes asked per round. */
#define PROBER_VOTE_NODES 3
/* The round thread looks for sites with their own interval at least this often, so a site
   created or changed meanwhile is not left waiting for a long global interval. */
#define PROBER_RECHECK_MS 1000
/* Least time between two round starts: a store that cannot record a round must not spin. */
#define PROBER_MIN_GAP_MS 50

/* One origin to decide in a round. */
struct item {
  int64_t site_id, origin_id;
  char *scheme, *address, *host, *path, *url; /* owned */
  int port, timeout_ms;
  int checkpoints; /* the site asks the checkpoint plugin */
  int real;        /* a shadow item (docs/design.md, Shadow health policies): the index of the
                      real item of the same origin; -1 for a real item */
  /* The site's options: every source probes and judges by them. NULL = the defaults (most
     sites: no copy at all); else one heap copy per site, freed with its first item. */
  struct hcheck_opts *check;
  int owns_check;
  struct engine_vote *votes;
  int n_votes, cap_votes;
  struct engine_verdict v;
};

struct prober {
  struct prober_env env; /* a copy; the schedule in it changes on reload (under mu) */
  struct probe *probe;
  struct checkpoint *cp; /* NULL without --checkpoint-url */
  int64_t next_round_id;
  pthread_t thr;
  int thr_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  atomic_int stop;
  /* a schedule change from a reload, taken by the round thread between rounds (under mu) */
  int sched_pending;
  int64_t sched_interval_ms, sched_batch;
};

int prober_pick_voters(int64_t *online, int n, uint64_t seed, int64_t *out, int k) {
  int take = n < k ? n : k;
  struct rng r = {seed};
  for (int i = 0; i < take; i++) {
    int j = i + (int)rng_below(&r, (uint64_t)(n - i));
    int64_t t = online[i];
    online[i] = online[j];
    online[j] = t;
    out[i] = online[i];
  }
  return take < 0 ? 0 : take;
}

int64_t prober_node_deadline_ms(int64_t max_timeout_ms, int64_t probe_interval_ms) {
  int64_t d = max_timeout_ms + 2000, half = probe_interval_ms / 2;
  if (half < d) d = half;
  return d < 1 ? 1 : d;
}

/* ---- items ---- */

/* An item's probe timeout, its check's or the default. */
static int64_t timeout_of(const struct item *it) {
  return it->timeout_ms > 0 ? it->timeout_ms : PROBE_DEFAULT_TIMEOUT_MS;
}

static void items_free(struct item *it, int n) {
  if (!it) return;
  for (int i = 0; i < n; i++) {
    free(it[i].scheme);
    free(it[i].address);
    free(it[i].host);
    free(it[i].path);
    free(it[i].url);
    free(it[i].votes);
    if (it[i].owns_check) free(it[i].check);
  }
  free(it);
}

/* Append a vote to an item (grows its array); 0 or -1. */
static int item_vote(struct item *it, const struct engine_vote *v) {
  if (it->n_votes == it->cap_votes) {
    int ncap = it->cap_votes ? it->cap_votes * 2 : 4;
    struct engine_vote *nv = realloc(it->votes, (size_t)ncap * sizeof *nv);
    if (!nv) return -1;
    it->votes = nv;
    it->cap_votes = ncap;
  }
  it->votes[it->n_votes++] = *v;
  return 0;
}

static void item_tally(struct item *it) {
  engine_tally(it->votes, it->n_votes, &it->v);
  it->v.votes = it->votes;
  it->v.n_votes = it->n_votes;
}

/* Fill item from origin o of site s; 0 or -1 (out of memory). */
static int item_fill(struct item *it, const struct site_rec *s, const struct origin_rec *o,
                     struct hcheck_opts *check) {
  const char *host = o->host_header[0]    ? o->host_header
                     : s->n_hostnames > 0 ? s->hostnames[0]
                                          : o->address;
  int v6 = strchr(o->address, ':') != NULL;
  const char *scheme = names_word(NAMES(origin_scheme_names), (int)o->scheme, "http");
  size_t ulen = strlen(scheme) + strlen(o->address) + strlen(s->hc_path) + 24;
  memset(it, 0, sizeof *it);
  it->real = -1;
  it->site_id = s->id;
  it->origin_id = o->id;
  it->v.origin_id = o->id;
  it->port = o->port;
  it->timeout_ms =
      (int)(s->hc_timeout_ms > 0 && s->hc_timeout_ms < 3600000 ? s->hc_timeout_ms
                                                               : PROBE_DEFAULT_TIMEOUT_MS);
  it->checkpoints = s->hc_checkpoints;
  it->check = check;
  it->scheme = strdup(scheme);
  it->address = strdup(o->address);
  it->host = strdup(host);
  it->path = strdup(s->hc_path[0] ? s->hc_path : "/");
  it->url = malloc(ulen);
  if (!it->scheme || !it->address || !it->host || !it->path || !it->url) return -1;
  snprintf(it->url, ulen, "%s://%s%s%s:%d%s", scheme, v6 ? "[" : "", o->address, v6 ? "]" : "",
           o->port, it->path);
  return 0;
}

/* Due sites read per statement group (bounds the memory of a large round). */
#define PROBER_LOAD_CHUNK 512

/* The shadow probes of a round (docs/design.md, Shadow health policies): one item per enabled
   origin of each due site with a shadow policy, as long as the round's sites and shadow sites stay
   within --probe-batch; the sites left out are listed as skipped. */
struct shadow_load {
  int budget; /* shadow sites the round may still take */
  struct item *items;
  int n, cap;
  int64_t *skipped; /* site ids */
  int n_skipped;
};

/* Add s's shadow items (its real ones are items[first..first + n_real)); 0 or -1. */
static int load_shadow(struct shadow_load *sl, struct site_rec *s, int first) {
  struct hcheck_opts *check = NULL;
  int k = 0;
  if (!s->shadow.set || !s->shadow.hc.enabled) return 0;
  if (sl->budget <= 0) {
    int64_t *ns = realloc(sl->skipped, (size_t)(sl->n_skipped + 1) * sizeof *ns);
    if (!ns) return -1;
    sl->skipped = ns;
    sl->skipped[sl->n_skipped++] = s->id;
    return 0;
  }
  sl->budget--;
  site_hc_put(s, &s->shadow.hc); /* s is the loader's own copy */
  if (!hcheck_is_default(&s->hc)) {
    check = malloc(sizeof *check);
    if (!check) return -1;
    *check = s->hc;
  }
  for (int i = 0; i < s->n_origins; i++) {
    struct item *it;
    if (!s->origins[i].enabled) continue;
    if (sl->n == sl->cap) {
      int ncap = sl->cap ? sl->cap * 2 : 64;
      struct item *ni = realloc(sl->items, (size_t)ncap * sizeof *ni);
      if (!ni) {
        if (check && k == 0) free(check);
        return -1;
      }
      sl->items = ni;
      sl->cap = ncap;
    }
    it = &sl->items[sl->n++];
    if (item_fill(it, s, &s->origins[i], check) < 0) {
      it->owns_check = check && k == 0;
      return -1;
    }
    it->owns_check = check && k == 0;
    it->checkpoints = 0; /* controld's own probes only */
    it->real = first + k++;
  }
  if (check && k == 0) free(check);
  return 0;
}

/* Load the due sites and make one item per enabled origin, grouped by site in order; with sl,
   the shadow items too (sl->items). */
static int load_items(struct prober *p, const int64_t *ids, int n_ids, struct item **out, int *n,
                      int *n_sites, struct shadow_load *sl) {
  struct item *items = NULL;
  struct site_rec *all = NULL;
  int cnt = 0, cap = 0, sites = 0, rc = -1, i, db_failed = 0;
  int chunk = n_ids < PROBER_LOAD_CHUNK ? n_ids : PROBER_LOAD_CHUNK;
  struct hcheck_opts *check;
  int owned, first;
  *out = NULL;
  *n = *n_sites = 0;
  if (n_ids == 0) return 0;
  all = calloc((size_t)chunk, sizeof *all);
  if (!all) goto out;
  for (i = 0; i < n_ids; i++) {
    struct site_rec s;
    const char *reason = NULL;
    if (i % chunk == 0 && /* the next chunk of sites, in a few statements */
        store_sites_get(p->env.store, ids + i, n_ids - i < chunk ? n_ids - i : chunk, all) !=
            STORE_OK) {
      db_failed = 1;
      goto out;
    }
    s = all[i % chunk];
    memset(&all[i % chunk], 0, sizeof s); /* s owns the origins now */
    if (s.id == 0) continue;              /* deleted meanwhile */
    if (strcmp(model_hc_state(&s, &reason), "active") != 0) {
      site_rec_fini(&s);
      continue;
    }
    sites++;
    check = NULL;
    owned = 0;
    first = cnt;
    if (!hcheck_is_default(&s.hc)) {
      check = malloc(sizeof *check);
      if (!check) {
        site_rec_fini(&s);
        goto out;
      }
      *check = s.hc;
    }
    for (int k = 0; k < s.n_origins; k++) {
      int filled;
      if (!s.origins[k].enabled) continue;
      if (cnt == cap) {
        int ncap = cap ? cap * 2 : 256;
        struct item *ni = realloc(items, (size_t)ncap * sizeof *ni);
        if (!ni) {
          if (!owned) free(check);
          site_rec_fini(&s);
          goto out;
        }
        items = ni;
        cap = ncap;
      }
      filled = item_fill(&items[cnt++], &s, &s.origins[k], check);
      if (check && !owned) { /* the site's first item owns the copy; the others borrow it */
        items[cnt - 1].owns_check = 1;
        owned = 1;
      }
      if (filled < 0) {
        site_rec_fini(&s);
        goto out;
      }
    }
    if (check && !owned) free(check);
    if (sl && load_shadow(sl, &s, first) < 0) {
      site_rec_fini(&s);
      goto out;
    }
    site_rec_fini(&s);
  }
  rc = 0;
out:
  if (all) { /* the sites of the chunk not yet taken */
    for (int j = 0; j < chunk; j++)
      site_rec_fini(&all[j]);
    free(all);
  }
  if (rc < 0) {
    log_error("probe round: %s while loading sites",
              db_failed ? "a database error" : "out of memory");
    items_free(items, cnt);
    return -1;
  }
  *out = items;
  *n = cnt;
  *n_sites = sites;
  return 0;
}

/* ---- source 1: nodes ---- */

static int ask_nodes(struct prober *p, int64_t round_id, int64_t started_wall, struct item *items,
                     int n, const int64_t *nodes, int n_nodes) {
  struct task_spec *specs = NULL;
  const struct task_spec *per[PROBER_VOTE_NODES];
  int counts[PROBER_VOTE_NODES];
  struct task_vote *votes = NULL;
  int n_votes = 0, max_timeout = 0, rc = -1;
  int64_t deadline;
  if (n_nodes <= 0 || n <= 0 || !p->env.tasks) return 0;
  specs = calloc((size_t)n * (size_t)n_nodes, sizeof *specs);
  if (!specs) goto out;
  for (int i = 0; i < n; i++)
    if (timeout_of(&items[i]) > max_timeout) max_timeout = timeout_of(&items[i]);
  for (int k = 0; k < n_nodes; k++) {
    per[k] = &specs[(size_t)k * (size_t)n];
    counts[k] = n;
    for (int i = 0; i < n; i++) {
      struct task_spec *t = &specs[(size_t)k * (size_t)n + (size_t)i];
      t->task_id = (int64_t)k * n + i + 1;
      t->origin_id = items[i].origin_id;
      snprintf(t->url, sizeof t->url, "%s", items[i].url);
      snprintf(t->host, sizeof t->host, "%s", items[i].host);
      t->timeout_ms = items[i].timeout_ms;
      t->check = items[i].check;
    }
  }
  /* the global interval bounds the wait, not a site's own shorter one: half of 1 s would leave
     the nodes no time to probe, and every site of the round would lose its node votes. The
     round ends as soon as every node has voted, so a 1 s site stays near 1 s while they do. */
  deadline = started_wall + prober_node_deadline_ms(max_timeout, p->env.probe_interval_ms);
  if (tasks_round_open(p->env.tasks, round_id, deadline, n_nodes, nodes, per, counts) < 0) {
    log_error("probe round %lld: cannot hand tasks to the nodes", (long long)round_id);
    goto out;
  }
  free(specs);
  specs = NULL;
  tasks_round_wait(p->env.tasks, round_id, &p->stop);
  if (tasks_round_close(p->env.tasks, round_id, &votes, &n_votes) < 0) goto out;
  for (int j = 0; j < n_votes; j++) {
    const struct task_vote *tv = &votes[j];
    struct engine_vote ev;
    int64_t idx = tv->task_id - 1;
    if (idx < 0 || idx >= (int64_t)n * n_nodes) continue;
    idx %= n;
    memset(&ev, 0, sizeof ev);
    ev.source = SOURCE_NODES;
    ev.node_id = tv->node_id;
    ev.ok = tv->ok ? 1 : 0;
    ev.status = tv->status;
    ev.latency_ms = tv->latency_ms;
    snprintf(ev.error, sizeof ev.error, "%s", tv->error);
    if (item_vote(&items[idx], &ev) < 0) goto out;
  }
  rc = 0;
out:
  free(specs);
  free(votes);
  return rc;
}

/* ---- source 2: checkpoints ---- */

/* The checkpoint plugin's failures not yet said, and when they were last said. */
static _Atomic uint64_t cp_fail_held;
static _Atomic int64_t cp_fail_log;

static int ask_checkpoints(struct prober *p, struct item *items, int n, int *errors) {
  struct checkpoint_query *q = NULL;
  struct checkpoint_answer *a = NULL;
  int *map = NULL, nq = 0, rc = -1, first_k = 0;
  int64_t max_timeout = 0;
  struct hcheck_opts defaults;
  *errors = 0;
  if (!p->cp) return 0;
  hcheck_defaults(&defaults);
  for (int i = 0; i < n; i++)
    if (items[i].checkpoints && items[i].v.verdict == VERDICT_NONE) nq++;
  if (nq == 0) return 0;
  q = calloc((size_t)nq, sizeof *q);
  a = calloc((size_t)nq, sizeof *a);
  map = calloc((size_t)nq, sizeof *map);
  if (!q || !a || !map) goto out;
  nq = 0;
  for (int i = 0; i < n; i++) {
    if (!items[i].checkpoints || items[i].v.verdict != VERDICT_NONE) continue;
    q[nq].url = items[i].url;
    q[nq].host = items[i].host;
    q[nq].timeout_ms = items[i].timeout_ms;
    q[nq].check = items[i].check;
    if (timeout_of(&items[i]) > max_timeout) max_timeout = timeout_of(&items[i]);
    map[nq++] = i;
  }
  if (checkpoint_run(p->cp, q, (size_t)nq, a, &p->stop,
                     clock_mono_ms() + checkpoint_phase_ms(max_timeout)) < 0)
    log_warn("checkpoint plugin: run failed");
  for (int k = 0; k < nq; k++) {
    struct item *it = &items[map[k]];
    if (!a[k].valid) {
      if (!p->stop && (*errors)++ == 0) first_k = k;
      continue;
    }
    for (int j = 0; j < a[k].n; j++) {
      struct engine_vote ev;
      memset(&ev, 0, sizeof ev);
      ev.source = SOURCE_CHECKPOINTS;
      snprintf(ev.checkpoint, sizeof ev.checkpoint, "%s", a[k].votes[j].name);
      /* the plugin reports what it saw; the site's options judge it (hcheck_rejudge) */
      ev.ok = hcheck_rejudge(it->check ? it->check : &defaults, a[k].votes[j].ok,
                             a[k].votes[j].status, a[k].votes[j].error, ev.error, sizeof ev.error);
      ev.status = a[k].votes[j].status;
      ev.latency_ms = a[k].votes[j].latency_ms;
      if (item_vote(it, &ev) < 0) goto out;
    }
    item_tally(it);
  }
  /* a plugin that fails fails for every origin: one line at most every 10 s, with a count (the
     errors are counted in cdnca_checkpoint_errors_total) */
  if (*errors) {
    uint64_t held = atomic_fetch_add(&cp_fail_held, (uint64_t)*errors) + (uint64_t)*errors;
    if (log_every(&cp_fail_log, clock_mono_ms(), 10000)) {
      atomic_fetch_sub(&cp_fail_held, held);
      log_warn("checkpoint plugin: no votes for %d of %d origins this round (origin %lld: %s); "
               "%llu failed answers since the last such line",
               *errors, nq, (long long)items[map[first_k]].origin_id, a[first_k].error,
               (unsigned long long)held);
    }
  }
  rc = 0;
out:
  if (a) checkpoint_answers_free(a, (size_t)nq);
  free(a);
  free(q);
  free(map);
  return rc;
}

/* ---- source 3: controld's own probes ---- */

static _Atomic uint64_t local_held;
static _Atomic int64_t local_log;

static int probe_direct(struct prober *p, struct item *items, int n) {
  struct probe_target *t = NULL;
  struct probe_result *r = NULL;
  int *map = NULL, nt = 0, rc = -1, local = 0, first_local = -1;
  for (int i = 0; i < n; i++)
    if (items[i].v.verdict == VERDICT_NONE) nt++;
  if (nt == 0) return 0;
  t = calloc((size_t)nt, sizeof *t);
  r = calloc((size_t)nt, sizeof *r);
  map = calloc((size_t)nt, sizeof *map);
  if (!t || !r || !map) goto out;
  nt = 0;
  for (int i = 0; i < n; i++) {
    if (items[i].v.verdict != VERDICT_NONE) continue;
    t[nt].scheme = items[i].scheme;
    t[nt].address = items[i].address;
    t[nt].port = items[i].port;
    t[nt].host = items[i].host;
    t[nt].path = items[i].path;
    t[nt].timeout_ms = items[i].timeout_ms;
    t[nt].check = items[i].check;
    map[nt++] = i;
  }
  if (probe_run(p->probe, t, (size_t)nt, r, &p->stop) < 0) log_warn("direct probes: run failed");
  if (p->stop) goto out;
  for (int k = 0; k < nt; k++) {
    struct engine_vote ev;
    /* a probe never made (no descriptor or no memory in controld) says nothing about the
       origin: no vote, so no verdict this round and the origin's state stays as it was */
    if (r[k].local) {
      if (local++ == 0) first_local = k;
      continue;
    }
    memset(&ev, 0, sizeof ev);
    ev.source = SOURCE_CONTROL;
    ev.ok = r[k].ok;
    ev.status = r[k].status;
    ev.latency_ms = r[k].latency_ms;
    snprintf(ev.error, sizeof ev.error, "%s", r[k].error);
    if (item_vote(&items[map[k]], &ev) < 0) goto out;
    item_tally(&items[map[k]]);
  }
  if (local) {
    uint64_t held = atomic_fetch_add(&local_held, (uint64_t)local) + (uint64_t)local;
    metrics_add(p->env.metrics, "cdnca_probes_not_made_total", "", local);
    if (log_every(&local_log, clock_mono_ms(), 10000)) {
      atomic_fetch_sub(&local_held, held);
      log_warn("own probes: %d of %d not made (origin %lld: %s): no verdict on them this round; "
               "%llu such probes since the last such line",
               local, nt, (long long)items[map[first_local]].origin_id, r[first_local].error,
               (unsigned long long)held);
    }
  }
  rc = 0;
out:
  free(t);
  free(r);
  free(map);
  return rc;
}

/* ---- a round ---- */

static int64_t tick_ms(const struct prober_env *env) {
  int64_t t = env->probe_interval_ms;
  if (env->suspect_interval_ms > 0 && env->suspect_interval_ms < t) t = env->suspect_interval_ms;
  return t > 0 ? t : 1;
}

/* Sites due this little after a round's start are taken into it: half the shortest interval
   in play (the global tick or the smallest own interval_ms). */
static int64_t prober_due_slack_ms(const struct prober_env *env) {
  int64_t t = tick_ms(env), due = 0, min_own = 0;
  if (store_health_own_interval_due(env->store, &due, &min_own) == 1 && min_own > 0 && min_own < t)
    t = min_own;
  return t / 2;
}

static void count_metrics(struct prober *p, const struct item *items, int n,
                          struct prober_stats *st) {
  for (int i = 0; i < n; i++) {
    const struct engine_verdict *v = &items[i].v;
    char labels[64];
    if (v->verdict == VERDICT_NONE) continue;
    if (v->source == SOURCE_NODES)
      st->by_nodes++;
    else if (v->source == SOURCE_CHECKPOINTS)
      st->by_checkpoints++;
    else
      st->by_control++;
    if (v->verdict == VERDICT_FAILURE) st->failures++;
    snprintf(labels, sizeof labels, "source=\"%s\",result=\"%s\"",
             health_source_to_string(v->source), health_verdict_to_string(v->verdict));
    metrics_add(p->env.metrics, "cdnca_probes_total", labels, 1);
  }
}

/* Group the items (already ordered by site) into engine rounds and store them. */
static int store_round(struct prober *p, int64_t round_id, int64_t started, struct item *items,
                       int n) {
  struct engine_site_round *sr = NULL;
  struct engine_verdict *vs = NULL;
  int ns = 0, rc = -1;
  if (n > 0) {
    sr = calloc((size_t)n, sizeof *sr);
    vs = calloc((size_t)n, sizeof *vs);
    if (!sr || !vs) goto out;
  }
  for (int i = 0; i < n; i++) {
    vs[i] = items[i].v;
    vs[i].origin_id = items[i].origin_id;
    vs[i].votes = items[i].votes;
    vs[i].n_votes = items[i].n_votes;
    if (ns == 0 || sr[ns - 1].site_id != items[i].site_id) {
      sr[ns].site_id = items[i].site_id;
      sr[ns].v = &vs[i];
      ns++;
    }
    sr[ns - 1].n++;
  }
  rc = engine_apply_round(p->env.engine, round_id, started, clock_wall_ms(), sr, ns);
out:
  free(sr);
  free(vs);
  return rc;
}

/* The round's shadow verdicts (items[n..n + ns), each beside its real item) and skipped sites to
   the engine's shadow state; the shadow sites stored (-1 when that failed: logged). */
static int store_shadow(struct prober *p, const struct item *items, int n, int ns,
                        const int64_t *skipped, int n_skipped) {
  struct engine_shadow_round *sr = NULL;
  struct engine_shadow_verdict *vs = NULL;
  int nr = 0, rc = -1, sites = 0;
  if (n_skipped > 0)
    metrics_add(p->env.metrics, "cdnca_shadow_probes_skipped_total", "", n_skipped);
  if (ns + n_skipped == 0) return 0;
  sr = calloc((size_t)(ns + n_skipped), sizeof *sr);
  vs = calloc((size_t)(ns ? ns : 1), sizeof *vs);
  if (!sr || !vs) goto out;
  for (int j = 0; j < ns; j++) {
    const struct item *it = &items[n + j];
    vs[j].origin_id = it->origin_id;
    vs[j].shadow = it->v.verdict;
    vs[j].real = it->real >= 0 && it->real < n ? items[it->real].v.verdict : VERDICT_NONE;
    snprintf(vs[j].error, sizeof vs[j].error, "%s", it->v.error);
    if (nr == 0 || sr[nr - 1].site_id != it->site_id) {
      sr[nr].site_id = it->site_id;
      sr[nr].v = &vs[j];
      nr++;
      sites++;
    }
    sr[nr - 1].n++;
  }
  for (int k = 0; k < n_skipped; k++) {
    sr[nr].site_id = skipped[k];
    sr[nr].skipped = 1;
    nr++;
  }
  rc = engine_apply_shadow(p->env.engine, clock_wall_ms(), sr, nr);
out:
  if (rc < 0) log_warn("probe round: the shadow policies' verdicts were not stored");
  free(sr);
  free(vs);
  return rc < 0 ? -1 : sites;
}

int prober_run_once(struct prober *p, struct prober_stats *stp) {
  const struct prober_env *env = &p->env;
  struct prober_stats st;
  int64_t started = clock_wall_ms(), t0 = clock_mono_ms(), round_id;
  int64_t *due = NULL, *online = NULL, nodes[PROBER_VOTE_NODES];
  int n_due = 0, n_nodes = 0, n_online = 0, n = 0, n_sites = 0, rc = -1;
  struct item *items = NULL;
  struct shadow_load sl;

  memset(&st, 0, sizeof st);
  memset(&sl, 0, sizeof sl);
  if (store_health_online_nodes(env->store, started - env->node_online_ms, &online, &n_online) ==
      0) {
    metrics_set(env->metrics, "cdnca_nodes_online", "", n_online);
    /* the voters are drawn afresh each round (docs/design.md#votes-and-verdicts) */
    n_nodes = prober_pick_voters(online, n_online, rng_seed_fresh(), nodes, PROBER_VOTE_NODES);
  }
  free(online);
  if (store_health_due_sites(env->store, started + prober_due_slack_ms(env),
                             (int)(env->probe_batch > 0 ? env->probe_batch : 1), &due,
                             &n_due) != STORE_OK)
    goto out;
  if (n_due == 0) {
    rc = 0;
    goto out;
  }
  /* shadow probes count against the batch like any probe, and are left out first */
  sl.budget = (int)(env->probe_batch > 0 ? env->probe_batch : 1) - n_due;
  if (load_items(p, due, n_due, &items, &n, &n_sites, &sl) < 0) goto out;
  if (sl.n > 0) { /* the shadow items go behind the real ones: one probe run for both */
    struct item *all = realloc(items, (size_t)(n + sl.n) * sizeof *all);
    if (!all) goto out;
    items = all;
    memcpy(items + n, sl.items, (size_t)sl.n * sizeof *items);
    free(sl.items);
    sl.items = NULL;
  }
  st.load_ms = clock_mono_ms() - t0;
  if (n_sites == 0) {
    rc = 0;
    goto out;
  }
  round_id = store_health_next_round_id(env->store);
  if (round_id < p->next_round_id) round_id = p->next_round_id;
  if (env->tasks && round_id >= 1) { /* cluster mode: past an aborted round of another engine */
    int64_t free_id = tasks_next_round_id(env->tasks);
    round_id = free_id < 0 ? -1 : free_id > round_id ? free_id : round_id;
  }
  if (round_id < 1) goto out;
  p->next_round_id = round_id + 1;
  st.round_id = round_id;
  st.sites = n_sites;
  st.origins = n;
  st.nodes = n_nodes;

  if (ask_nodes(p, round_id, started, items, n, nodes, n_nodes) < 0)
    log_warn("probe round %lld: node votes lost; other sources decide", (long long)round_id);
  for (int i = 0; i < n; i++)
    item_tally(&items[i]);
  st.nodes_ms = clock_mono_ms() - t0 - st.load_ms;
  if (p->stop) goto cancelled;
  if (ask_checkpoints(p, items, n, &st.checkpoint_errors) < 0)
    log_warn("probe round %lld: checkpoint votes lost (out of memory)", (long long)round_id);
  st.checkpoints_ms = clock_mono_ms() - t0 - st.load_ms - st.nodes_ms;
  if (st.checkpoint_errors)
    metrics_add(env->metrics, "cdnca_checkpoint_errors_total", "", st.checkpoint_errors);
  if (p->stop) goto cancelled;
  if (probe_direct(p, items, n + sl.n) < 0 && !p->stop) goto out;
  if (p->stop) goto cancelled;
  st.control_ms = clock_mono_ms() - t0 - st.load_ms - st.nodes_ms - st.checkpoints_ms;

  count_metrics(p, items, n, &st);
  if (store_round(p, round_id, started, items, n) < 0) goto out;
  st.shadow_sites = store_shadow(p, items, n, sl.n, sl.skipped, sl.n_skipped);
  st.shadow_skipped = sl.n_skipped;
  st.wall_ms = clock_mono_ms() - t0;
  st.store_ms = st.wall_ms - st.load_ms - st.nodes_ms - st.checkpoints_ms - st.control_ms;
  metrics_add(env->metrics, "cdnca_probe_rounds_total", "", 1);
  metrics_observe(env->metrics, "cdnca_probe_round_seconds", "", (double)st.wall_ms / 1000.0);
  log_debug("probe round %lld: %d sites, %d origins (nodes %d, checkpoints %d, control %d), "
            "%lld ms",
            (long long)round_id, st.sites, st.origins, st.by_nodes, st.by_checkpoints,
            st.by_control, (long long)st.wall_ms);
  rc = 0;
  goto out;
cancelled:
  log_info(
      "probe round %lld cancelled (shutdown or the engine lease lost); its results are dropped",
      (long long)round_id);
  rc = 0;
out:
  if (stp) *stp = st;
  items_free(items, sl.items ? n : n + sl.n);
  items_free(sl.items, sl.n);
  free(sl.skipped);
  free(due);
  return rc;
}

/* ---- the thread ---- */

static int64_t mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int prober_round_due(int64_t now_mono, int64_t next_round_mono, int64_t not_before_mono,
                     int have_own, int64_t own_due_wall, int64_t now_wall) {
  if (now_mono < not_before_mono) return 0;
  if (now_mono >= next_round_mono) return 1;
  return have_own && own_due_wall <= now_wall;
}

int64_t prober_next_wake(int64_t now_mono, int64_t next_round_mono, int64_t not_before_mono,
                         int have_own, int64_t own_due_wall, int64_t now_wall, int64_t recheck_ms) {
  int64_t wake = next_round_mono;
  if (have_own) {
    int64_t own = now_mono + (own_due_wall > now_wall ? own_due_wall - now_wall : 0);
    if (own < wake) wake = own;
  }
  if (now_mono + recheck_ms < wake) wake = now_mono + recheck_ms;
  return wake < not_before_mono ? not_before_mono : wake;
}

/* The round thread: a round when the global tick comes or a site with its own interval is due,
   never two at once (a round runs to its end before the next is considered). */
static void *run(void *arg) {
  struct prober *p = arg;
  int64_t next_round = mono_now(), not_before = 0, last_start = next_round, last_ramp = 0;
  pthread_mutex_lock(&p->mu);
  while (!p->stop) {
    int64_t now = mono_now(), wall = clock_wall_ms(), due = 0, min_own = 0, wake;
    int own;
    if (p->sched_pending) { /* only this thread reads the schedule while it runs */
      p->env.probe_interval_ms = p->sched_interval_ms;
      p->env.engine->probe_interval_ms = p->sched_interval_ms;
      p->env.probe_batch = p->sched_batch;
      p->sched_pending = 0;
      next_round = last_start + tick_ms(&p->env);
      continue;
    }
    if (now - last_ramp >= PROBER_RECHECK_MS) { /* docs/design.md, Failback ramp */
      last_ramp = now;
      pthread_mutex_unlock(&p->mu);
      (void)engine_ramp_tick(p->env.engine, clock_wall_ms());
      (void)engine_drill_tick(p->env.engine, clock_wall_ms()); /* docs/design.md, Drills */
      pthread_mutex_lock(&p->mu);
      if (p->stop) break;
      now = mono_now();
    }
    own = store_health_own_interval_due(p->env.store, &due, &min_own) == 1;
    if (!prober_round_due(now, next_round, not_before, own, due, wall)) {
      struct timespec ts;
      wake = prober_next_wake(now, next_round, not_before, own, due, wall, PROBER_RECHECK_MS);
      clock_mono_timespec(&ts, wake - now);
      pthread_cond_timedwait(&p->cv, &p->mu, &ts);
      continue;
    }
    pthread_mutex_unlock(&p->mu);
    now = last_start = mono_now();
    not_before = now + PROBER_MIN_GAP_MS;
    if (prober_run_once(p, NULL) < 0) {
      log_warn("probe round failed; retrying next round");
      not_before = now + tick_ms(&p->env); /* no fast retries of a failing store */
    }
    next_round = now + tick_ms(&p->env); /* an overrun starts the next round at once */
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

struct prober *prober_new(const struct prober_env *env) {
  struct prober *p = calloc(1, sizeof *p);
  struct probe_opts po;
  if (!p) return NULL;
  p->env = *env;
  pthread_mutex_init(&p->mu, NULL);
  clock_cond_init(&p->cv);
  memset(&po, 0, sizeof po);
  po.user_agent = PROBE_UA_CONTROL;
  po.ca_file = env->probe_ca_file && env->probe_ca_file[0] ? env->probe_ca_file : NULL;
  po.deny = env->deny;
  po.engine = env->probe_curl ? PROBE_ENGINE_EPOLL_CURL : PROBE_ENGINE_EPOLL;
  p->probe = probe_new(&po);
  if (!p->probe) goto fail;
  if (env->checkpoint_url && env->checkpoint_url[0]) {
    p->cp = checkpoint_new(env->checkpoint_url);
    if (!p->cp) goto fail;
  }
  metrics_declare(env->metrics, "cdnca_checkpoint_errors_total", "counter",
                  "checkpoint plugin answers that failed or were garbage");
  metrics_declare(env->metrics, "cdnca_shadow_probes_skipped_total", "counter",
                  "sites whose shadow health policy was not probed in a round (--probe-batch)");
  return p;
fail:
  prober_free(&p);
  return NULL;
}

void prober_set_schedule(struct prober *p, int64_t interval_ms, int64_t batch) {
  pthread_mutex_lock(&p->mu);
  if (p->thr_started) {
    p->sched_interval_ms = interval_ms;
    p->sched_batch = batch;
    p->sched_pending = 1;
    pthread_cond_signal(&p->cv);
  } else {
    p->env.probe_interval_ms = interval_ms;
    p->env.probe_batch = batch;
    if (p->env.engine) p->env.engine->probe_interval_ms = interval_ms;
  }
  pthread_mutex_unlock(&p->mu);
}

int prober_start(struct prober *p) {
  int rc = 0;
  pthread_mutex_lock(&p->mu);
  if (!p->thr_started) {
    p->stop = 0;
    if (pthread_create(&p->thr, NULL, run, p) != 0) {
      log_error("cannot start the probe round thread");
      rc = -1;
    } else {
      p->thr_started = 1;
    }
  }
  pthread_mutex_unlock(&p->mu);
  return rc;
}

void prober_stop(struct prober *p) {
  pthread_t thr;
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  if (!p->thr_started) {
    pthread_mutex_unlock(&p->mu);
    return;
  }
  p->stop = 1;
  thr = p->thr;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  pthread_join(thr, NULL);
  pthread_mutex_lock(&p->mu);
  p->thr_started = 0;
  pthread_mutex_unlock(&p->mu);
}

void prober_free(struct prober **pp) {
  struct prober *p = *pp;
  if (!p) return;
  prober_stop(p);
  checkpoint_free(&p->cp);
  probe_free(&p->probe);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
  *pp = NULL;
}
