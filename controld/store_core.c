/* store_core — the store core (store.h, store_core.h): connections, migrations, write transactions
   and their participants. Names no feature. */
#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clock.h"
#include "log.h"
#include "schema.h"
#include "store_core.h"

/* ---- connections ---- */

/* The value of a thread's reader key while its last attempt to open its reader failed: a server
   that refuses new connections is unavailable to this thread (and this store) even before a write
   notices it (store_db_up). */
static char reader_failed_mark;
#define READER_FAILED ((void *)&reader_failed_mark)

struct db_conn *store_reader(struct store *st) {
  void *v = pthread_getspecific(st->rkey);
  struct db_conn *c;
  if (v && v != READER_FAILED) return v;
  c = db_open_existing(st->path);
  if (!c) {
    pthread_setspecific(st->rkey, READER_FAILED);
    return NULL;
  }
  pthread_mutex_lock(&st->rmu);
  if (st->nreaders == st->capreaders) {
    int ncap = st->capreaders ? st->capreaders * 2 : 8;
    struct db_conn **nr = realloc(st->readers, (size_t)ncap * sizeof *nr);
    if (!nr) {
      pthread_mutex_unlock(&st->rmu);
      db_close(c);
      return NULL;
    }
    st->readers = nr;
    st->capreaders = ncap;
  }
  st->readers[st->nreaders++] = c;
  pthread_mutex_unlock(&st->rmu);
  pthread_setspecific(st->rkey, c);
  return c;
}

int store_defer(struct db_conn *c, struct db_stmt *s, const char *what) {
  if (db_defer(s) < 0) {
    log_error("%s: %s", what, db_errmsg(c));
    return -1;
  }
  return 0;
}

int store_step_arrays(struct db_conn *c, const char *sql, struct db_arr *a, int n,
                      const char *what) {
  struct db_stmt *s;
  for (int i = 0; i < n; i++)
    if (a[i].oom) {
      log_error("%s: out of memory", what);
      return -1;
    }
  s = db_prep(c, sql);
  if (!s) return -1;
  for (int i = 0; i < n; i++)
    db_bind_arr(s, i + 1, &a[i]);
  return store_step_done(c, s, what);
}

int store_step_done(struct db_conn *c, struct db_stmt *s, const char *what) {
  int rc = db_step(s);
  if (rc == DB_ERR) {
    log_error("%s: %s", what, db_errmsg(c));
    db_reset(s);
    return -1;
  }
  db_reset(s);
  return 0;
}

int store_step_i64(struct db_conn *c, struct db_stmt *s, const char *what, int64_t *out) {
  if (db_step(s) != DB_ROW) {
    log_error("%s: %s", what, db_errmsg(c));
    db_reset(s);
    return -1;
  }
  *out = db_col_i64(s, 0);
  db_reset(s);
  return 0;
}

void *store_grow(void *arr, int *cap, int cnt, size_t elem, int first) {
  int ncap;
  void *na;
  if (cnt < *cap) return arr;
  ncap = *cap ? *cap * 2 : first;
  na = realloc(arr, (size_t)ncap * elem);
  if (na) *cap = ncap;
  return na;
}

void store_col_text(struct db_stmt *s, int col, char *out, size_t cap) {
  const char *t = db_col_text(s, col);
  size_t n;
  if (!t) {
    out[0] = '\0';
    return;
  }
  n = strlen(t);
  if (n >= cap) n = cap - 1;
  memcpy(out, t, n);
  out[n] = '\0';
}

/* A write failed for lack of space: remember it for /healthz and the 507 answers. */
static void note_failure(struct store *st) {
  if (db_err(st->w) == DB_E_FULL) {
    if (!atomic_exchange(&st->storage_full, 1))
      log_error("database %s: the disk is full; writes fail until space is freed", st->label);
  }
}

/* The first statement of every ordered write transaction (docs/design.md#ordered-writes): the lock
   row serializes writers across processes, so publication seq and event ids commit in the order
   they are numbered; its gen is the cluster-wide write generation. */
