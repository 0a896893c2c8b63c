/* store_audit — audit log SQL (see store_audit.h). */
#include "store_audit.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_core.h"

/* The audit feature's state: its retention and when the next write prunes (under the writer
   lock). */
struct audit_state {
  int64_t keep_ms;    /* 0 = forever */
  int64_t next_prune; /* wall ms of the next prune by a write */
};

/* No hook: the audit row is written by the write itself; the participant holds the state. */
static const struct store_participant audit_participant = {.name = "audit", .fini = free};

int store_audit_attach(struct store *st) {
  return store_participant_new(st, &audit_participant, sizeof(struct audit_state)) ? 0 : -1;
}

void store_audit_set_retention(struct store *st, int64_t keep_ms) {
  struct audit_state *as = store_participant_state(st, &audit_participant);
  as->keep_ms = keep_ms;
}

/* Rows older than before_ms go, but the newest: SQLite gives a new row the highest id + 1, so an
   emptied log would number from 1 again under a reader's `after` cursor. */
#define PRUNE_OLD "at < ? AND id < (SELECT MAX(id) FROM audit)"

/* Delete up to STORE_AUDIT_PRUNE_BATCH rows older than before_ms on the writer; count or -1. */
static int64_t prune_batch_locked(struct store_tx *tx, int64_t before_ms) {
  struct store *st = store_tx_store(tx);
  static const char q[] = "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE " PRUNE_OLD
                          " ORDER BY id LIMIT ?)";
  if (store_exec(st->w, "pruning the audit log", q, "Ii", before_ms, STORE_AUDIT_PRUNE_BATCH) < 0)
    return -1;
  return db_changes(st->w);
}

int store_audit_add_locked(struct store_tx *tx, const struct audit_rec *a, int64_t now) {
  struct store *st = store_tx_store(tx);
  static const char ins[] =
      "INSERT INTO audit (at, token_id, token_name, method, path, site_id, status, summary) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
  struct audit_state *as = store_participant_state(st, &audit_participant);
  struct db_stmt *s = db_prep(st->w, ins);
  if (!s) return -1;
  db_bind_i64(s, 1, a->at > 0 ? a->at : now);
  if (a->token_id > 0)
    db_bind_i64(s, 2, a->token_id);
  else
    db_bind_null(s, 2);
  if (a->token_name[0])
    db_bind_text(s, 3, a->token_name);
  else
    db_bind_null(s, 3);
  db_bind_text(s, 4, a->method);
  db_bind_text(s, 5, a->path);
  if (a->site_id > 0)
    db_bind_i64(s, 6, a->site_id);
  else
    db_bind_null(s, 6);
  db_bind_int(s, 7, a->status);
  db_bind_text(s, 8, a->summary);
  if (store_defer(st->w, s, "appending to the audit log") < 0) return -1;
  /* the writer lock is held: next_prune needs no other guard */
  if (as->keep_ms > 0 && now >= as->next_prune) {
    int64_t n = prune_batch_locked(tx, now - as->keep_ms);
    if (n < 0) return -1;
    /* a full batch means more are due: the next write goes on with them */
    as->next_prune = n == STORE_AUDIT_PRUNE_BATCH ? now : now + STORE_AUDIT_PRUNE_EVERY_MS;
  }
  return 0;
}

int64_t store_audit_prune(struct store *st, int64_t before_ms) {
  static const char pick[] = "SELECT id FROM audit WHERE " PRUNE_OLD " ORDER BY id LIMIT ?";
  static const char *const del[] = {"DELETE FROM audit WHERE id = ?"};
  return store_prune_ids(st, pick, del, 1, STORE_AUDIT_PRUNE_BATCH, before_ms,
                         "pruning the audit log");
}

#define M(m) .offset = offsetof(struct audit_rec, m), .size = sizeof(((struct audit_rec *)0)->m)
/* The columns of an audit record as the list reads them. */
static const struct field_def audit_fields[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, M(id)},
    {.name = "at", .column = "at", .type = FIELD_INT, M(at)},
    {.name = "token_id", .column = "token_id", .type = FIELD_INT, M(token_id)},
    {.name = "token_name", .column = "token_name", .type = FIELD_STR, M(token_name)},
    {.name = "method", .column = "method", .type = FIELD_STR, M(method)},
    {.name = "path", .column = "path", .type = FIELD_STR, M(path)},
    {.name = "site_id", .column = "site_id", .type = FIELD_INT, M(site_id)},
    {.name = "status", .column = "status", .type = FIELD_INT, M(status)},
    {.name = "summary", .column = "summary", .type = FIELD_STR, M(summary)},
    {.name = NULL},
};
#undef M

enum store_rc store_audit_list(struct store *st, int64_t after, int64_t site_id, int limit,
                               struct audit_rec **out, int *n) {
  static struct store_sql all, one;
  *out = NULL;
  *n = 0;
  if (limit < 1) return STORE_ERROR;
  if (site_id > 0)
    return store_select(st, &one, audit_fields,
                        " FROM audit WHERE site_id = ?3 AND id > ?1 ORDER BY id LIMIT ?2",
                        sizeof **out, limit, (void **)out, n, "listing the audit log", "IiI", after,
                        limit, site_id);
  return store_select(st, &all, audit_fields, " FROM audit WHERE id > ? ORDER BY id LIMIT ?",
                      sizeof **out, limit, (void **)out, n, "listing the audit log", "Ii", after,
                      limit);
}
