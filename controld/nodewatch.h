/* nodewatch — which nodes are online (seen within online_ms) and when that changes: node id ->
   last sighting, fed by sightings and swept by time. Time is an argument; the caller serialises
   the calls. */
#ifndef CDNCA_NODEWATCH_H
#define CDNCA_NODEWATCH_H

#include <stdint.h>

struct nodewatch;

/* New empty table; a node is online while its last sighting is at most online_ms old. NULL on
   OOM. Free with nodewatch_free (NULLs *w). */
struct nodewatch *nodewatch_new(int64_t online_ms);
void nodewatch_free(struct nodewatch **w);

/* A sighting of node id at now (wall ms). 1 when the node came online with it (first sighting,
   or the previous one older than online_ms, or swept offline since), 0 when it already was
   online, -1 on OOM (the sighting is not recorded). */
int nodewatch_seen(struct nodewatch *w, int64_t id, int64_t now);

/* Mark offline every online node whose last sighting is older than online_ms at now and write
   their ids (up to max) to out, lowest first; each goes offline once. Returns how many. */
int nodewatch_sweep(struct nodewatch *w, int64_t now, int64_t *out, int max);

/* Forget node id (deleted): no offline report follows. */
void nodewatch_forget(struct nodewatch *w, int64_t id);

#endif
