/* fuzz_export — libFuzzer target: cdnca-export documents (controld --import) through json_parse
 * and export_from_json, then the target rule. Any return is fine; a crash, a leak, undefined
 * behaviour, an error without a message, or an accepted document that does not come back unchanged
 * through export_to_json and export_from_json again is a bug. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "fuzz_check.h"
#include "json.h"

static void check_accepted(const struct store_export *x) {
  struct store_export y;
  struct field_err err;
  cJSON *a, *b;
  char *ta, *tb;
  FUZZ_CHECK(x->n_sites >= 0 && x->n_nodes >= 0 && x->n_tokens >= 0 && x->n_webhooks >= 0);
  FUZZ_CHECK(x->n_webhooks <= STORE_MAX_WEBHOOKS);
  for (int i = 0; i < x->n_sites; i++) {
    const struct site_rec *s = &x->sites[i];
    FUZZ_CHECK(s->id > 0 && s->current_level >= 1 && s->current_level <= 16);
    FUZZ_CHECK(s->n_hostnames >= 1 && s->n_origins <= SITE_MAX_ORIGINS);
    for (int o = 0; o < s->n_origins; o++)
      FUZZ_CHECK(s->origins[o].id > 0 && s->origins[o].site_id == s->id);
  }
  for (int i = 0; i < x->n_nodes; i++)
    FUZZ_CHECK(strlen(x->nodes[i].token_hash) == 64);
  for (int i = 0; i < x->n_tokens; i++)
    FUZZ_CHECK(strlen(x->tokens[i].hash) == 64);
  a = export_to_json(x, 1, "fuzz");
  FUZZ_CHECK(a != NULL);
  memset(&err, 0, sizeof err);
  FUZZ_CHECK(export_from_json(a, &y, &err) == 0);
  b = export_to_json(&y, 1, "fuzz");
  ta = json_print(a);
  tb = json_print(b);
  FUZZ_CHECK(ta && tb && strcmp(ta, tb) == 0);
  free(ta);
  free(tb);
  cJSON_Delete(a);
  cJSON_Delete(b);
  store_export_fini(&y);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  cJSON *doc = json_parse((const char *)data, size);
  struct store_export x;
  struct field_err err;
  if (!doc) return 0;
  memset(&err, 0, sizeof err);
  if (export_from_json(doc, &x, &err) == 0) {
    struct targets t;
    char terr[128];
    int r;
    check_accepted(&x);
    FUZZ_CHECK(targets_init(&t, NULL, terr, sizeof terr) == 0);
    memset(&err, 0, sizeof err);
    r = export_check_targets(&x, &t, &err);
    FUZZ_CHECK(r == 0 || (r == -1 && err.message[0] != '\0' && err.field[0] != '\0'));
  } else {
    FUZZ_CHECK(FUZZ_TERMINATED(err.field) && FUZZ_TERMINATED(err.message));
    FUZZ_CHECK(err.message[0] != '\0');
  }
  store_export_fini(&x);
  cJSON_Delete(doc);
  return 0;
}
