/* ramp — the failback ramp's policy, published run, share and decision (see ramp.h). */
#include "ramp.h"

#include <stdio.h>
#include <string.h>

#include "json.h"

static const char *const policy_keys[] = {"steps", "step_ms", "max_failure_ratio", "min_requests",
                                          NULL};

/* "failback_ramp" under prefix, into out. */
static void path_of(const char *prefix, char *out, size_t cap) {
  snprintf(out, cap, "%s%sfailback_ramp", prefix && *prefix ? prefix : "",
           prefix && *prefix ? "." : "");
}

/* The steps array: 2-10 integers, strictly increasing, in 1..100, the last 100. */
static int read_steps(const cJSON *a, const char *path, int *steps, int *n, struct field_err *err) {
  const cJSON *it;
  int k = 0, prev = 0, cnt = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
  if (cnt < 0)
    return fields_fail(err, 422, "invalid_type", path, "steps",
                       "steps must be an array of percentages");
  if (cnt < RAMP_MIN_STEPS || cnt > RAMP_MAX_STEPS)
    return fields_fail(err, 422, "out_of_range", path, "steps", "steps must hold %d to %d steps",
                       RAMP_MIN_STEPS, RAMP_MAX_STEPS);
  cJSON_ArrayForEach(it, a) {
    char key[32];
    snprintf(key, sizeof key, "steps[%d]", k);
    if (!json_is_int(it, 1, 100))
      return fields_fail(err, 422, "out_of_range", path, key,
                         "%s must be a percentage from 1 to 100", key);
    if ((int)it->valuedouble <= prev)
      return fields_fail(err, 422, "invalid_value", path, key,
                         "steps must be strictly increasing percentages");
    prev = steps[k++] = (int)it->valuedouble;
  }
  if (prev != 100)
    return fields_fail(err, 422, "invalid_value", path, "steps", "the last step must be 100");
  *n = k;
  return 0;
}

int ramp_policy_apply(const cJSON *v, struct ramp_policy *p, const char *prefix,
                      struct field_err *err) {
  struct ramp_policy t;
  char path[160];
  const cJSON *it;
  path_of(prefix, path, sizeof path);
  if (!v || cJSON_IsNull(v)) {
    memset(p, 0, sizeof *p);
    return 0;
  }
  if (!cJSON_IsObject(v))
    return fields_fail(err, 422, "invalid_type", path, NULL,
                       "failback_ramp must be an object or null");
  cJSON_ArrayForEach(it, v) {
    int known = 0;
    for (const char *const *k = policy_keys; *k; k++)
      if (strcmp(*k, it->string) == 0) known = 1;
    if (!known)
      return fields_fail(err, 400, "unknown_field", path, it->string, "unknown field '%s'",
                         it->string);
  }
  memset(&t, 0, sizeof t);
  if (!(it = cJSON_GetObjectItemCaseSensitive(v, "steps")))
    return fields_fail(err, 422, "required", path, "steps", "steps is required");
  if (read_steps(it, path, t.steps, &t.n_steps, err) < 0) return -1;
  if (!(it = cJSON_GetObjectItemCaseSensitive(v, "step_ms")))
    return fields_fail(err, 422, "required", path, "step_ms", "step_ms is required");
  if (!json_is_int(it, RAMP_STEP_MS_MIN, RAMP_STEP_MS_MAX))
    return fields_fail(err, 422, "out_of_range", path, "step_ms",
                       "step_ms must be an integer from %d to %d", RAMP_STEP_MS_MIN,
                       RAMP_STEP_MS_MAX);
  t.step_ms = (int64_t)it->valuedouble;
  it = cJSON_GetObjectItemCaseSensitive(v, "max_failure_ratio");
  t.max_failure_ratio = 0.05;
  if (it) {
    if (!cJSON_IsNumber(it) || !(it->valuedouble > 0.0) || it->valuedouble > 1.0)
      return fields_fail(err, 422, "out_of_range", path, "max_failure_ratio",
                         "max_failure_ratio must be a number in (0, 1]");
    t.max_failure_ratio = it->valuedouble;
  }
  t.min_requests = 50;
  if ((it = cJSON_GetObjectItemCaseSensitive(v, "min_requests"))) {
    if (!json_is_int(it, 1, RAMP_MIN_REQUESTS_MAX))
      return fields_fail(err, 422, "out_of_range", path, "min_requests",
                         "min_requests must be an integer from 1 to %d", RAMP_MIN_REQUESTS_MAX);
    t.min_requests = (int64_t)it->valuedouble;
  }
  *p = t;
  return 0;
}

