/* sitemetrics — fleet and per-site gauges rendered from store_fleet's walks, cached. */
#include "sitemetrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "log.h"
#include "store.h"
#include "store_fleet.h"
#include "store_incidents.h"
#include "store_notify.h"

struct sitemetrics {
  struct store *st;
  int max_sites;
  int64_t node_online_ms;
  pthread_mutex_t mu; /* guards the cache below; held while rebuilding (one rebuild at a time) */
  struct buf block;
  int64_t built_at, built_gen;
};

/* The per-site families, each collected in its own buffer (a family's samples must be together). */
enum { F_LEVEL, F_ON_BACKUP, F_ALL_DOWN, F_FAILBACK, F__N };
static const struct {
  const char *name, *help;
} site_families[F__N] = {
    [F_LEVEL] = {"cdnca_site_current_level", "the level the site serves from"},
    [F_ON_BACKUP] = {"cdnca_site_on_backup", "1 when the site is not on its first non-empty level"},
    [F_ALL_DOWN] = {"cdnca_site_all_levels_unhealthy",
                    "1 when every level of the site is unhealthy"},
    [F_FAILBACK] = {"cdnca_site_failback_available",
                    "1 when an earlier level is healthy and waits for a (manual) failback"},
};

struct walk {
  struct buf fam[F__N];
  int rc;
};

int sitemetrics_stale(int64_t built_at, int64_t built_gen, int64_t now, int64_t gen) {
  if (built_at < 0) return 1;
  if (now - built_at >= SITEMETRICS_MAX_AGE_MS) return 1;
  return gen != built_gen && now - built_at >= SITEMETRICS_MIN_AGE_MS;
}

int sitemetrics_health_value(const char *health) {
  if (strcmp(health, "healthy") == 0) return 1;
  if (strcmp(health, "unhealthy") == 0) return 2;
  return 0;
}

static int on_site(void *arg, const struct fleet_site_row *r) {
  struct walk *w = arg;
  long long id = (long long)r->id;
  if (buf_printf(&w->fam[F_LEVEL], "cdnca_site_current_level{site=\"%lld\"} %d\n", id,
                 r->current_level) < 0 ||
      buf_printf(&w->fam[F_ON_BACKUP], "cdnca_site_on_backup{site=\"%lld\"} %d\n", id,
                 (r->state & FLEET_ON_BACKUP) != 0) < 0 ||
      buf_printf(&w->fam[F_ALL_DOWN], "cdnca_site_all_levels_unhealthy{site=\"%lld\"} %d\n", id,
                 (r->state & FLEET_ALL_DOWN) != 0) < 0 ||
      buf_printf(&w->fam[F_FAILBACK], "cdnca_site_failback_available{site=\"%lld\"} %d\n", id,
                 (r->state & FLEET_FAILBACK_AVAILABLE) != 0) < 0) {
    w->rc = -1;
    return 1;
  }
  return 0;
}

static int on_origin(void *arg, const struct fleet_origin_row *r) {
  struct walk *w = arg;
  if (!r->enabled) return 0; /* not probed: no health to report */
  if (buf_printf(&w->fam[0], "cdnca_origin_health{site=\"%lld\",origin=\"%lld\",level=\"%d\"} %d\n",
                 (long long)r->site_id, (long long)r->origin_id, r->level,
                 sitemetrics_health_value(r->health)) < 0) {
    w->rc = -1;
    return 1;
  }
  return 0;
}

