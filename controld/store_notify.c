/* store_notify — webhooks and their delivery outbox: CRUD, due heads per queue, attempt results. */
#include "store_notify.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "store_events.h"
#include "store_int.h"
#include "token.h"

void webhook_rec_fini(struct webhook_rec *w) {
  free(w->events);
  w->events = NULL;
  token_wipe(w->secret, sizeof w->secret);
}

void delivery_job_fini(struct delivery_job *j) {
  free(j->event.data);
  j->event.data = NULL;
  token_wipe(j->secret, sizeof j->secret);
}

static void read_webhook(struct db_stmt *s, struct webhook_rec *w) {
  const char *ev = db_col_text(s, 3);
  w->id = db_col_i64(s, 0);
  store_col_text(s, 1, w->url, sizeof w->url);
  store_col_text(s, 2, w->secret, sizeof w->secret);
  w->events = ev ? strdup(ev) : NULL;
  w->created_at = db_col_i64(s, 4);
}

enum store_rc store_webhook_create_locked(struct store *st, struct webhook_rec *w) {
  static const char count[] = "SELECT COUNT(*) FROM webhooks";
  static const char ins[] =
      "INSERT INTO webhooks (url, secret, events, created_at) VALUES (?, ?, ?, ?)";
  struct db_stmt *s;
  enum store_rc rc = STORE_ERROR;
  s = db_prep(st->w, count);
  if (!s) goto fail;
  if (db_step(s) != DB_ROW) {
    log_error("counting webhooks: %s", db_errmsg(st->w));
    db_reset(s);
    goto fail;
  }
  if (db_col_i64(s, 0) >= STORE_MAX_WEBHOOKS) {
    db_reset(s);
    rc = STORE_CONFLICT;
    goto fail;
  }
  db_reset(s);
  s = db_prep(st->w, ins);
  if (!s) goto fail;
  w->created_at = clock_wall_ms();
  db_bind_text(s, 1, w->url);
  db_bind_text(s, 2, w->secret);
  if (w->events) db_bind_text(s, 3, w->events);
  db_bind_i64(s, 4, w->created_at);
  if (store_step_done(st->w, s, "inserting webhook") < 0) goto fail;
  store_events_tx_reset_hooks(st); /* the transaction's next event reads the list again */
  w->id = db_last_id(st->w);
  return STORE_OK;
fail:
  return rc;
}

enum store_rc store_webhook_create(struct store *st, struct webhook_rec *w) {
  if (store_tx_begin(st) < 0) return STORE_ERROR;
  return store_tx_end(st, store_webhook_create_locked(st, w));
}

enum store_rc store_webhook_get(struct store *st, int64_t id, struct webhook_rec *out) {
  static const char sql[] = "SELECT id, url, secret, events, created_at FROM webhooks WHERE id = ?";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, sql) : NULL;
  enum store_rc rc = STORE_NOT_FOUND;
  int step;
  memset(out, 0, sizeof *out);
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  step = db_step(s);
  if (step == DB_ROW) {
    read_webhook(s, out);
    rc = STORE_OK;
  } else if (step != DB_DONE) {
    log_error("loading webhook %lld: %s", (long long)id, db_errmsg(c));
    rc = STORE_ERROR;
  }
  db_reset(s);
  return rc;
}

enum store_rc store_webhook_list(struct store *st, struct webhook_rec **out, int *n) {
  static const char sql[] = "SELECT id, url, secret, events, created_at FROM webhooks ORDER BY id";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, sql) : NULL;
  struct webhook_rec *arr = NULL;
  int cnt = 0, cap = 0, step;
  enum store_rc rc = STORE_OK;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  while ((step = db_step(s)) == DB_ROW) {
    struct webhook_rec *na = store_grow(arr, &cap, cnt, sizeof *arr, 16);
    if (!na) {
      rc = STORE_ERROR;
      break;
    }
    arr = na;
    memset(&arr[cnt], 0, sizeof arr[cnt]);
    read_webhook(s, &arr[cnt++]);
  }
  if (rc == STORE_OK && step != DB_DONE) {
    log_error("listing webhooks: %s", db_errmsg(c));
    rc = STORE_ERROR;
  }
  db_reset(s);
  if (rc != STORE_OK) {
    for (int i = 0; i < cnt; i++)
      webhook_rec_fini(&arr[i]);
    free(arr);
    return rc;
  }
  *out = arr;
  *n = cnt;
  return STORE_OK;
}

