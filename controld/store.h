/* store — all of controld's SQL: SQLite in WAL mode, one writer connection, a reader per thread. */
#ifndef CDNCA_STORE_H
#define CDNCA_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "site.h"

struct store;

enum store_rc {
  STORE_OK = 0,
  STORE_NOT_FOUND = 1,
  STORE_CONFLICT = 2,    /* a UNIQUE value is taken: see the conflict text */
  STORE_LIMIT = 3,       /* a bound would be exceeded (e.g. SITE_MAX_ORIGINS) */
  STORE_FULL = 4,        /* the disk is full: nothing was written */
  STORE_UNAVAILABLE = 5, /* the database cannot be reached (PostgreSQL): nothing was written */
  STORE_ERROR = -1,      /* logged where it happened */
};

enum { STORE_TOKEN_ADMIN = 1, STORE_TOKEN_NODE = 2 };

/* Open (creating if needed) the database at path, apply pending migrations. NULL on failure
 * (logged). */
struct store *store_open(const char *path);

/* Check, creating and changing nothing, that controld could open the database at path: an
   existing file must be SQLite with a schema no newer than this build's, a missing one needs a
   writable directory. 0 with msg saying what was found, or -1 with msg giving the error. */
int store_check(const char *path, char *msg, size_t msglen);

/* Close every connection and free; NULLs *st. */
void store_close(struct store **st);

/* A counter bumped after every committed write: equal values mean nothing changed in between. */
int64_t store_generation(struct store *st);

/* The work of one write transaction: returns STORE_OK to commit, anything else to roll back. */
typedef enum store_rc (*store_op_fn)(struct store *st, void *arg);

/* Run fn(st, arg) as one write transaction (writer lock, BEGIN IMMEDIATE .. COMMIT). Returns fn's
   result when it is not STORE_OK (rolled back, nothing written), STORE_FULL when a statement or
   the commit failed for lack of disk space, STORE_ERROR when BEGIN or COMMIT fails otherwise
   (rolled back), else STORE_OK. Publication and event hooks run after the commit. fn may
   call only *_locked functions of the store (a nested store_op would deadlock). */
enum store_rc store_op(struct store *st, store_op_fn fn, void *arg);

/* 1 while writes fail for lack of disk space (set by a write that failed with SQLITE_FULL, cleared
   by the next write that commits). */
int store_storage_full(struct store *st);

/* 0 while the last write found the database unreachable (PostgreSQL down or restarting), else 1. */
int store_db_up(struct store *st);

/* 1 when the database is shared by several controld replicas (PostgreSQL: cluster mode, DESIGN
   §10), 0 for SQLite (one process). */
int store_cluster(struct store *st);

/* Schema version recorded in PRAGMA user_version. */
int store_schema_version(struct store *st);

/* The --db target for log lines and messages: a password in it is masked. Valid while st is. */
const char *store_db_label(const struct store *st);

/* ---- tokens ---- */

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

/* ---- sites and origins (every change republishes the site) ---- */

/* Insert the site with its hostnames and origins; sets s->id, origin ids, versions. On
 * STORE_CONFLICT conflict names what is taken ("name" or "hostnames[i]"). */
enum store_rc store_site_create(struct store *st, struct site_rec *s, char *conflict, size_t clen);

/* Load one site into *out (caller site_rec_fini's it). */
enum store_rc store_site_get(struct store *st, int64_t id, struct site_rec *out);

/* Load the n distinct sites ids[0..n) into out[0..n), in the caller's order, from one snapshot
 * and with a few statements in all (not a few per site). A site that is not there leaves
 * out[i].id == 0. The caller site_rec_fini's every entry. */
enum store_rc store_sites_get(struct store *st, const int64_t *ids, int n, struct site_rec *out);

/* List up to limit sites with id > after, ascending; *out is a malloc'd array of *n records (caller
 * frees each with site_rec_fini and the array with free). */
enum store_rc store_site_list(struct store *st, int64_t after, int limit, struct site_rec **out,
                              int *n);

/* Replace the site's top-level fields and hostnames (not origins) from s; republishes. Conflicts as
 * in create. */
enum store_rc store_site_update(struct store *st, struct site_rec *s, char *conflict, size_t clen);

/* Delete a site; records a tombstone publication. */
enum store_rc store_site_delete(struct store *st, int64_t id);

/* Add an origin to a site (o->site_id set); sets o->id; republishes. */
enum store_rc store_origin_add(struct store *st, struct origin_rec *o);

/* Replace an origin's config fields; re-enabling resets its health to unknown; republishes. */
enum store_rc store_origin_update(struct store *st, const struct origin_rec *o);

/* Delete an origin of a site; republishes. */
enum store_rc store_origin_delete(struct store *st, int64_t site_id, int64_t origin_id);

