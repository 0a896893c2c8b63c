/* store_export — the SQL of controld --export / --import: one read snapshot of the
   configuration, and one write transaction that stores it with its ids into an empty database. */
#include "store_export.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chan.h"
#include "clock.h"
#include "log.h"
#include "names.h"
#include "store_core.h"
#include "store_fleet.h"
#include "store_pub.h"
#include "store_sites.h"
#include "store_tokens.h"
#include "token.h"

/* ---- reading ---- */

static enum store_rc read_sites(struct db_conn *c, struct store_export *x) {
  static const char q[] = "SELECT id FROM sites ORDER BY id";
  struct db_stmt *s = db_prep(c, q);
  int64_t *ids = NULL;
  int n = 0;
  enum store_rc rc = STORE_ERROR;
  if (!s) return STORE_ERROR;
  if (store_ids_read(c, s, 0, &ids, &n, "reading the sites") != STORE_OK) return STORE_ERROR;
  x->sites = calloc((size_t)(n ? n : 1), sizeof *x->sites);
  if (!x->sites) goto out;
  for (int i = 0; i < n; i++) {
    if (store_site_load(c, ids[i], &x->sites[i]) != STORE_OK) goto out;
    x->n_sites++;
  }
  rc = STORE_OK;
out:
  free(ids);
  return rc;
}

static enum store_rc read_nodes(struct db_conn *c, struct store_export *x) {
  /* a node has one token (enrolment); ordered so the first is kept if there ever were more */
  static const char q[] = "SELECT n.id, n.name, n.created_at, t.hash FROM nodes n "
                          "JOIN tokens t ON t.node_id = n.id AND t.kind = 'node' "
                          "ORDER BY n.id, t.id";
  struct db_stmt *s = db_prep(c, q);
  int cap = 0, step;
  if (!s) return STORE_ERROR;
  while ((step = db_step(s)) == DB_ROW) {
    struct export_node *na, *r;
    int64_t id = db_col_i64(s, 0);
    if (x->n_nodes > 0 && x->nodes[x->n_nodes - 1].id == id) continue;
    na = store_grow(x->nodes, &cap, x->n_nodes, sizeof *na, 16);
    if (!na) break;
    x->nodes = na;
    r = &x->nodes[x->n_nodes++];
    memset(r, 0, sizeof *r);
    r->id = id;
    store_col_text(s, 1, r->name, sizeof r->name);
    r->created_at = db_col_i64(s, 2);
    store_col_text(s, 3, r->token_hash, sizeof r->token_hash);
  }
  db_reset(s);
  return step == DB_DONE ? STORE_OK : STORE_ERROR;
}

static enum store_rc read_tokens(struct db_conn *c, struct store_export *x) {
  static const char q[] = "SELECT id, name, role, hash, created_at, expires_at FROM tokens "
                          "WHERE kind = 'admin' ORDER BY id";
  struct db_stmt *s = db_prep(c, q);
  int cap = 0, step;
  if (!s) return STORE_ERROR;
  while ((step = db_step(s)) == DB_ROW) {
    struct export_token *na = store_grow(x->tokens, &cap, x->n_tokens, sizeof *na, 16), *r;
    if (!na) break;
    x->tokens = na;
    r = &x->tokens[x->n_tokens++];
    memset(r, 0, sizeof *r);
    r->id = db_col_i64(s, 0);
    store_col_text(s, 1, r->name, sizeof r->name);
    store_col_text(s, 2, r->role, sizeof r->role);
    store_col_text(s, 3, r->hash, sizeof r->hash);
    r->created_at = db_col_i64(s, 4);
    r->expires_at = db_col_i64(s, 5);
  }
  db_reset(s);
  return step == DB_DONE ? STORE_OK : STORE_ERROR;
}

static enum store_rc read_webhooks(struct db_conn *c, struct store_export *x) {
  static const char q[] = "SELECT id, url, secret, events, created_at, kind, name, site_ids, "
                          "config FROM webhooks ORDER BY id";
  struct db_stmt *s = db_prep(c, q);
  int cap = 0, step;
  if (!s) return STORE_ERROR;
  while ((step = db_step(s)) == DB_ROW) {
    struct webhook_rec *na = store_grow(x->webhooks, &cap, x->n_webhooks, sizeof *na, 16), *w;
    const char *ev = db_col_text(s, 3);
    if (!na) break;
    x->webhooks = na;
    w = &x->webhooks[x->n_webhooks];
    memset(w, 0, sizeof *w);
    w->id = db_col_i64(s, 0);
    store_col_text(s, 1, w->url, sizeof w->url);
    store_col_text(s, 2, w->secret, sizeof w->secret);
    w->created_at = db_col_i64(s, 4);
    w->kind = names_value(NAMES(chan_kind_names), db_col_text(s, 5));
    if (w->kind < 0) w->kind = CHAN_WEBHOOK;
    store_col_text(s, 6, w->name, sizeof w->name);
    if ((ev && !(w->events = strdup(ev))) ||
        (db_col_text(s, 7) && !(w->site_ids = strdup(db_col_text(s, 7)))) ||
        (db_col_text(s, 8) && !(w->config = strdup(db_col_text(s, 8))))) {
      webhook_rec_fini(w);
      break;
    }
    x->n_webhooks++;
  }
  db_reset(s);
  return step == DB_DONE ? STORE_OK : STORE_ERROR;
}

