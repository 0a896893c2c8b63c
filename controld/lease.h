/* lease — the engine lease of cluster mode (docs/design.md#engine-lease).

   With a PostgreSQL --db several controld replicas share one database; one of them (the holder of
   the row leases('engine'), store_lease.h) is the ENGINE: it runs probe rounds, switching, webhook
   delivery and pruning. Every replica serves the API and node traffic whatever its role.

   The lease thread acquires or renews every ttl/3 (the database clock decides expiry). The holder
   that has not renewed successfully within ttl - margin (counted on its monotonic clock from the
   moment the last successful renewal was SENT) stops its engine work by itself; a fenced engine
   transaction (store_lease.h) makes it step down at once. The store's fence follows every change
   at once (on the lease thread); the callbacks hear of them on a role thread of their own, one
   at a time, in order (a slow start of the engine work never delays a renewal).

   With SQLite there is no lease and no thread: the one process is always the engine, epoch 0. */
#ifndef CDNCA_LEASE_H
#define CDNCA_LEASE_H

#include <stddef.h>
#include <stdint.h>

struct store;
struct lease;

/* ---- the decision logic (pure: every function takes now, mono ms) ---- */

struct lease_policy {
  int64_t ttl_ms;    /* the lease's lifetime per acquire/renew (database clock) */
  int64_t renew_ms;  /* attempt every renew_ms: ttl / 3 */
  int64_t margin_ms; /* the holder stops at (last renewal sent) + ttl - margin */
  int64_t retry_ms;  /* after a failed attempt while holding: try again this soon */
};

/* The policy for ttl_ms: renew ttl/3, margin ttl/5 (at least 50 ms), retry ttl/12 (at least
   20 ms). */
void lease_policy_init(struct lease_policy *p, int64_t ttl_ms);

enum lease_role { LEASE_REPLICA = 0, LEASE_ENGINE = 1 };

struct lease_state {
  enum lease_role role;
  int64_t epoch;       /* the epoch held (ENGINE), else 0 */
  int64_t valid_until; /* ENGINE: mono ms at which engine work stops unless renewed */
  int64_t next_try;    /* mono ms of the next acquire/renew attempt */
};

/* What an attempt found. */
enum lease_outcome {
  LEASE_HELD = 0,  /* the row is ours with the returned epoch */
  LEASE_TAKEN = 1, /* another holder has it */
  LEASE_ERROR = 2, /* no answer (database unreachable, statement failed) */
};

enum lease_change {
  LEASE_SAME = 0,   /* role and epoch unchanged */
  LEASE_GAINED = 1, /* now ENGINE (from replica, or with a new epoch) */
  LEASE_LOST = 2,   /* now REPLICA */
};

/* A fresh state: replica, first attempt at now. */
void lease_state_init(struct lease_state *s, int64_t now);

/* Apply the outcome of an attempt sent at sent (mono ms) and answered at now. A HELD answer keeps
   or makes this replica the engine until sent + ttl - margin, unless that is already past (a late
   answer does not make an engine). TAKEN demotes. ERROR changes nothing by itself (the holder
   keeps its role until valid_until, see lease_tick) but retries sooner while holding. */
enum lease_change lease_after_attempt(struct lease_state *s, const struct lease_policy *p,
                                      int64_t sent, int64_t now, enum lease_outcome o,
                                      int64_t epoch);

/* Self-demotion: the engine whose valid_until is reached becomes a replica (LEASE_LOST). */
enum lease_change lease_tick(struct lease_state *s, int64_t now);

/* A fenced engine write found the lease gone: step down now and try again at once. */
enum lease_change lease_fenced(struct lease_state *s, int64_t now);

/* 1 when an acquire/renew attempt is due at now. */
int lease_attempt_due(const struct lease_state *s, int64_t now);

/* When the lease thread must next look: the next attempt or, for the engine, valid_until. */
int64_t lease_wake_at(const struct lease_state *s);

/* ---- the lease thread (cluster mode) ---- */

/* A role change: engine = 1 with the epoch gained, 0 when lost. Runs on the role thread. */
typedef void (*lease_change_fn)(void *arg, int engine, int64_t epoch);

/* A lease for this replica on st: holder "<name>#<8 hex digits of this process>" (a restarted
   replica takes a new epoch), ttl_ms, eligible 0 = never takes the lease (a replica far from the
   primary). Turns the store's fencing on and sets its fenced hook (lease_fenced_hook). NULL on
   failure (logged). */
struct lease *lease_new(struct store *st, const char *name, int64_t ttl_ms, int eligible);

/* Call fn on every role change (at most 4, before lease_start). 0 or -1. */
int lease_on_change(struct lease *l, lease_change_fn fn, void *arg);

/* Start the lease thread and the role thread. 0 or -1. */
int lease_start(struct lease *l);

/* The role and epoch as of now (any thread; a NULL lease is SQLite's: engine, epoch 0). */
int lease_is_engine(struct lease *l);
int64_t lease_epoch(struct lease *l);

/* The holder string this replica writes into the row ("" for NULL). */
const char *lease_holder(const struct lease *l);

/* The store's fenced hook (arg = struct lease *): a fenced engine transaction makes the replica
   step down; the lease thread reports the change. Any thread. */
void lease_fenced_hook(void *arg);

/* Stop the thread; the engine reports LOST to the callbacks, then releases the row (another
   replica takes over without waiting for the ttl). Role and epoch stay readable (replica, 0).
   NULL is a no-op. */
void lease_stop(struct lease *l);

/* lease_stop, then free (no reader of lease_is_engine/lease_epoch may remain); NULLs *l. */
void lease_free(struct lease **l);

#endif
