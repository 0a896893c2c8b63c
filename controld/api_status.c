/* api_status — the origin status card, verdict evidence, the operator's level switch and the
   shadow policy's comparison. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_op.h"
#include "clock.h"
#include "ctx.h"
#include "engine.h"
#include "hcheck.h"
#include "json.h"
#include "store.h"
#include "store_drills.h"
#include "store_health.h"
#include "store_shadow.h"
#include "store_sites.h"

/* One origin of the card. */
static cJSON *card_origin(const struct origin_rec *o, const struct origin_obs *obs, int n_obs) {
  cJSON *j = cJSON_CreateObject(), *v, *no;
  int64_t req = 0, fail = 0;
  for (int i = 0; i < n_obs; i++)
    if (obs[i].origin_id == o->id) {
      req = obs[i].requests;
      fail = obs[i].failures;
    }
  json_add_i64(j, "id", o->id);
  cJSON_AddStringToObject(j, "health", health_state_to_string(o->health));
  cJSON_AddBoolToObject(j, "enabled", o->enabled);
  json_add_str_or_null(j, "last_verdict",
                       o->last_verdict != VERDICT_NONE ? health_verdict_to_string(o->last_verdict)
                                                       : NULL);
  json_add_str_or_null(
      j, "source", o->last_source != SOURCE_NONE ? health_source_to_string(o->last_source) : NULL);
  v = cJSON_AddObjectToObject(j, "votes");
  cJSON_AddNumberToObject(v, "success", o->votes_success);
  cJSON_AddNumberToObject(v, "failure", o->votes_failure);
  json_add_time(j, "last_checked_at", o->last_checked_at);
  json_add_str_or_null(j, "last_error", o->last_error[0] ? o->last_error : NULL);
  no = cJSON_AddObjectToObject(j, "node_observations");
  json_add_i64(no, "requests", req);
  json_add_i64(no, "failures", fail);
  return j;
}

/* Build the status card of site_id into *out as r's token may see it (health-check header values
   masked below admin: docs/design.md#secrets); STORE_OK or the error (reply not set). With tx: read
   on the writer inside the caller's transaction (the answer of a write), else (NULL) on a
   reader. */
