/* api_deliveries — what /v1/channels and /v1/webhooks share: the events filter, the delete, the
   deliveries list and the test delivery of a channel (docs/design.md, Notification channels). */
#ifndef CDNCA_API_DELIVERIES_H
#define CDNCA_API_DELIVERIES_H

#include "http.h"
#include "store.h"

/* What tells one route family from the other. */
struct api_chan_view {
  const char *noun;         /* "channel", "webhook": in errors and as the operation's resource */
  int webhook_only;         /* 1: a channel of another kind is 404 */
  const char *test_title;   /* the test event's title */
  const char *test_message; /* its data's "message" */
  const char *id_key;       /* "channel_id", "webhook_id": in the test data and each delivery */
  const char *every_type;   /* how the events error says "every type" ("null for every type") */
};

struct api_op;

/* The "events" filter ev (NULL or null: every type) of a channel of kind into *events as JSON
   text (caller frees), replacing what was there (NULL = every type): 0, or -1 with a 422 answered.
   A pagerduty channel takes only the types with an action (chan_pd_action). */
int api_chan_events(struct req *r, const struct api_chan_view *v, int kind, const cJSON *ev,
                    char **events);

/* The change step of DELETE …/{id}: deletes channel params[0], 204 when it was there. */
enum store_rc api_chan_delete_change(struct api_op *op);

/* GET …/{id}/deliveries?after=&limit= -> 200 {"deliveries": [...], "next"}, oldest first. */
enum http_rc api_deliveries_list(struct req *r, const struct api_chan_view *v);

/* POST …/{id}/test [{"site_id": N}] -> 202, the queued delivery. */
enum http_rc api_deliveries_test(struct req *r, const struct api_chan_view *v);

#endif
