/* db — the driver seam under the store: one prepared-statement cursor model, two drivers
   (db_sqlite.c on libsqlite3, db_pg.c on libpq). Only controld/store*.c and the drivers include
   this header; nothing outside the store sees a database type.

   The model is SQLite's: prepare once per connection (cached by the SQL text's address), bind
   parameters, step through rows, read columns, reset. SQL is written once, portably: `?` and
   `?N` placeholders (the PostgreSQL driver rewrites them to `$N`), integers for flags and
   millisecond times, `RETURNING` instead of last-insert-rowid where a statement needs its id.
   The few dialect-specific statements live in the drivers (connection setup, BEGIN variants,
   the migration record).

   A connection is used by one thread at a time. Every function that fails records the reason
   on the connection (db_err, db_errmsg); the store maps it to its result codes. */
#ifndef CDNCA_DB_H
#define CDNCA_DB_H

#include <stddef.h>
#include <stdint.h>

#include "db_types.h"

/* The driver a --db target names: "postgresql://…", "postgres://…" or a conninfo string
   ("host=… dbname=…", any '=' before the first '/') is PostgreSQL; anything else is a SQLite
   file path. */
enum db_kind db_kind_of(const char *target);

/* target fit for a log line: a password in it (a URI's user:password@ or password= parameter,
   a conninfo's password=…) is replaced by "***"; anything else is copied. Writes at most cap
   bytes into out (always terminated); returns out. Pure. */
const char *db_target_redact(const char *target, char *out, size_t cap);

/* SQLite: 1 when the file path is missing but its path-wal or path-shm is there and not empty:
   the database was moved or deleted while a controld had it open, and its last writes may be in
   the -wal, which a start would give up by creating an empty database over it. msg then names
   the files and what to do (put the database back, or remove the -wal and -shm to give that data
   up). 0 otherwise. */
int db_sqlite_left_behind(const char *path, char *msg, size_t msglen);

/* Open a connection to target (see db_kind_of). NULL on failure (logged). For PostgreSQL the
   target's own settings win over the driver's defaults (TCP keepalives, connect timeout,
   application_name). */
struct db_conn *db_open(const char *target);
/* db_open of a database that must exist already: a SQLite file that is missing is not made (an
   empty file at the name would be taken for the database, and would take over its -wal: the
   store's further connections, opened while the file may be away, docs/operations.md). */
struct db_conn *db_open_existing(const char *target);
void db_close(struct db_conn *c);
enum db_kind db_kind(const struct db_conn *c);

/* The prepared statement for sql on c, reset and unbound; NULL on error (logged, db_err set).
   sql must outlive the connection (a string literal: its address is the cache key). */
struct db_stmt *db_prep(struct db_conn *c, const char *sql);

/* Bind parameter idx (1-based). Text is copied; NULL text binds SQL NULL. */
void db_bind_i64(struct db_stmt *s, int idx, int64_t v);
void db_bind_int(struct db_stmt *s, int idx, int v);
void db_bind_double(struct db_stmt *s, int idx, double v);
void db_bind_text(struct db_stmt *s, int idx, const char *v);
void db_bind_textn(struct db_stmt *s, int idx, const char *v, size_t n);
void db_bind_null(struct db_stmt *s, int idx);

/* Array parameters (struct db_arr in db_types.h). */
void db_arr_i64(struct db_arr *a, int64_t v);
void db_arr_text(struct db_arr *a, const char *v); /* NULL adds SQL NULL */
void db_arr_null(struct db_arr *a);
/* The literal ("{}" when empty), or NULL when out of memory. Valid until the next change. */
const char *db_arr_str(struct db_arr *a);
void db_arr_clear(struct db_arr *a); /* empty again, keeping the buffer */
void db_arr_free(struct db_arr *a);  /* release the buffer; the struct is empty again */
/* Bind a's literal as text parameter idx; on PostgreSQL an array that ran out of memory makes the
   statement's db_step fail (DB_ERR) instead of binding a wrong value. */
void db_bind_arr(struct db_stmt *s, int idx, struct db_arr *a);

/* Run or advance: DB_ROW (a row is readable), DB_DONE, or DB_ERR (db_err/db_errmsg tell why;
   the statement is reset). */
int db_step(struct db_stmt *s);

/* Run a statement whose result the caller does not need (no rows, no db_changes), inside a
   write transaction: SQLite runs it at once (db_step to the end); PostgreSQL sends it without
   waiting for the answer, and it goes to the server in one round trip with the next statement
   whose answer is needed (db_step, db_commit, db_exec, …), which reads its result first (BEGIN is
   queued the same way). 0, or -1 when it failed at once (SQLite: any error; PostgreSQL: a bad bind
   or a lost connection), err set. A deferred statement that fails on the server makes that next
   call fail with its error (DB_ERR / -1; db_err tells which, e.g. DB_E_UNIQUE) and the transaction
   with it: use it for statements whose failure the caller treats as the transaction's, not for
   one whose error it must tell apart from the others'. The statement is reset afterwards. */
