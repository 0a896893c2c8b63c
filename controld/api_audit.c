/* api_audit — audit records of API writes and GET /v1/audit (see api_audit.h). */
#include "api_audit.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "audit.h"
#include "clock.h"
#include "ctx.h"
#include "json.h"
#include "store_audit.h"

/* The success status of a write whose reply is set after its commit. */
static int default_status(const char *method) {
  if (strcmp(method, "POST") == 0) return 201;
  if (strcmp(method, "DELETE") == 0) return 204;
  return 200;
}

int api_audit_locked(struct store_tx *tx, struct req *r, int status) {
  struct audit_rec a;
  cJSON *body = NULL, *reply = NULL;
  size_t pl = strcspn(r->url, "?");
  memset(&a, 0, sizeof a);
  if (r->body.len) body = json_parse(r->body.data, r->body.len);
  if (r->done && r->resp_body && r->resp_len && r->resp_type &&
      strncmp(r->resp_type, "application/json", 16) == 0)
    reply = json_parse(r->resp_body, r->resp_len);
  a.token_id = r->token_id;
  snprintf(a.token_name, sizeof a.token_name, "%s", r->token_name);
  snprintf(a.method, sizeof a.method, "%s", r->method);
  if (pl > STORE_AUDIT_PATH_MAX) pl = STORE_AUDIT_PATH_MAX;
  memcpy(a.path, r->url, pl);
  a.path[pl] = '\0';
  a.status = r->done && r->status ? (int)r->status : status ? status : default_status(r->method);
  a.site_id = audit_site_id(a.path, reply);
  audit_summary(a.method, a.path, body, reply, a.summary, sizeof a.summary);
  cJSON_Delete(body);
  cJSON_Delete(reply);
  return store_audit_add_locked(tx, &a, clock_wall_ms());
}

static cJSON *audit_json(const void *rec) {
  const struct audit_rec *a = rec;
  cJSON *j = cJSON_CreateObject(), *t;
  json_add_i64(j, "id", a->id);
  json_add_time(j, "at", a->at);
  t = cJSON_AddObjectToObject(j, "token");
  if (a->token_id > 0)
    json_add_i64(t, "id", a->token_id);
  else
    cJSON_AddNullToObject(t, "id");
  json_add_str_or_null(t, "name", a->token_name[0] ? a->token_name : NULL);
  cJSON_AddStringToObject(j, "method", a->method);
  cJSON_AddStringToObject(j, "path", a->path);
  if (a->site_id > 0)
    json_add_i64(j, "site_id", a->site_id);
  else
    cJSON_AddNullToObject(j, "site_id");
  cJSON_AddNumberToObject(j, "status", a->status);
  cJSON_AddStringToObject(j, "summary", a->summary);
  return j;
}

/* GET /v1/audit?after=ID&limit=N&site_id=ID -> {"audit": [...], "next": ID|null}, oldest first. */
static enum http_rc list_audit(struct req *r) {
  int64_t after, limit, site_id;
  struct audit_rec *arr = NULL;
  int n = 0;
  enum store_rc rc;
  if (req_query_int(r, "after", 0, INT64_MAX / 2, 0, &after) < 0) return HTTP_DONE;
  if (req_query_int(r, "limit", 1, 1000, 100, &limit) < 0) return HTTP_DONE;
  if (req_query_int(r, "site_id", 1, INT64_MAX / 2, 0, &site_id) < 0) return HTTP_DONE;
  rc = store_audit_list(r->ctx->store, after, site_id, (int)limit + 1, &arr, &n);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "audit log", NULL);
    return HTTP_DONE;
  }
  api_page_reply(r, "audit", arr, sizeof *arr, n, limit, offsetof(struct audit_rec, id),
                 audit_json);
  free(arr);
  return HTTP_DONE;
}

const struct route api_audit_routes[] = {
    {"GET", "/v1/audit", AUTH_READ, list_audit, "after,limit,site_id", 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
