/* store_tasks — the probe task board in tables (see store_tasks.h). The statements that read the
   clock, lock a row or unpack JSON are per dialect; the rest are shared. */
#include "store_tasks.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "log.h"
#include "sigmsg.h"
#include "store_core.h"
#include "store_signal.h"

#define PG_NOW "(extract(epoch from clock_timestamp()) * 1000)::bigint"
#define SL_NOW "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"

/* Statements that differ between the dialects only in how they read the database's clock are
   written once, with the clock expression as NOW. */
#define SQL_OPEN(NOW)                                                                              \
  "INSERT INTO probe_round_open (round_id, epoch, deadline_at, state) "                            \
  "VALUES (?1, ?2, " NOW " + ?3, 'open')"
static const char sql_open_pg[] = SQL_OPEN(PG_NOW);
static const char sql_open_sl[] = SQL_OPEN(SL_NOW);

static const char sql_tasks_pg[] =
    "INSERT INTO probe_tasks (round_id, node_id, task_id, origin_id, url, host, timeout_ms, "
    "check_opts) SELECT CAST(?1 AS BIGINT), e.node_id, e.task_id, e.origin_id, e.url, e.host, "
    "e.timeout_ms, COALESCE(e.\"check\"::text, '{}') FROM json_to_recordset(CAST(?2 AS json)) AS "
    "e(node_id bigint, task_id bigint, origin_id bigint, url text, host text, timeout_ms bigint, "
    "\"check\" json)";
static const char sql_tasks_sl[] =
    "INSERT INTO probe_tasks (round_id, node_id, task_id, origin_id, url, host, timeout_ms, "
    "check_opts) SELECT ?1, json_extract(e.value, '$.node_id'), json_extract(e.value, "
    "'$.task_id'), json_extract(e.value, '$.origin_id'), json_extract(e.value, '$.url'), "
    "json_extract(e.value, '$.host'), json_extract(e.value, '$.timeout_ms'), "
    "COALESCE(json_extract(e.value, '$.check'), '{}') FROM json_each(?2) AS e";

static const char sql_next_id[] = "SELECT COALESCE(MAX(round_id), 0) + 1 FROM probe_round_open";

#define SQL_PENDING(NOW)                                                                           \
  "SELECT DISTINCT t.node_id FROM probe_round_open r JOIN probe_tasks t "                          \
  "ON t.round_id = r.round_id WHERE r.state = 'open' AND r.deadline_at > " NOW                     \
  " AND t.delivered = 0"
static const char sql_pending_pg[] = SQL_PENDING(PG_NOW);
static const char sql_pending_sl[] = SQL_PENDING(SL_NOW);

#define SQL_TAKE_ROUND(NOW)                                                                        \
  "SELECT r.round_id, r.deadline_at - " NOW " FROM probe_round_open r "                            \
  "WHERE r.state = 'open' AND r.deadline_at > " NOW " AND EXISTS (SELECT 1 FROM probe_tasks t "    \
  "WHERE t.round_id = r.round_id AND t.node_id = ? AND t.delivered = 0) "                          \
  "ORDER BY r.round_id LIMIT 1"
static const char sql_take_round_pg[] = SQL_TAKE_ROUND(PG_NOW);
static const char sql_take_round_sl[] = SQL_TAKE_ROUND(SL_NOW);
static const char sql_take[] =
    "UPDATE probe_tasks SET delivered = 1 WHERE round_id = ? AND node_id = ? AND delivered = 0 "
    "RETURNING task_id, origin_id, url, host, timeout_ms, check_opts";

/* the open-round row lock votes are taken under */
static const char sql_vote_lock_pg[] =
    "SELECT 1 FROM probe_round_open WHERE round_id = ? AND state = 'open' AND deadline_at > " PG_NOW
    " FOR SHARE";
static const char sql_vote_lock_sl[] = "SELECT 1 FROM probe_round_open WHERE round_id = ? AND "
                                       "state = 'open' AND deadline_at > " SL_NOW;
static const char sql_node_tasks[] =
    "SELECT task_id FROM probe_tasks WHERE round_id = ? AND node_id = ? ORDER BY task_id";