/* The same, inside a store_op (the writer connection; the caller's transaction). */
enum store_rc store_site_get_locked(struct store *st, int64_t id, struct site_rec *out);
enum store_rc store_site_create_locked(struct store *st, struct site_rec *s, char *conflict,
                                       size_t clen);
enum store_rc store_site_update_locked(struct store *st, struct site_rec *s, char *conflict,
                                       size_t clen);
enum store_rc store_site_delete_locked(struct store *st, int64_t id);
/* STORE_LIMIT when the site already has SITE_MAX_ORIGINS origins (counted in the transaction). */
enum store_rc store_origin_add_locked(struct store *st, struct origin_rec *o);
enum store_rc store_origin_update_locked(struct store *st, const struct origin_rec *o);
enum store_rc store_origin_delete_locked(struct store *st, int64_t site_id, int64_t origin_id);

/* The site's revision (inside a store_op). */
enum store_rc store_site_revision_locked(struct store *st, int64_t site_id, int64_t *revision);

/* Up to limit site ids > after, ascending, into ids[]; *n of them. */
enum store_rc store_site_ids(struct store *st, int64_t after, int limit, int64_t *ids, int *n);

/* ---- idempotency keys (DESIGN §4) ---- */

/* How long the first answer to a POST with an Idempotency-Key is replayed, and how many are kept
   at most (a client cannot grow the table without bound by sending fresh keys). */
#define STORE_IDEM_KEEP_MS (24LL * 3600 * 1000)
#define STORE_IDEM_MAX_ROWS 100000

/* A stored first answer. */
struct idem_rec {
  char request_hash[65];
  int status;
  char *body; /* malloc'd JSON text or NULL (caller frees) */
  char etag[32];
  int64_t created_at;
};

/* Inside a store_op: the answer stored for key since not_before; STORE_NOT_FOUND when none. */
enum store_rc store_idem_get_locked(struct store *st, const char *key, int64_t not_before,
                                    struct idem_rec *out);

/* Inside a store_op: store the answer for key (replacing an expired one) and prune rows older
   than now - STORE_IDEM_KEEP_MS and beyond STORE_IDEM_MAX_ROWS. */
enum store_rc store_idem_put_locked(struct store *st, const char *key, const char *request_hash,
                                    int status, const char *body, const char *etag, int64_t now);

/* ---- nodes ---- */

struct node_rec {
  int64_t id;
  char name[65];
  int64_t created_at, last_seen_at, config_seq;
  char version[64];
};

/* Create a node and its token hash; sets n->id. STORE_CONFLICT when the name is taken. */
enum store_rc store_node_create(struct store *st, struct node_rec *n, const char *token_hash);

/* All nodes ordered by id; *out malloc'd (caller frees). */
enum store_rc store_node_list(struct store *st, struct node_rec **out, int *n);

/* Delete a node and its token (revocation is immediate: the token cache is cleared when the
   transaction commits, and a lookup racing the delete cannot re-cache the token). */
enum store_rc store_node_delete(struct store *st, int64_t id);

/* The same, inside a store_op. */
enum store_rc store_node_create_locked(struct store *st, struct node_rec *n,
                                       const char *token_hash);
enum store_rc store_node_delete_locked(struct store *st, int64_t id);

/* ---- publications ---- */

/* Highest publication seq (0 when none). */
int64_t store_pub_seq(struct store *st);

/* Call fn(arg, seq) after every commit that recorded a publication (outside the writer lock). Set
 * once at start. */
void store_set_pub_hook(struct store *st, void (*fn)(void *arg, int64_t seq), void *arg);

/* Call fn(arg) after every commit that wrote an event (and so maybe webhook deliveries). Set once
 * at start. */
void store_set_event_hook(struct store *st, void (*fn)(void *arg), void *arg);

/* ---- events (site messages, notification center) and the webhook outbox ---- */

struct event_rec {
  int64_t id, site_id;
  char site_name[65];
  char type[48];
  char title[128];
  char *data; /* JSON text, owned */
  int64_t created_at;
};

/* Inside a write transaction (store_int.h): add an event and one pending delivery per webhook whose
 * filter matches. Returns the event id or -1. */
int64_t store_event_add_locked(struct store *st, int64_t site_id, const char *site_name,
                               const char *type, const char *title, const char *data_json);

/* Add an event in its own transaction; id or -1. */
int64_t store_event_add(struct store *st, int64_t site_id, const char *site_name, const char *type,
                        const char *title, const char *data_json);

/* Events with id > after, oldest first, at most limit; site_id 0 = every site. *out malloc'd
 * (caller frees with store_events_free). */
enum store_rc store_event_list(struct store *st, int64_t site_id, int64_t after, int limit,
                               struct event_rec **out, int *n);

/* Free a list from store_event_list. */
void store_events_free(struct event_rec *arr, int n);

#endif
