/* drill — the drill record, its preconditions and its state machine (see drill.h). */
#include "drill.h"

#include <stdio.h>
#include <string.h>

const char *const drill_state_names[DRILL_STATES] = {
    [DRILL_SCHEDULED] = "scheduled",
    [DRILL_RUNNING] = "running",
    [DRILL_FINISHED] = "finished",
};

const char *const drill_result_names[DRILL_RESULTS] = {
    [DRILL_RESULT_NONE] = "",    [DRILL_PASSED] = "passed",       [DRILL_FAILED] = "failed",
    [DRILL_ABORTED] = "aborted", [DRILL_CANCELLED] = "cancelled",
};

#define M(m) .offset = offsetof(struct drill_rec, m), .size = sizeof(((struct drill_rec *)0)->m)
#define OUT(n)                                                                                     \
  { .name = #n, .column = #n, .type = FIELD_INT, M(n), .forms = FORM_OUT }
#define TIME(n)                                                                                    \
  { .name = #n, .column = #n, .type = FIELD_INT, .flags = FIELD_NULLABLE, M(n), .forms = FORM_OUT }
const struct field_def drill_fields[] = {
    OUT(id),
    OUT(site_id),
    OUT(from_level),
    {.name = "to_level",
     .column = "to_level",
     .type = FIELD_INT,
     .flags = FIELD_REQUIRED,
     M(to_level),
     .min = 2,
     .max = 100,
     .forms = FORM_IN | FORM_OUT},
    {.name = "duration_ms",
     .column = "duration_ms",
     .type = FIELD_INT,
     M(duration_ms),
     .min = DRILL_DURATION_MS_MIN,
     .max = DRILL_DURATION_MS_MAX,
     .def = 600000,
     .forms = FORM_IN | FORM_OUT},
    {.name = "max_failure_ratio",
     .column = "max_failure_ratio",
     .type = FIELD_DOUBLE,
     M(max_failure_ratio),
     .min = 0,
     .max = 1,
     .forms = FORM_IN | FORM_OUT},
    {.name = "min_requests",
     .column = "min_requests",
     .type = FIELD_INT,
     M(min_requests),
     .min = 1,
     .max = DRILL_MIN_REQUESTS_MAX,
     .def = 100,
     .forms = FORM_IN | FORM_OUT},
    {.name = "start_at",
     .column = "start_at",
     .type = FIELD_INT,
     .flags = FIELD_NULLABLE,
     M(start_at),
     .min = 0,
     .max = INT64_MAX,
     .forms = FORM_IN | FORM_OUT},
    {.name = "every_ms",
     .column = "every_ms",
     .type = FIELD_INT,
     .flags = FIELD_NULLABLE,
     M(every_ms),
     .min = 0,
     .max = DRILL_EVERY_MS_MAX,
     .forms = FORM_IN | FORM_OUT},
    {.name = "state",
     .column = "state",
     .type = FIELD_NAMED,
     M(state),
     FIELD_NAMES(drill_state_names),
     .forms = FORM_OUT},
    {.name = "result",
     .column = "result",
     .type = FIELD_NAMED,
     .flags = FIELD_NULLABLE,
     M(result),
     FIELD_NAMES(drill_result_names),
     .forms = FORM_OUT},
    {.name = "why",
     .column = "why",
     .type = FIELD_STR,
     .flags = FIELD_NULLABLE,
     M(why),
     .forms = FORM_OUT},
    {.name = "created_by",
     .column = "created_by",
     .type = FIELD_STR,
     .flags = FIELD_NULLABLE,
     M(created_by),
     .forms = FORM_OUT},
    TIME(created_at),
    TIME(started_at),
    TIME(finished_at),
    OUT(requests),
    OUT(failures),
    OUT(window_requests),
    OUT(window_failures),
    TIME(next_id),
    {.name = NULL},
};

int drill_apply(const cJSON *obj, struct drill_rec *d, int64_t now, struct field_err *err) {
  struct drill_rec c;
  memset(&c, 0, sizeof c);
  fields_defaults(drill_fields, &c);
  c.max_failure_ratio = 0.02;
  if (!cJSON_IsObject(obj))
    return fields_fail(err, 400, "invalid_body", "", "", "the body must be a JSON object");
  if (fields_apply_form(obj, drill_fields, FORM_IN, NULL, "", FIELDS_CREATE, &c, err) < 0)
    return -1;
  if (!(c.max_failure_ratio > 0))
    return fields_fail(err, 422, "out_of_range", "", "max_failure_ratio",
                       "max_failure_ratio must be over 0 and at most 1");
  {
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(obj, "every_ms");
    if (cJSON_IsNumber(ev) && ev->valuedouble < DRILL_EVERY_MS_MIN) c.every_ms = 1; /* 0 too */
  }
  if (c.every_ms && c.every_ms < DRILL_EVERY_MS_MIN)
    return fields_fail(err, 422, "out_of_range", "", "every_ms",
                       "every_ms must be null or at least %lld (1 h)",
                       (long long)DRILL_EVERY_MS_MIN);
  if (c.start_at && c.start_at > now + DRILL_START_AHEAD_MAX)
    return fields_fail(err, 422, "out_of_range", "", "start_at",
                       "start_at must be within a year from now");
  if (!c.start_at || c.start_at < now) c.start_at = now;
  c.state = DRILL_SCHEDULED;
  c.result = DRILL_RESULT_NONE;
  c.created_at = now;
  *d = c;
  return 0;
}

int drill_check_level(int to_level, const int *levels, int n, struct field_err *err) {
  if (to_level > 1)
    for (int i = 0; i < n; i++)
      if (levels[i] == to_level) return 0;
  return fields_fail(err, 422, "invalid_value", "", "to_level",
                     "to_level must be a level after the first with an enabled origin");
}

const char *drill_precondition(const struct drill_site *s) {
  if (s->drill_running) return "drill_running";
  if (s->incident_open) return "incident_open";
  if (s->first_level < 1 || s->current_level != s->first_level) return "not_on_first_level";
  if (!s->current_healthy || !s->target_healthy) return "level_unhealthy";
  return NULL;
}

enum drill_action drill_decide(const struct drill_rec *d, const struct drill_obs *o, int64_t now,
                               char *why, size_t cap) {
  const char *pre;
  if (!why) cap = 0;
  if (d->state == DRILL_SCHEDULED) {
    if (now < d->start_at) {
      if (cap) snprintf(why, cap, "scheduled");
      return DRILL_WAIT;
    }
    if ((pre = drill_precondition(&o->site)) != NULL) {
      if (cap) snprintf(why, cap, "%s", pre);
      return DRILL_FAIL;
    }
    if (cap) snprintf(why, cap, "drill to level %d started", d->to_level);
    return DRILL_START;
  }
  if (d->state != DRILL_RUNNING) {
    if (cap) snprintf(why, cap, "finished");
    return DRILL_WAIT;
  }
  if (o->site.incident_open) {
    if (cap) snprintf(why, cap, "an incident opened during the drill");
    return DRILL_CANCEL;
  }
  if (o->site.current_level != d->to_level) {
    if (cap) snprintf(why, cap, "the site left level %d during the drill", d->to_level);
    return DRILL_CANCEL;
  }
  if (!o->site.target_healthy) {
    if (cap) snprintf(why, cap, "level %d turned unhealthy during the drill", d->to_level);
    return DRILL_ABORT;
  }
  if (o->requests >= d->min_requests && o->requests > 0 &&
      (double)o->failures > d->max_failure_ratio * (double)o->requests) {
    if (cap)
      snprintf(why, cap, "level %d failed %lld of %lld requests (over %.3g)", d->to_level,
               (long long)o->failures, (long long)o->requests, d->max_failure_ratio);
    return DRILL_ABORT;
  }
  if (now >= d->started_at + d->duration_ms) {
    if (cap)
      snprintf(why, cap, "level %d carried the site for %lld ms", d->to_level,
               (long long)d->duration_ms);
    return DRILL_PASS;
  }
  if (cap) snprintf(why, cap, "watching level %d", d->to_level);
  return DRILL_GO_ON;
}

int64_t drill_next_start(const struct drill_rec *d, int64_t now) {
  int64_t t;
  if (d->every_ms <= 0) return 0;
  t = d->start_at + d->every_ms;
  if (t <= now) t += ((now - t) / d->every_ms + 1) * d->every_ms;
  return t;
}

int64_t drill_sum_clamp(int64_t v) {
  return v < 0 ? 0 : v > DRILL_SUM_MAX ? DRILL_SUM_MAX : v;
}