enum store_rc store_webhook_delete_locked(struct store *st, int64_t id) {
  static const char del[] = "DELETE FROM webhooks WHERE id = ?";
  struct db_stmt *s = db_prep(st->w, del);
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  if (store_step_done(st->w, s, "deleting webhook") < 0) return STORE_ERROR;
  store_events_tx_reset_hooks(st);
  return db_changes(st->w) ? STORE_OK : STORE_NOT_FOUND;
}

enum store_rc store_webhook_delete(struct store *st, int64_t id) {
  if (store_tx_begin(st) < 0) return STORE_ERROR;
  return store_tx_end(st, store_webhook_delete_locked(st, id));
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
    {.name = "state", .column = "d.state", .type = FIELD_STR, M(state)},
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

enum store_rc store_delivery_list(struct store *st, int64_t webhook_id, int64_t before, int limit,
                                  struct delivery_rec **out, int *n) {
  static struct store_sql q;
  struct db_conn *c = store_reader(st);
  const char *sql = store_sql(&q, "SELECT ", delivery_fields,
                              " FROM deliveries d JOIN events e ON e.id = d.event_id "
                              "WHERE d.webhook_id = ? AND d.id < ? ORDER BY d.id DESC LIMIT ?");
  struct db_stmt *s = c && sql ? db_prep(c, sql) : NULL;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  if (limit < 1) limit = 1;
  db_bind_i64(s, 1, webhook_id);
  db_bind_i64(s, 2, before > 0 ? before : INT64_MAX);
  db_bind_int(s, 3, limit);
  return store_rows_read(c, s, delivery_fields, sizeof **out, limit, (void **)out, n,
                         "listing deliveries");
}

static enum store_rc delivery_get_on(struct db_conn *c, int64_t id, struct delivery_rec *out) {
  static struct store_sql q;
  const char *sql =
      store_sql(&q, "SELECT ", delivery_fields,
                " FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.id = ?");
  struct db_stmt *s = sql ? db_prep(c, sql) : NULL;
  enum store_rc rc = STORE_NOT_FOUND;
  int step;
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  step = db_step(s);
  if (step == DB_ROW) {
    memset(out, 0, sizeof *out);
    store_fields_read(s, 0, delivery_fields, 0, out);
    rc = STORE_OK;
  } else if (step != DB_DONE) {
    log_error("loading delivery %lld: %s", (long long)id, db_errmsg(c));
    rc = STORE_ERROR;
  }
  db_reset(s);
  return rc;
}

enum store_rc store_delivery_get(struct store *st, int64_t id, struct delivery_rec *out) {
  struct db_conn *c = store_reader(st);
  if (!c) return STORE_ERROR;
  return delivery_get_on(c, id, out);
}

enum store_rc store_delivery_get_locked(struct store *st, int64_t id, struct delivery_rec *out) {
  return delivery_get_on(st->w, id, out);
}

enum store_rc store_webhook_test_locked(struct store *st, int64_t webhook_id, int64_t site_id,
                                        const char *site_name, const char *title,
                                        const char *data_json, int64_t *delivery_id) {
  static const char hook[] = "SELECT 1 FROM webhooks WHERE id = ?";
  static const char ins[] =
      "INSERT INTO events (id, site_id, site_name, type, title, data, created_at) "
      "VALUES ((SELECT COALESCE(MAX(id), 0) + 1 FROM events), ?, ?, 'webhook.test', ?, ?, ?) "
      "RETURNING id";
  static const char outbox[] =
      "INSERT INTO deliveries (webhook_id, event_id, uuid, site_id, next_attempt_at, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?)";
  struct db_stmt *s;
  int64_t now = clock_wall_ms(), event_id;
  char uuid[40];
  enum store_rc rc = STORE_ERROR;
  int step;
  /* this numbers an event itself: the queued ones first, and the next queued one counts anew */
  if (store_events_flush_locked(st) < 0) goto fail;
  store_events_renumber_locked(st);
  s = db_prep(st->w, hook);
  if (!s) goto fail;
  db_bind_i64(s, 1, webhook_id);
  step = db_step(s);
  db_reset(s);
  if (step != DB_ROW) {
    if (step == DB_DONE)
      rc = STORE_NOT_FOUND;
    else
      log_error("looking up webhook %lld: %s", (long long)webhook_id, db_errmsg(st->w));
    goto fail;
  }
  s = db_prep(st->w, ins);
  if (!s) goto fail;
  if (site_id) db_bind_i64(s, 1, site_id);
  if (site_name) db_bind_text(s, 2, site_name);
  db_bind_text(s, 3, title);
  db_bind_text(s, 4, data_json ? data_json : "{}");
  db_bind_i64(s, 5, now);
  if (db_step(s) != DB_ROW) {
    log_error("inserting test event: %s", db_errmsg(st->w));
    db_reset(s);
    goto fail;
  }
  event_id = db_col_i64(s, 0);
  db_reset(s);
  s = db_prep(st->w, outbox);
  if (!s || token_random_hex(uuid, sizeof uuid, 16) < 0) goto fail;
  db_bind_i64(s, 1, webhook_id);
  db_bind_i64(s, 2, event_id);
  db_bind_text(s, 3, uuid);
  if (site_id) db_bind_i64(s, 4, site_id);
  db_bind_i64(s, 5, now);
  db_bind_i64(s, 6, now);
  if (store_step_done(st->w, s, "queueing test delivery") < 0) goto fail;
  *delivery_id = db_last_id(st->w);
  store_events_pending_set_locked(st);
  return STORE_OK;
fail:
  return rc;
}

enum store_rc store_webhook_test(struct store *st, int64_t webhook_id, int64_t site_id,
                                 const char *site_name, const char *title, const char *data_json,
                                 int64_t *delivery_id) {
  if (store_tx_begin(st) < 0) return STORE_ERROR;
  return store_tx_end(st, store_webhook_test_locked(st, webhook_id, site_id, site_name, title,
                                                    data_json, delivery_id));
}

enum store_rc store_delivery_heads(struct store *st, struct delivery_head **out, int *n) {
  /* the oldest pending delivery of each (webhook, site) queue */
  static const char sql[] =
      "SELECT id, webhook_id, site_id, next_attempt_at FROM (SELECT id, webhook_id, site_id, "
      "next_attempt_at, ROW_NUMBER() OVER (PARTITION BY webhook_id, site_id ORDER BY id) AS rn "
      "FROM deliveries WHERE state = 'pending') AS q WHERE rn = 1";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, sql) : NULL;
  struct delivery_head *arr = NULL;
  int cnt = 0, cap = 0, step;
  enum store_rc rc = STORE_OK;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  while ((step = db_step(s)) == DB_ROW) {
    if (cnt == cap) {
      int ncap = cap ? cap * 2 : 64;
      struct delivery_head *na = realloc(arr, (size_t)ncap * sizeof *na);
      if (!na) {
        rc = STORE_ERROR;
        break;
      }
      arr = na;
      cap = ncap;
    }
    arr[cnt].id = db_col_i64(s, 0);
    arr[cnt].webhook_id = db_col_i64(s, 1);
    arr[cnt].site_id = db_col_i64(s, 2);
    arr[cnt].next_attempt_at = db_col_i64(s, 3);
    cnt++;
  }
  if (rc == STORE_OK && step != DB_DONE) {
    log_error("finding due deliveries: %s", db_errmsg(c));
    rc = STORE_ERROR;
  }
  db_reset(s);
  if (rc != STORE_OK) {
    free(arr);
    return rc;
  }
  *out = arr;
  *n = cnt;
  return STORE_OK;
}

