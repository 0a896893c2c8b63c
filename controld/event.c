/* event — the name tables of a webhook delivery's state and of the event types, and the types'
   rules (see event.h). */
#include "event.h"

#include "names.h"

const char *const delivery_state_names[DELIVERY_STATES] = {
    [DELIVERY_PENDING] = "pending",
    [DELIVERY_DELIVERED] = "delivered",
    [DELIVERY_FAILED] = "failed",
};

const char *const event_type_names[EVENT_TYPES + 1] = {
    [EVENT_LEVEL_SWITCHED] = "level.switched",
    [EVENT_ORIGIN_FAILBACK_AVAILABLE] = "origin.failback_available",
    [EVENT_SITE_ALL_LEVELS_UNHEALTHY] = "site.all_levels_unhealthy",
    [EVENT_SITE_RECOVERED] = "site.recovered",
    [EVENT_ORIGIN_HEALTH_CHANGED] = "origin.health_changed",
    [EVENT_INCIDENT_OPENED] = "incident.opened",
    [EVENT_INCIDENT_MITIGATED] = "incident.mitigated",
    [EVENT_INCIDENT_RESOLVED] = "incident.resolved",
    [EVENT_RAMP_STARTED] = "failback.ramp_started",
    [EVENT_RAMP_ABORTED] = "failback.aborted",
    [EVENT_DRILL_STARTED] = "drill.started",
    [EVENT_DRILL_FINISHED] = "drill.finished",
    [EVENT_TYPES] = NULL,
};

/* every level down is a warning; a page opens on an outage and closes on its end */
const struct event_type_rule event_type_rules[EVENT_TYPES] = {
    [EVENT_LEVEL_SWITCHED] = {LOG_INFO, EVENT_PAGE_NONE},
    [EVENT_ORIGIN_FAILBACK_AVAILABLE] = {LOG_INFO, EVENT_PAGE_NONE},
    [EVENT_SITE_ALL_LEVELS_UNHEALTHY] = {LOG_WARN, EVENT_PAGE_TRIGGER},
    [EVENT_SITE_RECOVERED] = {LOG_INFO, EVENT_PAGE_RESOLVE},
    [EVENT_ORIGIN_HEALTH_CHANGED] = {LOG_INFO, EVENT_PAGE_NONE},
    [EVENT_INCIDENT_OPENED] = {LOG_INFO, EVENT_PAGE_TRIGGER},
    [EVENT_INCIDENT_MITIGATED] = {LOG_INFO, EVENT_PAGE_NONE},
    [EVENT_INCIDENT_RESOLVED] = {LOG_INFO, EVENT_PAGE_RESOLVE},
    [EVENT_RAMP_STARTED] = {LOG_INFO, EVENT_PAGE_NONE},
    [EVENT_RAMP_ABORTED] = {LOG_INFO, EVENT_PAGE_NONE},
    [EVENT_DRILL_STARTED] = {LOG_INFO, EVENT_PAGE_NONE},
    [EVENT_DRILL_FINISHED] = {LOG_INFO, EVENT_PAGE_NONE},
};

int event_type_value(const char *word) {
  return names_value(event_type_names, EVENT_TYPES, word);
}
