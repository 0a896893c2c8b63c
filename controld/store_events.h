/* store_events — events (site messages, the notification center) and the webhook outbox rows
   each event queues. */
#ifndef CDNCA_STORE_EVENTS_H
#define CDNCA_STORE_EVENTS_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "event.h"
#include "log.h"
#include "store.h"

/* At most this many webhooks exist: the outbox fan-out of store_event_add_locked handles this
   many. */
#define STORE_MAX_WEBHOOKS 256

/* Inside a write transaction (store_core.h): add an event and one pending delivery per webhook
 * whose filter matches. Returns the event id or -1. */
int64_t store_event_add_locked(struct store_tx *tx, int64_t site_id, const char *site_name,
                               const char *type, const char *title, const char *data_json);

/* Inside a write transaction: log a state change (log_event's level, event name and fields,
   fields owned from here) once the transaction commits, after the writer lock is released; a
   rolled-back transaction logs nothing (docs/design.md#events: log lines follow what is stored).
   0, or -1 when memory runs out (the line is lost, the transaction may go on). */
int store_event_log_locked(struct store_tx *tx, enum log_level level, const char *type,
                           cJSON *fields);

/* Inside a write transaction: a site's event of a type (docs/design.md#events), as
   store_event_add_locked, with data (an object, not taken) as its JSON, and its one structured log
   line (store_event_log_locked): the type's level (event_type_rules), then site_id, site and
   data's members. What every event of a site is recorded through. The event id, or -1 (logged). */
int64_t store_site_event_locked(struct store_tx *tx, int64_t site_id, const char *site_name,
                                enum event_type type, const char *title, const cJSON *data);

/* Add an event in its own transaction; id or -1. */
int64_t store_event_add(struct store *st, int64_t site_id, const char *site_name, const char *type,
                        const char *title, const char *data_json);

/* Events deleted per prune transaction. */
#define STORE_EVENTS_PRUNE_BATCH 1000

/* Delete the events created before before_ms (their finished outbox rows go with them), oldest
   first, in transactions of STORE_EVENTS_PRUNE_BATCH; never the newest event (ids are the last
   + 1 and must keep growing under the readers' `after` cursors) nor one with a pending delivery.
   tests_only: the test events (webhook.test) alone, which go with their deliveries. Rows deleted
   or -1. An engine write. */
int64_t store_event_prune(struct store *st, int64_t before_ms, int tests_only);

/* store_event_prune of every kind (a retain.h job). */
int64_t store_event_prune_all(struct store *st, int64_t before_ms);

/* Events with id > after, oldest first, at most limit; site_id 0 = every site. *out malloc'd
 * (caller frees with store_events_free). */
enum store_rc store_event_list(struct store *st, int64_t site_id, int64_t after, int limit,
                               struct event_rec **out, int *n);

/* Free a list from store_event_list. */
void store_events_free(struct event_rec *arr, int n);

/* Call fn(arg) after every commit that wrote an event (and so maybe webhook deliveries). Set once
 * at start. */
void store_set_event_hook(struct store *st, void (*fn)(void *arg), void *arg);

/* ---- for the store's own files ---- */

/* Write the events (and outbox rows) this transaction queued (PostgreSQL; nothing to do on
   SQLite, which writes each at once). Called before COMMIT and before any statement of the
   transaction that reads or numbers events itself. 0 or -1. */
int store_events_flush_locked(struct store_tx *tx);
/* Forget the transaction's queued events and webhook list (at begin, commit and rollback). */
void store_events_tx_reset(struct store *st);
/* Forget the webhook list only. */
void store_events_tx_reset_hooks(struct store *st);
/* Inside a write transaction: it recorded events or deliveries (the event hook runs after its
   commit, and other replicas are told); whether it did. */
void store_events_pending_set_locked(struct store_tx *tx);
int store_events_pending_locked(struct store_tx *tx);

/* Inside a write transaction that numbered an event itself: the next queued one counts anew. */
void store_events_renumber_locked(struct store_tx *tx);

/* Inside a write transaction, at once (not queued): one event row, numbered after the last
   (flush the queue first); its id, or -1 (logged). */
int64_t store_event_insert_locked(struct store_tx *tx, int64_t site_id, const char *site_name,
                                  const char *type, const char *title, const char *data_json,
                                  int64_t now);
/* Inside a write transaction, at once: one delivery of event_id to webhook_id, due now, under a
   new uuid. 0 or -1 (logged). */
int store_delivery_queue_locked(struct store_tx *tx, int64_t webhook_id, int64_t event_id,
                                int64_t site_id, int64_t now);

/* Another replica recorded events: run the event hook (store_set_event_hook), as a local commit
   with events does. */
void store_events_arrived(struct store *st);

/* Add the participant that writes the queued events before each COMMIT and runs the event hook
   after it (store_open does it). 0 or -1. */
int store_events_attach(struct store *st);

#endif
