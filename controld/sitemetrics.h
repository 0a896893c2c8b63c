/* sitemetrics — controld's fleet and per-site gauges for GET /metrics (docs/design.md#metrics),
   rendered from the fleet state columns the engine keeps (store_fleet) into a cached text block: no
   status card is computed per scrape, and only the first max_sites sites by id carry labels. */
#ifndef CDNCA_SITEMETRICS_H
#define CDNCA_SITEMETRICS_H

#include <stdint.h>

#include "buf.h"

struct store;
struct sitemetrics;

/* A block older than this is rebuilt even when the database did not change (node online-ness
   is a matter of time), and one is never rebuilt more often than SITEMETRICS_MIN_AGE_MS. */
#define SITEMETRICS_MAX_AGE_MS 5000
#define SITEMETRICS_MIN_AGE_MS 1000

/* New renderer over st: labels for the first max_sites sites by id (0 = none), nodes online when
   seen within node_online_ms. NULL on OOM. Free with sitemetrics_free (NULLs *sm). */
struct sitemetrics *sitemetrics_new(struct store *st, int max_sites, int64_t node_online_ms);
void sitemetrics_free(struct sitemetrics **sm);

/* Append the block (cdnca_sites{state}, cdnca_nodes_lagging, cdnca_webhook_backlog,
   cdnca_site_current_level / _on_backup / _all_levels_unhealthy / _failback_available{site},
   cdnca_origin_health{site,origin,level}) to out, rebuilding it first when sitemetrics_stale says
   so. now_mono paces the cache, now_wall is the clock of node last-seen times. Thread-safe. 0 or
   -1 (storage error or OOM: logged, out unchanged). */
int sitemetrics_render(struct sitemetrics *sm, int64_t now_mono, int64_t now_wall, struct buf *out);

/* Whether a block built at built_at (mono ms, < 0 = never) for store generation built_gen must be
   rebuilt at now for generation gen. Pure. */
int sitemetrics_stale(int64_t built_at, int64_t built_gen, int64_t now, int64_t gen);

/* The cdnca_origin_health value of a stored health word: 1 healthy, 2 unhealthy, else 0. Pure. */
int sitemetrics_health_value(const char *health);

#endif