static const char sql_ordered[] = "UPDATE cdnca_meta SET gen = gen + 1 WHERE id = 1 RETURNING gen";

/* The writer's error as this thread's last write transaction left it (taken under the writer
   lock: once the lock is released another thread's transaction may clear or replace it). */
static _Thread_local enum db_err tl_werr;

static void note_db(struct store *st, struct db_conn *c);

/* ---- participants ---- */

int store_participant_add(struct store *st, const struct store_participant *p, void *state) {
  if (st->nparts == STORE_MAX_PARTICIPANTS) {
    log_error("store: no room for participant %s", p->name);
    return -1;
  }
  st->parts[st->nparts].p = p;
  st->parts[st->nparts++].state = state;
  return 0;
}

void *store_participant_new(struct store *st, const struct store_participant *p, size_t size) {
  void *state = calloc(1, size);
  if (state && store_participant_add(st, p, state) < 0) {
    if (p->fini) p->fini(state);
    state = NULL;
  }
  return state;
}

void *store_participant_state(struct store *st, const struct store_participant *p) {
  for (int i = 0; i < st->nparts; i++)
    if (st->parts[i].p == p) return st->parts[i].state;
  return NULL;
}

static int parts_begin(struct store *st, int engine) {
  for (int i = 0; i < st->nparts; i++)
    if (st->parts[i].p->begin && st->parts[i].p->begin(&st->tx, st->parts[i].state, engine) < 0)
      return -1;
  return 0;
}

static int parts_before_commit(struct store *st) {
  for (int i = 0; i < st->nparts; i++)
    if (st->parts[i].p->before_commit &&
        st->parts[i].p->before_commit(&st->tx, st->parts[i].state) < 0)
      return -1;
  return 0;
}

static void parts_end(struct store *st, int committed) {
  for (int i = 0; i < st->nparts; i++) {
    const struct store_participant *p = st->parts[i].p;
    if (committed && p->committed) p->committed(st, st->parts[i].state);
    if (!committed && p->rolled_back) p->rolled_back(st, st->parts[i].state);
  }
}

static void parts_released(struct store *st, int committed) {
  for (int i = 0; i < st->nparts; i++)
    if (st->parts[i].p->released) st->parts[i].p->released(st, st->parts[i].state, committed);
}

/* ---- write transactions ---- */

/* The writer lock is released: the transaction is no longer anybody's. */
static void tx_unlock(struct store *st) {
  st->tx.open = 0;
  pthread_mutex_unlock(&st->wmu);
}

struct store *store_tx_store(struct store_tx *tx) {
  assert(tx && tx->open && pthread_equal(tx->owner, pthread_self()));
  return tx->st;
}

static int tx_begin(struct store *st, int ordered, int engine) {
  pthread_mutex_lock(&st->wmu);
  st->tx.st = st;
  st->tx.owner = pthread_self();
  st->tx.open = 1;
  db_clear_err(st->w);
  if (db_begin_write(st->w) < 0) goto fail;
  st->tx_gen = 0;
  st->tx_gen_q = NULL;
  if (parts_begin(st, engine) < 0) {
    db_rollback(st->w);
    goto fail;
  }
  if (ordered) {
    struct db_stmt *s = db_prep(st->w, sql_ordered);
    /* PostgreSQL: sent ahead, so it goes to the server first but in one round trip with the
       transaction's first statement whose answer is needed; its gen is read when wanted */
    if (s && db_kind(st->w) == DB_PG) {
      if (db_prefetch(s) < 0) {
        log_error("taking the ordered-write row: %s", db_errmsg(st->w));
        db_reset(s);
        db_rollback(st->w);
        goto fail;
      }
      st->tx_gen = -1;
      st->tx_gen_q = s;
      return 0;
    }
    if (!s || db_step(s) != DB_ROW) {
      log_error("taking the ordered-write row: %s", db_errmsg(st->w));
      if (s) db_reset(s);
      db_rollback(st->w);
      goto fail;
    }
    st->tx_gen = db_col_i64(s, 0);
    db_reset(s);
  }
  return 0;
fail:
  note_failure(st);
  /* a lost server is seen here first: /healthz and the 503 answers must know it */
  note_db(st, st->w);
  tl_werr = db_err(st->w);
  parts_end(st, 0);
  tx_unlock(st);
  parts_released(st, 0);
  return -1;
}

