/* store_events — events (site messages, notification center) and their webhook outbox rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "names.h"
#include "store_core.h"
#include "store_events.h"
#include "token.h"

/* The events feature's state: the event hook, and the open write transaction's events (under the
   writer lock). */
struct events_state {
  void (*hook)(void *arg); /* run after a commit that wrote events (store_set_event_hook) */
  void *hook_arg;
  int pending;      /* the open transaction recorded events (or deliveries) */
  int hooks_loaded; /* hooks[0..nhooks) is the webhook list as this transaction sees it */
  int nhooks;
  struct store_hook {
    int64_t id;
    char *events; /* the filter (JSON array text), NULL = every event */
    char *sites;  /* the site filter (JSON array of ids), NULL = every site */
  } * hooks;
  int64_t ev_next;      /* PostgreSQL: the next event id in this transaction, 0 = not read yet */
  struct db_arr evq[7]; /* PostgreSQL: events recorded and not yet written (columns) */
  int ev_n;
  struct db_arr dlq[6]; /* … and their outbox rows */
  int dl_n;
  struct event_log *logq; /* state-change log lines written when the transaction commits */
  int logq_n, logq_cap, logq_dropped;
};

/* One log line waiting for its transaction's commit. */
struct event_log {
  enum log_level level;
  char type[48];
  cJSON *fields; /* owned */
};

/* Most log lines one transaction holds back (a 10,000-site round that changes every origin
   writes about 30,000); later ones are counted and reported in one line. */
#define STORE_EVENTS_LOG_MAX 200000

static const struct store_participant events_participant;

static struct events_state *events_of(struct store *st) {
  return store_participant_state(st, &events_participant);
}

/* Events a PostgreSQL transaction queues before writing them (bounds its memory). */
#define STORE_EVENTS_QUEUE_MAX 4096

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

/* 1 when a channel's site filter (JSON array of ids, NULL = all) lists site_id; an event without
   a site passes every filter. */
static int sites_match(const char *sites, int64_t site_id) {
  cJSON *arr, *it;
  int hit = 0;
  if (!sites || site_id <= 0) return 1;
  arr = json_parse(sites, strlen(sites));
  if (!cJSON_IsArray(arr)) {
    cJSON_Delete(arr);
    return 1;
  }
  cJSON_ArrayForEach(it, arr) if (cJSON_IsNumber(it) && (int64_t)it->valuedouble == site_id) hit =
      1;
  cJSON_Delete(arr);
  return hit;
}

/* The webhook list as this transaction sees it, read by its first event (not once per event). */
static int hooks_load(struct store *st) {
  struct events_state *es = events_of(st);
  static const char hooks[] = "SELECT id, events, site_ids FROM webhooks ORDER BY id";
  struct db_stmt *h;
  int rc;
  if (es->hooks_loaded) return 0;
  store_events_tx_reset_hooks(st);
  h = db_prep(st->w, hooks);
  if (!h) return -1;
  while ((rc = db_step(h)) == DB_ROW && es->nhooks < STORE_MAX_WEBHOOKS) {
    const char *ev = db_col_text(h, 1), *si = db_col_text(h, 2);
    struct store_hook *nh = realloc(es->hooks, (size_t)(es->nhooks + 1) * sizeof *nh);
    if (!nh) break;
    es->hooks = nh;
    nh[es->nhooks].id = db_col_i64(h, 0);
    nh[es->nhooks].events = ev ? strdup(ev) : NULL;
    nh[es->nhooks].sites = si ? strdup(si) : NULL;
    if ((ev && !nh[es->nhooks].events) || (si && !nh[es->nhooks].sites)) {
      free(nh[es->nhooks].events);
      free(nh[es->nhooks].sites);
      break;
    }
    es->nhooks++;
  }
  db_reset(h);
  if (rc == DB_ERR) {
    log_error("reading webhooks: %s", db_errmsg(st->w));
    return -1;
  }
  if (rc == DB_ROW && es->nhooks < STORE_MAX_WEBHOOKS) {
    log_error("reading webhooks: out of memory");
    return -1;
  }
  es->hooks_loaded = 1;
  return 0;
}

/* PostgreSQL, inside an ordered transaction: number the event here (the ordered-write row keeps
   anyone else from numbering events until commit) and queue it with its outbox rows, to be written
   set-based by store_events_flush_locked. */
