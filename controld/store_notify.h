/* store_notify — webhooks and their delivery outbox: CRUD, due heads per queue, attempt results. */
#ifndef CDNCA_STORE_NOTIFY_H
#define CDNCA_STORE_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "store_events.h"

#define STORE_WEBHOOK_URL_MAX 2048
#define STORE_WEBHOOK_SECRET_MAX 256

/* A channel as stored (a webhook is the channel of kind CHAN_WEBHOOK; docs/design.md,
   Notification channels). events is the JSON array text of the filter, or NULL for every type;
   site_ids the JSON array text of the site filter, or NULL for every site; config the email
   kind's JSON object text ({"from", "to", "username"}), NULL for the others. url and secret hold
   the kind's address and secret (chan.h). */
struct webhook_rec {
  int64_t id;
  int kind; /* enum chan_kind */
  char name[65];
  char url[STORE_WEBHOOK_URL_MAX + 1];
  char secret[STORE_WEBHOOK_SECRET_MAX + 1];
  char *events;   /* owned (malloc'd) or NULL */
  char *site_ids; /* owned or NULL */
  char *config;   /* owned or NULL */
  int64_t created_at;
};

/* One outbox row as the deliveries API shows it. */
struct delivery_rec {
  int64_t id, webhook_id, event_id, site_id; /* site_id 0 = none */
  char uuid[40];
  enum delivery_state state;
  char event_type[48];
  int attempts;
  int last_status;      /* 0 = no HTTP answer (yet) */
  char last_error[256]; /* "" = none */
  int64_t next_attempt_at, created_at, delivered_at;
};

/* The oldest pending delivery of one (webhook, site) queue: only it may be attempted. */
struct delivery_head {
  int64_t id, webhook_id, site_id; /* site_id 0 = events without a site */
  int64_t next_attempt_at;
};

/* Everything one attempt needs, loaded when it starts. */
struct delivery_job {
  int64_t id, webhook_id, site_id;
  char uuid[40];
  int attempts; /* made so far */
  int64_t created_at;
  int kind; /* the channel's enum chan_kind */
  char url[STORE_WEBHOOK_URL_MAX + 1];
  char secret[STORE_WEBHOOK_SECRET_MAX + 1];
  char *config;           /* the channel's config text, owned, or NULL */
  struct event_rec event; /* event.data owned: free with delivery_job_fini */
};

/* The result of one attempt, written back by store_delivery_record. */
struct delivery_result {
  int64_t id;
  enum delivery_state state; /* pending (retry later) | delivered | failed */
  int status;                /* HTTP status, 0 = none */
  const char *error;         /* NULL or "" = none */
  int64_t next_attempt_at;   /* for pending */
  int64_t at;                /* when the attempt ended (wall ms) */
};

/* Deliveries waiting in the outbox (state pending: not yet tried, or retrying) into *n, counted
   on the pending index. 0 or -1 (logged). */
int store_delivery_backlog(struct store *st, int64_t *n);

/* Remove delivered and failed deliveries created before before_ms (pending ones stay). Number
 * removed, or -1. An engine write: fenced by the lease in cluster mode (store_lease.h). */
int store_delivery_prune(struct store *st, int64_t before_ms);

/* Free what a channel record owns (its texts) and wipe its secret. */
void webhook_rec_fini(struct webhook_rec *w);

/* Free what a job owns and wipe its secret. */
void delivery_job_fini(struct delivery_job *j);

/* Insert a webhook (id and created_at set on return). STORE_LIMIT when STORE_MAX_WEBHOOKS exist.
 */
enum store_rc store_webhook_create(struct store *st, struct webhook_rec *w);

/* Load one webhook into *out (caller webhook_rec_fini's it). */
enum store_rc store_webhook_get(struct store *st, int64_t id, struct webhook_rec *out);

/* Every channel ordered by id; *out malloc'd array of *n (caller fini's each and frees it). */
enum store_rc store_webhook_list(struct store *st, struct webhook_rec **out, int *n);

/* Replace a channel's name, filters and kind fields (kind and created_at stay); STORE_NOT_FOUND
   when it is gone. The queued deliveries stay. Inside a store_op. */
enum store_rc store_webhook_update_locked(struct store_tx *tx, const struct webhook_rec *w);

/* Delete a webhook with its outbox rows. */
enum store_rc store_webhook_delete(struct store *st, int64_t id);

/* The same two, inside a store_op. */
enum store_rc store_webhook_create_locked(struct store_tx *tx, struct webhook_rec *w);
enum store_rc store_webhook_delete_locked(struct store_tx *tx, int64_t id);

/* Deliveries of a webhook, oldest first, id > after (0 = from the first), at most limit; *out
 * malloc'd (caller frees). */
enum store_rc store_delivery_list(struct store *st, int64_t webhook_id, int64_t after, int limit,
                                  struct delivery_rec **out, int *n);

/* One delivery by id into *out. */
enum store_rc store_delivery_get(struct store *st, int64_t id, struct delivery_rec *out);

/* The same inside a store_op. */
enum store_rc store_delivery_get_locked(struct store_tx *tx, int64_t id, struct delivery_rec *out);

/* The most test deliveries of one webhook or channel waiting at once. */
#define STORE_TESTS_PENDING_MAX 100

/* The most tests of all webhooks and channels together in one minute: with test events kept as
   long as their deliveries, at most 120 × 1,440 × 7 test events are stored at once. */
#define STORE_TESTS_PER_MINUTE 120

/* Add a webhook.test event (site_id 0 / site_name NULL = none) queued for webhook_id only;
 * *delivery_id set. Wakes the event hook. STORE_CONFLICT, nothing added, when
 * STORE_TESTS_PENDING_MAX test deliveries of that webhook are still pending; STORE_LIMIT when
 * STORE_TESTS_PER_MINUTE tests were added in the last minute. */
enum store_rc store_webhook_test(struct store *st, int64_t webhook_id, int64_t site_id,
                                 const char *site_name, const char *title, const char *data_json,
                                 int64_t *delivery_id);
enum store_rc store_webhook_test_locked(struct store_tx *tx, int64_t webhook_id, int64_t site_id,
                                        const char *site_name, const char *title,
                                        const char *data_json, int64_t *delivery_id);

/* Heads of every pending (webhook, site) queue; *out malloc'd array of *n (caller frees). */
enum store_rc store_delivery_heads(struct store *st, struct delivery_head **out, int *n);

/* Load a pending delivery with its webhook and event into *job; STORE_NOT_FOUND when no longer
 * pending. */
enum store_rc store_delivery_load(struct store *st, int64_t id, struct delivery_job *job);

/* Write n attempt results in one transaction (attempts + 1 each); rows deleted meanwhile are
 * skipped. 0 or -1 (also when fenced by the lease in cluster mode: the rows stay pending). */
int store_delivery_record(struct store *st, const struct delivery_result *res, int n);

#endif