static const char sql_votes_pg[] =
    "INSERT INTO probe_votes (round_id, node_id, task_id, ok, status, error, latency_ms) "
    "SELECT CAST(?1 AS BIGINT), CAST(?2 AS BIGINT), e.task_id, e.ok, e.status, e.error, "
    "e.latency_ms FROM json_to_recordset(CAST(?3 AS json)) AS e(task_id bigint, ok bigint, "
    "status bigint, error text, latency_ms bigint) WHERE 1 = 1 ON CONFLICT DO NOTHING";
static const char sql_votes_sl[] =
    "INSERT INTO probe_votes (round_id, node_id, task_id, ok, status, error, latency_ms) "
    "SELECT ?1, ?2, json_extract(e.value, '$.task_id'), json_extract(e.value, '$.ok'), "
    "json_extract(e.value, '$.status'), json_extract(e.value, '$.error'), "
    "json_extract(e.value, '$.latency_ms') FROM json_each(?3) AS e WHERE 1 = 1 "
    "ON CONFLICT DO NOTHING";

static const char sql_count[] = "SELECT COUNT(*) FROM probe_votes WHERE round_id = ?";
static const char sql_close[] =
    "UPDATE probe_round_open SET state = 'closed' WHERE round_id = ? AND state = 'open'";
static const char sql_read_votes[] =
    "SELECT node_id, task_id, ok, status, error, latency_ms FROM probe_votes WHERE round_id = ? "
    "ORDER BY node_id, task_id";
static const char sql_abort[] =
    "UPDATE probe_round_open SET state = 'aborted' WHERE state = 'open' AND epoch < ?";
static const char sql_state[] = "SELECT state FROM probe_round_open WHERE round_id = ?";

/* rows of rounds whose deadline is older than ? ms (TABLE: probe_votes or probe_tasks) */
#define SQL_PRUNE_ROWS(TABLE, NOW)                                                                 \
  "DELETE FROM " TABLE " WHERE round_id IN (SELECT round_id FROM probe_round_open "                \
  "WHERE deadline_at < " NOW " - ?)"
static const char sql_prune_votes_pg[] = SQL_PRUNE_ROWS("probe_votes", PG_NOW);
static const char sql_prune_votes_sl[] = SQL_PRUNE_ROWS("probe_votes", SL_NOW);
static const char sql_prune_tasks_pg[] = SQL_PRUNE_ROWS("probe_tasks", PG_NOW);
static const char sql_prune_tasks_sl[] = SQL_PRUNE_ROWS("probe_tasks", SL_NOW);
#define SQL_PRUNE_ROUNDS(NOW) "DELETE FROM probe_round_open WHERE deadline_at < " NOW " - ?"
static const char sql_prune_rounds_pg[] = SQL_PRUNE_ROUNDS(PG_NOW);
static const char sql_prune_rounds_sl[] = SQL_PRUNE_ROUNDS(SL_NOW);

#define DIALECT(c, name) (db_kind(c) == DB_PG ? name##_pg : name##_sl)

static int64_t fence_epoch(struct store *st) {
  int64_t e;
  pthread_mutex_lock(&st->fmu);
  e = st->fence_epoch;
  pthread_mutex_unlock(&st->fmu);
  return e;
}

/* Run s, the bound insert of round_id's rows, then notify kind with the round id as payload
   (sent by the transaction, delivered at its commit). 0 or -1. */
static int insert_and_signal(struct store_tx *tx, struct db_stmt *s, const char *what,
                             enum signal_kind kind, int64_t round_id) {
  struct store *st = store_tx_store(tx);
  char payload[32];
  if (store_step_done(st->w, s, what) < 0) return -1;
  snprintf(payload, sizeof payload, "%" PRId64, round_id);
  return store_signal_locked(tx, sigmsg_channel(kind), payload) < 0 ? -1 : 0;
}

void store_tasks_free(struct store_task *t, int n) {
  if (!t) return;
  for (int i = 0; i < n; i++)
    free(t[i].check);
  free(t);
}

