/* api_channels — /v1/channels: notification channels of every kind (webhook, slack, pagerduty,
   email; docs/design.md, Notification channels): create, list, get, update, delete, deliveries,
   test. Secrets (a webhook's secret, a Slack URL, a routing key, an SMTP password) are write-only:
   no answer, log line, audit summary or error carries them. */
#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_deliveries.h"
#include "api_op.h"
#include "chan.h"
#include "ctx.h"
#include "fields.h"
#include "json.h"
#include "model.h"
#include "names.h"
#include "store_notify.h"
#include "store_sites.h"
#include "token.h"

/* A channel's body as the API reads it (one field table; the lists are read by hand). */
struct chan_in {
  char kind[16];
  char name[65];
  char url[STORE_WEBHOOK_URL_MAX + 1];
  char secret[STORE_WEBHOOK_SECRET_MAX + 1];
  char routing_key[STORE_WEBHOOK_SECRET_MAX + 1];
  char smtp_url[STORE_WEBHOOK_URL_MAX + 1];
  char from[CHAN_EMAIL_ADDR_MAX + 1];
  char username[256];
  char password[STORE_WEBHOOK_SECRET_MAX + 1];
};

static const char *const kind_choices[] = {"webhook", "slack", "pagerduty", "email", NULL};

static int name_ok(char *s) {
  return s[0] == '\0' || fields_text_valid(s, 0, 64);
}

