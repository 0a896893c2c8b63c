/* coord — how this controld works with other replicas (docs/design.md#cluster-mode): who runs
   the engine work (probe rounds, switching, webhook delivery, pruning) and how the commits of
   other replicas are heard. One interface, two implementations chosen once by main:

   - local (SQLite: one process): always the engine, epoch 0; nothing to hear, so subscriptions
     are accepted and never called. coord_start reports the engine role at once, on the calling
     thread, before it returns.
   - pg (cluster mode: several replicas on one PostgreSQL database): the engine lease (lease.h)
     and the signals listener (signals.h). coord_start starts their threads; roles are reported
     on the lease's role thread as they change.

   Every other module is wired the same way in both modes and never asks which one it is in. */
#ifndef CDNCA_COORD_H
#define CDNCA_COORD_H

#include <stdint.h>

#include "lease.h"
#include "signals.h"

struct store;
struct coord;

/* What the pg implementation needs. */
struct coord_pg_cfg {
  const char *replica_name; /* the lease holder's name ("" = the host name) */
  int64_t lease_ttl_ms;
  int eligible;                 /* 0 = never takes the engine lease */
  struct signals_hooks signals; /* told about publications and revoked nodes */
};

/* The one-process coordination. NULL on OOM (logged). */
struct coord *coord_local_new(void);

/* Cluster coordination on st (not owned). NULL on failure (logged). */
struct coord *coord_pg_new(struct store *st, const struct coord_pg_cfg *cfg);

/* Call fn(arg, engine, epoch) on every role change (at most 4, before coord_start). 0 or -1. */
int coord_on_role(struct coord *c, lease_change_fn fn, void *arg);

/* Call fn on notifications of kind from other replicas (signal_on's rules; before coord_start).
   0 or -1. */
int coord_subscribe(struct coord *c, enum signal_kind kind, signal_fn fn, void *arg);

/* Start: local reports the engine role now; pg starts the listener and the lease. 0 or -1. */
int coord_start(struct coord *c);

/* The role and epoch as of now (any thread). */
int coord_is_engine(struct coord *c);
int64_t coord_epoch(struct coord *c);

/* For /metrics: whether other replicas' notifications are heard (always 1 for local) and how
   many were handled. */
int coord_listening(struct coord *c);
uint64_t coord_received(struct coord *c);

/* Stop the engine work (reported as a lost role) and release what other replicas wait for (the
   lease row); roles stay readable (replica, 0). NULL is a no-op. */
void coord_stop(struct coord *c);

/* coord_stop, then free (no reader of the role may remain); NULLs *c. */
void coord_free(struct coord **c);

#endif
