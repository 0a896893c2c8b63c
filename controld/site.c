/* site — the site and origin records' pure helpers. */
#include <stdlib.h>
#include <string.h>

#include "site.h"

#include <arpa/inet.h>
#include <stddef.h>

#include "hostname.h"
#include "json.h"
#include "noderetry.h"

/* An origin address: an IPv4 or IPv6 literal, or a hostname (lowercased). */
static int valid_address(char *a) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, a, buf) == 1 || inet_pton(AF_INET6, a, buf) == 1) return 1;
  hostname_lower(a);
  return hostname_valid(a);
}

static int valid_hostname(char *h) {
  hostname_lower(h);
  return hostname_valid(h);
}

const char *const origin_scheme_names[ORIGIN_SCHEMES] = {
    [SCHEME_HTTP] = "http",
    [SCHEME_HTTPS] = "https",
};

#define M(m) .offset = offsetof(struct origin_rec, m), .size = sizeof(((struct origin_rec *)0)->m)
/* the configuration an API body sets, shown by the API and exported */
#define CONFIG (FORM_IN | FORM_OUT | FORM_EXPORT | FORM_CONFIG)
const struct field_def site_origin_fields[] = {
    {.name = "id",
     .column = "id",
     .type = FIELD_INT,
     M(id),
     .min = 1,
     .max = INT64_MAX,
     .forms = FORM_OUT | FORM_EXPORT},
    {.name = "site_id", .column = "site_id", .type = FIELD_INT, M(site_id)},
    {.name = "level",
     .column = "level",
     .type = FIELD_INT,
     M(level),
     .min = 1,
     .max = 16,
     .def = 1,
     .forms = CONFIG},
    {.name = "address",
     .column = "address",
     .type = FIELD_STR,
     .flags = FIELD_REQUIRED,
     M(address),
     .min = 1,
     .check = valid_address,
     .what = "an IPv4 or IPv6 address or a hostname",
     .forms = CONFIG},
    {.name = "port",
     .column = "port",
     .type = FIELD_INT,
     M(port),
     .min = 1,
     .max = 65535,
     .forms = CONFIG},
    {.name = "scheme",
     .column = "scheme",
     .type = FIELD_NAMED,
     M(scheme),
     FIELD_NAMES(origin_scheme_names),
     .what = "\"http\" or \"https\"",
     .forms = CONFIG},
    {.name = "host_header",
     .column = "host_header",
     .type = FIELD_STR,
     .flags = FIELD_NULLABLE,
     M(host_header),
     .check = valid_hostname,
     .what = "a valid hostname",
     .forms = CONFIG},
    {.name = "weight",
     .column = "weight",
     .type = FIELD_INT,
     M(weight),
     .min = 1,
     .max = 100,
     .def = 1,
     .forms = CONFIG},
    /* not a published key: nodes are sent the enabled origins only (publish.c); an operator may
       enable and disable origins */
    {.name = "enabled",
     .column = "enabled",
     .type = FIELD_BOOL,
     .flags = FIELD_OPERATOR,
     M(enabled),
     .forms = CONFIG},
    {.name = "description",
     .column = "description",
     .type = FIELD_TEXT,
     M(description),
     .min = 0,
     .max = SITE_DESCRIPTION_MAX,
     .forms = CONFIG},
    /* health state, written by the engine */
    {.name = "health",
     .column = "health",
     .type = FIELD_NAMED,
     M(health),
     FIELD_NAMES(health_state_names),
     .forms = FORM_OUT},
    {.name = "success_streak", .column = "success_streak", .type = FIELD_INT, M(success_streak)},
    {.name = "failure_streak", .column = "failure_streak", .type = FIELD_INT, M(failure_streak)},
    {.name = "health_changed_at",
     .column = "health_changed_at",
     .type = FIELD_INT,
     M(health_changed_at)},
    {.name = "healthy_since", .column = "healthy_since", .type = FIELD_INT, M(healthy_since)},
    {.name = "last_verdict",
     .column = "last_verdict",
     .type = FIELD_NAMED,
     .flags = FIELD_NULLABLE,
     M(last_verdict),
     FIELD_NAMES(health_verdict_names)},
    {.name = "last_source",
     .column = "last_source",
     .type = FIELD_NAMED,
     .flags = FIELD_NULLABLE,
     M(last_source),
     FIELD_NAMES(health_source_names)},
    {.name = "votes_success", .column = "last_votes_success", .type = FIELD_INT, M(votes_success)},
    {.name = "votes_failure", .column = "last_votes_failure", .type = FIELD_INT, M(votes_failure)},
    {.name = "last_checked_at", .column = "last_checked_at", .type = FIELD_INT, M(last_checked_at)},
    {.name = "last_error", .column = "last_error", .type = FIELD_STR, M(last_error)},
    {.name = "created_at_ms",
     .column = "created_at",
     .type = FIELD_INT,
     M(created_at),
     .min = 0,
     .max = INT64_MAX,
     .forms = FORM_EXPORT},
    {.name = NULL},
};
#undef CONFIG
#undef M