/* Render the whole block into out. 0 or -1. */
static int build(struct sitemetrics *sm, int64_t now_wall, struct buf *out) {
  struct fleet_summary fs;
  struct walk w;
  int64_t backlog = 0, incidents = 0;
  int ret = -1;
  memset(&w, 0, sizeof w);
  for (int i = 0; i < F__N; i++)
    buf_init(&w.fam[i], 0);
  if (store_fleet_summary(sm->st, now_wall - sm->node_online_ms, &fs) < 0 ||
      store_delivery_backlog(sm->st, &backlog) < 0 ||
      (incidents = store_incident_open_count(sm->st)) < 0)
    goto out;
  if (buf_printf(out,
                 "# HELP cdnca_sites Sites by fleet state: on_primary + on_backup = every site; "
                 "the other states are flags across them.\n"
                 "# TYPE cdnca_sites gauge\n"
                 "cdnca_sites{state=\"on_primary\"} %lld\n",
                 (long long)fs.on_primary) < 0)
    goto out;
  for (int i = 0; i < FLEET_NSTATES; i++) {
    unsigned f = fleet_states[i].flag;
    int64_t v = f == FLEET_ON_BACKUP            ? fs.on_backup
                : f == FLEET_ALL_DOWN           ? fs.all_down
                : f == FLEET_FAILBACK_AVAILABLE ? fs.failback_available
                : f == FLEET_PAUSED             ? fs.paused
                                                : 0;
    if (buf_printf(out, "cdnca_sites{state=\"%s\"} %lld\n", fleet_states[i].summary, (long long)v) <
        0)
      goto out;
  }
  if (buf_printf(
          out,
          "# HELP cdnca_nodes_lagging online nodes whose config is behind the last publication\n"
          "# TYPE cdnca_nodes_lagging gauge\n"
          "cdnca_nodes_lagging %lld\n"
          "# HELP cdnca_webhook_backlog webhook deliveries waiting in the outbox (new or "
          "retrying)\n"
          "# TYPE cdnca_webhook_backlog gauge\n"
          "cdnca_webhook_backlog %lld\n"
          "# HELP cdnca_incidents_open incidents open or mitigated\n"
          "# TYPE cdnca_incidents_open gauge\n"
          "cdnca_incidents_open %lld\n",
          (long long)fs.nodes_lagging, (long long)backlog, (long long)incidents) < 0)
    goto out;
  if (sm->max_sites > 0 && store_fleet_each_site(sm->st, sm->max_sites, on_site, &w) < 0) goto out;
  if (w.rc < 0) goto out;
  for (int i = 0; i < F__N; i++) {
    if (buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", site_families[i].name,
                   site_families[i].help, site_families[i].name) < 0 ||
        (w.fam[i].len && buf_append(out, w.fam[i].data, w.fam[i].len) < 0))
      goto out;
    buf_fini(&w.fam[i]);
    buf_init(&w.fam[i], 0);
  }
  if (sm->max_sites > 0 && store_fleet_each_origin(sm->st, sm->max_sites, on_origin, &w) < 0)
    goto out;
  if (w.rc < 0) goto out;
  if (buf_puts(out, "# HELP cdnca_origin_health origin health: 0 unknown, 1 healthy, 2 unhealthy\n"
                    "# TYPE cdnca_origin_health gauge\n") < 0 ||
      (w.fam[0].len && buf_append(out, w.fam[0].data, w.fam[0].len) < 0))
    goto out;
  ret = 0;
out:
  for (int i = 0; i < F__N; i++)
    buf_fini(&w.fam[i]);
  return ret;
}

struct sitemetrics *sitemetrics_new(struct store *st, int max_sites, int64_t node_online_ms) {
  struct sitemetrics *sm = calloc(1, sizeof *sm);
  if (!sm) return NULL;
  sm->st = st;
  sm->max_sites = max_sites;
  sm->node_online_ms = node_online_ms;
  sm->built_at = -1;
  pthread_mutex_init(&sm->mu, NULL);
  buf_init(&sm->block, 0);
  return sm;
}

void sitemetrics_free(struct sitemetrics **smp) {
  struct sitemetrics *sm = *smp;
  if (!sm) return;
  buf_fini(&sm->block);
  pthread_mutex_destroy(&sm->mu);
  free(sm);
  *smp = NULL;
}

int sitemetrics_render(struct sitemetrics *sm, int64_t now_mono, int64_t now_wall,
                       struct buf *out) {
  int rc = 0;
  int64_t gen = store_generation(sm->st);
  pthread_mutex_lock(&sm->mu);
  if (sitemetrics_stale(sm->built_at, sm->built_gen, now_mono, gen)) {
    struct buf fresh;
    buf_init(&fresh, 0);
    if (build(sm, now_wall, &fresh) == 0) {
      buf_fini(&sm->block);
      sm->block = fresh;
      sm->built_at = now_mono;
      sm->built_gen = gen;
    } else {
      buf_fini(&fresh);
      if (sm->built_at < 0)
        rc = -1; /* nothing to fall back on */
      else
        log_warn("per-site metrics: rebuild failed; serving the block from %lld ms ago",
                 (long long)(now_mono - sm->built_at));
    }
  }
  if (rc == 0 && sm->block.len && buf_append(out, sm->block.data, sm->block.len) < 0) rc = -1;
  pthread_mutex_unlock(&sm->mu);
  return rc;
}
