/* heartbeat — POST /v1/node/heartbeat every interval (and soon after a new config is applied):
 * version, applied config seq, observations. */
#ifndef CDNCA_HEARTBEAT_H
#define CDNCA_HEARTBEAT_H

#include <cjson/cJSON.h>
#include <stdint.h>

struct ctl;
struct sync;
struct heartbeat;

/* Observations to report: a cJSON array of {"site_id","origin_id","requests","failures",
   "skipped"} (caller of the callback frees it), or NULL for none. */
typedef cJSON *(*heartbeat_obs_fn)(void *arg);

/* New heartbeat sender (ctl and sync not owned); NULL on OOM. */
struct heartbeat *heartbeat_new(struct ctl *ctl, struct sync *sync, int64_t interval_ms,
                                heartbeat_obs_fn obs, void *arg);

/* Start the thread (first heartbeat at once). 0 or -1. */
int heartbeat_start(struct heartbeat *hb);

/* Join the thread (set ctl->stop first). */
void heartbeat_join(struct heartbeat *hb);

/* Free (after heartbeat_join). NULLs *hb. */
void heartbeat_free(struct heartbeat **hb);

/* Heartbeats accepted (204) and failed so far, and the wall ms of the last accepted one. */
void heartbeat_stats(struct heartbeat *hb, int64_t *sent, int64_t *failed, int64_t *last_ok_wall);

/* Pure: the heartbeat body for version and seq, taking ownership of obs (may be NULL). Malloc'd
   text (caller frees) or NULL. Observations that are not well-formed objects are dropped. */
char *heartbeat_body(const char *version, int64_t seq, cJSON *obs);

#endif
