/* engine_drill — failover drills at work: the tick that starts, watches and ends them, and the
   operator's create and cancel (docs/design.md, Drills; see engine.h). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "engine.h"
#include "engine_int.h"
#include "json.h"
#include "metrics.h"
#include "store_drills.h"
#include "store_health.h"
#include "store_sites.h"

#define TITLE_DRILL_STARTED "Failover drill started"
#define TITLE_DRILL_FINISHED "Failover drill finished"

/* The first level with an enabled origin of s (0: none). */
static int first_enabled_level(const struct site_rec *s) {
  int first = 0;
  for (int i = 0; i < s->n_origins; i++)
    if (s->origins[i].enabled && (!first || s->origins[i].level < first))
      first = s->origins[i].level;
  return first;
}

/* What drill d sees of site s at now (ic: its incident, loaded). */
static void drill_observe(const struct site_rec *s, const struct site_incident *ic,
                          const struct drill_rec *d, int64_t now, struct drill_obs *o) {
  struct outlook ol;
  enum health_state t;
  engine_outlook(s, now, &ol);
  memset(o, 0, sizeof *o);
  o->site.current_level = s->current_level;
  o->site.first_level = first_enabled_level(s);
  o->site.current_healthy = ol.hc_active && s->current_level >= 1 &&
                            s->current_level <= HEALTH_MAX_LEVEL &&
                            ol.view.level[s->current_level] == HEALTH_HEALTHY;
  t = d->to_level >= 1 && d->to_level <= HEALTH_MAX_LEVEL ? ol.view.level[d->to_level]
                                                          : HEALTH_EMPTY;
  /* a start needs the level healthy; a running drill aborts once it is unhealthy or empty */
  if (d->state == DRILL_RUNNING)
    o->site.target_healthy = t != HEALTH_UNHEALTHY && t != HEALTH_EMPTY;
  else
    o->site.target_healthy = ol.hc_active && t == HEALTH_HEALTHY;
  o->site.incident_open = engine_inc_on(ic);
  o->site.drill_running = s->drill_id && s->drill_id != d->id;
  o->requests = d->window_requests;
  o->failures = d->window_failures;
}

/* The drill.* event of d on s. 0 or -1. */
static int drill_event(const struct engine_env *env, struct store_tx *tx, const struct site_rec *s,
                       struct site_incident *ic, const struct drill_rec *d, enum event_type type) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return -1;
  json_add_i64(j, "drill_id", d->id);
  cJSON_AddNumberToObject(j, "from_level", d->from_level);
  cJSON_AddNumberToObject(j, "to_level", d->to_level);
  json_add_i64(j, "duration_ms", d->duration_ms);
  if (d->state == DRILL_FINISHED) {
    cJSON_AddStringToObject(j, "result", drill_result_names[d->result]);
    cJSON_AddStringToObject(j, "why", d->why);
    json_add_i64(j, "requests", d->requests);
    json_add_i64(j, "failures", d->failures);
  }
  if (d->created_by[0]) cJSON_AddStringToObject(j, "by", d->created_by);
  return engine_add_event(env, tx, s, ic, type,
                          d->state == DRILL_FINISHED ? TITLE_DRILL_FINISHED : TITLE_DRILL_STARTED,
                          j);
}

/* Finish d with result (why in words) at now; s (NULL: the site is gone) drops it as its running
   drill, and a recurring drill schedules the next. 0 or -1. */
static int drill_finish(const struct engine_env *env, struct store_tx *tx, struct site_rec *s,
                        struct site_incident *ic, struct drill_rec *d, enum drill_result result,
                        const char *why, int64_t now) {
  char labels[48];
  int64_t next = s ? drill_next_start(d, now) : 0;
  d->state = DRILL_FINISHED;
  d->result = result;
  snprintf(d->why, sizeof d->why, "%s", why);
  d->finished_at = now;
  if (next) {
    struct drill_rec n = *d;
    n.id = n.next_id = 0;
    n.state = DRILL_SCHEDULED;
    n.result = DRILL_RESULT_NONE;
    n.why[0] = '\0';
    n.start_at = next;
    n.created_at = now;
    n.started_at = n.finished_at = 0;
    n.from_level = 0;
    n.requests = n.failures = n.window_requests = n.window_failures = 0;
    if (store_drill_insert_locked(tx, &n) < 0) return -1;
    d->next_id = n.id;
  }
  if (store_drill_save_locked(tx, d) < 0) return -1;
  if (s && s->drill_id == d->id) {
    if (store_drill_site_locked(tx, s->id, 0) < 0) return -1;
    s->drill_id = 0;
  }
  snprintf(labels, sizeof labels, "result=\"%s\"", drill_result_names[result]);
  metrics_add(env->metrics, "cdnca_drills_total", labels, 1);
  return s ? drill_event(env, tx, s, ic, d, EVENT_DRILL_FINISHED) : 0;
}

