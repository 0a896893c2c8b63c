/* store_audit — the audit log's SQL: one row per accepted /v1 write, written in the write's own
   transaction, listed oldest first, pruned by age. */
#ifndef CDNCA_STORE_AUDIT_H
#define CDNCA_STORE_AUDIT_H

#include <stdint.h>

#include "store.h"

#define STORE_AUDIT_SUMMARY_MAX 255
#define STORE_AUDIT_PATH_MAX 255
/* Rows deleted per prune statement: pruning inside a write's transaction stays short. */
#define STORE_AUDIT_PRUNE_BATCH 1000
/* How often the writes prune the log (wall ms). */
#define STORE_AUDIT_PRUNE_EVERY_MS (3600 * 1000)

struct audit_rec {
  int64_t id, at;
  int64_t token_id; /* 0 = none */
  char token_name[65];
  char method[8];
  char path[STORE_AUDIT_PATH_MAX + 1];
  int64_t site_id; /* 0 = the write concerns no site */
  int status;      /* the answer's HTTP status */
  char summary[STORE_AUDIT_SUMMARY_MAX + 1];
};

/* Add the audit log's participant (it holds the retention; store_open does it). 0 or -1. */
int store_audit_attach(struct store *st);

/* Keep audit rows for keep_ms (wall); 0 = forever. Set once at start. */
void store_audit_set_retention(struct store *st, int64_t keep_ms);

/* Inside a write transaction: append *a (a->at = now when 0) and, at most once per
   STORE_AUDIT_PRUNE_EVERY_MS, delete up to STORE_AUDIT_PRUNE_BATCH rows older than the
   retention. 0 or -1. The row is written with db_defer (db.h): on PostgreSQL it goes out with the
   transaction's next statement or its COMMIT, which fails if it does. */
int store_audit_add_locked(struct store_tx *tx, const struct audit_rec *a, int64_t now);

/* Delete every row older than before_ms (its own transactions, in batches); rows deleted or -1.
   An engine write: fenced by the lease in cluster mode (store_lease.h). */
int64_t store_audit_prune(struct store *st, int64_t before_ms);

/* Rows with id > after, of site_id (0 = all), oldest first, at most limit; *out malloc'd (caller
   frees), *n entries. */
enum store_rc store_audit_list(struct store *st, int64_t after, int64_t site_id, int limit,
                               struct audit_rec **out, int *n);

#endif
