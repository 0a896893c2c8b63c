/* store_notify — webhooks and their delivery outbox: CRUD, due heads per queue, attempt results. */
#include "store_notify.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chan.h"
#include "clock.h"
#include "log.h"
#include "names.h"
#include "store_core.h"
#include "store_events.h"
#include "token.h"

void webhook_rec_fini(struct webhook_rec *w) {
  free(w->events);
  free(w->site_ids);
  free(w->config);
  w->events = w->site_ids = w->config = NULL;
  token_wipe(w->secret, sizeof w->secret);
  token_wipe(w->url, sizeof w->url); /* a Slack URL is a secret */
}

void delivery_job_fini(struct delivery_job *j) {
  free(j->event.data);
  free(j->config);
  j->event.data = j->config = NULL;
  token_wipe(j->secret, sizeof j->secret);
  token_wipe(j->url, sizeof j->url);
}

#define M(t, m) .offset = offsetof(struct t, m), .size = sizeof(((struct t *)0)->m)
/* The columns of a channel but its texts (owned strings, read by webhook_read). */
static const struct field_def webhook_cols[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, M(webhook_rec, id)},
    {.name = "kind",
     .column = "kind",
     .type = FIELD_NAMED,
     M(webhook_rec, kind),
     FIELD_NAMES(chan_kind_names)},
    {.name = "name", .column = "name", .type = FIELD_STR, M(webhook_rec, name)},
    {.name = "url", .column = "url", .type = FIELD_STR, M(webhook_rec, url)},
    {.name = "secret", .column = "secret", .type = FIELD_STR, M(webhook_rec, secret)},
    {.name = "created_at", .column = "created_at", .type = FIELD_INT, M(webhook_rec, created_at)},
    {.name = NULL},
};

/* The oldest pending delivery of a queue. */
static const struct field_def head_cols[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, M(delivery_head, id)},
    {.name = "webhook_id", .column = "webhook_id", .type = FIELD_INT, M(delivery_head, webhook_id)},
    {.name = "site_id", .column = "site_id", .type = FIELD_INT, M(delivery_head, site_id)},
    {.name = "next_attempt_at",
     .column = "next_attempt_at",
     .type = FIELD_INT,
     M(delivery_head, next_attempt_at)},
    {.name = NULL},
};

/* A delivery job: its delivery and webhook (d, w), then its event (e) but the event's data. */
static const struct field_def job_cols[] = {
    {.name = "id", .column = "d.id", .type = FIELD_INT, M(delivery_job, id)},
    {.name = "webhook_id",
     .column = "d.webhook_id",
     .type = FIELD_INT,
     M(delivery_job, webhook_id)},
    {.name = "site_id", .column = "d.site_id", .type = FIELD_INT, M(delivery_job, site_id)},
    {.name = "uuid", .column = "d.uuid", .type = FIELD_STR, M(delivery_job, uuid)},
    {.name = "attempts", .column = "d.attempts", .type = FIELD_INT, M(delivery_job, attempts)},
    {.name = "created_at",
     .column = "d.created_at",
     .type = FIELD_INT,
     M(delivery_job, created_at)},
    {.name = "kind",
     .column = "w.kind",
     .type = FIELD_NAMED,
     M(delivery_job, kind),
     FIELD_NAMES(chan_kind_names)},
    {.name = "url", .column = "w.url", .type = FIELD_STR, M(delivery_job, url)},
    {.name = "secret", .column = "w.secret", .type = FIELD_STR, M(delivery_job, secret)},
    {.name = "event.id", .column = "e.id", .type = FIELD_INT, M(delivery_job, event.id)},
    {.name = "event.site_id",
     .column = "e.site_id",
     .type = FIELD_INT,
     M(delivery_job, event.site_id)},
    {.name = "event.site_name",
     .column = "e.site_name",
     .type = FIELD_STR,
     M(delivery_job, event.site_name)},
    {.name = "event.type", .column = "e.type", .type = FIELD_STR, M(delivery_job, event.type)},
    {.name = "event.title", .column = "e.title", .type = FIELD_STR, M(delivery_job, event.title)},
    {.name = "event.created_at",
     .column = "e.created_at",
     .type = FIELD_INT,
     M(delivery_job, event.created_at)},
    {.name = NULL},
};
#undef M

/* A nullable text column into *out (malloc'd, NULL for NULL); 0 or -1. */
static int col_dup(struct db_stmt *s, int col, char **out) {
  const char *t = db_col_text(s, col);
  return t && !(*out = strdup(t)) ? -1 : 0;
}

