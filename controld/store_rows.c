/* store_rows — records through their field tables: columns read and bound, row lists, statements
   built from a table (see store_int.h). Part of the store core: it names no feature. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_int.h"

static int has_col(const struct field_def *d, unsigned form) {
  return d->column && (form == 0 || (d->forms & form));
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
    case FIELD_INT_LIST: /* not a column type: stored as text by its owner */
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

/* A row's member as text, or NULL for a nullable string that is "". */
static const char *member_text(const struct field_def *d, const void *src) {
  const char *m = (const char *)src + d->offset;
  return m[0] == '\0' && (d->flags & FIELD_NULLABLE) ? NULL : m;
}

static int is_text(const struct field_def *d) {
  return d->type == FIELD_STR || d->type == FIELD_TEXT || d->type == FIELD_ENUM;
}

int store_fields_bind(struct db_stmt *q, int idx, const struct field_def *defs, unsigned form,
                      const void *src) {
  for (const struct field_def *d = defs; d->name; d++) {
    if (!has_col(d, form)) continue;
    if (is_text(d)) {
      const char *t = member_text(d, src);
      if (t)
        db_bind_text(q, idx, t);
      else
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
    if (is_text(d))
      db_arr_text(&a[k], member_text(d, src));
    else
      db_arr_i64(&a[k], member_i64(d, src));
    k++;
  }
}

const char *store_fields_pg_type(const struct field_def *d) {
  return is_text(d) ? "text" : "bigint";
}

enum store_rc store_rows_read(struct db_conn *c, struct db_stmt *s, const struct field_def *defs,
                              size_t elem, int limit, void **out, int *n, const char *what) {
  char *arr = NULL;
  int cnt = 0, cap = 0, rc = DB_DONE;
  *out = NULL;
  *n = 0;
  while ((limit < 1 || cnt < limit) && (rc = db_step(s)) == DB_ROW) {
    char *grown = store_grow(arr, &cap, cnt, elem, 16);
    if (!grown) {
      log_error("%s: out of memory", what);
      free(arr);
      db_reset(s);
      return STORE_ERROR;
    }
    arr = grown;
    memset(arr + (size_t)cnt * elem, 0, elem);
    store_fields_read(s, 0, defs, 0, arr + (size_t)cnt++ * elem);
  }
  db_reset(s);
  if (rc != DB_DONE && rc != DB_ROW) {
    log_error("%s: %s", what, db_errmsg(c));
    free(arr);
    return STORE_ERROR;
  }
  *out = arr;
  *n = cnt;
  return STORE_OK;
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
