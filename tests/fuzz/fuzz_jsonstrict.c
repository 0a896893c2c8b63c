/* fuzz_jsonstrict — libFuzzer target: the strict JSON check (common/jsonstrict) against cJSON.
 * What the check accepts, cJSON parses whole, with no duplicate key in any object and only valid
 * UTF-8 without U+0000 in every string; printing it back gives text the check accepts again and
 * that parses to an equal tree (one message, one reading). What it refuses carries a known code
 * and a terminated path. The UTF-8 repair always yields valid UTF-8. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "json.h"
#include "jsonstrict.h"

/* Every property of an accepted tree; depth is bounded by the check. */
static void walk(const cJSON *v) {
  const cJSON *c, *d;
  if (cJSON_IsString(v)) FUZZ_CHECK(jsonstrict_utf8_valid(v->valuestring, strlen(v->valuestring)));
  for (c = v->child; c; c = c->next) {
    if (cJSON_IsObject(v)) {
      FUZZ_CHECK(c->string != NULL);
      FUZZ_CHECK(jsonstrict_utf8_valid(c->string, strlen(c->string)));
      for (d = c->next; d; d = d->next)
        FUZZ_CHECK(strcmp(c->string, d->string) != 0);
    }
    walk(c);
  }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  struct jsonstrict_err err;
  const char *text = (const char *)data;
  size_t fixed_len = 0;
  char *fixed = jsonstrict_utf8_repair(text, size, &fixed_len);
  if (fixed) {
    FUZZ_CHECK(jsonstrict_utf8_valid(fixed, fixed_len));
    free(fixed);
  }
  if (jsonstrict_check(text, size, &err) == 0) {
    cJSON *v = json_parse(text, size), *again;
    char *printed;
    FUZZ_CHECK(v != NULL);
    walk(v);
    printed = json_print(v);
    if (printed) {
      FUZZ_CHECK(jsonstrict_check(printed, strlen(printed), NULL) == 0);
      again = json_parse(printed, strlen(printed));
      FUZZ_CHECK(again != NULL);
      FUZZ_CHECK(cJSON_Compare(v, again, 1));
      cJSON_Delete(again);
      free(printed);
    }
    cJSON_Delete(v);
  } else {
    FUZZ_CHECK(err.rc >= JSONSTRICT_SYNTAX && err.rc <= JSONSTRICT_NUMBER);
    FUZZ_CHECK(FUZZ_TERMINATED(err.path));
    FUZZ_CHECK(err.offset <= size);
    FUZZ_CHECK(json_parse(text, size) == NULL);
  }
  return 0;
}
