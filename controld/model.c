/* model — JSON <-> site and origin records, with field-by-field validation. */
#include "model.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hcheck.h"
#include "hostname.h"
#include "json.h"
#include "noderetry.h"

static int fail(struct model_err *err, unsigned status, const char *code, const char *field,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int fail(struct model_err *err, unsigned status, const char *code, const char *field,
                const char *fmt, ...) {
  va_list ap;
  err->status = status;
  err->code = code;
  snprintf(err->field, sizeof err->field, "%s", field);
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return -1;
}

/* Join prefix and key into a field path ("origins[1].port", "health_check.path"). */
static const char *path(char *out, size_t cap, const char *prefix, const char *key) {
  if (prefix && *prefix) snprintf(out, cap, "%s.%s", prefix, key);
  else snprintf(out, cap, "%s", key);
  return out;
}

static int unknown_keys(const cJSON *obj, const char *const *allowed, const char *prefix,
                        struct model_err *err) {
  const char *bad = NULL;
  char f[96];
  if (json_only_keys(obj, allowed, &bad) == 0) return 0;
  return fail(err, 400, "unknown_field", path(f, sizeof f, prefix, bad), "unknown field '%s'", bad);
}

/* Read an integer field into *out when present; 422 when out of range or of the wrong type. */
static int get_int(const cJSON *obj, const char *key, int64_t min, int64_t max, int64_t *out,
                   const char *prefix, struct model_err *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  char f[96];
  if (!v) return 0;
  if (!cJSON_IsNumber(v))
    return fail(err, 422, "invalid_type", path(f, sizeof f, prefix, key), "%s must be an integer",
                key);
  if (!json_is_int(v, min, max))
    return fail(err, 422, "out_of_range", path(f, sizeof f, prefix, key),
                "%s must be an integer from %lld to %lld", key, (long long)min, (long long)max);
  *out = (int64_t)v->valuedouble;
  return 0;
}

static int get_bool(const cJSON *obj, const char *key, int *out, const char *prefix,
                    struct model_err *err) {
  char f[96];
  int r = json_bool(obj, key, out);
  if (r < 0)
    return fail(err, 422, "invalid_type", path(f, sizeof f, prefix, key), "%s must be a boolean",
                key);
  return 0;
}

/* Copy a string field into out (cap) when present; 422 when not a string or too long. 1 = absent. */
static int get_str(const cJSON *obj, const char *key, char *out, size_t cap, int allow_null,
                   const char *prefix, struct model_err *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  char f[96];
  size_t n;
  if (!v) return 1;
  if (cJSON_IsNull(v) && allow_null) {
    out[0] = '\0';
    return 0;
  }
  if (!cJSON_IsString(v))
    return fail(err, 422, "invalid_type", path(f, sizeof f, prefix, key), "%s must be a string",
                key);
  n = strlen(v->valuestring);
  if (n >= cap)
    return fail(err, 422, "too_long", path(f, sizeof f, prefix, key),
                "%s must be at most %zu characters", key, cap - 1);
  memcpy(out, v->valuestring, n + 1);
  return 0;
}

/* An origin address: an IPv4 or IPv6 literal, or a hostname. */
static int valid_address(char *a) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, a, buf) == 1 || inet_pton(AF_INET6, a, buf) == 1) return 1;
  hostname_lower(a);
  return hostname_valid(a);
}

static int valid_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 64) return 0;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' && *s != '.') return 0;
  return 1;
}

static int valid_path(const char *p) {
  if (p[0] != '/') return 0;
  for (; *p; p++)
    if ((unsigned char)*p <= 0x20 || (unsigned char)*p == 0x7f) return 0;
  return 1;
}

