/* api_webhooks — /v1/webhooks: create (secret write-only), list, get, delete, deliveries, test. */
#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "api_op.h"
#include "chan.h"
#include "ctx.h"
#include "fields.h"
#include "json.h"
#include "model.h"
#include "names.h"
#include "notify.h"
#include "store_notify.h"
#include "store_sites.h"
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

static cJSON *delivery_json(const struct delivery_rec *d);

static cJSON *delivery_json_rec(const void *rec) {
  return delivery_json(rec);
}

static cJSON *delivery_json(const struct delivery_rec *d) {
  cJSON *j = cJSON_CreateObject();
  json_add_i64(j, "id", d->id);
  cJSON_AddStringToObject(j, "uuid", d->uuid);
  json_add_i64(j, "webhook_id", d->webhook_id);
  json_add_i64(j, "event_id", d->event_id);
  cJSON_AddStringToObject(j, "event_type", d->event_type);
  if (d->site_id > 0)
    json_add_i64(j, "site_id", d->site_id);
  else
    cJSON_AddNullToObject(j, "site_id");
  cJSON_AddStringToObject(j, "state", names_word(NAMES(delivery_state_names), (int)d->state, ""));
  cJSON_AddNumberToObject(j, "attempts", d->attempts);
  if (d->last_status > 0)
    cJSON_AddNumberToObject(j, "last_status", d->last_status);
  else
    cJSON_AddNullToObject(j, "last_status");
  json_add_str_or_null(j, "last_error", d->last_error[0] ? d->last_error : NULL);
  json_add_time(j, "next_attempt_at", d->state == DELIVERY_PENDING ? d->next_attempt_at : 0);
  json_add_time(j, "created_at", d->created_at);
  json_add_time(j, "delivered_at", d->delivered_at);
  return j;
}

/* Validate the "events" filter into w->events (JSON text, NULL = all); 0 or -1 with a 422 set. */
static int read_filter(struct req *r, const cJSON *body, struct webhook_rec *w) {
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(body, "events"), *it;
  cJSON *clean;
  int i = 0;
  char field[32];
  if (!ev || cJSON_IsNull(ev)) return 0;
  if (!cJSON_IsArray(ev) || cJSON_GetArraySize(ev) == 0) {
    req_error(r, 422, "invalid_value", "events",
              "events must be a non-empty array of event types (omit it for every type)");
    return -1;
  }
  clean = cJSON_CreateArray();
  cJSON_ArrayForEach(it, ev) {
    int dup = 0;
    const cJSON *seen;
    if (!cJSON_IsString(it) || !notify_known_type(it->valuestring)) {
      snprintf(field, sizeof field, "events[%d]", i);
      req_error(r, 422, "invalid_value", field,
                "unknown event type (known: level.switched, origin.failback_available, "
                "site.all_levels_unhealthy, site.recovered, origin.health_changed, "
                "incident.opened, incident.mitigated, incident.resolved)");
      cJSON_Delete(clean);
      return -1;
    }
    cJSON_ArrayForEach(seen, clean) if (strcmp(seen->valuestring, it->valuestring) == 0) dup = 1;
    if (!dup) cJSON_AddItemToArray(clean, cJSON_CreateString(it->valuestring));
    i++;
  }
  w->events = json_print(clean);
  cJSON_Delete(clean);
  if (!w->events) {
    req_error(r, 500, "internal", NULL, "out of memory");
    return -1;
  }
  return 0;
}

static enum store_rc create_change(struct api_op *op) {
  struct webhook_rec *w = op->arg;
  enum store_rc rc = store_webhook_create_locked(op->tx, w);
  if (rc == STORE_CONFLICT)
    req_error(op->r, 409, "limit", NULL, "at most %d webhooks can exist", STORE_MAX_WEBHOOKS);
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
  if (read_filter(r, body, &w) < 0) goto out;
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

static enum store_rc delete_change(struct api_op *op) {
  enum store_rc rc = store_webhook_delete_locked(op->tx, op->r->params[0]);
  if (rc == STORE_OK) req_json(op->r, 204, NULL);
  return rc;
}

static const struct api_op_def delete_op = {"webhook", delete_change, NULL, NULL};

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
  struct webhook_rec w;
  struct delivery_rec *arr = NULL;
  int64_t limit, after;
  int n = 0;
  enum store_rc rc;
  if (req_query_int(r, "limit", 1, 1000, 100, &limit) < 0) return HTTP_DONE;
  /* one pagination for every list (docs/design.md#query-parameters-and-lists): after=ID, oldest
   * first */
  if (req_query_int(r, "after", 0, INT64_MAX / 2, 0, &after) < 0) return HTTP_DONE;
  rc = webhook_get(r, r->params[0], &w);
  webhook_rec_fini(&w);
  if (rc == STORE_OK)
    rc = store_delivery_list(r->ctx->store, r->params[0], after, (int)limit + 1, &arr, &n);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "webhook", NULL);
    return HTTP_DONE;
  }
  api_page_reply(r, "deliveries", arr, sizeof *arr, n, limit, offsetof(struct delivery_rec, id),
                 delivery_json_rec);
  free(arr);
  return HTTP_DONE;
}

