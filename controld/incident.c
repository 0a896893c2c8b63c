/* incident — the incident record's tables and rules (see incident.h). */
#include "incident.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const incident_state_names[INCIDENT_STATES] = {
    [INCIDENT_OPEN] = "open",
    [INCIDENT_MITIGATED] = "mitigated",
    [INCIDENT_RESOLVED] = "resolved",
};

const char *const incident_trigger_names[INCIDENT_TRIGGERS] = {
    [INCIDENT_TRIGGER_ORIGIN] = "origin_unhealthy",
    [INCIDENT_TRIGGER_SWITCH] = "switch",
    [INCIDENT_TRIGGER_ALL_DOWN] = "all_levels_unhealthy",
};

#define M(m)                                                                                       \
  .offset = offsetof(struct incident_rec, m), .size = sizeof(((struct incident_rec *)0)->m)
#define T(n)                                                                                       \
  { .name = #n, .column = #n, .type = FIELD_INT, .flags = FIELD_NULLABLE, M(n), .forms = FORM_OUT }
const struct field_def incident_fields[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, M(id), .forms = FORM_OUT},
    {.name = "site_id", .column = "site_id", .type = FIELD_INT, M(site_id), .forms = FORM_OUT},
    {.name = "site_name",
     .column = "site_name",
     .type = FIELD_STR,
     M(site_name),
     .forms = FORM_OUT},
    {.name = "state",
     .column = "state",
     .type = FIELD_NAMED,
     M(state),
     FIELD_NAMES(incident_state_names),
     .forms = FORM_OUT},
    {.name = "trigger",
     .column = "trigger",
     .type = FIELD_NAMED,
     M(trigger),
     FIELD_NAMES(incident_trigger_names),
     .forms = FORM_OUT},
    T(opened_at),
    T(mitigated_at),
    T(resolved_at),
    {.name = "clear_since",
     .column = "clear_since",
     .type = FIELD_INT,
     .flags = FIELD_NULLABLE,
     M(clear_since)},
    {.name = "opened_level",
     .column = "opened_level",
     .type = FIELD_INT,
     M(opened_level),
     .forms = FORM_OUT},
    {.name = "levels_served", .column = "levels_served", .type = FIELD_STR, M(levels_served)},
    {.name = "reopened", .column = "reopened", .type = FIELD_INT, M(reopened), .forms = FORM_OUT},
    T(first_failure_at),
    T(switched_at),
    {.name = "switch_seq", .column = "switch_seq", .type = FIELD_INT, M(switch_seq)},
    {.name = "resolved_by",
     .column = "resolved_by",
     .type = FIELD_STR,
     .flags = FIELD_NULLABLE,
     M(resolved_by),
     .forms = FORM_OUT},
    {.name = "timeline_entries",
     .column = "entries",
     .type = FIELD_INT,
     M(entries),
     .forms = FORM_OUT},
    {.name = "timeline_dropped",
     .column = "dropped",
     .type = FIELD_INT,
     M(dropped),
     .forms = FORM_OUT},
    {.name = NULL},
};
#undef T
#undef M

#define M(m)                                                                                       \
  .offset = offsetof(struct incident_entry, m), .size = sizeof(((struct incident_entry *)0)->m)
const struct field_def incident_entry_fields[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, M(id), .forms = FORM_OUT},
    {.name = "incident_id", .column = "incident_id", .type = FIELD_INT, M(incident_id)},
    {.name = "at", .column = "at", .type = FIELD_INT, M(at), .forms = FORM_OUT},
    {.name = "kind", .column = "kind", .type = FIELD_STR, M(kind), .forms = FORM_OUT},
    {.name = "event_id",
     .column = "event_id",
     .type = FIELD_INT,
     .flags = FIELD_NULLABLE,
     M(event_id),
     .forms = FORM_OUT},
    {.name = "type", .column = "type", .type = FIELD_STR, M(type), .forms = FORM_OUT},
    {.name = "title", .column = "title", .type = FIELD_STR, M(title), .forms = FORM_OUT},
    {.name = NULL},
};
#undef M

int incident_active(const struct incident_rec *r) {
  return r->state == INCIDENT_OPEN || r->state == INCIDENT_MITIGATED;
}

int incident_levels(const struct incident_rec *r, int *out, int cap) {
  const char *p = r->levels_served;
  int n = 0;
  while (*p && n < cap) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p) break;
    out[n++] = (int)v;
    p = *end == ',' ? end + 1 : end;
  }
  return n;
}

static void serve(struct incident_rec *r, int level) {
  size_t len = strlen(r->levels_served);
  int lv[48], n = incident_levels(r, lv, 48);
  for (int i = 0; i < n; i++)
    if (lv[i] == level) return;
  if (level < 1) return;
  snprintf(r->levels_served + len, sizeof r->levels_served - len, "%s%d", len ? "," : "", level);
}

