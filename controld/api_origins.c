/* api_origins — /v1/sites/{id}/origins: add, patch, delete (each one transaction, api_op.h). */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_op.h"
#include "ctx.h"
#include "json.h"
#include "publish.h"
#include "store_sites.h"

/* Index of origin oid in s, or -1. */
static int find_origin(const struct site_rec *s, int64_t oid) {
  for (int i = 0; i < s->n_origins; i++)
    if (s->origins[i].id == oid) return i;
  return -1;
}

/* The state of an origin write. */
struct origin_op {
  cJSON *body;
  struct origin_rec o;
};

/* Set the answer: origin oid of the site as now stored, after the re-evaluation. */
static enum store_rc answer_origin(struct api_op *op, unsigned status, int64_t oid) {
  struct site_rec s;
  enum store_rc rc = store_site_get_locked(op->tx, op->site_id, &s);
  int i;
  if (rc != STORE_OK) return rc;
  i = find_origin(&s, oid);
  if (i < 0) {
    rc = STORE_NOT_FOUND;
  } else {
    req_json(op->r, status, model_origin_json(&s.origins[i]));
    req_set_etag(op->r, s.revision); /* the site's: origins share it */
  }
  site_rec_fini(&s);
  return rc;
}

/* If-Match on an origin route compares the site's revision. */
static enum store_rc site_if_match(struct api_op *op) {
  int64_t revision = 0;
  enum store_rc rc = store_site_revision_locked(op->tx, op->r->params[0], &revision);
  if (rc == STORE_NOT_FOUND) {
    req_error(op->r, 404, "not_found", NULL, "site not found");
    return rc;
  }
  return rc == STORE_OK ? api_op_if_match(op, revision) : rc;
}

static enum store_rc add_change(struct api_op *op) {
  struct origin_op *oo = op->arg;
  enum store_rc rc = site_if_match(op);
  if (rc != STORE_OK) return rc;
  oo->o.site_id = op->r->params[0];
  rc = store_origin_add_locked(op->tx, &oo->o);
  if (rc == STORE_LIMIT) {
    req_error(op->r, 422, "out_of_range", "origins", "a site has at most %d origins",
              SITE_MAX_ORIGINS);
    return rc;
  }
  if (rc != STORE_OK) {
    api_store_error(op->r, rc, "site", NULL);
    return rc;
  }
  op->site_id = oo->o.site_id;
  return STORE_OK;
}

static enum store_rc add_answer(struct api_op *op) {
  struct origin_op *oo = op->arg;
  return answer_origin(op, 201, oo->o.id);
}

static const struct api_op_def add_op = {"origin", add_change, add_answer, NULL};

static enum http_rc post_origin(struct req *r) {
  struct origin_op oo = {.body = req_body_object(r)};
  struct field_err err;
  if (!oo.body) return HTTP_DONE;
  if (model_origin_apply(oo.body, &oo.o, 1, "", &err) < 0)
    api_field_error(r, &err);
  else if (!api_target_refused(r, oo.o.address, "address"))
    (void)api_op_run(r, &add_op, &oo);
  cJSON_Delete(oo.body);
  return HTTP_DONE;
}

/* Read, apply and write in the one transaction: a concurrent PATCH of another field is kept. */
/* 1 when s with its origin i changed to o is published otherwise than s (a change nodes are not
   sent, an operator's note in a disabled origin's description, is no publication), 0 when not,
   -1 when memory runs out. */
static int origin_published_changed(const struct site_rec *s, int i, const struct origin_rec *o) {
  struct site_rec *t = malloc(sizeof *t);
  struct origin_rec *os = malloc((size_t)s->n_origins * sizeof *os);
  int changed = -1;
  if (t && os) {
    *t = *s; /* shallow: read only, never finished */
    memcpy(os, s->origins, (size_t)s->n_origins * sizeof *os);
    os[i] = *o;
    t->origins = os;
    changed = !publish_site_same(s, t);
  }
  free(os);
  free(t);
  return changed;
}

