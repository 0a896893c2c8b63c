/* engine — verdicts to origin states, level decisions and their consequences (see engine.h). */
#include "engine.h"
#include "engine_int.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "fleet.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "model.h"
#include "store_drills.h"
#include "store_events.h"
#include "store_fleet.h"
#include "store_health.h"
#include "store_incidents.h"
#include "store_shadow.h"
#include "store_sites.h"

#define TITLE_AUTO "Origin level switched automatically"
#define TITLE_MANUAL "Origin level switched manually"
#define TITLE_FAILBACK "Origin recovered (manual failback available)"
#define TITLE_ALL_DOWN "All origin levels are unhealthy"
#define TITLE_RECOVERED "An origin level is healthy again"
#define TITLE_RAMP "Failback ramp started"
#define TITLE_DRILL_SWITCH "Origin level switched for a failover drill"

/* ---- tally ---- */

/* "node 3: status 503", "checkpoint fra1: timeout", or the control probe's error as is. */
static void vote_error(const struct engine_vote *v, char *out, size_t cap) {
  const char *e = v->error[0] ? v->error : "failed";
  if (v->source == SOURCE_NODES)
    snprintf(out, cap, "node %lld: %s", (long long)v->node_id, e);
  else if (v->source == SOURCE_CHECKPOINTS)
    snprintf(out, cap, "checkpoint %s: %s", v->checkpoint, e);
  else
    snprintf(out, cap, "%s", e);
}

/* The first failing vote whose source is in the mask (bit per enum health_source), or NULL. */
static const struct engine_vote *first_failure(const struct engine_vote *votes, int n,
                                               unsigned mask) {
  for (int i = 0; i < n; i++)
    if (!votes[i].ok && (mask & (1u << votes[i].source))) return &votes[i];
  return NULL;
}

void engine_tally(const struct engine_vote *votes, int n, struct engine_verdict *out) {
  int ns = 0, nf = 0, cs = 0, cf = 0, ctl = -1;
  unsigned mask = 0;
  const struct engine_vote *bad;
  out->verdict = VERDICT_NONE;
  out->source = SOURCE_CONTROL;
  out->votes_success = out->votes_failure = 0;
  out->error[0] = '\0';
  for (int i = 0; i < n; i++) {
    switch (votes[i].source) {
    case SOURCE_NODES:
      *(votes[i].ok ? &ns : &nf) += 1;
      break;
    case SOURCE_CHECKPOINTS:
      *(votes[i].ok ? &cs : &cf) += 1;
      break;
    case SOURCE_CONTROL:
    default:
      if (ctl < 0) ctl = i;
      break;
    }
  }
  out->verdict = health_tally(ns, nf);
  if (out->verdict != VERDICT_NONE) {
    out->source = SOURCE_NODES;
    out->votes_success = ns;
    out->votes_failure = nf;
    mask = 1u << SOURCE_NODES;
  } else if (cs + cf > 0 && (out->verdict = health_tally(ns + cs, nf + cf)) != VERDICT_NONE) {
    out->source = SOURCE_CHECKPOINTS;
    out->votes_success = ns + cs;
    out->votes_failure = nf + cf;
    mask = (1u << SOURCE_NODES) | (1u << SOURCE_CHECKPOINTS);
  } else if (ctl >= 0) {
    out->verdict = votes[ctl].ok ? VERDICT_SUCCESS : VERDICT_FAILURE;
    out->source = SOURCE_CONTROL;
    out->votes_success = votes[ctl].ok ? 1 : 0;
    out->votes_failure = votes[ctl].ok ? 0 : 1;
    if (!votes[ctl].ok) vote_error(&votes[ctl], out->error, sizeof out->error);
    return;
  }
  if (out->verdict == VERDICT_FAILURE && (bad = first_failure(votes, n, mask)) != NULL)
    vote_error(bad, out->error, sizeof out->error);
}

/* ---- pure helpers ---- */

static int clamp_int(int64_t v) {
  if (v > INT_MAX) return INT_MAX;
  if (v < INT_MIN) return INT_MIN;
  return (int)v;
}

static enum health_state origin_state(const struct origin_rec *o) {
  return o->health == HEALTH_EMPTY ? HEALTH_UNKNOWN : o->health; /* EMPTY is a level's */
}

static void origin_machine(const struct origin_rec *o, struct health_origin *m) {
  memset(m, 0, sizeof *m);
  m->state = origin_state(o);
  m->success_streak = o->success_streak;
  m->failure_streak = o->failure_streak;
  m->changed_at_ms = o->health_changed_at;
}

static int hc_active(const struct site_rec *s) {
  const char *reason = NULL;
  return strcmp(model_hc_state(s, &reason), "active") == 0;
}

void engine_outlook(const struct site_rec *s, int64_t now, struct outlook *out) {
  struct health_level_origin lo[SITE_MAX_ORIGINS];
  int n = 0;
  enum health_failback fb = HEALTH_FAILBACK_AUTO;
  const char *reason = NULL, *hc = model_hc_state(s, &reason);
  memset(out, 0, sizeof *out);
  out->hc_active = strcmp(hc, "active") == 0;
  out->hc_paused = strcmp(hc, "paused") == 0;
  for (int i = 0; i < s->n_origins && n < SITE_MAX_ORIGINS; i++) {
    const struct origin_rec *o = &s->origins[i];
    lo[n].level = o->level;
    lo[n].enabled = o->enabled;
    lo[n].state = out->hc_active ? origin_state(o) : HEALTH_UNKNOWN;
    lo[n].healthy_since_ms = o->healthy_since > 0 ? o->healthy_since : o->health_changed_at;
    n++;
  }
  health_view_init(&out->view);
  fb = s->failback;
  out->view.current_level = s->current_level;
  /* a level the operator chose by hand is kept: failback waits for the operator, as in manual */
  out->view.failback = s->manual_pin ? HEALTH_FAILBACK_MANUAL : fb;
  out->view.failback_hold_ms = s->failback_hold_ms;
  out->view.all_unhealthy_raised = s->all_unhealthy != 0;
  out->view.failback_notified = s->failback_notified != 0;
  out->view.level_min_healthy = s->hc.level_min_healthy;
  health_view_fill(&out->view, lo, n);
  health_decide(&out->view, now, &out->decision);
}

/* ---- events ---- */

/* ---- incidents (docs/design.md#incidents) ---- */