static enum store_rc status_card(struct req *r, int64_t site_id, struct store_tx *tx, cJSON **out) {
  struct ctx *ctx = r->ctx;
  struct site_rec s;
  struct outlook ol;
  struct origin_obs *obs = NULL;
  int n_obs = 0, online = 0, current = 0;
  int64_t seq = 0;
  const char *reason = NULL;
  int64_t now = clock_wall_ms();
  cJSON *j, *hc, *levels, *prop, *dec;
  enum store_rc rc =
      tx ? store_site_get_locked(tx, site_id, &s) : store_site_get(ctx->store, site_id, &s);
  int64_t seen = now - ctx->cfg.node_online_ms;
  *out = NULL;
  if (rc != STORE_OK) return rc;
  if ((tx ? store_health_observations_locked(tx, site_id, &obs, &n_obs)
          : store_health_observations(ctx->store, site_id, &obs, &n_obs)) != STORE_OK ||
      (tx ? store_health_propagation_locked(tx, site_id, seen, &online, &current, &seq)
          : store_health_propagation(ctx->store, site_id, seen, &online, &current, &seq)) < 0) {
    free(obs);
    site_rec_fini(&s);
    return STORE_ERROR;
  }
  engine_outlook(&s, now, &ol);
  j = cJSON_CreateObject();
  json_add_i64(j, "site_id", s.id);
  cJSON_AddNumberToObject(j, "current_level", s.current_level);
  cJSON_AddStringToObject(j, "failback", health_failback_to_string(s.failback));
  cJSON_AddBoolToObject(j, "manual_pin", s.manual_pin);
  json_add_i64(j, "config_version", s.config_version);
  hc = cJSON_AddObjectToObject(j, "health_check");
  cJSON_AddStringToObject(hc, "state", model_hc_state(&s, &reason));
  cJSON_AddStringToObject(hc, "reason", reason);
  if (!api_reveals_secrets(r)) fields_redact(site_fields, &s);
  hcheck_add_json(hc, &s.hc, 1);
  cJSON_AddBoolToObject(j, "failback_available", ol.decision.failback_available);
  /* docs/design.md, Failback ramp: the running ramp, its share now and its window so far */
  if (s.ramp.from_level) {
    cJSON *rj = ramp_run_json(&s.ramp);
    if (rj) {
      json_add_i64(rj, "share", ramp_share(&s.ramp, now, 0));
      json_add_i64(rj, "window_requests", s.ramp_requests);
      json_add_i64(rj, "window_failures", s.ramp_failures);
      cJSON_AddItemToObject(j, "ramp", rj);
    }
  } else {
    cJSON_AddNullToObject(j, "ramp");
  }
  /* docs/design.md, Drills: the running drill, its end and its figures so far */
  {
    struct drill_rec d;
    cJSON *dj = NULL;
    if (s.drill_id &&
        (tx ? store_drill_get_locked(tx, s.drill_id, &d)
            : store_drill_get(ctx->store, s.drill_id, &d)) == STORE_OK &&
        d.state == DRILL_RUNNING && (dj = cJSON_CreateObject()) != NULL) {
      json_add_i64(dj, "id", d.id);
      cJSON_AddNumberToObject(dj, "from_level", d.from_level);
      cJSON_AddNumberToObject(dj, "to_level", d.to_level);
      json_add_i64(dj, "started_at", d.started_at);
      json_add_i64(dj, "ends_at", d.started_at + d.duration_ms);
      json_add_i64(dj, "requests", d.requests);
      json_add_i64(dj, "failures", d.failures);
      json_add_i64(dj, "window_requests", d.window_requests);
      json_add_i64(dj, "window_failures", d.window_failures);
      cJSON_AddItemToObject(j, "drill", dj);
    } else {
      cJSON_AddNullToObject(j, "drill");
    }
  }
  if (s.ramp_hold_until > now)
    json_add_time(j, "failback_held_until", s.ramp_hold_until);
  else
    cJSON_AddNullToObject(j, "failback_held_until");
  cJSON_AddBoolToObject(j, "all_levels_unhealthy", ol.hc_active && ol.decision.all_unhealthy);
  levels = cJSON_AddArrayToObject(j, "levels");
  for (int l = 1; l <= HEALTH_MAX_LEVEL; l++) {
    cJSON *lv = NULL, *os = NULL;
    for (int i = 0; i < s.n_origins; i++) {
      if (s.origins[i].level != l) continue;
      if (!lv) {
        lv = cJSON_CreateObject();
        cJSON_AddNumberToObject(lv, "level", l);
        cJSON_AddStringToObject(lv, "health", health_state_to_string(ol.view.level[l]));
        os = cJSON_AddArrayToObject(lv, "origins");
        cJSON_AddItemToArray(levels, lv);
      }
      cJSON_AddItemToArray(os, card_origin(&s.origins[i], obs, n_obs));
    }
  }
  prop = cJSON_AddObjectToObject(j, "propagation");
  cJSON_AddNumberToObject(prop, "nodes_online", online);
  cJSON_AddNumberToObject(prop, "nodes_on_current_version", current);
  json_add_i64(prop, "seq", seq);
  if (s.shadow.set) { /* docs/design.md, Shadow health policies */
    struct shadow_site ss;
    cJSON *sh;
    if (store_shadow_site_get(ctx->store, tx, site_id, &ss) == STORE_ERROR) {
      cJSON_Delete(j);
      free(obs);
      site_rec_fini(&s);
      return STORE_ERROR;
    }
    sh = cJSON_AddObjectToObject(j, "shadow");
    json_add_i64(sh, "rounds", ss.rounds);
    json_add_i64(sh, "skipped_rounds", ss.skipped);
    if (ss.since > 0)
      cJSON_AddNumberToObject(sh, "level", ss.current_level);
    else
      cJSON_AddNullToObject(sh, "level");
  } else {
    cJSON_AddNullToObject(j, "shadow");
  }
  dec = cJSON_AddObjectToObject(j, "decision");
  cJSON_AddStringToObject(dec, "action", health_action_to_string(ol.decision.action));
  cJSON_AddNumberToObject(dec, "to_level", ol.decision.to_level);
  cJSON_AddStringToObject(dec, "why", ol.decision.why);
  free(obs);
  site_rec_fini(&s);
  *out = j;
  return STORE_OK;
}

