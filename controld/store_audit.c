/* store_audit — audit log SQL (see store_audit.h). */
#include "store_audit.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_int.h"

void store_audit_set_retention(struct store *st, int64_t keep_ms) {
  st->audit_keep_ms = keep_ms;
}

/* Delete up to STORE_AUDIT_PRUNE_BATCH rows older than before_ms on the writer; count or -1. */
static int64_t prune_batch_locked(struct store *st, int64_t before_ms) {
  static const char q[] = "DELETE FROM audit WHERE id IN "
                          "(SELECT id FROM audit WHERE at < ? ORDER BY id LIMIT ?)";
  sqlite3_stmt *s = store_stmt(&st->w, q);
  if (!s) return -1;
  sqlite3_bind_int64(s, 1, before_ms);
  sqlite3_bind_int(s, 2, STORE_AUDIT_PRUNE_BATCH);
  if (store_step_done(&st->w, s, "pruning the audit log") < 0) return -1;
  return sqlite3_changes(st->w.db);
}

int64_t store_audit_add_locked(struct store *st, const struct audit_rec *a, int64_t now) {
  static const char ins[] =
      "INSERT INTO audit (at, token_id, token_name, method, path, site_id, status, summary) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
  sqlite3_stmt *s = store_stmt(&st->w, ins);
  int64_t id;
  if (!s) return -1;
  sqlite3_bind_int64(s, 1, a->at > 0 ? a->at : now);
  if (a->token_id > 0)
    sqlite3_bind_int64(s, 2, a->token_id);
  else
    sqlite3_bind_null(s, 2);
  if (a->token_name[0])
    sqlite3_bind_text(s, 3, a->token_name, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(s, 3);
  sqlite3_bind_text(s, 4, a->method, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 5, a->path, -1, SQLITE_STATIC);
  if (a->site_id > 0)
    sqlite3_bind_int64(s, 6, a->site_id);
  else
    sqlite3_bind_null(s, 6);
  sqlite3_bind_int(s, 7, a->status);
  sqlite3_bind_text(s, 8, a->summary, -1, SQLITE_STATIC);
  if (store_step_done(&st->w, s, "appending to the audit log") < 0) return -1;
  id = sqlite3_last_insert_rowid(st->w.db);
  /* the writer lock is held: audit_next_prune needs no other guard */
  if (st->audit_keep_ms > 0 && now >= st->audit_next_prune) {
    int64_t n = prune_batch_locked(st, now - st->audit_keep_ms);
    if (n < 0) return -1;
    /* a full batch means more are due: the next write goes on with them */
    st->audit_next_prune = n == STORE_AUDIT_PRUNE_BATCH ? now : now + STORE_AUDIT_PRUNE_EVERY_MS;
  }
  return id;
}

int64_t store_audit_prune(struct store *st, int64_t before_ms) {
  int64_t total = 0, n;
  do {
    if (store_tx_begin(st) < 0) return -1;
    n = prune_batch_locked(st, before_ms);
    if (n < 0) {
      store_tx_rollback(st);
      return -1;
    }
    if (store_tx_commit(st) < 0) return -1;
    total += n;
  } while (n == STORE_AUDIT_PRUNE_BATCH);
  return total;
}

enum store_rc store_audit_list(struct store *st, int64_t after, int64_t site_id, int limit,
                               struct audit_rec **out, int *n) {
  static const char all[] =
      "SELECT id, at, token_id, token_name, method, path, site_id, status, summary "
      "FROM audit WHERE id > ? ORDER BY id LIMIT ?";
  static const char one[] =
      "SELECT id, at, token_id, token_name, method, path, site_id, status, summary "
      "FROM audit WHERE site_id = ?3 AND id > ?1 ORDER BY id LIMIT ?2";
  struct dbconn *c = store_reader(st);
  sqlite3_stmt *s = c ? store_stmt(c, site_id > 0 ? one : all) : NULL;
  struct audit_rec *arr = NULL;
  int cnt = 0, rc = SQLITE_DONE;
  *out = NULL;
  *n = 0;
  if (!s || limit < 1) return STORE_ERROR;
  arr = calloc((size_t)limit, sizeof *arr);
  if (!arr) return STORE_ERROR;
  sqlite3_bind_int64(s, 1, after);
  sqlite3_bind_int(s, 2, limit);
  if (site_id > 0) sqlite3_bind_int64(s, 3, site_id);
  while (cnt < limit && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    struct audit_rec *a = &arr[cnt++];
    a->id = sqlite3_column_int64(s, 0);
    a->at = sqlite3_column_int64(s, 1);
    a->token_id = sqlite3_column_int64(s, 2);
    store_col_text(s, 3, a->token_name, sizeof a->token_name);
    store_col_text(s, 4, a->method, sizeof a->method);
    store_col_text(s, 5, a->path, sizeof a->path);
    a->site_id = sqlite3_column_int64(s, 6);
    a->status = sqlite3_column_int(s, 7);
    store_col_text(s, 8, a->summary, sizeof a->summary);
  }
  sqlite3_reset(s);
  if (cnt < limit && rc != SQLITE_DONE) {
    log_error("listing the audit log: %s", sqlite3_errmsg(c->db));
    free(arr);
    return STORE_ERROR;
  }
  *out = arr;
  *n = cnt;
  return STORE_OK;
}
