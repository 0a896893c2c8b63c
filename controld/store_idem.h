/* store_idem — idempotency keys: the first answer to a POST with an Idempotency-Key, replayed. */
#ifndef CDNCA_STORE_IDEM_H
#define CDNCA_STORE_IDEM_H

#include "store.h"
#include <stdint.h>

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
enum store_rc store_idem_get_locked(struct store_tx *tx, const char *key, int64_t not_before,
                                    struct idem_rec *out);

/* Inside a store_op: store the answer for key (replacing an expired one) and prune rows older
   than now - STORE_IDEM_KEEP_MS and beyond STORE_IDEM_MAX_ROWS. */
enum store_rc store_idem_put_locked(struct store_tx *tx, const char *key, const char *request_hash,
                                    int status, const char *body, const char *etag, int64_t now);

#endif
