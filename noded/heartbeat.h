/* heartbeat — POST /v1/node/heartbeat every interval (and soon after a new config is applied):
 * version, applied config seq, observations. */
#ifndef CDNCA_HEARTBEAT_H
#define CDNCA_HEARTBEAT_H

#include <cjson/cJSON.h>
#include <stddef.h>
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

/* Bytes of observations one heartbeat carries at most: controld takes bodies of up to 1 MiB. */
#define HEARTBEAT_OBS_BUDGET (900 * 1024)

/* What controld has been told, so that a heartbeat carries only what changed: an origin's
   observation goes when controld has not acknowledged this very observation (its counters,
   site and flags, by a hash of its text), and always while the origin is skipped (controld
   reads a skip as current only while it is reported). Its counters are totals, so an origin
   left out loses nothing; one left out by the budget goes in a later beat, the next beat
   starting after the last origin sent. A fleet's thousands of idle origins (backup levels) cost
   a line each every HEARTBEAT_REFRESH_BEATS beats, and a node with more changes than one body
   holds spreads them over several beats. An acknowledgement holds for refresh_ms
   (HEARTBEAT_REFRESH_BEATS heartbeat intervals): then the origin goes again, changed or not, so
   that a controld that forgot what it acknowledged (its database restored from a backup) has every
   origin's row back within that time. */
struct hb_seen {
  int64_t origin_id;
  uint64_t hash;
  int64_t at; /* monotonic ms of the beat that sent it (a step of the wall clock must not hold
                 a refresh off) */
  int send;   /* in the pending beat */
};

/* For how many heartbeat intervals an acknowledged observation is not sent again unchanged
   (10 minutes at the default 10 s). */
#define HEARTBEAT_REFRESH_BEATS 60
struct hb_memo {
  struct hb_seen *acked; /* by origin id */
  int n_acked;
  struct hb_seen *pending; /* every current origin of the beat being sent, by origin id */
  int n_pending;
  int64_t cursor;     /* the last origin sent when the budget ended a beat, else 0 */
  int64_t refresh_ms; /* how long an acknowledgement holds (the owner sets it) */
};

/* Pure: from all current observations obs (taken), the array to send at monotonic ms now (within
   budget bytes of text), noting the beat in m->pending. NULL only when out of memory (nothing
   noted). */
cJSON *heartbeat_pick(struct hb_memo *m, cJSON *obs, size_t budget, int64_t now);

/* Pure: controld accepted the pending beat (ok) or not; either way the pending one is over. The
   acknowledged ones replace what was known of their origins; origins no longer observed are
   forgotten. */
void heartbeat_acked(struct hb_memo *m, int ok);

/* Free what m holds. */
void heartbeat_memo_fini(struct hb_memo *m);

#endif
