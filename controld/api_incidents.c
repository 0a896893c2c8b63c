/* api_incidents — /v1/incidents (docs/design.md#incidents): the list, one incident with its
   timeline, propagation, visitor impact and deliveries, its Markdown report, operators' notes and
   resolution. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "api_op.h"
#include "buf.h"
#include "clock.h"
#include "ctx.h"
#include "engine.h"
#include "fields.h"
#include "incident.h"
#include "json.h"
#include "store.h"
#include "store_applied.h"
#include "store_incidents.h"

/* ---- reading one incident whole ---- */

struct incident_full {
  struct incident_rec rec;
  struct incident_entry *entries;
  int n_entries;
  struct applied_row *applied;
  int n_applied;
  struct incident_pub *pubs;
  int n_pubs;
  struct incident_impact *impact; /* the first STORE_IMPACT_ROWS_MAX rows */
  int n_impact;
  struct incident_totals totals; /* over every row */
  struct incident_delivery *deliveries;
  int n_deliveries;
  int online; /* nodes seen within node_online_ms before the first switch (or the opening) */
};

static void full_fini(struct incident_full *f) {
  store_incident_entries_free(f->entries, f->n_entries);
  free(f->applied);
  free(f->pubs);
  free(f->impact);
  free(f->deliveries);
  memset(f, 0, sizeof *f);
}

struct full_ask {
  int64_t id, online_ms;
  struct incident_full *f;
};

static enum store_rc full_read(struct store *st, void *arg) {
  struct full_ask *a = arg;
  struct incident_full *f = a->f;
  enum store_rc rc;
  int64_t since;
  if ((rc = store_incident_get(st, a->id, &f->rec)) != STORE_OK) return rc;
  if ((rc = store_incident_entries(st, a->id, &f->entries, &f->n_entries)) != STORE_OK ||
      (rc = store_applied_rows(st, APPLIED_OF_INCIDENT, a->id, &f->applied, &f->n_applied)) !=
          STORE_OK ||
      (rc = store_incident_pubs(st, &f->rec, &f->pubs, &f->n_pubs)) != STORE_OK ||
      (rc = store_incident_impact(st, a->id, &f->impact, &f->n_impact)) != STORE_OK ||
      (rc = store_incident_impact_totals(st, a->id, &f->totals)) != STORE_OK ||
      (rc = store_incident_deliveries(st, a->id, &f->deliveries, &f->n_deliveries)) != STORE_OK)
    return rc;
  since = (f->n_pubs ? f->pubs[0].created_at : f->rec.opened_at) - a->online_ms;
  f->online = store_incident_nodes_seen_since(st, since);
  return STORE_OK;
}

/* The incident and everything shown with it, from one snapshot
   (docs/design.md#one-snapshot-per-answer). */
static enum store_rc full_load(struct req *r, int64_t id, struct incident_full *f) {
  struct full_ask a = {id, r->ctx->cfg.node_online_ms, f};
  enum store_rc rc;
  memset(f, 0, sizeof *f);
  rc = store_snapshot(r->ctx->store, full_read, &a);
  if (rc != STORE_OK) full_fini(f);
  return rc;
}

/* ---- JSON ---- */

static void add_ms(cJSON *j, const char *key, int64_t v) {
  if (v >= 0)
    json_add_i64(j, key, v);
  else
    cJSON_AddNullToObject(j, key);
}

/* The record in its API form, with its levels as an array and its figures. */
static cJSON *incident_json(const void *rec) {
  const struct incident_rec *r = rec;
  struct incident_figures f;
  cJSON *j = cJSON_CreateObject(), *fig;
  int lv[48], n = incident_levels(r, lv, 48);
  fields_json_add(j, incident_fields, FORM_OUT, r);
  cJSON_AddItemToObject(j, "levels_served", cJSON_CreateIntArray(lv, n));
  incident_figures(r, &f);
  fig = cJSON_AddObjectToObject(j, "figures");
  add_ms(fig, "detect_ms", f.detect_ms);
  add_ms(fig, "switch_ms", f.switch_ms);
  add_ms(fig, "mitigate_ms", f.mitigate_ms);
  add_ms(fig, "resolve_ms", f.resolve_ms);
  return j;
}