static int valid_path(char *p) {
  if (p[0] != '/') return 0;
  for (; *p; p++)
    if ((unsigned char)*p <= 0x20 || (unsigned char)*p == 0x7f) return 0;
  return 1;
}

#define S(m) .offset = offsetof(struct site_rec, m), .size = sizeof(((struct site_rec *)0)->m)
#define CONFIG (FORM_IN | FORM_OUT | FORM_EXPORT | FORM_CONFIG)
#define HC .object = "health_check"
/* node_retry: shown and stored here, validated by common/noderetry */
#define NR .object = "node_retry", .forms = FORM_OUT | FORM_EXPORT | FORM_CONFIG
const struct field_def site_fields[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, S(id), .forms = FORM_OUT | FORM_EXPORT},
    {.name = "name",
     .column = "name",
     .type = FIELD_STR,
     .flags = FIELD_REQUIRED,
     S(name),
     .min = 1,
     .check = fields_name_valid,
     .what = FIELDS_NAME_WHAT,
     .forms = CONFIG},
    /* the API's JSON has "hostnames" here (their own table) */
    {.name = "failback",
     .column = "failback",
     .type = FIELD_NAMED,
     S(failback),
     FIELD_NAMES(health_failback_names),
     .what = "\"auto\" or \"manual\"",
     .forms = CONFIG},
    {.name = "failback_hold_ms",
     .column = "failback_hold_ms",
     .type = FIELD_INT,
     S(failback_hold_ms),
     .min = 0,
     .max = 86400000,
     .forms = CONFIG},
    /* docs/design.md, Failback ramp: null, or the steps a failback returns traffic in */
    {.name = "failback_ramp",
     .column = "failback_ramp",
     .type = FIELD_JSON,
     S(failback_ramp),
     .codec = &ramp_policy_codec,
     .forms = CONFIG},
    {.name = "enabled",
     .column = "hc_enabled",
     .type = FIELD_BOOL,
     S(hc_enabled),
     HC,
     .forms = CONFIG},
    {.name = "path",
     .column = "hc_path",
     .type = FIELD_STR,
     S(hc_path),
     .min = 1,
     .check = valid_path,
     .what = "a path starting with '/' with no spaces or control characters",
     HC,
     .forms = CONFIG},
    {.name = "timeout_ms",
     .column = "hc_timeout_ms",
     .type = FIELD_INT,
     S(hc_timeout_ms),
     .min = 100,
     .max = 60000,
     .def = 5000,
     HC,
     .forms = CONFIG},
    {.name = "unhealthy_after",
     .column = "hc_unhealthy_after",
     .type = FIELD_INT,
     S(hc_unhealthy_after),
     .min = 1,
     .max = 100,
     .def = 3,
     HC,
     .forms = CONFIG},
    {.name = "healthy_after",
     .column = "hc_healthy_after",
     .type = FIELD_INT,
     S(hc_healthy_after),
     .min = 1,
     .max = 100,
     .def = 2,
     HC,
     .forms = CONFIG},
    {.name = "checkpoints",
     .column = "hc_checkpoints",
     .type = FIELD_BOOL,
     S(hc_checkpoints),
     HC,
     .forms = CONFIG},
    /* the probe interval in a column of its own, for the due-sites query (NULL: the global one) */
    {.name = "hc_interval_ms",
     .column = "hc_interval_ms",
     .type = FIELD_INT,
     .flags = FIELD_NULLABLE,
     .offset = offsetof(struct site_rec, hc.interval_ms),
     .size = sizeof(int64_t),
     .forms = FORM_CONFIG},
    /* type, method, headers, expected_*, port, interval_ms, level_min_healthy (NULL: defaults);
       header values are secrets (docs/design.md#secrets) */
    {.name = "options",
     .column = "hc_options",
     .type = FIELD_JSON,
     .flags = FIELD_SECRET,
     S(hc),
     .codec = &hcheck_codec,
     HC,
     .forms = CONFIG},
    /* the shadow policy: never published (common/sitewire lists no such key) */
    {.name = "health_check_shadow",
     .column = "health_check_shadow",
     .type = FIELD_JSON,
     .flags = FIELD_SECRET, /* its header values, as health_check's */
     S(shadow),
     .codec = &site_shadow_codec,
     .forms = CONFIG},
    {.name = "retries", .column = "nr_retries", .type = FIELD_INT, S(nr_retries), NR},
    {.name = "retry_budget_ms",
     .column = "nr_retry_budget_ms",
     .type = FIELD_INT,
     S(nr_retry_budget_ms),
     NR},
    {.name = "fail_count", .column = "nr_fail_count", .type = FIELD_INT, S(nr_fail_count), NR},
    {.name = "fail_window_ms",
     .column = "nr_fail_window_ms",
     .type = FIELD_INT,
     S(nr_fail_window_ms),
     NR},
    {.name = "skip_ms", .column = "nr_skip_ms", .type = FIELD_INT, S(nr_skip_ms), NR},
    {.name = "half_open_requests",
     .column = "nr_half_open_requests",
     .type = FIELD_INT,
     S(nr_half_open_requests),
     NR},
    {.name = "retry_on_status",
     .column = "nr_retry_on_status",
     .type = FIELD_INT_LIST,
     .offset = offsetof(struct site_rec, retry_on_status),
     .size = SITE_MAX_RETRY_STATUS,
     .min = 400,
     .max = 599,
     .count_offset = offsetof(struct site_rec, n_retry_on_status),
     NR},
    {.name = "backup_levels",
     .column = "nr_backup_levels",
     .type = FIELD_BOOL,
     S(nr_backup_levels),
     NR},
    {.name = "failure_ratio",
     .column = "nr_failure_ratio",
     .type = FIELD_DOUBLE,
     .flags = FIELD_NULLABLE, /* 0 = off */
     S(nr_failure_ratio),
     .min = 0,
     .max = 1,
     NR},
    {.name = "failure_min_volume",
     .column = "nr_failure_min_volume",
     .type = FIELD_INT,
     S(nr_failure_min_volume),
     NR},
    /* the engine's: levels, versions, times (the API adds origins and its times after these) */
    {.name = "current_level",
     .column = "current_level",
     .type = FIELD_INT,
     S(current_level),
     .forms = FORM_OUT | FORM_EXPORT},
    {.name = "manual_pin",
     .column = "manual_pin",
     .type = FIELD_BOOL,
     S(manual_pin),
     .forms = FORM_EXPORT},
    {.name = "config_version",
     .column = "config_version",
     .type = FIELD_INT,
     S(config_version),
     .forms = FORM_OUT | FORM_EXPORT},
    {.name = "revision",
     .column = "revision",
     .type = FIELD_INT,
     S(revision),
     .forms = FORM_OUT | FORM_EXPORT},
    {.name = "created_at_ms",
     .column = "created_at",
     .type = FIELD_INT,
     S(created_at),
     .forms = FORM_EXPORT},
    {.name = "updated_at_ms",
     .column = "updated_at",
     .type = FIELD_INT,
     S(updated_at),
     .forms = FORM_EXPORT},
    {.name = "last_probed_at", .column = "last_probed_at", .type = FIELD_INT, S(last_probed_at)},
    {.name = "next_probe_at", .column = "next_probe_at", .type = FIELD_INT, S(next_probe_at)},
    {.name = "all_unhealthy", .column = "all_unhealthy", .type = FIELD_BOOL, S(all_unhealthy)},
    {.name = "failback_notified",
     .column = "failback_notified",
     .type = FIELD_BOOL,
     S(failback_notified)},
    /* the running failback ramp (written by the engine, store_health) */
    {.name = "ramp", .column = "ramp", .type = FIELD_JSON, S(ramp), .codec = &ramp_run_codec},
    {.name = "ramp_requests", .column = "ramp_requests", .type = FIELD_INT, S(ramp_requests)},
    {.name = "ramp_failures", .column = "ramp_failures", .type = FIELD_INT, S(ramp_failures)},
    {.name = "ramp_hold_until", .column = "ramp_hold_until", .type = FIELD_INT, S(ramp_hold_until)},
    /* the running failover drill (written by the engine, store_drills) */
    {.name = "drill_id",
     .column = "drill_id",
     .type = FIELD_INT,
     .flags = FIELD_NULLABLE,
     S(drill_id)},
    {.name = NULL},
};
#undef NR
#undef HC
#undef CONFIG
#undef S

