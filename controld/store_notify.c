/* store_notify — webhooks and their delivery outbox: CRUD, due heads per queue, attempt results. */
#include "store_notify.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
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

static void read_webhook(sqlite3_stmt *s, struct webhook_rec *w) {
  const unsigned char *ev = sqlite3_column_text(s, 3);
  w->id = sqlite3_column_int64(s, 0);
  store_col_text(s, 1, w->url, sizeof w->url);
  store_col_text(s, 2, w->secret, sizeof w->secret);
  w->events = ev ? strdup((const char *)ev) : NULL;
  w->created_at = sqlite3_column_int64(s, 4);
}

enum store_rc store_webhook_create_locked(struct store *st, struct webhook_rec *w) {
  static const char count[] = "SELECT COUNT(*) FROM webhooks";
  static const char ins[] =
      "INSERT INTO webhooks (url, secret, events, created_at) VALUES (?, ?, ?, ?)";
  sqlite3_stmt *s;
  enum store_rc rc = STORE_ERROR;
  s = store_stmt(&st->w, count);
  if (!s) goto fail;
  if (sqlite3_step(s) != SQLITE_ROW) {
    log_error("counting webhooks: %s", sqlite3_errmsg(st->w.db));
    sqlite3_reset(s);
    goto fail;
  }
  if (sqlite3_column_int64(s, 0) >= STORE_MAX_WEBHOOKS) {
    sqlite3_reset(s);
    rc = STORE_CONFLICT;
    goto fail;
  }
  sqlite3_reset(s);
  s = store_stmt(&st->w, ins);
  if (!s) goto fail;
  w->created_at = clock_wall_ms();
  sqlite3_bind_text(s, 1, w->url, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, w->secret, -1, SQLITE_STATIC);
  if (w->events) sqlite3_bind_text(s, 3, w->events, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 4, w->created_at);
  if (store_step_done(&st->w, s, "inserting webhook") < 0) goto fail;
  w->id = sqlite3_last_insert_rowid(st->w.db);
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
  struct dbconn *c = store_reader(st);
  sqlite3_stmt *s = c ? store_stmt(c, sql) : NULL;
  enum store_rc rc = STORE_NOT_FOUND;
  int step;
  memset(out, 0, sizeof *out);
  if (!s) return STORE_ERROR;
  sqlite3_bind_int64(s, 1, id);
  step = sqlite3_step(s);
  if (step == SQLITE_ROW) {
    read_webhook(s, out);
    rc = STORE_OK;
  } else if (step != SQLITE_DONE) {
    log_error("loading webhook %lld: %s", (long long)id, sqlite3_errmsg(c->db));
    rc = STORE_ERROR;
  }
  sqlite3_reset(s);
  return rc;
}

enum store_rc store_webhook_list(struct store *st, struct webhook_rec **out, int *n) {
  static const char sql[] = "SELECT id, url, secret, events, created_at FROM webhooks ORDER BY id";
  struct dbconn *c = store_reader(st);
  sqlite3_stmt *s = c ? store_stmt(c, sql) : NULL;
  struct webhook_rec *arr = NULL;
  int cnt = 0, cap = 0, step;
  enum store_rc rc = STORE_OK;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  while ((step = sqlite3_step(s)) == SQLITE_ROW) {
    struct webhook_rec *na = store_grow(arr, &cap, cnt, sizeof *arr, 16);
    if (!na) {
      rc = STORE_ERROR;
      break;
    }
    arr = na;
    memset(&arr[cnt], 0, sizeof arr[cnt]);
    read_webhook(s, &arr[cnt++]);
  }
  if (rc == STORE_OK && step != SQLITE_DONE) {
    log_error("listing webhooks: %s", sqlite3_errmsg(c->db));
    rc = STORE_ERROR;
  }
  sqlite3_reset(s);
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
  sqlite3_stmt *s = store_stmt(&st->w, del);
  if (!s) return STORE_ERROR;
  sqlite3_bind_int64(s, 1, id);
  if (store_step_done(&st->w, s, "deleting webhook") < 0) return STORE_ERROR;
  return sqlite3_changes(st->w.db) ? STORE_OK : STORE_NOT_FOUND;
}

