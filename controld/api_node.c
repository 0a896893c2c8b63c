/* api_node — the node protocol routes under /v1/node/: heartbeat, config long-poll, probe tasks,
 * votes. */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "clock.h"
#include "ctx.h"
#include "fields.h"
#include "hub.h"
#include "json.h"
#include "log.h"
#include "node.h"
#include "publish.h"
#include "store_node.h"
#include "tasks.h"

#define NODE_MAX_OBS 100000
#define NODE_MAX_VOTES 10000
#define NODE_WAIT_MAX_MS 60000

/* Every node call whose input is valid marks the node seen (written in batches by the hub); a
   refused one changes nothing. */
static void seen(struct req *r) {
  hub_node_seen(r->ctx->hub, r->node_id, clock_wall_ms());
}

/* A heartbeat's own fields. */
struct heartbeat {
  char version[64];
  int64_t config_version;
};

/* A node's version as shown on the dashboard: text with no control character. */
static int version_valid(char *v) {
  return fields_text_valid(v, 1, 63);
}

#define H(m) FIELD_AT(struct heartbeat, m)
static const struct field_def heartbeat_fields[] = {
    {"version", FIELD_STR, FIELD_REQUIRED, H(version), 1, 0, 0, NULL, version_valid,
     "1-63 characters of text, no control character", 0, NULL, 0, 0, NULL, NULL},
    {"config_version", FIELD_INT, FIELD_REQUIRED, H(config_version), 0, INT64_MAX / 2, 0, NULL,
     NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
};
#undef H

#define OB(m) FIELD_AT(struct node_obs, m)
static const struct field_def obs_fields[] = {
    {"site_id", FIELD_INT, FIELD_REQUIRED, OB(site_id), 1, INT64_MAX / 2, 0, NULL, NULL, NULL, 0,
     NULL, 0, 0, NULL, NULL},
    {"origin_id", FIELD_INT, FIELD_REQUIRED, OB(origin_id), 1, INT64_MAX / 2, 0, NULL, NULL, NULL,
     0, NULL, 0, 0, NULL, NULL},
    {"requests", FIELD_INT, FIELD_REQUIRED, OB(requests), 0, INT64_MAX / 2, 0, NULL, NULL, NULL, 0,
     NULL, 0, 0, NULL, NULL},
    {"failures", FIELD_INT, FIELD_REQUIRED, OB(failures), 0, INT64_MAX / 2, 0, NULL, NULL, NULL, 0,
     NULL, 0, 0, NULL, NULL},
    {"skipped", FIELD_BOOL, FIELD_REQUIRED, OB(skipped), 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0,
     NULL, NULL},
    {"backup_picks", FIELD_INT, 0, OB(backup_picks), 0, INT64_MAX / 2, 0, NULL, NULL, NULL, 0, NULL,
     0, 0, NULL, NULL},
    {"fail_open", FIELD_INT, 0, OB(fail_open), 0, INT64_MAX / 2, 0, NULL, NULL, NULL, 0, NULL, 0, 0,
     NULL, NULL},
    {"latency_sum_ms", FIELD_INT, 0, OB(latency_sum_ms), 0, INT64_MAX / 2, 0, NULL, NULL, NULL, 0,
     NULL, 0, 0, NULL, NULL},
    {"latency_count", FIELD_INT, 0, OB(latency_count), 0, INT64_MAX / 2, 0, NULL, NULL, NULL, 0,
     NULL, 0, 0, NULL, NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
};
#undef OB

/* Set the reply for a table failure; returns -1. */
static int field_reply(struct req *r, const struct field_err *fe) {
  req_error(r, fe->status, fe->code, fe->field, "%s", fe->message);
  return -1;
}

/* Validate one observation object at index i into o; 0, or -1 with the reply set. */
static int parse_obs(struct req *r, const cJSON *x, int i, struct node_obs *o) {
  char prefix[48];
  struct field_err fe;
  snprintf(prefix, sizeof prefix, "observations[%d]", i);
  memset(o, 0, sizeof *o);
  if (fields_apply(x, obs_fields, NULL, prefix, FIELDS_CREATE, o, &fe) < 0)
    return field_reply(r, &fe);
  if (o->failures > o->requests) {
    char field[64];
    snprintf(field, sizeof field, "%s.failures", prefix);
    req_error(r, 422, "out_of_range", field, "failures cannot exceed requests");
    return -1;
  }
  return 0;
}

/* Refuse a heartbeat that lists an origin twice (node_first_repeat); 0, or -1 with the reply
   set. */
static int obs_repeat(struct req *r, const struct node_obs *obs, int n) {
  int at = node_first_repeat(obs, n);
  char field[64];
  if (at == -1) return 0;
  if (at < 0) {
    req_error(r, 500, "internal", NULL, "out of memory");
    return -1;
  }
  snprintf(field, sizeof field, "observations[%d].origin_id", at);
  req_error(r, 422, "duplicate", field, "origin %lld of site %lld is listed twice",
            (long long)obs[at].origin_id, (long long)obs[at].site_id);
  return -1;
}

static enum http_rc post_heartbeat(struct req *r) {
  static const char *const nested[] = {"observations", NULL};
  cJSON *body, *arr;
  struct heartbeat hb;
  struct field_err fe;
  struct node_obs *obs = NULL;
  int n = 0;
  enum store_rc rc;
  body = req_body_object(r);
  if (!body) return HTTP_DONE;
  memset(&hb, 0, sizeof hb);
  if (fields_apply(body, heartbeat_fields, nested, "", FIELDS_CREATE, &hb, &fe) < 0) {
    field_reply(r, &fe);
    goto out;
  }
  arr = cJSON_GetObjectItemCaseSensitive(body, "observations");
  if (arr && !cJSON_IsNull(arr)) {
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > NODE_MAX_OBS) {
      req_error(r, 422, cJSON_IsArray(arr) ? "out_of_range" : "invalid_type", "observations",
                "observations must be an array of at most %d objects", NODE_MAX_OBS);
      goto out;
    }
    n = cJSON_GetArraySize(arr);
    obs = calloc((size_t)(n ? n : 1), sizeof *obs);
    if (!obs) {
      req_error(r, 500, "internal", NULL, "out of memory");
      goto out;
    }
    {
      int i = 0;
      const cJSON *x;
      cJSON_ArrayForEach(x, arr) {
        if (parse_obs(r, x, i, &obs[i]) < 0) goto out;
        i++;
      }
    }
  }
  if (obs_repeat(r, obs, n) < 0) goto out;
  /* a node cannot have applied a publication that does not exist */
  if (hb.config_version > hub_seq_for(r->ctx->hub, hb.config_version)) {
    req_error(r, 422, "out_of_range", "config_version",
              "config_version is past the newest publication");
    goto out;
  }
  rc = store_node_heartbeat(r->ctx->store, r->node_id, hb.version, hb.config_version,
                            clock_wall_ms(), obs, n);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "node", NULL);
  } else {
    seen(r); /* a refused call changes nothing, not even that (docs/design.md#node-protocol) */
    req_json(r, 204, NULL);
  }