/* Publication i's applied rows, f->applied[*k0, returned) (both lists in seq order: *k0 is at or
   before them on entry, at their first after), and its propagation into p. */
static int pub_rows(const struct incident_full *f, int i, int *k0, struct incident_prop *p) {
  int k1;
  while (*k0 < f->n_applied && f->applied[*k0].seq < f->pubs[i].seq)
    (*k0)++;
  for (k1 = *k0; k1 < f->n_applied && f->applied[k1].seq == f->pubs[i].seq; k1++)
    ;
  incident_propagation(f->applied + *k0, k1 - *k0, f->pubs[i].seq, f->pubs[i].created_at, p);
  return k1;
}

static cJSON *full_json(const struct incident_full *f) {
  cJSON *j = incident_json(&f->rec), *a, *imp, *tot;
  const struct incident_totals t = f->totals;
  a = cJSON_AddArrayToObject(j, "timeline");
  for (int i = 0; i < f->n_entries; i++) {
    const struct incident_entry *e = &f->entries[i];
    cJSON *o = cJSON_CreateObject(), *d = cJSON_Parse(e->data ? e->data : "{}");
    fields_json_add(o, incident_entry_fields, FORM_OUT, e);
    cJSON_AddItemToObject(o, "data", d ? d : cJSON_CreateObject());
    cJSON_AddItemToArray(a, o);
  }
  a = cJSON_AddArrayToObject(j, "propagation");
  for (int i = 0, k0 = 0, k1 = 0; i < f->n_pubs; i++, k0 = k1) {
    struct incident_prop p;
    cJSON *o = cJSON_CreateObject(), *nodes;
    int listed;
    k1 = pub_rows(f, i, &k0, &p);
    json_add_i64(o, "seq", p.seq);
    cJSON_AddStringToObject(o, "reason", f->pubs[i].reason);
    json_add_i64(o, "published_at", p.published_at);
    cJSON_AddNumberToObject(o, "applied", p.applied);
    if (f->online >= 0)
      cJSON_AddNumberToObject(o, "online", f->online);
    else
      cJSON_AddNullToObject(o, "online");
    add_ms(o, "p50_ms", p.p50_ms);
    add_ms(o, "max_ms", p.max_ms);
    json_add_str_or_null(o, "slowest_node", p.applied ? p.slowest : NULL);
    if (p.last_applied_at > 0)
      json_add_i64(o, "all_applied_at", p.last_applied_at);
    else
      cJSON_AddNullToObject(o, "all_applied_at");
    /* the slowest nodes (the store reads no others but the median's): a switch applied by
       thousands is counted, not listed */
    nodes = cJSON_AddArrayToObject(o, "nodes");
    listed = 0;
    for (int k = k0; k < k1; k++) {
      const struct applied_row *x = &f->applied[k];
      cJSON *n;
      if (x->count > 0 ? x->rank <= x->count - INCIDENT_PROP_NODES_MAX
                       : k < k1 - INCIDENT_PROP_NODES_MAX)
        continue;
      n = cJSON_CreateObject();
      listed++;
      json_add_i64(n, "node_id", x->node_id);
      cJSON_AddStringToObject(n, "node", x->node_name);
      json_add_i64(n, "applied_at", x->applied_at);
      json_add_i64(n, "after_ms",
                   x->applied_at > p.published_at ? x->applied_at - p.published_at : 0);
      cJSON_AddItemToArray(nodes, n);
    }
    cJSON_AddNumberToObject(o, "nodes_omitted", p.applied - listed);
    cJSON_AddItemToArray(a, o);
  }
  imp = cJSON_AddObjectToObject(j, "impact");
  tot = cJSON_AddObjectToObject(imp, "total");
  json_add_i64(tot, "requests", t.requests);
  json_add_i64(tot, "failures", t.failures);
  json_add_i64(tot, "backup_picks", t.backup_picks);
  json_add_i64(tot, "fail_open", t.fail_open);
  cJSON_AddNumberToObject(tot, "nodes", t.nodes);
  add_ms(tot, "first_failure_at", t.first_failure_at > 0 ? t.first_failure_at : -1);
  add_ms(tot, "last_failure_at", t.last_failure_at > 0 ? t.last_failure_at : -1);
  a = cJSON_AddArrayToObject(imp, "by_node");
  for (int i = 0; i < f->n_impact; i++) {
    const struct incident_impact *m = &f->impact[i];
    cJSON *o = cJSON_CreateObject();
    json_add_i64(o, "node_id", m->node_id);
    cJSON_AddStringToObject(o, "node", m->node_name);
    json_add_i64(o, "origin_id", m->origin_id);
    json_add_i64(o, "requests", m->requests);
    json_add_i64(o, "failures", m->failures);
    json_add_i64(o, "backup_picks", m->backup_picks);
    json_add_i64(o, "fail_open", m->fail_open);
    add_ms(o, "first_failure_at", m->first_failure_at > 0 ? m->first_failure_at : -1);
    add_ms(o, "last_failure_at", m->last_failure_at > 0 ? m->last_failure_at : -1);
    cJSON_AddItemToArray(a, o);
  }
  a = cJSON_AddArrayToObject(j, "deliveries");
  for (int i = 0; i < f->n_deliveries; i++) {
    const struct incident_delivery *d = &f->deliveries[i];
    cJSON *o = cJSON_CreateObject();
    json_add_i64(o, "event_id", d->event_id);
    cJSON_AddStringToObject(o, "event_type", d->event_type);
    json_add_i64(o, "webhook_id", d->webhook_id);
    cJSON_AddStringToObject(o, "state", d->state);
    json_add_i64(o, "attempts", d->attempts);
    if (d->last_status > 0)
      cJSON_AddNumberToObject(o, "last_status", d->last_status);
    else
      cJSON_AddNullToObject(o, "last_status");
    cJSON_AddItemToArray(a, o);
  }
  return j;
}