enum store_rc store_tasks_round_open(struct store *st, int64_t round_id, int64_t deadline_in_ms,
                                     const char *tasks_json) {
  struct db_stmt *s;
  enum store_rc rc = STORE_ERROR;
  struct store_tx *tx = store_tx_begin_engine(st, 0);
  if (!tx) return STORE_ERROR;
  s = db_prep(st->w, DIALECT(st->w, sql_open));
  if (!s) goto out;
  db_bind_i64(s, 1, round_id);
  db_bind_i64(s, 2, fence_epoch(st));
  db_bind_i64(s, 3, deadline_in_ms);
  if (db_step(s) != DB_DONE) {
    if (db_err(st->w) == DB_E_UNIQUE) {
      rc = STORE_CONFLICT;
    } else {
      log_error("opening probe round %" PRId64 ": %s", round_id, db_errmsg(st->w));
    }
    db_reset(s);
    goto out;
  }
  db_reset(s);
  s = db_prep(st->w, DIALECT(st->w, sql_tasks));
  if (!s) goto out;
  db_bind_i64(s, 1, round_id);
  db_bind_text(s, 2, tasks_json);
  if (insert_and_signal(tx, s, "recording a round's probe tasks", SIGNAL_TASKS, round_id) < 0)
    goto out;
  rc = STORE_OK;
out:
  if (rc != STORE_OK) {
    store_tx_rollback(tx);
    return rc;
  }
  return store_tx_commit(tx) < 0 ? STORE_ERROR : STORE_OK;
}

int64_t store_tasks_next_round_id(struct store *st) {
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, sql_next_id) : NULL;
  int64_t v = -1;
  if (!s) return -1;
  if (db_step(s) == DB_ROW) v = db_col_i64(s, 0);
  db_reset(s);
  return v;
}

int store_tasks_pending_nodes(struct store *st, int64_t **ids, int *n) {
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, DIALECT(c, sql_pending)) : NULL;
  int64_t *out = NULL;
  int cnt = 0, cap = 0, rc;
  *ids = NULL;
  *n = 0;
  if (!s) return -1;
  while ((rc = db_step(s)) == DB_ROW) {
    int64_t *g = store_grow(out, &cap, cnt, sizeof *out, 8);
    if (!g) {
      rc = DB_ERR;
      break;
    }
    out = g;
    out[cnt++] = db_col_i64(s, 0);
  }
  db_reset(s);
  if (rc != DB_DONE) {
    free(out);
    return -1;
  }
  *ids = out;
  *n = cnt;
  return 0;
}

static int task_cmp(const void *a, const void *b) {
  const struct store_task *x = a, *y = b;
  return x->task_id < y->task_id ? -1 : x->task_id > y->task_id;
}

int store_tasks_take(struct store *st, int64_t node_id, int64_t *round_id, int64_t *deadline_ms,
                     struct store_task **tasks, int *n) {
  struct db_stmt *s;
  struct store_task *out = NULL;
  int cnt = 0, cap = 0, rc = -1, step;
  int64_t rid = 0, left = 0;
  struct db_conn *c = store_reader(st);
  *tasks = NULL;
  *n = 0;
  /* most polls find nothing: a read first, without the writer */
  s = c ? db_prep(c, DIALECT(c, sql_take_round)) : NULL;
  if (!s) return -1;
  db_bind_i64(s, 1, node_id);
  step = db_step(s);
  db_reset(s);
  if (step != DB_ROW) return step == DB_DONE ? 0 : -1;
  struct store_tx *tx = store_tx_begin_unordered(st);
  if (!tx) return -1;
  s = db_prep(st->w, DIALECT(st->w, sql_take_round));
  if (!s) goto out;
  db_bind_i64(s, 1, node_id);
  step = db_step(s);
  if (step == DB_ROW) {
    rid = db_col_i64(s, 0);
    left = db_col_i64(s, 1);
  }
  db_reset(s);
  if (step == DB_ERR) goto out;
  if (step == DB_DONE || left <= 0) {
    rc = 0;
    goto out;
  }
  s = db_prep(st->w, sql_take);
  if (!s) goto out;
  db_bind_i64(s, 1, rid);
  db_bind_i64(s, 2, node_id);
  while ((step = db_step(s)) == DB_ROW) {
    struct store_task *g = store_grow(out, &cap, cnt, sizeof *out, 16), *t;
    const char *chk;
    if (!g) break;
    out = g;
    t = &out[cnt];
    memset(t, 0, sizeof *t);
    t->task_id = db_col_i64(s, 0);
    t->origin_id = db_col_i64(s, 1);
    store_col_text(s, 2, t->url, sizeof t->url);
    store_col_text(s, 3, t->host, sizeof t->host);
    t->timeout_ms = db_col_int(s, 4);
    chk = db_col_text(s, 5);
    t->check = strdup(chk ? chk : "{}");
    cnt++;
    if (!t->check) break;
  }
  db_reset(s);
  if (step != DB_DONE) goto out;
  rc = cnt > 0;
out:
  if (rc < 0 || cnt == 0) {
    store_tx_rollback(tx);
    store_tasks_free(out, cnt);
    return rc;
  }
  if (store_tx_commit(tx) < 0) {
    store_tasks_free(out, cnt);
    return -1;
  }
  qsort(out, (size_t)cnt, sizeof *out, task_cmp);
  *round_id = rid;
  *deadline_ms = left;
  *tasks = out;
  *n = cnt;
  return 1;
}

