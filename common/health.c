/* health — pure decision logic: vote tally, origin health machine, level health, level choice. */
#include "health.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "names.h"

/* ---- the name tables: one per enum, indexed by value ---- */

const char *const health_state_names[HEALTH_STATES] = {
    [HEALTH_UNKNOWN] = "unknown",
    [HEALTH_HEALTHY] = "healthy",
    [HEALTH_UNHEALTHY] = "unhealthy",
    [HEALTH_EMPTY] = "empty",
};

const char *const health_verdict_names[HEALTH_VERDICTS] = {
    [VERDICT_NONE] = "", /* the stored "no verdict" */
    [VERDICT_SUCCESS] = "success",
    [VERDICT_FAILURE] = "failure",
};

const char *const health_source_names[HEALTH_SOURCES] = {
    [SOURCE_NONE] = "", /* the stored "no source yet" */
    [SOURCE_NODES] = "nodes",
    [SOURCE_CHECKPOINTS] = "checkpoints",
    [SOURCE_CONTROL] = "control",
};

const char *const health_failback_names[HEALTH_FAILBACKS] = {
    [HEALTH_FAILBACK_AUTO] = "auto",
    [HEALTH_FAILBACK_MANUAL] = "manual",
};

static const char *const action_names[] = {
    [HEALTH_STAY] = "stay",
    [HEALTH_SWITCH] = "switch",
};

static const char *const reason_names[] = {
    [HEALTH_REASON_NONE] = "",
    [HEALTH_REASON_AUTO_FAILOVER] = "auto_failover",
    [HEALTH_REASON_AUTO_FAILBACK] = "auto_failback",
    [HEALTH_REASON_MANUAL] = "manual",
    [HEALTH_REASON_NO_ENABLED_ORIGINS] = "no_enabled_origins",
    [HEALTH_REASON_DRILL] = "drill",
};

/* Parse s through a table into *out (an enum of int size); 0, or -1 (out untouched). */
static int parse(const char *const *table, int n, const char *s, int *out) {
  int v = names_value(table, n, s);
  if (v < 0 || !out) return -1;
  *out = v;
  return 0;
}

const char *health_state_to_string(enum health_state s) {
  return names_word(NAMES(health_state_names), (int)s, "unknown");
}

int health_state_from_string(const char *s, enum health_state *out) {
  int v;
  if (parse(NAMES(health_state_names), s, &v) < 0 || !out) return -1;
  *out = (enum health_state)v;
  return 0;
}

const char *health_verdict_to_string(enum health_verdict v) {
  return names_word(NAMES(health_verdict_names), (int)v, "");
}

int health_verdict_from_string(const char *s, enum health_verdict *out) {
  int v;
  if (parse(NAMES(health_verdict_names), s, &v) < 0 || !out) return -1;
  *out = (enum health_verdict)v;
  return 0;
}

const char *health_source_to_string(enum health_source src) {
  return names_word(NAMES(health_source_names), (int)src, "control");
}

int health_source_from_string(const char *s, enum health_source *out) {
  int v;
  if (parse(NAMES(health_source_names), s, &v) < 0 || !out) return -1;
  *out = (enum health_source)v;
  return 0;
}

const char *health_failback_to_string(enum health_failback f) {
  return names_word(NAMES(health_failback_names), (int)f, "auto");
}

int health_failback_from_string(const char *s, enum health_failback *out) {
  int v;
  if (parse(NAMES(health_failback_names), s, &v) < 0 || !out) return -1;
  *out = (enum health_failback)v;
  return 0;
}

const char *health_action_to_string(enum health_action a) {
  return names_word(NAMES(action_names), (int)a, "stay");
}

const char *health_reason_to_string(enum health_reason r) {
  return names_word(NAMES(reason_names), (int)r, "");
}

enum health_verdict health_tally(int successes, int failures) {
  enum health_verdict v = VERDICT_NONE;
  long long s = successes, f = failures, total;
  if (s < 0 || f < 0) goto out;
  total = s + f;
  if (total < 2) goto out;
  if (2 * s > total) {
    v = VERDICT_SUCCESS;
  } else if (2 * f > total) {
    v = VERDICT_FAILURE;
  }
out:
  return v;
}

void health_origin_init(struct health_origin *o, int64_t now) {
  memset(o, 0, sizeof *o);
  o->state = HEALTH_UNKNOWN;
  o->changed_at_ms = now;
}

static void bump(int *streak) {
  if (*streak < INT_MAX) (*streak)++;
}