/* ---- the Markdown report ---- */

/* The report being written: a bounded buffer and whether an append failed. */
struct md {
  struct buf b;
  int bad;
};

static void md_append(struct md *m, const char *p, size_t n) {
  if (buf_append(&m->b, p, n) < 0) m->bad = 1;
}

static void md_printf(struct md *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void md_printf(struct md *m, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) {
    m->bad = 1;
    return;
  }
  md_append(m, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* "2026-12-05 03:12:04.210 UTC", or "—" for 0. */
static void fmt_time(int64_t ms, char *out, size_t cap) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  char d[32];
  if (ms <= 0) {
    snprintf(out, cap, "—");
    return;
  }
  gmtime_r(&t, &tm);
  strftime(d, sizeof d, "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(out, cap, "%s.%03d UTC", d, (int)(ms % 1000));
}

/* "1 m 20.5 s", "320 ms", or "—". */
static void fmt_dur(int64_t ms, char *out, size_t cap) {
  if (ms < 0)
    snprintf(out, cap, "—");
  else if (ms < 1000)
    snprintf(out, cap, "%lld ms", (long long)ms);
  else if (ms < 60000)
    snprintf(out, cap, "%.1f s", ms / 1000.0);
  else
    snprintf(out, cap, "%lld m %.1f s", (long long)(ms / 60000), (ms % 60000) / 1000.0);
}

/* Text as one Markdown table cell that renders as the text it is: line breaks as spaces, and a
   backslash before each character that could start markup (emphasis, code, a link, an HTML tag
   or entity, a cell's end). Votes, notes and errors come from plugins, nodes and operators: a
   report pasted into a Markdown viewer must not turn one into a javascript: link or a tag. */
static void cell(struct md *b, const char *s) {
  for (; s && *s; s++) {
    if (strchr("\\`*_[]<>&|~", *s))
      md_printf(b, "\\%c", *s);
    else if (*s == '\n' || *s == '\r')
      md_append(b, " ", 1);
    else
      md_append(b, s, 1);
  }
}

static void report_md(const struct incident_full *f, struct md *b) {
  const struct incident_rec *r = &f->rec;
  struct incident_figures fg;
  const struct incident_totals t = f->totals;
  char a[48], c[48], d[48];
  incident_figures(r, &fg);
  md_printf(b, "# Incident %lld: ", (long long)r->id);
  cell(b, r->site_name);
  md_printf(b, "\n\n");
  fmt_time(r->opened_at, a, sizeof a);
  md_printf(b, "- **State:** %s%s%s\n- **Trigger:** %s\n- **Opened:** %s on level %d\n",
            incident_state_names[r->state], r->resolved_by[0] ? " by " : "",
            r->resolved_by[0] ? r->resolved_by : "", incident_trigger_names[r->trigger], a,
            r->opened_level);
  md_printf(b, "- **Levels served:** %s\n", r->levels_served[0] ? r->levels_served : "—");
  if (r->reopened) md_printf(b, "- **Reopened:** %d times\n", r->reopened);
  md_printf(b, "\n## Summary\n\n| figure | value |\n|---|---|\n");
  fmt_dur(fg.detect_ms, a, sizeof a);
  md_printf(b, "| time to detect (first failed verdict → opened) | %s |\n", a);
  fmt_dur(fg.switch_ms, a, sizeof a);
  md_printf(b, "| time to switch (opened → first switch) | %s |\n", a);
  fmt_dur(fg.mitigate_ms, a, sizeof a);
  md_printf(b, "| time to mitigate | %s |\n", a);
  fmt_dur(fg.resolve_ms, a, sizeof a);
  md_printf(b, "| time to resolve | %s |\n", a);
  for (int i = 0, k0 = 0; i < f->n_pubs; i++) {
    struct incident_prop p;
    k0 = pub_rows(f, i, &k0, &p);
    fmt_dur(p.max_ms, a, sizeof a);
    fmt_dur(p.p50_ms, c, sizeof c);
    fmt_time(p.published_at, d, sizeof d);
    md_printf(b,
              "| time to propagate switch %lld (%s, published %s) | %s: applied by %d/%d "
              "online nodes (p50 %s",
              (long long)p.seq, f->pubs[i].reason, d, a, p.applied, f->online < 0 ? 0 : f->online,
              c);
    if (p.applied) {
      md_printf(b, ", slowest ");
      cell(b, p.slowest);
    }
    md_printf(b, ") |\n");
  }
  md_printf(b, "\n## Visitor impact\n\n");
  md_printf(b,
            "| | requests | failures | backup-level picks | fail-opens |\n|---|---|---|---|---|\n");
  md_printf(b, "| all %d nodes | %lld | %lld | %lld | %lld |\n", t.nodes, (long long)t.requests,
            (long long)t.failures, (long long)t.backup_picks, (long long)t.fail_open);
  for (int i = 0; i < f->n_impact; i++) {
    const struct incident_impact *m = &f->impact[i];
    md_printf(b, "| ");
    cell(b, m->node_name);
    md_printf(b, ", origin %lld | %lld | %lld | %lld | %lld |\n", (long long)m->origin_id,
              (long long)m->requests, (long long)m->failures, (long long)m->backup_picks,
              (long long)m->fail_open);
  }
  fmt_time(t.first_failure_at, a, sizeof a);
  fmt_time(t.last_failure_at, c, sizeof c);
  md_printf(b, "\nFirst visitor failure seen: %s; last: %s (nodes report every heartbeat).\n", a,
            c);
  md_printf(b, "\n## Timeline\n\n| time | what | details |\n|---|---|---|\n");
  for (int i = 0; i < f->n_entries; i++) {
    const struct incident_entry *e = &f->entries[i];
    fmt_time(e->at, a, sizeof a);
    md_printf(b, "| %s | ", a);
    cell(b, e->type);
    md_printf(b, " | ");
    cell(b, e->title);
    md_printf(b, ": ");
    cell(b, e->data);
    md_printf(b, " |\n");
  }
  if (r->dropped) md_printf(b, "\n%d later entries were not kept.\n", r->dropped);
  md_printf(b, "\n## Notes\n\n");
  {
    int notes = 0;
    for (int i = 0; i < f->n_entries; i++) {
      const struct incident_entry *e = &f->entries[i];
      cJSON *j;
      const cJSON *x;
      if (strcmp(e->kind, "note") != 0) continue;
      j = cJSON_Parse(e->data ? e->data : "{}");
      x = j ? cJSON_GetObjectItemCaseSensitive(j, "text") : NULL;
      fmt_time(e->at, a, sizeof a);
      md_printf(b, "- %s, ", a);
      cell(b, e->title);
      md_printf(b, ": ");
      cell(b, cJSON_IsString(x) ? x->valuestring : "");
      md_printf(b, "\n");
      cJSON_Delete(j);
      notes++;
    }
    if (!notes) md_printf(b, "None.\n");
  }
}

/* ---- routes ---- */

static enum http_rc get_list(struct req *r) {
  static const char *const states[] = {"open", "mitigated", "resolved", "active", NULL};
  int64_t limit, after, site_id;
  const char *state = req_query(r, "state");
  struct incident_rec *arr = NULL;
  int n = 0, ok = state == NULL;
  enum store_rc rc;
  if (api_page_query(r, &limit, &after) < 0) return HTTP_DONE;
  if (req_query_int(r, "site_id", 1, INT64_MAX / 2, 0, &site_id) < 0) return HTTP_DONE;
  for (int i = 0; states[i] && !ok; i++)
    ok = strcmp(state, states[i]) == 0;
  if (!ok) {
    req_error(r, 400, "invalid_query", "state",
              "state must be one of open, mitigated, resolved, active");
    return HTTP_DONE;
  }
  rc = store_incident_list(r->ctx->store, site_id, state, after, (int)limit + 1, &arr, &n);
  api_page_answer(r, rc, "incidents", "incidents", arr, sizeof *arr, n, limit,
                  offsetof(struct incident_rec, id), incident_json);
  free(arr);
  return HTTP_DONE;
}

static enum http_rc get_one(struct req *r) {
  struct incident_full f;
  enum store_rc rc = full_load(r, r->params[0], &f);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "incident", NULL);
    return HTTP_DONE;
  }
  req_json(r, 200, full_json(&f));
  full_fini(&f);
  return HTTP_DONE;
}