enum store_rc store_webhook_delete(struct store *st, int64_t id) {
  if (store_tx_begin(st) < 0) return STORE_ERROR;
  return store_tx_end(st, store_webhook_delete_locked(st, id));
}

#define DELIVERY_COLS                                                                              \
  "d.id, d.webhook_id, d.event_id, d.site_id, d.uuid, d.state, e.type, d.attempts, "               \
  "d.last_status, d.last_error, d.next_attempt_at, d.created_at, d.delivered_at "

static void read_delivery(sqlite3_stmt *s, struct delivery_rec *d) {
  memset(d, 0, sizeof *d);
  d->id = sqlite3_column_int64(s, 0);
  d->webhook_id = sqlite3_column_int64(s, 1);
  d->event_id = sqlite3_column_int64(s, 2);
  d->site_id = sqlite3_column_int64(s, 3);
  store_col_text(s, 4, d->uuid, sizeof d->uuid);
  store_col_text(s, 5, d->state, sizeof d->state);
  store_col_text(s, 6, d->event_type, sizeof d->event_type);
  d->attempts = sqlite3_column_int(s, 7);
  d->last_status = sqlite3_column_int(s, 8);
  store_col_text(s, 9, d->last_error, sizeof d->last_error);
  d->next_attempt_at = sqlite3_column_int64(s, 10);
  d->created_at = sqlite3_column_int64(s, 11);
  d->delivered_at = sqlite3_column_int64(s, 12);
}

enum store_rc store_delivery_list(struct store *st, int64_t webhook_id, int64_t before, int limit,
                                  struct delivery_rec **out, int *n) {
  static const char sql[] =
      "SELECT " DELIVERY_COLS "FROM deliveries d JOIN events e ON e.id = d.event_id "
      "WHERE d.webhook_id = ? AND d.id < ? ORDER BY d.id DESC LIMIT ?";
  struct dbconn *c = store_reader(st);
  sqlite3_stmt *s = c ? store_stmt(c, sql) : NULL;
  struct delivery_rec *arr;
  int cnt = 0, step = SQLITE_DONE;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  if (limit < 1) limit = 1;
  arr = calloc((size_t)limit, sizeof *arr);
  if (!arr) return STORE_ERROR;
  sqlite3_bind_int64(s, 1, webhook_id);
  sqlite3_bind_int64(s, 2, before > 0 ? before : INT64_MAX);
  sqlite3_bind_int(s, 3, limit);
  while (cnt < limit && (step = sqlite3_step(s)) == SQLITE_ROW)
    read_delivery(s, &arr[cnt++]);
  if (cnt < limit && step != SQLITE_DONE) {
    log_error("listing deliveries: %s", sqlite3_errmsg(c->db));
    sqlite3_reset(s);
    free(arr);
    return STORE_ERROR;
  }
  sqlite3_reset(s);
  *out = arr;
  *n = cnt;
  return STORE_OK;
}

static enum store_rc delivery_get_on(struct dbconn *c, int64_t id, struct delivery_rec *out) {
  static const char sql[] =
      "SELECT " DELIVERY_COLS "FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.id = ?";
  sqlite3_stmt *s = store_stmt(c, sql);
  enum store_rc rc = STORE_NOT_FOUND;
  int step;
  if (!s) return STORE_ERROR;
  sqlite3_bind_int64(s, 1, id);
  step = sqlite3_step(s);
  if (step == SQLITE_ROW) {
    read_delivery(s, out);
    rc = STORE_OK;
  } else if (step != SQLITE_DONE) {
    log_error("loading delivery %lld: %s", (long long)id, sqlite3_errmsg(c->db));
    rc = STORE_ERROR;
  }
  sqlite3_reset(s);
  return rc;
}