#define C(m) FIELD_AT(struct chan_in, m)
static const struct field_def chan_fields[] = {
    {"kind", FIELD_ENUM, FIELD_REQUIRED, C(kind), 0, 0, 0, kind_choices, NULL,
     "one of webhook, slack, pagerduty, email", 0, NULL, 0, 0, NULL, NULL},
    {"name", FIELD_STR, 0, C(name), 0, 0, 0, NULL, name_ok,
     "up to 64 characters, no control characters", 0, NULL, 0, 0, NULL, NULL},
    {"url", FIELD_STR, 0, C(url), 1, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
    {"secret", FIELD_STR, 0, C(secret), MODEL_WEBHOOK_SECRET_MIN, 0, 0, NULL, NULL, NULL, 0, NULL,
     0, 0, NULL, NULL},
    {"routing_key", FIELD_STR, 0, C(routing_key), 1, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL,
     NULL},
    {"smtp_url", FIELD_STR, 0, C(smtp_url), 1, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
    {"from", FIELD_STR, 0, C(from), 1, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
    {"username", FIELD_STR, FIELD_NULLABLE, C(username), 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0,
     NULL, NULL},
    {"password", FIELD_STR, FIELD_NULLABLE, C(password), 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0,
     NULL, NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
};
#undef C

/* The body keys each kind takes besides kind, name, events and site_ids. */
static const char *const kind_keys[CHAN_KINDS][6] = {
    [CHAN_WEBHOOK] = {"url", "secret", NULL},
    [CHAN_SLACK] = {"url", NULL},
    [CHAN_PAGERDUTY] = {"routing_key", "url", NULL},
    [CHAN_EMAIL] = {"smtp_url", "from", "to", "username", "password", NULL},
};

static void wipe_in(struct chan_in *in) {
  token_wipe(in->url, sizeof in->url);
  token_wipe(in->secret, sizeof in->secret);
  token_wipe(in->routing_key, sizeof in->routing_key);
  token_wipe(in->password, sizeof in->password);
}

/* Wipe the secret strings of a request body before it is freed. */
static void wipe_body(cJSON *body) {
  static const char *const keys[] = {"url", "secret", "routing_key", "password", NULL};
  for (int i = 0; body && keys[i]; i++) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(body, keys[i]);
    if (cJSON_IsString(v)) token_wipe(v->valuestring, strlen(v->valuestring));
  }
}

/* ---- answers ---- */

static cJSON *chan_json(const struct webhook_rec *w) {
  cJSON *j = cJSON_CreateObject(), *cfg, *v;
  json_add_i64(j, "id", w->id);
  cJSON_AddStringToObject(j, "kind", names_word(NAMES(chan_kind_names), w->kind, "webhook"));
  cJSON_AddStringToObject(j, "name", w->name);
  model_webhook_events_add(j, w->events);
  v = w->site_ids ? json_parse(w->site_ids, strlen(w->site_ids)) : NULL;
  cJSON_AddItemToObject(j, "site_ids", cJSON_IsArray(v) ? v : cJSON_CreateNull());
  if (v && !cJSON_IsArray(v)) cJSON_Delete(v);
  switch (w->kind) {
  case CHAN_WEBHOOK:
    cJSON_AddStringToObject(j, "url", w->url);
    cJSON_AddBoolToObject(j, "secret_set", w->secret[0] != '\0');
    break;
  case CHAN_SLACK: /* the URL holds Slack's token: never shown */
    cJSON_AddBoolToObject(j, "url_set", w->url[0] != '\0');
    break;
  case CHAN_PAGERDUTY:
    cJSON_AddStringToObject(j, "url", w->url);
    cJSON_AddBoolToObject(j, "routing_key_set", w->secret[0] != '\0');
    break;
  case CHAN_EMAIL:
    cJSON_AddStringToObject(j, "smtp_url", w->url);
    cfg = w->config ? json_parse(w->config, strlen(w->config)) : NULL;
    v = cJSON_GetObjectItemCaseSensitive(cfg, "from");
    cJSON_AddStringToObject(j, "from", cJSON_IsString(v) ? v->valuestring : "");
    v = cJSON_DetachItemFromObjectCaseSensitive(cfg, "to");
    cJSON_AddItemToObject(j, "to", cJSON_IsArray(v) ? v : cJSON_CreateArray());
    if (v && !cJSON_IsArray(v)) cJSON_Delete(v);
    v = cJSON_GetObjectItemCaseSensitive(cfg, "username");
    json_add_str_or_null(j, "username",
                         cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL);
    cJSON_AddBoolToObject(j, "password_set", w->secret[0] != '\0');
    cJSON_Delete(cfg);
    break;
  default:
    break;
  }
  json_add_time(j, "created_at", w->created_at);
  return j;
}

/* ---- validation ---- */

static const struct api_chan_view view = {
    "channel",      0,
    "Channel test", "A test message: the channel is reachable.",
    "channel_id",   "null for every type"};

/* The "site_ids" filter into w->site_ids (NULL = every site): ids of existing sites. */
static int read_sites(struct req *r, const cJSON *sv, struct webhook_rec *w) {
  const cJSON *it;
  cJSON *clean;
  int i = 0;
  char field[32];
  free(w->site_ids);
  w->site_ids = NULL;
  if (!sv || cJSON_IsNull(sv)) return 0;
  if (!cJSON_IsArray(sv) || cJSON_GetArraySize(sv) == 0 ||
      cJSON_GetArraySize(sv) > CHAN_MAX_SITES) {
    req_error(r, 422, "invalid_value", "site_ids",
              "site_ids must be null (every site) or an array of 1 to %d site ids", CHAN_MAX_SITES);
    return -1;
  }
  clean = cJSON_CreateArray();
  cJSON_ArrayForEach(it, sv) {
    struct site_rec s;
    enum store_rc rc;
    snprintf(field, sizeof field, "site_ids[%d]", i++);
    if (!json_is_int(it, 1, INT64_MAX / 2)) {
      req_error(r, 422, "invalid_value", field, "a site id");
      cJSON_Delete(clean);
      return -1;
    }
    rc = store_site_get(r->ctx->store, (int64_t)it->valuedouble, &s);
    if (rc == STORE_OK) site_rec_fini(&s);
    if (rc != STORE_OK) {
      if (rc == STORE_NOT_FOUND)
        req_error(r, 422, "invalid_value", field, "no site with id %lld",
                  (long long)it->valuedouble);
      else
        api_store_error(r, rc, "site", NULL);
      cJSON_Delete(clean);
      return -1;
    }
    cJSON_AddItemToArray(clean, cJSON_CreateNumber(it->valuedouble));
  }
  w->site_ids = json_print(clean);
  cJSON_Delete(clean);
  if (!w->site_ids) {
    req_error(r, 500, "internal", NULL, "out of memory");
    return -1;
  }
  return 0;
}

/* The scheme and host of url (curl frees host); 0, or -1 when it does not parse. */
static int url_parts(const char *url, const char *const *schemes, char **scheme, char **host,
                     int *userinfo) {
  CURLU *u = curl_url();
  char *user = NULL;
  int rc = -1;
  *scheme = *host = NULL;
  if (!u || curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_SCHEME, scheme, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_HOST, host, 0) != CURLUE_OK || !(*host)[0])
    goto out;
  *userinfo = curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK;
  for (int i = 0; schemes[i]; i++)
    if (strcmp(schemes[i], *scheme) == 0) rc = 0;
  for (const char *p = url; *p; p++)
    if ((unsigned char)*p <= 0x20 || *p == 0x7F) rc = -1;
out:
  curl_free(user);
  curl_url_cleanup(u);
  return rc;
}

/* Check an https URL field (http only to loopback); 0 or -1 with a 422. The value never appears in
   the error (it may hold a token). */
static int check_https(struct req *r, const char *field, const char *url) {
  static const char *const schemes[] = {"http", "https", NULL};
  char *scheme, *host;
  int userinfo = 0, rc = -1;
  if (url_parts(url, schemes, &scheme, &host, &userinfo) < 0)
    req_error(r, 422, "invalid_value", field, "%s must be an https:// URL with a host", field);
  else if (strcmp(scheme, "https") != 0 && !chan_host_loopback(host))
    req_error(r, 422, "invalid_value", field,
              "%s must be https:// (http:// only to a loopback address)", field);
  else if (!api_target_refused(r, host, field))
    rc = 0;
  curl_free(scheme);
  curl_free(host);
  return rc;
}

/* 0, or -1 with a 422 target_refused when url's host is on the deny list. */
static int check_target(struct req *r, const char *field, const char *url) {
  static const char *const schemes[] = {"http", "https", NULL};
  char *scheme, *host;
  int userinfo = 0, rc = 0;
  if (url_parts(url, schemes, &scheme, &host, &userinfo) == 0 && api_target_refused(r, host, field))
    rc = -1;
  curl_free(scheme);
  curl_free(host);
  return rc;
}

static int check_smtp(struct req *r, const char *url) {
  static const char *const schemes[] = {"smtp", "smtps", NULL};
  char *scheme, *host;
  int userinfo = 0, rc = -1;
  if (url_parts(url, schemes, &scheme, &host, &userinfo) < 0)
    req_error(r, 422, "invalid_value", "smtp_url",
              "smtp_url must be smtps://host[:port] or smtp://host[:port] (STARTTLS)");
  else if (userinfo)
    req_error(r, 422, "invalid_value", "smtp_url",
              "smtp_url may not carry credentials: use username and password");
  else if (!api_target_refused(r, host, "smtp_url"))
    rc = 0;
  curl_free(scheme);
  curl_free(host);
  return rc;
}

/* The email kind's "to" list and from/username into w->config; 0 or -1 with a 422. */
static int read_email(struct req *r, const cJSON *body, const struct chan_in *in,
                      struct webhook_rec *w) {
  const cJSON *to = cJSON_GetObjectItemCaseSensitive(body, "to"), *it;
  cJSON *cfg = w->config ? json_parse(w->config, strlen(w->config)) : NULL, *list;
  char field[32];
  int i = 0, rc = -1;
  if (!cJSON_IsObject(cfg)) {
    cJSON_Delete(cfg);
    cfg = cJSON_CreateObject();
  }
  if (cJSON_GetObjectItemCaseSensitive(body, "from")) {
    if (!chan_email_addr_ok(in->from)) {
      req_error(r, 422, "invalid_value", "from", "from must be an address local@domain");
      goto out;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "from");
    cJSON_AddStringToObject(cfg, "from", in->from);
  }
  if (cJSON_GetObjectItemCaseSensitive(body, "username")) {
    if (!fields_text_valid(in->username, 0, 255)) {
      req_error(r, 422, "invalid_value", "username", "no control characters");
      goto out;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "username");
    cJSON_AddStringToObject(cfg, "username", in->username);
  }
  if (to) {
    if (!cJSON_IsArray(to) || cJSON_GetArraySize(to) == 0 ||
        cJSON_GetArraySize(to) > CHAN_EMAIL_MAX_TO) {
      req_error(r, 422, "invalid_value", "to", "to must be an array of 1 to %d addresses",
                CHAN_EMAIL_MAX_TO);
      goto out;
    }
    list = cJSON_CreateArray();
    cJSON_ArrayForEach(it, to) {
      snprintf(field, sizeof field, "to[%d]", i++);
      if (!cJSON_IsString(it) || !chan_email_addr_ok(it->valuestring)) {
        req_error(r, 422, "invalid_value", field, "an address local@domain");
        cJSON_Delete(list);
        goto out;
      }
      cJSON_AddItemToArray(list, cJSON_CreateString(it->valuestring));
    }
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "to");
    cJSON_AddItemToObject(cfg, "to", list);
  }
  if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cfg, "from"))) {
    req_error(r, 422, "required", "from", "from is required for kind email");
    goto out;
  }
  if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(cfg, "to"))) {
    req_error(r, 422, "required", "to", "to is required for kind email");
    goto out;
  }
  free(w->config);
  w->config = json_print(cfg);
  rc = w->config ? 0 : -1;
  if (rc < 0) req_error(r, 500, "internal", NULL, "out of memory");