enum store_rc store_delivery_load(struct store *st, int64_t id, struct delivery_job *job) {
  static const char sql[] =
      "SELECT d.id, d.webhook_id, d.site_id, d.uuid, d.attempts, d.created_at, w.url, w.secret, "
      "e.id, e.site_id, e.site_name, e.type, e.title, e.data, e.created_at "
      "FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id JOIN events e ON e.id = d.event_id "
      "WHERE d.id = ? AND d.state = 'pending'";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, sql) : NULL;
  enum store_rc rc = STORE_NOT_FOUND;
  int step;
  memset(job, 0, sizeof *job);
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  step = db_step(s);
  if (step == DB_ROW) {
    const char *data = db_col_text(s, 13);
    job->id = db_col_i64(s, 0);
    job->webhook_id = db_col_i64(s, 1);
    job->site_id = db_col_i64(s, 2);
    store_col_text(s, 3, job->uuid, sizeof job->uuid);
    job->attempts = db_col_int(s, 4);
    job->created_at = db_col_i64(s, 5);
    store_col_text(s, 6, job->url, sizeof job->url);
    store_col_text(s, 7, job->secret, sizeof job->secret);
    job->event.id = db_col_i64(s, 8);
    job->event.site_id = db_col_i64(s, 9);
    store_col_text(s, 10, job->event.site_name, sizeof job->event.site_name);
    store_col_text(s, 11, job->event.type, sizeof job->event.type);
    store_col_text(s, 12, job->event.title, sizeof job->event.title);
    job->event.data = strdup(data ? data : "{}");
    job->event.created_at = db_col_i64(s, 14);
    rc = job->event.data ? STORE_OK : STORE_ERROR;
  } else if (step != DB_DONE) {
    log_error("loading delivery %lld: %s", (long long)id, db_errmsg(c));
    rc = STORE_ERROR;
  }
  db_reset(s);
  if (rc != STORE_OK) delivery_job_fini(job);
  return rc;
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
  if (store_tx_begin_engine(st, 0) < 0) return -1;
  s = db_prep(st->w, del);
  if (!s) goto fail;
  db_bind_i64(s, 1, before_ms);
  if (store_step_done(st->w, s, "pruning the webhook outbox") < 0) goto fail;
  removed = db_changes(st->w);
  if (store_tx_commit(st) < 0) return -1;
  return removed;