enum incident_change incident_trigger_at(struct incident_rec *r, int have, int64_t site_id,
                                         const char *site_name, enum incident_trigger t, int level,
                                         int64_t first_failure_at, int64_t now, int64_t quiet_ms) {
  if (have && incident_active(r)) return INCIDENT_SAME;
  if (have && r->state == INCIDENT_RESOLVED && r->resolved_at > 0 &&
      now - r->resolved_at < quiet_ms) {
    r->state = INCIDENT_OPEN;
    r->resolved_at = 0;
    r->clear_since = 0;
    r->resolved_by[0] = '\0';
    r->reopened++;
    serve(r, level);
    return INCIDENT_REOPENED;
  }
  memset(r, 0, sizeof *r);
  r->site_id = site_id;
  snprintf(r->site_name, sizeof r->site_name, "%s", site_name ? site_name : "");
  r->state = INCIDENT_OPEN;
  r->trigger = (int)t;
  r->opened_at = now;
  r->opened_level = level;
  r->first_failure_at = first_failure_at > 0 && first_failure_at <= now ? first_failure_at : now;
  serve(r, level);
  return INCIDENT_OPENED;
}

void incident_switched(struct incident_rec *r, int level, int64_t now) {
  if (!incident_active(r)) return;
  serve(r, level);
  if (r->switched_at == 0) r->switched_at = now;
}

enum incident_change incident_evaluate(struct incident_rec *r, const struct incident_view *v,
                                       int64_t now, int64_t quiet_ms) {
  int clear;
  if (!incident_active(r)) return INCIDENT_SAME;
  clear = v->current_level >= 1 && v->current_level <= r->opened_level && v->current_healthy &&
          v->failed_unhealthy == 0 && !v->all_unhealthy;
  if (!clear) {
    r->clear_since = 0;
  } else {
    if (r->clear_since == 0 || r->clear_since > now) r->clear_since = now;
    if (now - r->clear_since >= quiet_ms) {
      r->state = INCIDENT_RESOLVED;
      r->resolved_at = now;
      r->clear_since = 0;
      return INCIDENT_RESOLVED_AT;
    }
  }
  if (r->state == INCIDENT_OPEN && v->current_healthy && v->current_level != r->opened_level &&
      !v->all_unhealthy) {
    r->state = INCIDENT_MITIGATED;
    if (r->mitigated_at == 0) r->mitigated_at = now;
    return INCIDENT_MITIGATED_AT;
  }
  if (r->state == INCIDENT_MITIGATED && (!v->current_healthy || v->all_unhealthy)) {
    r->state = INCIDENT_OPEN;
    return INCIDENT_UNMITIGATED;
  }
  return INCIDENT_SAME;
}

int incident_resolve_by(struct incident_rec *r, const char *by, int64_t now) {
  if (!incident_active(r)) return -1;
  r->state = INCIDENT_RESOLVED;
  r->resolved_at = now;
  r->clear_since = 0;
  snprintf(r->resolved_by, sizeof r->resolved_by, "%s", by && *by ? by : "operator");
  return 0;
}

static int64_t span(int64_t from, int64_t to) {
  return from > 0 && to >= from ? to - from : -1;
}

void incident_figures(const struct incident_rec *r, struct incident_figures *out) {
  out->detect_ms = span(r->first_failure_at, r->opened_at);
  out->switch_ms = span(r->opened_at, r->switched_at);
  out->mitigate_ms = span(r->opened_at, r->mitigated_at);
  out->resolve_ms = span(r->opened_at, r->resolved_at);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

void incident_propagation(const struct applied_row *a, int n, int64_t seq, int64_t published_at,
                          struct incident_prop *out) {
  int64_t *ms = n > 0 ? malloc((size_t)n * sizeof *ms) : NULL;
  memset(out, 0, sizeof *out);
  out->seq = seq;
  out->published_at = published_at;
  out->p50_ms = out->max_ms = -1;
  int64_t total = 0, mid = -1;
  for (int i = 0; i < n; i++) {
    int64_t d;
    if (a[i].seq != seq) continue;
    d = a[i].applied_at - published_at;
    if (d < 0) d = 0;
    if (ms) ms[out->applied] = d;
    out->applied++;
    /* some rows of many: their number, and the median is the row ranked in the middle */
    if (a[i].count > 0) {
      total = a[i].count;
      if (a[i].rank == (a[i].count - 1) / 2 + 1) mid = d;
    }
    if (d > out->max_ms) {
      out->max_ms = d;
      snprintf(out->slowest, sizeof out->slowest, "%s", a[i].node_name);
    }
    if (a[i].applied_at > out->last_applied_at) out->last_applied_at = a[i].applied_at;
  }
  if (ms && out->applied > 0) {
    qsort(ms, (size_t)out->applied, sizeof *ms, cmp_i64);
    out->p50_ms = ms[(out->applied - 1) / 2];
  }
  if (total > 0) {
    out->applied = (int)total;
    if (mid >= 0) out->p50_ms = mid;
  }
  free(ms);
}

void incident_entry_fini(struct incident_entry *e) {
  free(e->data);
  e->data = NULL;
}