static cJSON *steps_json(const int *steps, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++) {
    cJSON *s = cJSON_CreateNumber(steps[i]);
    if (!s || !cJSON_AddItemToArray(a, s)) {
      cJSON_Delete(s);
      cJSON_Delete(a);
      return NULL;
    }
  }
  return a;
}

cJSON *ramp_policy_json(const struct ramp_policy *p) {
  cJSON *j, *a;
  if (p->n_steps == 0) return cJSON_CreateNull();
  j = cJSON_CreateObject();
  a = steps_json(p->steps, p->n_steps);
  if (!j || !a || !cJSON_AddItemToObject(j, "steps", a)) {
    cJSON_Delete(a);
    goto fail;
  }
  if (!json_add_i64(j, "step_ms", p->step_ms) ||
      !cJSON_AddNumberToObject(j, "max_failure_ratio", p->max_failure_ratio) ||
      !json_add_i64(j, "min_requests", p->min_requests))
    goto fail;
  return j;
fail:
  cJSON_Delete(j);
  return NULL;
}

/* ---- the column codec ---- */

static const char *const codec_keys[] = {"failback_ramp", NULL};

static int codec_apply(const cJSON *obj, void *member, struct field_err *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "failback_ramp");
  if (!v) return 0; /* absent: unchanged */
  return ramp_policy_apply(v, member, "", err);
}

static int codec_add_json(cJSON *obj, const void *member) {
  cJSON *v = ramp_policy_json(member);
  if (!v || !cJSON_AddItemToObject(obj, "failback_ramp", v)) {
    cJSON_Delete(v);
    return -1;
  }
  return 0;
}

static int codec_is_default(const void *member) {
  return ((const struct ramp_policy *)member)->n_steps == 0;
}

static char *codec_to_text(const void *member) {
  cJSON *j;
  char *t;
  if (codec_is_default(member)) return NULL;
  j = ramp_policy_json(member);
  t = j ? json_print(j) : NULL;
  cJSON_Delete(j);
  return t;
}

static int codec_from_text(const char *text, void *member) {
  struct field_err err;
  cJSON *j;
  int rc;
  memset(member, 0, sizeof(struct ramp_policy));
  if (!text || !text[0]) return 0;
  j = json_parse(text, strlen(text));
  rc = j ? ramp_policy_apply(j, member, "", &err) : -1;
  cJSON_Delete(j);
  if (rc < 0) memset(member, 0, sizeof(struct ramp_policy));
  return rc;
}

const struct field_codec ramp_policy_codec = {
    .keys = codec_keys,
    .apply = codec_apply,
    .add_json = codec_add_json,
    .to_text = codec_to_text,
    .is_default = codec_is_default,
    .from_text = codec_from_text,
};

/* ---- the published run ---- */

cJSON *ramp_run_json(const struct ramp_run *r) {
  cJSON *j = cJSON_CreateObject(), *a = steps_json(r->steps, r->n_steps);
  if (!j || !a || !cJSON_AddItemToObject(j, "steps", a)) {
    cJSON_Delete(a);
    goto fail;
  }
  if (!json_add_i64(j, "from_level", r->from_level) || !json_add_i64(j, "to_level", r->to_level) ||
      !json_add_i64(j, "started_at", r->started_at) || !json_add_i64(j, "step_ms", r->step_ms))
    goto fail;
  return j;
fail:
  cJSON_Delete(j);
  return NULL;
}

int ramp_run_read(const cJSON *v, const char *path, struct ramp_run *r, struct field_err *err) {
  struct ramp_run t;
  const cJSON *it;
  int64_t x;
  memset(r, 0, sizeof *r);
  if (!v || cJSON_IsNull(v)) return 0;
  if (!cJSON_IsObject(v))
    return fields_fail(err, 422, "invalid_type", path, NULL, "ramp must be an object or null");
  memset(&t, 0, sizeof t);
  if (json_int(v, "from_level", 1, 16, &x) != 0)
    return fields_fail(err, 422, "invalid_value", path, "from_level", "from_level must be a level");
  t.from_level = (int)x;
  if (json_int(v, "to_level", 1, 16, &x) != 0 || x >= t.from_level)
    return fields_fail(err, 422, "invalid_value", path, "to_level",
                       "to_level must be a level before from_level");
  t.to_level = (int)x;
  if (json_int(v, "started_at", 0, INT64_C(999999999999999), &t.started_at) != 0)
    return fields_fail(err, 422, "invalid_value", path, "started_at",
                       "started_at must be epoch milliseconds");
  if (json_int(v, "step_ms", RAMP_STEP_MS_MIN, RAMP_STEP_MS_MAX, &t.step_ms) != 0)
    return fields_fail(err, 422, "invalid_value", path, "step_ms", "step_ms is out of range");
  it = cJSON_GetObjectItemCaseSensitive(v, "steps");
  if (read_steps(it, path, t.steps, &t.n_steps, err) < 0) return -1;
  *r = t;
  return 0;
}