out:
  free(obs);
  cJSON_Delete(body);
  return HTTP_DONE;
}

static void blob_release(void *cls) {
  pub_blob_unref(cls);
}

/* Set r's reply to a config: 200 application/json over the blob's memory (no copy; the response
   holds its own reference) plus an X-Cdnca-Node-Id header with r->node_id (noded reads its id
   from it); 500 when out of memory. */
static void config_blob_reply(struct req *r, struct pub_blob *b) {
  struct MHD_Response *resp;
  char id[32];
  pub_blob_ref(b);
  resp = MHD_create_response_from_buffer_with_free_callback_cls(
      pub_blob_len(b), (void *)pub_blob_data(b), blob_release, b);
  if (!resp) {
    pub_blob_unref(b);
    req_error(r, 500, "internal", NULL, "out of memory");
    return;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  snprintf(id, sizeof id, "%lld", (long long)r->node_id);
  MHD_add_response_header(resp, "X-Cdnca-Node-Id", id);
  req_response(r, 200, resp);
}

/* Set r's reply for how its config poll ended (b: the config, for HUB_CONFIG). */
static void config_reply(struct req *r, enum hub_outcome outcome, struct pub_blob *b) {
  switch (outcome) {
  case HUB_CONFIG:
    config_blob_reply(r, b);
    break;
  case HUB_UNCHANGED: /* http.c adds X-Cdnca-Node-Id, as to every answer to a node */
    req_json(r, 304, NULL);
    break;
  case HUB_REVOKED:
    req_error(r, 401, "unauthorized", NULL, "unknown or revoked token");
    break;
  case HUB_DB_DOWN:
    /* a failover, a restart: the node retries, or moves to another replica */
    req_error(r, 503, "db_unavailable", NULL, "the database cannot be reached (retry shortly)");
    break;
  case HUB_NO_MEMORY:
    req_error(r, 500, "internal", NULL, "out of memory");
    break;
  case HUB_FAILED:
  default:
    req_error(r, 500, "internal", NULL, "cannot build the node config");
    break;
  }
}

/* The config poll's callbacks (struct hub_poll), over its request. */
static void config_suspend(void *arg) {
  req_suspend(arg);
}

static void config_done(void *arg, enum hub_outcome outcome, struct pub_blob *b) {
  struct req *r = arg;
  config_reply(r, outcome, b);
  /* a poll answered at once was never suspended: its handler returns HTTP_DONE */
  if (r->suspended) req_resume(r);
}

static enum http_rc get_config(struct req *r) {
  int64_t since = 0, wait_ms = 25000;
  struct hub_poll p = {r->node_id, config_suspend, config_done, r};
  if (req_query_int(r, "since", 0, INT64_MAX / 2, 0, &since) < 0) return HTTP_DONE;
  if (req_query_int(r, "wait_ms", 0, NODE_WAIT_MAX_MS, 25000, &wait_ms) < 0) return HTTP_DONE;
  seen(r);
  /* asking with since = SEQ says the node applied SEQ (docs/design.md#incidents: propagation) */
  hub_node_applied(r->ctx->hub, r->node_id, since, clock_wall_ms());
  return hub_config_poll(r->ctx->hub, since, wait_ms, &p) ? HTTP_SUSPENDED : HTTP_DONE;
}

/* The task board's answers, over the request that polls it. */
static void task_reply(void *client, unsigned status, cJSON *body) {
  req_json(client, status, body);
}

static void task_error(void *client, unsigned status, const char *code, const char *message) {
  req_error(client, status, code, NULL, "%s", message);
}

static void task_hold(void *client, void *waiter, void (*free_waiter)(void *)) {
  struct req *r = client;
  r->user = waiter;
  r->user_free = free_waiter;
  req_suspend(r);
}

static void task_resume(void *client) {
  req_resume(client);
}

static const struct tasks_client_ops task_client = {task_reply, task_error, task_hold, task_resume};

static enum http_rc get_tasks(struct req *r) {
  int64_t wait_ms = 25000;
  if (req_query_int(r, "wait_ms", 0, NODE_WAIT_MAX_MS, 25000, &wait_ms) < 0) return HTTP_DONE;
  seen(r);
  return tasks_poll(r->ctx->tasks, &task_client, r, r->node_id, wait_ms) ? HTTP_SUSPENDED
                                                                         : HTTP_DONE;
}

/* Validate one result object at index i into v; 0, or -1 with the reply set. */
static int parse_vote(struct req *r, const cJSON *x, int i, struct task_vote *v) {
  static const char *const keys[] = {"task_id", "ok", "status", "error", "latency_ms", NULL};
  const char *bad = NULL, *err = NULL;
  char field[64];
  int64_t n;
  int e;
  memset(v, 0, sizeof *v);
  if (!cJSON_IsObject(x)) {
    snprintf(field, sizeof field, "results[%d]", i);
    req_error(r, 422, "invalid_value", field, "each result must be an object");
    return -1;
  }
  if (json_only_keys(x, keys, &bad) < 0) {
    snprintf(field, sizeof field, "results[%d].%s", i, bad);
    req_error(r, 400, "unknown_field", field, "unknown field '%s'", bad);
    return -1;
  }
  if (json_int(x, "task_id", 1, INT64_MAX / 2, &v->task_id) != 0) {
    snprintf(field, sizeof field, "results[%d].task_id", i);
    req_error(r, 422, "invalid_value", field, "task_id must be a positive integer");
    return -1;
  }
  if (json_bool(x, "ok", &v->ok) != 0) {
    snprintf(field, sizeof field, "results[%d].ok", i);
    req_error(r, 422, "invalid_value", field, "ok is required: a boolean");
    return -1;
  }
  e = json_int(x, "status", 0, 999, &n);
  if (e < 0) {
    snprintf(field, sizeof field, "results[%d].status", i);
    req_error(r, 422, "invalid_value", field, "status must be an integer in [0, 999]");
    return -1;
  }
  v->status = e == 0 ? (int)n : 0;
  e = json_int(x, "latency_ms", 0, 3600000, &n);
  if (e < 0) {
    snprintf(field, sizeof field, "results[%d].latency_ms", i);
    req_error(r, 422, "invalid_value", field, "latency_ms must be an integer in [0, 3600000]");
    return -1;
  }
  v->latency_ms = e == 0 ? (int)n : 0;
  if (json_str(x, "error", sizeof v->error - 1, &err) < 0) {
    snprintf(field, sizeof field, "results[%d].error", i);
    req_error(r, 422, "invalid_value", field, "error must be null or a string of at most %zu bytes",
              sizeof v->error - 1);
    return -1;
  }
  /* shown in the dashboard, the incident report and the log: text only, as a version is */
  if (err && !fields_text_valid(err, 0, (int64_t)sizeof v->error - 1)) {
    snprintf(field, sizeof field, "results[%d].error", i);
    req_error(r, 422, "invalid_string", field, "error must be text without control characters");
    return -1;
  }
  if (err) memcpy(v->error, err, strlen(err) + 1);
  return 0;
}

static enum http_rc post_votes(struct req *r) {
  static const char *const keys[] = {"round_id", "results", NULL};
  cJSON *body, *arr;
  const char *bad = NULL;
  int64_t round_id;
  struct task_vote *v = NULL;
  int n, i = 0, badi = -1;
  const cJSON *x;
  char field[64];
  body = req_body_object(r);
  if (!body) return HTTP_DONE;
  if (json_only_keys(body, keys, &bad) < 0) {
    req_error(r, 400, "unknown_field", bad, "unknown field '%s'", bad);
    goto out;
  }
  if (json_int(body, "round_id", 1, INT64_MAX / 2, &round_id) != 0) {
    req_error(r, 422, "invalid_value", "round_id", "round_id is required: a positive integer");
    goto out;
  }
  arr = cJSON_GetObjectItemCaseSensitive(body, "results");
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > NODE_MAX_VOTES) {
    req_error(r, 422, "invalid_value", "results",
              "results is required: an array of at most %d objects", NODE_MAX_VOTES);
    goto out;
  }
  n = cJSON_GetArraySize(arr);
  v = calloc((size_t)(n ? n : 1), sizeof *v);
  if (!v) {
    req_error(r, 500, "internal", NULL, "out of memory");
    goto out;
  }
  cJSON_ArrayForEach(x, arr) {
    if (parse_vote(r, x, i, &v[i]) < 0) goto out;
    i++;
  }
  switch (tasks_vote(r->ctx->tasks, r->node_id, round_id, v, n, clock_wall_ms(), &badi)) {
  case TASKS_VOTE_OK:
    seen(r); /* only counted votes: a refused call changes nothing, not even that */
    req_json(r, 204, NULL);
    break;
  case TASKS_VOTE_LATE:
    req_error(r, 409, "round_closed", "round_id",
              "round %lld is closed, unknown or past its deadline: votes ignored",
              (long long)round_id);
    break;
  case TASKS_VOTE_ERROR:
    req_error(r, 503, "db_unavailable", NULL,
              "the votes could not be recorded: nothing was kept (retry shortly)");
    break;
  case TASKS_VOTE_NOT_YOURS:
    snprintf(field, sizeof field, "results[%d].task_id", badi);
    req_error(r, 422, "invalid_value", field, "task %lld of round %lld was not given to this node",
              (long long)(badi >= 0 ? v[badi].task_id : 0), (long long)round_id);
    break;
  }
out:
  free(v);
  cJSON_Delete(body);
  return HTTP_DONE;
}

const struct route api_node_routes[] = {
    {"POST", "/v1/node/heartbeat", AUTH_NODE, post_heartbeat, NULL, 0},
    {"GET", "/v1/node/config", AUTH_NODE, get_config, "since,wait_ms", 0},
    {"GET", "/v1/node/tasks", AUTH_NODE, get_tasks, "wait_ms", 0},
    {"POST", "/v1/node/votes", AUTH_NODE, post_votes, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