/* The votes as the JSON array the insert unpacks; NULL on OOM. */
static char *votes_json(const struct task_vote *v, int n) {
  cJSON *arr = cJSON_CreateArray();
  char *txt;
  if (!arr) return NULL;
  for (int i = 0; i < n; i++) {
    cJSON *o = cJSON_CreateObject();
    if (!o) goto fail;
    cJSON_AddItemToArray(arr, o);
    cJSON_AddNumberToObject(o, "task_id", (double)v[i].task_id);
    cJSON_AddNumberToObject(o, "ok", v[i].ok ? 1 : 0);
    cJSON_AddNumberToObject(o, "status", v[i].status);
    cJSON_AddStringToObject(o, "error", v[i].error);
    cJSON_AddNumberToObject(o, "latency_ms", v[i].latency_ms);
  }
  txt = cJSON_PrintUnformatted(arr);
  cJSON_Delete(arr);
  return txt;
fail:
  cJSON_Delete(arr);
  return NULL;
}

enum tasks_vote_rc store_tasks_vote(struct store *st, int64_t node_id, int64_t round_id,
                                    const struct task_vote *v, int n, int *bad) {
  enum tasks_vote_rc rc = TASKS_VOTE_ERROR;
  struct db_stmt *s;
  int64_t *mine = NULL;
  int nm = 0, cap = 0, step;
  char *json = NULL;
  struct store_tx *tx = store_tx_begin_unordered(st);
  if (!tx) return TASKS_VOTE_ERROR;
  s = db_prep(st->w, DIALECT(st->w, sql_vote_lock));
  if (!s) goto out;
  db_bind_i64(s, 1, round_id);
  step = db_step(s);
  db_reset(s);
  if (step == DB_ERR) goto out;
  if (step == DB_DONE) {
    rc = TASKS_VOTE_LATE;
    goto out;
  }
  s = db_prep(st->w, sql_node_tasks);
  if (!s) goto out;
  db_bind_i64(s, 1, round_id);
  db_bind_i64(s, 2, node_id);
  while ((step = db_step(s)) == DB_ROW) {
    int64_t *g = store_grow(mine, &cap, nm, sizeof *mine, 16);
    if (!g) break;
    mine = g;
    mine[nm++] = db_col_i64(s, 0);
  }
  db_reset(s);
  if (step != DB_DONE) goto out;
  for (int i = 0; i < n; i++)
    if (!mine || !bsearch(&v[i].task_id, mine, (size_t)nm, sizeof *mine, store_id_cmp)) {
      if (bad) *bad = i;
      rc = TASKS_VOTE_NOT_YOURS;
      goto out;
    }
  if (n > 0) {
    json = votes_json(v, n);
    s = json ? db_prep(st->w, DIALECT(st->w, sql_votes)) : NULL;
    if (!s) goto out;
    db_bind_i64(s, 1, round_id);
    db_bind_i64(s, 2, node_id);
    db_bind_text(s, 3, json);
    if (insert_and_signal(tx, s, "recording probe votes", SIGNAL_VOTES, round_id) < 0) goto out;
  }
  rc = TASKS_VOTE_OK;
out:
  free(mine);
  free(json);
  if (rc != TASKS_VOTE_OK) {
    store_tx_rollback(tx);
    return rc;
  }
  return store_tx_commit(tx) < 0 ? TASKS_VOTE_ERROR : TASKS_VOTE_OK;
}

