/* api_events — site messages (/v1/sites/{id}/messages) and the notification center
 * (/v1/notifications). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "api.h"
#include "ctx.h"
#include "json.h"
#include "notify.h"
#include "store_events.h"
#include "store_sites.h"

static cJSON *event_json(const void *rec) {
  return notify_event_json(rec);
}

/* Reply {"events": [...], "next": ID|null} for site_id (0 = every site). */
static enum http_rc reply_events(struct req *r, int64_t site_id) {
  int64_t limit, after;
  struct event_rec *arr = NULL;
  int n = 0;
  enum store_rc rc;
  if (api_page_query(r, &limit, &after) < 0) return HTTP_DONE;
  rc = store_event_list(r->ctx->store, site_id, after, (int)limit + 1, &arr, &n);
  api_page_answer(r, rc, "events", "events", arr, sizeof *arr, n, limit,
                  offsetof(struct event_rec, id), event_json);
  if (rc == STORE_OK) store_events_free(arr, n);
  return HTTP_DONE;
}

static enum http_rc get_messages(struct req *r) {
  struct site_rec s;
  enum store_rc rc = store_site_get(r->ctx->store, r->params[0], &s);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "site", NULL);
    return HTTP_DONE;
  }
  site_rec_fini(&s);
  return reply_events(r, r->params[0]);
}

static enum http_rc get_notifications(struct req *r) {
  return reply_events(r, 0);
}

const struct route api_events_routes[] = {
    {"GET", "/v1/sites/:id/messages", AUTH_READ, get_messages, "after,limit", 0},
    {"GET", "/v1/notifications", AUTH_READ, get_notifications, "after,limit", 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