void site_rec_defaults(struct site_rec *s) {
  struct skip_params nr;
  memset(s, 0, sizeof *s);
  s->failback = HEALTH_FAILBACK_AUTO;
  memcpy(s->hc_path, "/", 2);
  s->hc_timeout_ms = 5000;
  s->hc_unhealthy_after = 3;
  s->hc_healthy_after = 2;
  hcheck_defaults(&s->hc);
  noderetry_defaults(&nr);
  site_rec_set_retry(s, &nr);
  s->current_level = 1;
  s->config_version = 1;
}

void site_rec_retry(const struct site_rec *s, struct skip_params *p) {
  noderetry_defaults(p);
  p->retries = (int)s->nr_retries;
  p->retry_budget_ms = s->nr_retry_budget_ms;
  p->fail_count = (int)s->nr_fail_count;
  p->fail_window_ms = s->nr_fail_window_ms;
  p->skip_ms = s->nr_skip_ms;
  p->half_open_requests = (int)s->nr_half_open_requests;
  p->n_retry_on_status = 0;
  for (int i = 0; i < s->n_retry_on_status && i < SKIP_MAX_STATUS; i++)
    p->retry_on_status[p->n_retry_on_status++] = s->retry_on_status[i];
  p->backup_levels = s->nr_backup_levels;
  p->failure_ratio = s->nr_failure_ratio;
  p->failure_min_volume = (int)s->nr_failure_min_volume;
}

