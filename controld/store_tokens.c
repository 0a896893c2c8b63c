/* store_tokens — API tokens, the bootstrap token, token lookups and their cache (see
   store_tokens.h). */
#include "store_tokens.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "store_core.h"

/* The tokens feature's state: the cache of tokens seen valid, by hash (cleared whenever a token
   may have been removed), and whether the open transaction removed any (under the writer lock). */
struct tokens_state {
  pthread_mutex_t mu;
  struct token_cache_entry {
    char hash[65];
    int64_t cached_ms; /* monotonic: an entry is trusted for STORE_TOKEN_CACHE_MS */
    struct token_auth auth;
  } * cache;
  int n, cap;
  uint64_t gen;      /* bumped by every clear (under mu) */
  int clear_pending; /* the open transaction removed tokens: clear the cache on commit */
};

static const struct store_participant tokens_participant;

static struct tokens_state *tokens_of(struct store *st) {
  return store_participant_state(st, &tokens_participant);
}

/* ---- cache of tokens seen valid ---- */

void store_token_cache_clear(struct store *st) {
  struct tokens_state *ts = tokens_of(st);
  pthread_mutex_lock(&ts->mu);
  ts->n = 0;
  ts->gen++; /* a lookup that read the database before this clear must not cache its answer */
  pthread_mutex_unlock(&ts->mu);
}

/* A fresh cached entry for hash: 0 = hit (*out filled). On a miss *gen is the cache generation
   to hand to token_cache_put. */
static int token_cache_get(struct store *st, const char *hash, struct token_auth *out,
                           uint64_t *gen) {
  struct tokens_state *ts = tokens_of(st);
  int hit = -1;
  int64_t mono = clock_mono_ms();
  pthread_mutex_lock(&ts->mu);
  *gen = ts->gen;
  for (int i = 0; i < ts->n; i++)
    if (strcmp(ts->cache[i].hash, hash) == 0) {
      if (mono - ts->cache[i].cached_ms < STORE_TOKEN_CACHE_MS) {
        *out = ts->cache[i].auth;
        hit = 0;
      } else {
        ts->cache[i] = ts->cache[--ts->n]; /* stale: ask the database again */
      }
      break;
    }
  pthread_mutex_unlock(&ts->mu);
  return hit;
}

/* Remember a valid token read from the database at cache generation gen (bounded: a full cache
   starts over). Nothing is cached when a clear happened since gen: the database read may predate
   a revocation. */
static void token_cache_put(struct store *st, const char *hash, const struct token_auth *a,
                            uint64_t gen) {
  struct tokens_state *ts = tokens_of(st);
  pthread_mutex_lock(&ts->mu);
  if (gen != ts->gen) {
    pthread_mutex_unlock(&ts->mu);
    return;
  }
  if (ts->n == ts->cap) {
    int ncap = ts->cap ? ts->cap * 2 : 64;
    struct token_cache_entry *n =
        ncap <= 65536 ? realloc(ts->cache, (size_t)ncap * sizeof *n) : NULL;
    if (n) {
      ts->cache = n;
      ts->cap = ncap;
    } else {
      ts->n = 0;
    }
  }
  if (ts->n < ts->cap) {
    struct token_cache_entry *e = &ts->cache[ts->n++];
    memcpy(e->hash, hash, 64);
    e->hash[64] = '\0';
    e->cached_ms = clock_mono_ms();
    e->auth = *a;
  }
  pthread_mutex_unlock(&ts->mu);
}

/* ---- lookups ---- */

