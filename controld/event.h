/* event — the record of one event (a site message, a notification-center entry, what a webhook
   delivers). No SQL, no JSON. */
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

#endif
