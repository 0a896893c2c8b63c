/* fuzz_node_proto — libFuzzer target: the node protocol bodies (POST /v1/node/heartbeat and
 * POST /v1/node/votes) through controld's own handlers. api_node.c is compiled into this file so
 * its static validators run unchanged; the HTTP layer, the hub, the store and the task board are
 * replaced by recording stubs below. Properties: a rejected body reaches neither the store nor the
 * board, an accepted one reaches them exactly once with every field inside the protocol's limits,
 * and every request gets exactly one reply. */
#include "../../controld/api_node.c"
#include "../../controld/node.c"

#include <stdarg.h>

#include "fuzz_check.h"

/* What the stubs saw for one request; handed to them as the opaque store / board pointers. */
struct fuzz_state {
  int heartbeats; /* store_node_heartbeat calls */
  int votes;      /* tasks_vote calls */
  int replies;    /* req_error / req_json calls */
};

/* ---- stubs of the HTTP layer (http.c) ---- */

void req_json(struct req *r, unsigned status, cJSON *body) {
  struct fuzz_state *fs = r->user;
  char *txt = NULL;
  if (body) {
    txt = json_print(body);
    FUZZ_CHECK(txt != NULL);
    cJSON_Delete(body);
  }
  free(r->resp_body);
  r->resp_body = txt;
  r->resp_len = txt ? strlen(txt) : 0;
  r->status = status;
  r->done = 1;
  fs->replies++;
}

void req_error(struct req *r, unsigned status, const char *code, const char *field, const char *fmt,
               ...) {
  char msg[512];
  va_list ap;
  cJSON *root = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(root, "error");
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  FUZZ_CHECK(code != NULL && msg[0] != '\0');
  cJSON_AddStringToObject(err, "code", code);
  cJSON_AddStringToObject(err, "message", msg);
  json_add_str_or_null(err, "field", field);
  req_json(r, status, root);
}

cJSON *req_body_object(struct req *r) {
  cJSON *v = json_parse(r->body.data, r->body.len);
  if (!v || !cJSON_IsObject(v)) {
    cJSON_Delete(v);
    req_error(r, 400, "malformed_json", NULL, "request body is not a JSON object");
    return NULL;
  }
  return v;
}

int req_query_int(struct req *r, const char *key, int64_t min, int64_t max, int64_t def,
                  int64_t *out) {
  *out = def;
  return 0;
}

void api_store_error(struct req *r, enum store_rc rc, const char *what, const char *conflict) {
  req_error(r, rc == STORE_NOT_FOUND ? 404 : 500, "store", NULL, "%s", what);
}

/* Held polls and the config reply: the stub hub and task board below never hold a poll, nor
   hand out a config. */
void req_response(struct req *r, unsigned status, struct MHD_Response *resp) {
  FUZZ_CHECK(0);
}

void req_suspend(struct req *r) {
  FUZZ_CHECK(0);
}

void req_resume(struct req *r) {
  FUZZ_CHECK(0);
}

/* ---- stubs of the hub, the published config, the store and the task board ---- */

void hub_node_seen(struct hub *h, int64_t node_id, int64_t now) {
  FUZZ_CHECK(node_id > 0);
}

void hub_node_applied(struct hub *h, int64_t node_id, int64_t seq, int64_t now) {
  FUZZ_CHECK(node_id > 0 && seq >= 0);
}

/* The newest publication, for every request. */
#define FUZZ_NEWEST_SEQ 1000

int64_t hub_seq_for(struct hub *h, int64_t seq) {
  (void)h;
  (void)seq;
  return FUZZ_NEWEST_SEQ;
}

int hub_config_poll(struct hub *h, int64_t since, int64_t wait_ms, const struct hub_poll *p) {
  FUZZ_CHECK(p->node_id > 0);
  p->done(p->arg, HUB_UNCHANGED, NULL);
  return 0;
}

struct pub_blob *pub_blob_ref(struct pub_blob *b) {
  FUZZ_CHECK(0);
  return b;
}

void pub_blob_unref(struct pub_blob *b) {
  FUZZ_CHECK(b == NULL);
}

const char *pub_blob_data(const struct pub_blob *b) {
  FUZZ_CHECK(0);
  return NULL;
}

size_t pub_blob_len(const struct pub_blob *b) {
  FUZZ_CHECK(0);
  return 0;
}

int tasks_poll(struct task_board *b, const struct tasks_client_ops *ops, void *client,
               int64_t node_id, int64_t wait_ms) {
  FUZZ_CHECK(node_id > 0);
  ops->reply(client, 304, NULL);
  return 0;
}

