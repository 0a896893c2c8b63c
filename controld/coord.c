/* coord — the local and pg coordination behind one interface (see coord.h). */
#include "coord.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define COORD_ROLE_FNS 4

struct coord_ops {
  int (*on_role)(struct coord *c, lease_change_fn fn, void *arg);
  int (*subscribe)(struct coord *c, enum signal_kind kind, signal_fn fn, void *arg);
  int (*start)(struct coord *c);
  int (*is_engine)(struct coord *c);
  int64_t (*epoch)(struct coord *c);
  int (*listening)(struct coord *c);
  uint64_t (*received)(struct coord *c);
  void (*stop)(struct coord *c);
  void (*fini)(struct coord *c);
};

struct coord {
  const struct coord_ops *ops;
  /* local */
  struct {
    lease_change_fn fn;
    void *arg;
  } roles[COORD_ROLE_FNS];
  int nroles;
  atomic_int engine;
  /* pg */
  struct lease *lease;
  struct signals *signals;
};

/* ---- local: one process, always the engine ---- */

static int local_on_role(struct coord *c, lease_change_fn fn, void *arg) {
  if (!fn || c->nroles == COORD_ROLE_FNS) return -1;
  c->roles[c->nroles].fn = fn;
  c->roles[c->nroles++].arg = arg;
  return 0;
}

static int local_subscribe(struct coord *c, enum signal_kind kind, signal_fn fn, void *arg) {
  (void)c, (void)arg; /* nobody else commits: never called */
  return (int)kind < 0 || kind >= SIGNAL_KINDS || !fn ? -1 : 0;
}

static int local_start(struct coord *c) {
  atomic_store(&c->engine, 1);
  for (int i = 0; i < c->nroles; i++)
    c->roles[i].fn(c->roles[i].arg, 1, 0);
  return 0;
}

static int local_is_engine(struct coord *c) {
  return atomic_load(&c->engine);
}

static int64_t local_epoch(struct coord *c) {
  (void)c;
  return 0;
}

static int local_listening(struct coord *c) {
  (void)c;
  return 1;
}

static uint64_t local_received(struct coord *c) {
  (void)c;
  return 0;
}

static void local_stop(struct coord *c) {
  if (!atomic_exchange(&c->engine, 0)) return;
  for (int i = 0; i < c->nroles; i++)
    c->roles[i].fn(c->roles[i].arg, 0, 0);
}

static void local_fini(struct coord *c) {
  (void)c;
}

static const struct coord_ops local_ops = {
    local_on_role,   local_subscribe, local_start, local_is_engine, local_epoch,
    local_listening, local_received,  local_stop,  local_fini,
};

struct coord *coord_local_new(void) {
  struct coord *c = calloc(1, sizeof *c);
  if (!c) {
    log_error("out of memory");
    return NULL;
  }
  c->ops = &local_ops;
  return c;
}

/* ---- pg: the engine lease and the signals listener ---- */

static int pg_on_role(struct coord *c, lease_change_fn fn, void *arg) {
  return lease_on_change(c->lease, fn, arg);
}

static int pg_subscribe(struct coord *c, enum signal_kind kind, signal_fn fn, void *arg) {
  return signal_on(c->signals, kind, fn, arg);
}

static int pg_start(struct coord *c) {
  return signals_start(c->signals) < 0 || lease_start(c->lease) < 0 ? -1 : 0;
}

static int pg_is_engine(struct coord *c) {
  return lease_is_engine(c->lease);
}

static int64_t pg_epoch(struct coord *c) {
  return lease_epoch(c->lease);
}

static int pg_listening(struct coord *c) {
  return signals_connected(c->signals);
}

static uint64_t pg_received(struct coord *c) {
  return signals_received(c->signals);
}

static void pg_stop(struct coord *c) {
  lease_stop(c->lease); /* the engine work stops (role lost), then the row is released */
}

static void pg_fini(struct coord *c) {
  lease_free(&c->lease);
  signals_free(&c->signals);
}

static const struct coord_ops pg_ops = {
    pg_on_role,   pg_subscribe, pg_start, pg_is_engine, pg_epoch,
    pg_listening, pg_received,  pg_stop,  pg_fini,
};

struct coord *coord_pg_new(struct store *st, const struct coord_pg_cfg *cfg) {
  struct coord *c = calloc(1, sizeof *c);
  char name[256];
  if (!c) {
    log_error("out of memory");
    return NULL;
  }
  c->ops = &pg_ops;
  if (cfg->replica_name && cfg->replica_name[0]) {
    snprintf(name, sizeof name, "%s", cfg->replica_name);
  } else if (gethostname(name, sizeof name) < 0 || !name[0]) {
    snprintf(name, sizeof name, "controld");
  }
  name[sizeof name - 1] = '\0';
  c->signals = signals_new(st, &cfg->signals);
  if (c->signals) c->lease = lease_new(st, name, cfg->lease_ttl_ms, cfg->eligible);
  if (!c->signals || !c->lease) {
    coord_free(&c);
    return NULL;
  }
  return c;
}

/* ---- the interface ---- */

int coord_on_role(struct coord *c, lease_change_fn fn, void *arg) {
  return c->ops->on_role(c, fn, arg);
}

int coord_subscribe(struct coord *c, enum signal_kind kind, signal_fn fn, void *arg) {
  return c->ops->subscribe(c, kind, fn, arg);
}

int coord_start(struct coord *c) {
  return c->ops->start(c);
}

int coord_is_engine(struct coord *c) {
  return c->ops->is_engine(c);
}

int64_t coord_epoch(struct coord *c) {
  return c->ops->epoch(c);
}

int coord_listening(struct coord *c) {
  return c->ops->listening(c);
}

uint64_t coord_received(struct coord *c) {
  return c->ops->received(c);
}

void coord_stop(struct coord *c) {
  if (c) c->ops->stop(c);
}

void coord_free(struct coord **c) {
  if (!c || !*c) return;
  coord_stop(*c);
  (*c)->ops->fini(*c);
  free(*c);
  *c = NULL;
}
