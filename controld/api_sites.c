/* api_sites — /v1/sites: create, list, get, patch, delete. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_op.h"
#include "ctx.h"
#include "engine.h"
#include "fleet.h"
#include "json.h"
#include "publish.h"
#include "rcache.h"
#include "store_fleet.h"
#include "store_shadow.h"
#include "store_sites.h"

/* The state of a site write: the body and the record built from it. */
struct site_op {
  cJSON *body;
  struct site_rec s;
};

/* Set the answer: the site as now stored, after the re-evaluation. */
static enum store_rc answer_site(struct api_op *op, unsigned status) {
  struct site_rec s;
  /* the record the re-evaluation read, unless it switched the level: no second read */
  enum store_rc rc =
      api_op_site_after(op, &s) ? STORE_OK : store_site_get_locked(op->tx, op->site_id, &s);
  if (rc != STORE_OK) return rc;
  req_json(op->r, status, model_site_json(&s));
  req_set_etag(op->r, s.revision);
  site_rec_fini(&s);
  return STORE_OK;
}

static enum store_rc create_change(struct api_op *op) {
  struct site_op *so = op->arg;
  char conflict[64] = "";
  enum store_rc rc = store_site_create_locked(op->tx, &so->s, conflict, sizeof conflict);
  if (rc != STORE_OK) {
    api_store_error(op->r, rc, "site", conflict);
    return rc;
  }
  op->site_id = so->s.id;
  return STORE_OK;
}

static enum store_rc create_answer(struct api_op *op) {
  return answer_site(op, 201);
}

static const struct api_op_def create_op = {"site", create_change, create_answer, NULL};

static enum http_rc post_site(struct req *r) {
  struct site_op so = {.body = req_body_object(r)};
  struct field_err err;
  if (!so.body) return HTTP_DONE;
  site_rec_defaults(&so.s);
  if (model_site_create(so.body, &so.s, &err) < 0) {
    api_field_error(r, &err);
    goto out;
  }
  for (int i = 0; i < so.s.n_origins; i++) {
    char field[48];
    snprintf(field, sizeof field, "origins[%d].address", i);
    if (api_target_refused(r, so.s.origins[i].address, field)) goto out;
  }
  (void)api_op_run(r, &create_op, &so);
out:
  site_rec_fini(&so.s);
  cJSON_Delete(so.body);
  return HTTP_DONE;
}

/* Longest q= of GET /v1/sites: a hostname's length. */
#define SITES_Q_MAX 253

static enum http_rc list_sites(struct req *r) {
  int64_t limit, after;
  struct site_rec *arr = NULL;
  int n = 0;
  cJSON *j, *a;
  enum store_rc rc;
  const char *state = req_query(r, "state"), *q = req_query(r, "q"), *sort = req_query(r, "sort");
  unsigned flag = 0;
  int by_changed = 0;
  if (req_query_int(r, "limit", 1, 1000, 100, &limit) < 0) return HTTP_DONE;
  if (req_query_int(r, "after", 0, INT64_MAX / 2, 0, &after) < 0) return HTTP_DONE;
  if (state && !(flag = fleet_state_parse(state))) {
    req_error(r, 400, "invalid_query", "state",
              "state must be on_backup, all_down, failback_available or paused");
    return HTTP_DONE;
  }
  if (q && strlen(q) > SITES_Q_MAX) {
    req_error(r, 400, "invalid_query", "q", "q must be at most %d bytes", SITES_Q_MAX);
    return HTTP_DONE;
  }
  if (sort && !(strcmp(sort, "id") == 0 || (by_changed = strcmp(sort, "changed") == 0))) {
    req_error(r, 400, "invalid_query", "sort", "sort must be id or changed");
    return HTTP_DONE;
  }
  if (by_changed)
    rc = store_fleet_site_list_changed(r->ctx->store, flag, q, after, (int)limit + 1, &arr, &n);
  else if (flag || (q && *q))
    rc = store_fleet_site_list(r->ctx->store, flag, q, after, (int)limit + 1, &arr, &n);
  else
    rc = store_site_list(r->ctx->store, after, (int)limit + 1, &arr, &n);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "sites", NULL);
    return HTTP_DONE;
  }
  j = cJSON_CreateObject();
  a = cJSON_AddArrayToObject(j, "sites");
  for (int i = 0; i < n && i < limit; i++) {
    if (!api_reveals_secrets(r)) fields_redact(site_fields, &arr[i]);
    cJSON_AddItemToArray(a, model_site_json(&arr[i]));
  }
  if (n > limit)
    cJSON_AddNumberToObject(j, "next", (double)arr[limit - 1].id);
  else
    cJSON_AddNullToObject(j, "next");
  for (int i = 0; i < n; i++)
    site_rec_fini(&arr[i]);
  free(arr);
  req_json(r, 200, j);
  return HTTP_DONE;
}

