/* db — the driver seam: picks the driver from the --db target and passes every call through the
   connection's ops table (db_driver.h). */
#include "db.h"

#include "db_driver.h"
#include "log.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum db_kind db_kind_of(const char *target) {
  if (!target) return DB_SQLITE;
  if (!strncmp(target, "postgresql://", 13) || !strncmp(target, "postgres://", 11)) return DB_PG;
  /* a conninfo string ("host=/run/pg dbname=cdnca"): a keyword '=' before any '/' */
  const char *eq = strchr(target, '=');
  const char *slash = strchr(target, '/');
  if (eq && eq > target && (!slash || eq < slash)) return DB_PG;
  return DB_SQLITE;
}

/* Append n bytes of s to out at *o, keeping room for the terminator. */
static void put(char *out, size_t cap, size_t *o, const char *s, size_t n) {
  while (n-- && *o + 1 < cap)
    out[(*o)++] = *s++;
}

/* A URI: postgresql://user:secret@host/db?password=secret&sslmode=… */
/* 1 when libpq's keyword key (klen bytes) holds a secret: the password, and the passphrase of
   the client's TLS key. */
static int secret_key(const char *key, size_t klen) {
  static const char *const secret[] = {"password", "sslpassword"};
  for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++)
    if (klen == strlen(secret[i]) && !strncmp(key, secret[i], klen)) return 1;
  return 0;
}

static void redact_uri(const char *t, char *out, size_t cap, size_t *o) {
  const char *auth = strstr(t, "://") + 3;
  size_t alen = strcspn(auth, "/?#");
  const char *at = memchr(auth, '@', alen);
  const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
  if (colon) {
    put(out, cap, o, t, (size_t)(colon - t) + 1);
    put(out, cap, o, "***", 3);
    t = at;
  }
  const char *q = strchr(t, '?');
  if (!q) {
    put(out, cap, o, t, strlen(t));
    return;
  }
  put(out, cap, o, t, (size_t)(q - t) + 1);
  for (const char *p = q + 1; *p;) {
    size_t n = strcspn(p, "&#"), klen = strcspn(p, "=&#");
    if (klen < n && secret_key(p, klen)) {
      put(out, cap, o, p, klen + 1);
      put(out, cap, o, "***", 3);
    } else {
      put(out, cap, o, p, n);
    }
    p += n;
    if (*p) put(out, cap, o, p++, 1);
  }
}

/* A conninfo: keyword = value pairs, a value bare or in single quotes with \ escapes. */
static void redact_conninfo(const char *t, char *out, size_t cap, size_t *o) {
  const char *p = t;
  while (*p) {
    const char *start = p;
    while (*p == ' ' || *p == '\t' || *p == '\n')
      p++;
    const char *key = p;
    while (*p && *p != '=' && *p != ' ' && *p != '\t')
      p++;
    size_t klen = (size_t)(p - key);
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p != '=') { /* not a pair: copy the rest as it is */
      put(out, cap, o, start, strlen(start));
      return;
    }
    p++;
    while (*p == ' ' || *p == '\t')
      p++;
    const char *val = p;
    if (*p == '\'') {
      for (p++; *p && *p != '\''; p++)
        if (*p == '\\' && p[1]) p++;
      if (*p) p++;
    } else {
      while (*p && *p != ' ' && *p != '\t' && *p != '\n')
        p++;
    }
    put(out, cap, o, start, (size_t)(val - start));
    if (secret_key(key, klen))
      put(out, cap, o, "***", 3);
    else
      put(out, cap, o, val, (size_t)(p - val));
  }
}

const char *db_target_redact(const char *target, char *out, size_t cap) {
  size_t o = 0;
  if (!cap) return out;
  if (!target) target = "";
  if (db_kind_of(target) != DB_PG)
    put(out, cap, &o, target, strlen(target));
  else if (strstr(target, "://") && strstr(target, "://") == strchr(target, ':'))
    redact_uri(target, out, cap, &o);
  else
    redact_conninfo(target, out, cap, &o);
  out[o] = '\0';
  return out;
}

static struct db_conn *open_target(const char *target, int create) {
  if (db_kind_of(target) == DB_SQLITE) return db_sqlite_open(target, create);
#ifdef CDNCA_HAVE_PG
  return db_pg_open(target);
#else
  log_error("--db names a PostgreSQL database, but this controld was built without PostgreSQL "
            "support (libpq was not found at build time)");
  return NULL;
#endif
}

struct db_conn *db_open(const char *target) {
  return open_target(target, 1);
}

struct db_conn *db_open_existing(const char *target) {
  return open_target(target, 0);
}

void db_close(struct db_conn *c) {
  if (c) c->ops->close(c);
}

enum db_kind db_kind(const struct db_conn *c) {
  return c->ops->kind;
}
struct db_stmt *db_prep(struct db_conn *c, const char *sql) {
  return c->ops->prep(c, sql);
}