/* Look the site's latest incident up once. 0 or -1. */
int engine_inc_load(struct store_tx *tx, const struct site_rec *s, struct site_incident *ic) {
  enum store_rc rc;
  if (ic->loaded) return 0;
  rc = store_incident_latest_locked(tx, s->id, &ic->rec);
  if (rc != STORE_OK && rc != STORE_NOT_FOUND) return -1;
  ic->have = rc == STORE_OK;
  ic->loaded = 1;
  return 0;
}

/* 1 when events of s now belong to an incident. */
int engine_inc_on(const struct site_incident *ic) {
  return ic && ic->have && ic->rec.id > 0 && incident_active(&ic->rec);
}

/* Add an event whose data is j (deleted here); while an incident is active (or `force`: the
   incident's own announcement) the event carries incident_id and joins its timeline, with
   votes_json (the votes behind a state change, may be NULL) in the entry. 0 or -1. */
static int add_event_inc(const struct engine_env *env, struct store_tx *tx,
                         const struct site_rec *s, struct site_incident *ic, int force,
                         enum event_type type, const char *title, cJSON *j,
                         const char *votes_json) {
  char *entry = NULL;
  int64_t ev;
  int rc = -1, linked = ic && ic->have && ic->rec.id > 0 && (force || engine_inc_on(ic));
  (void)env;
  if (!j) return -1;
  if (linked) json_add_i64(j, "incident_id", ic->rec.id);
  if ((ev = store_site_event_locked(tx, s->id, s->name, type, title, j)) < 0) goto out;
  if (linked) {
    /* the timeline's entry: the event's data, and the votes behind it */
    cJSON *v = votes_json ? cJSON_Parse(votes_json) : NULL;
    if (v) cJSON_AddItemToObject(j, "votes", v);
    if (!(entry = json_print(j)) ||
        store_incident_entry_locked(tx, &ic->rec, "event", ev, event_type_names[type], title, entry,
                                    clock_wall_ms()) < 0)
      goto out;
    ic->dirty = 1;
  }
  rc = 0;
out:
  cJSON_Delete(j);
  free(entry);
  return rc;
}

int engine_add_event(const struct engine_env *env, struct store_tx *tx, const struct site_rec *s,
                     struct site_incident *ic, enum event_type type, const char *title, cJSON *j) {
  return add_event_inc(env, tx, s, ic, 0, type, title, j, NULL);
}

/* A trigger at now (docs/design.md#incidents): opens, reopens or joins the site's incident. The
   caller writes the triggering event, then inc_announce. Returns the change or -1. */
static int inc_trigger(const struct engine_env *env, struct store_tx *tx, const struct site_rec *s,
                       struct site_incident *ic, enum incident_trigger t, int64_t first_failure,
                       int64_t now) {
  enum incident_change ch;
  if (!ic || env->no_incidents) return INCIDENT_SAME;
  if (engine_inc_load(tx, s, ic) < 0) return -1;
  ch = incident_trigger_at(&ic->rec, ic->have, s->id, s->name, t, s->current_level, first_failure,
                           now, env->incident_quiet_ms);
  if (ch == INCIDENT_OPENED) {
    if (store_incident_insert_locked(tx, &ic->rec) < 0) return -1;
    ic->have = 1;
  } else if (ch == INCIDENT_REOPENED) {
    ic->dirty = 1;
  }
  return (int)ch;
}

/* The incident.* event of a change (and its histogram). 0 or -1. */
static int inc_announce(const struct engine_env *env, struct store_tx *tx, const struct site_rec *s,
                        struct site_incident *ic, int ch) {
  struct incident_figures f;
  enum event_type type;
  const char *title;
  cJSON *j;
  switch (ch) {
  case INCIDENT_OPENED:
  case INCIDENT_REOPENED:
    type = EVENT_INCIDENT_OPENED;
    title = ch == INCIDENT_OPENED ? "Incident opened" : "Incident reopened";
    break;
  case INCIDENT_MITIGATED_AT:
    type = EVENT_INCIDENT_MITIGATED;
    title = "Incident mitigated";
    break;
  case INCIDENT_RESOLVED_AT:
    type = EVENT_INCIDENT_RESOLVED;
    title = "Incident resolved";
    break;
  default:
    return 0;
  }
  incident_figures(&ic->rec, &f);
  j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "state", incident_state_names[ic->rec.state]);
  cJSON_AddStringToObject(j, "trigger", incident_trigger_names[ic->rec.trigger]);
  cJSON_AddNumberToObject(j, "opened_level", ic->rec.opened_level);
  cJSON_AddNumberToObject(j, "current_level", s->current_level);
  if (ch == INCIDENT_REOPENED) cJSON_AddNumberToObject(j, "reopened", ic->rec.reopened);
  if (ch == INCIDENT_OPENED && f.detect_ms >= 0) {
    cJSON_AddNumberToObject(j, "detect_ms", (double)f.detect_ms);
    metrics_observe(env->metrics, "cdnca_incident_detect_seconds", NULL, f.detect_ms / 1000.0);
  }
  if (ch == INCIDENT_MITIGATED_AT && f.mitigate_ms >= 0) {
    cJSON_AddNumberToObject(j, "mitigate_ms", (double)f.mitigate_ms);
    metrics_observe(env->metrics, "cdnca_incident_mitigate_seconds", NULL, f.mitigate_ms / 1000.0);
  }
  if (ch == INCIDENT_RESOLVED_AT && f.resolve_ms >= 0) {
    cJSON_AddNumberToObject(j, "resolve_ms", (double)f.resolve_ms);
    metrics_observe(env->metrics, "cdnca_incident_resolve_seconds", NULL, f.resolve_ms / 1000.0);
  }
  ic->dirty = 1;
  return add_event_inc(env, tx, s, ic, 1, type, title, j, NULL);
}

/* The end of a site's evaluation: an active incident is mitigated, unmitigated or resolved by the
   state the site is left in (ol: its outlook now), and the record is saved when it changed.
   0 or -1. */
static int inc_finish(const struct engine_env *env, struct store_tx *tx, const struct site_rec *s,
                      const struct outlook *ol, struct site_incident *ic, int64_t now) {
  struct incident_view v;
  int64_t failed[SITE_MAX_ORIGINS];
  int nf, ch;
  if (!ic || env->no_incidents) return 0;
  if (engine_inc_on(ic)) {
    memset(&v, 0, sizeof v);
    v.current_level = s->current_level;
    v.current_healthy = ol->hc_active && s->current_level >= 1 &&
                        s->current_level <= HEALTH_MAX_LEVEL &&
                        ol->view.level[s->current_level] == HEALTH_HEALTHY;
    v.all_unhealthy = ol->decision.all_unhealthy;
    nf = store_incident_failed_ids_locked(tx, ic->rec.id, failed, SITE_MAX_ORIGINS);
    if (nf < 0) return -1;
    for (int i = 0; i < nf; i++)
      for (int k = 0; k < s->n_origins; k++)
        if (s->origins[k].id == failed[i] && s->origins[k].enabled &&
            s->origins[k].health != HEALTH_HEALTHY)
          v.failed_unhealthy++;
    ch = incident_evaluate(&ic->rec, &v, now, env->incident_quiet_ms);
    if (ch != INCIDENT_SAME) {
      ic->dirty = 1;
      if (inc_announce(env, tx, s, ic, ch) < 0) return -1;
    }
  }
  if (ic->dirty && ic->have && ic->rec.id > 0) {
    if (store_incident_save_locked(tx, &ic->rec) < 0) return -1;
    ic->dirty = 0;
  }
  return 0;
}

