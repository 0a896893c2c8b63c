/* hcheck — health-check options and the success rule (see hcheck.h). */
#include "hcheck.h"

#include "fields.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json.h"

/* Request headers a check may not set: the probe owns the framing, the Host (the origin's
 * host_header) and the User-Agent (docs/design.md#probe-rounds: it tells controld's probes from the
 * nodes'), and hop-by-hop headers mean nothing on a one-request connection. */
static const char *const reserved_headers[] = {"host",
                                               "content-length",
                                               "transfer-encoding",
                                               "connection",
                                               "keep-alive",
                                               "proxy-connection",
                                               "te",
                                               "trailer",
                                               "upgrade",
                                               "proxy-authenticate",
                                               "proxy-authorization",
                                               "user-agent",
                                               "expect",
                                               NULL};

void hcheck_defaults(struct hcheck_opts *o) {
  memset(o, 0, sizeof *o);
  o->type = HCHECK_HTTP;
  o->method = HCHECK_GET;
  o->level_min_healthy = 1;
}

const char *hcheck_type_to_string(enum hcheck_type t) {
  return t == HCHECK_TCP ? "tcp" : "http";
}

const char *hcheck_method_to_string(enum hcheck_method m) {
  return m == HCHECK_HEAD ? "HEAD" : "GET";
}

/* 1 when c is an RFC 9110 tchar (a header name byte). */
static int tchar(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
  return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int header_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > HCHECK_HEADER_NAME_MAX) return 0;
  for (size_t i = 0; i < n; i++)
    if (!tchar((unsigned char)s[i])) return 0;
  return 1;
}

/* Visible ASCII, inner spaces and tabs; no leading or trailing white space, not empty. */
static int header_value_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > HCHECK_HEADER_VALUE_MAX) return 0;
  if (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t') return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c != '\t' && (c < 0x20 || c > 0x7e)) return 0;
  }
  return 1;
}

static int header_reserved(const char *name) {
  for (int i = 0; reserved_headers[i]; i++)
    if (strcasecmp(name, reserved_headers[i]) == 0) return 1;
  return 0;
}

/* Parse "NNN" into a status 100..599; 0 or -1. */
static int parse_code(const char *s, size_t len, int *out) {
  int v = 0;
  if (len != 3) return -1;
  for (size_t i = 0; i < 3; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  if (v < 100 || v > 599) return -1;
  *out = v;
  return 0;
}

/* One expected_codes entry: an integer 100..599, "NNN" or "NNN-NNN" (lo <= hi). 0 or -1. */
static int parse_range(const cJSON *v, struct hcheck_range *r) {
  const char *s, *dash;
  if (cJSON_IsNumber(v)) {
    if (!json_is_int(v, 100, 599)) return -1;
    r->lo = r->hi = (int)v->valuedouble;
    return 0;
  }
  if (!cJSON_IsString(v)) return -1;
  s = v->valuestring;
  dash = strchr(s, '-');
  if (!dash) {
    if (parse_code(s, strlen(s), &r->lo) < 0) return -1;
    r->hi = r->lo;
    return 0;
  }
  if (parse_code(s, (size_t)(dash - s), &r->lo) < 0) return -1;
  if (parse_code(dash + 1, strlen(dash + 1), &r->hi) < 0) return -1;
  return r->lo <= r->hi ? 0 : -1;
}

static int apply_headers(const cJSON *v, struct hcheck_opts *o, struct field_err *err) {
  const cJSON *h;
  char f[64];
  int n = 0;
  if (cJSON_IsNull(v)) {
    o->n_headers = 0;
    return 0;
  }
  if (!cJSON_IsObject(v))
    return fields_fail(err, 422, "invalid_type", NULL, "headers",
                       "headers must be an object of strings");
  cJSON_ArrayForEach(h, v) {
    const char *name = h->string ? h->string : "";
    snprintf(f, sizeof f, "headers.%.48s", name);
    if (n == HCHECK_MAX_HEADERS)
      return fields_fail(err, 422, "too_many", NULL, "headers", "at most %d headers",
                         HCHECK_MAX_HEADERS);
    if (!header_name_ok(name))
      return fields_fail(err, 422, "invalid_header", NULL, f,
                         "a header name is 1 to %d token characters", HCHECK_HEADER_NAME_MAX);
    if (header_reserved(name))
      return fields_fail(err, 422, "reserved_header", NULL, f,
                         "header %s is set by the probe itself", name);
    for (int k = 0; k < n; k++)
      if (strcasecmp(o->headers[k].name, name) == 0)
        return fields_fail(err, 422, "duplicate_header", NULL, f, "header %s is given twice", name);
    if (!cJSON_IsString(h) || !header_value_ok(h->valuestring))
      return fields_fail(err, 422, "invalid_header", NULL, f,
                         "a header value is a string of 1 to %d printable ASCII characters",
                         HCHECK_HEADER_VALUE_MAX);
    snprintf(o->headers[n].name, sizeof o->headers[n].name, "%s", name);
    snprintf(o->headers[n].value, sizeof o->headers[n].value, "%s", h->valuestring);
    n++;
  }
  o->n_headers = n;
  return 0;
}

static int apply_codes(const cJSON *v, struct hcheck_opts *o, struct field_err *err) {
  const cJSON *c;
  char f[64];
  int n = 0;
  if (cJSON_IsNull(v)) {
    o->n_codes = 0;
    return 0;
  }
  if (!cJSON_IsArray(v))
    return fields_fail(err, 422, "invalid_type", NULL, "expected_codes",
                       "expected_codes must be null or a list of codes and ranges");
  if (cJSON_GetArraySize(v) == 0)
    return fields_fail(err, 422, "out_of_range", NULL, "expected_codes",
                       "expected_codes must name at least one code (null = status < 500)");
  cJSON_ArrayForEach(c, v) {
    snprintf(f, sizeof f, "expected_codes[%d]", n);
    if (n == HCHECK_MAX_CODES)
      return fields_fail(err, 422, "too_many", NULL, "expected_codes",
                         "at most %d codes and ranges", HCHECK_MAX_CODES);
    if (parse_range(c, &o->codes[n]) < 0)
      return fields_fail(err, 422, "invalid_code", NULL, f,
                         "a code is 100 to 599, a range \"200-299\" (low <= high)");
    n++;
  }
  o->n_codes = n;
  return 0;
}

/* A nullable integer option: absent keeps *out, null sets def. 0 or -1. */
static int apply_int(const cJSON *obj, const char *key, int64_t min, int64_t max, int nullable,
                     int64_t def, int64_t *out, struct field_err *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) return 0;
  if (cJSON_IsNull(v) && nullable) {
    *out = def;
    return 0;
  }
  if (!cJSON_IsNumber(v))
    return fields_fail(err, 422, "invalid_type", NULL, key, "%s must be an integer%s", key,
                       nullable ? " or null" : "");
  if (!json_is_int(v, min, max))
    return fields_fail(err, 422, "out_of_range", NULL, key,
                       "%s must be an integer from %lld to %lld", key, (long long)min,
                       (long long)max);
  *out = (int64_t)v->valuedouble;
  return 0;
}

