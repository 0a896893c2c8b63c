/* store_pub — publications (see store_pub.h). */
#include "store_pub.h"

#include <stdlib.h>

#include "clock.h"
#include "log.h"
#include "store_core.h"

/* The publications feature's state: the hook, and the open transaction's newest seq (under the
   writer lock). */
struct pub_state {
  void (*hook)(void *arg, int64_t seq);
  void *hook_arg;
  int64_t pending;   /* seq recorded in the open transaction, 0 = none */
  struct db_stmt *q; /* PostgreSQL: the last publication INSERT, prefetched (its seq) */
};

static const struct store_participant pub_participant;

static struct pub_state *pub_of(struct store *st) {
  return store_participant_state(st, &pub_participant);
}

int store_publish_locked(struct store_tx *tx, int64_t site_id, const char *reason, int deleted) {
  struct store *st = store_tx_store(tx);
  struct pub_state *ps = pub_of(st);
  static const char bump[] =
      "UPDATE sites SET config_version = config_version + 1, updated_at = ? WHERE id = ?";
  /* seq = the last one + 1, not the identity: under the ordered-write row no one else numbers
     at the same time, and a rolled-back transaction leaves no gap (PostgreSQL's identity would;
     SQLite's AUTOINCREMENT rolls back with it). Pruning keeps each site's newest publication. */
  static const char ins[] =
      "INSERT INTO publications (seq, site_id, config_version, deleted, reason, created_at) "
      "VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM publications), ?, "
      "COALESCE((SELECT config_version FROM sites WHERE id = ?), 0), ?, ?, ?) RETURNING seq";
  struct db_stmt *s;
  int64_t now = clock_wall_ms();
  if (!deleted) {
    s = db_prep(st->w, bump);
    if (!s) return -1;
    db_bind_i64(s, 1, now);
    db_bind_i64(s, 2, site_id);
    if (store_defer(st->w, s, "bumping config_version") < 0) return -1;
  }
  s = db_prep(st->w, ins);
  if (!s) return -1;
  db_bind_i64(s, 1, site_id);
  db_bind_i64(s, 2, site_id);
  db_bind_int(s, 3, deleted);
  db_bind_text(s, 4, reason);
  db_bind_i64(s, 5, now);
  if (db_kind(st->w) == DB_PG) { /* its seq is read at the commit: no round trip of its own */
    if (db_prefetch(s) < 0) {
      log_error("recording publication: %s", db_errmsg(st->w));
      db_reset(s);
      return -1;
    }
    ps->q = s; /* a later publication in the transaction replaces it (the newest seq wins) */
    return 0;
  }
  return store_step_i64(st->w, s, "recording publication", &ps->pending);
}

int64_t store_pub_prune(struct store *st, int64_t before_ms) {
  /* an incident's propagation and a drill's figures read the site's publications over the
     incident's or the drill's time: those stay while the incident or drill is kept */
  static const char pick[] =
      "SELECT p.seq FROM publications p WHERE p.created_at < ? AND (p.seq < (SELECT MAX(q.seq) "
      "FROM publications q WHERE q.site_id = p.site_id) OR (p.seq < (SELECT MAX(r.seq) FROM "
      "publications r) - " STORE_SQL_NUM(
          PUB_DELTA_MAX) " AND NOT EXISTS (SELECT 1 FROM sites s WHERE s.id = "
                         "p.site_id))) AND NOT EXISTS (SELECT 1 FROM incidents "
                         "i WHERE i.site_id = p.site_id AND i.opened_at <= p.created_at AND "
                         "COALESCE(i.resolved_at, p.created_at) >= p.created_at) AND NOT EXISTS "
                         "(SELECT 1 FROM "
                         "drills d WHERE d.site_id = p.site_id AND d.started_at IS NOT NULL AND "
                         "d.started_at - 1000 "
                         "<= p.created_at AND COALESCE(d.finished_at + 1000, p.created_at) >= "
                         "p.created_at) ORDER "
                         "BY p.created_at LIMIT ?";
  static const char *const del[] = {"DELETE FROM publications WHERE seq = ?"};
  return store_prune_ids(st, pick, del, 1, STORE_PUB_PRUNE_BATCH, before_ms,
                         "pruning publications");
}

/* The transaction's newest publication seq into ps->pending (reading the prefetched answer).
   0 or -1. */
static int pub_resolve_locked(struct store_tx *tx) {
  struct store *st = store_tx_store(tx);
  struct pub_state *ps = pub_of(st);
  if (!ps->q) return 0;
  return store_prefetched_i64(st, &ps->q, &ps->pending, "recording publication");
}

int64_t store_pub_seq(struct store *st) {
  static const char sql[] = "SELECT COALESCE(MAX(seq), 0) FROM publications";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, sql) : NULL;
  int64_t v = -1;
  if (!s) return -1;
  if (db_step(s) == DB_ROW) v = db_col_i64(s, 0);
  db_reset(s);
  return v;
}

/* ---- the transaction participant ---- */

static _Thread_local int64_t tl_committed_seq; /* between committed and released */

static int pub_begin(struct store_tx *tx, void *state, int engine) {
  struct pub_state *ps = state;
  (void)tx, (void)engine;
  ps->q = NULL;
  ps->pending = 0;
  return 0;
}

static int pub_before_commit(struct store_tx *tx, void *state) {
  (void)state;
  return pub_resolve_locked(tx);
}

static void pub_committed(struct store *st, void *state) {
  struct pub_state *ps = state;
  (void)st;
  tl_committed_seq = ps->pending;
  ps->pending = 0;
}

static void pub_rolled_back(struct store *st, void *state) {
  struct pub_state *ps = state;
  (void)st;
  if (ps->q) db_reset(ps->q); /* its answer, if any, is dropped */
  ps->q = NULL;
  ps->pending = 0;
  tl_committed_seq = 0;
}

static void pub_released(struct store *st, void *state, int committed) {
  struct pub_state *ps = state;
  int64_t seq = tl_committed_seq;
  (void)st;
  tl_committed_seq = 0;
  if (committed && seq && ps->hook) ps->hook(ps->hook_arg, seq);
}

static const struct store_participant pub_participant = {
    .name = "publications",
    .begin = pub_begin,
    .before_commit = pub_before_commit,
    .committed = pub_committed,
    .rolled_back = pub_rolled_back,
    .released = pub_released,
    .fini = free,
};

int store_pub_attach(struct store *st) {
  return store_participant_new(st, &pub_participant, sizeof(struct pub_state)) ? 0 : -1;
}

void store_set_pub_hook(struct store *st, void (*fn)(void *arg, int64_t seq), void *arg) {
  struct pub_state *ps = pub_of(st);
  ps->hook = fn;
  ps->hook_arg = arg;
}

int64_t store_pub_pending_locked(struct store_tx *tx) {
  struct store *st = store_tx_store(tx);
  return pub_of(st)->pending;
}

void store_pub_pending_set_locked(struct store_tx *tx, int64_t seq) {
  struct store *st = store_tx_store(tx);
  pub_of(st)->pending = seq;
}
