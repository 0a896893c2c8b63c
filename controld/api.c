/* api — route list, /healthz, /metrics, shared error replies. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "coord.h"
#include "ctx.h"
#include "json.h"
#include "metrics.h"
#include "sitemetrics.h"
#include "store_tokens.h"
#include "token.h"

int api_authenticate(struct ctx *ctx, const char *token, struct http_identity *out) {
  char hash[65];
  struct token_auth a;
  token_sha256_hex(token, strlen(token), hash);
  switch (store_token_auth(ctx->store, hash, clock_wall_ms(), &a)) {
  case 0:
    break;
  case 1:
    return HTTP_ID_UNKNOWN;
  default:
    return store_db_up(ctx->store) ? HTTP_ID_ERROR : HTTP_ID_DB_DOWN;
  }
  out->auth = a.kind == STORE_TOKEN_NODE ? AUTH_NODE : route_role_parse(a.role);
  out->node_id = a.node_id;
  out->token_id = a.token_id;
  snprintf(out->name, sizeof out->name, "%s", a.name);
  return HTTP_ID_KNOWN;
}

void api_field_error(struct req *r, const struct field_err *err) {
  req_error(r, err->status, err->code, err->field[0] ? err->field : NULL, "%s", err->message);
}

void api_store_error(struct req *r, enum store_rc rc, const char *what, const char *conflict) {
  if (rc == STORE_NOT_FOUND)
    req_error(r, 404, "not_found", NULL, "%s not found", what);
  else if (rc == STORE_CONFLICT)
    req_error(r, 409, "conflict", conflict && *conflict ? conflict : NULL, "%s is already taken",
              conflict && *conflict ? conflict : what);
  else if (rc == STORE_LIMIT)
    req_error(r, 422, "out_of_range", NULL, "%s: a limit would be exceeded", what);
  else if (rc == STORE_UNAVAILABLE || !store_db_up(r->ctx->store))
    req_error(r, 503, "db_unavailable", NULL,
              "the database cannot be reached: nothing was changed (retry shortly)");
  else if (rc == STORE_FULL || store_storage_full(r->ctx->store))
    req_error(r, 507, "storage_full", NULL,
              "the database disk is full: nothing was changed (free space, then retry)");
  else
    req_error(r, 500, "internal", NULL, "storage error while handling %s", what);
}

void api_limit_error(struct req *r, int64_t cap, const char *plural) {
  req_error(r, 409, "limit", NULL, "at most %lld %s can exist", (long long)cap, plural);
}

int api_target_refused(struct req *r, const char *host, const char *field) {
  const char *why = NULL;
  if (!targets_refused(&r->ctx->targets, host, &why)) return 0;
  req_error(r, 422, "target_refused", field,
            "%s is %s: origins and webhooks may not point there (loopback and private "
            "addresses are allowed; see --deny-targets)",
            host, why);
  return 1;
}

int api_reveals_secrets(const struct req *r) {
  return r->auth == AUTH_ADMIN;
}

static enum http_rc get_healthz(struct req *r) {
  cJSON *j = cJSON_CreateObject();
  int full = store_storage_full(r->ctx->store);
  /* a read of the schema version is the database probe: it fails when the server is gone */
  int version = store_schema_version(r->ctx->store);
  int down = version < 0 || !store_db_up(r->ctx->store);
  /* reads still work while the disk is full: degraded, not down */
  cJSON_AddStringToObject(j, "status", down ? "down" : full ? "degraded" : "ok");
  cJSON_AddStringToObject(j, "db", down ? "down" : "ok");
  cJSON_AddStringToObject(j, "storage", full ? "full" : "ok");
  cJSON_AddStringToObject(j, "version", CDNCA_VERSION);
  cJSON_AddNumberToObject(j, "schema_version", version);
  /* docs/design.md#engine-lease: the engine runs probe rounds, switching, webhook delivery and
     pruning (with SQLite the one process, epoch 0) */
  cJSON_AddStringToObject(j, "role", coord_is_engine(r->ctx->coord) ? "engine" : "replica");
  cJSON_AddNumberToObject(j, "epoch", (double)coord_epoch(r->ctx->coord));
  req_json(r, down ? 503 : 200, j);
  return HTTP_DONE;
}

