/* api_webhooks — /v1/webhooks: create (secret write-only), list, get, delete; deliveries and test
   through api_deliveries. */
#include <curl/curl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "api_deliveries.h"
#include "api_op.h"
#include "chan.h"
#include "ctx.h"
#include "fields.h"
#include "json.h"
#include "model.h"
#include "store_notify.h"
#include "token.h"

static int valid_url_row(char *url) {
  return model_webhook_url_valid(url);
}

#define W(m) FIELD_AT(struct webhook_rec, m)
static const struct field_def webhook_fields[] = {
    {"url", FIELD_STR, FIELD_REQUIRED | FIELD_SECRET_URL, W(url), 1, 0, 0, NULL, valid_url_row,
     "an http:// or https:// URL with a host", 0, NULL, 0, 0, NULL, NULL},
    {"secret", FIELD_STR, FIELD_REQUIRED | FIELD_SECRET, W(secret), MODEL_WEBHOOK_SECRET_MIN, 0, 0,
     NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
};
#undef W

/* The webhook as r's token may see it: the URL's userinfo and query masked below admin
   (docs/design.md#secrets). */
static cJSON *webhook_json(struct req *r, const struct webhook_rec *w) {
  cJSON *j = cJSON_CreateObject();
  json_add_i64(j, "id", w->id);
  if (api_reveals_secrets(r)) {
    cJSON_AddStringToObject(j, "url", w->url);
  } else {
    struct webhook_rec shown = *w; /* events stays w's */
    fields_redact(webhook_fields, &shown);
    cJSON_AddStringToObject(j, "url", shown.url);
  }
  model_webhook_events_add(j, w->events);
  json_add_time(j, "created_at", w->created_at);
  return j;
}

static const struct api_chan_view view = {
    "webhook",      1,
    "Webhook test", "A test delivery: the webhook is reachable and signed.",
    "webhook_id",   "omit it for every type"};

static enum store_rc create_change(struct api_op *op) {
  struct webhook_rec *w = op->arg;
  enum store_rc rc = store_webhook_create_locked(op->tx, w);
  if (rc == STORE_LIMIT)
    api_limit_error(op->r, STORE_MAX_WEBHOOKS, "webhooks and channels");
  else if (rc == STORE_OK)
    req_json(op->r, 201, webhook_json(op->r, w));
  return rc;
}

static const struct api_op_def create_op = {"webhook", create_change, NULL, NULL};

/* 1 with a 422 reply when the URL's host is a refused target (link-local, metadata, ...). */
static int url_target_refused(struct req *r, const char *url) {
  CURLU *u = curl_url();
  char *host = NULL;
  int refused = 0;
  if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK)
    refused = api_target_refused(r, host, "url");
  curl_free(host);
  curl_url_cleanup(u);
  return refused;
}

static enum http_rc post_webhook(struct req *r) {
  static const char *const nested[] = {"events", NULL};
  cJSON *body = req_body_object(r);
  struct webhook_rec w;
  struct field_err fe;
  memset(&w, 0, sizeof w);
  if (!body) return HTTP_DONE;
  if (fields_apply(body, webhook_fields, nested, "", FIELDS_CREATE, &w, &fe) < 0) {
    req_error(r, fe.status, fe.code, fe.field, "%s", fe.message);
    goto out;
  }
  if (url_target_refused(r, w.url)) goto out;
  if (api_chan_events(r, &view, CHAN_WEBHOOK, cJSON_GetObjectItemCaseSensitive(body, "events"),
                      &w.events) < 0)
    goto out;
  (void)api_op_run(r, &create_op, &w);
out:
  webhook_rec_fini(&w);
  {
    cJSON *sec = cJSON_GetObjectItemCaseSensitive(body, "secret");
    if (cJSON_IsString(sec)) token_wipe(sec->valuestring, strlen(sec->valuestring));
  }
  cJSON_Delete(body);
  return HTTP_DONE;
}

static enum http_rc list_webhooks(struct req *r) {
  struct webhook_rec *arr = NULL;
  int n = 0;
  cJSON *j, *a;
  enum store_rc rc = store_webhook_list(r->ctx->store, &arr, &n);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "webhooks", NULL);
    return HTTP_DONE;
  }
  j = cJSON_CreateObject();
  a = cJSON_AddArrayToObject(j, "webhooks");
  for (int i = 0; i < n; i++) {
    /* the channels of other kinds live under /v1/channels only */
    if (arr[i].kind == CHAN_WEBHOOK) cJSON_AddItemToArray(a, webhook_json(r, &arr[i]));
    webhook_rec_fini(&arr[i]);
  }
  free(arr);
  req_json(r, 200, j);
  return HTTP_DONE;
}

/* Load channel id into *w when it is a webhook: STORE_NOT_FOUND for the other kinds. */
static enum store_rc webhook_get(struct req *r, int64_t id, struct webhook_rec *w) {
  enum store_rc rc = store_webhook_get(r->ctx->store, id, w);
  return rc == STORE_OK && w->kind != CHAN_WEBHOOK ? STORE_NOT_FOUND : rc;
}

static enum http_rc get_webhook(struct req *r) {
  struct webhook_rec w;
  enum store_rc rc = webhook_get(r, r->params[0], &w);
  if (rc != STORE_OK)
    api_store_error(r, rc, "webhook", NULL);
  else
    req_json(r, 200, webhook_json(r, &w));
  webhook_rec_fini(&w);
  return HTTP_DONE;
}

static const struct api_op_def delete_op = {"webhook", api_chan_delete_change, NULL, NULL};

static enum http_rc delete_webhook(struct req *r) {
  struct webhook_rec w;
  enum store_rc rc = webhook_get(r, r->params[0], &w);
  webhook_rec_fini(&w);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "webhook", NULL);
    return HTTP_DONE;
  }
  (void)api_op_run(r, &delete_op, NULL);
  return HTTP_DONE;
}

static enum http_rc list_deliveries(struct req *r) {
  return api_deliveries_list(r, &view);
}

/* POST /v1/webhooks/{id}/test [{"site_id": N}] -> 202, the queued delivery. */
static enum http_rc test_webhook(struct req *r) {
  return api_deliveries_test(r, &view);
}

const struct route api_webhooks_routes[] = {
    {"POST", "/v1/webhooks", AUTH_ADMIN, post_webhook, NULL, 0},
    {"GET", "/v1/webhooks", AUTH_READ, list_webhooks, NULL, 0},
    {"GET", "/v1/webhooks/:id", AUTH_READ, get_webhook, NULL, 0},
    {"DELETE", "/v1/webhooks/:id", AUTH_ADMIN, delete_webhook, NULL, 0},
    {"GET", "/v1/webhooks/:id/deliveries", AUTH_READ, list_deliveries, "after,limit", 0},
    {"POST", "/v1/webhooks/:id/test", AUTH_OPERATOR, test_webhook, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
