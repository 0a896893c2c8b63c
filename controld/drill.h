/* drill — failover drills (docs/design.md, Drills): the drill record and its field tables, the
   preconditions of a start, and the pure state machine the engine runs every second on a
   scheduled or running drill. No SQL, no I/O: every decision takes the time. */
#ifndef CDNCA_DRILL_H
#define CDNCA_DRILL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "fields.h"

/* Bounds of a drill's options (docs/design.md, Drills). */
#define DRILL_DURATION_MS_MIN 10000
#define DRILL_DURATION_MS_MAX 86400000
#define DRILL_EVERY_MS_MIN 3600000
#define DRILL_EVERY_MS_MAX (366LL * 86400000LL)
#define DRILL_MIN_REQUESTS_MAX 100000000
/* how far ahead start_at may be */
#define DRILL_START_AHEAD_MAX (366LL * 86400000LL)
/* scheduled (not yet started) drills a site may have: a create beyond is refused too_many_drills */
#define DRILL_SCHEDULED_MAX 20
/* the bound of a drill's counted sums (requests, failures, latency sum and count): a delta from a
   heartbeat is clamped to it and a sum saturates at it, so two never overflow a 64-bit integer */
#define DRILL_SUM_MAX (INT64_MAX / 4)

enum drill_state {
  DRILL_SCHEDULED = 0, /* waits for start_at */
  DRILL_RUNNING = 1,   /* switched to to_level, watched */
  DRILL_FINISHED = 2,  /* result says how */
};
#define DRILL_STATES 3
extern const char *const drill_state_names[DRILL_STATES];

enum drill_result {
  DRILL_RESULT_NONE = 0, /* not finished (null) */
  DRILL_PASSED = 1,      /* ran duration_ms, switched back */
  DRILL_FAILED = 2,      /* could not run: a precondition did not hold at start_at */
  DRILL_ABORTED = 3,     /* the target level failed visitors or turned unhealthy: switched back */
  DRILL_CANCELLED = 4,   /* an incident opened, the site left the level, or the operator */
};
#define DRILL_RESULTS 5
extern const char *const drill_result_names[DRILL_RESULTS];

/* A drill as stored (the drills table) and shown. */
struct drill_rec {
  int64_t id, site_id;
  int from_level, to_level;
  int64_t duration_ms;
  double max_failure_ratio;
  int64_t min_requests;
  int64_t start_at; /* when it starts (epoch ms) */
  int64_t every_ms; /* 0 = once */
  int state;        /* enum drill_state */
  int result;       /* enum drill_result */
  char why[256];    /* the reason of the result in words, or a 409 code for failed */
  char created_by[128];
  int64_t created_at, started_at, finished_at;
  int64_t requests, failures;               /* the target level's, over the drill */
  int64_t window_requests, window_failures; /* since the last window (min_requests) */
  int64_t next_id;                          /* the drill every_ms scheduled after this one */
};

/* The record's one table (API out, columns); the create body's rows carry FORM_IN. */
extern const struct field_def drill_fields[];

/* Read a create body into *d (defaults first: duration 600000, ratio 0.02, min_requests 100,
   start_at now, every_ms none) and check it: 0, or -1 with *err (400/422 with the field). Levels
   are checked by the caller against the site (drill_check_level). */
int drill_apply(const cJSON *obj, struct drill_rec *d, int64_t now, struct field_err *err);

/* 0 when level can be drilled to on a site whose origins sit on levels[0..n) (enabled ones):
   greater than 1 and holding an enabled origin; else -1 with *err (422, field "to_level"). */
int drill_check_level(int to_level, const int *levels, int n, struct field_err *err);

/* What a start needs of the site (docs/design.md, Drills). */
struct drill_site {
  int current_level, first_level; /* first_level: the first level with an enabled origin */
  int current_healthy;            /* the current level is healthy */
  int target_healthy;             /* the drill's level is healthy */
  int incident_open;              /* the site has an active incident */
  int drill_running;              /* another drill of the site is running */
};

/* The 409 reason a start is refused for, or NULL when it may start: drill_running,
   incident_open, not_on_first_level, level_unhealthy (in that order). Static strings. */
const char *drill_precondition(const struct drill_site *s);

/* What the engine sees of a running drill each second. */
struct drill_obs {
  struct drill_site site;
  int64_t requests, failures; /* the target level's since the last window */
};

enum drill_action {
  DRILL_WAIT = 0,   /* scheduled, not yet */
  DRILL_START = 1,  /* switch to to_level (reason drill), state running */
  DRILL_FAIL = 2,   /* start_at came and a precondition does not hold: finished, failed */
  DRILL_GO_ON = 3,  /* running; a window with min_requests starts a new one */
  DRILL_ABORT = 4,  /* switch back at once: aborted */
  DRILL_PASS = 5,   /* duration_ms ran: switch back, passed */
  DRILL_CANCEL = 6, /* an incident opened or the site left the level: cancelled, no switch back */
};

/* The decision on drill d at now given o. why (may be NULL) gets the reason in words (for
   DRILL_FAIL the 409 reason code). */
enum drill_action drill_decide(const struct drill_rec *d, const struct drill_obs *o, int64_t now,
                               char *why, size_t cap);

/* When the drill that follows d starts (every_ms after d's start_at, the first such time after
   now, so missed runs are not made up); 0 when d does not repeat. */
int64_t drill_next_start(const struct drill_rec *d, int64_t now);

/* v clamped to [0, DRILL_SUM_MAX]: a heartbeat's delta as a drill's sums may add it. Pure. */
int64_t drill_sum_clamp(int64_t v);

#endif