/* The first healthy level of a view, 0 when none. */
static int first_healthy(const struct health_site_view *v) {
  for (int l = 1; l <= HEALTH_MAX_LEVEL; l++)
    if (v->level[l] == HEALTH_HEALTHY) return l;
  return 0;
}

/* Switch s to level with a level.switched event; s->current_level is updated. 0 or -1. */
int engine_do_switch(const struct engine_env *env, struct store_tx *tx, struct site_rec *s,
                     struct site_incident *ic, int level, enum health_reason reason,
                     const char *why, const char *by) {
  const char *rs = health_reason_to_string(reason);
  char labels[64];
  int pin = 0;
  cJSON *j;
  /* a switch ends a running ramp: its last step done, a failover, or the operator's choice
     (docs/design.md, Failback ramp); the switch republishes */
  if (s->ramp.from_level) {
    if (store_health_site_ramp_locked(tx, s->id, NULL, s->ramp_hold_until, NULL) < 0) return -1;
    memset(&s->ramp, 0, sizeof s->ramp);
  }
  /* a manual switch to a level after a non-empty one pins it; automatic switches unpin */
  if (reason == HEALTH_REASON_MANUAL)
    for (int i = 0; i < s->n_origins; i++)
      if (s->origins[i].enabled && s->origins[i].level < level) pin = 1;
  if (store_health_site_level_locked(tx, s->id, level, rs, pin) < 0) return -1;
  s->manual_pin = pin;
  j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "from_level", s->current_level);
  cJSON_AddNumberToObject(j, "to_level", level);
  cJSON_AddStringToObject(j, "reason", rs);
  if (why) cJSON_AddStringToObject(j, "why", why);
  if (by) cJSON_AddStringToObject(j, "by", by); /* a manual switch: the token's name */
  if (engine_inc_on(ic)) {
    incident_switched(&ic->rec, level, clock_wall_ms());
    ic->dirty = 1;
  }
  if (engine_add_event(env, tx, s, ic, EVENT_LEVEL_SWITCHED,
                       reason == HEALTH_REASON_MANUAL  ? TITLE_MANUAL
                       : reason == HEALTH_REASON_DRILL ? TITLE_DRILL_SWITCH
                                                       : TITLE_AUTO,
                       j) < 0)
    return -1;
  snprintf(labels, sizeof labels, "reason=\"%s\"", rs);
  /* a drill's switches are no failovers (docs/design.md, Drills): cdnca_drills_total counts them */
  if (reason != HEALTH_REASON_DRILL)
    metrics_add(env->metrics, "cdnca_level_switches_total", labels, 1);
  s->current_level = level;
  return 0;
}

/* Start a failback ramp of s from its current level back to level to (docs/design.md, Failback
   ramp): the published config carries it, the current level stays. by: the operator (NULL for
   the automatic failback). 0 or -1. */
static int engine_ramp_start_locked(const struct engine_env *env, struct store_tx *tx,
                                    struct site_rec *s, struct site_incident *ic, int to,
                                    int64_t now, const char *by) {
  struct ramp_run run;
  cJSON *j;
  ramp_run_start(&s->failback_ramp, s->current_level, to, now, &run);
  if (store_health_site_ramp_locked(tx, s->id, &run, 0, "ramp_started") < 0) return -1;
  s->ramp = run;
  s->ramp_hold_until = 0;
  s->ramp_requests = s->ramp_failures = 0;
  j = ramp_run_json(&run);
  if (!j) return -1;
  if (by) cJSON_AddStringToObject(j, "by", by);
  return engine_add_event(env, tx, s, ic, EVENT_RAMP_STARTED, TITLE_RAMP, j);
}

/* Evaluate the level decision for s (origins as they are now) and act on it. The fleet flags that
   follow are written here, or, when fleet_out is set, left in *fleet_out for the caller to write
   with its batch. 0 or -1. */