static int webhook_read(const void *ctx, struct db_stmt *s, void *rec) {
  struct webhook_rec *w = rec;
  int col = store_fields_read(s, 0, ctx, 0, w);
  return col_dup(s, col, &w->events) < 0 || col_dup(s, col + 1, &w->site_ids) < 0 ||
                 col_dup(s, col + 2, &w->config) < 0
             ? -1
             : 0;
}

static void webhook_fini(void *rec) {
  webhook_rec_fini(rec);
}

static int job_read(const void *ctx, struct db_stmt *s, void *rec) {
  struct delivery_job *job = rec;
  int col = store_fields_read(s, 0, ctx, 0, job);
  const char *data = db_col_text(s, col);
  if (col_dup(s, col + 1, &job->config) < 0) return -1;
  return (job->event.data = strdup(data ? data : "{}")) ? 0 : -1;
}

static void job_fini(void *rec) {
  delivery_job_fini(rec);
}

enum store_rc store_webhook_create_locked(struct store_tx *tx, struct webhook_rec *w) {
  struct store *st = store_tx_store(tx);
  static const char ins[] =
      "INSERT INTO webhooks (kind, name, url, secret, events, site_ids, config, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
  enum store_rc rc = store_room_locked(tx, "SELECT COUNT(*) FROM webhooks", STORE_MAX_WEBHOOKS,
                                       "counting channels", "");
  if (rc != STORE_OK) return rc;
  w->created_at = clock_wall_ms();
  if (store_exec(st->w, "inserting a channel", ins, "tttttttI",
                 names_word(NAMES(chan_kind_names), w->kind, "webhook"), w->name, w->url, w->secret,
                 w->events, w->site_ids, w->config, w->created_at) < 0)
    return STORE_ERROR;
  store_events_tx_reset_hooks(st); /* the transaction's next event reads the list again */
  w->id = db_last_id(st->w);
  return STORE_OK;
}

enum store_rc store_webhook_create(struct store *st, struct webhook_rec *w) {
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return STORE_ERROR;
  return store_tx_end(tx, store_webhook_create_locked(tx, w));
}

enum store_rc store_webhook_get(struct store *st, int64_t id, struct webhook_rec *out) {
  static struct store_sql q;
  const char *sql = store_sql(&q, "SELECT ", webhook_cols,
                              ", events, site_ids, config FROM webhooks WHERE id = ?");
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c && sql ? db_prep(c, sql) : NULL;
  memset(out, 0, sizeof *out);
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  return store_one(c, s, sizeof *out, webhook_read, webhook_cols, webhook_fini, out,
                   "loading a webhook");
}

enum store_rc store_webhook_list(struct store *st, struct webhook_rec **out, int *n) {
  static struct store_sql q;
  const char *sql = store_sql(&q, "SELECT ", webhook_cols,
                              ", events, site_ids, config FROM webhooks ORDER BY id");
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c && sql ? db_prep(c, sql) : NULL;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  return store_list_read(c, s, sizeof **out, 0, webhook_read, webhook_cols, webhook_fini,
                         (void **)out, n, "listing webhooks");
}

enum store_rc store_webhook_update_locked(struct store_tx *tx, const struct webhook_rec *w) {
  struct store *st = store_tx_store(tx);
  static const char upd[] = "UPDATE webhooks SET name = ?, url = ?, secret = ?, events = ?, "
                            "site_ids = ?, config = ? WHERE id = ?";
  if (store_exec(st->w, "updating a channel", upd, "ttttttI", w->name, w->url, w->secret, w->events,
                 w->site_ids, w->config, w->id) < 0)
    return STORE_ERROR;
  store_events_tx_reset_hooks(st); /* the transaction's next event reads the list again */
  return db_changes(st->w) ? STORE_OK : STORE_NOT_FOUND;
}

enum store_rc store_webhook_delete_locked(struct store_tx *tx, int64_t id) {
  struct store *st = store_tx_store(tx);
  static const char del[] = "DELETE FROM webhooks WHERE id = ?";
  struct db_stmt *s = db_prep(st->w, del);
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  if (store_step_done(st->w, s, "deleting webhook") < 0) return STORE_ERROR;
  store_events_tx_reset_hooks(st);
  return db_changes(st->w) ? STORE_OK : STORE_NOT_FOUND;
}

enum store_rc store_webhook_delete(struct store *st, int64_t id) {
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return STORE_ERROR;
  return store_tx_end(tx, store_webhook_delete_locked(tx, id));
}

#define M(m)                                                                                       \
  .offset = offsetof(struct delivery_rec, m), .size = sizeof(((struct delivery_rec *)0)->m)