int hcheck_apply_json(const cJSON *obj, struct hcheck_opts *o, struct field_err *err) {
  struct hcheck_opts w = *o;
  const cJSON *v;
  int64_t port = w.port, interval = w.interval_ms, quorum = w.level_min_healthy;

  if (!cJSON_IsObject(obj))
    return fields_fail(err, 422, "invalid_type", NULL, "", "must be an object");
  v = cJSON_GetObjectItemCaseSensitive(obj, "type");
  if (v) {
    if (cJSON_IsString(v) && strcmp(v->valuestring, "http") == 0)
      w.type = HCHECK_HTTP;
    else if (cJSON_IsString(v) && strcmp(v->valuestring, "tcp") == 0)
      w.type = HCHECK_TCP;
    else
      return fields_fail(err, 422, "invalid_value", NULL, "type",
                         "type must be \"http\" or \"tcp\"");
  }
  v = cJSON_GetObjectItemCaseSensitive(obj, "method");
  if (v) {
    if (cJSON_IsString(v) && strcmp(v->valuestring, "GET") == 0)
      w.method = HCHECK_GET;
    else if (cJSON_IsString(v) && strcmp(v->valuestring, "HEAD") == 0)
      w.method = HCHECK_HEAD;
    else
      return fields_fail(err, 422, "invalid_value", NULL, "method",
                         "method must be \"GET\" or \"HEAD\"");
  }
  v = cJSON_GetObjectItemCaseSensitive(obj, "headers");
  if (v && apply_headers(v, &w, err) < 0) return -1;
  v = cJSON_GetObjectItemCaseSensitive(obj, "expected_codes");
  if (v && apply_codes(v, &w, err) < 0) return -1;
  v = cJSON_GetObjectItemCaseSensitive(obj, "expected_body");
  if (v) {
    if (cJSON_IsNull(v)) {
      w.expected_body[0] = '\0';
    } else if (!cJSON_IsString(v) || v->valuestring[0] == '\0' ||
               strlen(v->valuestring) > HCHECK_EXPECTED_BODY_MAX) {
      return fields_fail(err, 422, "invalid_value", NULL, "expected_body",
                         "expected_body must be null or a string of 1 to %d bytes",
                         HCHECK_EXPECTED_BODY_MAX);
    } else {
      snprintf(w.expected_body, sizeof w.expected_body, "%s", v->valuestring);
    }
  }
  if (apply_int(obj, "port", 1, 65535, 1, 0, &port, err) < 0 ||
      apply_int(obj, "interval_ms", HCHECK_INTERVAL_MIN_MS, HCHECK_INTERVAL_MAX_MS, 1, 0, &interval,
                err) < 0 ||
      apply_int(obj, "level_min_healthy", 1, HCHECK_MIN_HEALTHY_MAX, 0, 1, &quorum, err) < 0)
    return -1;
  w.port = (int)port;
  w.interval_ms = interval;
  w.level_min_healthy = (int)quorum;
  /* a tcp check opens a connection and closes it: HTTP expectations would be silently ignored */
  if (w.type == HCHECK_TCP &&
      (w.method != HCHECK_GET || w.n_headers || w.n_codes || w.expected_body[0]))
    return fields_fail(err, 422, "invalid_combination", NULL, "type",
                       "type tcp takes no method, headers, expected_codes or expected_body");
  /* HEAD has no body to search */
  if (w.method == HCHECK_HEAD && w.expected_body[0])
    return fields_fail(err, 422, "invalid_combination", NULL, "expected_body",
                       "expected_body needs method GET (a HEAD answer has no body)");
  *o = w;
  return 0;
}