/* The end of a running drill d on s: back to its first level when the site is still on the
   drill's (switch_back), then the engine's rules. 0 or -1. */
static int drill_end(const struct engine_env *env, struct store_tx *tx, struct site_rec *s,
                     struct site_incident *ic, struct drill_rec *d, enum drill_result result,
                     const char *why, int switch_back, int64_t now) {
  if (switch_back && s->current_level == d->to_level && d->from_level > 0 &&
      d->from_level != s->current_level &&
      engine_do_switch(env, tx, s, ic, d->from_level, HEALTH_REASON_DRILL, why, NULL) < 0)
    return -1;
  if (drill_finish(env, tx, s, ic, d, result, why, now) < 0) return -1;
  /* the incident, the flags and the fleet state of the level now served */
  return engine_evaluate_locked(env, tx, s, ic, now, NULL);
}

/* One decision on drill d (loaded) at now inside tx. 0 or -1. */
static int drill_step_locked(const struct engine_env *env, struct store_tx *tx, struct drill_rec *d,
                             int64_t now) {
  struct site_rec s;
  struct site_incident ic;
  struct drill_obs o;
  char why[256];
  int rc = -1;
  enum store_rc lrc;
  if (d->state == DRILL_FINISHED) return 0;
  lrc = store_health_site_load_locked(tx, d->site_id, &s);
  if (lrc == STORE_NOT_FOUND)
    return drill_finish(env, tx, NULL, NULL, d, DRILL_CANCELLED, "the site was deleted", now);
  if (lrc != STORE_OK) return -1;
  memset(&ic, 0, sizeof ic);
  if (engine_inc_load(tx, &s, &ic) < 0) goto out;
  drill_observe(&s, &ic, d, now, &o);
  switch (drill_decide(d, &o, now, why, sizeof why)) {
  case DRILL_WAIT:
    break;
  case DRILL_FAIL:
    if (drill_finish(env, tx, &s, &ic, d, DRILL_FAILED, why, now) < 0) goto out;
    break;
  case DRILL_START: {
    /* the site's one running drill is claimed in the row: two starts at once on two replicas
       both read no drill, and the second's claim then finds the first's */
    int claimed = store_drill_site_claim_locked(tx, s.id, d->id);
    if (claimed < 0) goto out;
    if (!claimed) {
      if (drill_finish(env, tx, &s, &ic, d, DRILL_FAILED, "drill_running", now) < 0) goto out;
      break;
    }
    d->from_level = s.current_level;
    d->state = DRILL_RUNNING;
    d->started_at = now;
    d->window_requests = d->window_failures = 0;
    if (store_drill_save_locked(tx, d) < 0) goto out;
    s.drill_id = d->id;
    if (engine_do_switch(env, tx, &s, &ic, d->to_level, HEALTH_REASON_DRILL, why,
                         d->created_by[0] ? d->created_by : NULL) < 0 ||
        drill_event(env, tx, &s, &ic, d, EVENT_DRILL_STARTED) < 0 ||
        engine_evaluate_locked(env, tx, &s, &ic, now, NULL) < 0)
      goto out;
    break;
  }
  case DRILL_GO_ON:
    if (d->window_requests >= d->min_requests) { /* a new window */
      d->window_requests = d->window_failures = 0;
      if (store_drill_save_locked(tx, d) < 0) goto out;
    }
    break;
  case DRILL_ABORT:
    if (drill_end(env, tx, &s, &ic, d, DRILL_ABORTED, why, 1, now) < 0) goto out;
    break;
  case DRILL_PASS:
    if (drill_end(env, tx, &s, &ic, d, DRILL_PASSED, why, 1, now) < 0) goto out;
    break;
  case DRILL_CANCEL:
    /* the engine's rules take over: no switch back */
    if (drill_end(env, tx, &s, &ic, d, DRILL_CANCELLED, why, 0, now) < 0) goto out;
    break;
  }
  rc = 0;
out:
  site_rec_fini(&s);
  return rc;
}

/* drill_step_locked on drill id as stored (gone: nothing to do). 0 or -1. */
static int drill_step_id_locked(const struct engine_env *env, struct store_tx *tx, int64_t id,
                                int64_t now) {
  struct drill_rec d;
  enum store_rc rc = store_drill_get_locked(tx, id, &d);
  if (rc == STORE_NOT_FOUND) return 0;
  return rc == STORE_OK ? drill_step_locked(env, tx, &d, now) : -1;
}

