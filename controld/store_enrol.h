/* store_enrol — enrolment keys (docs/design.md#enrolment-keys): created with their secret's
   hash, listed, revoked, looked up by hash, and used — the use counted by one conditional
   UPDATE inside the enrolling transaction, so concurrent enrolments never pass max_uses. */
#ifndef CDNCA_STORE_ENROL_H
#define CDNCA_STORE_ENROL_H

#include <stdint.h>

#include "enrolkey.h"
#include "store.h"

/* At most this many keys are unrevoked at once (docs/design.md#errors-and-limits). */
#define STORE_MAX_ENROLKEYS 1000

/* Inside a store_op: create key k (name, expires_at, max_uses) with the secret's SHA-256 hex;
   sets k->id, k->created_at = now, k->uses = 0. STORE_CONFLICT when the name is taken,
   STORE_LIMIT when STORE_MAX_ENROLKEYS unrevoked keys exist. */
enum store_rc store_enrolkey_create_locked(struct store_tx *tx, struct enrolkey_rec *k,
                                           const char *hash, int64_t now);

/* Every key (revoked, expired and used-up ones too) by id; *out malloc'd (caller frees), *n
   entries. */
enum store_rc store_enrolkey_list(struct store *st, struct enrolkey_rec **out, int *n);

/* Inside a store_op: revoke key id at now (a revoked key keeps its first revocation time).
   STORE_NOT_FOUND when there is no such key. */
enum store_rc store_enrolkey_revoke_locked(struct store_tx *tx, int64_t id, int64_t now);

/* The key whose secret's SHA-256 hex is hash, on the calling thread's reader (no write
   transaction): STORE_OK with *out filled, STORE_NOT_FOUND, or STORE_ERROR/STORE_UNAVAILABLE. */
enum store_rc store_enrolkey_find(struct store *st, const char *hash, struct enrolkey_rec *out);

/* Inside a store_op: count one use of the key with hash if it is active at now (not revoked, not
   expired, uses below max_uses) — one conditional UPDATE, so two transactions can never both
   take the last use. STORE_OK with *out the key after the use, STORE_NOT_FOUND when there is
   no such key or it is not active (nothing changed). */
enum store_rc store_enrolkey_use_locked(struct store_tx *tx, const char *hash, int64_t now,
                                        struct enrolkey_rec *out);

#endif
