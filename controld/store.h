/* store — the store core's contract: open a database (SQLite in WAL mode, or PostgreSQL), one
   writer connection, a reader per thread, write transactions (store_op) and what every caller
   checks (disk full, database down, cluster mode). All SQL lives in the store: the core's own
   (connections, migrations, transactions: store_core.c) and one store_<feature>.c per feature, each
   with its header (store_sites.h, store_node.h, store_events.h, store_pub.h, …); a feature takes
   part in every transaction through the participant it registers (store_core.h). */
#ifndef CDNCA_STORE_H
#define CDNCA_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "site.h"

struct store;
struct store_tx; /* an open write transaction (store_core.h) */

enum store_rc {
  STORE_OK = 0,
  STORE_NOT_FOUND = 1,
  STORE_CONFLICT = 2,    /* a UNIQUE value is taken: see the conflict text */
  STORE_LIMIT = 3,       /* a bound would be exceeded (e.g. SITE_MAX_ORIGINS) */
  STORE_FULL = 4,        /* the disk is full: nothing was written */
  STORE_UNAVAILABLE = 5, /* the database cannot be reached (PostgreSQL): nothing was written */
  STORE_ERROR = -1,      /* logged where it happened */
};

enum { STORE_TOKEN_ADMIN = 1, STORE_TOKEN_NODE = 2 };

/* Open (creating if needed) the database at path, apply pending migrations. NULL on failure
 * (logged). */
struct store *store_open(const char *path);

/* Check, creating and changing nothing, that controld could open the database at path: an
   existing file must be SQLite with a schema no newer than this build's, a missing one needs a
   writable directory. 0 with msg saying what was found, or -1 with msg giving the error. */
int store_check(const char *path, char *msg, size_t msglen);

/* From now on no prune batch starts (store_prune_ids ends after the one it is in): at shutdown,
   before the threads that prune are joined, so a first prune of a large old database does not
   hold the exit (SQLite has no lease to fence it). Thread-safe. */
void store_prune_stop(struct store *st);

/* Close every connection and free; NULLs *st. */
void store_close(struct store **st);

/* A counter bumped after every committed write: equal values mean nothing changed in between. */
int64_t store_generation(struct store *st);

/* The work of one write transaction: returns STORE_OK to commit, anything else to roll back. */
typedef enum store_rc (*store_op_fn)(struct store_tx *tx, void *arg);

/* Run fn(tx, arg) as one write transaction (writer lock, BEGIN IMMEDIATE .. COMMIT). Returns fn's
   result when it is not STORE_OK (rolled back, nothing written), STORE_FULL when a statement or
   the commit failed for lack of disk space, STORE_ERROR when BEGIN or COMMIT fails otherwise
   (rolled back), else STORE_OK. The participants' hooks run around the commit (store_core.h). fn
   may call only *_locked functions of the store (a nested store_op would deadlock). */
enum store_rc store_op(struct store *st, store_op_fn fn, void *arg);

/* The work of one answer read from several store calls. */
typedef enum store_rc (*store_read_fn)(struct store *st, void *arg);

/* Run fn(st, arg) inside one read transaction on this thread's reader, so an answer built from
   several store calls sees one snapshot (docs/design.md#one-snapshot-per-answer): a write that
   commits meanwhile shows in all of them or in none. The store's reads that fn makes join the
   transaction. Returns fn's result, or STORE_ERROR when the transaction cannot begin. Not
   nested; fn may not write (a write transaction is the writer's, outside this snapshot). */
enum store_rc store_snapshot(struct store *st, store_read_fn fn, void *arg);

/* 1 while writes fail for lack of disk space (set by a write that failed with SQLITE_FULL, cleared
   by the next write that commits). */
int store_storage_full(struct store *st);

/* 0 while the last write found the database unreachable (PostgreSQL down or restarting), or
   this thread's reader lost it or could not be opened; else 1. */
int store_db_up(struct store *st);

/* 1 when the database is shared by several controld replicas (PostgreSQL: cluster mode,
 * docs/design.md#cluster-mode), 0 for SQLite (one process). */
int store_cluster(struct store *st);

/* A test seam (controld --test-max-pages): the SQLite database cannot grow beyond pages pages, so
   writes fail with SQLITE_FULL as on a full disk. 0, or -1 (not SQLite, or pages <= 0). */
int store_set_max_pages(struct store *st, int64_t pages);

/* Schema version recorded in PRAGMA user_version. */
int store_schema_version(struct store *st);

/* The --db target for log lines and messages: a password in it is masked. Valid while st is. */
const char *store_db_label(const struct store *st);

#endif