int engine_drill_tick(const struct engine_env *env, int64_t now) {
  int64_t ids[256];
  int n = store_drill_due(env->store, now, ids, 256);
  if (n < 0) return -1;
  return engine_step_each(env, ids, n, now, drill_step_id_locked, "drill");
}

enum engine_drill_rc engine_drill_create_locked(const struct engine_env *env, struct store_tx *tx,
                                                int64_t site_id, struct drill_rec *d,
                                                const char *by, struct field_err *err,
                                                const char **reason) {
  struct site_rec s;
  struct site_incident ic;
  struct drill_obs o;
  int levels[SITE_MAX_ORIGINS], nl = 0, n_sched;
  enum engine_drill_rc ret = ENGINE_DRILL_ERROR;
  int64_t now = clock_wall_ms();
  enum store_rc rc = store_health_site_load_locked(tx, site_id, &s);
  if (rc != STORE_OK) return rc == STORE_NOT_FOUND ? ENGINE_DRILL_NOT_FOUND : ENGINE_DRILL_ERROR;
  for (int i = 0; i < s.n_origins && nl < SITE_MAX_ORIGINS; i++)
    if (s.origins[i].enabled) levels[nl++] = s.origins[i].level;
  if (drill_check_level(d->to_level, levels, nl, err) < 0) {
    ret = ENGINE_DRILL_INVALID;
    goto out;
  }
  /* a bounded queue per site: a create beyond it stores nothing */
  if ((n_sched = store_drill_scheduled_count_locked(tx, site_id)) < 0) goto out;
  if (n_sched >= DRILL_SCHEDULED_MAX) {
    *reason = "too_many_drills";
    ret = ENGINE_DRILL_CONFLICT;
    goto out;
  }
  memset(&ic, 0, sizeof ic);
  if (engine_inc_load(tx, &s, &ic) < 0) goto out;
  d->site_id = site_id;
  snprintf(d->created_by, sizeof d->created_by, "%s", by ? by : "");
  drill_observe(&s, &ic, d, now, &o);
  if ((*reason = drill_precondition(&o.site)) != NULL) {
    ret = ENGINE_DRILL_CONFLICT;
    goto out;
  }
  if (store_drill_insert_locked(tx, d) < 0) goto out;
  site_rec_fini(&s);
  /* one that starts now starts in this transaction; one that lost the site to a concurrent
     start is refused as any second drill is (the transaction is rolled back) */
  if (d->start_at <= now && drill_step_locked(env, tx, d, now) < 0) return ENGINE_DRILL_ERROR;
  if (d->state == DRILL_FINISHED && d->result == DRILL_FAILED &&
      strcmp(d->why, "drill_running") == 0) {
    *reason = "drill_running";
    return ENGINE_DRILL_CONFLICT;
  }
  return ENGINE_DRILL_OK;
out:
  site_rec_fini(&s);
  return ret;
}

enum engine_drill_rc engine_drill_cancel_locked(const struct engine_env *env, struct store_tx *tx,
                                                int64_t id, const char *by, struct drill_rec *d,
                                                const char **reason) {
  struct site_rec s;
  struct site_incident ic;
  char why[192];
  int64_t now = clock_wall_ms();
  enum store_rc rc = store_drill_get_locked(tx, id, d);
  int ok;
  if (rc != STORE_OK) return rc == STORE_NOT_FOUND ? ENGINE_DRILL_NOT_FOUND : ENGINE_DRILL_ERROR;
  if (d->state == DRILL_FINISHED) {
    *reason = "drill_finished";
    return ENGINE_DRILL_CONFLICT;
  }
  snprintf(why, sizeof why, "cancelled by %s", by && *by ? by : "the operator");
  /* a cancelled recurring drill stops repeating */
  d->every_ms = 0;
  rc = store_health_site_load_locked(tx, d->site_id, &s);
  if (rc == STORE_NOT_FOUND)
    return drill_finish(env, tx, NULL, NULL, d, DRILL_CANCELLED, why, now) < 0 ? ENGINE_DRILL_ERROR
                                                                               : ENGINE_DRILL_OK;
  if (rc != STORE_OK) return ENGINE_DRILL_ERROR;
  memset(&ic, 0, sizeof ic);
  if (d->state == DRILL_RUNNING)
    ok = engine_inc_load(tx, &s, &ic) == 0 &&
         drill_end(env, tx, &s, &ic, d, DRILL_CANCELLED, why, 1, now) == 0;
  else
    ok = drill_finish(env, tx, &s, &ic, d, DRILL_CANCELLED, why, now) == 0;
  site_rec_fini(&s);
  return ok ? ENGINE_DRILL_OK : ENGINE_DRILL_ERROR;
}
