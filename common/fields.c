/* fields — table-driven validation of JSON objects (see fields.h). */
#include "fields.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "names.h"
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
  char buf[8192];
  switch (d->type) {
  case FIELD_INT:
    if (cJSON_IsNull(v) && (d->flags & FIELD_NULLABLE)) { /* null is 0, as in every other form */
      set_int(target, d, 0);
      return 0;
    }
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
  case FIELD_NAMED: {
    int val = cJSON_IsString(v) ? names_value(d->choices, d->nchoices, v->valuestring) : -1;
    if (!cJSON_IsString(v))
      return fields_fail(err, 422, "invalid_type", prefix, d->name, "%s must be a string", d->name);
    if (val < 0)
      return fields_fail(err, 422, "invalid_value", prefix, d->name, "%s must be %s", d->name,
                         d->what ? d->what : "one of the documented values");
    memcpy(member, &val, sizeof val);
    return 0;
  }
  case FIELD_TEXT:
    if (!cJSON_IsString(v))
      return fields_fail(err, 422, "invalid_type", prefix, d->name, "%s must be a string", d->name);
    if (!fields_text_valid(v->valuestring, d->min, d->max) || strlen(v->valuestring) >= d->size)
      return fields_fail(err, 422, "invalid_value", prefix, d->name,
                         "%s must be %lld to %lld characters of text with no control characters",
                         d->name, (long long)d->min, (long long)d->max);
    memcpy(member, v->valuestring, strlen(v->valuestring) + 1);
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
  case FIELD_DOUBLE: {
    double x = 0;
    if (cJSON_IsNull(v) && (d->flags & FIELD_NULLABLE)) {
      memcpy(member, &x, sizeof x);
      return 0;
    }
    if (!cJSON_IsNumber(v))
      return fields_fail(err, 422, "invalid_type", prefix, d->name, "%s must be a number", d->name);
    x = v->valuedouble;
    if (!(x >= (double)d->min && x <= (double)d->max))
      return fields_fail(err, 422, "out_of_range", prefix, d->name,
                         "%s must be a number from %lld to %lld", d->name, (long long)d->min,
                         (long long)d->max);
    memcpy(member, &x, sizeof x);
    return 0;
  }
  case FIELD_JSON: /* read from the enclosing object by apply_rows */
    break;
  }
  return fields_fail(err, 500, "internal", prefix, d->name, "bad row");
}

static int carries(const struct field_def *d, unsigned form) {
  return form == 0 || (d->forms & form) != 0;
}

/* 1 when row d sits in the object named object (NULL: the top). */
static int in_object(const struct field_def *d, const char *object) {
  return object ? d->object && strcmp(d->object, object) == 0 : !d->object;
}

/* 1 when key is a key of a row of object that carries form (a JSON row's keys are its codec's). */
static int known_key(const struct field_def *defs, unsigned form, const char *object,
                     const char *key) {
  for (const struct field_def *d = defs; d->name; d++) {
    if (!carries(d, form) || !in_object(d, object)) continue;
    if (d->type == FIELD_JSON ? listed(d->codec->keys, key) : strcmp(d->name, key) == 0) return 1;
  }
  return 0;
}

int fields_apply(const cJSON *obj, const struct field_def *defs, const char *const *extra_keys,
                 const char *prefix, unsigned flags, void *target, struct field_err *err) {
  return fields_apply_form(obj, defs, 0, extra_keys, prefix, flags, target, err);
}

/* A JSON row: its codec reads its keys of obj; its error's field is relative to obj. */
static int apply_codec(const cJSON *obj, const struct field_def *d, const char *prefix,
                       void *target, struct field_err *err) {
  struct field_err ce;
  if (d->codec->apply(obj, (char *)target + d->offset, &ce) == 0) return 0;
  return fields_fail(err, ce.status, ce.code, prefix, ce.field, "%s", ce.message);
}

static int apply_rows(const cJSON *obj, const struct field_def *defs, const char *object,
                      unsigned form, const char *const *extra_keys, const char *prefix,
                      unsigned flags, void *target, struct field_err *err) {
  const cJSON *v;
  if (!cJSON_IsObject(obj))
    return fields_fail(err, 422, "invalid_type", prefix, NULL, "%s must be an object",
                       prefix && *prefix ? prefix : "the body");
  if (!(flags & FIELDS_ALLOW_UNKNOWN)) cJSON_ArrayForEach(v, obj) {
      if (!known_key(defs, form, object, v->string) && !listed(extra_keys, v->string))
        return fields_fail(err, 400, "unknown_field", prefix, v->string, "unknown field '%s'",
                           v->string);
    }
  for (const struct field_def *d = defs; d->name; d++) {
    if (!carries(d, form) || !in_object(d, object)) continue;
    if (d->type == FIELD_JSON) {
      if (apply_codec(obj, d, prefix, target, err) < 0 && !(d->flags & FIELD_LENIENT)) return -1;
      continue;
    }
    v = cJSON_GetObjectItemCaseSensitive(obj, d->name);
    if (!v) {
      if ((flags & FIELDS_CREATE) && (d->flags & FIELD_REQUIRED))
        return fields_fail(err, 422, "required", prefix, d->name, "%s is required", d->name);
      continue;
    }
    if (apply_one(v, d, prefix, target, err) < 0 && !(d->flags & FIELD_LENIENT)) return -1;
  }
  return 0;
}