static enum store_rc read_pub_seq(struct db_conn *c, struct store_export *x) {
  static const char q[] = "SELECT COALESCE(MAX(seq), 0) FROM publications";
  struct db_stmt *s = db_prep(c, q);
  int step;
  if (!s) return STORE_ERROR;
  step = db_step(s);
  if (step == DB_ROW) x->pub_seq = db_col_i64(s, 0);
  db_reset(s);
  return step == DB_ROW ? STORE_OK : STORE_ERROR;
}

enum store_rc store_export_read(struct store *st, struct store_export *out) {
  static enum store_rc (*const readers[])(struct db_conn *, struct store_export *) = {
      read_pub_seq, read_sites, read_nodes, read_tokens, read_webhooks,
  };
  struct db_conn *c = store_reader(st);
  enum store_rc rc = STORE_OK;
  memset(out, 0, sizeof *out);
  if (!c || store_read_begin(c) < 0) return STORE_ERROR;
  for (size_t i = 0; rc == STORE_OK && i < sizeof readers / sizeof *readers; i++)
    rc = readers[i](c, out);
  store_read_end(c);
  if (rc != STORE_OK) {
    log_error("reading the configuration for an export: %s", db_errmsg(c));
    store_export_fini(out);
  }
  return rc;
}

int store_export_source_missing(const char *target) {
  return db_kind_of(target) == DB_SQLITE && access(target, F_OK) != 0;
}

void store_export_fini(struct store_export *x) {
  for (int i = 0; i < x->n_sites; i++)
    site_rec_fini(&x->sites[i]);
  free(x->sites);
  free(x->site_fleet);
  free(x->nodes);
  free(x->tokens);
  for (int i = 0; i < x->n_webhooks; i++)
    webhook_rec_fini(&x->webhooks[i]);
  free(x->webhooks);
  memset(x, 0, sizeof *x);
}

/* ---- writing ---- */

/* Step an INSERT of the import: STORE_OK, STORE_CONFLICT (what = path) or STORE_ERROR. */
static enum store_rc step_insert(struct store *st, struct db_stmt *q, char *what, size_t whatlen,
                                 const char *path) {
  return store_step_unique(st->w, q, 0, path, what, whatlen, "importing");
}

/* Prepare ins, bind the arguments as store_bind, and step it as step_insert with the path
   "<list>[i]<suffix>". */
static enum store_rc insert_row(struct store *st, const char *ins, char *what, size_t whatlen,
                                const char *list, int i, const char *suffix, const char *types,
                                ...) {
  struct db_stmt *q = db_prep(st->w, ins);
  char path[64];
  va_list ap;
  if (!q) return STORE_ERROR;
  va_start(ap, types);
  store_bindv(q, 1, types, ap);
  va_end(ap);
  snprintf(path, sizeof path, "%s[%d]%s", list, i, suffix);
  return step_insert(st, q, what, whatlen, path);
}

/* STORE_OK when the target holds nothing an import could clash with, else STORE_CONFLICT. */
static enum store_rc check_empty(struct store *st, char *what, size_t whatlen) {
  static const char q[] =
      "SELECT (SELECT COUNT(*) FROM sites), (SELECT COUNT(*) FROM nodes), "
      "(SELECT COUNT(*) FROM webhooks), (SELECT COUNT(*) FROM tokens WHERE NOT "
      "(kind = 'admin' AND COALESCE(name, '') = 'bootstrap')), (SELECT COUNT(*) FROM publications)";
  static const char *const kinds[] = {"sites", "nodes", "webhooks", "tokens", "publications"};
  struct db_stmt *s = db_prep(st->w, q);
  enum store_rc rc = STORE_ERROR;
  if (!s) return STORE_ERROR;
  if (db_step(s) == DB_ROW) {
    rc = STORE_OK;
    for (int i = 0; i < 5 && rc == STORE_OK; i++)
      if (db_col_i64(s, i) > 0) {
        snprintf(what, whatlen, "%s", kinds[i]);
        rc = STORE_CONFLICT;
      }
  }
  db_reset(s);
  return rc;
}