int engine_evaluate_locked(const struct engine_env *env, struct store_tx *tx, struct site_rec *s,
                           struct site_incident *ic, int64_t now, unsigned *fleet_out) {
  struct outlook ol;
  const struct health_decision *d = &ol.decision;
  int all, fb, switched = 0, ch;
  cJSON *j;
  engine_outlook(s, now, &ol);
  if (s->drill_id) {
    /* docs/design.md, Drills: a running drill holds the level; its own decision each second
       switches back (or is cancelled, and the rules below take over) */
  } else if (d->action == HEALTH_SWITCH && d->to_level != s->current_level &&
             d->reason == HEALTH_REASON_AUTO_FAILBACK &&
             (s->ramp.from_level || s->ramp_hold_until > now || s->failback_ramp.n_steps > 0)) {
    /* docs/design.md, Failback ramp: a running ramp returns the traffic (ramp_tick decides), an
       aborted one holds the level back, and a site with a failback_ramp starts one, its
       started_at read from the clock now, not the round's time */
    if (!s->ramp.from_level && s->ramp_hold_until <= now &&
        engine_ramp_start_locked(env, tx, s, ic, d->to_level, clock_wall_ms(), NULL) < 0)
      return -1;
  } else if (d->action == HEALTH_SWITCH && d->to_level != s->current_level) {
    /* an automatic switch away opens an incident; a failback belongs to the one it ends */
    ch = INCIDENT_SAME;
    if (d->reason == HEALTH_REASON_AUTO_FAILOVER || d->reason == HEALTH_REASON_NO_ENABLED_ORIGINS)
      ch = inc_trigger(env, tx, s, ic, INCIDENT_TRIGGER_SWITCH, 0, now);
    if (ch < 0 || engine_do_switch(env, tx, s, ic, d->to_level, d->reason, d->why, NULL) < 0)
      return -1;
    if (inc_announce(env, tx, s, ic, ch) < 0) return -1;
    switched = 1;
  }
  if (d->raise_all_unhealthy) {
    ch = inc_trigger(env, tx, s, ic, INCIDENT_TRIGGER_ALL_DOWN, 0, now);
    if (ch < 0) return -1;
    j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "current_level", s->current_level);
    cJSON_AddStringToObject(j, "why", d->why);
    if (engine_add_event(env, tx, s, ic, EVENT_SITE_ALL_LEVELS_UNHEALTHY, TITLE_ALL_DOWN, j) < 0)
      return -1;
    if (inc_announce(env, tx, s, ic, ch) < 0) return -1;
  }
  if (d->raise_recovered) {
    j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "level", first_healthy(&ol.view));
    cJSON_AddNumberToObject(j, "current_level", s->current_level);
    if (engine_add_event(env, tx, s, ic, EVENT_SITE_RECOVERED, TITLE_RECOVERED, j) < 0) return -1;
  }
  if (d->emit_failback_available && !s->drill_id) {
    j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "level", d->failback_level);
    cJSON_AddNumberToObject(j, "current_level", s->current_level);
    if (engine_add_event(env, tx, s, ic, EVENT_ORIGIN_FAILBACK_AVAILABLE, TITLE_FAILBACK, j) < 0)
      return -1;
  }
  all = d->incident_open ? 1 : 0;
  fb = d->failback_notified_next ? d->failback_level : 0;
  if (all != s->all_unhealthy || fb != s->failback_notified) {
    if (store_health_site_flags_locked(tx, s->id, all, fb) < 0) return -1;
    s->all_unhealthy = all;
    s->failback_notified = fb;
  }
  /* The fleet view's flags follow the level and health written in this transaction. The incident
     and notice flags just stored change neither the levels' health nor where a failback could
     go, so the outlook taken above still describes s; a switch is a new state (another level,
     perhaps no longer pinned), whose outlook is taken again. */
  if (switched) engine_outlook(s, now, &ol);
  if (inc_finish(env, tx, s, &ol, ic, now) < 0) return -1;
  if (fleet_out) {
    *fleet_out = fleet_state_of(s, &ol);
    return 0;
  }
  return store_fleet_set_locked(tx, s->id, fleet_state_of(s, &ol));
}

/* ---- rounds ---- */

static int origin_index(const struct site_rec *s, int64_t origin_id) {
  for (int i = 0; i < s->n_origins; i++)
    if (s->origins[i].id == origin_id) return i;
  return -1;
}

/* The votes as the evidence JSON array; malloc'd text or NULL. */
static char *votes_json(const struct engine_vote *votes, int n) {
  cJSON *a = cJSON_CreateArray();
  char *txt;
  for (int i = 0; i < n; i++) {
    const struct engine_vote *v = &votes[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "source", health_source_to_string(v->source));
    if (v->source == SOURCE_NODES)
      json_add_i64(o, "node_id", v->node_id);
    else
      cJSON_AddNullToObject(o, "node_id");
    json_add_str_or_null(o, "checkpoint", v->source == SOURCE_CHECKPOINTS ? v->checkpoint : NULL);
    cJSON_AddBoolToObject(o, "ok", v->ok);
    if (v->status > 0)
      cJSON_AddNumberToObject(o, "status", v->status);
    else
      cJSON_AddNullToObject(o, "status");
    json_add_str_or_null(o, "error", v->error[0] ? v->error : NULL);
    if (v->latency_ms >= 0)
      cJSON_AddNumberToObject(o, "latency_ms", v->latency_ms);
    else
      cJSON_AddNullToObject(o, "latency_ms");
    cJSON_AddItemToArray(a, o);
  }
  txt = json_print(a);
  cJSON_Delete(a);
  return txt;
}

/* A chunk of a round's writes, stored together at the chunk's end (set-based on PostgreSQL): the
   verdict rows (owns votes), the origins whose health changed in memory (pointers into the chunk's
   site records, which live until the flush), and each site's probe times and fleet flags. */
struct verdict_buf {
  struct verdict_row *rows;
  int n, cap;
  const struct origin_rec **origins;
  int no, capo;
  struct site_round_row *sites;
  int ns, caps;
};

static int verdict_buf_flush(const struct engine_env *env, struct store_tx *tx,
                             struct verdict_buf *b) {
  int rc = store_health_origins_save_locked(tx, b->origins, b->no);
  if (rc == 0) rc = store_health_verdicts_add_locked(tx, b->rows, b->n);
  if (rc == 0) rc = store_health_sites_round_locked(tx, b->sites, b->ns);
  for (int i = 0; i < b->n; i++)
    free((char *)b->rows[i].votes_json);
  b->n = b->no = b->ns = 0;
  return rc;
}

static void verdict_buf_free(struct verdict_buf *b) {
  for (int i = 0; i < b->n; i++)
    free((char *)b->rows[i].votes_json);
  free(b->rows);
  free(b->origins);
  free(b->sites);
  memset(b, 0, sizeof *b);
}

/* Apply one verdict to origin o of s at now; writes the origin and a health_changed event, and
   queues the evidence row in vb. 0 or -1. */