int store_token_auth(struct store *st, const char *hash, int64_t now, struct token_auth *out) {
  static const char sql[] =
      "SELECT id, kind, node_id, name, role, expires_at FROM tokens WHERE hash = ?";
  struct db_conn *c;
  struct db_stmt *s;
  int rc, cacheable = strlen(hash) == 64 && atomic_load(&st->caches_on);
  uint64_t gen = 0;
  memset(out, 0, sizeof *out);
  if (cacheable && token_cache_get(st, hash, out, &gen) == 0)
    return out->expires_at && out->expires_at <= now ? 1 : 0;
  c = store_reader(st);
  s = c ? db_prep(c, sql) : NULL;
  if (!s) return -1;
  db_bind_text(s, 1, hash);
  rc = db_step(s);
  if (rc != DB_ROW) {
    db_reset(s);
    if (rc == DB_DONE) return 1;
    log_error("looking up a token: %s", db_errmsg(c));
    return -1;
  }
  {
    const char *k = db_col_text(s, 1);
    out->token_id = db_col_i64(s, 0);
    out->kind = (k && strcmp(k, "admin") == 0) ? STORE_TOKEN_ADMIN : STORE_TOKEN_NODE;
    out->node_id = db_col_i64(s, 2);
    store_col_text(s, 3, out->name, sizeof out->name);
    store_col_text(s, 4, out->role, sizeof out->role);
    out->expires_at = db_col_i64(s, 5);
  }
  db_reset(s);
  /* an admin row from before roles (none is expected after migration 4) is an admin */
  if (out->kind == STORE_TOKEN_ADMIN && !out->role[0]) memcpy(out->role, "admin", 6);
  if (cacheable) token_cache_put(st, hash, out, gen);
  return out->expires_at && out->expires_at <= now ? 1 : 0;
}

int store_token_lookup(struct store *st, const char *hash, int *kind, int64_t *node_id) {
  struct token_auth a;
  int rc = store_token_auth(st, hash, clock_wall_ms(), &a);
  if (rc == 0) {
    *kind = a.kind;
    *node_id = a.node_id;
  }
  return rc;
}

/* ---- writes ---- */

int store_admin_token_set(struct store *st, const char *hash) {
  struct tokens_state *ts = tokens_of(st);
  /* only the earlier bootstrap token goes: tokens made through the API stay */
  static const char del[] =
      "DELETE FROM tokens WHERE kind = 'admin' AND name = '" STORE_TOKEN_BOOTSTRAP
      "' AND hash <> ?";
  static const char ins[] =
      "INSERT INTO tokens (kind, hash, name, role, created_at) "
      "VALUES ('admin', ?, '" STORE_TOKEN_BOOTSTRAP "', 'admin', ?) "
      "ON CONFLICT (hash) DO UPDATE SET name = excluded.name, role = 'admin', expires_at = NULL "
      "WHERE tokens.kind = 'admin'";
  struct db_stmt *s;
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return -1;
  s = db_prep(st->w, del);
  if (!s) goto fail;
  db_bind_text(s, 1, hash);
  if (store_step_done(st->w, s, "removing the old bootstrap token") < 0) goto fail;
  s = db_prep(st->w, ins);
  if (!s) goto fail;
  db_bind_text(s, 1, hash);
  db_bind_i64(s, 2, clock_wall_ms());
  if (store_step_done(st->w, s, "storing the bootstrap token") < 0) goto fail;
  ts->clear_pending = 1; /* other replicas clear their token caches too */
  if (store_tx_commit(tx) < 0) return -1;
  store_token_cache_clear(st); /* after the commit: no lookup can re-cache a removed token */
  return 0;
fail:
  store_tx_rollback(tx);
  return -1;
}

int store_admin_token_ensure(struct store *st, const char *hash) {
  /* ON CONFLICT DO NOTHING: a hash already stored, or the name taken (tokens_api_name) */
  static const char ins[] =
      "INSERT INTO tokens (kind, hash, name, role, created_at) "
      "VALUES ('admin', ?, '" STORE_TOKEN_BOOTSTRAP "', 'admin', ?) ON CONFLICT DO NOTHING";
  static const char ins_named[] =
      "INSERT INTO tokens (kind, hash, name, role, created_at) "
      "VALUES ('admin', ?1, '" STORE_TOKEN_BOOTSTRAP "-' || substr(?1, 1, 12), 'admin', ?2) "
      "ON CONFLICT DO NOTHING";
  static const char has[] = "SELECT 1 FROM tokens WHERE hash = ? AND kind = 'admin'";
  const char *const steps[] = {ins, ins_named};
  struct db_stmt *s;
  int found = 0;
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return -1;
  for (size_t i = 0; i < sizeof steps / sizeof *steps && !found; i++) {
    s = db_prep(st->w, steps[i]);
    if (!s) goto fail;
    db_bind_text(s, 1, hash);
    db_bind_i64(s, 2, clock_wall_ms());
    if (store_step_done(st->w, s, "storing the admin token") < 0) goto fail;
    s = db_prep(st->w, has);
    if (!s) goto fail;
    db_bind_text(s, 1, hash);
    found = db_step(s) == DB_ROW;
    db_reset(s);
  }
  if (!found) {
    log_error("the admin token could not be stored (its hash belongs to a node token?)");
    goto fail;
  }
  return store_tx_commit(tx);
fail:
  store_tx_rollback(tx);
  return -1;
}