static enum http_rc get_metrics(struct req *r) {
  struct buf b;
  int up = store_schema_version(r->ctx->store) >= 0 && store_db_up(r->ctx->store);
  metrics_set(r->ctx->metrics, "cdnca_db_up", "", up);
  metrics_set(r->ctx->metrics, "cdnca_engine_leader", "", coord_is_engine(r->ctx->coord));
  metrics_set(r->ctx->metrics, "cdnca_lease_epoch", "", (double)coord_epoch(r->ctx->coord));
  buf_init(&b, 0);
  metrics_set(r->ctx->metrics, "cdnca_signals_listening", "", coord_listening(r->ctx->coord));
  metrics_set(r->ctx->metrics, "cdnca_signals_received_total", "",
              (double)coord_received(r->ctx->coord));
  /* without the database the per-site block may have nothing to serve: the process's own
     metrics still go out (cdnca_db_up 0 says why the block is missing) */
  if (metrics_render(r->ctx->metrics, &b) < 0 ||
      (r->ctx->sitemetrics &&
       sitemetrics_render(r->ctx->sitemetrics, clock_mono_ms(), clock_wall_ms(), &b) < 0 &&
       store_db_up(r->ctx->store))) {
    buf_fini(&b);
    req_error(r, 500, "internal", NULL, "cannot render metrics");
    return HTTP_DONE;
  }
  {
    size_t len = b.len;
    req_raw(r, 200, "text/plain; version=0.0.4", buf_take(&b), len);
  }
  return HTTP_DONE;
}

const struct route api_misc_routes[] = {
    {"GET", "/healthz", AUTH_NONE, get_healthz, NULL, 0},
    {"GET", "/metrics", AUTH_NONE, get_metrics, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};

extern const struct route api_events_routes[];    /* api_events.c: messages, notifications */
extern const struct route api_webhooks_routes[];  /* api_webhooks.c */
extern const struct route api_channels_routes[];  /* api_channels.c */
extern const struct route api_status_routes[];    /* api_status.c: status card, verdicts, switch */
extern const struct route api_fleet_routes[];     /* api_fleet.c: the fleet summary */
extern const struct route api_tokens_routes[];    /* api_tokens.c: API tokens with roles */
extern const struct route api_audit_routes[];     /* api_audit.c: the audit log */
extern const struct route api_openapi_routes[];   /* api_openapi.c: the OpenAPI document */
extern const struct route api_incidents_routes[]; /* api_incidents.c: incidents */
extern const struct route api_enrol_routes[];     /* api_enrol.c: enrolment keys, node enrol */
extern const struct route api_drills_routes[];    /* api_drills.c: failover drills */

const struct route *const api_tables[] = {
    api_misc_routes,    api_ui_routes,       api_sites_routes,
    api_origins_routes, api_nodes_routes,    api_node_routes,
    api_events_routes,  api_webhooks_routes, api_channels_routes,
    api_status_routes,  api_fleet_routes,    api_tokens_routes,
    api_audit_routes,   api_openapi_routes,  api_incidents_routes,
    api_enrol_routes,   api_drills_routes,   NULL,
};

/* api_page_reply's to_json, called through api_page_reply_arg */
static cJSON *plain_json(const void *rec, const void *arg) {
  cJSON *(*const *to_json)(const void *) = arg;
  return (*to_json)(rec);
}

void api_page_reply(struct req *r, const char *key, const void *recs, size_t elem, int n,
                    int64_t limit, size_t id_offset, cJSON *(*to_json)(const void *rec)) {
  api_page_reply_arg(r, key, recs, elem, n, limit, id_offset, plain_json, &to_json);
}

int api_page_query(struct req *r, int64_t *limit, int64_t *after) {
  if (req_query_int(r, "limit", 1, 1000, 100, limit) < 0) return -1;
  return req_query_int(r, "after", 0, INT64_MAX / 2, 0, after) < 0 ? -1 : 0;
}

void api_page_answer(struct req *r, enum store_rc rc, const char *what, const char *key,
                     const void *recs, size_t elem, int n, int64_t limit, size_t id_offset,
                     cJSON *(*to_json)(const void *rec)) {
  if (rc != STORE_OK)
    api_store_error(r, rc, what, NULL);
  else
    api_page_reply(r, key, recs, elem, n, limit, id_offset, to_json);
}

void api_page_reply_arg(struct req *r, const char *key, const void *recs, size_t elem, int n,
                        int64_t limit, size_t id_offset,
                        cJSON *(*to_json)(const void *rec, const void *arg), const void *arg) {
  const char *base = recs;
  cJSON *j = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(j, key);
  for (int i = 0; i < n && i < limit; i++)
    cJSON_AddItemToArray(a, to_json(base + (size_t)i * elem, arg));
  if (n > limit) {
    int64_t id;
    memcpy(&id, base + (size_t)(limit - 1) * elem + id_offset, sizeof id);
    json_add_i64(j, "next", id);
  } else {
    cJSON_AddNullToObject(j, "next");
  }
  req_json(r, 200, j);
}