int fields_apply_form(const cJSON *obj, const struct field_def *defs, unsigned form,
                      const char *const *extra_keys, const char *prefix, unsigned flags,
                      void *target, struct field_err *err) {
  return apply_rows(obj, defs, NULL, form, extra_keys, prefix, flags, target, err);
}

int fields_apply_in(const cJSON *obj, const struct field_def *defs, const char *object,
                    unsigned form, const char *const *extra_keys, const char *prefix,
                    unsigned flags, void *target, struct field_err *err) {
  return apply_rows(obj, defs, object, form, extra_keys, prefix, flags, target, err);
}

/* ---- records ---- */

static int64_t get_int(const void *src, const struct field_def *d) {
  const char *p = (const char *)src + d->offset;
  if (d->size == sizeof(int64_t)) {
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
  } else {
    int v;
    memcpy(&v, p, sizeof v);
    return v;
  }
}

/* The member named name of obj, an object added when there is none; NULL on out of memory or
   when the member is no object. */
static cJSON *nested(cJSON *obj, const char *name) {
  cJSON *o = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!o) o = cJSON_AddObjectToObject(obj, name);
  return cJSON_IsObject(o) ? o : NULL;
}

int fields_json_add(cJSON *obj, const struct field_def *defs, unsigned form, const void *src) {
  for (const struct field_def *d = defs; d->name; d++) {
    const char *member = (const char *)src + d->offset;
    cJSON *v = NULL, *to = obj;
    if (!carries(d, form)) continue;
    if (d->object && !(to = nested(obj, d->object))) return -1;
    switch (d->type) {
    case FIELD_DOUBLE: {
      double x;
      memcpy(&x, member, sizeof x);
      v = x == 0 && (d->flags & FIELD_NULLABLE) ? cJSON_CreateNull() : cJSON_CreateNumber(x);
      break;
    }
    case FIELD_JSON:
      if (d->codec->add_json(to, member) < 0) return -1;
      continue;
    case FIELD_INT: {
      int64_t i = get_int(src, d);
      v = i == 0 && (d->flags & FIELD_NULLABLE) ? cJSON_CreateNull()
                                                : cJSON_CreateNumber((double)i);
      break;
    }
    case FIELD_BOOL: {
      int b;
      memcpy(&b, member, sizeof b);
      v = cJSON_CreateBool(b);
      break;
    }
    case FIELD_STR:
    case FIELD_TEXT:
      v = member[0] == '\0' && (d->flags & FIELD_NULLABLE) ? cJSON_CreateNull()
                                                           : cJSON_CreateString(member);
      break;
    case FIELD_ENUM:
      v = cJSON_CreateString(member[0] == '\0' && d->choices ? d->choices[0] : member);
      break;
    case FIELD_NAMED: {
      int val;
      const char *w;
      memcpy(&val, member, sizeof val);
      w = names_word(d->choices, d->nchoices, val, NULL);
      v = w && (*w || !(d->flags & FIELD_NULLABLE)) ? cJSON_CreateString(w) : cJSON_CreateNull();
      break;
    }
    case FIELD_INT_LIST: {
      int n, vals[64];
      memcpy(&n, (const char *)src + d->count_offset, sizeof n);
      if (n < 0 || n > 64) n = 0;
      memcpy(vals, member, (size_t)n * sizeof vals[0]);
      v = cJSON_CreateIntArray(vals, n);
      break;
    }
    }
    if (!v || !cJSON_AddItemToObject(to, d->name, v)) {
      cJSON_Delete(v);
      return -1;
    }
  }
  return 0;
}

static int is_string(enum field_type t) {
  return t == FIELD_STR || t == FIELD_ENUM || t == FIELD_TEXT;
}

