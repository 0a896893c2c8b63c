/* fleet — a site's fleet state (on a backup level, all levels down, failback available, health
   checks paused) as flags, and the table of state names the API, the store and metrics share. */
#ifndef CDNCA_FLEET_H
#define CDNCA_FLEET_H

#include <stdint.h>

#include "fleet_state.h"
#include "outlook.h"
#include "store.h"

/* A state's names: `api` is the value of GET /v1/sites?state=, `summary` the key of GET
   /v1/summary and the `state` label of cdnca_sites. */
struct fleet_state_name {
  unsigned flag;
  const char *api;
  const char *summary;
};

/* Every state, in the order of the summary; FLEET_NSTATES rows. */
#define FLEET_NSTATES 4
extern const struct fleet_state_name fleet_states[FLEET_NSTATES];

/* The flags of s given its outlook ol (engine_outlook of s as it is now, the one the status card
   shows). Pure. */
unsigned fleet_state_of(const struct site_rec *s, const struct outlook *ol);

/* The flag named `api` in GET /v1/sites?state= ("on_backup", "all_down", "failback_available",
   "paused"), or 0 when it names none. */
unsigned fleet_state_parse(const char *api);

/* The first level with an enabled origin, 0 when none. Pure. */
int fleet_first_level(const struct site_rec *s);

#endif