static int apply_verdict(const struct engine_env *env, struct store_tx *tx, int64_t round_id,
                         int64_t round_at, struct site_rec *s, struct site_incident *ic,
                         struct origin_rec *o, const struct engine_verdict *v, int64_t now,
                         struct verdict_buf *vb) {
  struct health_origin m;
  enum health_state from = origin_state(o);
  const char *src = v->verdict != VERDICT_NONE ? health_source_to_string(v->source) : NULL;
  char *vj = NULL;
  int rc = -1;
  origin_machine(o, &m);
  health_origin_apply(&m, v->verdict, clamp_int(s->hc_healthy_after),
                      clamp_int(s->hc_unhealthy_after), now);
  o->success_streak = m.success_streak;
  o->failure_streak = m.failure_streak;
  if (m.state != from) {
    o->health = m.state;
    o->health_changed_at = now;
    o->healthy_since = m.state == HEALTH_HEALTHY ? now : 0;
  }
  if (v->verdict != VERDICT_NONE) {
    o->last_verdict = v->verdict;
    o->last_source = v->source;
    o->votes_success = v->votes_success;
    o->votes_failure = v->votes_failure;
    o->last_checked_at = now;
    snprintf(o->last_error, sizeof o->last_error, "%s",
             v->verdict == VERDICT_FAILURE ? v->error : "");
  }
  if (vb->no == vb->capo) {
    int ncap = vb->capo ? vb->capo * 2 : 64;
    const struct origin_rec **no = realloc(vb->origins, (size_t)ncap * sizeof *no);
    if (!no) goto out;
    vb->origins = no;
    vb->capo = ncap;
  }
  vb->origins[vb->no++] = o; /* saved at the chunk's end, with the others */
  vj = votes_json(v->votes, v->n_votes);
  if (!vj) goto out;
  {
    struct verdict_row *r;
    if (vb->n == vb->cap) {
      int ncap = vb->cap ? vb->cap * 2 : 64;
      struct verdict_row *nr = realloc(vb->rows, (size_t)ncap * sizeof *nr);
      if (!nr) goto out;
      vb->rows = nr;
      vb->cap = ncap;
    }
    r = &vb->rows[vb->n++];
    memset(r, 0, sizeof *r);
    r->round_id = round_id;
    r->site_id = s->id;
    r->origin_id = o->id;
    r->round_at = round_at;
    r->source = src;
    r->verdict = health_verdict_to_string(v->verdict);
    snprintf(r->state_after, sizeof r->state_after, "%s", health_state_to_string(o->health));
    r->votes_json = vj; /* the buffer owns it now */
    vj = NULL;
  }
  if (m.state != from) {
    cJSON *j = cJSON_CreateObject(), *vo;
    char title[48];
    int ch = INCIDENT_SAME;
    if (o->health == HEALTH_UNHEALTHY) {
      /* an origin of the level serving visitors turned unhealthy: an incident opens (or this
         joins it); any origin failing during one must recover before it resolves */
      /* during a drill the drill's level is the drill's to judge (it aborts): no incident */
      if (o->level == s->current_level && !s->drill_id) {
        int64_t first = store_incident_streak_start_locked(tx, o->id);
        ch =
            inc_trigger(env, tx, s, ic, INCIDENT_TRIGGER_ORIGIN, first > 0 ? first : round_at, now);
        if (ch < 0) {
          cJSON_Delete(j);
          goto out;
        }
      }
      if (engine_inc_on(ic) &&
          store_incident_failed_locked(tx, ic->rec.id, o->id, o->level, now) < 0) {
        cJSON_Delete(j);
        goto out;
      }
    }
    json_add_i64(j, "origin_id", o->id);
    cJSON_AddNumberToObject(j, "level", o->level);
    cJSON_AddStringToObject(j, "from", health_state_to_string(from));
    cJSON_AddStringToObject(j, "to", health_state_to_string(o->health));
    cJSON_AddStringToObject(j, "source", src ? src : "");
    vo = cJSON_AddObjectToObject(j, "votes");
    cJSON_AddNumberToObject(vo, "success", v->votes_success);
    cJSON_AddNumberToObject(vo, "failure", v->votes_failure);
    json_add_str_or_null(j, "error", o->last_error[0] ? o->last_error : NULL);
    snprintf(title, sizeof title, "Origin is now %s", health_state_to_string(o->health));
    /* the timeline keeps the votes behind the change: which node, checkpoint or controld said
       what */
    if (add_event_inc(env, tx, s, ic, 0, EVENT_ORIGIN_HEALTH_CHANGED, title, j,
                      vb->rows[vb->n - 1].votes_json) < 0)
      goto out;
    if (inc_announce(env, tx, s, ic, ch) < 0) goto out;
  }
  rc = 0;
out:
  free(vj);
  return rc;
}

int64_t engine_next_probe_ms(int64_t own_interval_ms, int64_t probe_interval_ms,
                             int64_t suspect_interval_ms, int suspect) {
  int64_t t = own_interval_ms > 0 ? own_interval_ms : probe_interval_ms;
  if (suspect && suspect_interval_ms > 0 && suspect_interval_ms < t) t = suspect_interval_ms;
  return t > 0 ? t : 1;
}

/* One site's part of a round; its origin, probe-time and fleet writes are queued in vb (the
   origins by pointer: s must live until vb is flushed). 0 or -1. */
static int apply_site(const struct engine_env *env, struct store_tx *tx, int64_t round_id,
                      int64_t round_at, int64_t now, const struct engine_site_round *sr,
                      struct site_rec *s, struct site_incident *ic, struct verdict_buf *vb) {
  int suspect = 0;
  struct site_round_row *row;
  if (s->id == 0) return 0; /* deleted meanwhile */
  if (hc_active(s)) {
    for (int i = 0; i < sr->n; i++) {
      int k = origin_index(s, sr->v[i].origin_id);
      if (k < 0 || !s->origins[k].enabled) continue; /* deleted or disabled meanwhile */
      if (apply_verdict(env, tx, round_id, round_at, s, ic, &s->origins[k], &sr->v[i], now, vb) < 0)
        return -1;
    }
  }
  for (int i = 0; i < s->n_origins; i++) {
    struct health_origin m;
    if (!s->origins[i].enabled) continue;
    origin_machine(&s->origins[i], &m);
    if (health_origin_suspect(&m)) suspect = 1;
  }
  if (vb->ns == vb->caps) {
    int ncap = vb->caps ? vb->caps * 2 : 64;
    struct site_round_row *ns = realloc(vb->sites, (size_t)ncap * sizeof *ns);
    if (!ns) return -1;
    vb->sites = ns;
    vb->caps = ncap;
  }
  row = &vb->sites[vb->ns];
  row->site_id = s->id;
  row->probed_at = round_at;
  row->next_probe_at = round_at + engine_next_probe_ms(s->hc.interval_ms, env->probe_interval_ms,
                                                       env->suspect_interval_ms, suspect);
  if (engine_evaluate_locked(env, tx, s, ic, now, &row->fleet) < 0) return -1;
  vb->ns++;
  return 0;
}

/* Sites read per statement group in a round (bounds the memory of a large round). */
#define ENGINE_LOAD_CHUNK 512