int model_origin_apply(const cJSON *obj, struct origin_rec *o, int creating, const char *prefix,
                       struct model_err *err) {
  static const char *const keys[] = {"level",   "address", "port",    "scheme", "host_header",
                                     "weight",  "enabled", NULL};
  char f[96];
  int64_t v;
  int r, port_given;
  if (!cJSON_IsObject(obj))
    return fail(err, 422, "invalid_type", prefix && *prefix ? prefix : "origin",
                "an origin must be a JSON object");
  if (unknown_keys(obj, keys, prefix, err) < 0) return -1;
  if (creating) {
    memset(o, 0, sizeof *o);
    o->level = 1;
    o->weight = 1;
    o->enabled = 1;
    memcpy(o->scheme, "https", 6);
    memcpy(o->health, "unknown", 8);
  }
  v = o->level;
  if (get_int(obj, "level", 1, 16, &v, prefix, err) < 0) return -1;
  o->level = (int)v;
  r = get_str(obj, "scheme", o->scheme, sizeof o->scheme, 0, prefix, err);
  if (r < 0) return -1;
  if (strcmp(o->scheme, "http") != 0 && strcmp(o->scheme, "https") != 0)
    return fail(err, 422, "invalid_value", path(f, sizeof f, prefix, "scheme"),
                "scheme must be \"http\" or \"https\"");
  r = get_str(obj, "address", o->address, sizeof o->address, 0, prefix, err);
  if (r < 0) return -1;
  if (r == 1 && creating)
    return fail(err, 422, "required", path(f, sizeof f, prefix, "address"), "address is required");
  if (!valid_address(o->address))
    return fail(err, 422, "invalid_value", path(f, sizeof f, prefix, "address"),
                "address must be an IPv4 or IPv6 address or a hostname");
  port_given = cJSON_GetObjectItemCaseSensitive(obj, "port") != NULL;
  v = o->port;
  if (get_int(obj, "port", 1, 65535, &v, prefix, err) < 0) return -1;
  o->port = (int)v;
  if (creating && !port_given) o->port = strcmp(o->scheme, "https") == 0 ? 443 : 80;
  r = get_str(obj, "host_header", o->host_header, sizeof o->host_header, 1, prefix, err);
  if (r < 0) return -1;
  if (o->host_header[0]) {
    hostname_lower(o->host_header);
    if (!hostname_valid(o->host_header))
      return fail(err, 422, "invalid_value", path(f, sizeof f, prefix, "host_header"),
                  "host_header must be a valid hostname");
  }
  v = o->weight;
  if (get_int(obj, "weight", 1, 100, &v, prefix, err) < 0) return -1;
  o->weight = (int)v;
  if (get_bool(obj, "enabled", &o->enabled, prefix, err) < 0) return -1;
  return 0;
}

static int apply_hostnames(const cJSON *arr, struct site_rec *s, struct model_err *err) {
  const cJSON *it;
  int n = 0;
  char f[96];
  if (!cJSON_IsArray(arr))
    return fail(err, 422, "invalid_type", "hostnames", "hostnames must be an array of strings");
  if (cJSON_GetArraySize(arr) < 1 || cJSON_GetArraySize(arr) > STORE_MAX_HOSTNAMES)
    return fail(err, 422, "out_of_range", "hostnames", "a site needs 1 to %d hostnames",
                STORE_MAX_HOSTNAMES);
  cJSON_ArrayForEach(it, arr) {
    snprintf(f, sizeof f, "hostnames[%d]", n);
    if (!cJSON_IsString(it) || strlen(it->valuestring) >= sizeof s->hostnames[0])
      return fail(err, 422, "invalid_value", f, "a hostname must be a string of at most 253 characters");
    memcpy(s->hostnames[n], it->valuestring, strlen(it->valuestring) + 1);
    hostname_lower(s->hostnames[n]);
    if (!hostname_valid(s->hostnames[n]))
      return fail(err, 422, "invalid_value", f, "'%s' is not a valid hostname", it->valuestring);
    for (int j = 0; j < n; j++)
      if (strcmp(s->hostnames[j], s->hostnames[n]) == 0)
        return fail(err, 422, "duplicate", f, "hostname '%s' is listed twice", s->hostnames[n]);
    n++;
  }
  s->n_hostnames = n;
  return 0;
}

