/* store_idem — idempotency keys (see store_idem.h). */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_core.h"
#include "store_idem.h"

enum store_rc store_idem_get_locked(struct store_tx *tx, const char *key, int64_t not_before,
                                    struct idem_rec *out) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "SELECT request_hash, status, body, etag, created_at "
                          "FROM idempotency_keys WHERE key = ? AND created_at >= ?";
  struct db_stmt *s = db_prep(st->w, q);
  int rc;
  memset(out, 0, sizeof *out);
  if (!s) return STORE_ERROR;
  db_bind_text(s, 1, key);
  db_bind_i64(s, 2, not_before);
  rc = db_step(s);
  if (rc == DB_ROW) {
    const char *body = db_col_text(s, 2);
    store_col_text(s, 0, out->request_hash, sizeof out->request_hash);
    out->status = db_col_int(s, 1);
    out->body = body ? strdup(body) : NULL;
    store_col_text(s, 3, out->etag, sizeof out->etag);
    out->created_at = db_col_i64(s, 4);
    db_reset(s);
    return body && !out->body ? STORE_ERROR : STORE_OK;
  }
  db_reset(s);
  if (rc == DB_DONE) return STORE_NOT_FOUND;
  log_error("reading idempotency key: %s", db_errmsg(st->w));
  return STORE_ERROR;
}

enum store_rc store_idem_put_locked(struct store_tx *tx, const char *key, const char *request_hash,
                                    int status, const char *body, const char *etag, int64_t now) {
  struct store *st = store_tx_store(tx);
  static const char ins[] = "INSERT INTO idempotency_keys "
                            "(key, request_hash, status, body, etag, created_at) "
                            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                            "request_hash = excluded.request_hash, status = excluded.status, "
                            "body = excluded.body, etag = excluded.etag, "
                            "created_at = excluded.created_at";
  static const char old[] = "DELETE FROM idempotency_keys WHERE created_at < ?";
  static const char over[] =
      "DELETE FROM idempotency_keys WHERE key IN (SELECT key FROM idempotency_keys "
      "ORDER BY created_at DESC LIMIT 9223372036854775807 OFFSET ?)";
  struct db_stmt *s = db_prep(st->w, ins);
  if (!s) return STORE_ERROR;
  db_bind_text(s, 1, key);
  db_bind_text(s, 2, request_hash);
  db_bind_int(s, 3, status);
  if (body) db_bind_text(s, 4, body);
  if (etag && *etag) db_bind_text(s, 5, etag);
  db_bind_i64(s, 6, now);
  if (store_step_done(st->w, s, "storing idempotency key") < 0) return STORE_ERROR;
  s = db_prep(st->w, old);
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, now - STORE_IDEM_KEEP_MS);
  if (store_step_done(st->w, s, "pruning idempotency keys") < 0) return STORE_ERROR;
  s = db_prep(st->w, over);
  if (!s) return STORE_ERROR;
  db_bind_int(s, 1, STORE_IDEM_MAX_ROWS);
  if (store_step_done(st->w, s, "capping idempotency keys") < 0) return STORE_ERROR;
  return STORE_OK;
}
