/* db_sqlite — the SQLite driver behind db.h: one sqlite3 handle with its cache of persistent
   prepared statements (keyed by the SQL text's address), WAL, foreign keys, a busy timeout. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "clock.h"
#include "db.h"
#include "db_driver.h"
#include "log.h"

struct sq_stmt {
  struct db_stmt base;
  const char *sql; /* the cache key */
  sqlite3_stmt *st;
};

struct sq_conn {
  struct db_conn base;
  sqlite3 *db;
  struct sq_stmt **slots;
  int nslots, capslots;
  enum db_err err;
  char errmsg[256];
};

#define SQ(c) ((struct sq_conn *)(c))
#define SQS(s) ((struct sq_stmt *)(s))

static enum db_err map_err(int rc, int ext) {
  switch (rc & 0xff) {
  case SQLITE_OK:
  case SQLITE_ROW:
  case SQLITE_DONE:
    return DB_E_NONE;
  case SQLITE_CONSTRAINT:
    return (ext == SQLITE_CONSTRAINT_UNIQUE || ext == SQLITE_CONSTRAINT_PRIMARYKEY)
               ? DB_E_UNIQUE
               : DB_E_CONSTRAINT;
  case SQLITE_FULL:
    return DB_E_FULL;
  case SQLITE_BUSY:
  case SQLITE_LOCKED:
    return DB_E_BUSY;
  default:
    return DB_E_OTHER;
  }
}

/* Record the connection's last failure (rc is the failing call's result). */
static void set_err(struct sq_conn *c, int rc) {
  c->err = map_err(rc, sqlite3_extended_errcode(c->db));
  snprintf(c->errmsg, sizeof c->errmsg, "%s", sqlite3_errmsg(c->db));
}

static void sq_close(struct db_conn *bc) {
  struct sq_conn *c = SQ(bc);
  for (int i = 0; i < c->nslots; i++) {
    sqlite3_finalize(c->slots[i]->st);
    free(c->slots[i]);
  }
  free(c->slots);
  if (c->db) sqlite3_close(c->db);
  free(c);
}

static struct db_stmt *sq_prep(struct db_conn *bc, const char *sql) {
  struct sq_conn *c = SQ(bc);
  struct sq_stmt *s;
  for (int i = 0; i < c->nslots; i++)
    if (c->slots[i]->sql == sql) {
      s = c->slots[i];
      sqlite3_reset(s->st);
      sqlite3_clear_bindings(s->st);
      return &s->base;
    }
  s = calloc(1, sizeof *s);
  if (!s) {
    c->err = DB_E_OTHER;
    snprintf(c->errmsg, sizeof c->errmsg, "out of memory");
    return NULL;
  }
  if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->st, NULL) != SQLITE_OK) {
    set_err(c, sqlite3_errcode(c->db));
    log_error("prepare failed: %s (sql: %.80s)", sqlite3_errmsg(c->db), sql);
    free(s);
    return NULL;
  }
  if (c->nslots == c->capslots) {
    int ncap = c->capslots ? c->capslots * 2 : 32;
    struct sq_stmt **ns = realloc(c->slots, (size_t)ncap * sizeof *ns);
    if (!ns) {
      sqlite3_finalize(s->st);
      free(s);
      c->err = DB_E_OTHER;
      snprintf(c->errmsg, sizeof c->errmsg, "out of memory");
      return NULL;
    }
    c->slots = ns;
    c->capslots = ncap;
  }
  s->base.conn = bc;
  s->sql = sql;
  c->slots[c->nslots++] = s;
  return &s->base;
}

