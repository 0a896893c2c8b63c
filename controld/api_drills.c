/* api_drills — failover drills (docs/design.md, Drills): create and list a site's drills, read
   one with its figures per origin of the target level and the nodes' apply times of its
   switches, cancel one. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_op.h"
#include "clock.h"
#include "ctx.h"
#include "drill.h"
#include "engine.h"
#include "fields.h"
#include "json.h"
#include "store.h"
#include "store_applied.h"
#include "store_drills.h"
#include "store_sites.h"

/* The record in its API form. */
static cJSON *drill_json(const void *rec) {
  const struct drill_rec *d = rec;
  cJSON *j = cJSON_CreateObject();
  if (j) fields_json_add(j, drill_fields, FORM_OUT, d);
  if (j && d->state == DRILL_RUNNING) json_add_i64(j, "ends_at", d->started_at + d->duration_ms);
  return j;
}

/* One drill whole: the record, its figures per origin of the target level and the nodes' apply
   times of its switch (the first drill publication) and its switch back (the second). */
struct drill_full {
  int64_t id;
  struct drill_rec d;
  struct drill_origin *o;
  int no;
  struct applied_row *ap;
  int na;
};

static void drill_full_fini(struct drill_full *f) {
  free(f->o);
  free(f->ap);
  f->o = NULL;
  f->ap = NULL;
  f->no = f->na = 0;
}

/* From one snapshot (docs/design.md#one-snapshot-per-answer): a drill that ends meanwhile is
   shown running without its switch back, or ended with it, never half of each. */
static enum store_rc drill_full_read(struct store *st, void *arg) {
  struct drill_full *f = arg;
  enum store_rc rc = store_drill_get(st, f->id, &f->d);
  if (rc == STORE_OK) rc = store_drill_origins(st, f->id, &f->o, &f->no);
  if (rc == STORE_OK) rc = store_applied_rows(st, APPLIED_OF_DRILL, f->id, &f->ap, &f->na);
  return rc;
}

static cJSON *drill_full_json(const struct drill_full *f) {
  cJSON *j = drill_json(&f->d), *a;
  const struct drill_origin *o = f->o;
  const struct applied_row *ap = f->ap;
  if (!j) return NULL;
  a = cJSON_AddArrayToObject(j, "origins");
  for (int i = 0; i < f->no; i++) {
    cJSON *e = cJSON_CreateObject();
    json_add_i64(e, "origin_id", o[i].origin_id);
    cJSON_AddStringToObject(e, "address", o[i].address);
    json_add_i64(e, "requests", o[i].requests);
    json_add_i64(e, "failures", o[i].failures);
    json_add_i64(e, "latency_count", o[i].latency_count);
    if (o[i].latency_count > 0)
      cJSON_AddNumberToObject(e, "latency_avg_ms",
                              (double)o[i].latency_sum_ms / (double)o[i].latency_count);
    else
      cJSON_AddNullToObject(e, "latency_avg_ms");
    cJSON_AddItemToArray(a, e);
  }
  /* the publications in seq order: the first the switch, the next the switch back */
  {
    cJSON *sw = cJSON_AddArrayToObject(j, "switch_applied");
    cJSON *bk = cJSON_AddArrayToObject(j, "back_applied");
    int64_t first = f->na ? ap[0].seq : 0;
    for (int i = 0; i < f->na; i++) {
      cJSON *e = cJSON_CreateObject();
      json_add_i64(e, "node_id", ap[i].node_id);
      cJSON_AddStringToObject(e, "node_name", ap[i].node_name);
      json_add_i64(e, "seq", ap[i].seq);
      json_add_i64(e, "applied_at", ap[i].applied_at);
      json_add_i64(e, "took_ms", ap[i].applied_at - ap[i].published_at);
      cJSON_AddItemToArray(ap[i].seq == first ? sw : bk, e);
    }
  }
  return j;
}

static enum http_rc get_site_list(struct req *r) {
  int64_t limit, after;
  struct drill_rec *arr = NULL;
  struct site_rec s;
  int n = 0;
  enum store_rc rc;
  if (api_page_query(r, &limit, &after) < 0) return HTTP_DONE;
  rc = store_site_get(r->ctx->store, r->params[0], &s);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "site", NULL);
    return HTTP_DONE;
  }
  site_rec_fini(&s);
  rc = store_drill_list(r->ctx->store, r->params[0], after, (int)limit + 1, &arr, &n);
  api_page_answer(r, rc, "drills", "drills", arr, sizeof *arr, n, limit,
                  offsetof(struct drill_rec, id), drill_json);
  free(arr);
  return HTTP_DONE;
}