void db_bind_i64(struct db_stmt *s, int idx, int64_t v) {
  s->conn->ops->bind_i64(s, idx, v);
}
void db_bind_int(struct db_stmt *s, int idx, int v) {
  s->conn->ops->bind_int(s, idx, v);
}
void db_bind_double(struct db_stmt *s, int idx, double v) {
  s->conn->ops->bind_double(s, idx, v);
}
void db_bind_text(struct db_stmt *s, int idx, const char *v) {
  s->conn->ops->bind_text(s, idx, v);
}
void db_bind_textn(struct db_stmt *s, int idx, const char *v, size_t n) {
  s->conn->ops->bind_textn(s, idx, v, n);
}
void db_bind_null(struct db_stmt *s, int idx) {
  s->conn->ops->bind_null(s, idx);
}

int db_step(struct db_stmt *s) {
  return s->conn->ops->step(s);
}
int db_defer(struct db_stmt *s) {
  return s->conn->ops->defer(s);
}
int db_prefetch(struct db_stmt *s) {
  return s->conn->ops->prefetch ? s->conn->ops->prefetch(s) : 0;
}
int64_t db_col_i64(struct db_stmt *s, int col) {
  return s->conn->ops->col_i64(s, col);
}
int db_col_int(struct db_stmt *s, int col) {
  return s->conn->ops->col_int(s, col);
}
double db_col_double(struct db_stmt *s, int col) {
  return s->conn->ops->col_double(s, col);
}
const char *db_col_text(struct db_stmt *s, int col) {
  return s->conn->ops->col_text(s, col);
}
int db_col_null(struct db_stmt *s, int col) {
  return s->conn->ops->col_null(s, col);
}
void db_reset(struct db_stmt *s) {
  s->conn->ops->reset(s);
}

int64_t db_changes(struct db_conn *c) {
  return c->ops->changes(c);
}
int64_t db_last_id(struct db_conn *c) {
  return c->ops->last_id(c);
}
int db_exec(struct db_conn *c, const char *sql) {
  return c->ops->exec(c, sql);
}

/* A transaction left open by an earlier caller: rolled back, loudly (see db.h). */
static void end_leftover(struct db_conn *c, const char *beginning) {
  if (!c->ops->in_tx(c)) return;
  log_error("database: a transaction was still open when a %s transaction began; rolled back "
            "(a store function did not end its transaction)",
            beginning);
  c->ops->rollback(c);
}

int db_begin_write(struct db_conn *c) {
  end_leftover(c, "write");
  return c->ops->begin_write(c);
}
int db_begin_read(struct db_conn *c) {
  end_leftover(c, "read");
  return c->ops->begin_read(c);
}
int db_commit(struct db_conn *c) {
  return c->ops->commit(c);
}
void db_rollback(struct db_conn *c) {
  c->ops->rollback(c);
}
int db_in_tx(struct db_conn *c) {
  return c->ops->in_tx(c);
}

int db_migrate_lock(struct db_conn *c) {
  return c->ops->migrate_lock(c);
}
int db_schema_version(struct db_conn *c) {
  return c->ops->schema_version(c);
}
int db_schema_record(struct db_conn *c, int version, const char *name) {
  return c->ops->schema_record(c, version, name);
}

enum db_err db_err(const struct db_conn *c) {
  return c->ops->err(c);
}
const char *db_errmsg(const struct db_conn *c) {
  return c->ops->errmsg(c);
}
void db_clear_err(struct db_conn *c) {
  c->ops->clear_err(c);
}
int db_up(struct db_conn *c) {
  return c->ops->up(c);
}
uint64_t db_epoch(const struct db_conn *c) {
  return c->ops->epoch(c);
}
int db_listen(struct db_conn *c, const char *channel) {
  return c->ops->listen(c, channel);
}
int db_wait_notify(struct db_conn *c, int timeout_ms, char *channel, size_t chcap, char *payload,
                   size_t plcap) {
  return c->ops->wait_notify(c, timeout_ms, channel, chcap, payload, plcap);
}

/* ---- array literals (db_arr) ---- */

/* Room for n more bytes plus the terminator and the closing brace. */
static int arr_room(struct db_arr *a, size_t n) {
  if (a->oom) return -1;
  if (a->len + n + 2 > a->cap) {
    size_t ncap = a->cap ? a->cap : 256;
    while (a->len + n + 2 > ncap)
      ncap *= 2;
    char *nb = realloc(a->buf, ncap);
    if (!nb) {
      a->oom = 1;
      return -1;
    }
    a->buf = nb;
    a->cap = ncap;
  }
  return 0;
}

/* Start the next element: '{' before the first, ',' before the others. */
static void arr_sep(struct db_arr *a) {
  a->buf[a->len++] = a->n++ ? ',' : '{';
}

void db_arr_i64(struct db_arr *a, int64_t v) {
  char num[24];
  int k = snprintf(num, sizeof num, "%lld", (long long)v);
  if (arr_room(a, (size_t)k + 1) < 0) return;
  arr_sep(a);
  memcpy(a->buf + a->len, num, (size_t)k);
  a->len += (size_t)k;
  a->buf[a->len] = '\0';
}

