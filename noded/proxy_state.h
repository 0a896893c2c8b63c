/* proxy_state — the proxy's per-(site, origin) table: skip records, pick, resolved addresses.
 * Locking: a read-write lock for the table (written only when a config swaps it in) and one
 * mutex per site stripe for the records, so picks and outcomes of different sites never contend. */
#ifndef CDNCA_PROXY_STATE_H
#define CDNCA_PROXY_STATE_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/socket.h>

#include "buf.h"
#include "resolve.h"
#include "sitecfg.h"
#include "targets.h"

struct proxy_state;

/* A chosen origin: index in site->origins, its level, whether it came from a level after the
 * current one (backup) or was a fail open, and its resolved address. */
struct proxy_pick {
  int index;
  int fail_open;
  int level;
  int backup;
  int resolved;        /* 0: the address did not resolve (the attempt fails as a connect error) */
  const char *refused; /* the address is a refused target (why, static): never connected to */
  socklen_t salen;
  struct sockaddr_storage sa;
};

/* New empty table (caller frees with proxy_state_free); NULL on OOM. Thread-safe throughout. */
struct proxy_state *proxy_state_new(void);
void proxy_state_free(struct proxy_state **t);

/* Rebuild the table for snapshot s: an origin whose (site id, origin id) entry has the same
 * (address, port, scheme) keeps its skip record and address; others start healthy and are
 * resolved here (getaddrinfo, may block: call from a control thread). Entries of origins no
 * longer published are dropped. 0, or -1 on OOM (the old table stays). */
int proxy_state_sync(struct proxy_state *t, const struct sitecfg_set *s);

/* Pick an origin not in tried (bit i = origins[i]) with skip_pick_levels: the current level
 * first, then (node_retry.backup_levels) the following levels in order. 0 and *out, or -1 when
 * none is left. */
int proxy_state_pick(struct proxy_state *t, const struct sitecfg_site *site, uint64_t tried,
                     int64_t now, struct proxy_pick *out);

/* The same for a request a failback ramp sent to start_level (an earlier level than the current
 * one, docs/design.md, Failback ramp): start_level's origins first, then the current level's and
 * (backup_levels) the following ones; the levels in between are not this request's. backup is
 * set for a level after the current one only. start_level = current_level: proxy_state_pick. */
int proxy_state_pick_from(struct proxy_state *t, const struct sitecfg_site *site, int start_level,
                          uint64_t tried, int64_t now, struct proxy_pick *out);

/* Which level a new request of site starts on: with a running ramp, its to_level for share(t)
 * percent of requests (draw: a uniform number in [0, 100)), else the current level. wall_ms and
 * offset_ms as ramp_share takes them. Pure. */
int proxy_state_start_level(const struct sitecfg_site *site, int64_t wall_ms, int64_t offset_ms,
                            int draw);

/* Record an attempt outcome on (site, origin). Returns 1 when it started a skip, else 0. */
int proxy_state_record(struct proxy_state *t, const struct sitecfg_site *site, int origin_index,
                       int64_t now, int failed);

/* Add one answer's latency (ms from the attempt's start to the origin's response head) to
 * (site, origin)'s sum and count, which heartbeats report (docs/design.md, Drills). */
void proxy_state_latency(struct proxy_state *t, const struct sitecfg_site *site, int origin_index,
                         int64_t ms);

/* Feed the node's own probe of origin_id (every site entry with that id) into the skip machine
 * (skip_probe). Returns the number of skips it started. */
int proxy_state_probe(struct proxy_state *t, int64_t origin_id, int64_t now, int ok);

/* Re-resolve the hostname origins due at now (at most a batch; may block on DNS, so not under
 * any caller lock): the address follows DNS, the skip record stays (it is keyed by the address
 * as configured). The next refresh follows the answer's TTL bounded by skip_dns_refresh_ms; a
 * failed lookup keeps the last address and retries after SKIP_DNS_MIN_MS. Returns how many. */
int proxy_state_refresh(struct proxy_state *t, int64_t now);

/* How origin names are resolved (resolve_origin's contract). */
typedef int proxy_resolve_fn(const char *address, int port, int want_ttl,
                             struct resolve_result *out, char *err, size_t errlen);

/* The node's own --deny-targets (list: comma-separated CIDRs; NULL = none), refused besides the
   built-in targets and what controld publishes (sitecfg_set deny_targets, applied by
   proxy_state_sync). 0, or -1 with err naming the bad entry. */
int proxy_state_set_deny(struct proxy_state *t, const char *list, char *err, size_t errlen);

/* Copy the refused destinations in force into *out (for the node's probes). */
void proxy_state_deny_copy(struct proxy_state *t, struct targets *out);

/* Use fn instead of resolve_origin (NULL restores it); before proxy_state_sync, for tests. */
void proxy_state_set_resolver(struct proxy_state *t, proxy_resolve_fn *fn);

/* Start the thread calling proxy_state_refresh every second (stopped by proxy_state_free).
 * 0 or -1. */
int proxy_state_resolver_start(struct proxy_state *t);

/* Give back a half-open trial slot of a pick that will report no outcome. */
void proxy_state_release(struct proxy_state *t, const struct sitecfg_site *site, int origin_index);

/* Observations for the heartbeat: [{"site_id","origin_id","requests","failures","skipped",
 * "backup_picks","fail_open","latency_sum_ms","latency_count"}]
 * (counts since the entry was created), caller frees. NULL on OOM. */
cJSON *proxy_state_observations(struct proxy_state *t, int64_t now);

/* Append the node's skip state in Prometheus text to out: cdnca_node_origins{state} (origins
 * healthy, skipped and half_open, counted over the whole table) and cdnca_node_origin_skipped
 * {site,origin} = 1 for each origin the node does not trust (skipped, or in its half-open
 * trial), for the max_labelled lowest (site, origin) ids only; a trusted origin has no series.
 * One pass under the table lock, no per-origin rendering for healthy ones. 0 or -1 (OOM). */
int proxy_state_skip_metrics(struct proxy_state *t, int64_t now, int max_labelled, struct buf *out);

/* Per-origin skip state of one site for /status: [{"id","level","address","port","scheme",
 * "state","skipped_for_ms","requests","failures","skips","fail_open","backup_picks","probes",
 * "resolved", "refused_target" when its address is refused, and for names "dns_refresh_in_ms",
 * "dns_readdressed"}]; caller frees. */
cJSON *proxy_state_site_json(struct proxy_state *t, const struct sitecfg_site *site, int64_t now);

#endif
