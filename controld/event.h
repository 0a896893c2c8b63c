/* event — the record of one event (a site message, a notification-center entry, what a webhook
   delivers) and the states of its webhook deliveries. No SQL, no JSON. */
#ifndef CDNCA_EVENT_H
#define CDNCA_EVENT_H

#include <stdint.h>

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

#endif