static int apply_health_check(const cJSON *hc, struct site_rec *s, int *enabled_given,
                              struct model_err *err) {
  static const char *const keys[] = {
      "enabled",        "path",   "timeout_ms", "unhealthy_after", "healthy_after",
      "checkpoints",    "type",   "method",     "headers",         "expected_codes",
      "expected_body",  "port",   "interval_ms", "level_min_healthy", NULL};
  const char *P = "health_check";
  char f[96];
  struct hcheck_err he;
  int r;
  if (!cJSON_IsObject(hc))
    return fail(err, 422, "invalid_type", P, "health_check must be an object");
  if (unknown_keys(hc, keys, P, err) < 0) return -1;
  if (hcheck_apply_json(hc, &s->hc, &he) < 0)
    return fail(err, he.status, he.code, path(f, sizeof f, P, he.field), "%s", he.message);
  *enabled_given = cJSON_GetObjectItemCaseSensitive(hc, "enabled") != NULL;
  if (get_bool(hc, "enabled", &s->hc_enabled, P, err) < 0) return -1;
  r = get_str(hc, "path", s->hc_path, sizeof s->hc_path, 0, P, err);
  if (r < 0) return -1;
  if (!valid_path(s->hc_path))
    return fail(err, 422, "invalid_value", path(f, sizeof f, P, "path"),
                "path must start with '/' and contain no spaces or control characters");
  if (get_int(hc, "timeout_ms", 100, 60000, &s->hc_timeout_ms, P, err) < 0 ||
      get_int(hc, "unhealthy_after", 1, 100, &s->hc_unhealthy_after, P, err) < 0 ||
      get_int(hc, "healthy_after", 1, 100, &s->hc_healthy_after, P, err) < 0 ||
      get_bool(hc, "checkpoints", &s->hc_checkpoints, P, err) < 0)
    return -1;
  return 0;
}

/* node_retry through the shared field table (common/noderetry): unknown keys are 400. */
static int apply_node_retry(const cJSON *nr, struct site_rec *s, struct model_err *err) {
  struct skip_params p;
  struct noderetry_err e;
  site_rec_retry(s, &p);
  if (noderetry_apply(nr, &p, 1, "node_retry", &e) < 0)
    return fail(err, e.status, e.code, e.field, "%s", e.message);
  site_rec_set_retry(s, &p);
  return 0;
}

int model_enabled_origins(const struct site_rec *s) {
  int n = 0;
  for (int i = 0; i < s->n_origins; i++) n += s->origins[i].enabled ? 1 : 0;
  return n;
}

int model_check_health_rule(const struct site_rec *s, struct model_err *err) {
  if (s->hc_enabled && model_enabled_origins(s) < 2)
    return fail(err, 422, "health_check_needs_two_origins", "health_check.enabled",
                "health checks need at least two enabled origins (the site has %d)",
                model_enabled_origins(s));
  return 0;
}

/* Top-level fields shared by create and patch. */
static int apply_common(const cJSON *body, struct site_rec *s, int *hc_enabled_given,
                        struct model_err *err) {
  const cJSON *v;
  int r;
  char fb[16];
  r = get_str(body, "name", s->name, sizeof s->name, 0, "", err);
  if (r < 0) return -1;
  if (r == 0 && !valid_name(s->name))
    return fail(err, 422, "invalid_value", "name",
                "name must be 1-64 characters of letters, digits, '.', '_' or '-'");
  v = cJSON_GetObjectItemCaseSensitive(body, "hostnames");
  if (v && apply_hostnames(v, s, err) < 0) return -1;
  snprintf(fb, sizeof fb, "%s", s->failback);
  r = get_str(body, "failback", fb, sizeof fb, 0, "", err);
  if (r < 0) return -1;
  if (strcmp(fb, "auto") != 0 && strcmp(fb, "manual") != 0)
    return fail(err, 422, "invalid_value", "failback", "failback must be \"auto\" or \"manual\"");
  memcpy(s->failback, fb, strlen(fb) + 1);
  if (get_int(body, "failback_hold_ms", 0, 86400000, &s->failback_hold_ms, "", err) < 0) return -1;
  v = cJSON_GetObjectItemCaseSensitive(body, "health_check");
  if (v && apply_health_check(v, s, hc_enabled_given, err) < 0) return -1;
  v = cJSON_GetObjectItemCaseSensitive(body, "node_retry");
  if (v && apply_node_retry(v, s, err) < 0) return -1;
  return 0;
}