static int64_t event_queue(struct store_tx *tx, int64_t site_id, const char *site_name,
                           const char *type, const char *title, const char *data_json,
                           int64_t now) {
  struct store *st = store_tx_store(tx);
  struct events_state *es = events_of(st);
  static const char next[] = "SELECT COALESCE(MAX(id), 0) + 1 FROM events";
  int64_t id;
  if (!es->ev_next) {
    struct db_stmt *q = db_prep(st->w, next);
    if (!q || store_step_i64(st->w, q, "numbering events", &es->ev_next) < 0) return -1;
  }
  id = es->ev_next;
  db_arr_i64(&es->evq[0], id);
  if (site_id)
    db_arr_i64(&es->evq[1], site_id);
  else
    db_arr_null(&es->evq[1]);
  db_arr_text(&es->evq[2], site_name);
  db_arr_text(&es->evq[3], type);
  db_arr_text(&es->evq[4], title);
  db_arr_text(&es->evq[5], data_json ? data_json : "{}");
  db_arr_i64(&es->evq[6], now);
  es->ev_n++;
  for (int i = 0; i < es->nhooks; i++) {
    char uuid[40];
    if (!filter_matches(es->hooks[i].events, type) || !sites_match(es->hooks[i].sites, site_id))
      continue;
    if (token_random_hex(uuid, sizeof uuid, 16) < 0) return -1;
    db_arr_i64(&es->dlq[0], es->hooks[i].id);
    db_arr_i64(&es->dlq[1], id);
    db_arr_text(&es->dlq[2], uuid);
    if (site_id)
      db_arr_i64(&es->dlq[3], site_id);
    else
      db_arr_null(&es->dlq[3]);
    db_arr_i64(&es->dlq[4], now);
    db_arr_i64(&es->dlq[5], now);
    es->dl_n++;
  }
  es->ev_next++;
  /* bound the memory of a transaction with very many events */
  if (es->ev_n >= STORE_EVENTS_QUEUE_MAX && store_events_flush_locked(tx) < 0) return -1;
  return id;
}

int store_events_flush_locked(struct store_tx *tx) {
  struct store *st = store_tx_store(tx);
  struct events_state *es = events_of(st);
  static const char ins[] =
      "INSERT INTO events (id, site_id, site_name, type, title, data, created_at) SELECT * FROM "
      "unnest(?::bigint[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[])";
  static const char outbox[] =
      "INSERT INTO deliveries (webhook_id, event_id, uuid, site_id, next_attempt_at, created_at) "
      "SELECT * FROM unnest(?::bigint[], ?::bigint[], ?::text[], ?::bigint[], ?::bigint[], "
      "?::bigint[])";
  int rc = 0;
  if (es->ev_n && store_step_arrays(st->w, ins, es->evq, 7, "inserting events") < 0) rc = -1;
  if (rc == 0 && es->dl_n &&
      store_step_arrays(st->w, outbox, es->dlq, 6, "queueing webhook deliveries") < 0)
    rc = -1;
  for (int i = 0; i < 7; i++)
    db_arr_clear(&es->evq[i]);
  for (int i = 0; i < 6; i++)
    db_arr_clear(&es->dlq[i]);
  es->ev_n = es->dl_n = 0;
  return rc;
}

void store_events_tx_reset_hooks(struct store *st) {
  struct events_state *es = events_of(st);
  for (int i = 0; i < es->nhooks; i++) {
    free(es->hooks[i].events);
    free(es->hooks[i].sites);
  }
  free(es->hooks);
  es->hooks = NULL;
  es->nhooks = 0;
  es->hooks_loaded = 0;
}

void store_events_tx_reset(struct store *st) {
  struct events_state *es = events_of(st);
  store_events_tx_reset_hooks(st);
  for (int i = 0; i < 7; i++)
    db_arr_free(&es->evq[i]);
  for (int i = 0; i < 6; i++)
    db_arr_free(&es->dlq[i]);
  es->ev_n = es->dl_n = 0;
  es->ev_next = 0;
}