int health_origin_apply(struct health_origin *o, enum health_verdict v, int healthy_after,
                        int unhealthy_after, int64_t now) {
  int changed = 0;
  enum health_state next = o->state;
  if (healthy_after < 1) healthy_after = 1;
  if (unhealthy_after < 1) unhealthy_after = 1;
  if (v == VERDICT_SUCCESS) {
    o->failure_streak = 0;
    bump(&o->success_streak);
    if (o->success_streak >= healthy_after) next = HEALTH_HEALTHY;
  } else if (v == VERDICT_FAILURE) {
    o->success_streak = 0;
    bump(&o->failure_streak);
    if (o->failure_streak >= unhealthy_after) next = HEALTH_UNHEALTHY;
  } else {
    goto out;
  }
  if (next != o->state) {
    o->state = next;
    o->changed_at_ms = now;
    changed = 1;
  }
out:
  return changed;
}

int health_origin_suspect(const struct health_origin *o) {
  switch (o->state) {
  case HEALTH_HEALTHY:
    return o->failure_streak > 0;
  case HEALTH_UNHEALTHY:
    return o->success_streak > 0;
  default:
    return o->success_streak > 0 || o->failure_streak > 0;
  }
}

/* The quorum of a level with `enabled` enabled origins: min_healthy (< 1 acts as 1), at most
 * `enabled` (a level with fewer enabled origins needs all of them). */
static int quorum_of(int min_healthy, int enabled) {
  int k = min_healthy < 1 ? 1 : min_healthy;
  return k > enabled ? enabled : k;
}

enum health_state health_level_of_quorum(const struct health_level_origin *o, int n, int level,
                                         int min_healthy) {
  int enabled = 0, unknown = 0, healthy = 0, k;
  enum health_state st = HEALTH_EMPTY;
  for (int i = 0; i < n; i++) {
    if (o[i].level != level || !o[i].enabled) continue;
    enabled++;
    if (o[i].state == HEALTH_HEALTHY)
      healthy++;
    else if (o[i].state != HEALTH_UNHEALTHY)
      unknown++;
  }
  if (enabled == 0) goto out;
  k = quorum_of(min_healthy, enabled);
  if (healthy >= k)
    st = HEALTH_HEALTHY;
  else if (healthy + unknown < k)
    st = HEALTH_UNHEALTHY;
  else
    st = HEALTH_UNKNOWN;
out:
  return st;
}

enum health_state health_level_of(const struct health_level_origin *o, int n, int level) {
  return health_level_of_quorum(o, n, level, 1);
}

int64_t health_level_healthy_since_quorum(const struct health_level_origin *o, int n, int level,
                                          int min_healthy) {
  int enabled = 0, k;
  int64_t since = -1;
  if (health_level_of_quorum(o, n, level, min_healthy) != HEALTH_HEALTHY) return -1;
  for (int i = 0; i < n; i++)
    if (o[i].level == level && o[i].enabled) enabled++;
  k = quorum_of(min_healthy, enabled);
  /* the k-th earliest healthy_since among the healthy origins: since then at least k were up */
  for (int i = 0; i < n; i++) {
    int less = 0, le = 0;
    if (o[i].level != level || !o[i].enabled || o[i].state != HEALTH_HEALTHY) continue;
    for (int j = 0; j < n; j++) {
      if (o[j].level != level || !o[j].enabled || o[j].state != HEALTH_HEALTHY) continue;
      if (o[j].healthy_since_ms < o[i].healthy_since_ms) less++;
      if (o[j].healthy_since_ms <= o[i].healthy_since_ms) le++;
    }
    if (less < k && k <= le) {
      since = o[i].healthy_since_ms;
      break;
    }
  }
  return since;
}

int64_t health_level_healthy_since(const struct health_level_origin *o, int n, int level) {
  return health_level_healthy_since_quorum(o, n, level, 1);
}

void health_view_init(struct health_site_view *v) {
  memset(v, 0, sizeof *v);
  v->current_level = 1;
  v->failback = HEALTH_FAILBACK_AUTO;
  v->level_min_healthy = 1;
  for (int l = 0; l <= HEALTH_MAX_LEVEL; l++) {
    v->level[l] = HEALTH_EMPTY;
    v->healthy_since_ms[l] = -1;
  }
}

void health_view_fill(struct health_site_view *v, const struct health_level_origin *o, int n) {
  for (int l = 1; l <= HEALTH_MAX_LEVEL; l++) {
    v->level[l] = health_level_of_quorum(o, n, l, v->level_min_healthy);
    v->healthy_since_ms[l] = health_level_healthy_since_quorum(o, n, l, v->level_min_healthy);
  }
}

