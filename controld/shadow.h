/* shadow — a site's shadow health policy at work (docs/design.md, Shadow health policies): the
   shadow state records (its origin machines, its level, its would-have switches), their field
   tables, and the pure comparison of its verdicts with the real ones. No SQL, no I/O. */
#ifndef CDNCA_SHADOW_H
#define CDNCA_SHADOW_H

#include <stdint.h>

#include "fields.h"
#include "health.h"

/* Would-have switches kept per site (the store prunes older ones) and shown by the API. */
#define SHADOW_SWITCHES_KEPT 100
#define SHADOW_SWITCHES_SHOWN 50

/* The shadow level machine of a site and its counters. */
struct shadow_site {
  int64_t site_id;
  int current_level; /* the level the shadow policy would be on */
  int all_unhealthy, failback_notified;
  int64_t rounds;  /* rounds with at least one shadow verdict */
  int64_t skipped; /* rounds whose shadow probes --probe-batch left out */
  int64_t since;   /* wall ms of its first round (0: none yet) */
  int64_t updated_at;
};

/* The shadow origin machine of an origin and its comparison with the real verdicts. */
struct shadow_origin {
  int64_t origin_id, site_id;
  enum health_state health;
  int success_streak, failure_streak;
  int64_t health_changed_at, healthy_since;
  enum health_verdict last_verdict, last_real;
  char last_error[256];
  int64_t compared;      /* rounds where both the shadow and the real verdict were decided */
  int64_t disagreements; /* of those, the ones where they differed */
};

/* A switch the shadow policy would have made (or, in a report, a real one). */
struct shadow_switch {
  int64_t id, site_id, at;
  int from_level, to_level;
  char reason[32];
  char why[HEALTH_WHY_MAX];
};

extern const struct field_def shadow_site_fields[];
extern const struct field_def shadow_origin_fields[];
extern const struct field_def shadow_switch_fields[];

/* A fresh origin machine: unknown, no streaks, no comparisons. */
void shadow_origin_init(struct shadow_origin *o, int64_t site_id, int64_t origin_id, int64_t now);

/* One round of origin o at now: the shadow verdict drives its machine (health_origin_apply with
   the shadow thresholds; healthy_since follows a change to healthy), and the pair is compared
   when both verdicts were decided (compared + 1, disagreements + 1 when they differ). error is
   the shadow failure's evidence (NULL or "" = none). Returns 1 when the shadow state changed. */
int shadow_origin_round(struct shadow_origin *o, enum health_verdict shadow,
                        enum health_verdict real, const char *error, int healthy_after,
                        int unhealthy_after, int64_t now);

/* The agreement of a site's origins. */
struct shadow_totals {
  int64_t compared, agreements, disagreements;
  double agreement; /* agreements / compared; -1 when nothing was compared */
};

/* Sum n origins' comparisons into t. */
void shadow_totals(const struct shadow_origin *o, int n, struct shadow_totals *t);

/* Keep of sw[0..n) (newest first) the switches at or after since: the count kept (a prefix). */
int shadow_switches_since(const struct shadow_switch *sw, int n, int64_t since);

#endif