enum store_rc store_delivery_get(struct store *st, int64_t id, struct delivery_rec *out) {
  struct dbconn *c = store_reader(st);
  if (!c) return STORE_ERROR;
  return delivery_get_on(c, id, out);
}

enum store_rc store_delivery_get_locked(struct store *st, int64_t id, struct delivery_rec *out) {
  return delivery_get_on(&st->w, id, out);
}

enum store_rc store_webhook_test_locked(struct store *st, int64_t webhook_id, int64_t site_id,
                                        const char *site_name, const char *title,
                                        const char *data_json, int64_t *delivery_id) {
  static const char hook[] = "SELECT 1 FROM webhooks WHERE id = ?";
  static const char ins[] =
      "INSERT INTO events (site_id, site_name, type, title, data, created_at) "
      "VALUES (?, ?, 'webhook.test', ?, ?, ?)";
  static const char outbox[] =
      "INSERT INTO deliveries (webhook_id, event_id, uuid, site_id, next_attempt_at, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?)";
  sqlite3_stmt *s;
  int64_t now = clock_wall_ms(), event_id;
  char uuid[40];
  enum store_rc rc = STORE_ERROR;
  int step;
  s = store_stmt(&st->w, hook);
  if (!s) goto fail;
  sqlite3_bind_int64(s, 1, webhook_id);
  step = sqlite3_step(s);
  sqlite3_reset(s);
  if (step != SQLITE_ROW) {
    if (step == SQLITE_DONE)
      rc = STORE_NOT_FOUND;
    else
      log_error("looking up webhook %lld: %s", (long long)webhook_id, sqlite3_errmsg(st->w.db));
    goto fail;
  }
  s = store_stmt(&st->w, ins);
  if (!s) goto fail;
  if (site_id) sqlite3_bind_int64(s, 1, site_id);
  if (site_name) sqlite3_bind_text(s, 2, site_name, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, title, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 4, data_json ? data_json : "{}", -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 5, now);
  if (store_step_done(&st->w, s, "inserting test event") < 0) goto fail;
  event_id = sqlite3_last_insert_rowid(st->w.db);
  s = store_stmt(&st->w, outbox);
  if (!s || token_random_hex(uuid, sizeof uuid, 16) < 0) goto fail;
  sqlite3_bind_int64(s, 1, webhook_id);
  sqlite3_bind_int64(s, 2, event_id);
  sqlite3_bind_text(s, 3, uuid, -1, SQLITE_TRANSIENT);
  if (site_id) sqlite3_bind_int64(s, 4, site_id);
  sqlite3_bind_int64(s, 5, now);
  sqlite3_bind_int64(s, 6, now);
  if (store_step_done(&st->w, s, "queueing test delivery") < 0) goto fail;
  *delivery_id = sqlite3_last_insert_rowid(st->w.db);
  st->event_pending = 1;
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
  /* SQLite takes the bare columns of a MIN() aggregate from the row holding the minimum */
  static const char sql[] = "SELECT MIN(id), webhook_id, site_id, next_attempt_at FROM deliveries "
                            "WHERE state = 'pending' GROUP BY webhook_id, site_id";
  struct dbconn *c = store_reader(st);
  sqlite3_stmt *s = c ? store_stmt(c, sql) : NULL;
  struct delivery_head *arr = NULL;
  int cnt = 0, cap = 0, step;
  enum store_rc rc = STORE_OK;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  while ((step = sqlite3_step(s)) == SQLITE_ROW) {
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
    arr[cnt].id = sqlite3_column_int64(s, 0);
    arr[cnt].webhook_id = sqlite3_column_int64(s, 1);
    arr[cnt].site_id = sqlite3_column_int64(s, 2);
    arr[cnt].next_attempt_at = sqlite3_column_int64(s, 3);
    cnt++;
  }
  if (rc == STORE_OK && step != SQLITE_DONE) {
    log_error("finding due deliveries: %s", sqlite3_errmsg(c->db));
    rc = STORE_ERROR;
  }
  sqlite3_reset(s);
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
  struct dbconn *c = store_reader(st);
  sqlite3_stmt *s = c ? store_stmt(c, sql) : NULL;
  enum store_rc rc = STORE_NOT_FOUND;
  int step;
  memset(job, 0, sizeof *job);
  if (!s) return STORE_ERROR;
  sqlite3_bind_int64(s, 1, id);
  step = sqlite3_step(s);
  if (step == SQLITE_ROW) {
    const unsigned char *data = sqlite3_column_text(s, 13);
    job->id = sqlite3_column_int64(s, 0);
    job->webhook_id = sqlite3_column_int64(s, 1);
    job->site_id = sqlite3_column_int64(s, 2);
    store_col_text(s, 3, job->uuid, sizeof job->uuid);
    job->attempts = sqlite3_column_int(s, 4);
    job->created_at = sqlite3_column_int64(s, 5);
    store_col_text(s, 6, job->url, sizeof job->url);
    store_col_text(s, 7, job->secret, sizeof job->secret);
    job->event.id = sqlite3_column_int64(s, 8);
    job->event.site_id = sqlite3_column_int64(s, 9);
    store_col_text(s, 10, job->event.site_name, sizeof job->event.site_name);
    store_col_text(s, 11, job->event.type, sizeof job->event.type);
    store_col_text(s, 12, job->event.title, sizeof job->event.title);
    job->event.data = strdup(data ? (const char *)data : "{}");
    job->event.created_at = sqlite3_column_int64(s, 14);
    rc = job->event.data ? STORE_OK : STORE_ERROR;
  } else if (step != SQLITE_DONE) {
    log_error("loading delivery %lld: %s", (long long)id, sqlite3_errmsg(c->db));
    rc = STORE_ERROR;
  }
  sqlite3_reset(s);
  if (rc != STORE_OK) delivery_job_fini(job);
  return rc;
}

