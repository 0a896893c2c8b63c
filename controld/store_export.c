/* store_export — the SQL of controld --export / --import: one read snapshot of the
   configuration, and one write transaction that stores it with its ids into an empty database. */
#include "store_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "store_int.h"
#include "token.h"

/* ---- reading ---- */

static enum store_rc read_sites(struct dbconn *c, struct store_export *x) {
  static const char q[] = "SELECT id FROM sites ORDER BY id";
  sqlite3_stmt *s = store_stmt(c, q);
  int64_t *ids = NULL;
  int n = 0, cap = 0, step;
  enum store_rc rc = STORE_ERROR;
  if (!s) return STORE_ERROR;
  while ((step = sqlite3_step(s)) == SQLITE_ROW) {
    int64_t *na = store_grow(ids, &cap, n, sizeof *ids, 64);
    if (!na) break;
    ids = na;
    ids[n++] = sqlite3_column_int64(s, 0);
  }
  sqlite3_reset(s);
  if (step != SQLITE_DONE) goto out;
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

static enum store_rc read_nodes(struct dbconn *c, struct store_export *x) {
  /* a node has one token (enrolment); ordered so the first is kept if there ever were more */
  static const char q[] = "SELECT n.id, n.name, n.created_at, t.hash FROM nodes n "
                          "JOIN tokens t ON t.node_id = n.id AND t.kind = 'node' "
                          "ORDER BY n.id, t.id";
  sqlite3_stmt *s = store_stmt(c, q);
  int cap = 0, step;
  if (!s) return STORE_ERROR;
  while ((step = sqlite3_step(s)) == SQLITE_ROW) {
    struct export_node *na, *r;
    int64_t id = sqlite3_column_int64(s, 0);
    if (x->n_nodes > 0 && x->nodes[x->n_nodes - 1].id == id) continue;
    na = store_grow(x->nodes, &cap, x->n_nodes, sizeof *na, 16);
    if (!na) break;
    x->nodes = na;
    r = &x->nodes[x->n_nodes++];
    memset(r, 0, sizeof *r);
    r->id = id;
    store_col_text(s, 1, r->name, sizeof r->name);
    r->created_at = sqlite3_column_int64(s, 2);
    store_col_text(s, 3, r->token_hash, sizeof r->token_hash);
  }
  sqlite3_reset(s);
  return step == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

static enum store_rc read_tokens(struct dbconn *c, struct store_export *x) {
  static const char q[] = "SELECT id, name, role, hash, created_at, expires_at FROM tokens "
                          "WHERE kind = 'admin' ORDER BY id";
  sqlite3_stmt *s = store_stmt(c, q);
  int cap = 0, step;
  if (!s) return STORE_ERROR;
  while ((step = sqlite3_step(s)) == SQLITE_ROW) {
    struct export_token *na = store_grow(x->tokens, &cap, x->n_tokens, sizeof *na, 16), *r;
    if (!na) break;
    x->tokens = na;
    r = &x->tokens[x->n_tokens++];
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(s, 0);
    store_col_text(s, 1, r->name, sizeof r->name);
    store_col_text(s, 2, r->role, sizeof r->role);
    store_col_text(s, 3, r->hash, sizeof r->hash);
    r->created_at = sqlite3_column_int64(s, 4);
    r->expires_at = sqlite3_column_int64(s, 5);
  }
  sqlite3_reset(s);
  return step == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

static enum store_rc read_webhooks(struct dbconn *c, struct store_export *x) {
  static const char q[] = "SELECT id, url, secret, events, created_at FROM webhooks ORDER BY id";
  sqlite3_stmt *s = store_stmt(c, q);
  int cap = 0, step;
  if (!s) return STORE_ERROR;
  while ((step = sqlite3_step(s)) == SQLITE_ROW) {
    struct webhook_rec *na = store_grow(x->webhooks, &cap, x->n_webhooks, sizeof *na, 16), *w;
    const unsigned char *ev = sqlite3_column_text(s, 3);
    if (!na) break;
    x->webhooks = na;
    w = &x->webhooks[x->n_webhooks];
    memset(w, 0, sizeof *w);
    w->id = sqlite3_column_int64(s, 0);
    store_col_text(s, 1, w->url, sizeof w->url);
    store_col_text(s, 2, w->secret, sizeof w->secret);
    w->created_at = sqlite3_column_int64(s, 4);
    if (ev && !(w->events = strdup((const char *)ev))) break;
    x->n_webhooks++;
  }
  sqlite3_reset(s);
  return step == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

static enum store_rc read_pub_seq(struct dbconn *c, struct store_export *x) {
  static const char q[] = "SELECT COALESCE(MAX(seq), 0) FROM publications";
  sqlite3_stmt *s = store_stmt(c, q);
  int step;
  if (!s) return STORE_ERROR;
  step = sqlite3_step(s);
  if (step == SQLITE_ROW) x->pub_seq = sqlite3_column_int64(s, 0);
  sqlite3_reset(s);
  return step == SQLITE_ROW ? STORE_OK : STORE_ERROR;
}

enum store_rc store_export_read(struct store *st, struct store_export *out) {
  static enum store_rc (*const readers[])(struct dbconn *, struct store_export *) = {
      read_pub_seq, read_sites, read_nodes, read_tokens, read_webhooks,
  };
  struct dbconn *c = store_reader(st);
  enum store_rc rc = STORE_OK;
  memset(out, 0, sizeof *out);
  if (!c || store_read_begin(c) < 0) return STORE_ERROR;
  for (size_t i = 0; rc == STORE_OK && i < sizeof readers / sizeof *readers; i++)
    rc = readers[i](c, out);
  store_read_end(c);
  if (rc != STORE_OK) {
    log_error("reading the configuration for an export: %s", sqlite3_errmsg(c->db));
    store_export_fini(out);
  }
  return rc;
}

void store_export_fini(struct store_export *x) {
  for (int i = 0; i < x->n_sites; i++)
    site_rec_fini(&x->sites[i]);
  free(x->sites);
  free(x->nodes);
  free(x->tokens);
  for (int i = 0; i < x->n_webhooks; i++)
    webhook_rec_fini(&x->webhooks[i]);
  free(x->webhooks);
  memset(x, 0, sizeof *x);
}

/* ---- writing ---- */

/* Is the writer's last failure a UNIQUE or PRIMARY KEY clash? */
static int unique_clash(struct store *st) {
  int e = sqlite3_extended_errcode(st->w.db);
  return e == SQLITE_CONSTRAINT_UNIQUE || e == SQLITE_CONSTRAINT_PRIMARYKEY;
}

/* Step an INSERT of the import: STORE_OK, STORE_CONFLICT (what = path) or STORE_ERROR. */
static enum store_rc step_insert(struct store *st, sqlite3_stmt *q, char *what, size_t whatlen,
                                 const char *path) {
  enum store_rc rc = STORE_OK;
  if (sqlite3_step(q) != SQLITE_DONE) {
    st->w.last_err = sqlite3_errcode(st->w.db) & 0xff;
    if (unique_clash(st)) {
      snprintf(what, whatlen, "%s", path);
      rc = STORE_CONFLICT;
    } else {
      log_error("importing %s: %s", path, sqlite3_errmsg(st->w.db));
      rc = STORE_ERROR;
    }
  }
  sqlite3_reset(q);
  return rc;
}

/* STORE_OK when the target holds nothing an import could clash with, else STORE_CONFLICT. */
static enum store_rc check_empty(struct store *st, char *what, size_t whatlen) {
  static const char q[] =
      "SELECT (SELECT COUNT(*) FROM sites), (SELECT COUNT(*) FROM nodes), "
      "(SELECT COUNT(*) FROM webhooks), (SELECT COUNT(*) FROM tokens WHERE NOT "
      "(kind = 'admin' AND COALESCE(name, '') = 'bootstrap')), (SELECT COUNT(*) FROM publications)";
  static const char *const kinds[] = {"sites", "nodes", "webhooks", "tokens", "publications"};
  sqlite3_stmt *s = store_stmt(&st->w, q);
  enum store_rc rc = STORE_ERROR;
  if (!s) return STORE_ERROR;
  if (sqlite3_step(s) == SQLITE_ROW) {
    rc = STORE_OK;
    for (int i = 0; i < 5 && rc == STORE_OK; i++)
      if (sqlite3_column_int64(s, i) > 0) {
        snprintf(what, whatlen, "%s", kinds[i]);
        rc = STORE_CONFLICT;
      }
  }
  sqlite3_reset(s);
  return rc;
}

static enum store_rc write_origins(struct store *st, const struct site_rec *s, int si, char *what,
                                   size_t whatlen) {
  static const char ins[] =
      "INSERT INTO origins (id, site_id, level, address, port, scheme, host_header, weight, "
      "enabled, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
  for (int i = 0; i < s->n_origins; i++) {
    const struct origin_rec *o = &s->origins[i];
    sqlite3_stmt *q = store_stmt(&st->w, ins);
    char path[64];
    enum store_rc rc;
    if (!q) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, o->id);
    sqlite3_bind_int64(q, 2, s->id);
    sqlite3_bind_int(q, 3, o->level);
    sqlite3_bind_text(q, 4, o->address, -1, SQLITE_STATIC);
    sqlite3_bind_int(q, 5, o->port);
    sqlite3_bind_text(q, 6, o->scheme, -1, SQLITE_STATIC);
    if (o->host_header[0])
      sqlite3_bind_text(q, 7, o->host_header, -1, SQLITE_STATIC);
    else
      sqlite3_bind_null(q, 7);
    sqlite3_bind_int(q, 8, o->weight);
    sqlite3_bind_int(q, 9, o->enabled);
    sqlite3_bind_int64(q, 10, o->created_at);
    snprintf(path, sizeof path, "sites[%d].origins[%d].id", si, i);
    rc = step_insert(st, q, what, whatlen, path);
    if (rc != STORE_OK) return rc;
  }
  return STORE_OK;
}

/* One site: the row with its id, then its configuration and hostnames through the update the
   API uses, its origins with their ids, and the kept level, pin, versions and times. */
static enum store_rc write_site(struct store *st, const struct site_rec *src, int si, char *what,
                                size_t whatlen) {
  static const char ins[] =
      "INSERT INTO sites (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)";
  static const char fix[] =
      "UPDATE sites SET current_level = ?, manual_pin = ?, config_version = ?, revision = ?, "
      "created_at = ?, updated_at = ? WHERE id = ?";
  struct site_rec s = *src; /* shallow: the update reads it, the origins stay src's */
  char path[64], conflict[48] = "";
  sqlite3_stmt *q = store_stmt(&st->w, ins);
  enum store_rc rc;
  if (!q) return STORE_ERROR;
  sqlite3_bind_int64(q, 1, s.id);
  sqlite3_bind_text(q, 2, s.name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(q, 3, s.created_at);
  sqlite3_bind_int64(q, 4, s.updated_at);
  snprintf(path, sizeof path, "sites[%d]", si);
  rc = step_insert(st, q, what, whatlen, path);
  if (rc != STORE_OK) return rc;
  rc = store_site_update_locked(st, &s, conflict, sizeof conflict);
  if (rc == STORE_CONFLICT) snprintf(what, whatlen, "sites[%d].%s", si, conflict);
  if (rc != STORE_OK) return rc;
  rc = write_origins(st, src, si, what, whatlen);
  if (rc != STORE_OK) return rc;
  q = store_stmt(&st->w, fix);
  if (!q) return STORE_ERROR;
  sqlite3_bind_int(q, 1, src->current_level);
  sqlite3_bind_int(q, 2, src->manual_pin);
  sqlite3_bind_int64(q, 3, src->config_version);
  sqlite3_bind_int64(q, 4, src->revision);
  sqlite3_bind_int64(q, 5, src->created_at);
  sqlite3_bind_int64(q, 6, src->updated_at);
  sqlite3_bind_int64(q, 7, src->id);
  return store_step_done(&st->w, q, "importing a site's level and versions") < 0 ? STORE_ERROR
                                                                                 : STORE_OK;
}

static enum store_rc write_tokens(struct store *st, const struct store_export *x, char *what,
                                  size_t whatlen) {
  static const char ins[] = "INSERT INTO tokens (id, kind, hash, name, role, expires_at, "
                            "created_at) VALUES (?, 'admin', ?, ?, ?, ?, ?)";
  for (int i = 0; i < x->n_tokens; i++) {
    const struct export_token *t = &x->tokens[i];
    sqlite3_stmt *q = store_stmt(&st->w, ins);
    char path[32];
    enum store_rc rc;
    if (!q) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, t->id);
    sqlite3_bind_text(q, 2, t->hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, t->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 4, t->role, -1, SQLITE_STATIC);
    if (t->expires_at > 0)
      sqlite3_bind_int64(q, 5, t->expires_at);
    else
      sqlite3_bind_null(q, 5);
    sqlite3_bind_int64(q, 6, t->created_at);
    snprintf(path, sizeof path, "tokens[%d]", i);
    if ((rc = step_insert(st, q, what, whatlen, path)) != STORE_OK) return rc;
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
    sqlite3_stmt *q = store_stmt(&st->w, ins);
    char path[40];
    enum store_rc rc;
    if (!q) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, n->id);
    sqlite3_bind_text(q, 2, n->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, n->created_at);
    snprintf(path, sizeof path, "nodes[%d]", i);
    if ((rc = step_insert(st, q, what, whatlen, path)) != STORE_OK) return rc;
    if (!(q = store_stmt(&st->w, tok))) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, next_id++);
    sqlite3_bind_text(q, 2, n->token_hash, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, n->id);
    sqlite3_bind_int64(q, 4, n->created_at);
    snprintf(path, sizeof path, "nodes[%d].token_sha256", i);
    if ((rc = step_insert(st, q, what, whatlen, path)) != STORE_OK) return rc;
  }
  return STORE_OK;
}

static enum store_rc write_webhooks(struct store *st, const struct store_export *x, char *what,
                                    size_t whatlen) {
  static const char ins[] =
      "INSERT INTO webhooks (id, url, secret, events, created_at) VALUES (?, ?, ?, ?, ?)";
  for (int i = 0; i < x->n_webhooks; i++) {
    const struct webhook_rec *w = &x->webhooks[i];
    sqlite3_stmt *q = store_stmt(&st->w, ins);
    char path[32];
    enum store_rc rc;
    if (!q) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, w->id);
    sqlite3_bind_text(q, 2, w->url, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, w->secret, -1, SQLITE_STATIC);
    if (w->events)
      sqlite3_bind_text(q, 4, w->events, -1, SQLITE_STATIC);
    else
      sqlite3_bind_null(q, 4);
    sqlite3_bind_int64(q, 5, w->created_at);
    snprintf(path, sizeof path, "webhooks[%d]", i);
    if ((rc = step_insert(st, q, what, whatlen, path)) != STORE_OK) return rc;
  }
  return STORE_OK;
}

