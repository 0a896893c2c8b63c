/* fields — table-driven validation of JSON objects (see fields.h). */
#include "fields.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "token.h"

int fields_fail(struct field_err *err, unsigned status, const char *code, const char *prefix,
                const char *key, const char *fmt, ...) {
  va_list ap;
  err->status = status;
  err->code = code;
  if (prefix && *prefix && key && *key)
    snprintf(err->field, sizeof err->field, "%s.%s", prefix, key);
  else
    snprintf(err->field, sizeof err->field, "%s", prefix && *prefix ? prefix : key ? key : "");
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return -1;
}

const struct field_def *fields_find(const struct field_def *defs, const char *name) {
  for (const struct field_def *d = defs; d->name; d++)
    if (strcmp(d->name, name) == 0) return d;
  return NULL;
}

static int listed(const char *const *keys, const char *name) {
  for (; keys && *keys; keys++)
    if (strcmp(*keys, name) == 0) return 1;
  return 0;
}

static void set_int(void *target, const struct field_def *d, int64_t v) {
  char *p = (char *)target + d->offset;
  if (d->size == sizeof(int64_t)) {
    memcpy(p, &v, sizeof v);
  } else {
    int iv = (int)v;
    memcpy(p, &iv, sizeof iv);
  }
}

void fields_defaults(const struct field_def *defs, void *target) {
  for (const struct field_def *d = defs; d->name; d++)
    if (d->type == FIELD_INT) set_int(target, d, d->def);
}

/* Copy a string value into a candidate buffer; 0 or -1 with err. */
static int read_str(const cJSON *v, const struct field_def *d, const char *prefix, char *out,
                    struct field_err *err) {
  size_t n;
  if (cJSON_IsNull(v) && (d->flags & FIELD_NULLABLE)) {
    out[0] = '\0';
    return 0;
  }
  if (!cJSON_IsString(v))
    return fields_fail(err, 422, "invalid_type", prefix, d->name, "%s must be a string", d->name);
  n = strlen(v->valuestring);
  if (n >= d->size)
    return fields_fail(err, 422, "too_long", prefix, d->name, "%s must be at most %zu characters",
                       d->name, d->size - 1);
  if ((int64_t)n < d->min)
    return fields_fail(err, 422, "out_of_range", prefix, d->name,
                       "%s must be at least %lld characters", d->name, (long long)d->min);
  memcpy(out, v->valuestring, n + 1);
  return 0;
}

static int apply_one(const cJSON *v, const struct field_def *d, const char *prefix, void *target,
                     struct field_err *err) {
  char *member = (char *)target + d->offset;
  char buf[4096];
  switch (d->type) {
  case FIELD_INT:
    if (!cJSON_IsNumber(v))
      return fields_fail(err, 422, "invalid_type", prefix, d->name, "%s must be an integer",
                         d->name);
    if (!json_is_int(v, d->min, d->max))
      return fields_fail(err, 422, "out_of_range", prefix, d->name,
                         "%s must be an integer from %lld to %lld", d->name, (long long)d->min,
                         (long long)d->max);
    set_int(target, d, (int64_t)v->valuedouble);
    return 0;
  case FIELD_BOOL: {
    int b;
    if (!cJSON_IsBool(v))
      return fields_fail(err, 422, "invalid_type", prefix, d->name, "%s must be a boolean",
                         d->name);
    b = cJSON_IsTrue(v) ? 1 : 0;
    memcpy(member, &b, sizeof b);
    return 0;
  }
  case FIELD_STR:
  case FIELD_ENUM:
    if (d->size > sizeof buf) return fields_fail(err, 500, "internal", prefix, d->name, "bad row");
    if (read_str(v, d, prefix, buf, err) < 0) return -1;
    if (d->type == FIELD_ENUM) {
      int ok = 0;
      for (const char *const *c = d->choices; c && *c; c++)
        if (strcmp(*c, buf) == 0) ok = 1;
      if (!ok)
        return fields_fail(err, 422, "invalid_value", prefix, d->name, "%s must be %s", d->name,
                           d->what ? d->what : "one of the documented values");
    } else if (d->check && !(buf[0] == '\0' && (d->flags & FIELD_NULLABLE)) && !d->check(buf)) {
      return fields_fail(err, 422, "invalid_value", prefix, d->name, "%s must be %s", d->name,
                         d->what ? d->what : "valid");
    }
    memcpy(member, buf, strlen(buf) + 1);
    token_wipe(buf, sizeof buf); /* the value may be a secret */
    return 0;
  case FIELD_INT_LIST: {
    const cJSON *it;
    int n = 0, vals[64];
    char key[64];
    if (!cJSON_IsArray(v))
      return fields_fail(err, 422, "invalid_type", prefix, d->name, "%s must be an array", d->name);
    if (d->size > 64 || cJSON_GetArraySize(v) > (int)d->size)
      return fields_fail(err, 422, "out_of_range", prefix, d->name,
                         "%s must have at most %zu entries", d->name, d->size);
    cJSON_ArrayForEach(it, v) {
      snprintf(key, sizeof key, "%s[%d]", d->name, n);
      if (!cJSON_IsNumber(it))
        return fields_fail(err, 422, "invalid_type", prefix, key, "%s must be an integer", key);
      if (!json_is_int(it, d->min, d->max))
        return fields_fail(err, 422, "out_of_range", prefix, key,
                           "%s must be an integer from %lld to %lld", key, (long long)d->min,
                           (long long)d->max);
      vals[n++] = (int)it->valuedouble;
    }
    memcpy(member, vals, (size_t)n * sizeof vals[0]);
    memcpy((char *)target + d->count_offset, &n, sizeof n);
    return 0;
  }
  }
  return fields_fail(err, 500, "internal", prefix, d->name, "bad row");
}

int fields_apply(const cJSON *obj, const struct field_def *defs, const char *const *extra_keys,
                 const char *prefix, unsigned flags, void *target, struct field_err *err) {
  const cJSON *v;
  if (!cJSON_IsObject(obj))
    return fields_fail(err, 422, "invalid_type", prefix, NULL, "%s must be an object",
                       prefix && *prefix ? prefix : "the body");
  if (!(flags & FIELDS_ALLOW_UNKNOWN)) cJSON_ArrayForEach(v, obj) {
      if (!fields_find(defs, v->string) && !listed(extra_keys, v->string))
        return fields_fail(err, 400, "unknown_field", prefix, v->string, "unknown field '%s'",
                           v->string);
    }
  for (const struct field_def *d = defs; d->name; d++) {
    v = cJSON_GetObjectItemCaseSensitive(obj, d->name);
    if (!v) {
      if ((flags & FIELDS_CREATE) && (d->flags & FIELD_REQUIRED))
        return fields_fail(err, 422, "required", prefix, d->name, "%s is required", d->name);
      continue;
    }
    if (apply_one(v, d, prefix, target, err) < 0) return -1;
  }
  return 0;
}
