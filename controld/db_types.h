/* db_types — the database seam's types (no functions): the driver kinds, db_step's answers, the
   error vocabulary, the opaque connection and statement, and array parameters. db.h (the calls)
   and db_driver.h (what a driver implements) both build on it. */
#ifndef CDNCA_DB_TYPES_H
#define CDNCA_DB_TYPES_H

#include <stddef.h>
#include <stdint.h>

enum db_kind { DB_SQLITE = 1, DB_PG = 2 };

/* db_step's answers */
enum { DB_DONE = 0, DB_ROW = 1, DB_ERR = -1 };

/* Why the last call failed, driver-neutral. */
enum db_err {
  DB_E_NONE = 0,
  DB_E_UNIQUE, /* a UNIQUE or PRIMARY KEY constraint (SQLite CONSTRAINT_UNIQUE/PK, SQLSTATE 23505)
                */
  DB_E_CONSTRAINT, /* another constraint: foreign key, CHECK, NOT NULL (SQLSTATE class 23) */
  DB_E_FULL,       /* no space left (SQLITE_FULL, SQLSTATE 53100) */
  DB_E_BUSY,       /* a lock or serialization timeout (SQLITE_BUSY, SQLSTATE 40001/40P01/55P03) */
  DB_E_DOWN,       /* the connection is lost or the server unavailable (PostgreSQL only) */
  DB_E_OTHER,
};

struct db_conn; /* one connection with its statement cache */
struct db_stmt; /* a prepared statement on one connection */

/* Array parameters, for set-based statements on PostgreSQL: one statement writes a whole batch
   of rows (`UPDATE t SET … FROM unnest(?::bigint[], ?::text[]) AS v(id, x) WHERE t.id = v.id`,
   `… WHERE id = ANY(?::bigint[])`) instead of one round trip per row. An array is built element by
   element into PostgreSQL's array literal text (`{1,NULL,"a\"b"}`: every text element
   double-quoted with `"` and `\` backslash-escaped, SQL NULL as an unquoted NULL) and bound as text
   with db_bind_arr. SQLite has no array type: the store issues such statements only when db_kind is
   DB_PG, and writes row by row on SQLite. A zeroed struct is an empty array. Pure (no
   connection). */
struct db_arr {
  char *buf; /* the literal, NUL-terminated once an element was added */
  size_t len, cap;
  int n;   /* elements */
  int oom; /* an allocation failed: the array is unusable (db_bind_arr fails the statement) */
};
#endif