out:
  cJSON_Delete(cfg);
  return rc;
}

static int has(const cJSON *body, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(body, key) != NULL;
}

/* Apply a body onto w (a new channel: creating = 1, w zeroed; else the stored one). 0, or -1 with
   the error answered and nothing to store. */
static int apply_body(struct req *r, const cJSON *body, struct webhook_rec *w, int creating) {
  static const char *const nested[] = {"events", "site_ids", "to", NULL};
  struct chan_in in;
  struct field_err fe;
  const cJSON *it;
  int kind, rc = -1;
  memset(&in, 0, sizeof in);
  /* the kind first: an unknown one is named before anything else */
  it = cJSON_GetObjectItemCaseSensitive(body, "kind");
  if (it && !creating) {
    if (!cJSON_IsString(it) || chan_kind_parse(it->valuestring) != w->kind) {
      req_error(r, 422, "invalid_value", "kind",
                "a channel's kind cannot change: create a new channel");
      goto out;
    }
  }
  if (fields_apply(body, chan_fields, nested, "", creating ? FIELDS_CREATE : 0, &in, &fe) < 0) {
    req_error(r, fe.status, fe.code, fe.field, "%s", fe.message);
    goto out;
  }
  kind = creating ? chan_kind_parse(in.kind) : w->kind;
  if (kind < 0) {
    req_error(r, 422, "invalid_value", "kind",
              "kind must be one of webhook, slack, pagerduty, email");
    goto out;
  }
  w->kind = kind;
  cJSON_ArrayForEach(it, body) {
    static const char *const common[] = {"kind", "name", "events", "site_ids", NULL};
    int ok = 0;
    for (int i = 0; common[i]; i++)
      if (strcmp(common[i], it->string) == 0) ok = 1;
    for (int i = 0; kind_keys[kind][i]; i++)
      if (strcmp(kind_keys[kind][i], it->string) == 0) ok = 1;
    if (!ok) {
      req_error(r, 422, "invalid_value", it->string, "%s is not a field of kind %s", it->string,
                chan_kind_names[kind]);
      goto out;
    }
  }
  if (has(body, "name")) snprintf(w->name, sizeof w->name, "%s", in.name);
  if (has(body, "events") &&
      api_chan_events(r, &view, kind, cJSON_GetObjectItemCaseSensitive(body, "events"),
                      &w->events) < 0)
    goto out;
  if (creating && kind == CHAN_PAGERDUTY && !w->events) {
    const char *pd_types[EVENT_TYPES + 1];
    cJSON *d = cJSON_CreateArray();
    chan_pd_types(pd_types);
    for (int i = 0; pd_types[i]; i++)
      cJSON_AddItemToArray(d, cJSON_CreateString(pd_types[i]));
    w->events = json_print(d);
    cJSON_Delete(d);
  }
  if (has(body, "site_ids") &&
      read_sites(r, cJSON_GetObjectItemCaseSensitive(body, "site_ids"), w) < 0)
    goto out;
  switch (kind) {
  case CHAN_WEBHOOK: /* as /v1/webhooks: http:// or https:// */
    if (has(body, "url")) {
      if (!model_webhook_url_valid(in.url)) {
        req_error(r, 422, "invalid_value", "url",
                  "url must be an http:// or https:// URL with a host");
        goto out;
      }
      if (check_target(r, "url", in.url) < 0) goto out;
      snprintf(w->url, sizeof w->url, "%s", in.url);
    }
    if (has(body, "secret")) snprintf(w->secret, sizeof w->secret, "%s", in.secret);
    if (!w->url[0] || !w->secret[0]) {
      const char *f = !w->url[0] ? "url" : "secret";
      req_error(r, 422, "required", f, "%s is required for kind webhook", f);
      goto out;
    }
    break;
  case CHAN_SLACK:
    if (has(body, "url")) {
      if (check_https(r, "url", in.url) < 0) goto out;
      snprintf(w->url, sizeof w->url, "%s", in.url);
    }
    if (!w->url[0]) {
      req_error(r, 422, "required", "url", "url (the incoming webhook) is required for kind slack");
      goto out;
    }
    break;
  case CHAN_PAGERDUTY:
    if (has(body, "routing_key")) {
      if (!chan_pd_key_ok(in.routing_key)) {
        req_error(r, 422, "invalid_value", "routing_key",
                  "routing_key must be the integration's %d-character key (letters and digits)",
                  CHAN_PD_KEY_LEN);
        goto out;
      }
      snprintf(w->secret, sizeof w->secret, "%s", in.routing_key);
    }
    if (has(body, "url")) {
      if (check_https(r, "url", in.url) < 0) goto out;
      snprintf(w->url, sizeof w->url, "%s", in.url);
    }
    if (!w->url[0]) snprintf(w->url, sizeof w->url, "%s", CHAN_PD_URL);
    if (!w->secret[0]) {
      req_error(r, 422, "required", "routing_key", "routing_key is required for kind pagerduty");
      goto out;
    }
    break;
  case CHAN_EMAIL:
    if (has(body, "smtp_url")) {
      if (check_smtp(r, in.smtp_url) < 0) goto out;
      snprintf(w->url, sizeof w->url, "%s", in.smtp_url);
    }
    if (!w->url[0]) {
      req_error(r, 422, "required", "smtp_url", "smtp_url is required for kind email");
      goto out;
    }
    if (has(body, "password")) snprintf(w->secret, sizeof w->secret, "%s", in.password);
    if (read_email(r, body, &in, w) < 0) goto out;
    break;
  default:
    goto out;
  }
  rc = 0;
out:
  wipe_in(&in);
  return rc;
}