void site_rec_set_retry(struct site_rec *s, const struct skip_params *p) {
  s->nr_retries = p->retries;
  s->nr_retry_budget_ms = p->retry_budget_ms;
  s->nr_fail_count = p->fail_count;
  s->nr_fail_window_ms = p->fail_window_ms;
  s->nr_skip_ms = p->skip_ms;
  s->nr_half_open_requests = p->half_open_requests;
  s->n_retry_on_status = 0;
  for (int i = 0; i < p->n_retry_on_status && i < SITE_MAX_RETRY_STATUS; i++)
    s->retry_on_status[s->n_retry_on_status++] = p->retry_on_status[i];
  s->nr_backup_levels = p->backup_levels;
  s->nr_failure_ratio = p->failure_ratio;
  s->nr_failure_min_volume = p->failure_min_volume;
}

int site_rec_copy(struct site_rec *dst, const struct site_rec *src) {
  *dst = *src;
  dst->origins = NULL;
  if (src->n_origins) {
    dst->origins = malloc((size_t)src->n_origins * sizeof *dst->origins);
    if (!dst->origins) {
      dst->n_origins = 0;
      return -1;
    }
    memcpy(dst->origins, src->origins, (size_t)src->n_origins * sizeof *dst->origins);
  }
  return 0;
}

void site_rec_fini(struct site_rec *s) {
  free(s->origins);
  s->origins = NULL;
  s->n_origins = 0;
}

void site_hc_get(const struct site_rec *s, struct site_hc *h) {
  memset(h, 0, sizeof *h);
  h->enabled = s->hc_enabled;
  memcpy(h->path, s->hc_path, sizeof h->path);
  h->timeout_ms = s->hc_timeout_ms;
  h->unhealthy_after = s->hc_unhealthy_after;
  h->healthy_after = s->hc_healthy_after;
  h->checkpoints = s->hc_checkpoints;
  h->opts = s->hc;
}

void site_hc_put(struct site_rec *s, const struct site_hc *h) {
  s->hc_enabled = h->enabled;
  memcpy(s->hc_path, h->path, sizeof s->hc_path);
  s->hc_timeout_ms = h->timeout_ms;
  s->hc_unhealthy_after = h->unhealthy_after;
  s->hc_healthy_after = h->healthy_after;
  s->hc_checkpoints = h->checkpoints;
  s->hc = h->opts;
}

/* ---- health_check_shadow: health_check's rows applied to a scratch record ---- */

#define SHADOW_KEY "health_check_shadow"

