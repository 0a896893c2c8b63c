/* event — the record of one event (a site message, a notification-center entry, what a webhook
   delivers) and the states of its webhook deliveries. No SQL, no JSON. */
#ifndef CDNCA_EVENT_H
#define CDNCA_EVENT_H

#include <stdint.h>

#include "log.h"

struct event_rec {
  int64_t id, site_id;
  char site_name[65];
  char type[48];
  char title[128];
  char *data; /* JSON text, owned */
  int64_t created_at;
};

/* A webhook delivery's state (its outbox row's): waiting to be tried or retried, delivered (a 2xx),
   or given up. */
enum delivery_state { DELIVERY_PENDING = 0, DELIVERY_DELIVERED = 1, DELIVERY_FAILED = 2 };
#define DELIVERY_STATES 3
extern const char *const delivery_state_names[DELIVERY_STATES];

/* The types of the events controld records on a site (docs/design.md#events): one enum, its one
   name table and its rules. A new type is a value here, its word in event_type_names and its row
   in event_type_rules (event.c); a webhook's or channel's filter, the dashboard's forms
   (controld/ui/core.js, unit.test_ui_model compares), the log line and a paging channel's action
   all follow. A channel's test event (webhook.test) is none of them: it is sent to the one channel
   tested and never subscribed to. */
enum event_type {
  EVENT_LEVEL_SWITCHED,
  EVENT_ORIGIN_FAILBACK_AVAILABLE,
  EVENT_SITE_ALL_LEVELS_UNHEALTHY,
  EVENT_SITE_RECOVERED,
  EVENT_ORIGIN_HEALTH_CHANGED,
  EVENT_INCIDENT_OPENED,
  EVENT_INCIDENT_MITIGATED,
  EVENT_INCIDENT_RESOLVED,
  EVENT_RAMP_STARTED,
  EVENT_RAMP_ABORTED,
  EVENT_DRILL_STARTED,
  EVENT_DRILL_FINISHED,
};
#define EVENT_TYPES 12
/* The words, in the order above, NULL after the last (a list for json_words). */
extern const char *const event_type_names[EVENT_TYPES + 1];

/* What an event of a type does to a paging channel's alert (docs/design.md#notification-channels):
   nothing, open (trigger) it, or close (resolve) it. */
enum event_page { EVENT_PAGE_NONE = 0, EVENT_PAGE_TRIGGER = 1, EVENT_PAGE_RESOLVE = 2 };

/* A type's rules: its log line's level and its paging action. */
struct event_type_rule {
  enum log_level level;
  enum event_page page;
};
extern const struct event_type_rule event_type_rules[EVENT_TYPES];

/* The type named word, or -1 when it names none. Pure. */
int event_type_value(const char *word);

#endif
