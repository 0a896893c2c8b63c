/* store_core — the store core's internals, shared by the store's source files (store*.c only):
   struct store, the write transaction and its participants, and the helpers every feature's SQL
   uses. Names no feature. */
#ifndef CDNCA_STORE_CORE_H
#define CDNCA_STORE_CORE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>

#include "db.h"
#include "fields.h"
#include "store.h"

/* A participant in every write transaction: a feature's hooks, which the core runs in the order
   they were added (store_open: lease, publications, events, tokens, signals). Every hook may be
   NULL; state is the feature's own (store_participant_state finds it again). */
struct store_participant {
  const char *name;
  /* After BEGIN, before anything else of the transaction (engine: an engine transaction, which
     the lease fences). -1 fails the begin: the transaction is rolled back. */
  int (*begin)(struct store_tx *tx, void *state, int engine);
  /* Just before COMMIT: write what the transaction queued. -1 rolls it back. */
  int (*before_commit)(struct store_tx *tx, void *state);
  /* After COMMIT, the writer lock still held: nothing can interleave yet. */
  void (*committed)(struct store *st, void *state);
  /* After a ROLLBACK (or a failed begin or commit), the writer lock still held. */
  void (*rolled_back)(struct store *st, void *state);
  /* After the writer lock is released (committed 0 or 1): run hooks that take other locks, with
     what committed or rolled_back kept for this thread. */
  void (*released)(struct store *st, void *state, int committed);
  /* At store_close. */
  void (*fini)(void *state);
};

#define STORE_MAX_PARTICIPANTS 8

/* An open write transaction: what every *_locked function takes, so that "inside a transaction"
   is a type. There is one per store (one writer connection, under the writer lock); it is open
   from store_tx_begin* to store_tx_commit / store_tx_rollback / store_tx_end, on the thread that
   began it. */
struct store_tx {
  struct store *st;
  pthread_t owner;
  int open;
};

struct store {
  struct store_part {
    const struct store_participant *p;
    void *state;
  } parts[STORE_MAX_PARTICIPANTS];
  int nparts;
  char *path;        /* the --db target, passed to db_open */
  char *label;       /* the target for log lines (db_target_redact: no password) */
  struct db_conn *w; /* the one writer, under wmu */
  pthread_mutex_t wmu;
  struct store_tx tx;  /* the writer's transaction, open while wmu is held by a transaction */
  pthread_key_t rkey;  /* per-thread reader connection */
  pthread_mutex_t rmu; /* guards the readers list */
  struct db_conn **readers;
  int nreaders, capreaders;
  int64_t tx_gen; /* the ordered-write row's gen in the open transaction (0 = unordered, -1 =
                     sent ahead and not read yet: tx_gen_q) */
  struct db_stmt *tx_gen_q;   /* PostgreSQL: the ordered-write statement, prefetched */
  atomic_int db_down;         /* the last statement on the writer found the database unreachable */
  atomic_int prune_stopped;   /* store_prune_stop: no prune batch starts any more */
  atomic_int storage_full;    /* the last write failed for lack of space (cleared by a write that
                                 commits) */
  _Atomic int64_t generation; /* bumped after every committed write */
  /* the newest cdnca_meta.gen seen (local commits, other replicas' notifications): each newer
     one bumps generation too (store_signal.h) */
  _Atomic int64_t cluster_gen;
  atomic_int caches_on; /* 0: no token cache, a new generation per call (store_signal.h) */
  /* the engine lease's fence (store_lease.h): engine transactions check (holder, epoch) */
  atomic_int fence_on; /* cluster mode: engine transactions need a fence */
  pthread_mutex_t fmu; /* guards fence_holder, fence_epoch */
  char fence_holder[128];
  int64_t fence_epoch; /* 0 = this process holds no lease */
  void (*fenced_hook)(void *arg);
  void *fenced_arg;
};

/* Add a participant to every later write transaction (at open, before any other thread uses
   st). 0, or -1 when STORE_MAX_PARTICIPANTS are taken. */