int engine_apply_round(const struct engine_env *env, int64_t round_id, int64_t started_at,
                       int64_t finished_at, const struct engine_site_round *sites, int n_sites) {
  int origins = 0, cap = n_sites < ENGINE_LOAD_CHUNK ? n_sites : ENGINE_LOAD_CHUNK, n_active = 0;
  struct incident_rec *active = NULL;
  struct verdict_buf vb;
  struct site_rec *recs = calloc((size_t)(cap ? cap : 1), sizeof *recs);
  int64_t *ids = calloc((size_t)(cap ? cap : 1), sizeof *ids);
  memset(&vb, 0, sizeof vb);
  if (!recs || !ids) goto fail_notx;
  struct store_tx *tx = store_health_begin(env->store);
  if (!tx) goto fail_notx;
  /* the active incidents, once per round (few): a site without one is looked up only when a
     trigger comes */
  if (!env->no_incidents && store_incident_active_locked(tx, &active, &n_active) != STORE_OK)
    goto fail;
  /* the round's sites are read in chunks, a few statements per chunk, not three per site */
  for (int at = 0; at < n_sites; at += cap) {
    int take = n_sites - at < cap ? n_sites - at : cap;
    for (int i = 0; i < take; i++)
      ids[i] = sites[at + i].site_id;
    if (store_health_sites_load_locked(tx, ids, take, recs) != STORE_OK) goto fail;
    int frc = 0;
    for (int i = 0; i < take && frc == 0; i++) {
      struct site_incident ic;
      memset(&ic, 0, sizeof ic);
      /* none active unless the list has it; the latest resolved one is looked up on a trigger */
      for (int k = 0; k < n_active; k++)
        if (active[k].site_id == recs[i].id) {
          ic.rec = active[k];
          ic.have = ic.loaded = 1;
        }
      origins += sites[at + i].n;
      frc = apply_site(env, tx, round_id, started_at, finished_at, &sites[at + i], &recs[i], &ic,
                       &vb);
    }
    /* the chunk's origins, evidence rows, probe times and fleet flags */
    if (frc == 0) frc = verdict_buf_flush(env, tx, &vb);
    for (int i = 0; i < take; i++)
      site_rec_fini(&recs[i]);
    if (frc < 0) goto fail;
  }
  if (store_health_round_add_locked(tx, round_id, started_at, finished_at, n_sites, origins) < 0)
    goto fail;
  free(recs);
  free(ids);
  free(active);
  verdict_buf_free(&vb);
  return store_health_commit(tx);
fail:
  store_health_rollback(tx);
fail_notx:
  log_error("probe round %lld: results not stored", (long long)round_id);
  free(active);
  free(recs);
  free(ids);
  verdict_buf_free(&vb);
  return -1;
}

int engine_site_changed_keep_locked(const struct engine_env *env, struct store_tx *tx,
                                    int64_t site_id, struct site_rec *out) {
  struct site_rec s;
  int level;
  enum store_rc lrc = store_health_site_load_locked(tx, site_id, &s);
  if (lrc != STORE_OK) return lrc == STORE_NOT_FOUND ? 0 : -1;
  level = s.current_level;
  struct site_incident ic;
  memset(&ic, 0, sizeof ic);
  if (engine_inc_load(tx, &s, &ic) < 0 ||
      engine_evaluate_locked(env, tx, &s, &ic, clock_wall_ms(), NULL) < 0) {
    site_rec_fini(&s);
    return -1;
  }
  /* without a switch only the incident flags (kept in s) and the fleet columns (not in a
     site_rec) were written; a switch republishes, bumping config_version and updated_at */
  if (s.current_level != level) {
    site_rec_fini(&s);
    return 0;
  }
  *out = s;
  return 1;
}

int engine_site_changed_locked(const struct engine_env *env, struct store_tx *tx, int64_t site_id) {
  struct site_rec s;
  int rc;
  enum store_rc lrc = store_health_site_load_locked(tx, site_id, &s);
  if (lrc != STORE_OK) return lrc == STORE_NOT_FOUND ? 0 : -1;
  struct site_incident ic;
  memset(&ic, 0, sizeof ic);
  rc = engine_inc_load(tx, &s, &ic) < 0
           ? -1
           : engine_evaluate_locked(env, tx, &s, &ic, clock_wall_ms(), NULL);
  site_rec_fini(&s);
  return rc;
}

int engine_site_changed(const struct engine_env *env, int64_t site_id) {
  struct store_tx *tx = store_health_begin(env->store);
  if (!tx) return -1;
  if (engine_site_changed_locked(env, tx, site_id) < 0) {
    store_health_rollback(tx);
    return -1;
  }
  return store_health_commit(tx);
}

cJSON *engine_ramp_aborted_json(const struct ramp_run *run, int64_t requests, int64_t failures,
                                const char *why, int64_t hold_until) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  cJSON_AddNumberToObject(j, "from_level", run->from_level);
  cJSON_AddNumberToObject(j, "to_level", run->to_level);
  json_add_i64(j, "requests", requests);
  json_add_i64(j, "failures", failures);
  cJSON_AddStringToObject(j, "why", why);
  json_add_time(j, "hold_until", hold_until);
  return j;
}

int engine_step_each(const struct engine_env *env, const int64_t *ids, int n, int64_t now,
                     engine_step_fn step, const char *what) {
  int failed = 0;
  for (int i = 0; i < n; i++) {
    struct store_tx *tx = store_health_begin(env->store);
    if (!tx) return -1;
    if (step(env, tx, ids[i], now) < 0) {
      store_health_rollback(tx);
      log_error("%s %lld: not decided", what, (long long)ids[i]);
      failed = 1;
      continue;
    }
    if (store_health_commit(tx) < 0) failed = 1;
  }
  return failed ? -1 : 0;
}

int engine_reevaluate_all(const struct engine_env *env) {
  int64_t ids[256], after = 0;
  int n, failed = 0, total = 0;
  do {
    if (store_site_ids(env->store, after, 256, ids, &n) != STORE_OK) return -1;
    for (int i = 0; i < n; i++)
      if (engine_site_changed(env, ids[i]) < 0) {
        log_error("site %lld: level re-evaluation at start failed", (long long)ids[i]);
        failed++;
      }
    total += n;
    if (n > 0) after = ids[n - 1];
  } while (n == 256);
  log_info("re-evaluated the levels of %d sites", total);
  return failed ? -1 : 0;
}

enum engine_switch_rc engine_switch_manual_locked(const struct engine_env *env, struct store_tx *tx,
                                                  int64_t site_id, int level) {
  return engine_switch_manual_by_locked(env, tx, site_id, level, NULL, NULL);
}

/* An operator's switch of site_id to level: the site loaded into *s, and OK, or NO_ORIGIN when the
   level has no enabled origin (*s loaded: the caller finishes it), or NOT_FOUND / ERROR (nothing
   to finish). */
static enum engine_switch_rc switch_load(struct store_tx *tx, int64_t site_id, int level,
                                         struct site_rec *s) {
  enum store_rc rc = store_health_site_load_locked(tx, site_id, s);
  if (rc != STORE_OK) return rc == STORE_NOT_FOUND ? ENGINE_SWITCH_NOT_FOUND : ENGINE_SWITCH_ERROR;
  for (int i = 0; i < s->n_origins; i++)
    if (s->origins[i].level == level && s->origins[i].enabled) return ENGINE_SWITCH_OK;
  return ENGINE_SWITCH_NO_ORIGIN;
}

