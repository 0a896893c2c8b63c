/* store_tokens — API tokens with a name, a role and an optional expiry
 * (docs/design.md#tokens-and-roles), the bootstrap admin token, and the token lookup behind every
 * authenticated request. */
#ifndef CDNCA_STORE_TOKENS_H
#define CDNCA_STORE_TOKENS_H

#include <stdint.h>

#include "store.h"

/* How long a token found valid is trusted without asking the database again. A revocation on
   this controld clears the cache at once; this bounds how long another controld sharing the
   database may still accept a revoked token. */
#define STORE_TOKEN_CACHE_MS 1000

/* Name of the token CDNCA_ADMIN_TOKEN enrols. */
#define STORE_TOKEN_BOOTSTRAP "bootstrap"

#define STORE_TOKEN_NAME_MAX 64

/* At most this many API tokens exist (docs/design.md#errors-and-limits; node tokens are counted
   as nodes). */
#define STORE_MAX_TOKENS 1000

/* Who a presented token is. For node tokens role is "" and token_id/name are the token row's. */
struct token_auth {
  int kind;      /* STORE_TOKEN_ADMIN (an API token) or STORE_TOKEN_NODE */
  char role[12]; /* "admin" | "operator" | "read" for API tokens */
  int64_t token_id;
  int64_t node_id;    /* node tokens: the node */
  int64_t expires_at; /* wall ms, 0 = never */
  char name[STORE_TOKEN_NAME_MAX + 1];
};

/* An API token as listed (never its secret). */
struct token_rec {
  int64_t id;
  char name[STORE_TOKEN_NAME_MAX + 1];
  char role[12];
  int64_t created_at, expires_at; /* expires_at 0 = never */
};

/* The live token (not expired at now, wall ms) whose SHA-256 hex is hash: 0 with *out filled,
   1 unknown, revoked or expired, -1 storage error. */
int store_token_auth(struct store *st, const char *hash, int64_t now, struct token_auth *out);

/* Create an API token with t->name, t->role, t->expires_at (0 = never) and the secret's hash;
   sets t->id and t->created_at. STORE_CONFLICT when the name is taken, STORE_LIMIT when
   STORE_MAX_TOKENS exist. */
enum store_rc store_token_create(struct store *st, struct token_rec *t, const char *hash);

/* The same inside a store_op. */
enum store_rc store_token_create_locked(struct store_tx *tx, struct token_rec *t, const char *hash);

/* API token id as listed; STORE_NOT_FOUND for none (or a node token). */
enum store_rc store_token_get(struct store *st, int64_t id, struct token_rec *out);

/* API tokens live at now (not expired), by id; *out malloc'd (caller frees), *n entries. */
enum store_rc store_token_list(struct store *st, int64_t now, struct token_rec **out, int *n);

/* Delete API token id (node tokens go with their node): the cache is cleared, so no request
   presenting it is accepted after this returns. */
enum store_rc store_token_delete(struct store *st, int64_t id);

/* The same inside a store_op: the cache is cleared when the transaction commits. */
enum store_rc store_token_delete_locked(struct store_tx *tx, int64_t id);

/* Store a token hash of a kind (node_id for node tokens, else 0); an existing hash is kept. 0 or
 * -1. */
int store_token_put(struct store *st, int kind, const char *hash, int64_t node_id);

/* Make hash the bootstrap admin token (named "bootstrap"): replaces the earlier bootstrap token
   (rotation by restart); API tokens stay. 0 or -1. (store_tokens.c) */
int store_admin_token_set(struct store *st, const char *hash);

/* Cluster mode: make sure hash is an admin token, revoking nothing (replicas started with
   different tokens must not revoke each other's; rotation is explicit through the API). Stored
   as "bootstrap", or "bootstrap-<12 hex digits of the hash>" when that name is taken. 0 or -1.
   (store_tokens.c) */
int store_admin_token_ensure(struct store *st, const char *hash);

/* Look up a live token hash: 0 with kind/node_id set, 1 unknown or expired, -1 error.
   (store_tokens.c; store_token_auth there also gives the name and role) */
int store_token_lookup(struct store *st, const char *hash, int *kind, int64_t *node_id);

/* Forget every cached token (call after deleting tokens, inside or outside a transaction). */
void store_token_cache_clear(struct store *st);

/* Add the participant that clears the token cache when a transaction that removed tokens commits
   (store_open does it). 0 or -1. */
int store_tokens_attach(struct store *st);

/* Inside a write transaction: tokens were removed; the token cache is cleared when it commits
   (and other replicas are told to clear theirs). */
void store_tokens_removed_locked(struct store_tx *tx);

/* Inside a write transaction: 1 when it removed tokens. */
int store_tokens_removed_pending(struct store *st);

#endif
