/* store_rows — records through their field tables: columns read and bound, row lists, statements
   built from a table (see store_core.h). Part of the store core: it names no feature. */
#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "names.h"
#include "store_core.h"

static int has_col(const struct field_def *d, unsigned form) {
  return d->column && (form == 0 || (d->forms & form));
}

/* An INT_LIST column's text ("[502,503]": the integers in it, up to the row's capacity). */
static void read_int_list(const char *text, const struct field_def *d, void *dst) {
  int n = 0, *vals = (int *)(void *)((char *)dst + d->offset);
  for (const char *p = text; p && *p && (size_t)n < d->size; p++) {
    if (*p >= '0' && *p <= '9') {
      char *end;
      vals[n++] = (int)strtol(p, &end, 10);
      p = end - 1;
    }
  }
  memcpy((char *)dst + d->count_offset, &n, sizeof n);
}

/* The text of an INT_LIST member ("[502,503]") into out. */
static void format_int_list(const struct field_def *d, const void *src, char *out, size_t cap) {
  const int *vals = (const int *)(const void *)((const char *)src + d->offset);
  int n;
  size_t at;
  memcpy(&n, (const char *)src + d->count_offset, sizeof n);
  at = (size_t)snprintf(out, cap, "[");
  for (int i = 0; i < n && (size_t)i < d->size && at < cap; i++)
    at += (size_t)snprintf(out + at, cap - at, "%s%d", i ? "," : "", vals[i]);
  if (at < cap) snprintf(out + at, cap - at, "]");
}

int store_fields_read(struct db_stmt *s, int col, const struct field_def *defs, unsigned form,
                      void *dst) {
  for (const struct field_def *d = defs; d->name; d++) {
    char *m = (char *)dst + d->offset;
    if (!has_col(d, form)) continue;
    switch (d->type) {
    case FIELD_INT:
    case FIELD_BOOL:
      if (d->size == sizeof(int64_t)) {
        int64_t v = db_col_i64(s, col);
        memcpy(m, &v, sizeof v);
      } else {
        int v = db_col_int(s, col);
        memcpy(m, &v, sizeof v);
      }
      break;
    case FIELD_STR:
    case FIELD_TEXT:
    case FIELD_ENUM:
      store_col_text(s, col, m, d->size);
      break;
    case FIELD_NAMED: { /* a word no longer known reads as the first value */
      int v = names_value(d->choices, d->nchoices, db_col_text(s, col));
      if (v < 0) v = 0;
      memcpy(m, &v, sizeof v);
      break;
    }
    case FIELD_DOUBLE: {
      double v = db_col_null(s, col) ? 0 : db_col_double(s, col);
      memcpy(m, &v, sizeof v);
      break;
    }
    case FIELD_INT_LIST:
      read_int_list(db_col_text(s, col), d, dst);
      break;
    case FIELD_JSON: /* text that does not read leaves the defaults (written from valid values) */
      if (d->codec->from_text(db_col_text(s, col), m) < 0)
        log_warn("stored %s unreadable; using the defaults", d->column);
      break;
    }
    col++;
  }
  return col;
}

/* A row's member as an integer (INT of either size, BOOL). */
static int64_t member_i64(const struct field_def *d, const void *src) {
  const char *m = (const char *)src + d->offset;
  if (d->size == sizeof(int64_t)) {
    int64_t v;
    memcpy(&v, m, sizeof v);
    return v;
  }
  int v;
  memcpy(&v, m, sizeof v);
  return v;
}

/* A row's member as text (a NAMED value as its word), or NULL for a nullable string that is "". */
static const char *member_text(const struct field_def *d, const void *src) {
  const char *m = (const char *)src + d->offset;
  if (d->type == FIELD_NAMED) {
    int v;
    memcpy(&v, m, sizeof v);
    const char *w = names_word(d->choices, d->nchoices, v, NULL);
    return w && (*w || !(d->flags & FIELD_NULLABLE)) ? w : NULL;
  }
  return m[0] == '\0' && (d->flags & FIELD_NULLABLE) ? NULL : m;
}