int store_participant_add(struct store *st, const struct store_participant *p, void *state);

/* store_participant_add with a new zeroed state of size bytes, freed by p->fini (called with it)
   when the add fails; the state, or NULL (out of memory, or no room). */
void *store_participant_new(struct store *st, const struct store_participant *p, size_t size);

/* The state p was added with, or NULL. */
void *store_participant_state(struct store *st, const struct store_participant *p);

/* Open the database at path and apply pending migrations, with no participant yet (store_open
   adds the features'); NULL on failure (logged). */
struct store *store_core_open(const char *path);

/* Inside a write transaction: its ordered-write generation (reading a prefetched answer once), 0
   when it is unordered, -1 when taking the row failed. */
int64_t store_tx_gen_locked(struct store_tx *tx);

/* Read the one-number answer of a statement sent ahead with db_prefetch (*q, cleared) into *out,
   on the writer. 0 or -1 (logged with what). */
int store_prefetched_i64(struct store *st, struct db_stmt **q, int64_t *out, const char *what);

/* The calling thread's reader connection (opened on first use); NULL on error. */
struct db_conn *store_reader(struct store *st);

/* Lock the writer, begin a write transaction and take the ordered-write row
   (docs/design.md#ordered-writes: every transaction that writes sites, origins, health, levels,
   publications, events, tokens, webhooks or nodes); the open transaction, or NULL (unlocked
   again on failure). */
struct store_tx *store_tx_begin(struct store *st);

/* The same without the ordered-write row, for writes that touch only their own rows and number
   nothing (node heartbeats and last-seen batches, delivery attempts, pruning). */
struct store_tx *store_tx_begin_unordered(struct store *st);

/* The same for the engine's own writes (probe round commits, switching by the engine, webhook
   delivery records, pruning): after BEGIN, the lease's fencing check comes first (store_lease.h);
   a fenced transaction is rolled back, the fenced hook runs, and -1 is returned. */
struct store_tx *store_tx_begin_engine(struct store *st, int ordered);

/* COMMIT and unlock; 0 or -1 (rolled back and unlocked on failure). */
int store_tx_commit(struct store_tx *tx);

/* ROLLBACK and unlock. */
void store_tx_rollback(struct store_tx *tx);

/* End a transaction begun with store_tx_begin: COMMIT when rc is STORE_OK (STORE_FULL or
   STORE_ERROR if the commit fails), else ROLLBACK and return rc (STORE_FULL for a STORE_ERROR
   caused by a full disk). */
enum store_rc store_tx_end(struct store_tx *tx, enum store_rc rc);

/* The store of an open transaction; asserts that tx is open and this thread's. */
struct store *store_tx_store(struct store_tx *tx);

/* Begin / end a read transaction on a reader connection, so several statements see one snapshot
   and take the WAL read lock once. 0 or -1. */
int store_read_begin(struct db_conn *c);
void store_read_end(struct db_conn *c);

/* Run a statement to completion (rows it answers are not read); 0 or -1 (logged with context). */
int store_step_done(struct db_conn *c, struct db_stmt *s, const char *what);

/* Step s (prepared and bound) for its first row and read its first column into *out (an id a
   RETURNING gives back, a count). s is reset. 0, or -1 (logged with what) when it fails or
   answers no row. */
int store_step_i64(struct db_conn *c, struct db_stmt *s, const char *what, int64_t *out);

/* Bind arrays a[0..n) as parameters 1..n of sql on c and run it to completion (a set-based write
   from array parameters); 0 or -1 (an array that ran out of memory fails it, logged with what). */
int store_step_arrays(struct db_conn *c, const char *sql, struct db_arr *a, int n,
                      const char *what);

/* Run a statement whose result is not needed with db_defer (db.h): at once on SQLite; on
   PostgreSQL with the next statement or the COMMIT, which fails if it does. 0 or -1 (logged). */