int store_prefetched_i64(struct store *st, struct db_stmt **q, int64_t *out, const char *what) {
  struct db_stmt *s = *q;
  *q = NULL;
  if (db_step(s) != DB_ROW) {
    log_error("%s: %s", what, db_errmsg(st->w));
    db_reset(s);
    return -1;
  }
  *out = db_col_i64(s, 0);
  db_reset(s);
  return 0;
}

int64_t store_tx_gen_locked(struct store_tx *tx) {
  struct store *st = store_tx_store(tx);
  if (!st->tx_gen_q) return st->tx_gen;
  if (store_prefetched_i64(st, &st->tx_gen_q, &st->tx_gen, "taking the ordered-write row") < 0)
    return -1;
  return st->tx_gen;
}

struct store_tx *store_tx_begin(struct store *st) {
  return tx_begin(st, 1, 0) < 0 ? NULL : &st->tx;
}

struct store_tx *store_tx_begin_unordered(struct store *st) {
  return tx_begin(st, 0, 0) < 0 ? NULL : &st->tx;
}

struct store_tx *store_tx_begin_engine(struct store *st, int ordered) {
  return tx_begin(st, ordered, 1) < 0 ? NULL : &st->tx;
}

int store_storage_full(struct store *st) {
  return atomic_load(&st->storage_full);
}

int store_db_up(struct store *st) {
  void *v;
  if (atomic_load(&st->db_down)) return 0;
  v = pthread_getspecific(st->rkey); /* this thread's reader, when it has one */
  if (v == READER_FAILED) return 0;
  return v ? db_up(v) : 1;
}

/* Remember whether the database answered: a lost PostgreSQL server shows in /healthz. */
static void note_db(struct store *st, struct db_conn *c) {
  int down = db_err(c) == DB_E_DOWN;
  if (atomic_exchange(&st->db_down, down) != down) {
    if (down)
      log_error("database %s is unavailable: %s", st->label, db_errmsg(c));
    else
      log_info("database %s is reachable again", st->label);
  }
}

static int tx_commit(struct store *st) {
  /* what the participants queued is written, and their notifications go out, with the commit
     or not at all */
  int rc =
      store_tx_gen_locked(&st->tx) == -1 || parts_before_commit(st) < 0 ? -1 : db_commit(st->w);
  if (rc < 0) {
    note_failure(st);
    tl_werr = db_err(st->w);
    if (st->tx_gen_q) db_reset(st->tx_gen_q);
    st->tx_gen_q = NULL;
    db_rollback(st->w);
  } else {
    atomic_fetch_add(&st->generation, 1);
    /* a transaction that committed shows there is space again */
    if (atomic_exchange(&st->storage_full, 0))
      log_info("database %s: writes succeed again", st->label);
  }
  note_db(st, st->w);
  /* after the commit and before the writer lock goes: e.g. no lookup can re-cache a removed
     token */
  parts_end(st, rc == 0);
  tx_unlock(st);
  parts_released(st, rc == 0);
  return rc;
}

int store_tx_commit(struct store_tx *tx) {
  return tx_commit(store_tx_store(tx));
}

static void tx_rollback(struct store *st) {
  note_failure(st);
  note_db(st, st->w);
  if (st->tx_gen_q) db_reset(st->tx_gen_q); /* its answer, if any, is dropped */
  st->tx_gen_q = NULL;
  db_rollback(st->w); /* a no-op when the database rolled back already (e.g. after a full disk) */
  parts_end(st, 0);
  tx_unlock(st);
  parts_released(st, 0);
}

