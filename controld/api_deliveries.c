/* api_deliveries — a channel's events filter, delete, deliveries and test delivery, for
   /v1/channels and /v1/webhooks alike (see api_deliveries.h). */
#include "api_deliveries.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_op.h"
#include "chan.h"
#include "ctx.h"
#include "json.h"
#include "model.h"
#include "names.h"
#include "store_notify.h"
#include "store_sites.h"

int api_chan_events(struct req *r, const struct api_chan_view *v, int kind, const cJSON *ev,
                    char **events) {
  const cJSON *it;
  cJSON *clean;
  int i = 0;
  char field[32];
  free(*events);
  *events = NULL;
  if (!ev || cJSON_IsNull(ev)) return 0;
  if (!cJSON_IsArray(ev) || cJSON_GetArraySize(ev) == 0) {
    req_error(r, 422, "invalid_value", "events",
              "events must be a non-empty array of event types (%s)", v->every_type);
    return -1;
  }
  clean = cJSON_CreateArray();
  cJSON_ArrayForEach(it, ev) {
    int dup = 0, ok = cJSON_IsString(it) && event_type_value(it->valuestring) >= 0;
    const cJSON *seen;
    snprintf(field, sizeof field, "events[%d]", i);
    if (ok && kind == CHAN_PAGERDUTY && chan_pd_action(it->valuestring) == EVENT_PAGE_NONE) {
      /* the types from their one table, so the message cannot fall behind it */
      const char *pages[EVENT_TYPES + 1];
      char words[512];
      chan_pd_types(pages);
      req_error(r, 422, "invalid_value", field,
                "a pagerduty channel takes the types that trigger or resolve an alert: %s",
                json_words(pages, words, sizeof words));
      cJSON_Delete(clean);
      return -1;
    }
    if (!ok) {
      char known[512];
      req_error(r, 422, "invalid_value", field, "unknown event type (known: %s)",
                json_words(event_type_names, known, sizeof known));
      cJSON_Delete(clean);
      return -1;
    }
    cJSON_ArrayForEach(seen, clean) if (strcmp(seen->valuestring, it->valuestring) == 0) dup = 1;
    if (!dup) cJSON_AddItemToArray(clean, cJSON_CreateString(it->valuestring));
    i++;
  }
  *events = json_print(clean);
  cJSON_Delete(clean);
  if (!*events) {
    req_error(r, 500, "internal", NULL, "out of memory");
    return -1;
  }
  return 0;
}

enum store_rc api_chan_delete_change(struct api_op *op) {
  enum store_rc rc = store_webhook_delete_locked(op->tx, op->r->params[0]);
  if (rc == STORE_OK) req_json(op->r, 204, NULL);
  return rc;
}

/* One delivery as the view names its channel (v: the struct api_chan_view). */
static cJSON *delivery_json(const void *rec, const void *v) {
  const struct delivery_rec *d = rec;
  cJSON *j = cJSON_CreateObject();
  json_add_i64(j, "id", d->id);
  cJSON_AddStringToObject(j, "uuid", d->uuid);
  json_add_i64(j, ((const struct api_chan_view *)v)->id_key, d->webhook_id);
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

/* Is channel id there (and of the webhook kind when the view wants it)? STORE_NOT_FOUND when
   not. */
static enum store_rc channel_there(struct req *r, const struct api_chan_view *v, int64_t id) {
  struct webhook_rec w;
  enum store_rc rc = store_webhook_get(r->ctx->store, id, &w);
  if (rc == STORE_OK && v->webhook_only && w.kind != CHAN_WEBHOOK) rc = STORE_NOT_FOUND;
  webhook_rec_fini(&w);
  return rc;
}

enum http_rc api_deliveries_list(struct req *r, const struct api_chan_view *v) {
  struct delivery_rec *arr = NULL;
  int64_t limit, after;
  int n = 0;
  enum store_rc rc;
  if (req_query_int(r, "limit", 1, 1000, 100, &limit) < 0) return HTTP_DONE;
  /* one pagination for every list (docs/design.md#query-parameters-and-lists): after=ID, oldest
     first */
  if (req_query_int(r, "after", 0, INT64_MAX / 2, 0, &after) < 0) return HTTP_DONE;
  rc = channel_there(r, v, r->params[0]);
  if (rc == STORE_OK)
    rc = store_delivery_list(r->ctx->store, r->params[0], after, (int)limit + 1, &arr, &n);
  if (rc != STORE_OK) {
    api_store_error(r, rc, v->noun, NULL);
    return HTTP_DONE;
  }
  api_page_reply_arg(r, "deliveries", arr, sizeof *arr, n, limit, offsetof(struct delivery_rec, id),
                     delivery_json, v);
  free(arr);
  return HTTP_DONE;
}

/* The state of a test delivery. */
struct test_op {
  const struct api_chan_view *v;
  int64_t site_id;
  const char *site_name, *data;
  int64_t delivery_id;
};

static enum store_rc test_change(struct api_op *op) {
  struct test_op *to = op->arg;
  enum store_rc rc = store_webhook_test_locked(op->tx, op->r->params[0], to->site_id, to->site_name,
                                               to->v->test_title, to->data, &to->delivery_id);
  if (rc == STORE_CONFLICT)
    req_error(op->r, 409, "tests_pending", NULL,
              "%d test deliveries of this %s are still pending: send more once they are done",
              STORE_TESTS_PENDING_MAX, to->v->noun);
  else if (rc == STORE_LIMIT)
    req_error(op->r, 409, "too_many_tests", NULL,
              "%d tests of webhooks and channels were sent in the last minute: try again in a "
              "minute",
              STORE_TESTS_PER_MINUTE);
  return rc;
}

static enum store_rc test_answer(struct api_op *op) {
  struct test_op *to = op->arg;
  struct delivery_rec d;
  enum store_rc rc = store_delivery_get_locked(op->tx, to->delivery_id, &d);
  if (rc == STORE_OK) req_json(op->r, 202, delivery_json(&d, to->v));
  return rc;
}

enum http_rc api_deliveries_test(struct req *r, const struct api_chan_view *v) {
  static const char *const keys[] = {"site_id", NULL};
  const struct api_op_def def = {v->noun, test_change, test_answer, NULL};
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
  rc = channel_there(r, v, r->params[0]);
  if (rc != STORE_OK) {
    api_store_error(r, rc, v->noun, NULL);
    goto out;
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
  json_add_i64(data, v->id_key, r->params[0]);
  cJSON_AddStringToObject(data, "message", v->test_message);
  data_text = json_print(data);
  if (!data_text) {
    req_error(r, 500, "internal", NULL, "out of memory");
    goto out;
  }
  to.v = v;
  to.site_id = site_id;
  to.site_name = have_site ? s.name : NULL;
  to.data = data_text;
  to.delivery_id = 0;
  (void)api_op_run(r, &def, &to);
out:
  if (have_site) site_rec_fini(&s);
  free(data_text);
  cJSON_Delete(data);
  cJSON_Delete(body);
  return HTTP_DONE;
}