int model_site_create(const cJSON *body, struct site_rec *s, struct model_err *err) {
  static const char *const keys[] = {"name",         "hostnames",  "failback", "failback_hold_ms",
                                     "health_check", "node_retry", "origins",  NULL};
  const cJSON *origins;
  int hc_given = 0;
  if (unknown_keys(body, keys, "", err) < 0) return -1;
  if (!cJSON_GetObjectItemCaseSensitive(body, "name"))
    return fail(err, 422, "required", "name", "name is required");
  if (!cJSON_GetObjectItemCaseSensitive(body, "hostnames"))
    return fail(err, 422, "required", "hostnames", "hostnames is required");
  if (apply_common(body, s, &hc_given, err) < 0) return -1;
  origins = cJSON_GetObjectItemCaseSensitive(body, "origins");
  if (origins) {
    const cJSON *it;
    int n = cJSON_IsArray(origins) ? cJSON_GetArraySize(origins) : -1;
    if (n < 0) return fail(err, 422, "invalid_type", "origins", "origins must be an array");
    if (n > STORE_MAX_ORIGINS)
      return fail(err, 422, "out_of_range", "origins", "a site has at most %d origins",
                  STORE_MAX_ORIGINS);
    s->origins = calloc((size_t)(n ? n : 1), sizeof *s->origins);
    if (!s->origins) return fail(err, 500, "internal", "origins", "out of memory");
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

int model_site_patch(const cJSON *body, struct site_rec *s, struct model_err *err) {
  static const char *const keys[] = {"name",         "hostnames",  "failback", "failback_hold_ms",
                                     "health_check", "node_retry", NULL};
  int hc_given = 0;
  if (cJSON_GetObjectItemCaseSensitive(body, "origins"))
    return fail(err, 400, "unknown_field", "origins",
                "origins are changed through /v1/sites/{id}/origins");
  if (unknown_keys(body, keys, "", err) < 0) return -1;
  if (apply_common(body, s, &hc_given, err) < 0) return -1;
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
  json_add_i64(j, "id", o->id);
  json_add_i64(j, "level", o->level);
  cJSON_AddStringToObject(j, "address", o->address);
  json_add_i64(j, "port", o->port);
  cJSON_AddStringToObject(j, "scheme", o->scheme);
  json_add_str_or_null(j, "host_header", o->host_header[0] ? o->host_header : NULL);
  json_add_i64(j, "weight", o->weight);
  cJSON_AddBoolToObject(j, "enabled", o->enabled);
  cJSON_AddStringToObject(j, "health", o->health[0] ? o->health : "unknown");
  return j;
}

cJSON *model_node_retry_json(const struct site_rec *s) {
  struct skip_params p;
  site_rec_retry(s, &p);
  return noderetry_json(&p);
}

cJSON *model_site_json(const struct site_rec *s) {
  cJSON *j = cJSON_CreateObject(), *a, *hc;
  const char *reason;
  json_add_i64(j, "id", s->id);
  cJSON_AddStringToObject(j, "name", s->name);
  a = cJSON_AddArrayToObject(j, "hostnames");
  for (int i = 0; i < s->n_hostnames; i++)
    cJSON_AddItemToArray(a, cJSON_CreateString(s->hostnames[i]));
  cJSON_AddStringToObject(j, "failback", s->failback);
  json_add_i64(j, "failback_hold_ms", s->failback_hold_ms);
  hc = cJSON_AddObjectToObject(j, "health_check");
  cJSON_AddBoolToObject(hc, "enabled", s->hc_enabled);
  cJSON_AddStringToObject(hc, "state", model_hc_state(s, &reason));
  cJSON_AddStringToObject(hc, "path", s->hc_path);
  json_add_i64(hc, "timeout_ms", s->hc_timeout_ms);
  json_add_i64(hc, "unhealthy_after", s->hc_unhealthy_after);
  json_add_i64(hc, "healthy_after", s->hc_healthy_after);
  cJSON_AddBoolToObject(hc, "checkpoints", s->hc_checkpoints);
  hcheck_add_json(hc, &s->hc, 1);
  cJSON_AddItemToObject(j, "node_retry", model_node_retry_json(s));
  json_add_i64(j, "current_level", s->current_level);
  json_add_i64(j, "config_version", s->config_version);
  a = cJSON_AddArrayToObject(j, "origins");
  for (int i = 0; i < s->n_origins; i++) cJSON_AddItemToArray(a, model_origin_json(&s->origins[i]));
  json_add_time(j, "created_at", s->created_at);
  json_add_time(j, "updated_at", s->updated_at);
  return j;
}