/* ---- handlers ---- */

static enum store_rc create_change(struct api_op *op) {
  struct webhook_rec *w = op->arg;
  enum store_rc rc = store_webhook_create_locked(op->tx, w);
  if (rc == STORE_LIMIT)
    api_limit_error(op->r, STORE_MAX_WEBHOOKS, "webhooks and channels");
  else if (rc == STORE_OK)
    req_json(op->r, 201, chan_json(w));
  return rc;
}

static const struct api_op_def create_op = {"channel", create_change, NULL, NULL};

static enum http_rc post_channel(struct req *r) {
  cJSON *body = req_body_object(r);
  struct webhook_rec w;
  memset(&w, 0, sizeof w);
  if (!body) return HTTP_DONE;
  if (apply_body(r, body, &w, 1) == 0) (void)api_op_run(r, &create_op, &w);
  webhook_rec_fini(&w);
  wipe_body(body);
  cJSON_Delete(body);
  return HTTP_DONE;
}

static enum store_rc update_change(struct api_op *op) {
  struct webhook_rec *w = op->arg;
  enum store_rc rc = store_webhook_update_locked(op->tx, w);
  if (rc == STORE_OK) req_json(op->r, 200, chan_json(w));
  return rc;
}

static const struct api_op_def update_op = {"channel", update_change, NULL, NULL};