static void sq_bind_i64(struct db_stmt *s, int idx, int64_t v) {
  sqlite3_bind_int64(SQS(s)->st, idx, v);
}
static void sq_bind_int(struct db_stmt *s, int idx, int v) {
  sqlite3_bind_int(SQS(s)->st, idx, v);
}
static void sq_bind_double(struct db_stmt *s, int idx, double v) {
  sqlite3_bind_double(SQS(s)->st, idx, v);
}
static void sq_bind_text(struct db_stmt *s, int idx, const char *v) {
  if (v)
    sqlite3_bind_text(SQS(s)->st, idx, v, -1, SQLITE_TRANSIENT);
  else
    sqlite3_bind_null(SQS(s)->st, idx);
}
static void sq_bind_textn(struct db_stmt *s, int idx, const char *v, size_t n) {
  if (v)
    sqlite3_bind_text64(SQS(s)->st, idx, v, (sqlite3_uint64)n, SQLITE_TRANSIENT, SQLITE_UTF8);
  else
    sqlite3_bind_null(SQS(s)->st, idx);
}
static void sq_bind_null(struct db_stmt *s, int idx) {
  sqlite3_bind_null(SQS(s)->st, idx);
}

static int sq_step(struct db_stmt *bs) {
  struct sq_stmt *s = SQS(bs);
  int rc = sqlite3_step(s->st);
  if (rc == SQLITE_ROW) return DB_ROW;
  if (rc == SQLITE_DONE) return DB_DONE;
  set_err(SQ(bs->conn), rc);
  sqlite3_reset(s->st);
  return DB_ERR;
}

/* Nothing to save in-process: run it to the end now (rows, if any, are dropped). */
static int sq_defer(struct db_stmt *bs) {
  int rc;
  while ((rc = sq_step(bs)) == DB_ROW)
    ;
  sqlite3_reset(SQS(bs)->st);
  return rc == DB_DONE ? 0 : -1;
}

static int64_t sq_col_i64(struct db_stmt *s, int col) {
  return sqlite3_column_int64(SQS(s)->st, col);
}
static int sq_col_int(struct db_stmt *s, int col) {
  return sqlite3_column_int(SQS(s)->st, col);
}
static double sq_col_double(struct db_stmt *s, int col) {
  return sqlite3_column_double(SQS(s)->st, col);
}
static const char *sq_col_text(struct db_stmt *s, int col) {
  return (const char *)sqlite3_column_text(SQS(s)->st, col);
}
static int sq_col_null(struct db_stmt *s, int col) {
  return sqlite3_column_type(SQS(s)->st, col) == SQLITE_NULL;
}
static void sq_reset(struct db_stmt *s) {
  sqlite3_reset(SQS(s)->st);
}

static int64_t sq_changes(struct db_conn *c) {
  return sqlite3_changes64(SQ(c)->db);
}
static int64_t sq_last_id(struct db_conn *c) {
  return sqlite3_last_insert_rowid(SQ(c)->db);
}

static int sq_exec(struct db_conn *bc, const char *sql) {
  struct sq_conn *c = SQ(bc);
  char *msg = NULL;
  int rc = sqlite3_exec(c->db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) {
    c->err = map_err(rc, sqlite3_extended_errcode(c->db));
    snprintf(c->errmsg, sizeof c->errmsg, "%s", msg ? msg : sqlite3_errmsg(c->db));
    sqlite3_free(msg);
    return -1;
  }
  return 0;
}

/* A database file renamed or deleted under the open handle still takes writes, into a file no
   later start opens: refuse them as a database that cannot be reached until the file is back
   (SQLite checks this itself only outside WAL mode). */