void store_tx_rollback(struct store_tx *tx) {
  tx_rollback(store_tx_store(tx));
}

/* The store result for this thread's failed write transaction (tl_werr): a full disk, a lost
   database, or an error. */
static enum store_rc failure_rc(void) {
  switch (tl_werr) {
  case DB_E_FULL:
    return STORE_FULL;
  case DB_E_DOWN:
    return STORE_UNAVAILABLE;
  default:
    return STORE_ERROR;
  }
}

enum store_rc store_tx_end(struct store_tx *tx, enum store_rc rc) {
  struct store *st = store_tx_store(tx);
  if (rc != STORE_OK) {
    tl_werr = db_err(st->w);
    if (rc == STORE_ERROR) rc = failure_rc();
    tx_rollback(st);
    return rc;
  }
  if (tx_commit(st) == 0) return STORE_OK;
  return failure_rc();
}

enum store_rc store_op(struct store *st, store_op_fn fn, void *arg) {
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return failure_rc();
  return store_tx_end(tx, fn(tx, arg));
}

/* ---- reads ---- */

/* The reader whose read transaction store_snapshot holds on this thread: the store calls made
   inside it join that transaction instead of beginning and ending their own. */
static _Thread_local struct db_conn *tl_snapshot;

int store_read_begin(struct db_conn *c) {
  if (c == tl_snapshot) return 0;
  if (db_begin_read(c) < 0) {
    log_error("beginning a read: %s", db_errmsg(c));
    return -1;
  }
  return 0;
}

void store_read_end(struct db_conn *c) {
  if (c == tl_snapshot) return;
  /* a read transaction whose connection was lost cannot commit; until it is rolled back the
     connection refuses everything (db.h), so this thread's reads would fail for good */
  if (db_in_tx(c) && db_commit(c) < 0) db_rollback(c);
}

enum store_rc store_snapshot(struct store *st, store_read_fn fn, void *arg) {
  struct db_conn *c = store_reader(st);
  enum store_rc rc;
  /* not nested: an inner snapshot would end the outer one's transaction early */
  assert(!tl_snapshot);
  if (!c || store_read_begin(c) < 0) return STORE_ERROR;
  tl_snapshot = c;
  rc = fn(st, arg);
  tl_snapshot = NULL;
  store_read_end(c);
  return rc;
}

/* ---- migrations ---- */

/* Apply the pending migrations of this database's dialect in one write transaction under the
   migration lock (replicas starting together migrate one at a time; DDL is transactional in
   both dialects). */
static int migrate(struct store *st) {
  int pg = db_kind(st->w) == DB_PG;
  const struct schema_migration *list = pg ? schema_pg_migrations : schema_migrations;
  int count = pg ? schema_pg_migrations_count : schema_migrations_count;
  int cur, applied = 0;
  if (tx_begin(st, 0, 0) < 0) return -1;
  if (db_migrate_lock(st->w) < 0 || (cur = db_schema_version(st->w)) < 0) {
    log_error("database %s: reading the schema version: %s", st->label, db_errmsg(st->w));
    tx_rollback(st);
    return -1;
  }
  if (count > 0 && cur > list[count - 1].version) {
    log_error("database schema version %d is newer than this controld knows (%d)", cur,
              list[count - 1].version);
    tx_rollback(st);
    return -1;
  }
  for (int i = 0; i < count; i++) {
    const struct schema_migration *m = &list[i];
    if (m->version <= cur) continue;
    if (db_exec(st->w, m->sql) < 0 || db_schema_record(st->w, m->version, m->name) < 0) {
      log_error("migration %s failed (%s); database left at version %d", m->name, db_errmsg(st->w),
                cur);
      tx_rollback(st);
      return -1;
    }
    log_info("applying migration %s", m->name);
    applied = m->version;
  }
  if (tx_commit(st) < 0) return -1;
  if (applied) log_info("database %s at schema version %d", st->label, applied);
  return 0;
}

