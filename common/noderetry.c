/* noderetry — node_retry fields as data: one row per field, read by validation and writers. */
#include "noderetry.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json.h"

#define OFF(f) offsetof(struct skip_params, f)

/* Bounds: retries and budget keep a request's worst case bounded (11 attempts, 10 min); the
 * windows and skips stay between 0.1 s (less is noise) and 1 h (more is a config mistake);
 * failure_min_volume up to 1,000,000 fits the per-slice counters many times over. */
const struct noderetry_field noderetry_fields[] = {
    {"retries", NR_INT, OFF(retries), 2, 0, 10},
    {"retry_budget_ms", NR_I64, OFF(retry_budget_ms), 15000, 0, 600000},
    {"fail_count", NR_INT, OFF(fail_count), 3, 1, 1000},
    {"fail_window_ms", NR_I64, OFF(fail_window_ms), 10000, 100, 3600000},
    {"skip_ms", NR_I64, OFF(skip_ms), 30000, 100, 3600000},
    {"half_open_requests", NR_INT, OFF(half_open_requests), 1, 1, 100},
    {"retry_on_status", NR_STATUSES, OFF(retry_on_status), 0, 400, 599},
    {"backup_levels", NR_BOOL, OFF(backup_levels), 1, 0, 1},
    {"failure_ratio", NR_RATIO, OFF(failure_ratio), 0, 0, 1},
    {"failure_min_volume", NR_INT, OFF(failure_min_volume), 20, 1, 1000000},
    {NULL, NR_INT, 0, 0, 0, 0},
};

const int noderetry_default_statuses[] = {502, 503, 504};
const int noderetry_n_default_statuses = 3;

static int *int_at(struct skip_params *p, size_t off) {
  return (int *)((char *)p + off);
}
static int64_t *i64_at(struct skip_params *p, size_t off) {
  return (int64_t *)((char *)p + off);
}
static double *dbl_at(struct skip_params *p, size_t off) {
  return (double *)((char *)p + off);
}
static int cint(const struct skip_params *p, size_t off) {
  return *(const int *)((const char *)p + off);
}
static int64_t ci64(const struct skip_params *p, size_t off) {
  return *(const int64_t *)((const char *)p + off);
}
static double cdbl(const struct skip_params *p, size_t off) {
  return *(const double *)((const char *)p + off);
}

void noderetry_defaults(struct skip_params *p) {
  memset(p, 0, sizeof *p);
  for (const struct noderetry_field *f = noderetry_fields; f->name; f++) {
    switch (f->type) {
    case NR_INT:
    case NR_BOOL:
      *int_at(p, f->off) = (int)f->def;
      break;
    case NR_I64:
      *i64_at(p, f->off) = (int64_t)f->def;
      break;
    case NR_RATIO:
      *dbl_at(p, f->off) = f->def;
      break;
    case NR_STATUSES:
      p->n_retry_on_status = noderetry_n_default_statuses;
      memcpy(p->retry_on_status, noderetry_default_statuses, sizeof noderetry_default_statuses);
      break;
    }
  }
}

static int fail(struct field_err *err, unsigned status, const char *code, const char *prefix,
                const char *name, int index, const char *msg) {
  err->status = status;
  err->code = code;
  if (index >= 0)
    snprintf(err->field, sizeof err->field, "%s.%s[%d]", prefix, name, index);
  else
    snprintf(err->field, sizeof err->field, "%s.%s", prefix, name);
  snprintf(err->message, sizeof err->message, "%s", msg);
  return -1;
}

