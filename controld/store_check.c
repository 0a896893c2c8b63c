/* store_check — can controld use this database? Checked without creating or changing anything
   (controld --check-config). */
#include <errno.h>
#include <libgen.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db.h"
#include "schema.h"
#include "store.h"

/* PostgreSQL: can we connect, and is the schema one this controld knows? A read transaction
   only (the version table is read, never created, by a read-only check). */
static int check_pg(const char *target, char *msg, size_t msglen) {
  int known = schema_pg_migrations_count > 0
                  ? schema_pg_migrations[schema_pg_migrations_count - 1].version
                  : 0;
  struct db_conn *c = db_open(target);
  int version;
  if (!c) {
    snprintf(msg, msglen, "PostgreSQL database: cannot connect (see the log line above)");
    return -1;
  }
  if (db_begin_read(c) < 0 || (version = db_schema_version(c)) < 0) {
    snprintf(msg, msglen, "PostgreSQL database: reading the schema version: %s", db_errmsg(c));
    db_close(c);
    return -1;
  }
  db_rollback(c);
  db_close(c);
  if (version > known) {
    snprintf(msg, msglen,
             "PostgreSQL database: schema version %d is newer than this controld knows (%d)",
             version, known);
    return -1;
  }
  if (version < known)
    snprintf(msg, msglen, "PostgreSQL database: schema %d, migrated to %d at start", version,
             known);
  else
    snprintf(msg, msglen, "PostgreSQL database: schema %d", version);
  return 0;
}

int store_check(const char *path, char *msg, size_t msglen) {
  struct stat st;
  sqlite3 *db = NULL;
  sqlite3_stmt *s = NULL;
  int ret = -1, version = -1, known;
  char dir[1024];

  if (db_kind_of(path) == DB_PG) return check_pg(path, msg, msglen);
  known = schema_migrations_count > 0 ? schema_migrations[schema_migrations_count - 1].version : 0;
  if (stat(path, &st) < 0) {
    if (errno != ENOENT) {
      snprintf(msg, msglen, "database %s: %s", path, strerror(errno));
      return -1;
    }
    if (db_sqlite_left_behind(path, msg, msglen)) return -1;
    snprintf(dir, sizeof dir, "%s", path);
    const char *d = dirname(dir);
    if (access(d, W_OK | X_OK) < 0) {
      snprintf(msg, msglen, "database %s does not exist and its directory %s is not writable: %s",
               path, d, strerror(errno));
      return -1;
    }
    snprintf(msg, msglen, "database %s does not exist yet; controld creates it (schema %d)", path,
             known);
    return 0;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(msg, msglen, "database %s is not a regular file", path);
    return -1;
  }
  if (access(path, R_OK | W_OK) < 0) {
    snprintf(msg, msglen, "database %s is not readable and writable: %s", path, strerror(errno));
    return -1;
  }
  /* read-write without CREATE: nothing is created; reading user_version writes nothing */
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
    snprintf(msg, msglen, "database %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
    goto out;
  }
  sqlite3_busy_timeout(db, 5000);
  if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK ||
      sqlite3_step(s) != SQLITE_ROW) {
    snprintf(msg, msglen, "database %s: not a usable SQLite database: %s", path,
             sqlite3_errmsg(db));
    goto out;
  }
  version = sqlite3_column_int(s, 0);
  if (version > known) {
    snprintf(msg, msglen, "database %s: schema version %d is newer than this controld knows (%d)",
             path, version, known);
    goto out;
  }
  if (version < known)
    snprintf(msg, msglen, "database %s: schema %d, migrated to %d at start", path, version, known);
  else
    snprintf(msg, msglen, "database %s: schema %d", path, version);
  ret = 0;
out:
  sqlite3_finalize(s);
  sqlite3_close(db);
  return ret;
}