int db_defer(struct db_stmt *s);

/* Send a bound statement ahead of reading it, so several reads cost one round trip: SQLite does
   nothing (the statement runs at its first db_step); PostgreSQL queues it as db_defer does but
   keeps its result, and the queue goes out with the next statement whose answer is needed or
   with this statement's own first db_step, which then reads its rows as usual. Prefetch a few
   statements (distinct SQL texts: a statement is one cache entry), then db_step each. A queued
   statement that fails fails that round trip's call, as with db_defer. db_reset or db_prep of the
   statement drops a result not read yet. 0, or -1 when it failed at once (err set). */
int db_prefetch(struct db_stmt *s);

/* Columns of the current row (0-based). SQL NULL reads as 0, 0.0 and NULL text. Text stays valid
   until the next step or reset of s. */
int64_t db_col_i64(struct db_stmt *s, int col);
int db_col_int(struct db_stmt *s, int col);
double db_col_double(struct db_stmt *s, int col);
const char *db_col_text(struct db_stmt *s, int col);
int db_col_null(struct db_stmt *s, int col);

/* Finish the statement (rows not read are dropped); bindings are cleared by the next db_prep. */
void db_reset(struct db_stmt *s);

/* Rows written by the last statement that finished on c. */
int64_t db_changes(struct db_conn *c);

/* The id of the row the last INSERT on c created (SQLite rowid; PostgreSQL lastval()); -1 on
   error. Prefer RETURNING in new statements. */
int64_t db_last_id(struct db_conn *c);

/* Run SQL text without parameters (several statements allowed); 0 or -1. */
int db_exec(struct db_conn *c, const char *sql);

/* Transactions. A write transaction takes the database's write lock at once (SQLite BEGIN
   IMMEDIATE; PostgreSQL BEGIN, serialized by the store's ordered-write row). A read transaction
   is one consistent snapshot (SQLite BEGIN; PostgreSQL REPEATABLE READ READ ONLY). 0 or -1.
   Beginning on a connection still inside a transaction is a caller's bug: that transaction is
   logged and rolled back first, so a leaked read can never keep a later read on an old snapshot
   (PostgreSQL would only warn and go on in the old transaction). */
int db_begin_write(struct db_conn *c);
int db_begin_read(struct db_conn *c);
int db_commit(struct db_conn *c);
void db_rollback(struct db_conn *c); /* a no-op outside a transaction */
int db_in_tx(struct db_conn *c);

/* Migrations, inside a write transaction: take the migration lock (PostgreSQL
   pg_advisory_xact_lock, so replicas starting together migrate one at a time; SQLite's write lock
   already excludes), read the applied version (0 for a new database; SQLite PRAGMA user_version,
   PostgreSQL the schema_migrations table, created on first use), record one applied. 0/-1, or
   the version. */
int db_migrate_lock(struct db_conn *c);
int db_schema_version(struct db_conn *c);
int db_schema_record(struct db_conn *c, int version, const char *name);

enum db_err db_err(const struct db_conn *c);
const char *db_errmsg(const struct db_conn *c);
void db_clear_err(struct db_conn *c);

/* 1 while the connection is usable (always 1 for SQLite; PostgreSQL: not lost, and, outside a
   transaction, not closed by the server meanwhile, which is read without waiting and marks the
   connection lost). A PostgreSQL connection that was lost
   is re-established by db_prep/db_begin_* with backoff (at most one attempt per backoff step,
   100 ms doubling to 5 s); until then they fail with DB_E_DOWN. */
int db_up(struct db_conn *c);

/* Bumped every time the connection was re-established (prepared statements were lost). */
uint64_t db_epoch(const struct db_conn *c);

/* Notifications (PostgreSQL LISTEN/NOTIFY), for a connection given to one listening thread.
   db_listen subscribes c to channel (a lower-case identifier: [a-z_][a-z0-9_]*, at most 63
   bytes); 0, or -1 (SQLite: DB_E_OTHER "not supported"; a lost connection: DB_E_DOWN). A lost
   listening connection is not re-established by the driver: close it and open another, then
   LISTEN again. */
int db_listen(struct db_conn *c, const char *channel);

/* Wait up to timeout_ms for the next notification on c: 1 with its channel and payload copied
   (truncated to their caps, NUL-terminated), 0 when none came in time, -1 on error (DB_E_DOWN
   when the connection is lost; SQLite: DB_E_OTHER "not supported"). Notifications that arrived
   together are returned one per call without waiting. */
int db_wait_notify(struct db_conn *c, int timeout_ms, char *channel, size_t chcap, char *payload,
                   size_t plcap);

#endif