/* Validate one present value v of field f into q. */
static int apply_field(const struct noderetry_field *f, const cJSON *v, struct skip_params *q,
                       const char *prefix, struct field_err *err) {
  char msg[160];
  switch (f->type) {
  case NR_INT:
  case NR_I64:
    if (!cJSON_IsNumber(v)) {
      snprintf(msg, sizeof msg, "%s must be an integer", f->name);
      return fail(err, 422, "invalid_type", prefix, f->name, -1, msg);
    }
    if (!json_is_int(v, f->min, f->max)) {
      snprintf(msg, sizeof msg, "%s must be an integer from %lld to %lld", f->name,
               (long long)f->min, (long long)f->max);
      return fail(err, 422, "out_of_range", prefix, f->name, -1, msg);
    }
    if (f->type == NR_INT)
      *int_at(q, f->off) = (int)v->valuedouble;
    else
      *i64_at(q, f->off) = (int64_t)v->valuedouble;
    return 0;
  case NR_BOOL:
    if (!cJSON_IsBool(v)) {
      snprintf(msg, sizeof msg, "%s must be a boolean", f->name);
      return fail(err, 422, "invalid_type", prefix, f->name, -1, msg);
    }
    *int_at(q, f->off) = cJSON_IsTrue(v) ? 1 : 0;
    return 0;
  case NR_RATIO:
    if (cJSON_IsNull(v)) {
      *dbl_at(q, f->off) = 0;
      return 0;
    }
    if (!cJSON_IsNumber(v)) {
      snprintf(msg, sizeof msg, "%s must be a number or null", f->name);
      return fail(err, 422, "invalid_type", prefix, f->name, -1, msg);
    }
    if (!isfinite(v->valuedouble) || !(v->valuedouble > 0) || v->valuedouble > 1) {
      snprintf(msg, sizeof msg, "%s must be greater than 0 and at most 1 (null turns it off)",
               f->name);
      return fail(err, 422, "out_of_range", prefix, f->name, -1, msg);
    }
    *dbl_at(q, f->off) = v->valuedouble;
    return 0;
  case NR_STATUSES: {
    const cJSON *it;
    int n = 0;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > SKIP_MAX_STATUS) {
      snprintf(msg, sizeof msg, "%s must be an array of at most %d status codes", f->name,
               SKIP_MAX_STATUS);
      return fail(err, 422, "invalid_value", prefix, f->name, -1, msg);
    }
    cJSON_ArrayForEach(it, v) {
      if (!json_is_int(it, f->min, f->max)) {
        snprintf(msg, sizeof msg, "a retry status must be an integer from %lld to %lld",
                 (long long)f->min, (long long)f->max);
        return fail(err, 422, "out_of_range", prefix, f->name, n, msg);
      }
      q->retry_on_status[n++] = (int)it->valuedouble;
    }
    q->n_retry_on_status = n;
    return 0;
  }
  }
  return 0;
}

int noderetry_apply(const cJSON *obj, struct skip_params *p, int strict, const char *prefix,
                    struct field_err *err) {
  struct skip_params q = *p;
  const cJSON *it;
  if (!cJSON_IsObject(obj)) {
    err->status = 422;
    err->code = "invalid_type";
    snprintf(err->field, sizeof err->field, "%s", prefix);
    snprintf(err->message, sizeof err->message, "node_retry must be an object");
    return -1;
  }
  cJSON_ArrayForEach(it, obj) {
    const struct noderetry_field *f = noderetry_fields;
    while (f->name && strcmp(f->name, it->string) != 0)
      f++;
    if (!f->name) {
      char msg[160];
      if (!strict) continue;
      snprintf(msg, sizeof msg, "unknown field '%s'", it->string);
      return fail(err, 400, "unknown_field", prefix, it->string, -1, msg);
    }
    if (apply_field(f, it, &q, prefix, err) < 0) return -1;
  }
  *p = q;
  return 0;
}

cJSON *noderetry_json(const struct skip_params *p) {
  cJSON *nr = cJSON_CreateObject();
  if (!nr) return NULL;
  for (const struct noderetry_field *f = noderetry_fields; f->name; f++) {
    cJSON *v = NULL;
    switch (f->type) {
    case NR_INT:
      v = cJSON_CreateNumber(cint(p, f->off));
      break;
    case NR_I64:
      v = cJSON_CreateNumber((double)ci64(p, f->off));
      break;
    case NR_BOOL:
      v = cJSON_CreateBool(cint(p, f->off));
      break;
    case NR_RATIO:
      v = cdbl(p, f->off) > 0 ? cJSON_CreateNumber(cdbl(p, f->off)) : cJSON_CreateNull();
      break;
    case NR_STATUSES:
      if ((v = cJSON_CreateArray()))
        for (int i = 0; i < p->n_retry_on_status && i < SKIP_MAX_STATUS; i++)
          cJSON_AddItemToArray(v, cJSON_CreateNumber(p->retry_on_status[i]));
      break;
    }
    if (!v || !cJSON_AddItemToObject(nr, f->name, v)) {
      cJSON_Delete(v);
      cJSON_Delete(nr);
      return NULL;
    }
  }
  return nr;
}