enum store_rc store_token_create_locked(struct store_tx *tx, struct token_rec *t,
                                        const char *hash) {
  struct store *st = store_tx_store(tx);
  static const char ins[] = "INSERT INTO tokens (kind, hash, name, role, expires_at, created_at) "
                            "VALUES ('admin', ?, ?, ?, ?, ?)";
  enum store_rc rc = store_room_locked(tx, "SELECT COUNT(*) FROM tokens WHERE kind = 'admin'",
                                       STORE_MAX_TOKENS, "counting tokens", "");
  struct db_stmt *s = rc == STORE_OK ? db_prep(st->w, ins) : NULL;
  int64_t now = clock_wall_ms();
  if (rc != STORE_OK) return rc;
  if (!s) return STORE_ERROR;
  db_bind_text(s, 1, hash);
  db_bind_text(s, 2, t->name);
  db_bind_text(s, 3, t->role);
  if (t->expires_at > 0)
    db_bind_i64(s, 4, t->expires_at);
  else
    db_bind_null(s, 4);
  db_bind_i64(s, 5, now);
  if (db_step(s) != DB_DONE) {
    enum db_err e = db_err(st->w);
    db_reset(s);
    if (e == DB_E_UNIQUE) return STORE_CONFLICT;
    log_error("inserting token: %s", db_errmsg(st->w));
    return STORE_ERROR;
  }
  db_reset(s);
  t->id = db_last_id(st->w);
  t->created_at = now;
  return STORE_OK;
}

struct create_arg {
  struct token_rec *t;
  const char *hash;
};

static enum store_rc create_fn(struct store_tx *tx, void *arg) {
  struct create_arg *a = arg;
  return store_token_create_locked(tx, a->t, a->hash);
}

enum store_rc store_token_create(struct store *st, struct token_rec *t, const char *hash) {
  struct create_arg a = {t, hash};
  return store_op(st, create_fn, &a);
}

#define M(m) .offset = offsetof(struct token_rec, m), .size = sizeof(((struct token_rec *)0)->m)
/* The columns of an API token as the list reads them. */
static const struct field_def token_fields[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, M(id)},
    {.name = "name", .column = "name", .type = FIELD_STR, M(name)},
    {.name = "role", .column = "role", .type = FIELD_STR, M(role)},
    {.name = "created_at", .column = "created_at", .type = FIELD_INT, M(created_at)},
    {.name = "expires_at", .column = "expires_at", .type = FIELD_INT, M(expires_at)},
    {.name = NULL},
};
#undef M

enum store_rc store_token_list(struct store *st, int64_t now, struct token_rec **out, int *n) {
  static struct store_sql q;
  return store_select(st, &q, token_fields,
                      " FROM tokens WHERE kind = 'admin' "
                      "AND (expires_at IS NULL OR expires_at > ?) ORDER BY id",
                      sizeof **out, 0, (void **)out, n, "listing tokens", "I", now);
}

enum store_rc store_token_delete_locked(struct store_tx *tx, int64_t id) {
  struct store *st = store_tx_store(tx);
  struct tokens_state *ts = tokens_of(st);
  static const char del[] = "DELETE FROM tokens WHERE id = ? AND kind = 'admin'";
  struct db_stmt *s = db_prep(st->w, del);
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  if (store_step_done(st->w, s, "deleting token") < 0) return STORE_ERROR;
  if (db_changes(st->w) == 0) return STORE_NOT_FOUND;
  ts->clear_pending = 1; /* the token cache is cleared once this commits */
  return STORE_OK;
}

