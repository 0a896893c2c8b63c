/* api_tokens — /v1/tokens: API tokens with a role (secret shown once), list, revoke. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_op.h"
#include "clock.h"
#include "ctx.h"
#include "json.h"
#include "route.h"
#include "store_tokens.h"
#include "token.h"

static cJSON *token_json(const struct token_rec *t) {
  cJSON *j = cJSON_CreateObject();
  json_add_i64(j, "id", t->id);
  cJSON_AddStringToObject(j, "name", t->name);
  cJSON_AddStringToObject(j, "role", t->role);
  json_add_time(j, "created_at", t->created_at);
  json_add_time(j, "expires_at", t->expires_at);
  return j;
}

/* The state of a token creation. */
struct token_op {
  struct token_rec *t;
  const char *hash, *token;
};

static enum store_rc create_change(struct api_op *op) {
  struct token_op *to = op->arg;
  enum store_rc rc = store_token_create_locked(op->tx, to->t, to->hash);
  cJSON *j;
  if (rc == STORE_LIMIT) {
    api_limit_error(op->r, STORE_MAX_TOKENS, "API tokens");
    return rc;
  }
  if (rc != STORE_OK) {
    api_store_error(op->r, rc, "token", rc == STORE_CONFLICT ? "name" : NULL);
    return rc;
  }
  j = token_json(to->t);
  cJSON_AddStringToObject(j, "token", to->token); /* the secret: shown here only, stored hashed */
  req_json(op->r, 201, j);
  return STORE_OK;
}

static const struct api_op_def create_op = {"token", create_change, NULL, "token"};

static enum http_rc post_token(struct req *r) {
  static const char *const keys[] = {"name", "role", "expires_at", NULL};
  cJSON *body = req_body_object(r), *exp;
  const char *bad = NULL, *name = NULL, *role = NULL;
  struct token_rec t;
  struct token_op to;
  char token[TOKEN_HEX_LEN + 8], hash[65];
  if (!body) return HTTP_DONE;
  memset(&t, 0, sizeof t);
  if (json_only_keys(body, keys, &bad) < 0) {
    req_error(r, 400, "unknown_field", bad, "unknown field '%s'", bad);
    goto out;
  }
  if (json_str(body, "name", STORE_TOKEN_NAME_MAX, &name) != 0 || !fields_name_ok(name)) {
    req_error(r, 422, "invalid_value", "name",
              "name is required: 1-64 characters of letters, digits, '.', '_' or '-'");
    goto out;
  }
  if (json_str(body, "role", 16, &role) != 0 || route_role_parse(role) == AUTH_NONE) {
    req_error(r, 422, "invalid_value", "role", "role is required: admin, operator or read");
    goto out;
  }
  exp = cJSON_GetObjectItemCaseSensitive(body, "expires_at");
  if (exp && !cJSON_IsNull(exp)) {
    if (!cJSON_IsString(exp) || clock_parse_iso(exp->valuestring, &t.expires_at) < 0) {
      req_error(r, 422, "invalid_value", "expires_at",
                "expires_at must be an RFC 3339 time such as 2027-01-31T00:00:00Z, or null");
      goto out;
    }
    if (t.expires_at <= clock_wall_ms()) {
      req_error(r, 422, "invalid_value", "expires_at", "expires_at must be in the future");
      goto out;
    }
  }
  snprintf(t.name, sizeof t.name, "%s", name);
  snprintf(t.role, sizeof t.role, "%s", role);
  if (token_random(token, sizeof token) < 0) {
    req_error(r, 500, "internal", NULL, "no randomness for a token");
    goto out;
  }
  token_sha256_hex(token, strlen(token), hash);
  to.t = &t;
  to.hash = hash;
  to.token = token;
  (void)api_op_run(r, &create_op, &to);
  token_wipe(token, sizeof token);
out:
  cJSON_Delete(body);
  return HTTP_DONE;
}

static enum http_rc list_tokens(struct req *r) {
  struct token_rec *arr = NULL;
  int n = 0;
  cJSON *j, *a;
  enum store_rc rc = store_token_list(r->ctx->store, clock_wall_ms(), &arr, &n);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "tokens", NULL);
    return HTTP_DONE;
  }
  j = cJSON_CreateObject();
  a = cJSON_AddArrayToObject(j, "tokens");
  for (int i = 0; i < n; i++)
    cJSON_AddItemToArray(a, token_json(&arr[i]));
  free(arr);
  req_json(r, 200, j);
  return HTTP_DONE;
}

/* GET /v1/tokens/self: the presented token, so a client learns its own role. */
static enum http_rc get_self(struct req *r) {
  struct token_rec t;
  enum store_rc rc = store_token_get(r->ctx->store, r->token_id, &t);
  if (rc != STORE_OK)
    api_store_error(r, rc, "token", NULL);
  else
    req_json(r, 200, token_json(&t));
  return HTTP_DONE;
}

static enum store_rc delete_change(struct api_op *op) {
  enum store_rc rc = store_token_delete_locked(op->tx, op->r->params[0]);
  if (rc == STORE_OK) req_json(op->r, 204, NULL);
  return rc;
}

static const struct api_op_def delete_op = {"token", delete_change, NULL, NULL};

static enum http_rc delete_token(struct req *r) {
  (void)api_op_run(r, &delete_op, NULL);
  return HTTP_DONE;
}

const struct route api_tokens_routes[] = {
    {"POST", "/v1/tokens", AUTH_ADMIN, post_token, NULL, 0},
    {"GET", "/v1/tokens", AUTH_ADMIN, list_tokens, NULL, 0},
    {"GET", "/v1/tokens/self", AUTH_READ, get_self, NULL, 0},
    {"DELETE", "/v1/tokens/:id", AUTH_ADMIN, delete_token, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
