/* node — the record of one enrolled edge node and its field table. No SQL, no JSON. */
#ifndef CDNCA_NODE_H
#define CDNCA_NODE_H

#include <stdint.h>

#include "fields.h"

struct node_rec {
  int64_t id;
  char name[65];
  int64_t created_at, last_seen_at, config_seq;
  char version[64];
};

/* The node record's field table: its columns (in the order the store reads them) and what
   POST /v1/nodes takes (FORM_IN). */
extern const struct field_def node_fields[];

/* One per-origin observation from a heartbeat. */
struct node_obs {
  int64_t site_id, origin_id, requests, failures;
  int skipped;
  int64_t backup_picks, fail_open;       /* counters since the node started; 0 from older nodes */
  int64_t latency_sum_ms, latency_count; /* the origin's answers' latency sum and count since the
                                            node started; 0 from older nodes */
};

/* The index of the first of the n observations that names the (site, origin) of an earlier one,
   or -1 when each is there once (-2 when out of memory). A heartbeat lists each origin of a site
   once: its counters are totals, and a second copy would count the same traffic again (an origin
   under a site it is not of counts nowhere). Pure. */
int node_first_repeat(const struct node_obs *obs, int n);

#endif
