/* store_lease — the engine lease row and the fencing check (see store_lease.h). The statements
   that read the clock are per dialect: the database's clock decides expiry. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "store_core.h"
#include "store_lease.h"

/* Acquire or renew: a row back means we hold it (epoch + 1 when it changed hands). */
static const char sql_acquire_pg[] =
    "INSERT INTO leases AS l (name, holder, epoch, expires_at) "
    "VALUES ('engine', ?1, 1, (extract(epoch from clock_timestamp()) * 1000)::bigint + ?2) "
    "ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, "
    "epoch = l.epoch + CASE WHEN l.holder = EXCLUDED.holder THEN 0 ELSE 1 END, "
    "expires_at = EXCLUDED.expires_at "
    "WHERE l.holder = EXCLUDED.holder "
    "OR l.expires_at < (extract(epoch from clock_timestamp()) * 1000)::bigint "
    "RETURNING epoch";
#define SQLITE_NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
static const char sql_acquire_sqlite[] =
    "INSERT INTO leases AS l (name, holder, epoch, expires_at) "
    "VALUES ('engine', ?1, 1, " SQLITE_NOW_MS " + ?2) "
    "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
    "epoch = l.epoch + CASE WHEN l.holder = excluded.holder THEN 0 ELSE 1 END, "
    "expires_at = excluded.expires_at "
    "WHERE l.holder = excluded.holder OR l.expires_at < " SQLITE_NOW_MS " "
    "RETURNING epoch";

static const char sql_read_pg[] =
    "SELECT holder, epoch, expires_at - (extract(epoch from clock_timestamp()) * 1000)::bigint "
    "FROM leases WHERE name = 'engine'";
static const char sql_read_sqlite[] =
    "SELECT holder, epoch, expires_at - " SQLITE_NOW_MS " FROM leases WHERE name = 'engine'";

static const char sql_release[] =
    "UPDATE leases SET expires_at = 0 WHERE name = 'engine' AND holder = ? AND epoch = ?";

/* FOR SHARE: a takeover's UPDATE waits for this transaction (SQLite's write lock excludes
   anyway). */
static const char sql_fence_pg[] =
    "SELECT 1 FROM leases WHERE name = 'engine' AND holder = ? AND epoch = ? FOR SHARE";
static const char sql_fence_sqlite[] =
    "SELECT 1 FROM leases WHERE name = 'engine' AND holder = ? AND epoch = ?";

static int is_pg(struct db_conn *c) {
  return db_kind(c) == DB_PG;
}

int store_lease_acquire(struct store *st, const char *holder, int64_t ttl_ms, int64_t *epoch) {
  struct db_conn *c = store_reader(st);
  struct db_stmt *s;
  int rc;
  if (!c) return -1;
  s = db_prep(c, is_pg(c) ? sql_acquire_pg : sql_acquire_sqlite);
  if (!s) return -1;
  db_bind_text(s, 1, holder);
  db_bind_i64(s, 2, ttl_ms);
  rc = db_step(s);
  if (rc == DB_ROW) {
    *epoch = db_col_i64(s, 0);
    rc = 1;
  } else if (rc == DB_DONE) {
    rc = 0;
  } else {
    log_debug("engine lease: %s", db_errmsg(c));
    rc = -1;
  }
  db_reset(s);
  return rc;
}

int store_lease_release(struct store *st, const char *holder, int64_t epoch) {
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, sql_release) : NULL;
  if (!s) return -1;
  db_bind_text(s, 1, holder);
  db_bind_i64(s, 2, epoch);
  return store_step_done(c, s, "releasing the engine lease");
}

