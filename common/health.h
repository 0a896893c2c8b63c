/* health — pure decision logic: vote tally, origin health machine, level health, level choice. */
#ifndef CDNCA_HEALTH_H
#define CDNCA_HEALTH_H

#include <stdint.h>

/* Highest level number; levels are 1..HEALTH_MAX_LEVEL, gaps allowed. */
#define HEALTH_MAX_LEVEL 16
/* Size of the `why` text of a decision, terminating NUL included. */
#define HEALTH_WHY_MAX 160

/* Health of an origin (the first three) or of a level (all four). HEALTH_EMPTY is for levels
 * only: no enabled origin, never chosen while another level has one. */
enum health_state {
  HEALTH_UNKNOWN = 0,
  HEALTH_HEALTHY = 1,
  HEALTH_UNHEALTHY = 2,
  HEALTH_EMPTY = 3
};

/* The verdict of one round for one origin. */
enum health_verdict { VERDICT_NONE = 0, VERDICT_SUCCESS = 1, VERDICT_FAILURE = 2 };

/* Who produced a verdict. */
/* Who decided a verdict; SOURCE_NONE: nobody yet (an origin's last_source before its first
   verdict, stored NULL). */
enum health_source {
  SOURCE_NONE = 0,
  SOURCE_NODES = 1,
  SOURCE_CHECKPOINTS = 2,
  SOURCE_CONTROL = 3,
};

enum health_failback { HEALTH_FAILBACK_AUTO = 0, HEALTH_FAILBACK_MANUAL = 1 };

enum health_action { HEALTH_STAY = 0, HEALTH_SWITCH = 1 };

/* Reason of a switch (the `reason` of level.switched). HEALTH_REASON_MANUAL is never produced by
 * health_decide; it exists so callers name the operator's switch with the same strings. */
enum health_reason {
  HEALTH_REASON_NONE = 0,
  HEALTH_REASON_AUTO_FAILOVER = 1,
  HEALTH_REASON_AUTO_FAILBACK = 2,
  HEALTH_REASON_MANUAL = 3,
  HEALTH_REASON_NO_ENABLED_ORIGINS = 4,
  HEALTH_REASON_DRILL = 5, /* a failover drill's switch or switch back (never health_decide's) */
};

/* The name tables (names.h): the words of the values, indexed by value, for field tables. */
#define HEALTH_STATES 4
extern const char *const health_state_names[HEALTH_STATES];
#define HEALTH_VERDICTS 3
extern const char *const health_verdict_names[HEALTH_VERDICTS];
#define HEALTH_SOURCES 4
extern const char *const health_source_names[HEALTH_SOURCES];
#define HEALTH_FAILBACKS 2
extern const char *const health_failback_names[HEALTH_FAILBACKS];

/* "unknown" | "healthy" | "unhealthy" | "empty"; "unknown" for a value out of range. Static. */
const char *health_state_to_string(enum health_state s);
/* Parse a state ("unknown", "healthy", "unhealthy", "empty"; exact): every word
   health_state_to_string writes reads back. 0, or -1 (out untouched). */
int health_state_from_string(const char *s, enum health_state *out);

/* "success" | "failure" | "" for VERDICT_NONE (the stored "no verdict"). Static. */
const char *health_verdict_to_string(enum health_verdict v);
/* Parse "success", "failure" or "" (VERDICT_NONE); 0, or -1 (out untouched). */
int health_verdict_from_string(const char *s, enum health_verdict *out);

/* "nodes" | "checkpoints" | "control"; "control" for a value out of range. Static. */
const char *health_source_to_string(enum health_source src);
/* Parse "nodes", "checkpoints", "control"; 0, or -1 (out untouched). */
int health_source_from_string(const char *s, enum health_source *out);

/* "auto" | "manual". Static. */
const char *health_failback_to_string(enum health_failback f);
/* Parse "auto" or "manual"; 0, or -1 (out untouched). */
int health_failback_from_string(const char *s, enum health_failback *out);