/* Apply v (an object or null) onto sh through site_fields' health_check rows; prefix names v. */
static int shadow_apply_value(const cJSON *v, struct site_shadow *sh, const char *prefix,
                              struct field_err *err) {
  struct site_rec *tmp;
  int rc;
  if (cJSON_IsNull(v)) {
    memset(sh, 0, sizeof *sh);
    return 0;
  }
  if (!cJSON_IsObject(v))
    return fields_fail(err, 422, "invalid_type", NULL, prefix,
                       "%s must be an object (the same as health_check) or null", prefix);
  tmp = malloc(sizeof *tmp);
  if (!tmp) return fields_fail(err, 500, "internal", NULL, prefix, "out of memory");
  site_rec_defaults(tmp);
  if (sh->set)
    site_hc_put(tmp, &sh->hc);
  else
    tmp->hc_enabled = 1;
  rc = fields_apply_in(v, site_fields, "health_check", FORM_IN, NULL, prefix, 0, tmp, err);
  if (rc == 0) {
    site_hc_get(tmp, &sh->hc);
    sh->set = 1;
  }
  free(tmp);
  return rc;
}

/* The shadow as the health_check object the API shows; NULL on out of memory. */
static cJSON *shadow_object(const struct site_shadow *sh) {
  struct site_rec *tmp = malloc(sizeof *tmp);
  cJSON *all = NULL, *hc = NULL;
  if (!tmp) return NULL;
  site_rec_defaults(tmp);
  site_hc_put(tmp, &sh->hc);
  all = cJSON_CreateObject();
  if (all && fields_json_add(all, site_fields, FORM_OUT, tmp) == 0)
    hc = cJSON_DetachItemFromObjectCaseSensitive(all, "health_check");
  cJSON_Delete(all);
  free(tmp);
  return hc;
}

static const char *const shadow_keys[] = {SHADOW_KEY, NULL};

static int shadow_apply(const cJSON *obj, void *member, struct field_err *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, SHADOW_KEY);
  struct site_shadow cand;
  if (!v) return 0;
  memcpy(&cand, member, sizeof cand);
  if (shadow_apply_value(v, &cand, SHADOW_KEY, err) < 0) return -1;
  memcpy(member, &cand, sizeof cand);
  return 0;
}

static int shadow_add_json(cJSON *obj, const void *member) {
  const struct site_shadow *sh = member;
  cJSON *hc;
  if (!sh->set) return cJSON_AddNullToObject(obj, SHADOW_KEY) ? 0 : -1;
  hc = shadow_object(sh);
  if (!hc) return -1;
  cJSON_AddItemToObject(obj, SHADOW_KEY, hc);
  return 0;
}

static char *shadow_to_text(const void *member) {
  const struct site_shadow *sh = member;
  cJSON *hc;
  char *t;
  if (!sh->set) return NULL;
  hc = shadow_object(sh);
  t = hc ? cJSON_PrintUnformatted(hc) : NULL;
  cJSON_Delete(hc);
  return t;
}

static int shadow_is_default(const void *member) {
  return !((const struct site_shadow *)member)->set;
}

static int shadow_from_text(const char *text, void *member) {
  struct site_shadow *sh = member;
  struct field_err err;
  cJSON *v;
  int rc;
  memset(sh, 0, sizeof *sh);
  if (!text || !text[0]) return 0;
  v = json_parse(text, strlen(text));
  rc = v ? shadow_apply_value(v, sh, SHADOW_KEY, &err) : -1;
  cJSON_Delete(v);
  if (rc < 0) memset(sh, 0, sizeof *sh);
  return rc;
}

/* Its header values are write-only below admin, as health_check's (docs/design.md#secrets). */
static int shadow_redact(void *member) {
  struct site_shadow *sh = member;
  return sh->set ? hcheck_redact(&sh->hc.opts) : 0;
}

static void shadow_keep_secrets(void *member, const void *stored) {
  struct site_shadow *sh = member;
  const struct site_shadow *was = stored;
  if (sh->set && was->set) hcheck_keep_secrets(&sh->hc.opts, &was->hc.opts);
}

const struct field_codec site_shadow_codec = {
    .keys = shadow_keys,
    .apply = shadow_apply,
    .add_json = shadow_add_json,
    .to_text = shadow_to_text,
    .is_default = shadow_is_default,
    .from_text = shadow_from_text,
    .redact = shadow_redact,
    .keep_secrets = shadow_keep_secrets,
};