struct card_ask {
  struct req *r;
  cJSON *card;
};

static enum store_rc card_read(struct store *st, void *arg) {
  struct card_ask *a = arg;
  (void)st;
  return status_card(a->r, a->r->params[0], NULL, &a->card);
}

static enum http_rc get_status(struct req *r) {
  struct card_ask a = {r, NULL};
  /* the site, its observations, propagation, drill and shadow state from one snapshot
     (docs/design.md#one-snapshot-per-answer) */
  enum store_rc rc = store_snapshot(r->ctx->store, card_read, &a);
  cJSON *card = a.card;
  if (rc != STORE_OK)
    api_store_error(r, rc, "site", NULL);
  else
    req_json(r, 200, card);
  return HTTP_DONE;
}

static cJSON *verdict_json(const struct verdict_rec *v) {
  cJSON *j = cJSON_CreateObject(), *votes;
  json_add_i64(j, "round_id", v->round_id);
  json_add_time(j, "round_at", v->round_at);
  json_add_str_or_null(j, "source", v->source[0] ? v->source : NULL);
  json_add_str_or_null(j, "verdict", v->verdict[0] ? v->verdict : NULL);
  cJSON_AddStringToObject(j, "state_after", v->state_after);
  votes = json_parse(v->votes, strlen(v->votes));
  if (!cJSON_IsArray(votes)) {
    cJSON_Delete(votes);
    votes = cJSON_CreateArray();
  }
  cJSON_AddItemToObject(j, "votes", votes);
  return j;
}

static enum http_rc get_verdicts(struct req *r) {
  struct site_rec s;
  struct verdict_rec *arr = NULL;
  int64_t limit;
  int n = 0, found = 0;
  enum store_rc rc;
  cJSON *j, *a;
  if (req_query_int(r, "limit", 1, 100, 20, &limit) < 0) return HTTP_DONE;
  rc = store_site_get(r->ctx->store, r->params[0], &s);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "site", NULL);
    return HTTP_DONE;
  }
  for (int i = 0; i < s.n_origins; i++)
    if (s.origins[i].id == r->params[1]) found = 1;
  site_rec_fini(&s);
  if (!found) {
    req_error(r, 404, "not_found", NULL, "origin not found");
    return HTTP_DONE;
  }
  rc = store_health_verdicts(r->ctx->store, r->params[1], (int)limit, &arr, &n);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "verdicts", NULL);
    return HTTP_DONE;
  }
  j = cJSON_CreateObject();
  json_add_i64(j, "site_id", r->params[0]);
  json_add_i64(j, "origin_id", r->params[1]);
  a = cJSON_AddArrayToObject(j, "verdicts");
  for (int i = 0; i < n; i++)
    cJSON_AddItemToArray(a, verdict_json(&arr[i]));
  store_health_verdicts_free(arr, n);
  req_json(r, 200, j);
  return HTTP_DONE;
}

/* A switch's body: the level, and whether it returns there as a failback ramp. */
struct switch_req {
  int64_t level;
  int ramp;
};