static enum store_rc write_origins(struct store *st, const struct site_rec *s, int si, char *what,
                                   size_t whatlen) {
  for (int i = 0; i < s->n_origins; i++) {
    struct db_stmt *q = store_origin_insert_with_id(st, s->id, &s->origins[i]);
    char path[64];
    enum store_rc rc;
    if (!q) return STORE_ERROR;
    snprintf(path, sizeof path, "sites[%d].origins[%d].id", si, i);
    rc = step_insert(st, q, what, whatlen, path);
    if (rc != STORE_OK) return rc;
  }
  return STORE_OK;
}

/* One site: the row with its id, then its configuration and hostnames through the update the
   API uses, its origins with their ids, the kept level, pin, versions and times, and its fleet
   view flags. */
static enum store_rc write_site(struct store_tx *tx, const struct site_rec *src, unsigned fleet,
                                int si, char *what, size_t whatlen) {
  struct store *st = store_tx_store(tx);
  static const char ins[] =
      "INSERT INTO sites (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)";
  static const char fix[] =
      "UPDATE sites SET current_level = ?, manual_pin = ?, config_version = ?, revision = ?, "
      "created_at = ?, updated_at = ? WHERE id = ?";
  struct site_rec s = *src; /* shallow: the update reads it, the origins stay src's */
  char conflict[48] = "";
  enum store_rc rc = insert_row(st, ins, what, whatlen, "sites", si, "", "ItII", s.id, s.name,
                                s.created_at, s.updated_at);
  if (rc != STORE_OK) return rc;
  rc = store_site_update_locked(tx, &s, 1, conflict, sizeof conflict);
  if (rc == STORE_CONFLICT) snprintf(what, whatlen, "sites[%d].%s", si, conflict);
  if (rc != STORE_OK) return rc;
  rc = write_origins(st, src, si, what, whatlen);
  if (rc != STORE_OK) return rc;
  if (store_exec(st->w, "importing a site's level and versions", fix, "iiIIIII", src->current_level,
                 src->manual_pin, src->config_version, src->revision, src->created_at,
                 src->updated_at, src->id) < 0 ||
      store_fleet_set_locked(tx, src->id, fleet) < 0)
    return STORE_ERROR;
  return STORE_OK;
}

static enum store_rc write_tokens(struct store *st, const struct store_export *x, char *what,
                                  size_t whatlen) {
  static const char ins[] = "INSERT INTO tokens (id, kind, hash, name, role, expires_at, "
                            "created_at) VALUES (?, 'admin', ?, ?, ?, ?, ?)";
  for (int i = 0; i < x->n_tokens; i++) {
    const struct export_token *t = &x->tokens[i];
    enum store_rc rc = insert_row(st, ins, what, whatlen, "tokens", i, "", "ItttPI", t->id, t->hash,
                                  t->name, t->role, t->expires_at, t->created_at);
    if (rc != STORE_OK) return rc;
  }
  return STORE_OK;
}

/* Nodes after the API tokens; their token rows take ids after the API tokens' (explicitly: on
   PostgreSQL an explicit id does not advance the identity a generated one would come from). */
static enum store_rc write_nodes(struct store *st, const struct store_export *x, char *what,
                                 size_t whatlen) {
  static const char ins[] = "INSERT INTO nodes (id, name, created_at) VALUES (?, ?, ?)";
  static const char tok[] =
      "INSERT INTO tokens (id, kind, hash, node_id, created_at) VALUES (?, 'node', ?, ?, ?)";
  int64_t next_id = 1;
  for (int i = 0; i < x->n_tokens; i++)
    if (x->tokens[i].id >= next_id) next_id = x->tokens[i].id + 1;
  for (int i = 0; i < x->n_nodes; i++) {
    const struct export_node *n = &x->nodes[i];
    enum store_rc rc =
        insert_row(st, ins, what, whatlen, "nodes", i, "", "ItI", n->id, n->name, n->created_at);
    if (rc != STORE_OK) return rc;
    rc = insert_row(st, tok, what, whatlen, "nodes", i, ".token_sha256", "ItII", next_id++,
                    n->token_hash, n->id, n->created_at);
    if (rc != STORE_OK) return rc;
  }
  return STORE_OK;
}

static enum store_rc write_webhooks(struct store *st, const struct store_export *x, char *what,
                                    size_t whatlen) {
  static const char ins[] =
      "INSERT INTO webhooks (id, url, secret, events, created_at, kind, name, site_ids, config) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
  for (int i = 0; i < x->n_webhooks; i++) {
    const struct webhook_rec *w = &x->webhooks[i];
    enum store_rc rc =
        insert_row(st, ins, what, whatlen, "webhooks", i, "", "ItttItttt", w->id, w->url, w->secret,
                   w->events, w->created_at, names_word(NAMES(chan_kind_names), w->kind, "webhook"),
                   w->name, w->site_ids, w->config);
    if (rc != STORE_OK) return rc;
  }
  return STORE_OK;
}