fail:
  store_tx_rollback(st);
  return -1;
}

int store_delivery_record(struct store *st, const struct delivery_result *res, int n) {
  static const char upd[] =
      "UPDATE deliveries SET state = ?, attempts = attempts + 1, last_status = ?, last_error = ?, "
      "next_attempt_at = ?, delivered_at = ? WHERE id = ? AND state = 'pending'";
  if (n <= 0) return 0;
  if (store_tx_begin_engine(st, 0) < 0) return -1;
  for (int i = 0; i < n; i++) {
    const struct delivery_result *r = &res[i];
    struct db_stmt *s = db_prep(st->w, upd);
    if (!s) goto fail;
    db_bind_text(s, 1, r->state);
    if (r->status > 0) db_bind_int(s, 2, r->status);
    if (r->error && *r->error) db_bind_text(s, 3, r->error);
    db_bind_i64(s, 4, strcmp(r->state, "pending") == 0 ? r->next_attempt_at : r->at);
    if (strcmp(r->state, "delivered") == 0) db_bind_i64(s, 5, r->at);
    db_bind_i64(s, 6, r->id);
    if (store_step_done(st->w, s, "recording a delivery attempt") < 0) goto fail;
  }
  return store_tx_commit(st);
fail:
  store_tx_rollback(st);
  return -1;
}