int hcheck_add_json(cJSON *obj, const struct hcheck_opts *o, int with_site) {
  cJSON *h, *c;
  int ok = 1;
  ok &= cJSON_AddStringToObject(obj, "type", hcheck_type_to_string(o->type)) != NULL;
  ok &= cJSON_AddStringToObject(obj, "method", hcheck_method_to_string(o->method)) != NULL;
  h = cJSON_AddObjectToObject(obj, "headers");
  if (!h) return -1;
  for (int i = 0; i < o->n_headers; i++)
    ok &= cJSON_AddStringToObject(h, o->headers[i].name, o->headers[i].value) != NULL;
  if (o->n_codes == 0) {
    ok &= cJSON_AddNullToObject(obj, "expected_codes") != NULL;
  } else {
    c = cJSON_AddArrayToObject(obj, "expected_codes");
    if (!c) return -1;
    for (int i = 0; i < o->n_codes; i++) {
      char b[16];
      cJSON *s;
      if (o->codes[i].lo == o->codes[i].hi)
        snprintf(b, sizeof b, "%d", o->codes[i].lo);
      else
        snprintf(b, sizeof b, "%d-%d", o->codes[i].lo, o->codes[i].hi);
      s = cJSON_CreateString(b);
      ok &= s != NULL && cJSON_AddItemToArray(c, s);
    }
  }
  ok &= json_add_str_or_null(obj, "expected_body", o->expected_body[0] ? o->expected_body : NULL) !=
        NULL;
  if (o->port > 0)
    ok &= json_add_i64(obj, "port", o->port) != NULL;
  else
    ok &= cJSON_AddNullToObject(obj, "port") != NULL;
  if (with_site) {
    if (o->interval_ms > 0)
      ok &= json_add_i64(obj, "interval_ms", o->interval_ms) != NULL;
    else
      ok &= cJSON_AddNullToObject(obj, "interval_ms") != NULL;
    ok &= json_add_i64(obj, "level_min_healthy", o->level_min_healthy) != NULL;
  }
  return ok ? 0 : -1;
}

int hcheck_is_default(const struct hcheck_opts *o) {
  return o->type == HCHECK_HTTP && o->method == HCHECK_GET && o->n_headers == 0 &&
         o->n_codes == 0 && o->expected_body[0] == '\0' && o->port == 0 && o->interval_ms == 0 &&
         o->level_min_healthy == 1;
}

char *hcheck_to_text(const struct hcheck_opts *o) {
  cJSON *j;
  char *t = NULL;
  if (hcheck_is_default(o)) return NULL;
  j = cJSON_CreateObject();
  if (j && hcheck_add_json(j, o, 1) == 0) t = json_print(j);
  cJSON_Delete(j);
  return t;
}

int hcheck_from_text(const char *text, struct hcheck_opts *o) {
  struct field_err err;
  cJSON *j;
  int rc;
  hcheck_defaults(o);
  if (!text || !text[0]) return 0;
  j = json_parse(text, strlen(text));
  rc = j ? hcheck_apply_json(j, o, &err) : -1;
  cJSON_Delete(j);
  if (rc < 0) hcheck_defaults(o);
  return rc;
}