static int is_text(const struct field_def *d) {
  return d->type == FIELD_STR || d->type == FIELD_TEXT || d->type == FIELD_ENUM ||
         d->type == FIELD_NAMED;
}

int store_fields_bind(struct db_stmt *q, int idx, const struct field_def *defs, unsigned form,
                      const void *src) {
  for (const struct field_def *d = defs; d->name; d++) {
    const char *m = (const char *)src + d->offset;
    if (!has_col(d, form)) continue;
    if (d->type == FIELD_DOUBLE) {
      double x;
      memcpy(&x, m, sizeof x);
      if (x == 0 && (d->flags & FIELD_NULLABLE))
        db_bind_null(q, idx);
      else
        db_bind_double(q, idx, x);
    } else if (d->type == FIELD_INT_LIST) {
      char list[16 * 12];
      format_int_list(d, src, list, sizeof list);
      db_bind_text(q, idx, list);
    } else if (d->type == FIELD_JSON) {
      char *t = d->codec->to_text(m);
      if (t)
        db_bind_text(q, idx, t);
      else
        db_bind_null(q, idx);
      free(t);
      if (!t && !d->codec->is_default(m)) return -1;
    } else if (is_text(d)) {
      const char *t = member_text(d, src);
      if (t)
        db_bind_text(q, idx, t);
      else
        db_bind_null(q, idx);
    } else if (d->type == FIELD_INT && (d->flags & FIELD_NULLABLE) && member_i64(d, src) == 0) {
      db_bind_null(q, idx);
    } else {
      db_bind_i64(q, idx, member_i64(d, src));
    }
    idx++;
  }
  return idx;
}

void store_fields_arr(struct db_arr *a, const struct field_def *defs, unsigned form,
                      const void *src) {
  int k = 0;
  for (const struct field_def *d = defs; d->name; d++) {
    if (!has_col(d, form)) continue;
    assert(d->type != FIELD_DOUBLE && d->type != FIELD_INT_LIST && d->type != FIELD_JSON);
    if (is_text(d))
      db_arr_text(&a[k], member_text(d, src));
    else
      db_arr_i64(&a[k], member_i64(d, src));
    k++;
  }
}

const char *store_fields_pg_type(const struct field_def *d) {
  if (d->type == FIELD_DOUBLE) return "double precision";
  return is_text(d) || d->type == FIELD_INT_LIST || d->type == FIELD_JSON ? "text" : "bigint";
}

enum store_rc store_list_read(struct db_conn *c, struct db_stmt *s, size_t elem, int limit,
                              int (*read)(const void *ctx, struct db_stmt *s, void *rec),
                              const void *ctx, void (*fini)(void *rec), void **out, int *n,
                              const char *what) {
  char *arr = NULL;
  int cnt = 0, cap = 0, rc = DB_DONE, oom = 0;
  *out = NULL;
  *n = 0;
  while ((limit < 1 || cnt < limit) && (rc = db_step(s)) == DB_ROW) {
    /* a list of at most limit rows (store_one: 1) starts no larger than that */
    char *grown = store_grow(arr, &cap, cnt, elem, limit > 0 && limit < 16 ? limit : 16);
    if (!grown) {
      oom = 1;
      break;
    }
    arr = grown;
    memset(arr + (size_t)cnt * elem, 0, elem);
    if (read(ctx, s, arr + (size_t)cnt * elem) < 0) {
      if (fini) fini(arr + (size_t)cnt * elem);
      oom = 1;
      break;
    }
    cnt++;
  }
  db_reset(s);
  if (oom || (rc != DB_DONE && rc != DB_ROW)) {
    if (oom)
      log_error("%s: out of memory", what);
    else
      log_error("%s: %s", what, db_errmsg(c));
    for (int i = 0; fini && i < cnt; i++)
      fini(arr + (size_t)i * elem);
    free(arr);
    return STORE_ERROR;
  }
  *out = arr;
  *n = cnt;
  return STORE_OK;
}

int store_read_fields(const void *defs, struct db_stmt *s, void *rec) {
  store_fields_read(s, 0, defs, 0, rec);
  return 0;
}