/* "stay" | "switch". Static. */
const char *health_action_to_string(enum health_action a);

/* "auto_failover" | "auto_failback" | "manual" | "no_enabled_origins" | "drill" | "" (NONE).
   Static. */
const char *health_reason_to_string(enum health_reason r);

/* Verdict of a vote: at least 2 votes in all and a strict majority (2-0, 2-1, 3-0 decide; 1-1,
 * 2-2, 1-0, 0-0 and negative counts give VERDICT_NONE). Checkpoint votes are added to the node
 * votes by the caller before tallying. */
enum health_verdict health_tally(int successes, int failures);

/* One origin's health state machine; plain data owned by the caller. */
struct health_origin {
  enum health_state state; /* HEALTH_UNKNOWN, HEALTH_HEALTHY or HEALTH_UNHEALTHY */
  int success_streak;      /* consecutive success verdicts (saturates at INT_MAX) */
  int failure_streak;      /* consecutive failure verdicts (saturates at INT_MAX) */
  int64_t changed_at_ms;   /* wall ms of the last state change (creation / re-enable too) */
};

/* Reset to unknown with no streaks, changed at now (creation, and when an origin is re-enabled). */
void health_origin_init(struct health_origin *o, int64_t now);

/* Apply one round's verdict at now. A success clears the failure streak and counts one more
 * success (a failure likewise); healthy_after consecutive successes make the origin healthy,
 * unhealthy_after consecutive failures make it unhealthy, from either other state. VERDICT_NONE
 * (no decision this round) changes nothing, streaks included. Thresholds below 1 act as 1.
 * Returns 1 when the state changed (changed_at_ms = now), else 0. */
int health_origin_apply(struct health_origin *o, enum health_verdict v, int healthy_after,
                        int unhealthy_after, int64_t now);

/* 1 when the current streak disagrees with the state (healthy with failures pending, unhealthy
 * with successes pending, unknown with any streak): the origin is due for a fast re-probe. */
int health_origin_suspect(const struct health_origin *o);

/* An origin as level health sees it; the caller fills an array of these. */
struct health_level_origin {
  int level;                /* 1..HEALTH_MAX_LEVEL; others are ignored by health_view_fill */
  int enabled;              /* 0 = ignored */
  enum health_state state;  /* the origin's state */
  int64_t healthy_since_ms; /* for a healthy origin: wall ms it became healthy */
};

/* Health of level `level` over n origins: HEALTH_HEALTHY if any enabled origin of it is healthy,
 * HEALTH_UNHEALTHY if every enabled one is unhealthy, HEALTH_EMPTY if it has none enabled,
 * else HEALTH_UNKNOWN. */
enum health_state health_level_of(const struct health_level_origin *o, int n, int level);

/* Health of level `level` with a healthy quorum k = min(min_healthy, enabled origins of the
 * level), min_healthy < 1 acting as 1: HEALTH_HEALTHY when at least k enabled origins are healthy,
 * HEALTH_UNHEALTHY when fewer than k are healthy or unknown, HEALTH_EMPTY with none enabled, else
 * HEALTH_UNKNOWN. min_healthy 1 is health_level_of exactly. */
enum health_state health_level_of_quorum(const struct health_level_origin *o, int n, int level,
                                         int min_healthy);

/* For a healthy level, the wall ms since which it has surely been healthy without a break: the
 * earliest healthy_since_ms among its healthy enabled origins. -1 when the level is not healthy. */
int64_t health_level_healthy_since(const struct health_level_origin *o, int n, int level);

/* The same under quorum min_healthy: the k-th earliest healthy_since_ms among the level's healthy
 * enabled origins (since then at least k were healthy). -1 when the level is not healthy. */
int64_t health_level_healthy_since_quorum(const struct health_level_origin *o, int n, int level,
                                          int min_healthy);

