/* node — the record of one enrolled edge node. No SQL, no JSON. */
#ifndef CDNCA_NODE_H
#define CDNCA_NODE_H

#include <stdint.h>

struct node_rec {
  int64_t id;
  char name[65];
  int64_t created_at, last_seen_at, config_seq;
  char version[64];
};

#endif