enum engine_switch_rc engine_switch_manual_by_locked(const struct engine_env *env,
                                                     struct store_tx *tx, int64_t site_id,
                                                     int level, const char *by, int *changed) {
  struct site_rec s;
  struct outlook ol;
  struct site_incident ic;
  enum engine_switch_rc ret = switch_load(tx, site_id, level, &s);
  int fb;
  if (ret == ENGINE_SWITCH_NOT_FOUND || ret == ENGINE_SWITCH_ERROR) return ret;
  if (ret != ENGINE_SWITCH_OK) goto out;
  ret = ENGINE_SWITCH_ERROR;
  memset(&ic, 0, sizeof ic);
  if (engine_inc_load(tx, &s, &ic) < 0) goto out;
  if (level != s.current_level) {
    char why[64];
    snprintf(why, sizeof why, "switched by the operator from level %d to level %d", s.current_level,
             level);
    if (engine_do_switch(env, tx, &s, &ic, level, HEALTH_REASON_MANUAL, why,
                         by && *by ? by : NULL) < 0)
      goto out;
    if (changed) *changed = 1;
  } else if (s.ramp.from_level) {
    /* docs/design.md, Failback ramp: the operator's switch to the level a ramp leaves ends the
       ramp there (and pins that level as a switch to it would), so the site never keeps a ramp
       the operator overruled */
    int pin = 0;
    char why[96];
    cJSON *j;
    for (int i = 0; i < s.n_origins; i++)
      if (s.origins[i].enabled && s.origins[i].level < level) pin = 1;
    snprintf(why, sizeof why, "ended by the operator's switch to level %d", level);
    if (!(j = engine_ramp_aborted_json(&s.ramp, s.ramp_requests, s.ramp_failures, why, 0)))
      goto out;
    if (by && *by) cJSON_AddStringToObject(j, "by", by);
    if (store_health_site_ramp_locked(tx, s.id, NULL, s.ramp_hold_until, NULL) < 0 ||
        store_health_site_level_locked(tx, s.id, level,
                                       health_reason_to_string(HEALTH_REASON_MANUAL), pin) < 0) {
      cJSON_Delete(j);
      goto out;
    }
    memset(&s.ramp, 0, sizeof s.ramp);
    s.manual_pin = pin;
    if (engine_add_event(env, tx, &s, &ic, EVENT_RAMP_ABORTED, ENGINE_TITLE_RAMP_ABORTED, j) < 0)
      goto out;
    if (changed) *changed = 1;
  }
  /* the operator has seen the levels: a failback still possible from here counts as notified
     (which changes nothing the fleet flags read: the same outlook gives them) */
  engine_outlook(&s, clock_wall_ms(), &ol);
  fb = ol.decision.failback_available ? ol.decision.failback_level : 0;
  if (fb != s.failback_notified &&
      store_health_site_flags_locked(tx, s.id, s.all_unhealthy, fb) < 0)
    goto out;
  s.failback_notified = fb;
  if (inc_finish(env, tx, &s, &ol, &ic, clock_wall_ms()) < 0) goto out;
  if (store_fleet_set_locked(tx, s.id, fleet_state_of(&s, &ol)) < 0) goto out;
  ret = ENGINE_SWITCH_OK;
out:
  site_rec_fini(&s);
  return ret;
}

enum engine_switch_rc engine_switch_ramp_by_locked(const struct engine_env *env,
                                                   struct store_tx *tx, int64_t site_id, int level,
                                                   const char *by, int *changed) {
  struct site_rec s;
  struct site_incident ic;
  enum engine_switch_rc ret = switch_load(tx, site_id, level, &s);
  if (ret == ENGINE_SWITCH_NOT_FOUND || ret == ENGINE_SWITCH_ERROR) return ret;
  if (ret != ENGINE_SWITCH_OK) goto out;
  ret = ENGINE_SWITCH_ERROR;
  if (!s.failback_ramp.n_steps || level >= s.current_level) {
    ret = ENGINE_SWITCH_NO_RAMP;
    goto out;
  }
  memset(&ic, 0, sizeof ic);
  if (s.ramp.from_level && s.ramp.to_level == level) {
    ret = ENGINE_SWITCH_OK;
    goto out;
  }
  if (engine_inc_load(tx, &s, &ic) < 0 ||
      engine_ramp_start_locked(env, tx, &s, &ic, level, clock_wall_ms(), by && *by ? by : NULL) < 0)
    goto out;
  if (changed) *changed = 1;
  {
    struct outlook ol;
    engine_outlook(&s, clock_wall_ms(), &ol);
    if (inc_finish(env, tx, &s, &ol, &ic, clock_wall_ms()) < 0) goto out;
  }
  ret = ENGINE_SWITCH_OK;
out:
  site_rec_fini(&s);
  return ret;
}

enum engine_switch_rc engine_switch_manual(const struct engine_env *env, int64_t site_id,
                                           int level) {
  enum engine_switch_rc ret;
  struct store_tx *tx = store_health_begin(env->store);
  if (!tx) return ENGINE_SWITCH_ERROR;
  ret = engine_switch_manual_locked(env, tx, site_id, level);
  if (ret != ENGINE_SWITCH_OK) {
    store_health_rollback(tx);
    return ret;
  }
  return store_health_commit(tx) < 0 ? ENGINE_SWITCH_ERROR : ENGINE_SWITCH_OK;
}

/* ---- incidents: the operator's notes and resolution ---- */

/* The site record an incident's events are written for: the site when it still exists, else
   its id and name as the incident kept them. */
static void incident_site(struct store_tx *tx, const struct incident_rec *r, struct site_rec *s,
                          int *loaded) {
  *loaded = store_health_site_load_locked(tx, r->site_id, s) == STORE_OK;
  if (!*loaded) {
    memset(s, 0, sizeof *s);
    s->id = r->site_id;
    snprintf(s->name, sizeof s->name, "%s", r->site_name);
  }
}