static enum http_rc get_site(struct req *r) {
  struct site_rec s;
  /* read the generation first: a write committing meanwhile makes this rendering stale-tagged */
  int64_t gen = store_generation(r->ctx->store), revision = 0;
  char *text = NULL;
  size_t len = 0;
  enum store_rc rc;
  int secrets;
  /* only renderings without a secret are cached: a hit is then right for every role */
  if (r->ctx->site_cache &&
      rcache_get(r->ctx->site_cache, r->params[0], gen, &text, &len, &revision)) {
    req_raw(r, 200, "application/json", text, len);
    req_set_etag(r, revision);
    return HTTP_DONE;
  }
  rc = store_site_get(r->ctx->store, r->params[0], &s);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "site", NULL);
    return HTTP_DONE;
  }
  /* docs/design.md#secrets: header values masked below admin */
  if (api_reveals_secrets(r)) {
    struct site_rec masked = s;
    secrets = fields_redact(site_fields, &masked);
  } else {
    secrets = fields_redact(site_fields, &s);
  }
  {
    cJSON *j = model_site_json(&s);
    text = json_print(j);
    cJSON_Delete(j);
  }
  revision = s.revision;
  site_rec_fini(&s);
  if (!text) {
    req_error(r, 500, "internal", NULL, "out of memory");
    return HTTP_DONE;
  }
  len = strlen(text);
  if (r->ctx->site_cache && !secrets)
    rcache_put(r->ctx->site_cache, r->params[0], gen, text, len, revision);
  req_raw(r, 200, "application/json", text, len);
  req_set_etag(r, revision);
  return HTTP_DONE;
}

/* Read, apply and write in the one transaction: a concurrent PATCH of another field is kept. */
static enum store_rc patch_change(struct api_op *op) {
  struct site_op *so = op->arg;
  struct site_rec *stored;
  struct field_err err;
  char conflict[64] = "", *before, *after;
  int changed, publish;
  enum store_rc rc = store_site_get_locked(op->tx, op->r->params[0], &so->s);
  if (rc != STORE_OK) return rc;
  rc = api_op_if_match(op, so->s.revision);
  if (rc != STORE_OK) return rc;
  stored = malloc(sizeof *stored);
  if (!stored) return STORE_ERROR;
  *stored = so->s; /* shallow: only its field-table members are read */
  before = site_shadow_codec.to_text(&so->s.shadow);
  if (model_site_patch(so->body, &so->s, &err) < 0) {
    free(stored);
    free(before);
    api_field_error(op->r, &err);
    return STORE_ERROR;
  }
  /* docs/design.md#secrets: a masked value sent back keeps the stored secret */
  fields_keep_secrets(site_fields, &so->s, stored);
  /* a change nodes are not sent (a health check, failback) is no publication */
  publish = !publish_site_same(stored, &so->s);
  free(stored);
  after = site_shadow_codec.to_text(&so->s.shadow);
  /* a shadow policy set, changed or removed starts its comparison again (docs/design.md, Shadow
     health policies) */
  changed = (before == NULL) != (after == NULL) || (before && strcmp(before, after) != 0);
  free(before);
  free(after);
  rc = store_site_update_locked(op->tx, &so->s, publish, conflict, sizeof conflict);
  if (rc != STORE_OK) {
    api_store_error(op->r, rc, "site", conflict);
    return rc;
  }
  if (changed && store_shadow_reset_locked(op->tx, so->s.id) < 0) return STORE_ERROR;
  op->site_id = so->s.id;
  return STORE_OK;
}

static enum store_rc patch_answer(struct api_op *op) {
  return answer_site(op, 200);
}

static const struct api_op_def patch_op = {"site", patch_change, patch_answer, NULL};

static enum http_rc patch_site(struct req *r) {
  struct site_op so = {.body = req_body_object(r)};
  if (!so.body) return HTTP_DONE;
  (void)api_op_run(r, &patch_op, &so);
  site_rec_fini(&so.s);
  cJSON_Delete(so.body);
  return HTTP_DONE;
}

static enum store_rc delete_change(struct api_op *op) {
  int64_t revision = 0;
  enum store_rc rc = store_site_revision_locked(op->tx, op->r->params[0], &revision);
  if (rc == STORE_OK) rc = api_op_if_match(op, revision);
  if (rc == STORE_OK && engine_site_deleting_locked(op->ctx->engine, op->tx, op->r->params[0],
                                                    op->r->token_name) != ENGINE_INCIDENT_OK)
    rc = STORE_ERROR;
  if (rc == STORE_OK) rc = store_site_delete_locked(op->tx, op->r->params[0]);
  if (rc == STORE_OK) req_json(op->r, 204, NULL);
  return rc;
}

static const struct api_op_def delete_op = {"site", delete_change, NULL, NULL};

static enum http_rc delete_site(struct req *r) {
  (void)api_op_run(r, &delete_op, NULL);
  return HTTP_DONE;
}

const struct route api_sites_routes[] = {
    {"POST", "/v1/sites", AUTH_ADMIN, post_site, NULL, 0},
    {"GET", "/v1/sites", AUTH_READ, list_sites, "after,limit,q,sort,state", 0},
    {"GET", "/v1/sites/:id", AUTH_READ, get_site, NULL, 0},
    {"PATCH", "/v1/sites/:id", AUTH_ADMIN, patch_site, NULL, 0},
    {"DELETE", "/v1/sites/:id", AUTH_ADMIN, delete_site, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
