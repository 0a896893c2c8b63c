/* shadow — the shadow state records and their comparison (see shadow.h). */
#include "shadow.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define SS(m)                                                                                      \
  .offset = offsetof(struct shadow_site, m), .size = sizeof(((struct shadow_site *)0)->m)
const struct field_def shadow_site_fields[] = {
    {.name = "site_id", .column = "site_id", .type = FIELD_INT, SS(site_id)},
    {.name = "current_level", .column = "current_level", .type = FIELD_INT, SS(current_level)},
    {.name = "all_unhealthy", .column = "all_unhealthy", .type = FIELD_BOOL, SS(all_unhealthy)},
    {.name = "failback_notified",
     .column = "failback_notified",
     .type = FIELD_BOOL,
     SS(failback_notified)},
    {.name = "rounds", .column = "rounds", .type = FIELD_INT, SS(rounds)},
    {.name = "skipped", .column = "skipped", .type = FIELD_INT, SS(skipped)},
    {.name = "since", .column = "since", .type = FIELD_INT, SS(since)},
    {.name = "updated_at", .column = "updated_at", .type = FIELD_INT, SS(updated_at)},
    {.name = NULL},
};
#undef SS

#define SO(m)                                                                                      \
  .offset = offsetof(struct shadow_origin, m), .size = sizeof(((struct shadow_origin *)0)->m)
const struct field_def shadow_origin_fields[] = {
    {.name = "origin_id", .column = "origin_id", .type = FIELD_INT, SO(origin_id)},
    {.name = "site_id", .column = "site_id", .type = FIELD_INT, SO(site_id)},
    {.name = "health",
     .column = "health",
     .type = FIELD_NAMED,
     SO(health),
     FIELD_NAMES(health_state_names)},
    {.name = "success_streak", .column = "success_streak", .type = FIELD_INT, SO(success_streak)},
    {.name = "failure_streak", .column = "failure_streak", .type = FIELD_INT, SO(failure_streak)},
    {.name = "health_changed_at",
     .column = "health_changed_at",
     .type = FIELD_INT,
     SO(health_changed_at)},
    {.name = "healthy_since", .column = "healthy_since", .type = FIELD_INT, SO(healthy_since)},
    {.name = "last_verdict",
     .column = "last_verdict",
     .type = FIELD_NAMED,
     .flags = FIELD_NULLABLE,
     SO(last_verdict),
     FIELD_NAMES(health_verdict_names)},
    {.name = "last_real",
     .column = "last_real",
     .type = FIELD_NAMED,
     .flags = FIELD_NULLABLE,
     SO(last_real),
     FIELD_NAMES(health_verdict_names)},
    {.name = "last_error", .column = "last_error", .type = FIELD_STR, SO(last_error)},
    {.name = "compared", .column = "compared", .type = FIELD_INT, SO(compared)},
    {.name = "disagreements", .column = "disagreements", .type = FIELD_INT, SO(disagreements)},
    {.name = NULL},
};
#undef SO

#define SW(m)                                                                                      \
  .offset = offsetof(struct shadow_switch, m), .size = sizeof(((struct shadow_switch *)0)->m)
const struct field_def shadow_switch_fields[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, SW(id)},
    {.name = "site_id", .column = "site_id", .type = FIELD_INT, SW(site_id)},
    {.name = "at", .column = "at", .type = FIELD_INT, SW(at)},
    {.name = "from_level", .column = "from_level", .type = FIELD_INT, SW(from_level)},
    {.name = "to_level", .column = "to_level", .type = FIELD_INT, SW(to_level)},
    {.name = "reason", .column = "reason", .type = FIELD_STR, SW(reason)},
    {.name = "why", .column = "why", .type = FIELD_STR, SW(why)},
    {.name = NULL},
};
#undef SW

void shadow_origin_init(struct shadow_origin *o, int64_t site_id, int64_t origin_id, int64_t now) {
  memset(o, 0, sizeof *o);
  o->site_id = site_id;
  o->origin_id = origin_id;
  o->health = HEALTH_UNKNOWN;
  o->health_changed_at = now;
}

int shadow_origin_round(struct shadow_origin *o, enum health_verdict shadow,
                        enum health_verdict real, const char *error, int healthy_after,
                        int unhealthy_after, int64_t now) {
  struct health_origin m;
  int changed;
  m.state = o->health;
  m.success_streak = o->success_streak;
  m.failure_streak = o->failure_streak;
  m.changed_at_ms = o->health_changed_at;
  changed = health_origin_apply(&m, shadow, healthy_after, unhealthy_after, now);
  o->health = m.state;
  o->success_streak = m.success_streak;
  o->failure_streak = m.failure_streak;
  o->health_changed_at = m.changed_at_ms;
  if (changed) o->healthy_since = m.state == HEALTH_HEALTHY ? now : 0;
  if (shadow != VERDICT_NONE) {
    o->last_verdict = shadow;
    snprintf(o->last_error, sizeof o->last_error, "%s",
             shadow == VERDICT_FAILURE && error ? error : "");
  }
  if (real != VERDICT_NONE) o->last_real = real;
  if (shadow != VERDICT_NONE && real != VERDICT_NONE) {
    o->compared++;
    if (shadow != real) o->disagreements++;
  }
  return changed;
}

void shadow_totals(const struct shadow_origin *o, int n, struct shadow_totals *t) {
  memset(t, 0, sizeof *t);
  for (int i = 0; i < n; i++) {
    t->compared += o[i].compared;
    t->disagreements += o[i].disagreements;
  }
  t->agreements = t->compared - t->disagreements;
  t->agreement = t->compared > 0 ? (double)t->agreements / (double)t->compared : -1;
}

int shadow_switches_since(const struct shadow_switch *sw, int n, int64_t since) {
  int k = 0;
  while (k < n && sw[k].at >= since)
    k++;
  return k;
}