int hcheck_status_ok(const struct hcheck_opts *o, int status) {
  if (o->n_codes == 0) return status >= 100 && status < 500;
  for (int i = 0; i < o->n_codes; i++)
    if (status >= o->codes[i].lo && status <= o->codes[i].hi) return 1;
  return 0;
}

int hcheck_judge(const struct hcheck_opts *o, const struct hcheck_outcome *out, char *evidence,
                 size_t cap) {
  int ok = 0;
  const char *err = out->error && out->error[0] ? out->error : NULL;
  if (cap == 0) evidence = NULL;
#define EVIDENCE(...)                                                                              \
  do {                                                                                             \
    if (evidence) snprintf(evidence, cap, __VA_ARGS__);                                            \
  } while (0)
  if (!out->connected) {
    if (out->timed_out)
      EVIDENCE("connect timeout");
    else
      EVIDENCE("%s", err ? err : "connect failed");
    goto out;
  }
  if (o->type == HCHECK_TCP) {
    ok = 1;
    goto out;
  }
  if (out->status <= 0) {
    if (out->timed_out)
      EVIDENCE("timeout");
    else
      EVIDENCE("%s", err ? err : "no response");
    goto out;
  }
  if (!hcheck_status_ok(o, out->status)) {
    if (o->n_codes == 0)
      EVIDENCE("status %d", out->status);
    else
      EVIDENCE("unexpected status %d", out->status);
    goto out;
  }
  if (o->expected_body[0]) {
    size_t n = out->body_len < HCHECK_BODY_MAX ? out->body_len : HCHECK_BODY_MAX;
    if (!out->body || !memmem(out->body, n, o->expected_body, strlen(o->expected_body))) {
      EVIDENCE("body mismatch");
      goto out;
    }
  }
  ok = 1;
out:
  if (ok) EVIDENCE("%s", "");
#undef EVIDENCE
  return ok;
}

int hcheck_rejudge(const struct hcheck_opts *o, int ok, int status, const char *error,
                   char *evidence, size_t cap) {
  const char *err = error && error[0] ? error : "failed";
  if (cap == 0) evidence = NULL;
  if (o->type == HCHECK_TCP || status < 100 || status > 999) {
    ok = ok ? 1 : 0;
  } else if (!hcheck_status_ok(o, status)) {
    if (evidence && o->n_codes == 0)
      snprintf(evidence, cap, "status %d", status);
    else if (evidence)
      snprintf(evidence, cap, "unexpected status %d", status);
    return 0;
  } else if (!o->expected_body[0]) {
    ok = 1;
  } else {
    ok = ok ? 1 : 0;
  }
  if (evidence) snprintf(evidence, cap, "%s", ok ? "" : err);
  return ok;
}

static const char *const codec_keys[] = {"type",
                                         "method",
                                         "headers",
                                         "expected_codes",
                                         "expected_body",
                                         "port",
                                         "interval_ms",
                                         "level_min_healthy",
                                         NULL};

static int codec_apply(const cJSON *obj, void *member, struct field_err *err) {
  return hcheck_apply_json(obj, member, err);
}

static int codec_add_json(cJSON *obj, const void *member) {
  return hcheck_add_json(obj, member, 1);
}

static char *codec_to_text(const void *member) {
  return hcheck_to_text(member);
}

static int codec_is_default(const void *member) {
  return hcheck_is_default(member);
}

static int codec_from_text(const char *text, void *member) {
  return hcheck_from_text(text, member);
}

int hcheck_redact(struct hcheck_opts *o) {
  for (int i = 0; i < o->n_headers; i++)
    snprintf(o->headers[i].value, sizeof o->headers[i].value, "%s", FIELDS_MASK);
  return o->n_headers;
}

void hcheck_keep_secrets(struct hcheck_opts *o, const struct hcheck_opts *stored) {
  for (int i = 0; i < o->n_headers; i++) {
    if (strcmp(o->headers[i].value, FIELDS_MASK) != 0) continue;
    for (int k = 0; k < stored->n_headers; k++)
      if (strcasecmp(o->headers[i].name, stored->headers[k].name) == 0) {
        memcpy(o->headers[i].value, stored->headers[k].value, sizeof o->headers[i].value);
        break;
      }
  }
}

static int codec_redact(void *member) {
  return hcheck_redact(member);
}

static void codec_keep_secrets(void *member, const void *stored) {
  hcheck_keep_secrets(member, stored);
}

const struct field_codec hcheck_codec = {
    .keys = codec_keys,
    .apply = codec_apply,
    .add_json = codec_add_json,
    .to_text = codec_to_text,
    .is_default = codec_is_default,
    .from_text = codec_from_text,
    .redact = codec_redact,
    .keep_secrets = codec_keep_secrets,
};