/* Replace the publications the site writes recorded by one per site numbered from pub_seq + 1:
   a node holding any seq of the source lies before the kept history and takes the full set. */
static enum store_rc renumber_publications(struct store *st, const struct store_export *x) {
  static const char del[] = "DELETE FROM publications";
  static const char ins[] =
      "INSERT INTO publications (seq, site_id, config_version, deleted, reason, created_at) "
      "VALUES (?, ?, ?, 0, 'imported', ?)";
  sqlite3_stmt *q = store_stmt(&st->w, del);
  int64_t now = clock_wall_ms();
  if (!q || store_step_done(&st->w, q, "clearing publications") < 0) return STORE_ERROR;
  st->pub_pending = 0;
  for (int i = 0; i < x->n_sites; i++) {
    if (!(q = store_stmt(&st->w, ins))) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, x->pub_seq + 1 + i);
    sqlite3_bind_int64(q, 2, x->sites[i].id);
    sqlite3_bind_int64(q, 3, x->sites[i].config_version);
    sqlite3_bind_int64(q, 4, now);
    if (store_step_done(&st->w, q, "recording an imported publication") < 0) return STORE_ERROR;
    st->pub_pending = x->pub_seq + 1 + i;
  }
  return STORE_OK;
}

static enum store_rc write_all(struct store *st, const struct store_export *x, char *what,
                               size_t whatlen) {
  static const char drop_bootstrap[] =
      "DELETE FROM tokens WHERE kind = 'admin' AND name = '" STORE_TOKEN_BOOTSTRAP "'";
  sqlite3_stmt *q;
  enum store_rc rc = check_empty(st, what, whatlen);
  if (rc != STORE_OK) return rc;
  if (!(q = store_stmt(&st->w, drop_bootstrap)) ||
      store_step_done(&st->w, q, "replacing the bootstrap token") < 0)
    return STORE_ERROR;
  st->token_clear_pending = 1;
  for (int i = 0; i < x->n_sites; i++)
    if ((rc = write_site(st, &x->sites[i], i, what, whatlen)) != STORE_OK) return rc;
  if ((rc = write_tokens(st, x, what, whatlen)) != STORE_OK) return rc;
  if ((rc = write_nodes(st, x, what, whatlen)) != STORE_OK) return rc;
  if ((rc = write_webhooks(st, x, what, whatlen)) != STORE_OK) return rc;
  return renumber_publications(st, x);
}

enum store_rc store_export_write(struct store *st, const struct store_export *x, char *what,
                                 size_t whatlen) {
  if (whatlen) what[0] = '\0';
  if (store_tx_begin(st) < 0) return STORE_ERROR;
  return store_tx_end(st, write_all(st, x, what, whatlen));
}
