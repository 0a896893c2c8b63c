/* store_events — events (site messages, notification center) and their webhook outbox rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "store_int.h"
#include "token.h"

/* 1 when a webhook's filter (JSON array text, NULL = all) lists type. */
static int filter_matches(const char *filter, const char *type) {
  cJSON *arr, *it;
  int hit = 0;
  if (!filter) return 1;
  arr = json_parse(filter, strlen(filter));
  if (!cJSON_IsArray(arr)) {
    cJSON_Delete(arr);
    return 1;
  }
  cJSON_ArrayForEach(it, arr) if (cJSON_IsString(it) && strcmp(it->valuestring, type) == 0) hit = 1;
  cJSON_Delete(arr);
  return hit;
}

int64_t store_event_add_locked(struct store *st, int64_t site_id, const char *site_name,
                               const char *type, const char *title, const char *data_json) {
  /* id = the last one + 1 under the ordered-write row, as publication seqs: no gap after a
     rolled-back transaction (events are never deleted) */
  static const char ins[] =
      "INSERT INTO events (id, site_id, site_name, type, title, data, created_at) "
      "VALUES ((SELECT COALESCE(MAX(id), 0) + 1 FROM events), ?, ?, ?, ?, ?, ?) RETURNING id";
  static const char hooks[] = "SELECT id, events FROM webhooks ORDER BY id";
  static const char outbox[] =
      "INSERT INTO deliveries (webhook_id, event_id, uuid, site_id, next_attempt_at, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?)";
  struct db_stmt *q = db_prep(st->w, ins), *h;
  int64_t now = clock_wall_ms(), event_id;
  int rc;
  if (!q) return -1;
  if (site_id) db_bind_i64(q, 1, site_id);
  if (site_name) db_bind_text(q, 2, site_name);
  db_bind_text(q, 3, type);
  db_bind_text(q, 4, title);
  db_bind_text(q, 5, data_json ? data_json : "{}");
  db_bind_i64(q, 6, now);
  if (db_step(q) != DB_ROW) {
    log_error("inserting event: %s", db_errmsg(st->w));
    db_reset(q);
    return -1;
  }
  event_id = db_col_i64(q, 0); /* RETURNING: no second round trip for the id */
  db_reset(q);

  h = db_prep(st->w, hooks);
  if (!h) return -1;
  /* collect matching webhooks first: the outbox insert reuses the writer connection */
  {
    int64_t ids[256];
    int n = 0;
    while ((rc = db_step(h)) == DB_ROW && n < 256) {
      const char *filter = db_col_text(h, 1);
      if (filter_matches(filter, type)) ids[n++] = db_col_i64(h, 0);
    }
    db_reset(h);
    for (int i = 0; i < n; i++) {
      char uuid[40];
      struct db_stmt *o = db_prep(st->w, outbox);
      if (!o || token_random_hex(uuid, sizeof uuid, 16) < 0) return -1;
      db_bind_i64(o, 1, ids[i]);
      db_bind_i64(o, 2, event_id);
      db_bind_text(o, 3, uuid);
      if (site_id) db_bind_i64(o, 4, site_id);
      db_bind_i64(o, 5, now);
      db_bind_i64(o, 6, now);
      if (store_step_done(st->w, o, "queueing webhook delivery") < 0) return -1;
    }
  }
  st->event_pending = 1;
  return event_id;
}

int64_t store_event_add(struct store *st, int64_t site_id, const char *site_name, const char *type,
                        const char *title, const char *data_json) {
  int64_t id;
  if (store_tx_begin(st) < 0) return -1;
  id = store_event_add_locked(st, site_id, site_name, type, title, data_json);
  if (id < 0) {
    store_tx_rollback(st);
    return -1;
  }
  return store_tx_commit(st) < 0 ? -1 : id;
}

enum store_rc store_event_list(struct store *st, int64_t site_id, int64_t after, int limit,
                               struct event_rec **out, int *n) {
  static const char all[] =
      "SELECT id, site_id, site_name, type, title, data, created_at FROM events "
      "WHERE id > ? ORDER BY id LIMIT ?";
  static const char one[] =
      "SELECT id, site_id, site_name, type, title, data, created_at FROM events "
      "WHERE site_id = ? AND id > ? ORDER BY id LIMIT ?";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, site_id ? one : all) : NULL;
  struct event_rec *arr;
  int cnt = 0, rc, b = 1;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  arr = calloc((size_t)(limit > 0 ? limit : 1), sizeof *arr);
  if (!arr) return STORE_ERROR;
  if (site_id) db_bind_i64(s, b++, site_id);
  db_bind_i64(s, b++, after);
  db_bind_int(s, b, limit);
  while ((rc = db_step(s)) == DB_ROW && cnt < limit) {
    struct event_rec *e = &arr[cnt++];
    const char *d = db_col_text(s, 5);
    e->id = db_col_i64(s, 0);
    e->site_id = db_col_i64(s, 1);
    store_col_text(s, 2, e->site_name, sizeof e->site_name);
    store_col_text(s, 3, e->type, sizeof e->type);
    store_col_text(s, 4, e->title, sizeof e->title);
    e->data = strdup(d ? d : "{}");
    e->created_at = db_col_i64(s, 6);
  }
  db_reset(s);
  *out = arr;
  *n = cnt;
  return STORE_OK;
}

void store_events_free(struct event_rec *arr, int n) {
  for (int i = 0; i < n; i++)
    free(arr[i].data);
  free(arr);
}
