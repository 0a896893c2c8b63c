/* model — JSON <-> site and origin records, with field-by-field validation. */
#include "model.h"

#include <curl/curl.h>
#include <strings.h>

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fields.h"
#include "hcheck.h"
#include "hostname.h"
#include "json.h"
#include "noderetry.h"

/* A table failure as a model error. */
static int from_fields(struct field_err *err, const struct field_err *fe) {
  *err = *fe;
  return -1;
}

static int valid_path(char *p) {
  if (p[0] != '/') return 0;
  for (; *p; p++)
    if ((unsigned char)*p <= 0x20 || (unsigned char)*p == 0x7f) return 0;
  return 1;
}

#define S(m) FIELD_AT(struct site_rec, m)
#define S_AT(m) .offset = offsetof(struct site_rec, m), .size = sizeof(((struct site_rec *)0)->m)
static const struct field_def site_fields[] = {
    {"name", FIELD_STR, FIELD_REQUIRED, S(name), 1, 0, 0, NULL, fields_name_valid, FIELDS_NAME_WHAT,
     0, NULL, 0, 0},
    {.name = "failback",
     .type = FIELD_NAMED,
     S_AT(failback),
     FIELD_NAMES(health_failback_names),
     .what = "\"auto\" or \"manual\""},
    {"failback_hold_ms", FIELD_INT, 0, S(failback_hold_ms), 0, 86400000, 0, NULL, NULL, NULL, 0,
     NULL, 0, 0},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0},
};

static const struct field_def health_check_fields[] = {
    {"enabled", FIELD_BOOL, 0, S(hc_enabled), 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0},
    {"path", FIELD_STR, 0, S(hc_path), 1, 0, 0, NULL, valid_path,
     "a path starting with '/' with no spaces or control characters", 0, NULL, 0, 0},
    {"timeout_ms", FIELD_INT, 0, S(hc_timeout_ms), 100, 60000, 5000, NULL, NULL, NULL, 0, NULL, 0,
     0},
    {"unhealthy_after", FIELD_INT, 0, S(hc_unhealthy_after), 1, 100, 3, NULL, NULL, NULL, 0, NULL,
     0, 0},
    {"healthy_after", FIELD_INT, 0, S(hc_healthy_after), 1, 100, 2, NULL, NULL, NULL, 0, NULL, 0,
     0},
    {"checkpoints", FIELD_BOOL, 0, S(hc_checkpoints), 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0},
};
#undef S

int model_origin_apply(const cJSON *obj, struct origin_rec *o, int creating, const char *prefix,
                       struct field_err *err) {
  struct field_err fe;
  struct origin_rec cand;
  if (!cJSON_IsObject(obj))
    return fields_fail(err, 422, "invalid_type", NULL, prefix && *prefix ? prefix : "origin",
                       "an origin must be a JSON object");
  if (creating) {
    memset(&cand, 0, sizeof cand);
    fields_defaults(site_origin_fields, &cand);
    cand.enabled = 1;
    memcpy(cand.scheme, "https", 6);
    cand.health = HEALTH_UNKNOWN;
  } else {
    cand = *o;
  }
  if (fields_apply_form(obj, site_origin_fields, FORM_IN, NULL, prefix,
                        creating ? FIELDS_CREATE : 0, &cand, &fe) < 0)
    return from_fields(err, &fe);
  if (creating && !cJSON_GetObjectItemCaseSensitive(obj, "port"))
    cand.port = strcmp(cand.scheme, "https") == 0 ? 443 : 80;
  *o = cand;
  return 0;
}

static int apply_hostnames(const cJSON *arr, struct site_rec *s, struct field_err *err) {
  const cJSON *it;
  int n = 0;
  char f[96];
  if (!cJSON_IsArray(arr))
    return fields_fail(err, 422, "invalid_type", NULL, "hostnames",
                       "hostnames must be an array of strings");
  if (cJSON_GetArraySize(arr) < 1 || cJSON_GetArraySize(arr) > SITE_MAX_HOSTNAMES)
    return fields_fail(err, 422, "out_of_range", NULL, "hostnames",
                       "a site needs 1 to %d hostnames", SITE_MAX_HOSTNAMES);
  cJSON_ArrayForEach(it, arr) {
    snprintf(f, sizeof f, "hostnames[%d]", n);
    if (!cJSON_IsString(it) || strlen(it->valuestring) >= sizeof s->hostnames[0])
      return fields_fail(err, 422, "invalid_value", NULL, f,
                         "a hostname must be a string of at most 253 characters");
    memcpy(s->hostnames[n], it->valuestring, strlen(it->valuestring) + 1);
    hostname_lower(s->hostnames[n]);
    if (!hostname_valid(s->hostnames[n]))
      return fields_fail(err, 422, "invalid_value", NULL, f, "'%s' is not a valid hostname",
                         it->valuestring);
    for (int j = 0; j < n; j++)
      if (strcmp(s->hostnames[j], s->hostnames[n]) == 0)
        return fields_fail(err, 422, "duplicate", NULL, f, "hostname '%s' is listed twice",
                           s->hostnames[n]);
    n++;
  }
  s->n_hostnames = n;
  return 0;
}

