/* store_signal — NOTIFY inside transactions, the caches notifications invalidate, and the
   listening connection (see store_signal.h, signals.h). */
#include "store_signal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "sigmsg.h"
#include "store_core.h"
#include "store_events.h"
#include "store_pub.h"
#include "store_tokens.h"

struct store_listener {
  struct db_conn *c;
};

int store_cluster_mode(struct store *st) {
  return db_kind(st->w) == DB_PG;
}

void store_caches_set(struct store *st, int on) {
  if (atomic_exchange(&st->caches_on, on ? 1 : 0) != (on ? 1 : 0)) {
    /* both ways: entries cached before a gap must not survive it */
    store_token_cache_clear(st);
    atomic_fetch_add(&st->generation, 1);
  }
}

int store_caches_on(struct store *st) {
  return atomic_load(&st->caches_on);
}

void store_caches_clear_tokens(struct store *st) {
  store_token_cache_clear(st);
}

void store_gen_observe(struct store *st, int64_t gen) {
  int64_t seen = atomic_load(&st->cluster_gen);
  while (gen > seen) {
    if (atomic_compare_exchange_weak(&st->cluster_gen, &seen, gen)) {
      atomic_fetch_add(&st->generation, 1);
      return;
    }
  }
}

int store_signal_locked(struct store_tx *tx, const char *channel, const char *payload) {
  struct store *st = store_tx_store(tx);
  static const char sql[] = "SELECT pg_notify(?, ?)";
  struct db_stmt *s;
  if (db_kind(st->w) != DB_PG) return 0;
  s = db_prep(st->w, sql);
  if (!s) return -1;
  db_bind_text(s, 1, channel);
  db_bind_text(s, 2, payload);
  return store_defer(st->w, s, "sending a notification");
}

static int store_signal_commit_locked(struct store_tx *tx) {
  struct store *st = store_tx_store(tx);
  char payload[SIGNAL_PAYLOAD_MAX];
  if (db_kind(st->w) != DB_PG) return 0;
  if (st->tx_gen > 0) {
    int64_t seq = store_pub_pending_locked(tx) > 0 ? store_pub_pending_locked(tx) : 0;
    if (sigmsg_pub_format(payload, sizeof payload, seq, st->tx_gen) < 0 ||
        store_signal_locked(tx, sigmsg_channel(SIGNAL_PUB), payload) < 0)
      return -1;
  }
  if (store_tokens_removed_pending(st) &&
      store_signal_locked(tx, sigmsg_channel(SIGNAL_INVAL), "tokens") < 0)
    return -1;
  if (store_events_pending_locked(tx) &&
      store_signal_locked(tx, sigmsg_channel(SIGNAL_INVAL), "events") < 0)
    return -1;
  return 0;
}

struct store_listener *store_listener_open(struct store *st) {
  struct store_listener *l;
  if (db_kind(st->w) != DB_PG) return NULL;
  l = calloc(1, sizeof *l);
  if (!l) return NULL;
  l->c = db_open(st->path);
  if (!l->c) {
    free(l);
    return NULL;
  }
  return l;
}

void store_listener_close(struct store_listener **lp) {
  struct store_listener *l = *lp;
  if (!l) return;
  db_close(l->c);
  free(l);
  *lp = NULL;
}

int store_listener_listen(struct store_listener *l, const char *channel) {
  return db_listen(l->c, channel);
}

int store_listener_wait(struct store_listener *l, int timeout_ms, char *channel, size_t chcap,
                        char *payload, size_t plcap) {
  return db_wait_notify(l->c, timeout_ms, channel, chcap, payload, plcap);
}

int store_listener_state(struct store_listener *l, int64_t *seq, int64_t *gen) {
  static const char sql[] = "SELECT (SELECT COALESCE(MAX(seq), 0) FROM publications),"
                            " (SELECT COALESCE(MAX(gen), 0) FROM cdnca_meta WHERE id = 1)";
  struct db_stmt *s;
  int rc = -1;
  /* a lost listening connection must not be re-established behind the caller's back: it would
     come back without its LISTENs */
  if (!db_up(l->c)) return -1;
  s = db_prep(l->c, sql);
  if (!s) return -1;
  if (db_step(s) == DB_ROW) {
    *seq = db_col_i64(s, 0);
    *gen = db_col_i64(s, 1);
    rc = 0;
  }
  db_reset(s);
  return rc;
}

const char *store_listener_errmsg(struct store_listener *l) {
  return db_errmsg(l->c);
}

/* ---- the transaction participant ---- */

static int signal_before_commit(struct store_tx *tx, void *state) {
  (void)state;
  return store_signal_commit_locked(tx);
}

static void signal_committed(struct store *st, void *state) {
  (void)state;
  if (st->tx_gen > 0) store_gen_observe(st, st->tx_gen);
}

static const struct store_participant signal_participant = {
    .name = "signals",
    .before_commit = signal_before_commit,
    .committed = signal_committed,
};

int store_signal_attach(struct store *st) {
  return store_participant_add(st, &signal_participant, NULL);
}