static enum http_rc get_report(struct req *r) {
  struct incident_full f;
  struct md m;
  size_t len;
  enum store_rc rc = full_load(r, r->params[0], &f);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "incident", NULL);
    return HTTP_DONE;
  }
  memset(&m, 0, sizeof m);
  buf_init(&m.b, 64u << 20); /* 10,000 entries of a few KiB at most */
  report_md(&f, &m);
  full_fini(&f);
  if (m.bad) {
    buf_fini(&m.b);
    req_error(r, 500, "internal", NULL, "the report could not be written");
    return HTTP_DONE;
  }
  len = m.b.len;
  req_raw(r, 200, "text/markdown; charset=utf-8", buf_take(&m.b), len);
  return HTTP_DONE;
}

/* 1 when s is valid UTF-8 with no control character but line breaks and tabs. */
static int note_valid(char *s) {
  size_t n = strlen(s);
  char *copy = malloc(n + 1);
  int ok;
  if (!copy) return 0;
  for (size_t i = 0; i <= n; i++)
    copy[i] = s[i] == '\n' || s[i] == '\t' || s[i] == '\r' ? ' ' : s[i];
  ok = fields_text_valid(copy, 0, INCIDENT_NOTE_MAX);
  free(copy);
  return ok;
}

struct note_body {
  char text[INCIDENT_NOTE_MAX + 1];
  int resolve;
};

