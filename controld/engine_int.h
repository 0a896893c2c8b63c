/* engine_int — what the engine's files (engine.c, engine_ramp.c, engine_drill.c) share: a site's
   incident while the engine works on it and the steps every decision ends in. Not a contract for
   other modules: they use engine.h. */
#ifndef CDNCA_ENGINE_INT_H
#define CDNCA_ENGINE_INT_H

#include <stdint.h>

#include "event.h"
#include "health.h"
#include "incident.h"
#include "site.h"
#include "store.h"

struct cJSON;
struct engine_env;

#define ENGINE_TITLE_RAMP_ABORTED "Failback ramp aborted"

/* A site's incident while the engine works on it. */
struct site_incident {
  struct incident_rec rec;
  int have;   /* rec is the site's latest incident */
  int loaded; /* the latest was looked up (or the round's active list said) */
  int dirty;  /* rec changed since it was stored */
};

/* Look the site's latest incident up once (ic zeroed by the caller at first). 0 or -1. */
int engine_inc_load(struct store_tx *tx, const struct site_rec *s, struct site_incident *ic);

/* 1 when events of s now belong to an incident (ic may be NULL). */
int engine_inc_on(const struct site_incident *ic);

/* Add event type with title on s whose data is j (deleted here, also on error); it joins the
   active incident's timeline. 0 or -1. */
int engine_add_event(const struct engine_env *env, struct store_tx *tx, const struct site_rec *s,
                     struct site_incident *ic, enum event_type type, const char *title,
                     struct cJSON *j);

/* Switch s to level with a level.switched event (why, by: may be NULL); s->current_level is
   updated and a running ramp ends. 0 or -1. */
int engine_do_switch(const struct engine_env *env, struct store_tx *tx, struct site_rec *s,
                     struct site_incident *ic, int level, enum health_reason reason,
                     const char *why, const char *by);

/* Evaluate the level decision for s at now and act on it; the fleet flags are written here, or
   left in *fleet_out (when not NULL) for the caller. 0 or -1. */
int engine_evaluate_locked(const struct engine_env *env, struct store_tx *tx, struct site_rec *s,
                           struct site_incident *ic, int64_t now, unsigned *fleet_out);

/* The data of a failback.aborted event of run (the window's requests and failures, why in
   words, hold_until: wall ms, 0: none); NULL when out of memory. */
struct cJSON *engine_ramp_aborted_json(const struct ramp_run *run, int64_t requests,
                                       int64_t failures, const char *why, int64_t hold_until);

/* One decision on the thing id at now inside tx. 0 or -1 (the transaction is rolled back). */
typedef int (*engine_step_fn)(const struct engine_env *env, struct store_tx *tx, int64_t id,
                              int64_t now);

/* step on each of ids[0..n) at now, one write transaction each; a failed one is rolled back and
   logged as "<what> <id>: not decided" and the others go on. 0, or -1 when any failed. */
int engine_step_each(const struct engine_env *env, const int64_t *ids, int n, int64_t now,
                     engine_step_fn step, const char *what);

#endif
