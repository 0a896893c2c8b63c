/* api_origins — /v1/sites/{id}/origins: add, patch, delete. */
#include <string.h>

#include "api.h"
#include "ctx.h"
#include "engine.h"
#include "json.h"

/* Index of origin oid in s, or -1. */
static int find_origin(const struct site_rec *s, int64_t oid) {
  for (int i = 0; i < s->n_origins; i++)
    if (s->origins[i].id == oid) return i;
  return -1;
}

static enum http_rc post_origin(struct req *r) {
  cJSON *body = req_body_object(r);
  struct site_rec s;
  struct origin_rec o;
  struct model_err err;
  enum store_rc rc;
  if (!body) return HTTP_DONE;
  rc = store_site_get(r->ctx->store, r->params[0], &s);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "site", NULL);
    cJSON_Delete(body);
    return HTTP_DONE;
  }
  if (s.n_origins >= STORE_MAX_ORIGINS) {
    req_error(r, 422, "out_of_range", "origins", "a site has at most %d origins", STORE_MAX_ORIGINS);
    goto out;
  }
  if (model_origin_apply(body, &o, 1, "", &err) < 0) {
    api_model_error(r, &err);
    goto out;
  }
  o.site_id = s.id;
  rc = store_origin_add(r->ctx->store, &o);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "site", NULL);
    goto out;
  }
  engine_site_changed(r->ctx, s.id);
  req_json(r, 201, model_origin_json(&o));
out:
  site_rec_fini(&s);
  cJSON_Delete(body);
  return HTTP_DONE;
}

static enum http_rc patch_origin(struct req *r) {
  cJSON *body = req_body_object(r);
  struct site_rec s;
  struct origin_rec o;
  struct model_err err;
  enum store_rc rc;
  int i;
  if (!body) return HTTP_DONE;
  if (r->auth == AUTH_OPERATOR) {
    /* an operator may enable and disable origins, nothing else (DESIGN §4) */
    static const char *const operator_keys[] = {"enabled", NULL};
    const char *bad = NULL;
    if (json_only_keys(body, operator_keys, &bad) < 0) {
      req_error(r, 403, "forbidden_role", bad,
                "the token's role operator may change only an origin's enabled, not %s", bad);
      cJSON_Delete(body);
      return HTTP_DONE;
    }
  }
  rc = store_site_get(r->ctx->store, r->params[0], &s);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "site", NULL);
    cJSON_Delete(body);
    return HTTP_DONE;
  }
  i = find_origin(&s, r->params[1]);
  if (i < 0) {
    req_error(r, 404, "not_found", NULL, "origin not found");
    goto out;
  }
  o = s.origins[i];
  if (model_origin_apply(body, &o, 0, "", &err) < 0) {
    api_model_error(r, &err);
    goto out;
  }
  rc = store_origin_update(r->ctx->store, &o);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "origin", NULL);
    goto out;
  }
  engine_site_changed(r->ctx, s.id);
  site_rec_fini(&s);
  rc = store_site_get(r->ctx->store, r->params[0], &s);
  i = rc == STORE_OK ? find_origin(&s, r->params[1]) : -1;
  if (i < 0) req_error(r, 404, "not_found", NULL, "origin not found");
  else req_json(r, 200, model_origin_json(&s.origins[i]));
out:
  site_rec_fini(&s);
  cJSON_Delete(body);
  return HTTP_DONE;
}

static enum http_rc delete_origin(struct req *r) {
  enum store_rc rc = store_origin_delete(r->ctx->store, r->params[0], r->params[1]);
  if (rc != STORE_OK) api_store_error(r, rc, "origin", NULL);
  else req_json(r, 204, NULL);
  if (rc == STORE_OK) engine_site_changed(r->ctx, r->params[0]);
  return HTTP_DONE;
}

const struct route api_origins_routes[] = {
    {"POST", "/v1/sites/:id/origins", AUTH_ADMIN, post_origin},
    {"PATCH", "/v1/sites/:id/origins/:id", AUTH_OPERATOR, patch_origin},
    {"DELETE", "/v1/sites/:id/origins/:id", AUTH_ADMIN, delete_origin},
    {NULL, NULL, AUTH_NONE, NULL},
};