static enum http_rc get_one(struct req *r) {
  struct drill_full f = {.id = r->params[0]};
  cJSON *j;
  enum store_rc rc = store_snapshot(r->ctx->store, drill_full_read, &f);
  if (rc != STORE_OK)
    api_store_error(r, rc, "drill", NULL);
  else if (!(j = drill_full_json(&f)))
    req_error(r, 500, "internal", NULL, "the drill could not be read");
  else
    req_json(r, 200, j);
  drill_full_fini(&f);
  return HTTP_DONE;
}

#define NUM_(x) #x
#define NUM(x) NUM_(x)

/* The 409 of a refused start or cancel (docs/design.md, Drills: the reason is the code). */
static void conflict_reply(struct req *r, const char *reason) {
  static const struct {
    const char *code, *msg;
  } msgs[] = {
      {"drill_running", "a drill of this site is running"},
      {"incident_open", "the site has an open incident"},
      {"not_on_first_level", "the site is not on its first level"},
      {"level_unhealthy", "the site's current level or the drill's level is not healthy"},
      {"drill_finished", "the drill has finished already"},
      {"too_many_drills", "the site has " NUM(DRILL_SCHEDULED_MAX) " scheduled drills already"},
  };
  const char *m = "the drill cannot start now";
  for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++)
    if (strcmp(msgs[i].code, reason) == 0) m = msgs[i].msg;
  req_error(r, 409, reason, NULL, "%s", m);
}

static enum store_rc drill_rc(struct api_op *op, enum engine_drill_rc rc, const char *reason,
                              const struct field_err *fe) {
  switch (rc) {
  case ENGINE_DRILL_OK:
    return STORE_OK;
  case ENGINE_DRILL_NOT_FOUND:
    return STORE_NOT_FOUND;
  case ENGINE_DRILL_INVALID:
    req_error(op->r, fe->status, fe->code, fe->field, "%s", fe->message);
    return STORE_ERROR;
  case ENGINE_DRILL_CONFLICT:
    conflict_reply(op->r, reason ? reason : "conflict");
    return STORE_CONFLICT;
  case ENGINE_DRILL_ERROR:
  default:
    return STORE_ERROR;
  }
}

static enum store_rc create_change(struct api_op *op) {
  struct drill_rec *d = op->arg;
  struct field_err fe;
  const char *reason = NULL;
  memset(&fe, 0, sizeof fe);
  enum engine_drill_rc rc;
  op->status = 201;
  rc = engine_drill_create_locked(op->ctx->engine, op->tx, op->r->params[0], d, op->r->token_name,
                                  &fe, &reason);
  return drill_rc(op, rc, reason, &fe);
}

/* The answer: the drill as the write left it (read on the writer). */
static enum store_rc answer(struct api_op *op) {
  const struct drill_rec *d = op->arg;
  struct drill_rec now;
  enum store_rc rc = store_drill_get_locked(op->tx, d->id, &now);
  if (rc == STORE_OK) req_json(op->r, op->status ? (unsigned)op->status : 200, drill_json(&now));
  return rc;
}

static const struct api_op_def create_op = {"site", create_change, answer, NULL};

static enum http_rc post_create(struct req *r) {
  cJSON *body = req_body_object(r);
  struct drill_rec d;
  struct field_err fe;
  if (!body) return HTTP_DONE;
  if (drill_apply(body, &d, clock_wall_ms(), &fe) < 0)
    req_error(r, fe.status, fe.code, fe.field, "%s", fe.message);
  else
    (void)api_op_run(r, &create_op, &d);
  cJSON_Delete(body);
  return HTTP_DONE;
}

static enum store_rc cancel_change(struct api_op *op) {
  struct drill_rec *d = op->arg;
  const char *reason = NULL;
  enum engine_drill_rc rc = engine_drill_cancel_locked(op->ctx->engine, op->tx, op->r->params[0],
                                                       op->r->token_name, d, &reason);
  return drill_rc(op, rc, reason, NULL);
}

static const struct api_op_def cancel_op = {"drill", cancel_change, answer, NULL};

static enum http_rc post_cancel(struct req *r) {
  struct drill_rec d;
  memset(&d, 0, sizeof d);
  (void)api_op_run(r, &cancel_op, &d);
  return HTTP_DONE;
}

const struct route api_drills_routes[] = {
    {"POST", "/v1/sites/:id/drills", AUTH_OPERATOR, post_create, NULL, 0},
    {"GET", "/v1/sites/:id/drills", AUTH_READ, get_site_list, "after,limit", 0},
    {"GET", "/v1/drills/:id", AUTH_READ, get_one, NULL, 0},
    {"POST", "/v1/drills/:id/cancel", AUTH_OPERATOR, post_cancel, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