/* The state of a test delivery. */
struct test_op {
  int64_t site_id;
  const char *site_name, *data;
  int64_t delivery_id;
};

static enum store_rc test_change(struct api_op *op) {
  struct test_op *to = op->arg;
  return store_webhook_test_locked(op->tx, op->r->params[0], to->site_id, to->site_name,
                                   "Webhook test", to->data, &to->delivery_id);
}

static enum store_rc test_answer(struct api_op *op) {
  struct test_op *to = op->arg;
  struct delivery_rec d;
  enum store_rc rc = store_delivery_get_locked(op->tx, to->delivery_id, &d);
  if (rc == STORE_OK) req_json(op->r, 202, delivery_json(&d));
  return rc;
}

static const struct api_op_def test_op = {"webhook", test_change, test_answer, NULL};

/* POST /v1/webhooks/{id}/test [{"site_id": N}] -> 202, the queued delivery. */
static enum http_rc test_webhook(struct req *r) {
  static const char *const keys[] = {"site_id", NULL};
  cJSON *body = NULL, *data = NULL;
  const char *bad = NULL;
  struct site_rec s;
  int64_t site_id = 0;
  struct test_op to;
  char *data_text = NULL;
  int have_site = 0;
  enum store_rc rc;
  if (r->body.len > 0) {
    body = req_body_object(r);
    if (!body) return HTTP_DONE;
    if (json_only_keys(body, keys, &bad) < 0) {
      req_error(r, 400, "unknown_field", bad, "unknown field '%s'", bad);
      goto out;
    }
    if (json_int(body, "site_id", 1, INT64_MAX / 2, &site_id) < 0) {
      req_error(r, 422, "invalid_value", "site_id", "site_id must be a site id");
      goto out;
    }
  }
  {
    struct webhook_rec w;
    rc = webhook_get(r, r->params[0], &w);
    webhook_rec_fini(&w);
    if (rc != STORE_OK) {
      api_store_error(r, rc, "webhook", NULL);
      goto out;
    }
  }
  if (site_id > 0) {
    rc = store_site_get(r->ctx->store, site_id, &s);
    if (rc == STORE_NOT_FOUND) {
      req_error(r, 422, "invalid_value", "site_id", "no site with id %lld", (long long)site_id);
      goto out;
    }
    if (rc != STORE_OK) {
      api_store_error(r, rc, "site", NULL);
      goto out;
    }
    have_site = 1;
  }
  data = cJSON_CreateObject();
  json_add_i64(data, "webhook_id", r->params[0]);
  cJSON_AddStringToObject(data, "message", "A test delivery: the webhook is reachable and signed.");
  data_text = json_print(data);
  if (!data_text) {
    req_error(r, 500, "internal", NULL, "out of memory");
    goto out;
  }
  to.site_id = site_id;
  to.site_name = have_site ? s.name : NULL;
  to.data = data_text;
  (void)api_op_run(r, &test_op, &to);
out:
  if (have_site) site_rec_fini(&s);
  free(data_text);
  cJSON_Delete(data);
  cJSON_Delete(body);
  return HTTP_DONE;
}

const struct route api_webhooks_routes[] = {
    {"POST", "/v1/webhooks", AUTH_ADMIN, post_webhook, NULL},
    {"GET", "/v1/webhooks", AUTH_READ, list_webhooks, NULL},
    {"GET", "/v1/webhooks/:id", AUTH_READ, get_webhook, NULL},
    {"DELETE", "/v1/webhooks/:id", AUTH_ADMIN, delete_webhook, NULL},
    {"GET", "/v1/webhooks/:id/deliveries", AUTH_READ, list_deliveries, "after,limit"},
    {"POST", "/v1/webhooks/:id/test", AUTH_OPERATOR, test_webhook, NULL},
    {NULL, NULL, AUTH_NONE, NULL, NULL},
};