static int apply_health_check(const cJSON *hc, struct site_rec *s, int *enabled_given,
                              struct field_err *err) {
  /* the option keys are read by hcheck_apply_json (common/hcheck: nodes parse them too) */
  static const char *const option_keys[] = {"type",
                                            "method",
                                            "headers",
                                            "expected_codes",
                                            "expected_body",
                                            "port",
                                            "interval_ms",
                                            "level_min_healthy",
                                            NULL};
  struct field_err fe;
  struct field_err he;
  *enabled_given = cJSON_IsObject(hc) && cJSON_GetObjectItemCaseSensitive(hc, "enabled") != NULL;
  if (fields_apply(hc, health_check_fields, option_keys, "health_check", 0, s, &fe) < 0)
    return from_fields(err, &fe);
  if (hcheck_apply_json(hc, &s->hc, &he) < 0)
    return fields_fail(err, he.status, he.code, "health_check", he.field, "%s", he.message);
  return 0;
}

/* node_retry through the shared field table (common/noderetry): unknown keys are 400. */
static int apply_node_retry(const cJSON *nr, struct site_rec *s, struct field_err *err) {
  struct skip_params p;
  struct noderetry_err e;
  site_rec_retry(s, &p);
  if (noderetry_apply(nr, &p, 1, "node_retry", &e) < 0)
    return fields_fail(err, e.status, e.code, NULL, e.field, "%s", e.message);
  site_rec_set_retry(s, &p);
  return 0;
}

int model_enabled_origins(const struct site_rec *s) {
  int n = 0;
  for (int i = 0; i < s->n_origins; i++)
    n += s->origins[i].enabled ? 1 : 0;
  return n;
}

int model_check_health_rule(const struct site_rec *s, struct field_err *err) {
  if (s->hc_enabled && model_enabled_origins(s) < 2)
    return fields_fail(err, 422, "health_check_needs_two_origins", NULL, "health_check.enabled",
                       "health checks need at least two enabled origins (the site has %d)",
                       model_enabled_origins(s));
  return 0;
}

/* Top-level fields shared by create and patch (origins are the caller's). */
static int apply_common(const cJSON *body, struct site_rec *s, int *hc_enabled_given,
                        unsigned flags, struct field_err *err) {
  static const char *const nested[] = {"hostnames", "health_check", "node_retry", "origins", NULL};
  struct field_err fe;
  const cJSON *v;
  if (fields_apply(body, site_fields, nested, "", flags, s, &fe) < 0) return from_fields(err, &fe);
  v = cJSON_GetObjectItemCaseSensitive(body, "hostnames");
  if (!v && (flags & FIELDS_CREATE))
    return fields_fail(err, 422, "required", NULL, "hostnames", "hostnames is required");
  if (v && apply_hostnames(v, s, err) < 0) return -1;
  v = cJSON_GetObjectItemCaseSensitive(body, "health_check");
  if (v && apply_health_check(v, s, hc_enabled_given, err) < 0) return -1;
  v = cJSON_GetObjectItemCaseSensitive(body, "node_retry");
  if (v && apply_node_retry(v, s, err) < 0) return -1;
  return 0;
}

int model_site_create(const cJSON *body, struct site_rec *s, struct field_err *err) {
  const cJSON *origins;
  int hc_given = 0;
  if (apply_common(body, s, &hc_given, FIELDS_CREATE, err) < 0) return -1;
  origins = cJSON_GetObjectItemCaseSensitive(body, "origins");
  if (origins) {
    const cJSON *it;
    int n = cJSON_IsArray(origins) ? cJSON_GetArraySize(origins) : -1;
    if (n < 0)
      return fields_fail(err, 422, "invalid_type", NULL, "origins", "origins must be an array");
    if (n > SITE_MAX_ORIGINS)
      return fields_fail(err, 422, "out_of_range", NULL, "origins", "a site has at most %d origins",
                         SITE_MAX_ORIGINS);
    s->origins = calloc((size_t)(n ? n : 1), sizeof *s->origins);
    if (!s->origins) return fields_fail(err, 500, "internal", NULL, "origins", "out of memory");
    cJSON_ArrayForEach(it, origins) {
      char prefix[32];
      snprintf(prefix, sizeof prefix, "origins[%d]", s->n_origins);
      if (model_origin_apply(it, &s->origins[s->n_origins], 1, prefix, err) < 0) return -1;
      s->n_origins++;
    }
  }
  /* health checks default to on when the site can have them (two enabled origins) */
  if (!hc_given) s->hc_enabled = model_enabled_origins(s) >= 2;
  return model_check_health_rule(s, err);
}