static enum http_rc patch_channel(struct req *r) {
  cJSON *body = req_body_object(r);
  struct webhook_rec w;
  enum store_rc rc;
  if (!body) return HTTP_DONE;
  rc = store_webhook_get(r->ctx->store, r->params[0], &w);
  if (rc != STORE_OK)
    api_store_error(r, rc, "channel", NULL);
  else if (apply_body(r, body, &w, 0) == 0)
    (void)api_op_run(r, &update_op, &w);
  webhook_rec_fini(&w);
  wipe_body(body);
  cJSON_Delete(body);
  return HTTP_DONE;
}

static enum http_rc list_channels(struct req *r) {
  struct webhook_rec *arr = NULL;
  int n = 0;
  cJSON *j, *a;
  enum store_rc rc = store_webhook_list(r->ctx->store, &arr, &n);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "channels", NULL);
    return HTTP_DONE;
  }
  j = cJSON_CreateObject();
  a = cJSON_AddArrayToObject(j, "channels");
  for (int i = 0; i < n; i++) {
    cJSON_AddItemToArray(a, chan_json(&arr[i]));
    webhook_rec_fini(&arr[i]);
  }
  free(arr);
  req_json(r, 200, j);
  return HTTP_DONE;
}

static enum http_rc get_channel(struct req *r) {
  struct webhook_rec w;
  enum store_rc rc = store_webhook_get(r->ctx->store, r->params[0], &w);
  if (rc != STORE_OK)
    api_store_error(r, rc, "channel", NULL);
  else
    req_json(r, 200, chan_json(&w));
  webhook_rec_fini(&w);
  return HTTP_DONE;
}

