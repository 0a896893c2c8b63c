/* store_export — the configuration of a whole installation read as one snapshot and written
   into an empty database as one transaction (controld --export / --import, export.h). Runtime
   state (origin health, streaks, votes, node presence, events, deliveries, audit, idempotency
   keys) is neither read nor written. */
#ifndef CDNCA_STORE_EXPORT_H
#define CDNCA_STORE_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "store_notify.h"
#include "store_tokens.h"

/* A node as exported: its name and the SHA-256 hex of its token (never the token). */
struct export_node {
  int64_t id;
  char name[65];
  int64_t created_at;
  char token_hash[65];
};

/* An API token as exported: the hash of its secret, its name, role and expiry (0 = never). */
struct export_token {
  int64_t id;
  char name[STORE_TOKEN_NAME_MAX + 1];
  char role[12];
  char hash[65];
  int64_t created_at, expires_at;
};

/* Everything an export holds; every array is owned (store_export_fini frees it). */
struct store_export {
  int64_t pub_seq; /* the source's highest publication seq */
  int n_sites;
  struct site_rec *sites; /* ordered by id; origins by level, id */
  unsigned *site_fleet;   /* for the write: n_sites FLEET_* flags (fleet_state.h), the fleet
                             view's state of each imported site; NULL stores none (all clear) */
  int n_nodes;
  struct export_node *nodes;
  int n_tokens;
  struct export_token *tokens;
  int n_webhooks;
  struct webhook_rec *webhooks;
};

/* Read the configuration into *out from one read snapshot. On failure *out is empty. Caller
   frees with store_export_fini either way. */
enum store_rc store_export_read(struct store *st, struct store_export *out);

/* Write x into the database in one write transaction, keeping every id. The database must hold
   no site, node, webhook, publication or token other than the bootstrap admin token (which is
   replaced): else STORE_CONFLICT with what naming the first kind found ("sites", ...). A UNIQUE
   clash (a document not checked by export_from_json) is STORE_CONFLICT with what giving the path
   ("sites[2].hostnames[0]"). Publications are numbered after x->pub_seq, so a node holding any
   seq of the source takes the full set. Each site's fleet view flags are x->site_fleet[i], so
   the fleet counts are right before the engine looks at the site. Nothing is written unless
   STORE_OK is returned. */
enum store_rc store_export_write(struct store *st, const struct store_export *x, char *what,
                                 size_t whatlen);

/* 1 when target (a --db value) names a SQLite file that does not exist (store_open would create
   it), else 0: an export must not create an empty database where a typo points. */
int store_export_source_missing(const char *target);

/* Free what x owns (webhook secrets wiped) and empty it. */
void store_export_fini(struct store_export *x);

#endif