int model_site_patch(const cJSON *body, struct site_rec *s, struct field_err *err) {
  int hc_given = 0;
  if (cJSON_GetObjectItemCaseSensitive(body, "origins"))
    return fields_fail(err, 400, "unknown_field", NULL, "origins",
                       "origins are changed through /v1/sites/{id}/origins");
  if (apply_common(body, s, &hc_given, 0, err) < 0) return -1;
  /* asking for checks needs two enabled origins; checks left on by earlier writes may be paused */
  if (hc_given && s->hc_enabled) return model_check_health_rule(s, err);
  return 0;
}

const char *model_hc_state(const struct site_rec *s, const char **reason) {
  int n = model_enabled_origins(s);
  if (!s->hc_enabled) {
    *reason = "health checks are turned off for this site";
    return "disabled";
  }
  if (n < 2) {
    *reason = "paused: health checks need at least two enabled origins";
    return "paused";
  }
  *reason = "probing every round";
  return "active";
}

cJSON *model_origin_json(const struct origin_rec *o) {
  cJSON *j = cJSON_CreateObject();
  if (j && fields_json_add(j, site_origin_fields, FORM_OUT, o) < 0) {
    cJSON_Delete(j);
    return NULL;
  }
  return j;
}

cJSON *model_node_retry_json(const struct site_rec *s) {
  struct skip_params p;
  site_rec_retry(s, &p);
  return noderetry_json(&p);
}

void model_site_settings_add(cJSON *j, const struct site_rec *s, int with_state) {
  cJSON *a, *hc;
  const char *reason;
  json_add_i64(j, "id", s->id);
  cJSON_AddStringToObject(j, "name", s->name);
  a = cJSON_AddArrayToObject(j, "hostnames");
  for (int i = 0; i < s->n_hostnames; i++)
    cJSON_AddItemToArray(a, cJSON_CreateString(s->hostnames[i]));
  cJSON_AddStringToObject(j, "failback", health_failback_to_string(s->failback));
  json_add_i64(j, "failback_hold_ms", s->failback_hold_ms);
  hc = cJSON_AddObjectToObject(j, "health_check");
  cJSON_AddBoolToObject(hc, "enabled", s->hc_enabled);
  if (with_state) cJSON_AddStringToObject(hc, "state", model_hc_state(s, &reason));
  cJSON_AddStringToObject(hc, "path", s->hc_path);
  json_add_i64(hc, "timeout_ms", s->hc_timeout_ms);
  json_add_i64(hc, "unhealthy_after", s->hc_unhealthy_after);
  json_add_i64(hc, "healthy_after", s->hc_healthy_after);
  cJSON_AddBoolToObject(hc, "checkpoints", s->hc_checkpoints);
  hcheck_add_json(hc, &s->hc, 1);
  cJSON_AddItemToObject(j, "node_retry", model_node_retry_json(s));
}

void model_webhook_events_add(cJSON *j, const char *events) {
  cJSON *ev = events ? json_parse(events, strlen(events)) : NULL;
  if (cJSON_IsArray(ev))
    cJSON_AddItemToObject(j, "events", ev);
  else {
    cJSON_Delete(ev);
    cJSON_AddNullToObject(j, "events");
  }
}

cJSON *model_site_json(const struct site_rec *s) {
  cJSON *j = cJSON_CreateObject(), *a;
  model_site_settings_add(j, s, 1);
  json_add_i64(j, "current_level", s->current_level);
  json_add_i64(j, "config_version", s->config_version);
  json_add_i64(j, "revision", s->revision);
  a = cJSON_AddArrayToObject(j, "origins");
  for (int i = 0; i < s->n_origins; i++)
    cJSON_AddItemToArray(a, model_origin_json(&s->origins[i]));
  json_add_time(j, "created_at", s->created_at);
  json_add_time(j, "updated_at", s->updated_at);
  return j;
}

int model_webhook_url_valid(const char *url) {
  CURLU *u;
  char *scheme = NULL, *host = NULL;
  const char *auth;
  int ok = 0;
  for (const unsigned char *p = (const unsigned char *)url; *p; p++)
    if (*p <= 0x20 || *p == 0x7f) return 0;
  if (strncasecmp(url, "http://", 7) == 0)
    auth = url + 7;
  else if (strncasecmp(url, "https://", 8) == 0)
    auth = url + 8;
  else
    return 0;
  if (*auth == '\0' || *auth == '/' || *auth == '?' || *auth == '#') return 0; /* no host */
  u = curl_url();
  if (!u) return 0;
  if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK)
    ok = (strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0) && host[0] != '\0';
  curl_free(scheme);
  curl_free(host);
  curl_url_cleanup(u);
  return ok;
}