int store_delivery_backlog(struct store *st, int64_t *n) {
  static const char q[] = "SELECT COUNT(*) FROM deliveries WHERE state = 'pending'";
  struct dbconn *c = store_reader(st);
  sqlite3_stmt *s = c ? store_stmt(c, q) : NULL;
  int rc;
  *n = 0;
  if (!s) return -1;
  rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) *n = sqlite3_column_int64(s, 0);
  sqlite3_reset(s);
  if (rc != SQLITE_ROW) {
    log_error("counting the webhook backlog: %s", sqlite3_errmsg(c->db));
    return -1;
  }
  return 0;
}

int store_delivery_prune(struct store *st, int64_t before_ms) {
  static const char del[] =
      "DELETE FROM deliveries WHERE state IN ('delivered', 'failed') AND created_at < ?";
  sqlite3_stmt *s;
  int removed;
  if (store_tx_begin(st) < 0) return -1;
  s = store_stmt(&st->w, del);
  if (!s) goto fail;
  sqlite3_bind_int64(s, 1, before_ms);
  if (store_step_done(&st->w, s, "pruning the webhook outbox") < 0) goto fail;
  removed = sqlite3_changes(st->w.db);
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
  if (store_tx_begin(st) < 0) return -1;
  for (int i = 0; i < n; i++) {
    const struct delivery_result *r = &res[i];
    sqlite3_stmt *s = store_stmt(&st->w, upd);
    if (!s) goto fail;
    sqlite3_bind_text(s, 1, r->state, -1, SQLITE_STATIC);
    if (r->status > 0) sqlite3_bind_int(s, 2, r->status);
    if (r->error && *r->error) sqlite3_bind_text(s, 3, r->error, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, strcmp(r->state, "pending") == 0 ? r->next_attempt_at : r->at);
    if (strcmp(r->state, "delivered") == 0) sqlite3_bind_int64(s, 5, r->at);
    sqlite3_bind_int64(s, 6, r->id);
    if (store_step_done(&st->w, s, "recording a delivery attempt") < 0) goto fail;
  }
  return store_tx_commit(st);
fail:
  store_tx_rollback(st);
  return -1;
}