static enum store_rc switch_change(struct api_op *op) {
  const struct switch_req *sr = op->arg;
  int level = (int)sr->level;
  const struct engine_env *env = op->ctx->engine;
  int64_t revision = 0;
  /* docs/design.md#safe-concurrent-edits: the switch honours If-Match like the site's other writes
   */
  enum store_rc src = store_site_revision_locked(op->tx, op->r->params[0], &revision);
  if (src == STORE_OK) src = api_op_if_match(op, revision);
  if (src != STORE_OK) return src;
  int changed = 0;
  enum engine_switch_rc rc =
      sr->ramp ? engine_switch_ramp_by_locked(env, op->tx, op->r->params[0], level,
                                              op->r->token_name, &changed)
               : engine_switch_manual_by_locked(env, op->tx, op->r->params[0], level,
                                                op->r->token_name, &changed);
  switch (rc) {
  case ENGINE_SWITCH_OK:
    /* docs/design.md#safe-concurrent-edits: the operator's switch that moves the level or starts a
       ramp is a change of the site, so a second operator who read the same revision gets 412
       rather than a state mixed of both */
    if (changed && store_site_bump_revision_locked(op->tx, op->r->params[0]) < 0)
      return STORE_ERROR;
    return STORE_OK;
  case ENGINE_SWITCH_NOT_FOUND:
    return STORE_NOT_FOUND;
  case ENGINE_SWITCH_NO_ORIGIN:
    req_error(op->r, 422, "invalid_value", "level", "level %d has no enabled origin", level);
    return STORE_ERROR;
  case ENGINE_SWITCH_NO_RAMP:
    req_error(op->r, 422, "invalid_value", "ramp",
              "a ramp needs the site's failback_ramp and a level before the current one");
    return STORE_ERROR;
  case ENGINE_SWITCH_ERROR:
  default:
    return STORE_ERROR;
  }
}

/* The answer: the status card as the switch left it (read on the writer, in the transaction). */
static enum store_rc switch_answer(struct api_op *op) {
  cJSON *card;
  int64_t revision = 0;
  enum store_rc rc = store_site_revision_locked(op->tx, op->r->params[0], &revision);
  if (rc == STORE_OK) rc = status_card(op->r, op->r->params[0], op->tx, &card);
  if (rc == STORE_OK) {
    req_json(op->r, 200, card);
    req_set_etag(op->r, revision); /* after the body, which starts the reply afresh */
  }
  return rc;
}

static const struct api_op_def switch_op = {"site", switch_change, switch_answer, NULL};

static enum http_rc post_switch(struct req *r) {
  static const char *const keys[] = {"level", "ramp", NULL};
  cJSON *body = req_body_object(r);
  const char *bad = NULL;
  struct switch_req sr = {0, 0};
  int64_t level = 0;
  if (!body) return HTTP_DONE;
  if (json_only_keys(body, keys, &bad) < 0) {
    req_error(r, 400, "unknown_field", bad, "unknown field %s", bad);
    goto out;
  }
  if (json_int(body, "level", 1, HEALTH_MAX_LEVEL, &level) != 0) {
    req_error(r, 422, "invalid_value", "level", "level is required: an integer from 1 to %d",
              HEALTH_MAX_LEVEL);
    goto out;
  }
  if (json_bool(body, "ramp", &sr.ramp) < 0) {
    req_error(r, 422, "invalid_type", "ramp", "ramp must be true or false");
    goto out;
  }
  sr.level = level;
  (void)api_op_run(r, &switch_op, &sr);
out:
  cJSON_Delete(body);
  return HTTP_DONE;
}

/* ---- the shadow policy compared (docs/design.md, Shadow health policies) ---- */

static cJSON *switch_json(const struct shadow_switch *sw) {
  cJSON *j = cJSON_CreateObject();
  json_add_time(j, "at", sw->at);
  cJSON_AddNumberToObject(j, "from_level", sw->from_level);
  cJSON_AddNumberToObject(j, "to_level", sw->to_level);
  cJSON_AddStringToObject(j, "reason", sw->reason);
  json_add_str_or_null(j, "why", sw->why[0] ? sw->why : NULL);
  return j;
}

static const char *verdict_or_null(enum health_verdict v) {
  return v == VERDICT_NONE ? NULL : health_verdict_to_string(v);
}