static const struct api_op_def delete_op = {"channel", api_chan_delete_change, NULL, NULL};

static enum http_rc delete_channel(struct req *r) {
  (void)api_op_run(r, &delete_op, NULL);
  return HTTP_DONE;
}

static enum http_rc list_deliveries(struct req *r) {
  return api_deliveries_list(r, &view);
}

/* POST /v1/channels/{id}/test [{"site_id": N}] -> 202, the queued delivery. */
static enum http_rc test_channel(struct req *r) {
  return api_deliveries_test(r, &view);
}

const struct route api_channels_routes[] = {
    {"POST", "/v1/channels", AUTH_ADMIN, post_channel, NULL, 0},
    {"GET", "/v1/channels", AUTH_ADMIN, list_channels, NULL, 0},
    {"GET", "/v1/channels/:id", AUTH_ADMIN, get_channel, NULL, 0},
    {"PATCH", "/v1/channels/:id", AUTH_ADMIN, patch_channel, NULL, 0},
    {"DELETE", "/v1/channels/:id", AUTH_ADMIN, delete_channel, NULL, 0},
    {"GET", "/v1/channels/:id/deliveries", AUTH_ADMIN, list_deliveries, "after,limit", 0},
    {"POST", "/v1/channels/:id/test", AUTH_ADMIN, test_channel, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
