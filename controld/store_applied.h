/* store_applied — the propagation rows of an incident or a drill (incident_applied,
   drill_applied): which node first held which switch publication, and when. One reader for both
   tables; the rows are written by store_incidents and store_drills. */
#ifndef CDNCA_STORE_APPLIED_H
#define CDNCA_STORE_APPLIED_H

#include <stdint.h>

#include "incident.h"
#include "store.h"

/* Whose propagation rows are read. */
enum applied_of {
  APPLIED_OF_INCIDENT = 0, /* incident_applied, by incident_id */
  APPLIED_OF_DRILL = 1,    /* drill_applied, by drill_id */
};

/* The rows of the incident or drill id, by seq, then applied_at, then node id, with the
   publication's time: every row of a drill; of an incident, for each seq, its last
   INCIDENT_PROP_NODES_MAX rows and its median one, each with its rank and the seq's count (what
   incident_propagation and the answer's list need, however many nodes applied it). *out
   malloc'd (caller frees). */
enum store_rc store_applied_rows(struct store *st, enum applied_of of, int64_t id,
                                 struct applied_row **out, int *n);

#endif