#define NB(m) .offset = offsetof(struct note_body, m), .size = sizeof(((struct note_body *)0)->m)
static const struct field_def note_fields[] = {
    {.name = "text",
     .type = FIELD_STR,
     .flags = FIELD_REQUIRED,
     NB(text),
     .min = 1,
     .check = note_valid,
     .what = "UTF-8 text of at most 4096 bytes, no control characters"},
    {.name = NULL},
};
static const struct field_def resolve_fields[] = {
    {.name = "note",
     .type = FIELD_STR,
     .flags = FIELD_NULLABLE,
     NB(text),
     .min = 0,
     .check = note_valid,
     .what = "UTF-8 text of at most 4096 bytes, no control characters"},
    {.name = NULL},
};
#undef NB

static enum store_rc note_change(struct api_op *op) {
  struct note_body *nb = op->arg;
  switch (engine_incident_note_locked(op->ctx->engine, op->tx, op->r->params[0], op->r->token_name,
                                      nb->text, nb->resolve)) {
  case ENGINE_INCIDENT_OK:
    return STORE_OK;
  case ENGINE_INCIDENT_NOT_FOUND:
    return STORE_NOT_FOUND;
  case ENGINE_INCIDENT_RESOLVED:
    req_error(op->r, 409, "conflict", NULL, "the incident is resolved already");
    return STORE_CONFLICT;
  case ENGINE_INCIDENT_ERROR:
  default:
    return STORE_ERROR;
  }
}