int64_t store_event_insert_locked(struct store_tx *tx, int64_t site_id, const char *site_name,
                                  const char *type, const char *title, const char *data_json,
                                  int64_t now) {
  struct store *st = store_tx_store(tx);
  /* id = the last one + 1 under the ordered-write row, as publication seqs: no gap after a
     rolled-back transaction (pruning keeps the newest event) */
  static const char ins[] =
      "INSERT INTO events (id, site_id, site_name, type, title, data, created_at) "
      "VALUES ((SELECT COALESCE(MAX(id), 0) + 1 FROM events), ?, ?, ?, ?, ?, ?) RETURNING id";
  struct db_stmt *q = db_prep(st->w, ins);
  int64_t event_id;
  if (!q) return -1;
  store_bind(q, 1, "PttttI", site_id, site_name, type, title, data_json ? data_json : "{}", now);
  /* RETURNING: no second round trip for the id */
  return store_step_i64(st->w, q, "inserting event", &event_id) < 0 ? -1 : event_id;
}

int store_delivery_queue_locked(struct store_tx *tx, int64_t webhook_id, int64_t event_id,
                                int64_t site_id, int64_t now) {
  struct store *st = store_tx_store(tx);
  static const char outbox[] =
      "INSERT INTO deliveries (webhook_id, event_id, uuid, site_id, next_attempt_at, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?)";
  char uuid[40];
  if (token_random_hex(uuid, sizeof uuid, 16) < 0) return -1;
  return store_exec(st->w, "queueing webhook delivery", outbox, "IItPII", webhook_id, event_id,
                    uuid, site_id, now, now);
}

int64_t store_event_add_locked(struct store_tx *tx, int64_t site_id, const char *site_name,
                               const char *type, const char *title, const char *data_json) {
  struct store *st = store_tx_store(tx);
  struct events_state *es = events_of(st);
  int64_t now = clock_wall_ms(), event_id;
  if (hooks_load(st) < 0) return -1;
  if (db_kind(st->w) == DB_PG && st->tx_gen != 0) {
    event_id = event_queue(tx, site_id, site_name, type, title, data_json, now);
    if (event_id > 0) es->pending = 1;
    return event_id;
  }
  event_id = store_event_insert_locked(tx, site_id, site_name, type, title, data_json, now);
  if (event_id < 0) return -1;
  for (int i = 0; i < es->nhooks; i++)
    if (filter_matches(es->hooks[i].events, type) && sites_match(es->hooks[i].sites, site_id) &&
        store_delivery_queue_locked(tx, es->hooks[i].id, event_id, site_id, now) < 0)
      return -1;
  es->pending = 1;
  return event_id;
}

int64_t store_site_event_locked(struct store_tx *tx, int64_t site_id, const char *site_name,
                                enum event_type type, const char *title, const cJSON *data) {
  const char *word = names_word(event_type_names, EVENT_TYPES, (int)type, NULL);
  char *text = word && data ? json_print(data) : NULL;
  cJSON *f = text ? cJSON_CreateObject() : NULL;
  const cJSON *it;
  int64_t id = -1;
  if (!f) {
    log_error("site %lld: cannot format a %s event", (long long)site_id, word ? word : "?");
    goto out;
  }
  json_add_i64(f, "site_id", site_id);
  cJSON_AddStringToObject(f, "site", site_name);
  cJSON_ArrayForEach(it, data) {
    if (it->string && !cJSON_GetObjectItemCaseSensitive(f, it->string))
      cJSON_AddItemToObject(f, it->string, cJSON_Duplicate(it, 1));
  }
  id = store_event_add_locked(tx, site_id, site_name, word, title, text);
  /* written when the transaction commits: a round retried after a failed commit logs once */
  if (id > 0)
    (void)store_event_log_locked(tx, event_type_rules[type].level, word, f);
  else
    cJSON_Delete(f);
out:
  free(text);
  return id;
}

/* Old, not the newest, no delivery pending (the finished ones go with the event: ON DELETE
   CASCADE), not in a kept incident's timeline (its deliveries are the incident's evidence: the
   event goes at the first prune after the incident's). */
#define PRUNE_OLD                                                                                  \
  "e.created_at < ? AND e.id < (SELECT MAX(id) FROM events) AND NOT EXISTS (SELECT 1 FROM "        \
  "deliveries d WHERE d.event_id = e.id AND d.state = 'pending') AND NOT EXISTS (SELECT 1 FROM "   \
  "incident_entries ie WHERE ie.event_id = e.id) ORDER BY e.created_at LIMIT ?"