int store_defer(struct db_conn *c, struct db_stmt *s, const char *what);
/* Copy a text column into a fixed buffer ("" for NULL). */
void store_col_text(struct db_stmt *s, int col, char *out, size_t cap);
/* Room for one more element in a list being read: arr holds *cap elements of elem bytes, cnt in
   use. Returns arr when there is room, a larger copy (first elements, then doubling; *cap
   updated) when it was full, or NULL when memory runs out (arr unchanged, still the caller's). */
void *store_grow(void *arr, int *cap, int cnt, size_t elem, int first);

/* ---- statements in one call ---- */

/* Bind one parameter per letter of types, from idx on, from the arguments that follow: 'i' an
   int, 'I' an int64_t, 't' a const char * (NULL binds NULL), 'z' a const char * that is NULL or
   "" binds NULL, 'P' an int64_t that is <= 0 binds NULL (an optional time or id). Returns the
   next parameter. */
int store_bind(struct db_stmt *s, int idx, const char *types, ...);
int store_bindv(struct db_stmt *s, int idx, const char *types, va_list ap);

/* Prepare sql on c, bind the arguments as store_bind from parameter 1, step it to its end and
   reset it. 0, or -1 (logged with what). */
int store_exec(struct db_conn *c, const char *what, const char *sql, const char *types, ...);

/* Step s through its rows, calling row(arg, s) for each until it returns non-zero (which stops
   the walk, not an error). s is reset. 0, or -1 (logged with what) when a step fails. */
int store_each(struct db_conn *c, struct db_stmt *s, const char *what,
               int (*row)(void *arg, struct db_stmt *s), void *arg);

/* ---- records through their field tables (fields.h) ---- */

/* Read the columns of the rows of defs that have one and carry form (0 = every column), in
   table order, from result columns col.. of s into dst. Returns the next column. */
int store_fields_read(struct db_stmt *s, int col, const struct field_def *defs, unsigned form,
                      void *dst);

/* Bind the same rows' members of src as parameters idx.. of q (a nullable string that is "" and
   a nullable double that is 0 as NULL, an INT_LIST as its text "[502,503]", a JSON row as its
   codec's text). Returns the next parameter, or -1 when a JSON row's text cannot be made (out
   of memory). */
int store_fields_bind(struct db_stmt *q, int idx, const struct field_def *defs, unsigned form,
                      const void *src);

/* Append the same rows' members of src to the arrays a[0..] (one array per column, for a
   set-based write on PostgreSQL; INT, BOOL and string rows only). */
void store_fields_arr(struct db_arr *a, const struct field_def *defs, unsigned form,
                      const void *src);

/* The PostgreSQL type of a row's column: "bigint", "double precision" or "text". */
const char *store_fields_pg_type(const struct field_def *d);

/* Step s to its end (or to limit rows; limit < 1: no limit), reading each row's columns through
   defs (every row with a column, from column 0) into a growing array of elem-byte records, each
   zeroed first. *out is malloc'd (caller frees), *n rows. STORE_OK, or STORE_ERROR (logged with
   what; *out NULL) when a step fails or memory runs out. s is reset either way. */
enum store_rc store_rows_read(struct db_conn *c, struct db_stmt *s, const struct field_def *defs,
                              size_t elem, int limit, void **out, int *n, const char *what);

/* Step s to its end (or to limit rows; limit < 1: no limit), each row read by read(ctx, s, rec)
   into a growing array of elem-byte records, each zeroed first; read returns 0, or -1 when memory
   runs out. On failure the records read so far are finished with fini (may be NULL) and freed.
   *out is malloc'd (caller frees), *n rows. STORE_OK, or STORE_ERROR (logged with what; *out
   NULL). s is reset either way. */
enum store_rc store_list_read(struct db_conn *c, struct db_stmt *s, size_t elem, int limit,
                              int (*read)(const void *ctx, struct db_stmt *s, void *rec),
                              const void *ctx, void (*fini)(void *rec), void **out, int *n,
                              const char *what);

