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
    cand.scheme = SCHEME_HTTPS;
    cand.health = HEALTH_UNKNOWN;
  } else {
    cand = *o;
  }
  if (fields_apply_form(obj, site_origin_fields, FORM_IN, NULL, prefix,
                        creating ? FIELDS_CREATE : 0, &cand, &fe) < 0)
    return from_fields(err, &fe);
  if (creating && !cJSON_GetObjectItemCaseSensitive(obj, "port"))
    cand.port = cand.scheme == SCHEME_HTTPS ? 443 : 80;
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

/* The health_check object through the site table's rows of that object (their probe options
   through hcheck_codec: common/hcheck, which nodes read too). */
static int apply_health_check(const cJSON *hc, struct site_rec *s, int *enabled_given,
                              struct field_err *err) {
  *enabled_given = cJSON_IsObject(hc) && cJSON_GetObjectItemCaseSensitive(hc, "enabled") != NULL;
  return fields_apply_in(hc, site_fields, "health_check", FORM_IN, NULL, "health_check", 0, s, err);
}

/* node_retry through the shared field table (common/noderetry): unknown keys are 400. */
static int apply_node_retry(const cJSON *nr, struct site_rec *s, struct field_err *err) {
  struct skip_params p;
  site_rec_retry(s, &p);
  if (noderetry_apply(nr, &p, 1, "node_retry", err) < 0) return -1;
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

const char *const model_site_nested_keys[] = {"hostnames", "health_check", "node_retry", "origins",
                                              NULL};

/* Top-level fields shared by create and patch (origins are the caller's). */
static int apply_common(const cJSON *body, struct site_rec *s, int *hc_enabled_given,
                        unsigned flags, struct field_err *err) {
  const cJSON *v;
  if (fields_apply_form(body, site_fields, FORM_IN, model_site_nested_keys, "", flags, s, err) < 0)
    return -1;
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

/* Move obj's member key (added last) to just after its member after: the members between them go
   behind it, in their order. */
static void move_after(cJSON *obj, const char *after, const char *key) {
  cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  cJSON *at = cJSON_GetObjectItemCaseSensitive(obj, after);
  if (!item || !at) return;
  while (at->next && at->next != item)
    cJSON_AddItemToArray(obj, cJSON_DetachItemViaPointer(obj, at->next)); /* keeps its key */
}

int model_site_json_add(cJSON *j, const struct site_rec *s, unsigned form) {
  cJSON *a, *hc;
  const char *reason;
  if (fields_json_add(j, site_fields, form, s) < 0) return -1;
  a = cJSON_AddArrayToObject(j, "hostnames");
  for (int i = 0; a && i < s->n_hostnames; i++)
    if (!cJSON_AddItemToArray(a, cJSON_CreateString(s->hostnames[i]))) return -1;
  if (!a) return -1;
  move_after(j, "name", "hostnames");
  hc = cJSON_GetObjectItemCaseSensitive(j, "health_check");
  if (form == FORM_OUT && hc) {
    if (!cJSON_AddStringToObject(hc, "state", model_hc_state(s, &reason))) return -1;
    move_after(hc, "enabled", "state");
  }
  return 0;
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
  if (!j || model_site_json_add(j, s, FORM_OUT) < 0) {
    cJSON_Delete(j);
    return NULL;
  }
  a = cJSON_AddArrayToObject(j, "origins");
  for (int i = 0; i < s->n_origins; i++)
    cJSON_AddItemToArray(a, model_origin_json(&s->origins[i]));
  json_add_time(j, "created_at", s->created_at);
  json_add_time(j, "updated_at", s->updated_at);
  return j;
}

int model_webhook_url_valid(const char *url) {
  CURLU *u;
  char *scheme = NULL, *host = NULL, *port = NULL;
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
  /* port 0 reaches nothing: an explicit port is 1-65535 */
  if (ok && curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK)
    ok = strspn(port, "0") < strlen(port); /* libcurl took digits; not all of them zeros */
  curl_free(port);
  curl_free(scheme);
  curl_free(host);
  curl_url_cleanup(u);
  return ok;
}