/* The columns of a delivery as it is read (d = deliveries joined with its event e). */
static const struct field_def delivery_fields[] = {
    {.name = "id", .column = "d.id", .type = FIELD_INT, M(id)},
    {.name = "webhook_id", .column = "d.webhook_id", .type = FIELD_INT, M(webhook_id)},
    {.name = "event_id", .column = "d.event_id", .type = FIELD_INT, M(event_id)},
    {.name = "site_id", .column = "d.site_id", .type = FIELD_INT, M(site_id)},
    {.name = "uuid", .column = "d.uuid", .type = FIELD_STR, M(uuid)},
    {.name = "state",
     .column = "d.state",
     .type = FIELD_NAMED,
     M(state),
     FIELD_NAMES(delivery_state_names)},
    {.name = "event_type", .column = "e.type", .type = FIELD_STR, M(event_type)},
    {.name = "attempts", .column = "d.attempts", .type = FIELD_INT, M(attempts)},
    {.name = "last_status", .column = "d.last_status", .type = FIELD_INT, M(last_status)},
    {.name = "last_error", .column = "d.last_error", .type = FIELD_STR, M(last_error)},
    {.name = "next_attempt_at",
     .column = "d.next_attempt_at",
     .type = FIELD_INT,
     M(next_attempt_at)},
    {.name = "created_at", .column = "d.created_at", .type = FIELD_INT, M(created_at)},
    {.name = "delivered_at", .column = "d.delivered_at", .type = FIELD_INT, M(delivered_at)},
    {.name = NULL},
};
#undef M

enum store_rc store_delivery_list(struct store *st, int64_t webhook_id, int64_t after, int limit,
                                  struct delivery_rec **out, int *n) {
  static struct store_sql q;
  if (limit < 1) limit = 1;
  return store_select(st, &q, delivery_fields,
                      " FROM deliveries d JOIN events e ON e.id = d.event_id "
                      "WHERE d.webhook_id = ? AND d.id > ? ORDER BY d.id LIMIT ?",
                      sizeof **out, limit, (void **)out, n, "listing deliveries", "IIi", webhook_id,
                      after, limit);
}

static enum store_rc delivery_get_on(struct db_conn *c, int64_t id, struct delivery_rec *out) {
  static struct store_sql q;
  const char *sql =
      store_sql(&q, "SELECT ", delivery_fields,
                " FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.id = ?");
  struct db_stmt *s = sql ? db_prep(c, sql) : NULL;
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  return store_one(c, s, sizeof *out, store_read_fields, delivery_fields, NULL, out,
                   "loading a delivery");
}

enum store_rc store_delivery_get(struct store *st, int64_t id, struct delivery_rec *out) {
  struct db_conn *c = store_reader(st);
  if (!c) return STORE_ERROR;
  return delivery_get_on(c, id, out);
}

enum store_rc store_delivery_get_locked(struct store_tx *tx, int64_t id, struct delivery_rec *out) {
  struct store *st = store_tx_store(tx);
  return delivery_get_on(st->w, id, out);
}

enum store_rc store_webhook_test_locked(struct store_tx *tx, int64_t webhook_id, int64_t site_id,
                                        const char *site_name, const char *title,
                                        const char *data_json, int64_t *delivery_id) {
  struct store *st = store_tx_store(tx);
  static const char hook[] = "SELECT 1 FROM webhooks WHERE id = ?";
  static const char pending[] = "SELECT COUNT(*) FROM deliveries d JOIN events e ON e.id = "
                                "d.event_id WHERE d.webhook_id = ? AND d.state = 'pending' "
                                "AND e.type = 'webhook.test'";
  static const char recent[] =
      "SELECT COUNT(*) FROM events WHERE type = 'webhook.test' AND created_at > ?";
  struct db_stmt *s;
  int64_t now = clock_wall_ms(), event_id;
  enum store_rc rc;
  int step;
  /* this numbers an event itself: the queued ones first, and the next queued one counts anew */
  if (store_events_flush_locked(tx) < 0) return STORE_ERROR;
  store_events_renumber_locked(tx);
  s = db_prep(st->w, hook);
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, webhook_id);
  step = db_step(s);
  db_reset(s);
  if (step == DB_DONE) return STORE_NOT_FOUND;
  if (step != DB_ROW) {
    log_error("looking up webhook %lld: %s", (long long)webhook_id, db_errmsg(st->w));
    return STORE_ERROR;
  }
  /* tests queue with the channel's real deliveries and are retried for a day: a bounded number
     (STORE_CONFLICT), and a bounded rate in all (STORE_LIMIT): each test is an event, kept for a
     week */
  rc = store_room_locked(tx, pending, STORE_TESTS_PENDING_MAX, "counting pending tests", "I",
                         webhook_id);
  if (rc != STORE_OK) return rc == STORE_LIMIT ? STORE_CONFLICT : rc;
  rc = store_room_locked(tx, recent, STORE_TESTS_PER_MINUTE, "counting recent tests", "I",
                         now - 60000);
  if (rc != STORE_OK) return rc;
  event_id =
      store_event_insert_locked(tx, site_id, site_name, "webhook.test", title, data_json, now);
  if (event_id < 0 || store_delivery_queue_locked(tx, webhook_id, event_id, site_id, now) < 0)
    return STORE_ERROR;
  *delivery_id = db_last_id(st->w);
  store_events_pending_set_locked(tx);
  return STORE_OK;
}