/* The answer: the record as the write left it. */
static enum store_rc note_answer(struct api_op *op) {
  struct incident_rec rec;
  enum store_rc rc = store_incident_get_locked(op->tx, op->r->params[0], &rec);
  if (rc == STORE_OK) req_json(op->r, op->status ? (unsigned)op->status : 200, incident_json(&rec));
  return rc;
}

static const struct api_op_def note_op = {"incident", note_change, note_answer, NULL};

static enum http_rc post_note(struct req *r, const struct field_def *defs, int resolve) {
  cJSON *body = req_body_object(r);
  struct note_body *nb;
  struct field_err fe;
  if (!body) return HTTP_DONE;
  nb = calloc(1, sizeof *nb);
  if (!nb) {
    req_error(r, 500, "internal", NULL, "out of memory");
  } else if (fields_apply(body, defs, NULL, "", FIELDS_CREATE, nb, &fe) < 0) {
    req_error(r, fe.status, fe.code, fe.field, "%s", fe.message);
  } else {
    nb->resolve = resolve;
    (void)api_op_run(r, &note_op, nb);
  }
  free(nb);
  cJSON_Delete(body);
  return HTTP_DONE;
}

static enum http_rc post_notes(struct req *r) {
  return post_note(r, note_fields, 0);
}

static enum http_rc post_resolve(struct req *r) {
  return post_note(r, resolve_fields, 1);
}

const struct route api_incidents_routes[] = {
    {"GET", "/v1/incidents", AUTH_READ, get_list, "after,limit,site_id,state", 0},
    {"GET", "/v1/incidents/:id", AUTH_READ, get_one, NULL, 0},
    {"GET", "/v1/incidents/:id/report", AUTH_READ, get_report, NULL, 0},
    {"POST", "/v1/incidents/:id/notes", AUTH_OPERATOR, post_notes, NULL, 0},
    {"POST", "/v1/incidents/:id/resolve", AUTH_OPERATOR, post_resolve, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
