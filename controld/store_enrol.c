/* store_enrol — enrolment keys' SQL (see store_enrol.h). */
#include "store_enrol.h"

#include "log.h"
#include "store_core.h"

enum store_rc store_enrolkey_create_locked(struct store_tx *tx, struct enrolkey_rec *k,
                                           const char *hash, int64_t now) {
  struct store *st = store_tx_store(tx);
  static const char ins[] =
      "INSERT INTO enrolment_keys (name, hash, created_at, expires_at, max_uses) "
      "VALUES (?, ?, ?, ?, ?) RETURNING id";
  char conflict[16];
  enum store_rc rc =
      store_room_locked(tx, "SELECT COUNT(*) FROM enrolment_keys WHERE revoked_at IS NULL",
                        STORE_MAX_ENROLKEYS, "counting enrolment keys", "");
  struct db_stmt *s = rc == STORE_OK ? db_prep(st->w, ins) : NULL;
  if (rc != STORE_OK) return rc;
  if (!s) return STORE_ERROR;
  store_bind(s, 1, "ttIPP", k->name, hash, now, k->expires_at, k->max_uses);
  rc = store_step_unique(st->w, s, 1, "name", conflict, sizeof conflict,
                         "inserting an enrolment key");
  if (rc != STORE_OK) return rc;
  k->id = db_col_i64(s, 0);
  db_reset(s);
  k->created_at = now;
  k->uses = 0;
  k->revoked_at = 0;
  return STORE_OK;
}

enum store_rc store_enrolkey_list(struct store *st, struct enrolkey_rec **out, int *n) {
  static struct store_sql q;
  return store_select(st, &q, enrolkey_fields, " FROM enrolment_keys ORDER BY id", sizeof **out, 0,
                      (void **)out, n, "listing enrolment keys", "");
}

enum store_rc store_enrolkey_revoke_locked(struct store_tx *tx, int64_t id, int64_t now) {
  struct store *st = store_tx_store(tx);
  if (store_exec(st->w, "revoking an enrolment key",
                 "UPDATE enrolment_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?",
                 "II", now, id) < 0)
    return STORE_ERROR;
  return db_changes(st->w) == 0 ? STORE_NOT_FOUND : STORE_OK;
}

enum store_rc store_enrolkey_find(struct store *st, const char *hash, struct enrolkey_rec *out) {
  static struct store_sql q;
  struct db_conn *c = store_reader(st);
  const char *sql =
      c ? store_sql(&q, "SELECT ", enrolkey_fields, " FROM enrolment_keys WHERE hash = ?") : NULL;
  struct db_stmt *s = sql ? db_prep(c, sql) : NULL;
  if (!s) return STORE_ERROR;
  db_bind_text(s, 1, hash);
  return store_one(c, s, sizeof *out, store_read_fields, enrolkey_fields, NULL, out,
                   "looking up an enrolment key");
}

enum store_rc store_enrolkey_use_locked(struct store_tx *tx, const char *hash, int64_t now,
                                        struct enrolkey_rec *out) {
  static struct store_sql q;
  struct store *st = store_tx_store(tx);
  /* the whole rule of enrolkey_state in the WHERE: the row is locked by the UPDATE, so a
     concurrent use (another replica's too) sees this one before it checks */
  const char *sql = store_sql(&q,
                              "UPDATE enrolment_keys SET uses = uses + 1 "
                              "WHERE hash = ? AND revoked_at IS NULL "
                              "AND (expires_at IS NULL OR expires_at > ?) "
                              "AND (max_uses IS NULL OR uses < max_uses) RETURNING ",
                              enrolkey_fields, "");
  struct db_stmt *s = sql ? db_prep(st->w, sql) : NULL;
  if (!s) return STORE_ERROR;
  store_bind(s, 1, "tI", hash, now);
  return store_one(st->w, s, sizeof *out, store_read_fields, enrolkey_fields, NULL, out,
                   "counting a use of an enrolment key");
}
