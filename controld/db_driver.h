/* db_driver — what a driver behind db.h provides: an ops table of function pointers matching db.h
   one to one, and its open function. db.c dispatches every public db_* call through the ops table
   of the connection (a statement reaches it through its connection). Only db.c and the drivers
   (db_sqlite.c, db_pg.c) include this header; the store includes db.h only.

   A driver's connection struct begins with `struct db_conn` and its statement struct with
   `struct db_stmt`, so db.c can reach ops and conn, and the driver can cast back:

     struct sqlite_conn { struct db_conn base; sqlite3 *db; ... };
     struct sqlite_stmt { struct db_stmt base; sqlite3_stmt *st; ... };

   The driver's open function fills base.ops; its prep fills base.conn of every statement. */
#ifndef CDNCA_DB_DRIVER_H
#define CDNCA_DB_DRIVER_H

#include "db_types.h"

struct db_conn {
  const struct db_ops *ops;
};

struct db_stmt {
  struct db_conn *conn; /* the connection the statement was prepared on */
};

/* One entry per function of db.h with the same arguments and meaning (see db.h). db.c handles
   db_kind_of, db_open (choosing the driver), NULL in db_close; everything else is passed
   through unchanged, so every entry must be set. */
struct db_ops {
  enum db_kind kind;                /* db_kind() */
  void (*close)(struct db_conn *c); /* never called with NULL */
  struct db_stmt *(*prep)(struct db_conn *c, const char *sql);
  void (*bind_i64)(struct db_stmt *s, int idx, int64_t v);
  void (*bind_int)(struct db_stmt *s, int idx, int v);
  void (*bind_double)(struct db_stmt *s, int idx, double v);
  void (*bind_text)(struct db_stmt *s, int idx, const char *v);
  void (*bind_textn)(struct db_stmt *s, int idx, const char *v, size_t n);
  void (*bind_null)(struct db_stmt *s, int idx);
  int (*step)(struct db_stmt *s);
  int (*defer)(struct db_stmt *s);
  int (*prefetch)(struct db_stmt *s); /* NULL: nothing to send ahead (db_prefetch is 0) */
  int64_t (*col_i64)(struct db_stmt *s, int col);
  int (*col_int)(struct db_stmt *s, int col);
  double (*col_double)(struct db_stmt *s, int col);
  const char *(*col_text)(struct db_stmt *s, int col);
  int (*col_null)(struct db_stmt *s, int col);
  void (*reset)(struct db_stmt *s);
  int64_t (*changes)(struct db_conn *c);
  int64_t (*last_id)(struct db_conn *c);
  int (*exec)(struct db_conn *c, const char *sql);
  int (*begin_write)(struct db_conn *c);
  int (*begin_read)(struct db_conn *c);
  int (*commit)(struct db_conn *c);
  void (*rollback)(struct db_conn *c);
  int (*in_tx)(struct db_conn *c);
  int (*migrate_lock)(struct db_conn *c);
  int (*schema_version)(struct db_conn *c);
  int (*schema_record)(struct db_conn *c, int version, const char *name);
  enum db_err (*err)(const struct db_conn *c);
  const char *(*errmsg)(const struct db_conn *c);
  void (*clear_err)(struct db_conn *c);
  int (*up)(struct db_conn *c);
  uint64_t (*epoch)(const struct db_conn *c);
  int (*listen)(struct db_conn *c, const char *channel);
  int (*wait_notify)(struct db_conn *c, int timeout_ms, char *channel, size_t chcap, char *payload,
                     size_t plcap);
};

/* The SQLite driver (db_sqlite.c): open the file at path (created when missing and create is
   1), with its connection setup (WAL, foreign keys, busy timeout); NULL on failure (logged). */
extern const struct db_ops db_sqlite_ops;
struct db_conn *db_sqlite_open(const char *path, int create);

/* The PostgreSQL driver (db_pg.c, built when libpq is found: CDNCA_HAVE_PG): connect to a libpq
   URI or conninfo; NULL on failure (logged). */
#ifdef CDNCA_HAVE_PG
extern const struct db_ops db_pg_ops;
struct db_conn *db_pg_open(const char *conninfo);
#endif

/* Rewrite SQLite placeholders to PostgreSQL's: `?N` becomes `$N`, a bare `?` becomes `$M` where M
   is one more than the highest number given so far (SQLite's rule), skipping '…' string literals,
   "…" quoted identifiers, -- and block comments. Returns the new text (caller frees) and
   stores the highest parameter number in *nparams; NULL on a malformed placeholder (`?0`, a
   number above 32767) or out of memory. Pure; in db.c so it is tested without libpq. */
char *db_placeholders_pg(const char *sql, int *nparams);

/* The db_err for a PostgreSQL failure: conn_bad (the connection is gone) or SQLSTATE class 08
   (connection exception) or 57P01-57P03 (server shutting down or not accepting) or 25006
   (read_only_sql_transaction: the server is a standby, or a primary fenced read-only before a
   switchover; for the store's writes that is a database that cannot be written, and a
   reconnection through a target_session_attrs=read-write conninfo finds the new primary)
   → DB_E_DOWN;
   23505 → DB_E_UNIQUE; other class 23 → DB_E_CONSTRAINT; 53100 → DB_E_FULL; 40001, 40P01,
   55P03 → DB_E_BUSY; anything else (or no SQLSTATE) → DB_E_OTHER. Pure. */
enum db_err db_pg_err_of(const char *sqlstate, int conn_bad);

#endif