/* What health_decide needs to know about one site; plain data owned by the caller. */
struct health_site_view {
  int current_level; /* 1..HEALTH_MAX_LEVEL; anything else is treated as an empty level */
  enum health_failback failback;
  int64_t failback_hold_ms; /* auto failback waits until the earlier level was healthy this long */
  /* Health per level, indexed by level number ([0] unused). Zero means HEALTH_UNKNOWN: start
   * from health_view_init (all HEALTH_EMPTY) so missing levels read as gaps. */
  enum health_state level[HEALTH_MAX_LEVEL + 1];
  /* For each healthy level, the wall ms since which it has been healthy continuously. */
  int64_t healthy_since_ms[HEALTH_MAX_LEVEL + 1];
  int all_unhealthy_raised; /* site.all_levels_unhealthy already raised for this incident */
  int failback_notified;    /* origin.failback_available already emitted for this recovery */
  int level_min_healthy;    /* healthy quorum per level (health_level_of_quorum); 1 = the seed */
};

/* Reset v: current level 1, failback auto, hold 0, every level HEALTH_EMPTY, flags clear,
 * level_min_healthy 1. */
void health_view_init(struct health_site_view *v);

/* Fill v->level[1..16] and v->healthy_since_ms[1..16] from n origins (health_level_of_quorum and
 * health_level_healthy_since_quorum with v->level_min_healthy per level); the other fields of v
 * are left as they are. */
void health_view_fill(struct health_site_view *v, const struct health_level_origin *o, int n);

/* The outcome of health_decide. After acting on it the caller stores
 * all_unhealthy_raised = incident_open and failback_notified = failback_notified_next. */
struct health_decision {
  enum health_action action;
  int to_level;                /* the level to be on: current_level when staying */
  enum health_reason reason;   /* HEALTH_REASON_NONE when staying */
  int all_unhealthy;           /* every non-empty level is unhealthy right now */
  int raise_all_unhealthy;     /* raise site.all_levels_unhealthy (first round of an incident) */
  int raise_recovered;         /* raise site.recovered (a level is healthy after an incident) */
  int incident_open;           /* the flag to store: an all-unhealthy incident is still open */
  int failback_available;      /* manual failback: an earlier level than to_level is healthy */
  int failback_level;          /* that level (the lowest such), 0 when none */
  int emit_failback_available; /* emit origin.failback_available (once per recovery) */
  int failback_notified_next;  /* the flag to store (= failback_available) */
  char why[HEALTH_WHY_MAX];    /* the decision in words, never empty */
};

/* Decide the level for a site at now (wall ms) and fill *out; returns out->action.
 * Rules, in order of precedence:
 * 1. Current level empty: switch at once (reason no_enabled_origins). With auto failback, an
 *    earlier level that qualifies for failback (rule 4) is the target; otherwise the failover
 *    order of rule 2, and when no level is live, any non-empty level (higher ones first, nearest
 *    first, then lower ones, ascending). Every level empty: stay.
 * 2. Current level unhealthy: with auto failback, an earlier level qualifying under rule 4 wins
 *    (reason auto_failback). Otherwise failover (reason auto_failover) to the first of: healthy
 *    levels above the current one (ascending), unknown ones above (ascending), healthy ones below
 *    (ascending), unknown ones below (ascending). This applies in manual mode too: a dead level
 *    is never kept when a live one exists, even below the current one.
 * 3. Every non-empty level unhealthy: stay (a current empty level still switches, rule 1).
 *    raise_all_unhealthy once per incident; raise_recovered once when any level is healthy again
 *    (a level merely unknown neither raises nor ends the incident).
 * 4. Auto failback: current level healthy or unknown and an earlier level healthy: switch to the
 *    lowest earlier level healthy for at least failback_hold_ms (<= 0: at once); healthy_since
 *    later than now counts as 0 ms. Reason auto_failback. While the hold runs: stay.
 * 5. Manual failback: never switches back; failback_available/failback_level name the lowest
 *    healthy level before to_level (no hold), emit_failback_available when not yet notified.
 *    Auto mode never sets failback_available.
 * 6. Otherwise stay. */
enum health_action health_decide(const struct health_site_view *in, int64_t now,
                                 struct health_decision *out);

#endif