int fields_match(const struct field_def *dst, const struct field_def *src,
                 const struct field_def **plan, int cap, const char **missing) {
  int n = 0;
  if (missing) *missing = NULL;
  for (const struct field_def *d = dst; d->name; d++) {
    const struct field_def *s = fields_find(src, d->name);
    int same = s && s->type == d->type && (d->type != FIELD_NAMED || s->choices == d->choices) &&
               (d->type != FIELD_JSON || (s->codec == d->codec && s->size == d->size));
    if (!s || !(same || (is_string(d->type) && (is_string(s->type) || s->type == FIELD_NAMED)))) {
      if (missing) *missing = d->name;
      return -1;
    }
    if (n >= cap) return -1;
    plan[n++] = s;
  }
  return n;
}

int fields_copy(const struct field_def *dst, void *to, const struct field_def *const *plan,
                const void *from) {
  int i = 0;
  for (const struct field_def *d = dst; d->name; d++, i++) {
    const struct field_def *s = plan[i];
    const char *sm = (const char *)from + s->offset;
    char *dm = (char *)to + d->offset;
    switch (d->type) {
    case FIELD_INT: {
      int64_t v = get_int(from, s);
      if (d->size != sizeof(int64_t) && (v < INT_MIN || v > INT_MAX)) return -1;
      set_int(to, d, v);
      break;
    }
    case FIELD_BOOL:
      memcpy(dm, sm, sizeof(int));
      break;
    case FIELD_NAMED:
      memcpy(dm, sm, sizeof(int));
      break;
    case FIELD_DOUBLE:
      memcpy(dm, sm, sizeof(double));
      break;
    case FIELD_JSON:
      memcpy(dm, sm, d->size);
      break;
    case FIELD_STR:
    case FIELD_ENUM:
    case FIELD_TEXT: {
      size_t n;
      if (s->type == FIELD_NAMED) { /* the value's word */
        int val;
        memcpy(&val, sm, sizeof val);
        sm = names_word(s->choices, s->nchoices, val, "");
        n = strlen(sm);
      } else {
        n = strnlen(sm, s->size);
      }
      if (n >= d->size) return -1;
      memcpy(dm, sm, n);
      dm[n] = '\0';
      break;
    }
    case FIELD_INT_LIST: {
      int n;
      memcpy(&n, (const char *)from + s->count_offset, sizeof n);
      if (n < 0 || (size_t)n > d->size) return -1;
      memcpy(dm, sm, (size_t)n * sizeof(int));
      memcpy((char *)to + d->count_offset, &n, sizeof n);
      break;
    }
    }
  }
  return 0;
}

int fields_names(const struct field_def *defs, unsigned form, const char **out, int cap) {
  return fields_names_flagged(defs, form, 0, out, cap);
}

int fields_names_flagged(const struct field_def *defs, unsigned form, int flags, const char **out,
                         int cap) {
  int n = 0;
  for (const struct field_def *d = defs; d->name; d++) {
    if (!carries(d, form) || (d->flags & flags) != flags) continue;
    if (n + 1 >= cap) return -1;
    out[n++] = d->name;
  }
  if (n >= cap) return -1;
  out[n] = NULL;
  return n;
}

int fields_columns(const struct field_def *defs, unsigned form, const char *prefix, char *out,
                   size_t cap) {
  size_t len = 0;
  int n = 0;
  if (cap == 0) return -1;
  out[0] = '\0';
  for (const struct field_def *d = defs; d->name; d++) {
    int w;
    if (!d->column || !carries(d, form)) continue;
    w = snprintf(out + len, cap - len, "%s%s%s", n ? ", " : "", prefix ? prefix : "", d->column);
    if (w < 0 || (size_t)w >= cap - len) return -1;
    len += (size_t)w;
    n++;
  }
  return n;
}

int fields_sql_list(const struct field_def *defs, unsigned form, enum fields_sql_item item,
                    char *out, size_t cap) {
  size_t len = 0;
  int n = 0;
  if (cap == 0) return -1;
  out[0] = '\0';
  for (const struct field_def *d = defs; d->name; d++) {
    const char *sep = n ? ", " : "";
    int w;
    if (!d->column || !carries(d, form)) continue;
    if (item == FIELDS_SQL_MARKS)
      w = snprintf(out + len, cap - len, "%s?", sep);
    else if (item == FIELDS_SQL_SETS)
      w = snprintf(out + len, cap - len, "%s%s = ?", sep, d->column);
    else
      w = snprintf(out + len, cap - len, "%s%s = ?%d", sep, d->column, n + 1);
    if (w < 0 || (size_t)w >= cap - len) return -1;
    len += (size_t)w;
    n++;
  }
  return n;
}