int64_t store_event_prune(struct store *st, int64_t before_ms, int tests_only) {
  static const char all[] = "SELECT e.id FROM events e WHERE " PRUNE_OLD;
  static const char tests[] =
      "SELECT e.id FROM events e WHERE e.type = 'webhook.test' AND " PRUNE_OLD;
  static const char *const del[] = {"DELETE FROM events WHERE id = ?"};
  return store_prune_ids(st, tests_only ? tests : all, del, 1, STORE_EVENTS_PRUNE_BATCH, before_ms,
                         "pruning events");
}

int64_t store_event_prune_all(struct store *st, int64_t before_ms) {
  return store_event_prune(st, before_ms, 0);
}

int64_t store_event_add(struct store *st, int64_t site_id, const char *site_name, const char *type,
                        const char *title, const char *data_json) {
  int64_t id;
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return -1;
  id = store_event_add_locked(tx, site_id, site_name, type, title, data_json);
  if (id < 0) {
    store_tx_rollback(tx);
    return -1;
  }
  return store_tx_commit(tx) < 0 ? -1 : id;
}

#define M(m) .offset = offsetof(struct event_rec, m), .size = sizeof(((struct event_rec *)0)->m)
/* The columns of an event but its data (an owned string, read by event_read). */
static const struct field_def event_cols[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, M(id)},
    {.name = "site_id", .column = "site_id", .type = FIELD_INT, M(site_id)},
    {.name = "site_name", .column = "site_name", .type = FIELD_STR, M(site_name)},
    {.name = "type", .column = "type", .type = FIELD_STR, M(type)},
    {.name = "title", .column = "title", .type = FIELD_STR, M(title)},
    {.name = "created_at", .column = "created_at", .type = FIELD_INT, M(created_at)},
    {.name = NULL},
};
#undef M

static int event_read(const void *ctx, struct db_stmt *s, void *rec) {
  struct event_rec *e = rec;
  const char *d = db_col_text(s, store_fields_read(s, 0, ctx, 0, e));
  return (e->data = strdup(d ? d : "{}")) ? 0 : -1;
}

static void event_fini(void *rec) {
  struct event_rec *e = rec;
  free(e->data);
  e->data = NULL;
}

enum store_rc store_event_list(struct store *st, int64_t site_id, int64_t after, int limit,
                               struct event_rec **out, int *n) {
  static struct store_sql all, one;
  const char *sql =
      site_id ? store_sql(&one, "SELECT ", event_cols,
                          ", data FROM events WHERE site_id = ?3 AND id > ?1 ORDER BY id LIMIT ?2")
              : store_sql(&all, "SELECT ", event_cols,
                          ", data FROM events WHERE id > ?1 ORDER BY id LIMIT ?2");
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c && sql ? db_prep(c, sql) : NULL;
  *out = NULL;
  *n = 0;
  if (!s || limit < 1) return STORE_ERROR;
  store_bind(s, 1, "Ii", after, limit);
  if (site_id) db_bind_i64(s, 3, site_id);
  return store_list_read(c, s, sizeof **out, limit, event_read, event_cols, event_fini,
                         (void **)out, n, "listing events");
}

void store_events_free(struct event_rec *arr, int n) {
  for (int i = 0; i < n; i++)
    free(arr[i].data);
  free(arr);
}

/* ---- log lines after the commit ---- */

static void logq_free(struct event_log *q, int n) {
  for (int i = 0; i < n; i++)
    cJSON_Delete(q[i].fields);
  free(q);
}

int store_event_log_locked(struct store_tx *tx, enum log_level level, const char *type,
                           cJSON *fields) {
  struct events_state *es = events_of(store_tx_store(tx));
  struct event_log *e;
  if (es->logq_n >= STORE_EVENTS_LOG_MAX) {
    es->logq_dropped++;
    cJSON_Delete(fields);
    return 0;
  }
  if (es->logq_n == es->logq_cap) {
    int ncap = es->logq_cap ? es->logq_cap * 2 : 64;
    struct event_log *nq = realloc(es->logq, (size_t)ncap * sizeof *nq);
    if (!nq) {
      cJSON_Delete(fields);
      return -1;
    }
    es->logq = nq;
    es->logq_cap = ncap;
  }
  e = &es->logq[es->logq_n++];
  e->level = level;
  snprintf(e->type, sizeof e->type, "%s", type);
  e->fields = fields;
  return 0;
}

