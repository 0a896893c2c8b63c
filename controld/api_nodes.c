/* api_nodes — /v1/nodes: enrol (token shown once), list, revoke. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_op.h"
#include "clock.h"
#include "ctx.h"
#include "fields.h"
#include "hub.h"
#include "json.h"
#include "store_node.h"
#include "tasks.h"
#include "token.h"

/* The state of a node enrolment. */
struct node_op {
  struct node_rec *n;
  const char *hash, *token;
};

static enum store_rc create_change(struct api_op *op) {
  struct node_op *no = op->arg;
  enum store_rc rc = store_node_create_locked(op->tx, no->n, no->hash);
  cJSON *j;
  if (rc == STORE_LIMIT) {
    api_limit_error(op->r, STORE_MAX_NODES, "nodes");
    return rc;
  }
  if (rc != STORE_OK) {
    api_store_error(op->r, rc, "node", rc == STORE_CONFLICT ? "name" : NULL);
    return rc;
  }
  j = cJSON_CreateObject();
  json_add_i64(j, "id", no->n->id);
  cJSON_AddStringToObject(j, "name", no->n->name);
  cJSON_AddStringToObject(j, "token", no->token);
  req_json(op->r, 201, j);
  return STORE_OK;
}

/* the token is shown once: an Idempotency-Key replay answers "token": null */
static const struct api_op_def create_op = {"node", create_change, NULL, "token"};

static enum http_rc post_node(struct req *r) {
  cJSON *body = req_body_object(r);
  struct field_err fe;
  struct node_rec n;
  char token[TOKEN_HEX_LEN + 8], hash[65];
  struct node_op no;
  if (!body) return HTTP_DONE;
  memset(&n, 0, sizeof n);
  if (fields_apply_form(body, node_fields, FORM_IN, NULL, "", FIELDS_CREATE, &n, &fe) < 0) {
    req_error(r, fe.status, fe.code, fe.field, "%s", fe.message);
    goto out;
  }
  if (token_random(token, sizeof token) < 0) {
    req_error(r, 500, "internal", NULL, "no randomness for a token");
    goto out;
  }
  token_sha256_hex(token, strlen(token), hash);
  no.n = &n;
  no.hash = hash;
  no.token = token;
  (void)api_op_run(r, &create_op, &no);
  token_wipe(token, sizeof token);
out:
  cJSON_Delete(body);
  return HTTP_DONE;
}

static enum http_rc list_nodes(struct req *r) {
  struct node_rec *arr = NULL;
  int n = 0;
  int64_t now = clock_wall_ms();
  cJSON *j, *a;
  enum store_rc rc = store_node_list(r->ctx->store, &arr, &n);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "nodes", NULL);
    return HTTP_DONE;
  }
  j = cJSON_CreateObject();
  a = cJSON_AddArrayToObject(j, "nodes");
  for (int i = 0; i < n; i++) {
    cJSON *o = cJSON_CreateObject();
    json_add_i64(o, "id", arr[i].id);
    cJSON_AddStringToObject(o, "name", arr[i].name);
    cJSON_AddBoolToObject(o, "online",
                          arr[i].last_seen_at > 0 &&
                              now - arr[i].last_seen_at <= r->ctx->cfg.node_online_ms);
    json_add_time(o, "last_seen_at", arr[i].last_seen_at);
    json_add_i64(o, "config_seq", arr[i].config_seq);
    json_add_str_or_null(o, "version", arr[i].version[0] ? arr[i].version : NULL);
    json_add_time(o, "created_at", arr[i].created_at);
    cJSON_AddItemToArray(a, o);
  }
  free(arr);
  req_json(r, 200, j);
  return HTTP_DONE;
}

static enum store_rc delete_change(struct api_op *op) {
  enum store_rc rc = store_node_delete_locked(op->tx, op->r->params[0]);
  if (rc == STORE_OK) req_json(op->r, 204, NULL);
  return rc;
}

static const struct api_op_def delete_op = {"node", delete_change, NULL, NULL};

static enum http_rc delete_node(struct req *r) {
  if (api_op_run(r, &delete_op, NULL) == 0) { /* revocation is at once: held polls answer 401 */
    if (r->ctx->hub) hub_node_revoked(r->ctx->hub, r->params[0]);
    if (r->ctx->tasks) tasks_node_revoked(r->ctx->tasks, r->params[0]);
  }
  return HTTP_DONE;
}

const struct route api_nodes_routes[] = {
    {"POST", "/v1/nodes", AUTH_ADMIN, post_node, NULL, 0},
    {"GET", "/v1/nodes", AUTH_READ, list_nodes, NULL, 0},
    {"DELETE", "/v1/nodes/:id", AUTH_ADMIN, delete_node, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
