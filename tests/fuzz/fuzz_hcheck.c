/* fuzz_hcheck — libFuzzer target: health-check options from untrusted JSON (the API's
 * health_check, a node task's "check") and the success rule. The input is JSON options, then
 * optionally a NUL byte and a response body. Properties: accepted options are within their
 * bounds; to_text -> from_text gives the same options (same text); the judge always answers
 * with NUL-terminated evidence, empty exactly on success; a node task carrying the options
 * parses to the same options. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "hcheck.h"
#include "json.h"
#include "log.h"
#include "tasks.h"
#include <cjson/cJSON.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  log_init("fuzz_hcheck", LOG_TEXT, LOG_ERROR);
  return 0;
}

static void check_bounds(const struct hcheck_opts *o) {
  FUZZ_CHECK(o->type == HCHECK_HTTP || o->type == HCHECK_TCP);
  FUZZ_CHECK(o->method == HCHECK_GET || o->method == HCHECK_HEAD);
  FUZZ_CHECK(o->n_headers >= 0 && o->n_headers <= HCHECK_MAX_HEADERS);
  FUZZ_CHECK(o->n_codes >= 0 && o->n_codes <= HCHECK_MAX_CODES);
  for (int i = 0; i < o->n_headers; i++) {
    FUZZ_CHECK(FUZZ_TERMINATED(o->headers[i].name) && o->headers[i].name[0]);
    FUZZ_CHECK(FUZZ_TERMINATED(o->headers[i].value) && o->headers[i].value[0]);
    FUZZ_CHECK(!strpbrk(o->headers[i].value, "\r\n"));
  }
  for (int i = 0; i < o->n_codes; i++)
    FUZZ_CHECK(o->codes[i].lo >= 100 && o->codes[i].lo <= o->codes[i].hi && o->codes[i].hi <= 599);
  FUZZ_CHECK(FUZZ_TERMINATED(o->expected_body));
  FUZZ_CHECK(o->port >= 0 && o->port <= 65535);
  FUZZ_CHECK(o->interval_ms == 0 || (o->interval_ms >= HCHECK_INTERVAL_MIN_MS &&
                                     o->interval_ms <= HCHECK_INTERVAL_MAX_MS));
  FUZZ_CHECK(o->level_min_healthy >= 1 && o->level_min_healthy <= HCHECK_MIN_HEALTHY_MAX);
}

/* The options inside a node task, through noded's parser: the same options come out. */
static void task_round_trip(const struct hcheck_opts *o) {
  struct hcheck_opts probe_only = *o;
  struct ntask_round r;
  cJSON *root = cJSON_CreateObject(), *arr, *t, *c;
  char *text, err[256], *a, *b;
  FUZZ_CHECK(root);
  cJSON_AddNumberToObject(root, "round_id", 1);
  cJSON_AddNumberToObject(root, "deadline_ms", 1000);
  arr = cJSON_AddArrayToObject(root, "tasks");
  t = cJSON_CreateObject();
  cJSON_AddItemToArray(arr, t);
  cJSON_AddNumberToObject(t, "task_id", 1);
  cJSON_AddNumberToObject(t, "origin_id", 1);
  cJSON_AddStringToObject(t, "url", "http://127.0.0.1:80/");
  cJSON_AddStringToObject(t, "host", "a.test");
  cJSON_AddNumberToObject(t, "timeout_ms", 1000);
  c = cJSON_AddObjectToObject(t, "check");
  FUZZ_CHECK(hcheck_add_json(c, o, 0) == 0);
  text = json_print(root);
  FUZZ_CHECK(text);
  FUZZ_CHECK(ntasks_parse(text, strlen(text), &r, err, sizeof err) == 0);
  FUZZ_CHECK(r.n == 1);
  /* the site-only options do not travel */
  probe_only.interval_ms = 0;
  probe_only.level_min_healthy = 1;
  a = hcheck_to_text(&probe_only);
  b = hcheck_to_text(&r.tasks[0].check);
  FUZZ_CHECK((a == NULL) == (b == NULL));
  FUZZ_CHECK(!a || strcmp(a, b) == 0);
  free(a);
  free(b);
  free(text);
  ntasks_round_fini(&r);
  cJSON_Delete(root);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  const unsigned char *nul = memchr(data, 0, size);
  size_t jlen = nul ? (size_t)(nul - data) : size;
  const char *body = nul ? (const char *)nul + 1 : NULL;
  size_t blen = nul ? size - jlen - 1 : 0;
  struct hcheck_opts o, back, before;
  struct field_err err;
  cJSON *j = json_parse((const char *)data, jlen);
  char *text, *text2, ev[HCHECK_EVIDENCE_MAX];
  if (!j) return 0;
  hcheck_defaults(&o);
  before = o;
  if (hcheck_apply_json(j, &o, &err) != 0) {
    FUZZ_CHECK(err.status == 400 || err.status == 422);
    FUZZ_CHECK(FUZZ_TERMINATED(err.field) && FUZZ_TERMINATED(err.message) && err.message[0]);
    FUZZ_CHECK(memcmp(&o, &before, sizeof o) == 0);
    cJSON_Delete(j);
    return 0;
  }
  cJSON_Delete(j);
  check_bounds(&o);
  text = hcheck_to_text(&o);
  FUZZ_CHECK((text == NULL) == (hcheck_is_default(&o) != 0));
  FUZZ_CHECK(hcheck_from_text(text, &back) == 0);
  text2 = hcheck_to_text(&back);
  FUZZ_CHECK((text2 == NULL) == (text == NULL));
  FUZZ_CHECK(!text || strcmp(text, text2) == 0);
  free(text);
  free(text2);
  task_round_trip(&o);
  for (int status = 0; status <= 600; status += (status < 100 ? 100 : 37)) {
    for (int connected = 0; connected <= 1; connected++) {
      struct hcheck_outcome out = {.connected = connected,
                                   .timed_out = status == 0,
                                   .status = connected ? status : 0,
                                   .error = connected ? NULL : "connect failed: x",
                                   .body = body,
                                   .body_len = blen};
      int ok = hcheck_judge(&o, &out, ev, sizeof ev);
      FUZZ_CHECK(FUZZ_TERMINATED(ev));
      FUZZ_CHECK(ok == (ev[0] == '\0'));
      FUZZ_CHECK(!ok || connected);
    }
  }
  return 0;
}