/* Health of level l as the rules see it: out-of-range levels and unknown values are empty. */
static enum health_state lvl(const struct health_site_view *in, int l) {
  enum health_state s;
  if (l < 1 || l > HEALTH_MAX_LEVEL) return HEALTH_EMPTY;
  s = in->level[l];
  if (s != HEALTH_UNKNOWN && s != HEALTH_HEALTHY && s != HEALTH_UNHEALTHY) return HEALTH_EMPTY;
  return s;
}

/* The first level in [from, to] (ascending) whose health is want, or 0. */
static int first_in(const struct health_site_view *in, int from, int to, enum health_state want) {
  if (from < 1) from = 1;
  if (to > HEALTH_MAX_LEVEL) to = HEALTH_MAX_LEVEL;
  for (int l = from; l <= to; l++)
    if (lvl(in, l) == want) return l;
  return 0;
}

/* Failover order from cur: healthy above, unknown above, healthy below, unknown below. 0 = none. */
static int failover_target(const struct health_site_view *in, int cur) {
  int l = first_in(in, cur + 1, HEALTH_MAX_LEVEL, HEALTH_HEALTHY);
  if (!l) l = first_in(in, cur + 1, HEALTH_MAX_LEVEL, HEALTH_UNKNOWN);
  if (!l) l = first_in(in, 1, cur - 1, HEALTH_HEALTHY);
  if (!l) l = first_in(in, 1, cur - 1, HEALTH_UNKNOWN);
  return l;
}

/* Milliseconds level l has been healthy at now (0 when its since lies ahead or is unset). */
static int64_t healthy_for(const struct health_site_view *in, int l, int64_t now) {
  int64_t since = in->healthy_since_ms[l];
  if (since < 0 || since > now) return 0;
  return now - since;
}

/* Auto failback target before cur: the lowest healthy level whose hold is met, 0 = none.
 * *pending is set to the lowest healthy earlier level whose hold is still running (0 = none). */
static int failback_target(const struct health_site_view *in, int cur, int64_t now, int *pending) {
  int last = cur - 1;
  *pending = 0;
  for (int l = 1; l <= last; l++) {
    if (lvl(in, l) != HEALTH_HEALTHY) continue;
    if (in->failback_hold_ms <= 0 || healthy_for(in, l, now) >= in->failback_hold_ms) return l;
    if (!*pending) *pending = l;
  }
  return 0;
}

/* Any non-empty level, nearest above first (ascending), then below (ascending). 0 = none. */
static int any_nonempty(const struct health_site_view *in, int cur) {
  for (int l = cur + 1; l <= HEALTH_MAX_LEVEL; l++)
    if (lvl(in, l) != HEALTH_EMPTY) return l;
  for (int l = 1; l < cur; l++)
    if (lvl(in, l) != HEALTH_EMPTY) return l;
  return 0;
}

/* Duration in words: "45s", "2.5s", "300ms". */
static void fmt_dur(char *buf, size_t cap, int64_t ms) {
  if (ms < 0) ms = 0;
  if (ms < 1000)
    snprintf(buf, cap, "%lldms", (long long)ms);
  else if (ms % 1000 == 0 || ms >= 60000)
    snprintf(buf, cap, "%llds", (long long)(ms / 1000));
  else
    snprintf(buf, cap, "%lld.%llds", (long long)(ms / 1000), (long long)(ms % 1000 / 100));
}