enum store_rc store_node_heartbeat(struct store *st, int64_t node_id, const char *version,
                                   int64_t config_seq, int64_t now, const struct node_obs *obs,
                                   int n_obs) {
  struct fuzz_state *fs = (struct fuzz_state *)st;
  fs->heartbeats++;
  FUZZ_CHECK(version != NULL && version[0] != '\0' && strlen(version) <= 63);
  FUZZ_CHECK(config_seq >= 0 && config_seq <= FUZZ_NEWEST_SEQ);
  for (int i = 0; i < n_obs; i++) /* each origin of a site once */
    for (int k = 0; k < i; k++)
      FUZZ_CHECK(obs[i].origin_id != obs[k].origin_id || obs[i].site_id != obs[k].site_id);
  FUZZ_CHECK(n_obs >= 0 && n_obs <= NODE_MAX_OBS);
  FUZZ_CHECK(n_obs == 0 || obs != NULL);
  for (int i = 0; i < n_obs; i++) {
    FUZZ_CHECK(obs[i].site_id >= 1 && obs[i].origin_id >= 1);
    FUZZ_CHECK(obs[i].requests >= 0 && obs[i].failures >= 0);
    FUZZ_CHECK(obs[i].failures <= obs[i].requests);
    FUZZ_CHECK(obs[i].skipped == 0 || obs[i].skipped == 1);
  }
  /* a node deleted while its heartbeat was in flight */
  return (config_seq % 7 == 3) ? STORE_NOT_FOUND : STORE_OK;
}

enum tasks_vote_rc tasks_vote(struct task_board *b, int64_t node_id, int64_t round_id,
                              const struct task_vote *v, int n, int64_t now, int *bad) {
  struct fuzz_state *fs = (struct fuzz_state *)b;
  fs->votes++;
  FUZZ_CHECK(round_id >= 1);
  FUZZ_CHECK(n >= 0 && n <= NODE_MAX_VOTES);
  FUZZ_CHECK(n == 0 || v != NULL);
  for (int i = 0; i < n; i++) {
    FUZZ_CHECK(v[i].task_id >= 1);
    FUZZ_CHECK(v[i].ok == 0 || v[i].ok == 1);
    FUZZ_CHECK(v[i].status >= 0 && v[i].status <= 999);
    FUZZ_CHECK(v[i].latency_ms >= 0 && v[i].latency_ms <= 3600000);
    FUZZ_CHECK(memchr(v[i].error, '\0', sizeof v[i].error) != NULL);
    FUZZ_CHECK(fields_text_valid(v[i].error, 0, (int64_t)sizeof v[i].error - 1));
  }
  /* every answer of the board, chosen by the round id */
  if (round_id % 3 == 1 || n == 0) return TASKS_VOTE_OK;
  if (round_id % 3 == 2) return TASKS_VOTE_LATE;
  if (bad) *bad = (int)(round_id % n);
  return TASKS_VOTE_NOT_YOURS;
}

/* ---- the target ---- */

/* Run one route handler on a body; returns the reply status. */
static unsigned run(const char *method, const char *pattern, const unsigned char *data, size_t size,
                    struct fuzz_state *fs) {
  struct ctx ctx;
  struct req r;
  const struct route *rt = NULL;
  memset(&ctx, 0, sizeof ctx);
  memset(&r, 0, sizeof r);
  memset(fs, 0, sizeof *fs);
  ctx.store = (struct store *)fs;
  ctx.tasks = (struct task_board *)fs;
  for (const struct route *x = api_node_routes; x->method; x++)
    if (strcmp(x->method, method) == 0 && strcmp(x->pattern, pattern) == 0) rt = x;
  FUZZ_CHECK(rt != NULL && rt->auth == AUTH_NODE);
  r.ctx = &ctx;
  r.route = rt;
  r.method = method;
  r.url = pattern;
  r.auth = AUTH_NODE;
  r.node_id = 42;
  r.user = fs;
  buf_init(&r.body, HTTP_BODY_MAX);
  if (size && buf_append(&r.body, data, size) < 0) {
    buf_fini(&r.body);
    return 413;
  }
  FUZZ_CHECK(rt->fn(&r) == HTTP_DONE);
  FUZZ_CHECK(fs->replies == 1 && r.done);
  free(r.resp_body);
  buf_fini(&r.body);
  return r.status;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  log_init("fuzz_node_proto", LOG_TEXT, LOG_ERROR);
  return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  struct fuzz_state fs;
  unsigned st;

  st = run("POST", "/v1/node/heartbeat", data, size, &fs);
  FUZZ_CHECK(fs.votes == 0 && fs.heartbeats <= 1);
  if (st == 204 || st == 404)
    FUZZ_CHECK(fs.heartbeats == 1); /* 404: the stub's "node gone" */
  else
    FUZZ_CHECK(fs.heartbeats == 0 && (st == 400 || st == 413 || st == 422));

  st = run("POST", "/v1/node/votes", data, size, &fs);
  FUZZ_CHECK(fs.heartbeats == 0 && fs.votes <= 1);
  if (fs.votes == 1)
    FUZZ_CHECK(st == 204 || st == 409 || st == 422);
  else
    FUZZ_CHECK(st == 400 || st == 413 || st == 422);
  return 0;
}
