/* json — strict readers and small writers over cJSON. */
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "jsonstrict.h"

cJSON *json_parse(const char *buf, size_t len) {
  return json_parse_strict(buf, len, NULL);
}

cJSON *json_parse_strict(const char *buf, size_t len, struct jsonstrict_err *err) {
  const char *end = NULL;
  cJSON *v;
  if (!buf || len == 0 || jsonstrict_check(buf, len, err) < 0) {
    if (err && (!buf || len == 0)) {
      memset(err, 0, sizeof *err);
      err->rc = JSONSTRICT_SYNTAX;
    }
    return NULL;
  }
  v = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
  if (!v && err) {
    memset(err, 0, sizeof *err);
    err->rc = JSONSTRICT_NO_MEMORY; /* the text was checked: only allocation can fail */
  }
  if (!v) return NULL;
  /* only whitespace may follow the value */
  if (end) {
    while ((size_t)(end - buf) < len) {
      char c = *end;
      if (c == '\0' && (size_t)(end - buf) == len - 1) break;
      if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
        cJSON_Delete(v);
        return NULL;
      }
      end++;
    }
  }
  return v;
}

char *json_print(const cJSON *v) {
  char *text = cJSON_PrintUnformatted(v), *fixed;
  size_t len, flen;
  if (!text) return NULL;
  len = strlen(text);
  if (jsonstrict_utf8_valid(text, len)) return text;
  /* a string stored before input was checked: never send invalid UTF-8 */
  fixed = jsonstrict_utf8_repair(text, len, &flen);
  cJSON_free(text);
  return fixed;
}

int json_is_int(const cJSON *v, int64_t min, int64_t max) {
  double d;
  if (!cJSON_IsNumber(v)) return 0;
  d = v->valuedouble;
  if (!isfinite(d) || floor(d) != d) return 0;
  if (d < (double)min || d > (double)max) return 0;
  if (d > 9007199254740992.0 || d < -9007199254740992.0) return 0;
  return 1;
}

int json_int(const cJSON *obj, const char *key, int64_t min, int64_t max, int64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) return 1;
  if (!json_is_int(v, min, max)) return -1;
  *out = (int64_t)v->valuedouble;
  return 0;
}

int json_bool(const cJSON *obj, const char *key, int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) return 1;
  if (!cJSON_IsBool(v)) return -1;
  *out = cJSON_IsTrue(v) ? 1 : 0;
  return 0;
}

int json_str(const cJSON *obj, const char *key, size_t maxlen, const char **out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v || cJSON_IsNull(v)) return 1;
  if (!cJSON_IsString(v) || !v->valuestring) return -1;
  if (strlen(v->valuestring) > maxlen) return -1;
  *out = v->valuestring;
  return 0;
}

int json_only_keys(const cJSON *obj, const char *const *allowed, const char **bad) {
  const cJSON *it;
  cJSON_ArrayForEach(it, obj) {
    int ok = 0;
    for (const char *const *a = allowed; *a; a++) {
      if (it->string && strcmp(it->string, *a) == 0) {
        ok = 1;
        break;
      }
    }
    if (!ok) {
      *bad = it->string ? it->string : "";
      return -1;
    }
  }
  return 0;
}

const char *json_words(const char *const *words, char *out, size_t cap) {
  size_t len = 0;
  if (cap == 0) return out;
  out[0] = '\0';
  for (const char *const *w = words; *w && len < cap; w++) {
    int n = snprintf(out + len, cap - len, "%s%s", w == words ? "" : ", ", *w);
    if (n < 0) break;
    len += (size_t)n;
  }
  return out;
}

cJSON *json_add_i64(cJSON *obj, const char *key, int64_t v) {
  return cJSON_AddNumberToObject(obj, key, (double)v);
}

cJSON *json_add_str_or_null(cJSON *obj, const char *key, const char *s) {
  return s ? cJSON_AddStringToObject(obj, key, s) : cJSON_AddNullToObject(obj, key);
}

cJSON *json_add_time(cJSON *obj, const char *key, int64_t wall_ms) {
  char ts[40];
  if (wall_ms <= 0) return cJSON_AddNullToObject(obj, key);
  clock_format_iso(wall_ms, ts, sizeof ts);
  return cJSON_AddStringToObject(obj, key, ts);
}