static const char *const run_keys[] = {"ramp", NULL};

static int run_apply(const cJSON *obj, void *member, struct field_err *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "ramp");
  if (!v) return 0;
  return ramp_run_read(v, "ramp", member, err);
}

static int run_add_json(cJSON *obj, const void *member) {
  const struct ramp_run *r = member;
  cJSON *v = r->from_level ? ramp_run_json(r) : cJSON_CreateNull();
  if (!v || !cJSON_AddItemToObject(obj, "ramp", v)) {
    cJSON_Delete(v);
    return -1;
  }
  return 0;
}

static int run_is_default(const void *member) {
  return ((const struct ramp_run *)member)->from_level == 0;
}

static char *run_to_text(const void *member) {
  cJSON *j;
  char *t;
  if (run_is_default(member)) return NULL;
  j = ramp_run_json(member);
  t = j ? json_print(j) : NULL;
  cJSON_Delete(j);
  return t;
}

static int run_from_text(const char *text, void *member) {
  struct field_err err;
  cJSON *j;
  int rc;
  memset(member, 0, sizeof(struct ramp_run));
  if (!text || !text[0]) return 0;
  j = json_parse(text, strlen(text));
  rc = j ? ramp_run_read(j, "ramp", member, &err) : -1;
  cJSON_Delete(j);
  return rc;
}

const struct field_codec ramp_run_codec = {
    .keys = run_keys,
    .apply = run_apply,
    .add_json = run_add_json,
    .to_text = run_to_text,
    .is_default = run_is_default,
    .from_text = run_from_text,
};

/* ---- share and decision ---- */

int ramp_step_at(const struct ramp_run *r, int64_t t) {
  int64_t k;
  if (t < r->started_at) return 0;
  k = (t - r->started_at) / r->step_ms;
  return k >= r->n_steps ? r->n_steps : (int)k;
}

int64_t ramp_ends_at(const struct ramp_run *r) {
  return r->started_at + (int64_t)r->n_steps * r->step_ms;
}

int ramp_share(const struct ramp_run *r, int64_t now_ms, int64_t offset_ms) {
  int k;
  if (r->from_level == 0 || r->n_steps == 0 || r->step_ms <= 0) return 0;
  k = ramp_step_at(r, now_ms + offset_ms);
  return k >= r->n_steps ? 100 : r->steps[k];
}

enum ramp_action ramp_decide(const struct ramp_policy *p, const struct ramp_run *r,
                             const struct ramp_window *w, int64_t now, char *why, size_t cap) {
  if (!why) cap = 0;
  if (w->level_unhealthy) {
    if (cap) snprintf(why, cap, "level %d turned unhealthy during the ramp", r->to_level);
    return RAMP_ABORT;
  }
  if (w->level_skipped && w->failures > 0) {
    if (cap)
      snprintf(why, cap, "the nodes skip every origin of level %d after %lld failures", r->to_level,
               (long long)w->failures);
    return RAMP_ABORT;
  }
  if (w->requests >= p->min_requests && w->requests > 0 &&
      (double)w->failures > p->max_failure_ratio * (double)w->requests) {
    if (cap)
      snprintf(why, cap, "level %d failed %lld of %lld requests (over %.3g)", r->to_level,
               (long long)w->failures, (long long)w->requests, p->max_failure_ratio);
    return RAMP_ABORT;
  }
  if (now >= ramp_ends_at(r)) {
    if (cap) snprintf(why, cap, "the ramp to level %d ran every step", r->to_level);
    return RAMP_COMPLETE;
  }
  if (cap) snprintf(why, cap, "ramping to level %d", r->to_level);
  return RAMP_GO_ON;
}

void ramp_run_start(const struct ramp_policy *p, int from, int to, int64_t now,
                    struct ramp_run *out) {
  memset(out, 0, sizeof *out);
  out->from_level = from;
  out->to_level = to;
  out->started_at = now;
  out->n_steps = p->n_steps;
  memcpy(out->steps, p->steps, sizeof out->steps);
  out->step_ms = p->step_ms;
}