/* A reader for store_list_read and store_one: the columns of the field table ctx (every row with
   a column, from column 0) into rec; always 0. */
int store_read_fields(const void *defs, struct db_stmt *s, void *rec);

/* The first row of s into dst (size bytes, zeroed first) as store_list_read reads one: STORE_OK,
   STORE_NOT_FOUND when there is no row, or STORE_ERROR (logged with what). s is reset. */
enum store_rc store_one(struct db_conn *c, struct db_stmt *s, size_t size,
                        int (*read)(const void *ctx, struct db_stmt *s, void *rec), const void *ctx,
                        void (*fini)(void *rec), void *dst, const char *what);

/* Step s, which writes a row under a UNIQUE constraint, to its end (a RETURNING statement: to its
   row, left for the caller to read and reset). STORE_OK; STORE_CONFLICT with field written into
   conflict when the constraint refused it; STORE_ERROR (logged with what). s is reset unless
   STORE_OK with a row. */
enum store_rc store_step_unique(struct db_conn *c, struct db_stmt *s, int returning,
                                const char *field, char *conflict, size_t clen, const char *what);

/* Whether one more row fits under a count cap (docs/design.md#errors-and-limits), on the writer
   inside the transaction: STORE_OK while the rows counted by count_sql ("SELECT COUNT(*) ...",
   its parameters bound from the arguments as store_bind's types say) are fewer than cap,
   STORE_LIMIT at it, STORE_ERROR (logged with what). The ordered-write row the creating
   transaction holds makes concurrent creators, on any replica, count one after another. */
enum store_rc store_room_locked(struct store_tx *tx, const char *count_sql, int64_t cap,
                                const char *what, const char *types, ...);

/* qsort/bsearch order of int64_t ids (as store_ids_read reads them). */
int store_id_cmp(const void *a, const void *b);

/* store_rows_read of one integer column (column 0 of each row) into *ids (malloc'd, caller
   frees). */
enum store_rc store_ids_read(struct db_conn *c, struct db_stmt *s, int limit, int64_t **ids, int *n,
                             const char *what);

/* An integer constant's digits in a statement's text (" < " STORE_SQL_NUM(PUB_DELTA_MAX)). */
#define STORE_SQL_NUM_(x) #x
#define STORE_SQL_NUM(x) STORE_SQL_NUM_(x)

/* Prune by retention: pick (two integer parameters, before_ms and then batch, its LIMIT; it
   selects ids, oldest first) names the rows to go, and each statement of del (one integer
   parameter, the id) deletes what is theirs, the last the row itself; batch ids an engine write
   transaction until fewer are left, or until store_prune_stop (store.h) was called. The count
   deleted, or -1 (logged with what). */
int64_t store_prune_ids(struct store *st, const char *pick, const char *const *del, size_t n_del,
                        int batch, int64_t before_ms, const char *what);

/* A statement text built from a table, once: head, the columns of defs, tail. */
struct store_sql {
  atomic_int ready;
  char text[1024];
};

/* The text (it lives as long as q: a static one is a db_prep cache key), or NULL when it does
   not fit (logged). Thread-safe. */
const char *store_sql(struct store_sql *q, const char *head, const struct field_def *defs,
                      const char *tail);

/* "UPDATE table SET a = ?, b = ? ... WHERE id = ?" over every column of defs (bound in table
   order, then the id), built once into q; NULL when it does not fit (logged). Thread-safe. */
const char *store_sql_update(struct store_sql *q, const char *table, const struct field_def *defs);

/* A list in one call, on the calling thread's reader: "SELECT " the columns of defs, then tail
   (built once into q), the arguments bound as store_bind from parameter 1, read as
   store_rows_read (at most limit rows; < 1: all). */
enum store_rc store_select(struct store *st, struct store_sql *q, const struct field_def *defs,
                           const char *tail, size_t elem, int limit, void **out, int *n,
                           const char *what, const char *types, ...);

#endif