static enum http_rc get_shadow(struct req *r) {
  struct site_rec s;
  struct shadow_site ss;
  struct shadow_origin *so = NULL;
  struct shadow_switch *sw = NULL, *real = NULL;
  struct shadow_totals t;
  int n = 0, nsw = 0, nreal = 0;
  cJSON *j, *a, *tmp;
  enum store_rc rc = store_site_get(r->ctx->store, r->params[0], &s);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "site", NULL);
    return HTTP_DONE;
  }
  rc = store_shadow_report(r->ctx->store, s.id, &ss, &so, &n, &sw, &nsw, &real, &nreal);
  if (rc == STORE_ERROR) {
    api_store_error(r, rc, "site", NULL);
    goto out;
  }
  shadow_totals(so, n, &t);
  /* docs/design.md#secrets: the shadow check's header values masked below admin, as the site's */
  if (!api_reveals_secrets(r)) fields_redact(site_fields, &s);
  j = cJSON_CreateObject();
  json_add_i64(j, "site_id", s.id);
  tmp = cJSON_CreateObject();
  if (tmp && fields_json_add(tmp, site_fields, FORM_OUT, &s) == 0)
    cJSON_AddItemToObject(j, "health_check_shadow",
                          cJSON_DetachItemFromObjectCaseSensitive(tmp, "health_check_shadow"));
  cJSON_Delete(tmp);
  json_add_time(j, "since", ss.since);
  json_add_i64(j, "rounds", ss.rounds);
  json_add_i64(j, "skipped_rounds", ss.skipped);
  json_add_i64(j, "compared", t.compared);
  json_add_i64(j, "agreements", t.agreements);
  json_add_i64(j, "disagreements", t.disagreements);
  if (t.agreement >= 0)
    cJSON_AddNumberToObject(j, "agreement", t.agreement);
  else
    cJSON_AddNullToObject(j, "agreement");
  cJSON_AddNumberToObject(j, "current_level", s.current_level);
  if (ss.since > 0)
    cJSON_AddNumberToObject(j, "shadow_level", ss.current_level);
  else
    cJSON_AddNullToObject(j, "shadow_level");
  a = cJSON_AddArrayToObject(j, "origins");
  for (int i = 0; i < s.n_origins; i++) {
    const struct origin_rec *o = &s.origins[i];
    const struct shadow_origin *x = NULL;
    cJSON *oj = cJSON_CreateObject();
    for (int k = 0; k < n && !x; k++)
      if (so[k].origin_id == o->id) x = &so[k];
    json_add_i64(oj, "origin_id", o->id);
    cJSON_AddNumberToObject(oj, "level", o->level);
    cJSON_AddStringToObject(oj, "health", health_state_to_string(x ? x->health : HEALTH_UNKNOWN));
    cJSON_AddStringToObject(oj, "real_health", health_state_to_string(o->health));
    json_add_i64(oj, "compared", x ? x->compared : 0);
    json_add_i64(oj, "agreements", x ? x->compared - x->disagreements : 0);
    json_add_i64(oj, "disagreements", x ? x->disagreements : 0);
    json_add_str_or_null(oj, "last_verdict", x ? verdict_or_null(x->last_verdict) : NULL);
    json_add_str_or_null(oj, "last_real_verdict", x ? verdict_or_null(x->last_real) : NULL);
    json_add_str_or_null(oj, "last_error", x && x->last_error[0] ? x->last_error : NULL);
    cJSON_AddItemToArray(a, oj);
  }
  a = cJSON_AddArrayToObject(j, "switches");
  for (int i = 0; i < nsw; i++)
    cJSON_AddItemToArray(a, switch_json(&sw[i]));
  /* the real switches over the same time: those since the comparison started */
  a = cJSON_AddArrayToObject(j, "real_switches");
  nreal = ss.since > 0 ? shadow_switches_since(real, nreal, ss.since) : 0;
  for (int i = 0; i < nreal; i++)
    cJSON_AddItemToArray(a, switch_json(&real[i]));
  req_json(r, 200, j);
out:
  free(so);
  free(sw);
  free(real);
  site_rec_fini(&s);
  return HTTP_DONE;
}

const struct route api_status_routes[] = {
    {"GET", "/v1/sites/:id/shadow", AUTH_READ, get_shadow, NULL, 0},
    {"GET", "/v1/sites/:id/status", AUTH_READ, get_status, NULL, 0},
    {"GET", "/v1/sites/:id/origins/:id/verdicts", AUTH_READ, get_verdicts, "limit", 0},
    {"POST", "/v1/sites/:id/switch", AUTH_OPERATOR, post_switch, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