enum store_rc store_rows_read(struct db_conn *c, struct db_stmt *s, const struct field_def *defs,
                              size_t elem, int limit, void **out, int *n, const char *what) {
  return store_list_read(c, s, elem, limit, store_read_fields, defs, NULL, out, n, what);
}

static const struct field_def id_column[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, .offset = 0, .size = sizeof(int64_t)},
    {.name = NULL},
};

int store_id_cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

enum store_rc store_ids_read(struct db_conn *c, struct db_stmt *s, int limit, int64_t **ids, int *n,
                             const char *what) {
  return store_rows_read(c, s, id_column, sizeof **ids, limit, (void **)ids, n, what);
}

static pthread_mutex_t sql_mu = PTHREAD_MUTEX_INITIALIZER;

const char *store_sql(struct store_sql *q, const char *head, const struct field_def *defs,
                      const char *tail) {
  char cols[768];
  const char *text = NULL;
  if (atomic_load(&q->ready)) return q->text;
  pthread_mutex_lock(&sql_mu);
  if (atomic_load(&q->ready)) {
    text = q->text;
  } else if (fields_columns(defs, 0, "", cols, sizeof cols) >= 0) {
    int w = snprintf(q->text, sizeof q->text, "%s%s%s", head, cols, tail);
    if (w > 0 && (size_t)w < sizeof q->text) {
      atomic_store(&q->ready, 1);
      text = q->text;
    }
  }
  pthread_mutex_unlock(&sql_mu);
  if (!text) log_error("a statement built from a field table does not fit: %s...%s", head, tail);
  return text;
}

const char *store_sql_update(struct store_sql *q, const char *table, const struct field_def *defs) {
  char sets[768];
  const char *text = NULL;
  if (atomic_load(&q->ready)) return q->text;
  pthread_mutex_lock(&sql_mu);
  if (atomic_load(&q->ready)) {
    text = q->text;
  } else if (fields_sql_list(defs, 0, FIELDS_SQL_SETS, sets, sizeof sets) >= 0) {
    int w = snprintf(q->text, sizeof q->text, "UPDATE %s SET %s WHERE id = ?", table, sets);
    if (w > 0 && (size_t)w < sizeof q->text) {
      atomic_store(&q->ready, 1);
      text = q->text;
    }
  }
  pthread_mutex_unlock(&sql_mu);
  if (!text) log_error("an UPDATE of %s built from its field table does not fit", table);
  return text;
}

/* ---- statements in one call ---- */

int store_bindv(struct db_stmt *s, int idx, const char *types, va_list ap) {
  for (const char *t = types; *t; t++, idx++) {
    switch (*t) {
    case 'i':
      db_bind_int(s, idx, va_arg(ap, int));
      break;
    case 'I':
      db_bind_i64(s, idx, va_arg(ap, int64_t));
      break;
    case 'P': {
      int64_t v = va_arg(ap, int64_t);
      if (v > 0)
        db_bind_i64(s, idx, v);
      else
        db_bind_null(s, idx);
      break;
    }
    case 't':
    case 'z': {
      const char *v = va_arg(ap, const char *);
      if (v && (*t == 't' || *v))
        db_bind_text(s, idx, v);
      else
        db_bind_null(s, idx);
      break;
    }
    default:
      assert(!"store_bind: unknown type letter");
      break;
    }
  }
  return idx;
}

int store_bind(struct db_stmt *s, int idx, const char *types, ...) {
  va_list ap;
  va_start(ap, types);
  idx = store_bindv(s, idx, types, ap);
  va_end(ap);
  return idx;
}

int store_exec(struct db_conn *c, const char *what, const char *sql, const char *types, ...) {
  struct db_stmt *s = db_prep(c, sql);
  va_list ap;
  if (!s) return -1;
  va_start(ap, types);
  store_bindv(s, 1, types, ap);
  va_end(ap);
  return store_step_done(c, s, what);
}

int store_each(struct db_conn *c, struct db_stmt *s, const char *what,
               int (*row)(void *arg, struct db_stmt *s), void *arg) {
  int rc;
  while ((rc = db_step(s)) == DB_ROW)
    if (row(arg, s) != 0) {
      rc = DB_DONE;
      break;
    }
  db_reset(s);
  if (rc != DB_DONE) {
    log_error("%s: %s", what, db_errmsg(c));
    return -1;
  }
  return 0;
}

