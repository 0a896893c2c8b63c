/* api_deliveries — the deliveries list and the test delivery of a channel, one pair of handlers
   serving /v1/channels/{id}/… and /v1/webhooks/{id}/… (docs/design.md, Notification channels). */
#ifndef CDNCA_API_DELIVERIES_H
#define CDNCA_API_DELIVERIES_H

#include "http.h"

/* What tells one route family from the other. */
struct api_chan_view {
  const char *noun;         /* "channel", "webhook": in errors and as the operation's resource */
  int webhook_only;         /* 1: a channel of another kind is 404 */
  const char *test_title;   /* the test event's title */
  const char *test_message; /* its data's "message" */
  const char *id_key;       /* "channel_id", "webhook_id": in the test data and each delivery */
};

/* GET …/{id}/deliveries?after=&limit= -> 200 {"deliveries": [...], "next"}, oldest first. */
enum http_rc api_deliveries_list(struct req *r, const struct api_chan_view *v);

/* POST …/{id}/test [{"site_id": N}] -> 202, the queued delivery. */
enum http_rc api_deliveries_test(struct req *r, const struct api_chan_view *v);

#endif
