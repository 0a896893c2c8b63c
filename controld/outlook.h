/* outlook — what the health rules say about one site at one instant (types only: engine_outlook
   fills it; the engine acts on it, fleet and the status card read it). */
#ifndef CDNCA_OUTLOOK_H
#define CDNCA_OUTLOOK_H

#include "health.h"

/* A site's outlook: its health-check state, its levels' health and the level decision. */
struct outlook {
  int hc_active; /* health checks active: origin states count */
  int hc_paused; /* health checks on, fewer than two enabled origins */
  struct health_site_view view;
  struct health_decision decision;
};

#endif