static int sq_begin_write(struct db_conn *bc) {
  struct sq_conn *c = SQ(bc);
  int moved = 0;
  if (sqlite3_file_control(c->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved) {
    c->err = DB_E_DOWN;
    snprintf(c->errmsg, sizeof c->errmsg,
             "the file %s was moved or deleted while open: writes are refused until it is "
             "back (a start without it is refused while its -wal or -shm is left)",
             sqlite3_db_filename(c->db, "main"));
    return -1;
  }
  return sq_exec(bc, "BEGIN IMMEDIATE");
}
static int sq_begin_read(struct db_conn *c) {
  return sq_exec(c, "BEGIN");
}
static int sq_commit(struct db_conn *c) {
  return sq_exec(c, "COMMIT");
}
static int sq_in_tx(struct db_conn *c) {
  return !sqlite3_get_autocommit(SQ(c)->db);
}
static void sq_rollback(struct db_conn *bc) {
  struct sq_conn *c = SQ(bc);
  /* SQLite may have rolled back already (e.g. after SQLITE_FULL); keep the first error */
  if (sq_in_tx(bc)) sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

/* SQLite's BEGIN IMMEDIATE already excludes every other writer, migrations included. */
static int sq_migrate_lock(struct db_conn *c) {
  return 0;
}

static int sq_schema_version(struct db_conn *bc) {
  static const char sql[] = "PRAGMA user_version";
  struct db_stmt *s = sq_prep(bc, sql);
  int v = -1;
  if (!s) return -1;
  if (sq_step(s) == DB_ROW) v = sq_col_int(s, 0);
  sq_reset(s);
  return v;
}

static int sq_schema_record(struct db_conn *c, int version, const char *name) {
  char pragma[64];
  snprintf(pragma, sizeof pragma, "PRAGMA user_version=%d", version);
  return sq_exec(c, pragma);
}

static enum db_err sq_err(const struct db_conn *c) {
  return ((const struct sq_conn *)c)->err;
}
static const char *sq_errmsg(const struct db_conn *c) {
  return ((const struct sq_conn *)c)->errmsg;
}
static void sq_clear_err(struct db_conn *c) {
  SQ(c)->err = DB_E_NONE;
  SQ(c)->errmsg[0] = '\0';
}
static int sq_up(struct db_conn *c) {
  return 1;
}
static uint64_t sq_epoch(const struct db_conn *c) {
  return 0;
}

/* One process owns a SQLite database: there is nobody to notify, so no LISTEN. */
static int not_supported(struct db_conn *c) {
  SQ(c)->err = DB_E_OTHER;
  snprintf(SQ(c)->errmsg, sizeof SQ(c)->errmsg, "not supported by the SQLite driver");
  return -1;
}
static int sq_listen(struct db_conn *c, const char *channel) {
  (void)channel;
  return not_supported(c);
}
static int sq_wait_notify(struct db_conn *c, int timeout_ms, char *channel, size_t chcap,
                          char *payload, size_t plcap) {
  (void)timeout_ms, (void)channel, (void)chcap, (void)payload, (void)plcap;
  return not_supported(c);
}

const struct db_ops db_sqlite_ops = {
    .kind = DB_SQLITE,
    .close = sq_close,
    .prep = sq_prep,
    .bind_i64 = sq_bind_i64,
    .bind_int = sq_bind_int,
    .bind_double = sq_bind_double,
    .bind_text = sq_bind_text,
    .bind_textn = sq_bind_textn,
    .bind_null = sq_bind_null,
    .step = sq_step,
    .defer = sq_defer,
    .col_i64 = sq_col_i64,
    .col_int = sq_col_int,
    .col_double = sq_col_double,
    .col_text = sq_col_text,
    .col_null = sq_col_null,
    .reset = sq_reset,
    .changes = sq_changes,
    .last_id = sq_last_id,
    .exec = sq_exec,
    .begin_write = sq_begin_write,
    .begin_read = sq_begin_read,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .in_tx = sq_in_tx,
    .migrate_lock = sq_migrate_lock,
    .schema_version = sq_schema_version,
    .schema_record = sq_schema_record,
    .err = sq_err,
    .errmsg = sq_errmsg,
    .clear_err = sq_clear_err,
    .up = sq_up,
    .epoch = sq_epoch,
    .listen = sq_listen,
    .wait_notify = sq_wait_notify,
};

/* Below this much free space a file system cannot be trusted to take the database's -wal and -shm
   (the WAL index alone takes 32 KiB) and a failed open is put down to it. */
#define SQ_FULL_BELOW (1024 * 1024)

/* What an operator can act on when opening path failed with SQLite's message: its directory's
   file system full (no space, or no inode for the -wal or -shm; errno ENOSPC or EDQUOT, or less
   than SQ_FULL_BELOW free) or mounted read-only, as said by sys_errno (the failing call's errno,
   0 if none) and statvfs of the directory. Written to out, "" when neither applies. */
static void sq_open_reason(const char *path, int sys_errno, char *out, size_t cap) {
  char dir[4096];
  struct statvfs vfs;
  const char *slash = strrchr(path, '/');
  out[0] = '\0';
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == path)
    snprintf(dir, sizeof dir, "/");
  else
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  if (statvfs(dir, &vfs) < 0) return;
  /* root may write into the blocks kept for it, anyone else only into the available ones */
  unsigned long long blocks = geteuid() == 0 ? vfs.f_bfree : vfs.f_bavail;
  unsigned long long inodes = geteuid() == 0 ? vfs.f_ffree : vfs.f_favail;
  unsigned long long free_bytes = blocks * (unsigned long long)vfs.f_frsize;
  if ((vfs.f_flag & ST_RDONLY) || sys_errno == EROFS)
    snprintf(out, cap,
             "the filesystem of %s is read-only: remount it read-write, or point --db at a "
             "writable one",
             dir);
  else if (vfs.f_files > 0 && inodes == 0)
    snprintf(out, cap,
             "the filesystem of %s has no free inodes (%llu bytes free) for the database's -wal "
             "and -shm files: free some, or point --db at another filesystem",
             dir, free_bytes);
  else if (sys_errno == ENOSPC || sys_errno == EDQUOT || free_bytes < SQ_FULL_BELOW)
    snprintf(out, cap,
             "the filesystem of %s is full (%llu bytes free%s): free space there, or point --db "
             "at another filesystem",
             dir, free_bytes, sys_errno == EDQUOT ? ", and the disk quota is reached" : "");
}

/* Log why path could not be opened (what failed: step), with what the file system says. */
static void sq_open_failed(struct sq_conn *c, const char *path, const char *step, const char *msg) {
  char reason[4400];
  sq_open_reason(path, c->db ? sqlite3_system_errno(c->db) : 0, reason, sizeof reason);
  log_error("cannot open database %s: %s: %s%s%s", path, step, msg, reason[0] ? ": " : "", reason);
}

int db_sqlite_left_behind(const char *path, char *msg, size_t msglen) {
  static const char *const sides[] = {"-wal", "-shm"};
  struct stat sb;
  char side[4200];
  if (stat(path, &sb) == 0 || errno != ENOENT) return 0;
  for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
    snprintf(side, sizeof side, "%s%s", path, sides[i]);
    if (stat(side, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
      snprintf(msg, msglen,
               "database %s is missing but %s (%lld bytes) is there: the database was moved or "
               "deleted while in use, and its last writes may be in %s-wal; a start now would "
               "create an empty database and give them up. Put the database file back under its "
               "name, or, to give that data up, remove %s-wal and %s-shm",
               path, side, (long long)sb.st_size, path, path, path);
      return 1;
    }
  }
  return 0;
}

struct db_conn *db_sqlite_open(const char *path, int create) {
  static const char pragmas[] = "PRAGMA journal_mode=WAL;"
                                "PRAGMA synchronous=FULL;"
                                "PRAGMA foreign_keys=ON;"
                                "PRAGMA busy_timeout=10000;"
                                /* the WAL is truncated back to 64 MiB after a checkpoint */
                                "PRAGMA journal_size_limit=67108864;";
  char left[8192];
  if (db_sqlite_left_behind(path, left, sizeof left)) {
    log_error("%s", left);
    return NULL;
  }
  struct sq_conn *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->base.ops = &db_sqlite_ops;
  if (sqlite3_open_v2(path, &c->db,
                      SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) |
                          SQLITE_OPEN_NOMUTEX,
                      NULL) != SQLITE_OK) {
    /* a further connection to a file that is away may be asked for on every request: a line
       every 10 s */
    static _Atomic int64_t missing_log;
    if (create || log_every(&missing_log, clock_mono_ms(), 10000))
      sq_open_failed(c, path, "opening", c->db ? sqlite3_errmsg(c->db) : "out of memory");
    sq_close(&c->base);
    return NULL;
  }
  if (sq_exec(&c->base, pragmas) < 0) {
    sq_open_failed(c, path, "setting pragmas", c->errmsg);
    sq_close(&c->base);
    return NULL;
  }
  /* SQLite falls back to reading a file it may not write: refuse it now rather than at the
     first write */
  if (sqlite3_db_readonly(c->db, "main") == 1) {
    sq_open_failed(c, path, "opening", "it can only be read (check the file's owner and mode)");
    sq_close(&c->base);
    return NULL;
  }
  return &c->base;
}