int64_t store_tasks_vote_count(struct store *st, int64_t round_id) {
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, sql_count) : NULL;
  int64_t v = -1;
  if (!s) return -1;
  db_bind_i64(s, 1, round_id);
  if (db_step(s) == DB_ROW) v = db_col_i64(s, 0);
  db_reset(s);
  return v;
}

int store_tasks_round_close(struct store *st, int64_t round_id, struct task_vote **votes, int *n) {
  struct db_stmt *s;
  struct task_vote *out = NULL;
  int cnt = 0, cap = 0, step, ok = 0;
  *votes = NULL;
  *n = 0;
  struct store_tx *tx = store_tx_begin_engine(st, 0);
  if (!tx) return -1;
  s = db_prep(st->w, sql_close);
  if (!s) goto out;
  db_bind_i64(s, 1, round_id);
  if (store_step_done(st->w, s, "closing a probe round") < 0) goto out;
  if (db_changes(st->w) != 1) {
    log_warn("probe round %" PRId64 " was not open any more (aborted by a newer engine?)",
             round_id);
    goto out;
  }
  s = db_prep(st->w, sql_read_votes);
  if (!s) goto out;
  db_bind_i64(s, 1, round_id);
  while ((step = db_step(s)) == DB_ROW) {
    struct task_vote *g = store_grow(out, &cap, cnt, sizeof *out, 16), *v;
    if (!g) break;
    out = g;
    v = &out[cnt++];
    memset(v, 0, sizeof *v);
    v->node_id = db_col_i64(s, 0);
    v->task_id = db_col_i64(s, 1);
    v->ok = db_col_int(s, 2) ? 1 : 0;
    v->status = db_col_int(s, 3);
    store_col_text(s, 4, v->error, sizeof v->error);
    v->latency_ms = db_col_int(s, 5);
  }
  db_reset(s);
  ok = step == DB_DONE;
out:
  if (!ok) {
    store_tx_rollback(tx);
    free(out);
    return -1;
  }
  if (store_tx_commit(tx) < 0) {
    free(out);
    return -1;
  }
  *votes = out;
  *n = cnt;
  return 0;
}

/* One fenced engine statement with one integer parameter; rows changed or -1. */
static int engine_write(struct store *st, const char *sql, int64_t arg, const char *what) {
  struct db_stmt *s;
  int64_t changed;
  struct store_tx *tx = store_tx_begin_engine(st, 0);
  if (!tx) return -1;
  s = db_prep(st->w, sql);
  if (!s) goto fail;
  db_bind_i64(s, 1, arg);
  if (store_step_done(st->w, s, what) < 0) goto fail;
  changed = db_changes(st->w);
  if (store_tx_commit(tx) < 0) return -1;
  return (int)changed;
fail:
  store_tx_rollback(tx);
  return -1;
}

int store_tasks_abort_older(struct store *st, int64_t epoch) {
  return engine_write(st, sql_abort, epoch, "aborting older epochs' probe rounds");
}

int store_tasks_round_state(struct store *st, int64_t round_id, char *out, int cap) {
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, sql_state) : NULL;
  int rc;
  if (!s) return -1;
  db_bind_i64(s, 1, round_id);
  rc = db_step(s);
  if (rc == DB_ROW) store_col_text(s, 0, out, (size_t)cap);
  db_reset(s);
  return rc == DB_ROW ? 1 : rc == DB_DONE ? 0 : -1;
}

int store_tasks_prune(struct store *st, int64_t keep_ms) {
  const char *sqls[3];
  int64_t removed = 0;
  struct store_tx *tx = store_tx_begin_engine(st, 0);
  if (!tx) return -1;
  sqls[0] = DIALECT(st->w, sql_prune_votes);
  sqls[1] = DIALECT(st->w, sql_prune_tasks);
  sqls[2] = DIALECT(st->w, sql_prune_rounds);
  for (int i = 0; i < 3; i++) {
    struct db_stmt *s = db_prep(st->w, sqls[i]);
    if (!s) goto fail;
    db_bind_i64(s, 1, keep_ms);
    if (store_step_done(st->w, s, "pruning old probe rounds") < 0) goto fail;
    removed = db_changes(st->w);
  }
  if (store_tx_commit(tx) < 0) return -1;
  return (int)removed;
fail:
  store_tx_rollback(tx);
  return -1;
}