enum engine_incident_rc engine_incident_note_locked(const struct engine_env *env,
                                                    struct store_tx *tx, int64_t id, const char *by,
                                                    const char *text, int resolve) {
  struct site_incident ic;
  struct site_rec s;
  int loaded = 0;
  enum engine_incident_rc ret = ENGINE_INCIDENT_ERROR;
  enum store_rc rc;
  cJSON *j;
  char *data = NULL;
  memset(&ic, 0, sizeof ic);
  rc = store_incident_get_locked(tx, id, &ic.rec);
  if (rc != STORE_OK) return rc == STORE_NOT_FOUND ? ENGINE_INCIDENT_NOT_FOUND : ret;
  ic.have = ic.loaded = 1;
  if (resolve && !incident_active(&ic.rec)) return ENGINE_INCIDENT_RESOLVED;
  if (text && *text) {
    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "text", text);
    if (by && *by) cJSON_AddStringToObject(j, "by", by);
    data = json_print(j);
    cJSON_Delete(j);
    if (!data ||
        store_incident_entry_locked(tx, &ic.rec, "note", 0, resolve ? "resolve" : "note",
                                    by && *by ? by : "operator", data, clock_wall_ms()) < 0)
      goto out;
    ic.dirty = 1;
  }
  if (resolve) {
    incident_site(tx, &ic.rec, &s, &loaded);
    incident_resolve_by(&ic.rec, by, clock_wall_ms());
    if (inc_announce(env, tx, &s, &ic, INCIDENT_RESOLVED_AT) < 0) {
      if (loaded) site_rec_fini(&s);
      goto out;
    }
    if (loaded) site_rec_fini(&s);
  }
  if (ic.dirty && store_incident_save_locked(tx, &ic.rec) < 0) goto out;
  ret = ENGINE_INCIDENT_OK;
out:
  free(data);
  return ret;
}

enum engine_incident_rc engine_site_deleting_locked(const struct engine_env *env,
                                                    struct store_tx *tx, int64_t site_id,
                                                    const char *by) {
  struct incident_rec rec;
  enum store_rc rc = store_incident_latest_locked(tx, site_id, &rec);
  if (rc == STORE_NOT_FOUND || (rc == STORE_OK && !incident_active(&rec)))
    return ENGINE_INCIDENT_OK;
  if (rc != STORE_OK) return ENGINE_INCIDENT_ERROR;
  return engine_incident_note_locked(env, tx, rec.id, by, "site deleted", 1);
}

/* ---- shadow health policies (docs/design.md, Shadow health policies) ---- */

int engine_shadow_step(const struct site_rec *s, struct shadow_site *ss, struct shadow_origin *so,
                       const struct engine_shadow_verdict *v, int nv, int64_t now,
                       struct shadow_switch *sw) {
  struct site_rec copy;
  struct outlook ol;
  const struct health_decision *d = &ol.decision;
  int decided = 0;
  if (ss->since == 0) {
    ss->since = now;
    ss->current_level = s->current_level;
  }
  for (int i = 0; i < s->n_origins; i++) {
    const struct engine_shadow_verdict *x = NULL;
    for (int k = 0; k < nv && !x; k++)
      if (v[k].origin_id == s->origins[i].id) x = &v[k];
    if (!x) continue;
    decided |= x->shadow != VERDICT_NONE;
    shadow_origin_round(&so[i], x->shadow, x->real, x->error, (int)s->shadow.hc.healthy_after,
                        (int)s->shadow.hc.unhealthy_after, now);
  }
  if (decided) ss->rounds++;
  ss->updated_at = now;
  copy = *s;
  copy.origins = malloc((size_t)(s->n_origins ? s->n_origins : 1) * sizeof *copy.origins);
  if (!copy.origins) return -1;
  for (int i = 0; i < s->n_origins; i++) {
    copy.origins[i] = s->origins[i];
    copy.origins[i].health = so[i].health;
    copy.origins[i].healthy_since = so[i].healthy_since;
    copy.origins[i].health_changed_at = so[i].health_changed_at;
  }
  site_hc_put(&copy, &s->shadow.hc);
  copy.current_level = ss->current_level;
  copy.all_unhealthy = ss->all_unhealthy;
  copy.failback_notified = ss->failback_notified;
  copy.manual_pin = 0;
  engine_outlook(&copy, now, &ol);
  free(copy.origins);
  ss->all_unhealthy = d->incident_open;
  ss->failback_notified = d->failback_notified_next;
  if (d->action != HEALTH_SWITCH || d->to_level == ss->current_level) return 0;
  memset(sw, 0, sizeof *sw);
  sw->site_id = s->id;
  sw->at = now;
  sw->from_level = ss->current_level;
  sw->to_level = d->to_level;
  snprintf(sw->reason, sizeof sw->reason, "%s", health_reason_to_string(d->reason));
  snprintf(sw->why, sizeof sw->why, "%s", d->why);
  ss->current_level = d->to_level;
  return 1;
}

/* One site's shadow round inside tx. 0 or -1. */
static int shadow_site_locked(struct store_tx *tx, const struct engine_shadow_round *r,
                              int64_t now) {
  struct site_rec s;
  struct shadow_site ss;
  struct shadow_origin *stored = NULL, *so = NULL;
  struct shadow_switch sw;
  int n = 0, rc = -1, moved;
  enum store_rc lrc;
  memset(&s, 0, sizeof s);
  lrc = store_site_get_locked(tx, r->site_id, &s);
  if (lrc == STORE_NOT_FOUND) return 0;
  if (lrc != STORE_OK) return -1;
  if (!s.shadow.set) {
    rc = 0;
    goto out;
  }
  if (r->skipped) {
    rc = store_shadow_skipped_locked(tx, s.id, s.current_level, now);
    goto out;
  }
  lrc = store_shadow_load_locked(tx, s.id, &ss, &stored, &n);
  if (lrc == STORE_ERROR) goto out;
  if (lrc == STORE_NOT_FOUND) ss.site_id = s.id;
  if (ss.since == 0) ss.site_id = s.id; /* a row made by a skipped round only */
  so = calloc((size_t)(s.n_origins ? s.n_origins : 1), sizeof *so);
  if (!so) goto out;
  for (int i = 0; i < s.n_origins; i++) {
    int k = 0;
    while (k < n && stored[k].origin_id != s.origins[i].id)
      k++;
    if (k < n)
      so[i] = stored[k];
    else
      shadow_origin_init(&so[i], s.id, s.origins[i].id, now);
  }
  moved = engine_shadow_step(&s, &ss, so, r->v, r->n, now, &sw);
  if (moved < 0) goto out;
  rc = store_shadow_save_locked(tx, &ss, so, s.n_origins, moved ? &sw : NULL);
out:
  free(stored);
  free(so);
  site_rec_fini(&s);
  return rc;
}

int engine_apply_shadow(const struct engine_env *env, int64_t now,
                        const struct engine_shadow_round *sites, int n) {
  struct store_tx *tx;
  if (n <= 0) return 0;
  tx = store_health_begin(env->store);
  if (!tx) return -1;
  for (int i = 0; i < n; i++)
    if (shadow_site_locked(tx, &sites[i], now) < 0) {
      store_health_rollback(tx);
      return -1;
    }
  return store_health_commit(tx);
}