void db_arr_null(struct db_arr *a) {
  if (arr_room(a, 5) < 0) return;
  arr_sep(a);
  memcpy(a->buf + a->len, "NULL", 4);
  a->len += 4;
  a->buf[a->len] = '\0';
}

void db_arr_text(struct db_arr *a, const char *v) {
  if (!v) {
    db_arr_null(a);
    return;
  }
  size_t n = strlen(v), esc = 0;
  for (size_t i = 0; i < n; i++)
    if (v[i] == '"' || v[i] == '\\') esc++;
  if (arr_room(a, n + esc + 3) < 0) return;
  arr_sep(a);
  a->buf[a->len++] = '"';
  for (size_t i = 0; i < n; i++) {
    if (v[i] == '"' || v[i] == '\\') a->buf[a->len++] = '\\';
    a->buf[a->len++] = v[i];
  }
  a->buf[a->len++] = '"';
  a->buf[a->len] = '\0';
}

const char *db_arr_str(struct db_arr *a) {
  if (a->oom) return NULL;
  if (!a->n) return "{}";
  /* the closing brace goes after the terminator's place; arr_room kept room for it */
  a->buf[a->len] = '}';
  a->buf[a->len + 1] = '\0';
  return a->buf;
}

void db_arr_clear(struct db_arr *a) {
  a->len = 0;
  a->n = 0;
  a->oom = 0;
  if (a->buf) a->buf[0] = '\0';
}

void db_arr_free(struct db_arr *a) {
  free(a->buf);
  memset(a, 0, sizeof *a);
}

void db_bind_arr(struct db_stmt *s, int idx, struct db_arr *a) {
  const char *lit = db_arr_str(a);
  if (lit)
    db_bind_text(s, idx, lit);
  else
    db_bind_null(s, 0); /* no parameter 0: the PostgreSQL driver fails the step */
}

/* PostgreSQL accepts at most 65535 parameters per statement; SQLite's default limit is 32766. */
#define DB_PARAM_MAX 32767

char *db_placeholders_pg(const char *sql, int *nparams) {
  size_t len = strlen(sql);
  /* "?" → "$N" adds at most 5 characters per '?' ("$32767"); bound the output by that */
  size_t marks = 0;
  for (const char *p = sql; *p; p++)
    if (*p == '?') marks++;
  char *out = malloc(len + marks * 5 + 1);
  if (!out) return NULL;
  size_t o = 0;
  int max = 0;
  const char *p = sql;
  while (*p) {
    char ch = *p;
    if (ch == '\'' || ch == '"') { /* literal or quoted identifier; a doubled quote escapes */
      out[o++] = *p++;
      while (*p) {
        if (*p == ch) {
          out[o++] = *p++;
          if (*p != ch) break;
        }
        out[o++] = *p++;
      }
    } else if (ch == '-' && p[1] == '-') { /* line comment */
      while (*p && *p != '\n')
        out[o++] = *p++;
    } else if (ch == '/' && p[1] == '*') { /* block comment */
      out[o++] = *p++;
      out[o++] = *p++;
      while (*p && !(p[0] == '*' && p[1] == '/'))
        out[o++] = *p++;
      if (*p) {
        out[o++] = *p++;
        out[o++] = *p++;
      }
    } else if (ch == '?') {
      p++;
      int n;
      if (isdigit((unsigned char)*p)) {
        long v = 0;
        while (isdigit((unsigned char)*p)) {
          v = v * 10 + (*p++ - '0');
          if (v > DB_PARAM_MAX) goto bad;
        }
        if (v == 0) goto bad;
        n = (int)v;
      } else {
        if (max >= DB_PARAM_MAX) goto bad;
        n = max + 1;
      }
      if (n > max) max = n;
      o += (size_t)snprintf(out + o, 7, "$%d", n);
    } else {
      out[o++] = *p++;
    }
  }
  out[o] = '\0';
  if (nparams) *nparams = max;
  return out;
bad:
  free(out);
  return NULL;
}

enum db_err db_pg_err_of(const char *sqlstate, int conn_bad) {
  if (conn_bad) return DB_E_DOWN;
  if (!sqlstate || strlen(sqlstate) != 5) return DB_E_OTHER;
  if (!strncmp(sqlstate, "08", 2) || !strcmp(sqlstate, "57P01") || !strcmp(sqlstate, "57P02") ||
      !strcmp(sqlstate, "57P03") || !strcmp(sqlstate, "25006"))
    return DB_E_DOWN;
  if (!strcmp(sqlstate, "23505")) return DB_E_UNIQUE;
  if (!strncmp(sqlstate, "23", 2)) return DB_E_CONSTRAINT;
  if (!strcmp(sqlstate, "53100")) return DB_E_FULL;
  if (!strcmp(sqlstate, "40001") || !strcmp(sqlstate, "40P01") || !strcmp(sqlstate, "55P03"))
    return DB_E_BUSY;
  return DB_E_OTHER;
}