int store_lease_read(struct store *st, char *holder, size_t cap, int64_t *epoch,
                     int64_t *expires_in_ms) {
  struct db_conn *c = store_reader(st);
  struct db_stmt *s;
  int rc;
  if (!c) return -1;
  s = db_prep(c, is_pg(c) ? sql_read_pg : sql_read_sqlite);
  if (!s) return -1;
  rc = db_step(s);
  if (rc == DB_ROW) {
    store_col_text(s, 0, holder, cap);
    *epoch = db_col_i64(s, 1);
    if (expires_in_ms) *expires_in_ms = db_col_i64(s, 2);
    rc = 1;
  } else if (rc == DB_DONE) {
    rc = 0;
  } else {
    rc = -1;
  }
  db_reset(s);
  return rc;
}

void store_lease_fence_enable(struct store *st) {
  atomic_store(&st->fence_on, 1);
}

void store_lease_fence_set(struct store *st, const char *holder, int64_t epoch) {
  pthread_mutex_lock(&st->fmu);
  snprintf(st->fence_holder, sizeof st->fence_holder, "%s", holder ? holder : "");
  st->fence_epoch = epoch;
  pthread_mutex_unlock(&st->fmu);
}

void store_lease_set_fenced_hook(struct store *st, void (*fn)(void *arg), void *arg) {
  pthread_mutex_lock(&st->fmu);
  st->fenced_hook = fn;
  st->fenced_arg = arg;
  pthread_mutex_unlock(&st->fmu);
}

void store_lease_fenced(struct store *st) {
  /* under fmu: the hook's owner cannot be freed while it runs (it unsets the hook first) */
  pthread_mutex_lock(&st->fmu);
  if (st->fenced_hook) st->fenced_hook(st->fenced_arg);
  pthread_mutex_unlock(&st->fmu);
}

int store_lease_fence_check_locked(struct store_tx *tx) {
  struct store *st = store_tx_store(tx);
  char holder[sizeof st->fence_holder];
  int64_t epoch;
  struct db_stmt *s;
  int rc;
  if (!atomic_load(&st->fence_on)) return 0;
  pthread_mutex_lock(&st->fmu);
  memcpy(holder, st->fence_holder, sizeof holder);
  epoch = st->fence_epoch;
  pthread_mutex_unlock(&st->fmu);
  if (epoch <= 0) {
    log_debug("engine write refused: this replica does not hold the engine lease");
    return 1;
  }
  s = db_prep(st->w, is_pg(st->w) ? sql_fence_pg : sql_fence_sqlite);
  if (!s) return -1;
  db_bind_text(s, 1, holder);
  db_bind_i64(s, 2, epoch);
  rc = db_step(s);
  db_reset(s);
  if (rc == DB_ROW) return 0;
  if (rc == DB_ERR) {
    log_error("engine lease fencing check: %s", db_errmsg(st->w));
    return -1;
  }
  log_warn("engine write fenced: the lease (epoch %lld) is no longer held by %s; rolled back",
           (long long)epoch, holder);
  store_lease_fence_set(st, holder, 0);
  return 1;
}

/* ---- the transaction participant ---- */

static _Thread_local int tl_fenced; /* this thread's begin was fenced: run the hook once released */

static int lease_begin(struct store_tx *tx, void *state, int engine) {
  int fenced;
  (void)state;
  if (!engine || (fenced = store_lease_fence_check_locked(tx)) == 0) return 0;
  tl_fenced = fenced == 1;
  return -1;
}

static void lease_released(struct store *st, void *state, int committed) {
  (void)state, (void)committed;
  if (!tl_fenced) return;
  tl_fenced = 0;
  store_lease_fenced(st);
}

static void lease_fini(void *state) {
  struct store *st = state;
  pthread_mutex_destroy(&st->fmu);
}

static const struct store_participant lease_participant = {
    .name = "lease",
    .begin = lease_begin,
    .released = lease_released,
    .fini = lease_fini,
};

int store_lease_attach(struct store *st) {
  pthread_mutex_init(&st->fmu, NULL);
  if (store_participant_add(st, &lease_participant, st) < 0) {
    pthread_mutex_destroy(&st->fmu);
    return -1;
  }
  return 0;
}