/* ---- the transaction participant ---- */

static _Thread_local int tl_committed_events; /* between committed and released */
/* the committed transaction's log lines, written once the writer lock is released */
static _Thread_local struct event_log *tl_logq;
static _Thread_local int tl_logq_n, tl_logq_dropped;

/* Forget the open transaction's held-back log lines (a rollback: they never happened). */
static void logq_drop(struct events_state *es) {
  logq_free(es->logq, es->logq_n);
  es->logq = NULL;
  es->logq_n = es->logq_cap = es->logq_dropped = 0;
}

static int events_begin(struct store_tx *tx, void *state, int engine) {
  struct events_state *es = state;
  (void)engine;
  logq_drop(es);
  store_events_tx_reset(store_tx_store(tx));
  es->pending = 0;
  return 0;
}

static int events_before_commit(struct store_tx *tx, void *state) {
  (void)state;
  return store_events_flush_locked(tx);
}

static void events_committed(struct store *st, void *state) {
  struct events_state *es = state;
  tl_committed_events = es->pending;
  tl_logq = es->logq;
  tl_logq_n = es->logq_n;
  tl_logq_dropped = es->logq_dropped;
  es->logq = NULL;
  es->logq_n = es->logq_cap = es->logq_dropped = 0;
  es->pending = 0;
  store_events_tx_reset(st);
}

static void events_rolled_back(struct store *st, void *state) {
  struct events_state *es = state;
  logq_drop(es);
  es->pending = 0;
  tl_committed_events = 0;
  store_events_tx_reset(st);
}

static void events_released(struct store *st, void *state, int committed) {
  struct events_state *es = state;
  int ev = tl_committed_events;
  struct event_log *q = tl_logq;
  int qn = tl_logq_n, dropped = tl_logq_dropped;
  (void)st;
  tl_committed_events = 0;
  tl_logq = NULL;
  tl_logq_n = tl_logq_dropped = 0;
  if (committed) {
    for (int i = 0; i < qn; i++)
      log_event(q[i].level, q[i].type, q[i].fields);
    if (dropped) log_warn("%d more state changes were committed than logged", dropped);
  }
  logq_free(q, qn);
  if (committed && ev && es->hook) es->hook(es->hook_arg);
}

static void events_fini(void *state) {
  struct events_state *es = state;
  for (int i = 0; i < es->nhooks; i++) {
    free(es->hooks[i].events);
    free(es->hooks[i].sites);
  }
  free(es->hooks);
  for (int i = 0; i < 7; i++)
    db_arr_free(&es->evq[i]);
  for (int i = 0; i < 6; i++)
    db_arr_free(&es->dlq[i]);
  logq_free(es->logq, es->logq_n);
  free(es);
}

static const struct store_participant events_participant = {
    .name = "events",
    .begin = events_begin,
    .before_commit = events_before_commit,
    .committed = events_committed,
    .rolled_back = events_rolled_back,
    .released = events_released,
    .fini = events_fini,
};

int store_events_attach(struct store *st) {
  return store_participant_new(st, &events_participant, sizeof(struct events_state)) ? 0 : -1;
}

void store_set_event_hook(struct store *st, void (*fn)(void *arg), void *arg) {
  struct events_state *es = events_of(st);
  es->hook = fn;
  es->hook_arg = arg;
}

void store_events_arrived(struct store *st) {
  struct events_state *es = events_of(st);
  if (es->hook) es->hook(es->hook_arg);
}

void store_events_pending_set_locked(struct store_tx *tx) {
  struct store *st = store_tx_store(tx);
  events_of(st)->pending = 1;
}

int store_events_pending_locked(struct store_tx *tx) {
  struct store *st = store_tx_store(tx);
  return events_of(st)->pending;
}

void store_events_renumber_locked(struct store_tx *tx) {
  struct store *st = store_tx_store(tx);
  events_of(st)->ev_next = 0;
}
