/* fleet_state — the fleet states a site can be in, as flags (types only: fleet.h computes them,
   store_fleet stores and counts them, the API filters on them). */
#ifndef CDNCA_FLEET_STATE_H
#define CDNCA_FLEET_STATE_H

/* One bit per state; a site may be in several at once. */
enum fleet_state {
  FLEET_ON_BACKUP = 1u << 0,          /* current level is not the first non-empty level */
  FLEET_ALL_DOWN = 1u << 1,           /* checks active, every non-empty level unhealthy */
  FLEET_FAILBACK_AVAILABLE = 1u << 2, /* an earlier level qualifies for failback */
  FLEET_PAUSED = 1u << 3,             /* checks on, fewer than two enabled origins */
};

#endif