enum health_action health_decide(const struct health_site_view *in, int64_t now,
                                 struct health_decision *out) {
  int cur = in->current_level;
  /* cur's place in the level order, kept in range so cur + 1 and cur - 1 never overflow */
  int pos = cur < 0 ? 0 : (cur > HEALTH_MAX_LEVEL ? HEALTH_MAX_LEVEL + 1 : cur);
  enum health_state cs = lvl(in, cur);
  int n_nonempty = 0, n_unhealthy = 0, any_healthy = 0;
  int target = 0, pending = 0, fb = 0;
  char d1[24], d2[24];

  memset(out, 0, sizeof *out);
  out->action = HEALTH_STAY;
  out->to_level = cur;
  out->reason = HEALTH_REASON_NONE;

  for (int l = 1; l <= HEALTH_MAX_LEVEL; l++) {
    enum health_state s = lvl(in, l);
    if (s == HEALTH_EMPTY) continue;
    n_nonempty++;
    if (s == HEALTH_UNHEALTHY) n_unhealthy++;
    if (s == HEALTH_HEALTHY) any_healthy = 1;
  }

  /* rule 3: the incident flags, whatever the level choice */
  out->all_unhealthy = n_nonempty > 0 && n_unhealthy == n_nonempty;
  out->raise_all_unhealthy = out->all_unhealthy && !in->all_unhealthy_raised;
  out->raise_recovered = in->all_unhealthy_raised && any_healthy;
  out->incident_open = (in->all_unhealthy_raised || out->all_unhealthy) && !out->raise_recovered;

  if (in->failback == HEALTH_FAILBACK_AUTO) fb = failback_target(in, pos, now, &pending);

  if (cs == HEALTH_EMPTY) {
    /* rule 1 */
    if (n_nonempty == 0) {
      snprintf(out->why, sizeof out->why, "no level has an enabled origin; staying on level %d",
               cur);
      goto manual;
    }
    target = fb ? fb : failover_target(in, pos);
    if (!target) target = any_nonempty(in, pos);
    out->action = HEALTH_SWITCH;
    out->to_level = target;
    out->reason = HEALTH_REASON_NO_ENABLED_ORIGINS;
    snprintf(out->why, sizeof out->why,
             "level %d has no enabled origin; switching to level %d (%s)", cur, target,
             health_state_to_string(lvl(in, target)));
    goto manual;
  }

  if (cs == HEALTH_UNHEALTHY) {
    /* rule 2 (auto failback first), then rule 3 */
    if (fb) {
      out->action = HEALTH_SWITCH;
      out->to_level = fb;
      out->reason = HEALTH_REASON_AUTO_FAILBACK;
      snprintf(out->why, sizeof out->why,
               "level %d is unhealthy; switching back to level %d (healthy)", cur, fb);
      goto manual;
    }
    target = failover_target(in, pos);
    if (!target) {
      snprintf(out->why, sizeof out->why,
               "every level is unhealthy; staying on level %d (no live level to switch to)", cur);
      goto manual;
    }
    out->action = HEALTH_SWITCH;
    out->to_level = target;
    out->reason = HEALTH_REASON_AUTO_FAILOVER;
    if (target < cur)
      snprintf(out->why, sizeof out->why,
               "level %d is unhealthy and no level above it is live; switching to level %d (%s)",
               cur, target, health_state_to_string(lvl(in, target)));
    else
      snprintf(out->why, sizeof out->why, "level %d is unhealthy; switching to level %d (%s)", cur,
               target, health_state_to_string(lvl(in, target)));
    goto manual;
  }

  /* current level healthy or unknown: rule 4, else rule 6 */
  if (fb) {
    out->action = HEALTH_SWITCH;
    out->to_level = fb;
    out->reason = HEALTH_REASON_AUTO_FAILBACK;
    if (in->failback_hold_ms > 0) {
      fmt_dur(d1, sizeof d1, healthy_for(in, fb, now));
      fmt_dur(d2, sizeof d2, in->failback_hold_ms);
      snprintf(out->why, sizeof out->why,
               "level %d healthy for %s, hold %s; switching back from level %d", fb, d1, d2, cur);
    } else {
      snprintf(out->why, sizeof out->why, "level %d is healthy again; switching back from level %d",
               fb, cur);
    }
    goto manual;
  }
  if (pending) {
    fmt_dur(d1, sizeof d1, healthy_for(in, pending, now));
    fmt_dur(d2, sizeof d2, in->failback_hold_ms);
    snprintf(out->why, sizeof out->why, "staying on level %d: level %d healthy for %s, hold %s",
             cur, pending, d1, d2);
    goto manual;
  }
  if (cs == HEALTH_HEALTHY)
    snprintf(out->why, sizeof out->why, "level %d is healthy; staying", cur);
  else
    snprintf(out->why, sizeof out->why, "level %d is unknown (not confirmed down); staying", cur);

manual:
  /* rule 5: relative to the level the site ends on */
  if (in->failback == HEALTH_FAILBACK_MANUAL) {
    int end = out->action == HEALTH_SWITCH ? out->to_level : pos;
    int l = first_in(in, 1, end - 1, HEALTH_HEALTHY);
    if (l) {
      size_t len = strlen(out->why);
      out->failback_available = 1;
      out->failback_level = l;
      out->emit_failback_available = !in->failback_notified;
      if (out->action == HEALTH_STAY)
        snprintf(out->why, sizeof out->why,
                 "staying on level %d (manual failback): level %d is healthy, switch back by hand",
                 cur, l);
      else if (len < sizeof out->why)
        snprintf(out->why + len, sizeof out->why - len,
                 "; level %d is healthy, switch back by hand", l);
    }
  }
  out->failback_notified_next = out->failback_available;
  return out->action;
}