/* A 0-byte file where the database should be is opened as a new empty database: say so loudly,
   since it usually means a database was lost or truncated (a failed copy or restore). */
static void warn_if_empty(const char *path) {
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0)
    log_warn("database %s is an empty file: starting with an empty database (if one was "
             "expected here, stop controld and restore it)",
             path);
}

/* PRAGMA quick_check at start (SQLite): a damaged database is refused rather than served. */
static int quick_check(struct store *st) {
  static const char sql[] = "PRAGMA quick_check";
  struct db_stmt *s;
  int rc = -1;
  if (db_kind(st->w) != DB_SQLITE) return 0;
  if (!(s = db_prep(st->w, sql))) {
    log_error("database %s: quick_check: %s", st->label, db_errmsg(st->w));
    return -1;
  }
  if (db_step(s) == DB_ROW) {
    const char *res = db_col_text(s, 0);
    if (res && strcmp(res, "ok") == 0)
      rc = 0;
    else
      log_error("database %s fails its integrity check: %s", st->label, res ? res : "?");
  } else {
    log_error("database %s: quick_check: %s", st->label, db_errmsg(st->w));
  }
  db_reset(s);
  return rc;
}

struct store *store_core_open(const char *path) {
  struct store *st = calloc(1, sizeof *st);
  if (!st) return NULL;
  st->path = strdup(path);
  char label[512];
  st->label = strdup(db_target_redact(path, label, sizeof label));
  pthread_mutex_init(&st->wmu, NULL);
  pthread_mutex_init(&st->rmu, NULL);
  pthread_key_create(&st->rkey, NULL);
  if (db_kind_of(path) == DB_SQLITE) warn_if_empty(path);
  /* on PostgreSQL other replicas write too: the caches wait for the listener (signals.h) */
  atomic_store(&st->caches_on, db_kind_of(path) == DB_SQLITE);
  if (!st->path || !st->label || !(st->w = db_open(path)) || migrate(st) < 0 ||
      quick_check(st) < 0) {
    store_close(&st);
    return NULL;
  }
  return st;
}

int store_set_max_pages(struct store *st, int64_t pages) {
  char sql[64];
  if (db_kind(st->w) != DB_SQLITE || pages <= 0) return -1;
  snprintf(sql, sizeof sql, "PRAGMA max_page_count=%lld", (long long)pages);
  pthread_mutex_lock(&st->wmu);
  int rc = db_exec(st->w, sql);
  pthread_mutex_unlock(&st->wmu);
  return rc < 0 ? -1 : 0;
}

void store_close(struct store **stp) {
  struct store *st = *stp;
  if (!st) return;
  for (int i = 0; i < st->nreaders; i++)
    db_close(st->readers[i]);
  free(st->readers);
  db_close(st->w);
  pthread_key_delete(st->rkey);
  pthread_mutex_destroy(&st->wmu);
  pthread_mutex_destroy(&st->rmu);
  for (int i = st->nparts - 1; i >= 0; i--)
    if (st->parts[i].p->fini) st->parts[i].p->fini(st->parts[i].state);
  free(st->path);
  free(st->label);
  free(st);
  *stp = NULL;
}

int64_t store_generation(struct store *st) {
  /* caches off (a replica that cannot hear the others): a new value every time, so nothing
     rendered before is reused */
  if (!atomic_load(&st->caches_on)) return atomic_fetch_add(&st->generation, 1) + 1;
  return atomic_load(&st->generation);
}

int store_cluster(struct store *st) {
  return db_kind(st->w) == DB_PG;
}

const char *store_db_label(const struct store *st) {
  return st->label;
}

int store_schema_version(struct store *st) {
  struct db_conn *c = store_reader(st);
  int v;
  if (!c || store_read_begin(c) < 0) return -1;
  v = db_schema_version(c);
  store_read_end(c);
  return v;
}
