/* engine_ramp — the failback ramp's tick: each running ramp goes on, completes or aborts
   (docs/design.md, Failback ramp; see engine.h). */
#include <cjson/cJSON.h>
#include <string.h>

#include "engine.h"
#include "engine_int.h"
#include "log.h"
#include "ramp.h"
#include "store_health.h"
#include "store_sites.h"

/* After a ramp starts, reports this much later count for its skip rule: the nodes have applied
   the ramp by then (they apply a publication within milliseconds of its long-poll answer). */
#define RAMP_SETTLE_MS 1000

/* One ramping site's decision at now, inside tx. 0 or -1. */
static int ramp_site_locked(const struct engine_env *env, struct store_tx *tx, int64_t site_id,
                            int64_t now) {
  struct site_rec s;
  struct site_incident ic;
  struct outlook ol;
  struct ramp_window w;
  struct ramp_policy p;
  char why[160];
  int rc = -1;
  enum store_rc lrc = store_health_site_load_locked(tx, site_id, &s);
  if (lrc != STORE_OK) return lrc == STORE_NOT_FOUND ? 0 : -1;
  memset(&ic, 0, sizeof ic);
  if (!s.ramp.from_level) {
    rc = 0;
    goto out;
  }
  if (engine_inc_load(tx, &s, &ic) < 0) goto out;
  engine_outlook(&s, now, &ol);
  w.requests = s.ramp_requests;
  w.failures = s.ramp_failures;
  /* unhealthy, or left with no enabled origin (a level that cannot take the traffic) */
  w.level_unhealthy = s.ramp.to_level < 1 || s.ramp.to_level > HEALTH_MAX_LEVEL ||
                      ol.view.level[s.ramp.to_level] == HEALTH_UNHEALTHY ||
                      ol.view.level[s.ramp.to_level] == HEALTH_EMPTY;
  /* a report made once the nodes had the ramp (they end their old skips when they apply it) */
  w.level_skipped = store_health_level_skipped_locked(tx, s.id, s.ramp.to_level,
                                                      s.ramp.started_at + RAMP_SETTLE_MS);
  if (w.level_skipped < 0) goto out;
  p = s.failback_ramp;
  if (!p.n_steps) { /* removed mid-ramp: the run goes on with the defaults' abort rule */
    p.max_failure_ratio = 0.05;
    p.min_requests = 50;
  }
  switch (ramp_decide(&p, &s.ramp, &w, now, why, sizeof why)) {
  case RAMP_ABORT: {
    /* the level is held back for failback_hold_ms, at least the ramp's own length, so a level
       that fails its visitors is not ramped to again at once */
    int64_t len = (int64_t)s.ramp.n_steps * s.ramp.step_ms;
    int64_t hold = now + (s.failback_hold_ms > len ? s.failback_hold_ms : len);
    cJSON *j = engine_ramp_aborted_json(&s.ramp, w.requests, w.failures, why, hold);
    if (!j) goto out;
    if (store_health_site_ramp_locked(tx, s.id, NULL, hold, "ramp_aborted") < 0) {
      cJSON_Delete(j);
      goto out;
    }
    memset(&s.ramp, 0, sizeof s.ramp);
    s.ramp_hold_until = hold;
    if (engine_add_event(env, tx, &s, &ic, EVENT_RAMP_ABORTED, ENGINE_TITLE_RAMP_ABORTED, j) < 0)
      goto out;
    break;
  }
  case RAMP_COMPLETE:
    if (engine_do_switch(env, tx, &s, &ic, s.ramp.to_level, HEALTH_REASON_AUTO_FAILBACK, why,
                         NULL) < 0)
      goto out;
    /* the incident and fleet flags of the level now served */
    if (engine_evaluate_locked(env, tx, &s, &ic, now, NULL) < 0) goto out;
    break;
  case RAMP_GO_ON:
    if (w.requests >= p.min_requests && store_health_ramp_window_locked(tx, s.id) < 0) goto out;
    break;
  }
  rc = 0;
out:
  site_rec_fini(&s);
  return rc;
}

int engine_ramp_tick(const struct engine_env *env, int64_t now) {
  int64_t ids[256];
  int n = store_health_ramp_sites(env->store, ids, 256);
  if (n < 0) return -1;
  return engine_step_each(env, ids, n, now, ramp_site_locked, "failback ramp of site");
}
