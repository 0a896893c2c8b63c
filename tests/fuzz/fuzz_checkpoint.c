/* fuzz_checkpoint — libFuzzer target for controld/checkpoint's reading of a checkpoint plugin's
 * answer (checkpoint_parse), bytes from a service outside controld.
 *
 * Properties: an answer is valid or not, never in between: a refused one has an error message,
 * no votes and n 0; a valid one has at most CHECKPOINT_MAX_VOTES votes, each with a non-empty
 * name and no name twice, a status in 0..999 and a latency of -1 or 0..86400000, every string
 * terminated within its field. And it reads one way: an accepted body, read again with cJSON
 * alone, is an object whose "votes" array holds exactly those votes in that order, each with the
 * same name, ok, status (0 when absent or null), latency (-1 when absent or null) and an error
 * that is the start of the vote's own (cut to its field at a character's start) when that is
 * text; names and errors are text without control characters. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "checkpoint.h"
#include "fields.h"
#include "fuzz_check.h"

static int num_or(const cJSON *o, const char *key, int absent) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v || cJSON_IsNull(v)) return absent;
  FUZZ_CHECK(cJSON_IsNumber(v));
  return (int)v->valuedouble;
}

static void check_against_cjson(const unsigned char *data, size_t size,
                                const struct checkpoint_answer *a) {
  cJSON *root = cJSON_ParseWithLength((const char *)data, size);
  const cJSON *votes, *it;
  int i = 0;
  FUZZ_CHECK(cJSON_IsObject(root));
  votes = cJSON_GetObjectItemCaseSensitive(root, "votes");
  FUZZ_CHECK(cJSON_IsArray(votes));
  FUZZ_CHECK(cJSON_GetArraySize(votes) == a->n);
  cJSON_ArrayForEach(it, votes) {
    const struct checkpoint_vote *v = &a->votes[i++];
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "checkpoint");
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(it, "ok");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(it, "error");
    FUZZ_CHECK(cJSON_IsString(name) && strcmp(name->valuestring, v->name) == 0);
    FUZZ_CHECK(cJSON_IsBool(ok) && cJSON_IsTrue(ok) == (v->ok != 0));
    FUZZ_CHECK(num_or(it, "status", 0) == v->status);
    FUZZ_CHECK(num_or(it, "latency_ms", -1) == v->latency_ms);
    if (cJSON_IsString(err) && fields_text_valid(err->valuestring, 0, 4096))
      FUZZ_CHECK(strncmp(err->valuestring, v->error, strlen(v->error)) == 0 &&
                 (strlen(v->error) == strlen(err->valuestring) ||
                  strlen(v->error) + 4 >= sizeof v->error));
    else if (!cJSON_IsString(err))
      FUZZ_CHECK(v->error[0] == '\0');
  }
  cJSON_Delete(root);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  struct checkpoint_answer a;
  int rc = checkpoint_parse((const char *)data, size, &a);
  FUZZ_CHECK(FUZZ_TERMINATED(a.error));
  if (rc != 0) {
    FUZZ_CHECK(rc == -1 && !a.valid && a.n == 0 && a.votes == NULL && a.error[0] != '\0');
    checkpoint_answers_free(&a, 1);
    return 0;
  }
  FUZZ_CHECK(a.valid == 1 && a.n >= 0 && a.n <= CHECKPOINT_MAX_VOTES);
  FUZZ_CHECK(a.n == 0 || a.votes != NULL);
  for (int i = 0; i < a.n; i++) {
    const struct checkpoint_vote *v = &a.votes[i];
    FUZZ_CHECK(FUZZ_TERMINATED(v->name) && v->name[0] != '\0');
    FUZZ_CHECK(FUZZ_TERMINATED(v->error));
    FUZZ_CHECK(fields_text_valid(v->name, 1, 63) && fields_text_valid(v->error, 0, 127));
    FUZZ_CHECK(v->ok == 0 || v->ok == 1);
    FUZZ_CHECK(v->status >= 0 && v->status <= 999);
    FUZZ_CHECK(v->latency_ms == -1 || (v->latency_ms >= 0 && v->latency_ms <= 86400000));
    for (int k = 0; k < i; k++)
      FUZZ_CHECK(strcmp(a.votes[k].name, v->name) != 0);
  }
  check_against_cjson(data, size, &a);
  checkpoint_answers_free(&a, 1);
  return 0;
}