static enum store_rc patch_change(struct api_op *op) {
  struct origin_op *oo = op->arg;
  struct site_rec s;
  struct field_err err;
  enum store_rc rc = store_site_get_locked(op->tx, op->r->params[0], &s);
  int i, publish;
  if (rc != STORE_OK) {
    api_store_error(op->r, rc, "site", NULL);
    return rc;
  }
  i = find_origin(&s, op->r->params[1]);
  if (i < 0) {
    site_rec_fini(&s);
    req_error(op->r, 404, "not_found", NULL, "origin not found");
    return STORE_NOT_FOUND;
  }
  rc = api_op_if_match(op, s.revision);
  if (rc != STORE_OK) {
    site_rec_fini(&s);
    return rc;
  }
  oo->o = s.origins[i];
  if (model_origin_apply(oo->body, &oo->o, 0, "", &err) < 0) {
    site_rec_fini(&s);
    api_field_error(op->r, &err);
    return STORE_ERROR;
  }
  /* a new address is checked; an unchanged one stays (the origin can still be disabled) */
  if (cJSON_GetObjectItemCaseSensitive(oo->body, "address") &&
      api_target_refused(op->r, oo->o.address, "address")) {
    site_rec_fini(&s);
    return STORE_ERROR;
  }
  publish = origin_published_changed(&s, i, &oo->o);
  site_rec_fini(&s);
  if (publish < 0) return STORE_ERROR;
  rc = store_origin_update_locked(op->tx, &oo->o, publish);
  if (rc != STORE_OK) return rc;
  op->site_id = oo->o.site_id;
  return STORE_OK;
}

static enum store_rc patch_answer(struct api_op *op) {
  return answer_origin(op, 200, op->r->params[1]);
}

static const struct api_op_def patch_op = {"origin", patch_change, patch_answer, NULL};

static enum http_rc patch_origin(struct req *r) {
  struct origin_op oo = {.body = req_body_object(r)};
  if (!oo.body) return HTTP_DONE;
  if (r->auth == AUTH_OPERATOR) {
    /* an operator may change the rows marked FIELD_OPERATOR, nothing else
       (docs/design.md#tokens-and-roles) */
    const char *keys[8], *bad = NULL;
    char words[128];
    if (fields_names_flagged(site_origin_fields, FORM_IN, FIELD_OPERATOR, keys, 8) < 0)
      keys[0] = NULL;
    if (json_only_keys(oo.body, keys, &bad) < 0) {
      req_error(r, 403, "forbidden_role", bad,
                "the token's role operator may change only an origin's %s, not %s",
                json_words(keys, words, sizeof words), bad);
      cJSON_Delete(oo.body);
      return HTTP_DONE;
    }
  }
  (void)api_op_run(r, &patch_op, &oo);
  cJSON_Delete(oo.body);
  return HTTP_DONE;
}

static enum store_rc delete_change(struct api_op *op) {
  enum store_rc rc = site_if_match(op);
  if (rc != STORE_OK) return rc;
  rc = store_origin_delete_locked(op->tx, op->r->params[0], op->r->params[1]);
  if (rc != STORE_OK) return rc;
  op->site_id = op->r->params[0];
  req_json(op->r, 204, NULL);
  return STORE_OK;
}

static const struct api_op_def delete_op = {"origin", delete_change, NULL, NULL};

static enum http_rc delete_origin(struct req *r) {
  (void)api_op_run(r, &delete_op, NULL);
  return HTTP_DONE;
}

const struct route api_origins_routes[] = {
    {"POST", "/v1/sites/:id/origins", AUTH_ADMIN, post_origin, NULL, 0},
    {"PATCH", "/v1/sites/:id/origins/:id", AUTH_OPERATOR, patch_origin, NULL, 0},
    {"DELETE", "/v1/sites/:id/origins/:id", AUTH_ADMIN, delete_origin, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