/* The code point at *p (advancing it) or -1 for an invalid, overlong or surrogate sequence. */
static int32_t next_cp(const unsigned char **p) {
  const unsigned char *s = *p;
  int32_t cp;
  int len;
  if (s[0] < 0x80) {
    *p = s + 1;
    return s[0];
  }
  if ((s[0] & 0xe0) == 0xc0) {
    cp = s[0] & 0x1f;
    len = 2;
  } else if ((s[0] & 0xf0) == 0xe0) {
    cp = s[0] & 0x0f;
    len = 3;
  } else if ((s[0] & 0xf8) == 0xf0) {
    cp = s[0] & 0x07;
    len = 4;
  } else {
    return -1;
  }
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return -1;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
      cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return -1;
  *p = s + len;
  return cp;
}

int fields_text_valid(const char *v, int64_t min, int64_t max) {
  const unsigned char *p = (const unsigned char *)v;
  int64_t n = 0;
  while (*p) {
    int32_t cp = next_cp(&p);
    if (cp < 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) return 0;
    if (++n > max) return 0;
  }
  return n >= min;
}

void fields_text_scrub(char *s, size_t cap, const char *instead) {
  for (char *p = s; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
  if (!fields_text_valid(s, 0, (int64_t)cap - 1)) snprintf(s, cap, "%s", instead);
}

int fields_name_valid(char *s) {
  return fields_name_ok(s);
}

int fields_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 64) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '-' || *s == '_' || *s == '.'))
      return 0;
  return 1;
}

/* ---- Secrets ---- */

int fields_url_mask(const char *url, char *out, size_t cap) {
  const char *p = strstr(url, "://"), *auth, *auth_end, *at = NULL, *q;
  size_t n = 0;
  int masked = 0;
#define PUT(s, len)                                                                                \
  do {                                                                                             \
    size_t l_ = (len);                                                                             \
    if (cap && n < cap - 1) {                                                                      \
      size_t room_ = cap - 1 - n;                                                                  \
      memcpy(out + n, (s), l_ < room_ ? l_ : room_);                                               \
      n += l_ < room_ ? l_ : room_;                                                                \
    }                                                                                              \
  } while (0)
  auth = p ? p + 3 : url;
  auth_end = auth;
  if (p) {
    while (*auth_end && *auth_end != '/' && *auth_end != '?' && *auth_end != '#')
      auth_end++;
    for (const char *c = auth; c < auth_end; c++)
      if (*c == '@') at = c;
  }
  PUT(url, (size_t)(auth - url));
  if (at) {
    PUT(FIELDS_MASK "@", sizeof FIELDS_MASK);
    PUT(at + 1, (size_t)(auth_end - at - 1));
    masked = 1;
  } else {
    PUT(auth, (size_t)(auth_end - auth));
  }
  q = auth_end;
  while (*q && *q != '?' && *q != '#')
    q++;
  PUT(auth_end, (size_t)(q - auth_end));
  if (*q == '?') {
    PUT("?" FIELDS_MASK, sizeof FIELDS_MASK);
    masked = 1;
    while (*q && *q != '#')
      q++;
  }
  if (*q == '#') {
    PUT("#" FIELDS_MASK, sizeof FIELDS_MASK);
    masked = 1;
  }
#undef PUT
  if (cap) out[n] = '\0';
  return masked;
}

int fields_redact(const struct field_def *defs, void *target) {
  int n = 0;
  for (const struct field_def *d = defs; d->name; d++) {
    char *m = (char *)target + d->offset;
    if (d->type == FIELD_JSON && (d->flags & FIELD_SECRET) && d->codec && d->codec->redact) {
      n += d->codec->redact(m);
    } else if (d->type == FIELD_STR && (d->flags & FIELD_SECRET) && m[0]) {
      snprintf(m, d->size, "%s", FIELDS_MASK);
      n++;
    } else if (d->type == FIELD_STR && (d->flags & FIELD_SECRET_URL) && m[0]) {
      char buf[2048];
      if (fields_url_mask(m, buf, sizeof buf)) {
        snprintf(m, d->size, "%s", buf);
        n++;
      }
    }
  }
  return n;
}

void fields_keep_secrets(const struct field_def *defs, void *target, const void *stored) {
  for (const struct field_def *d = defs; d->name; d++) {
    char *m = (char *)target + d->offset;
    const char *o = (const char *)stored + d->offset;
    if (d->type == FIELD_JSON && (d->flags & FIELD_SECRET) && d->codec && d->codec->keep_secrets) {
      d->codec->keep_secrets(m, o);
    } else if (d->type == FIELD_STR && (d->flags & FIELD_SECRET) && o[0] &&
               strcmp(m, FIELDS_MASK) == 0) {
      memcpy(m, o, d->size);
    } else if (d->type == FIELD_STR && (d->flags & FIELD_SECRET_URL) && o[0]) {
      char buf[2048];
      if (fields_url_mask(o, buf, sizeof buf) && strcmp(m, buf) == 0) memcpy(m, o, d->size);
    }
  }
}