/* Replace the publications the site writes recorded by one per site numbered from pub_seq + 1:
   a node holding any seq of the source lies before the kept history and takes the full set. */
static enum store_rc renumber_publications(struct store_tx *tx, const struct store_export *x) {
  struct store *st = store_tx_store(tx);
  static const char del[] = "DELETE FROM publications";
  static const char ins[] =
      "INSERT INTO publications (seq, site_id, config_version, deleted, reason, created_at) "
      "VALUES (?, ?, ?, 0, 'imported', ?)";
  struct db_stmt *q = db_prep(st->w, del);
  int64_t now = clock_wall_ms();
  if (!q || store_step_done(st->w, q, "clearing publications") < 0) return STORE_ERROR;
  store_pub_pending_set_locked(tx, 0);
  for (int i = 0; i < x->n_sites; i++) {
    if (store_exec(st->w, "recording an imported publication", ins, "IIII",
                   (int64_t)(x->pub_seq + 1 + i), x->sites[i].id, x->sites[i].config_version,
                   now) < 0)
      return STORE_ERROR;
    store_pub_pending_set_locked(tx, x->pub_seq + 1 + i);
  }
  return STORE_OK;
}

/* PostgreSQL: an explicit id does not advance the identity the next generated id comes from, so
   each identity the import wrote moves past the largest id (SQLite takes MAX + 1 by itself, and
   AUTOINCREMENT's record follows explicit rowids). */
static enum store_rc advance_identities(struct store *st) {
  static const char *const sql[] = {
      "SELECT setval(pg_get_serial_sequence('sites', 'id'), "
      "(SELECT COALESCE(MAX(id), 0) + 1 FROM sites), false)",
      "SELECT setval(pg_get_serial_sequence('origins', 'id'), "
      "(SELECT COALESCE(MAX(id), 0) + 1 FROM origins), false)",
      "SELECT setval(pg_get_serial_sequence('nodes', 'id'), "
      "(SELECT COALESCE(MAX(id), 0) + 1 FROM nodes), false)",
      "SELECT setval(pg_get_serial_sequence('tokens', 'id'), "
      "(SELECT COALESCE(MAX(id), 0) + 1 FROM tokens), false)",
      "SELECT setval(pg_get_serial_sequence('webhooks', 'id'), "
      "(SELECT COALESCE(MAX(id), 0) + 1 FROM webhooks), false)",
      "SELECT setval(pg_get_serial_sequence('publications', 'seq'), "
      "(SELECT COALESCE(MAX(seq), 0) + 1 FROM publications), false)",
  };
  if (db_kind(st->w) != DB_PG) return STORE_OK;
  for (size_t i = 0; i < sizeof sql / sizeof *sql; i++)
    if (store_exec(st->w, "moving an identity past the imported ids", sql[i], "") < 0)
      return STORE_ERROR;
  return STORE_OK;
}

static enum store_rc write_all(struct store_tx *tx, const struct store_export *x, char *what,
                               size_t whatlen) {
  struct store *st = store_tx_store(tx);
  static const char drop_bootstrap[] =
      "DELETE FROM tokens WHERE kind = 'admin' AND name = '" STORE_TOKEN_BOOTSTRAP "'";
  struct db_stmt *q;
  enum store_rc rc = check_empty(st, what, whatlen);
  if (rc != STORE_OK) return rc;
  if (!(q = db_prep(st->w, drop_bootstrap)) ||
      store_step_done(st->w, q, "replacing the bootstrap token") < 0)
    return STORE_ERROR;
  store_tokens_removed_locked(tx);
  for (int i = 0; i < x->n_sites; i++)
    if ((rc = write_site(tx, &x->sites[i], x->site_fleet ? x->site_fleet[i] : 0, i, what,
                         whatlen)) != STORE_OK)
      return rc;
  if ((rc = write_tokens(st, x, what, whatlen)) != STORE_OK) return rc;
  if ((rc = write_nodes(st, x, what, whatlen)) != STORE_OK) return rc;
  if ((rc = write_webhooks(st, x, what, whatlen)) != STORE_OK) return rc;
  if ((rc = renumber_publications(tx, x)) != STORE_OK) return rc;
  return advance_identities(st);
}

enum store_rc store_export_write(struct store *st, const struct store_export *x, char *what,
                                 size_t whatlen) {
  if (whatlen) what[0] = '\0';
  struct store_tx *tx = store_tx_begin(st);
  if (!tx) return STORE_ERROR;
  return store_tx_end(tx, write_all(tx, x, what, whatlen));
}
