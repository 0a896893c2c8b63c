/* api_nodes — /v1/nodes: enrol (token shown once), list, revoke. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "clock.h"
#include "ctx.h"
#include "hub.h"
#include "json.h"
#include "token.h"

static int valid_node_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 64) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '-' || *s == '_' || *s == '.'))
      return 0;
  return 1;
}

static enum http_rc post_node(struct req *r) {
  static const char *const keys[] = {"name", NULL};
  cJSON *body = req_body_object(r), *j;
  const char *bad = NULL, *name = NULL;
  struct node_rec n;
  char token[TOKEN_HEX_LEN + 8], hash[65];
  enum store_rc rc;
  if (!body) return HTTP_DONE;
  memset(&n, 0, sizeof n);
  if (json_only_keys(body, keys, &bad) < 0) {
    req_error(r, 400, "unknown_field", bad, "unknown field '%s'", bad);
    goto out;
  }
  if (json_str(body, "name", 64, &name) != 0 || !valid_node_name(name)) {
    req_error(r, 422, "invalid_value", "name",
              "name is required: 1-64 characters of letters, digits, '.', '_' or '-'");
    goto out;
  }
  memcpy(n.name, name, strlen(name) + 1);
  if (token_random(token, sizeof token) < 0) {
    req_error(r, 500, "internal", NULL, "no randomness for a token");
    goto out;
  }
  token_sha256_hex(token, strlen(token), hash);
  rc = store_node_create(r->ctx->store, &n, hash);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "node", rc == STORE_CONFLICT ? "name" : NULL);
    goto wipe;
  }
  j = cJSON_CreateObject();
  json_add_i64(j, "id", n.id);
  cJSON_AddStringToObject(j, "name", n.name);
  cJSON_AddStringToObject(j, "token", token);
  req_json(r, 201, j);
wipe:
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

static enum http_rc delete_node(struct req *r) {
  enum store_rc rc = store_node_delete(r->ctx->store, r->params[0]);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "node", NULL);
    return HTTP_DONE;
  }
  if (r->ctx->hub) hub_node_revoked(r->ctx->hub, r->params[0]); /* revocation is at once */
  req_json(r, 204, NULL);
  return HTTP_DONE;
}

const struct route api_nodes_routes[] = {
    {"POST", "/v1/nodes", AUTH_ADMIN, post_node},
    {"GET", "/v1/nodes", AUTH_READ, list_nodes},
    {"DELETE", "/v1/nodes/:id", AUTH_ADMIN, delete_node},
    {NULL, NULL, AUTH_NONE, NULL},
};