enum store_rc store_one(struct db_conn *c, struct db_stmt *s, size_t size,
                        int (*read)(const void *ctx, struct db_stmt *s, void *rec), const void *ctx,
                        void (*fini)(void *rec), void *dst, const char *what) {
  void *arr = NULL;
  int n = 0;
  enum store_rc rc = store_list_read(c, s, size, 1, read, ctx, fini, &arr, &n, what);
  memset(dst, 0, size);
  if (rc != STORE_OK) return rc;
  if (n == 1) {
    memcpy(dst, arr, size);
    explicit_bzero(arr, size); /* a record may hold a secret */
  }
  free(arr);
  return n == 1 ? STORE_OK : STORE_NOT_FOUND;
}

enum store_rc store_select(struct store *st, struct store_sql *q, const struct field_def *defs,
                           const char *tail, size_t elem, int limit, void **out, int *n,
                           const char *what, const char *types, ...) {
  struct db_conn *c = store_reader(st);
  const char *sql = c ? store_sql(q, "SELECT ", defs, tail) : NULL;
  struct db_stmt *s = sql ? db_prep(c, sql) : NULL;
  va_list ap;
  *out = NULL;
  *n = 0;
  if (!s) return STORE_ERROR;
  va_start(ap, types);
  store_bindv(s, 1, types, ap);
  va_end(ap);
  return store_rows_read(c, s, defs, elem, limit, out, n, what);
}

enum store_rc store_step_unique(struct db_conn *c, struct db_stmt *s, int returning,
                                const char *field, char *conflict, size_t clen, const char *what) {
  int rc = db_step(s);
  if (rc == (returning ? DB_ROW : DB_DONE)) {
    if (!returning) db_reset(s);
    return STORE_OK;
  }
  db_reset(s);
  if (db_err(c) == DB_E_UNIQUE) {
    snprintf(conflict, clen, "%s", field);
    return STORE_CONFLICT;
  }
  log_error("%s: %s", what, db_errmsg(c));
  return STORE_ERROR;
}

enum store_rc store_room_locked(struct store_tx *tx, const char *count_sql, int64_t cap,
                                const char *what, const char *types, ...) {
  struct store *st = store_tx_store(tx);
  struct db_stmt *s = db_prep(st->w, count_sql);
  int64_t have;
  va_list ap;
  if (!s) return STORE_ERROR;
  va_start(ap, types);
  store_bindv(s, 1, types, ap);
  va_end(ap);
  if (store_step_i64(st->w, s, what, &have) < 0) return STORE_ERROR;
  return have < cap ? STORE_OK : STORE_LIMIT;
}

int64_t store_prune_ids(struct store *st, const char *pick, const char *const *del, size_t n_del,
                        int batch, int64_t before_ms, const char *what) {
  int64_t total = 0;
  for (;;) {
    int64_t *ids = NULL;
    int n = 0, ok = 1;
    struct store_tx *tx = store_tx_begin_engine(st, 0);
    struct db_stmt *s;
    if (!tx) return -1;
    s = db_prep(st->w, pick);
    if (!s) {
      store_tx_rollback(tx);
      return -1;
    }
    db_bind_i64(s, 1, before_ms);
    db_bind_i64(s, 2, batch);
    if (store_ids_read(st->w, s, batch, &ids, &n, what) != STORE_OK) {
      store_tx_rollback(tx);
      return -1;
    }
    for (int i = 0; i < n && ok; i++)
      for (size_t k = 0; k < n_del && ok; k++)
        ok = store_exec(st->w, what, del[k], "I", ids[i]) == 0;
    free(ids);
    if (!ok) {
      store_tx_rollback(tx);
      return -1;
    }
    if (store_tx_commit(tx) < 0) return -1;
    total += n;
    if (n < batch || atomic_load(&st->prune_stopped)) return total;
  }
}

void store_prune_stop(struct store *st) {
  atomic_store(&st->prune_stopped, 1);
}