static enum store_rc delete_fn(struct store_tx *tx, void *arg) {
  return store_token_delete_locked(tx, *(int64_t *)arg);
}

enum store_rc store_token_delete(struct store *st, int64_t id) {
  return store_op(st, delete_fn, &id);
}

enum store_rc store_token_get(struct store *st, int64_t id, struct token_rec *out) {
  static const char q[] = "SELECT id, name, role, created_at, expires_at FROM tokens "
                          "WHERE id = ? AND kind = 'admin'";
  struct db_conn *c = store_reader(st);
  struct db_stmt *s = c ? db_prep(c, q) : NULL;
  int rc;
  memset(out, 0, sizeof *out);
  if (!s) return STORE_ERROR;
  db_bind_i64(s, 1, id);
  rc = db_step(s);
  if (rc == DB_ROW) {
    out->id = db_col_i64(s, 0);
    store_col_text(s, 1, out->name, sizeof out->name);
    store_col_text(s, 2, out->role, sizeof out->role);
    out->created_at = db_col_i64(s, 3);
    out->expires_at = db_col_i64(s, 4);
  }
  db_reset(s);
  if (rc == DB_ROW) return STORE_OK;
  if (rc == DB_DONE) return STORE_NOT_FOUND;
  log_error("reading token %lld: %s", (long long)id, db_errmsg(c));
  return STORE_ERROR;
}

/* ---- tokens ---- */

int store_token_put(struct store *st, int kind, const char *hash, int64_t node_id) {
  static const char sql[] =
      "INSERT INTO tokens (kind, hash, node_id, created_at) VALUES (?, ?, ?, ?) "
      "ON CONFLICT (hash) DO NOTHING";
  struct db_stmt *s;
  int rc = -1;
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return -1;
  s = db_prep(st->w, sql);
  if (!s) goto out;
  db_bind_text(s, 1, kind == STORE_TOKEN_ADMIN ? "admin" : "node");
  db_bind_text(s, 2, hash);
  if (node_id) db_bind_i64(s, 3, node_id);
  db_bind_i64(s, 4, clock_wall_ms());
  rc = store_step_done(st->w, s, "storing token");
out:
  if (rc == 0) return store_tx_commit(tx);
  store_tx_rollback(tx);
  return -1;
}

/* store_token_cache_clear, store_token_lookup, store_admin_token_set: store_tokens.c */

/* ---- the transaction participant ---- */

static void tokens_committed(struct store *st, void *state) {
  struct tokens_state *ts = state;
  /* after the commit and before the writer lock goes: no lookup can re-cache a removed token */
  if (ts->clear_pending) store_token_cache_clear(st);
  ts->clear_pending = 0;
}

static void tokens_rolled_back(struct store *st, void *state) {
  struct tokens_state *ts = state;
  (void)st;
  ts->clear_pending = 0;
}

static void tokens_fini(void *state) {
  struct tokens_state *ts = state;
  pthread_mutex_destroy(&ts->mu);
  free(ts->cache);
  free(ts);
}

static const struct store_participant tokens_participant = {
    .name = "tokens",
    .committed = tokens_committed,
    .rolled_back = tokens_rolled_back,
    .fini = tokens_fini,
};

int store_tokens_attach(struct store *st) {
  struct tokens_state *ts = store_participant_new(st, &tokens_participant, sizeof *ts);
  if (!ts) return -1;
  pthread_mutex_init(&ts->mu, NULL); /* at open: no other thread uses st yet */
  return 0;
}

void store_tokens_removed_locked(struct store_tx *tx) {
  struct store *st = store_tx_store(tx);
  tokens_of(st)->clear_pending = 1;
}

int store_tokens_removed_pending(struct store *st) {
  return tokens_of(st)->clear_pending;
}
