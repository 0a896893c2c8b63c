/* fleet — site fleet state flags (see fleet.h). */
#include "fleet.h"

#include <string.h>

const struct fleet_state_name fleet_states[FLEET_NSTATES] = {
    {FLEET_ON_BACKUP, "on_backup", "on_backup"},
    {FLEET_ALL_DOWN, "all_down", "all_levels_unhealthy"},
    {FLEET_FAILBACK_AVAILABLE, "failback_available", "failback_available"},
    {FLEET_PAUSED, "paused", "paused"},
};

int fleet_first_level(const struct site_rec *s) {
  int first = 0;
  for (int i = 0; i < s->n_origins; i++)
    if (s->origins[i].enabled && (first == 0 || s->origins[i].level < first))
      first = s->origins[i].level;
  return first;
}

unsigned fleet_state_of(const struct site_rec *s, const struct outlook *ol) {
  unsigned f = 0;
  int first = fleet_first_level(s);
  if (first && s->current_level != first) f |= FLEET_ON_BACKUP;
  if (ol->hc_active && ol->decision.all_unhealthy) f |= FLEET_ALL_DOWN;
  if (ol->decision.failback_available) f |= FLEET_FAILBACK_AVAILABLE;
  if (ol->hc_paused) f |= FLEET_PAUSED;
  return f;
}

unsigned fleet_state_parse(const char *api) {
  for (int i = 0; api && i < FLEET_NSTATES; i++)
    if (strcmp(fleet_states[i].api, api) == 0) return fleet_states[i].flag;
  return 0;
}
