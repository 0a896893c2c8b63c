/* store_lease — the engine lease row and the fencing check (docs/design.md#engine-lease).

   The row leases('engine') names the replica whose engine runs (holder) and a fencing epoch that
   grows at every change of holder. Expiry is decided by the DATABASE clock only
   (clock_timestamp() on PostgreSQL), never by a replica's clock.

   Fencing: once store_lease_fence_set gave this process a (holder, epoch), every engine write
   transaction (probe round commits and switching through store_health_begin, webhook delivery
   records and outbox pruning) begins with
     SELECT 1 FROM leases WHERE name = 'engine' AND holder = ? AND epoch = ? FOR SHARE
   (PostgreSQL). No row: the transaction is rolled back, the fence is cleared, and the fenced hook
   runs (the lease steps down). FOR SHARE conflicts with a takeover's UPDATE, so a takeover and an
   engine commit serialize. Without a fence set (store_lease_fence_enable never called: SQLite,
   one process) every engine transaction is allowed. */
#ifndef CDNCA_STORE_LEASE_H
#define CDNCA_STORE_LEASE_H

#include <stdint.h>

#include "store.h"

#define STORE_LEASE_HOLDER_MAX 128

/* Acquire or renew the engine lease for holder for ttl_ms (database clock), as one statement on
   the calling thread's connection (ON CONFLICT … WHERE holder = me OR expired). 1 = held (*epoch
   set: unchanged on a renewal, + 1 when it changed hands), 0 = another holder has it (*epoch =
   its epoch), -1 = error (database unreachable or other; logged at debug). */
int store_lease_acquire(struct store *st, const char *holder, int64_t ttl_ms, int64_t *epoch);

/* Give the lease up at once (expires_at = 0, epoch kept) if holder still holds epoch; a clean
   shutdown lets another replica take over without waiting for the ttl. 0 or -1. */
int store_lease_release(struct store *st, const char *holder, int64_t epoch);

/* The current row: 1 with holder (cap bytes), epoch and expires_at (database ms) set, 0 when there
   is no row, -1 on error. expires_in_ms (may be NULL) = expires_at - the database's now. */
int store_lease_read(struct store *st, char *holder, size_t cap, int64_t *epoch,
                     int64_t *expires_in_ms);

/* Turn fencing on (cluster mode): from now on engine write transactions need a fence. */
void store_lease_fence_enable(struct store *st);

/* The fence engine transactions check: this process holds epoch as holder (epoch 0 = holds
   nothing: engine transactions are refused without a round trip). Any thread. */
void store_lease_fence_set(struct store *st, const char *holder, int64_t epoch);

/* Called (on the thread of the fenced transaction, after its rollback, without the writer lock)
   when a fencing check found that the lease is no longer ours. fn(NULL) unsets it: once that
   returned, the hook is not running and will not run. fn must not call store_lease_fence_set. */
void store_lease_set_fenced_hook(struct store *st, void (*fn)(void *arg), void *arg);

/* Run the fenced hook (store_core.c, after a fenced transaction's rollback). */
void store_lease_fenced(struct store *st);

/* Inside a write transaction just begun (store_core.h's store_tx_begin_engine): the fencing check.
   0 = allowed, 1 = fenced (no lease), -1 = error. */
int store_lease_fence_check_locked(struct store_tx *tx);

/* Add the participant that fences engine transactions at their begin (store_open does it). 0 or
   -1. */
int store_lease_attach(struct store *st);

#endif
