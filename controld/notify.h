/* notify — channel delivery (webhooks, Slack, PagerDuty, email): a worker thread draining the
   deliveries outbox over libcurl multi. */
#ifndef CDNCA_NOTIFY_H
#define CDNCA_NOTIFY_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "targets.h"

#include "store.h"
#include "store_events.h"

struct metrics;
struct notify;

#define NOTIFY_MAX_INFLIGHT 32 /* attempts in flight at once (one per (webhook, site) queue) */
/* Of them, the most to one webhook or channel: a receiver that hangs cannot hold up the others'
   deliveries. */
#define NOTIFY_MAX_PER_CHANNEL 8
#define NOTIFY_SIGNATURE_LEN 72 /* "sha256=" + 64 hex digits + NUL */
#define NOTIFY_TEST_TYPE "webhook.test"

/* Retry schedule and limits (docs/design.md#webhook-delivery defaults: 1 s doubling, cap 10 min, 24
 * h, 10 s per attempt).
 */
struct notify_policy {
  int64_t retry_min_ms;      /* delay after the first failed attempt */
  int64_t retry_max_ms;      /* cap of the doubling delay */
  int64_t give_up_ms;        /* after this long since the event, a failed attempt is final */
  int64_t timeout_ms;        /* one attempt, connect to last byte */
  int64_t shutdown_grace_ms; /* how long attempts in flight may finish at shutdown */
  int64_t keep_ms; /* delivered and failed outbox rows are removed this long after their event,
                      and test events with them */
  const struct targets *deny; /* addresses never connected to, also after DNS; NULL = none */
  char public_url[512];       /* --public-url: links in Slack, PagerDuty and email ("" = none) */
  int start_inactive;         /* notify_new only: start with delivery off (cluster mode: until this
                                 replica holds the engine lease, notify_set_active) */
};

enum notify_result { NOTIFY_DELIVERED = 0, NOTIFY_RETRY = 1, NOTIFY_FAILED = 2 };

/* Fill p with the defaults of docs/design.md#webhook-delivery. */
void notify_policy_defaults(struct notify_policy *p);

/* Delay before the next attempt after `attempts` failed ones (>= 1): retry_min_ms doubling, capped
   at retry_max_ms, minus a jitter of up to a quarter taken from rnd. Pure. */
int64_t notify_backoff_ms(const struct notify_policy *p, int attempts, uint32_t rnd);

/* Judge an attempt that ended at now: status is the HTTP status (0 = none). attempts counts this
   one. For NOTIFY_RETRY *next_at is when to try again (never past created_at + give_up_ms). Pure.
 */
enum notify_result notify_decide(const struct notify_policy *p, int status, int attempts,
                                 int64_t created_at, int64_t now, uint32_t rnd, int64_t *next_at);

/* The X-Cdnca-Signature value: "sha256=" + hex HMAC-SHA256(secret, "<ts>." + body) into out. 0 or
 * -1. */
int notify_sign(const char *secret, int64_t ts, const char *body, size_t len,
                char out[NOTIFY_SIGNATURE_LEN]);

/* An event as the messages API and webhook bodies show it:
 * {"id","type","title","site","created_at","data"}. Caller frees. */
cJSON *notify_event_json(const struct event_rec *e);

/* Start the delivery worker thread over st (metrics may be NULL); NULL on failure (logged). */
struct notify *notify_new(struct store *st, struct metrics *m, const struct notify_policy *p);

/* Wake the worker to look for new deliveries (event hook: any thread, arg = struct notify *). */
void notify_wake(void *arg);

/* Turn delivery on or off (the engine lease's role changes; any thread). Off: attempts in flight
   are dropped (their rows stay pending: the next engine sends them again with the same
   X-Cdnca-Delivery), nothing new starts and the outbox is not pruned. On: the outbox is
   rescanned at once. */
void notify_set_active(struct notify *n, int active);

/* Replace the retry/give-up/timeout policy (SIGHUP reload); the worker takes it on its next pass
   and applies it to attempts started or judged from then on. Any thread. */
void notify_set_policy(struct notify *n, const struct notify_policy *p);

/* Stop the worker (attempts in flight get shutdown_grace_ms, the rest stay pending), join, free;
 * NULLs *n. */
void notify_free(struct notify **n);

#endif