enum store_rc store_webhook_test(struct store *st, int64_t webhook_id, int64_t site_id,
                                 const char *site_name, const char *title, const char *data_json,
                                 int64_t *delivery_id) {
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return STORE_ERROR;
  return store_tx_end(tx, store_webhook_test_locked(tx, webhook_id, site_id, site_name, title,
                                                    data_json, delivery_id));
}

enum store_rc store_delivery_heads(struct store *st, struct delivery_head **out, int *n) {
  /* the oldest pending delivery of each (webhook, site) queue */
  static struct store_sql q;
  return store_select(
      st, &q, head_cols,
      " FROM (SELECT id, webhook_id, site_id, next_attempt_at, ROW_NUMBER() OVER (PARTITION BY "
      "webhook_id, site_id ORDER BY id) AS rn FROM deliveries WHERE state = 'pending') AS q "
      "WHERE rn = 1",
      sizeof **out, 0, (void **)out, n, "finding due deliveries", "");
}

enum store_rc store_delivery_load(struct store *st, int64_t id, struct delivery_job *job) {
  static struct store_sql q;
  const char *sql = store_sql(&q, "SELECT ", job_cols,
                              ", e.data, w.config FROM deliveries d JOIN webhooks w ON w.id = "
                              "d.webhook_id JOIN events e ON "
                              "e.id = d.event_id WHERE d.id = ? AND d.state = 'pending'");
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c && sql ? db_prep(c, sql) : NULL;
  memset(job, 0, sizeof *job);
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  return store_one(c, s, sizeof *job, job_read, job_cols, job_fini, job, "loading a delivery");
}

int store_delivery_backlog(struct store *st, int64_t *n) {
  static const char q[] = "SELECT COUNT(*) FROM deliveries WHERE state = 'pending'";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  int rc;
  *n = 0;
  if (!s) return -1;
  rc = db_step(s);
  if (rc == DB_ROW) *n = db_col_i64(s, 0);
  db_reset(s);
  if (rc != DB_ROW) {
    log_error("counting the webhook backlog: %s", db_errmsg(c));
    return -1;
  }
  return 0;
}

int store_delivery_prune(struct store *st, int64_t before_ms) {
  static const char del[] =
      "DELETE FROM deliveries WHERE state IN ('delivered', 'failed') AND created_at < ?";
  struct db_stmt *s;
  int removed;
  struct store_tx *tx = store_tx_begin_engine(st, 0);
  if (!tx) return -1;
  s = db_prep(st->w, del);
  if (!s) goto fail;
  db_bind_i64(s, 1, before_ms);
  if (store_step_done(st->w, s, "pruning the webhook outbox") < 0) goto fail;
  removed = db_changes(st->w);
  if (store_tx_commit(tx) < 0) return -1;
  return removed;
fail:
  store_tx_rollback(tx);
  return -1;
}

int store_delivery_record(struct store *st, const struct delivery_result *res, int n) {
  static const char upd[] =
      "UPDATE deliveries SET state = ?, attempts = attempts + 1, last_status = ?, last_error = ?, "
      "next_attempt_at = ?, delivered_at = ? WHERE id = ? AND state = 'pending'";
  if (n <= 0) return 0;
  struct store_tx *tx = store_tx_begin_engine(st, 0);
  if (!tx) return -1;
  for (int i = 0; i < n; i++) {
    const struct delivery_result *r = &res[i];
    struct db_stmt *s = db_prep(st->w, upd);
    if (!s) goto fail;
    db_bind_text(s, 1, names_word(NAMES(delivery_state_names), (int)r->state, "pending"));
    if (r->status > 0) db_bind_int(s, 2, r->status);
    if (r->error && *r->error) db_bind_text(s, 3, r->error);
    db_bind_i64(s, 4, r->state == DELIVERY_PENDING ? r->next_attempt_at : r->at);
    if (r->state == DELIVERY_DELIVERED) db_bind_i64(s, 5, r->at);
    db_bind_i64(s, 6, r->id);
    if (store_step_done(st->w, s, "recording a delivery attempt") < 0) goto fail;
  }
  return store_tx_commit(tx);
fail:
  store_tx_rollback(tx);
  return -1;
}
