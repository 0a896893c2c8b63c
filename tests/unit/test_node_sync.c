/* test_node_sync — noded's pure pieces: task answers and URLs, heartbeat body, the
   atomic cache write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "hcheck.h"

#include "heartbeat.h"
#include "json.h"
#include "sync.h"
#include "tasks.h"

static void test_url_target(void **state) {
  char store[700];
  struct probe_target t;
  (void)state;
  assert_int_equal(ntasks_url_target("https://10.0.0.1:8443/healthz?x=1", store, sizeof store, &t),
                   0);
  assert_string_equal(t.scheme, "https");
  assert_string_equal(t.address, "10.0.0.1");
  assert_int_equal(t.port, 8443);
  assert_string_equal(t.path, "/healthz?x=1");
  assert_int_equal(ntasks_url_target("http://[::1]:80", store, sizeof store, &t), 0);
  assert_string_equal(t.address, "::1");
  assert_string_equal(t.path, "/");
  assert_int_equal(t.port, 80);
  assert_int_equal(ntasks_url_target("http://origin.example:8080/", store, sizeof store, &t), 0);
  assert_string_equal(t.address, "origin.example");
  assert_int_equal(ntasks_url_target("ftp://a:1/", store, sizeof store, &t), -1);
  assert_int_equal(ntasks_url_target("http://a/", store, sizeof store, &t), -1);
  assert_int_equal(ntasks_url_target("http://a:0/", store, sizeof store, &t), -1);
  assert_int_equal(ntasks_url_target("http://a:70000/", store, sizeof store, &t), -1);
  assert_int_equal(ntasks_url_target("http://[::1:80/", store, sizeof store, &t), -1);
  assert_int_equal(ntasks_url_target("http://a:80x/", store, sizeof store, &t), -1);
  assert_int_equal(ntasks_url_target("http://a:80/", store, 3, &t), -1);
}

static void test_parse_tasks(void **state) {
  struct ntask_round r;
  char err[200];
  static const char good[] =
      "{\"round_id\":5,\"deadline_ms\":9000,\"tasks\":[{\"task_id\":1,\"origin_id\":3,"
      "\"url\":\"http://127.0.0.1:80/\",\"host\":\"a.test\",\"timeout_ms\":5000,\"new\":1}]}";
  (void)state;
  assert_int_equal(ntasks_parse(good, strlen(good), &r, err, sizeof err), 0);
  assert_int_equal(r.round_id, 5);
  assert_int_equal(r.deadline_ms, 9000);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.tasks[0].origin_id, 3);
  assert_string_equal(r.tasks[0].host, "a.test");
  assert_int_equal(r.tasks[0].timeout_ms, 5000);
  assert_true(hcheck_is_default(&r.tasks[0].check)); /* no "check": the seed's rule */
  ntasks_round_fini(&r);
  {
    static const char with_check[] =
        "{\"round_id\":5,\"deadline_ms\":9000,\"tasks\":[{\"task_id\":1,\"origin_id\":3,"
        "\"url\":\"http://127.0.0.1:80/\",\"host\":\"a.test\",\"timeout_ms\":5000,"
        "\"check\":{\"type\":\"http\",\"method\":\"HEAD\",\"headers\":{\"X-A\":\"1\"},"
        "\"expected_codes\":[\"200-299\"],\"expected_body\":null,\"port\":8081}}]}";
    assert_int_equal(ntasks_parse(with_check, strlen(with_check), &r, err, sizeof err), 0);
    assert_int_equal(r.tasks[0].check.method, HCHECK_HEAD);
    assert_int_equal(r.tasks[0].check.n_headers, 1);
    assert_int_equal(r.tasks[0].check.n_codes, 1);
    assert_int_equal(r.tasks[0].check.port, 8081);
    ntasks_round_fini(&r);
  }
  {
    static const char *const bad[] = {
        "[]", "{\"round_id\":0,\"deadline_ms\":1,\"tasks\":[]}", "{\"round_id\":1,\"tasks\":[]}",
        "{\"round_id\":1,\"deadline_ms\":1,\"tasks\":{}}",
        "{\"round_id\":1,\"deadline_ms\":1,\"tasks\":[{\"task_id\":1,\"origin_id\":1,"
        "\"url\":\"\",\"host\":\"h\",\"timeout_ms\":1}]}",
        "{\"round_id\":1,\"deadline_ms\":1,\"tasks\":[{\"task_id\":1,\"origin_id\":1,"
        "\"url\":\"http://a:1/\",\"host\":\"h\",\"timeout_ms\":0}]}",
        "{\"round_id\":1,\"deadline_ms\":1,\"tasks\":[7]}",
        /* a bad "check" refuses the round: a node never probes by a rule it misread */
        "{\"round_id\":1,\"deadline_ms\":1,\"tasks\":[{\"task_id\":1,\"origin_id\":1,"
        "\"url\":\"http://a:1/\",\"host\":\"h\",\"timeout_ms\":1,\"check\":[]}]}",
        "{\"round_id\":1,\"deadline_ms\":1,\"tasks\":[{\"task_id\":1,\"origin_id\":1,"
        "\"url\":\"http://a:1/\",\"host\":\"h\",\"timeout_ms\":1,\"check\":{\"method\":\"PUT\"}}]}",
        "{\"round_id\":1,\"deadline_ms\":1,\"tasks\":[{\"task_id\":1,\"origin_id\":1,"
        "\"url\":\"http://a:1/\",\"host\":\"h\",\"timeout_ms\":1,\"check\":{\"x\":1}}]}",
        "{\"round_id\":1,\"deadline_ms\":1,\"tasks\":[{\"task_id\":1,\"origin_id\":1,"
        "\"url\":\"http://a:1/\",\"host\":\"h\",\"timeout_ms\":1,"
        "\"check\":{\"headers\":{\"Host\":\"x\"}}}]}",
        "{"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      assert_int_equal(ntasks_parse(bad[i], strlen(bad[i]), &r, err, sizeof err), -1);
      ntasks_round_fini(&r);
    }
  }
  assert_int_equal(ntasks_effective_timeout(5000, 30000), 5000);
  assert_int_equal(ntasks_effective_timeout(5000, 2000), 1500);
  assert_int_equal(ntasks_effective_timeout(5000, 550), 0);
  assert_int_equal(ntasks_effective_timeout(5000, -10), 0);
}

static void test_heartbeat_body(void **state) {
  cJSON *obs = cJSON_CreateArray(), *x, *j, *arr;
  char *text;
  (void)state;
  x = cJSON_CreateObject();
  cJSON_AddNumberToObject(x, "site_id", 1);
  cJSON_AddNumberToObject(x, "origin_id", 2);
  cJSON_AddNumberToObject(x, "requests", 10);
  cJSON_AddNumberToObject(x, "failures", 1);
  cJSON_AddBoolToObject(x, "skipped", 1);
  cJSON_AddItemToArray(obs, x);
  cJSON_AddItemToArray(obs, cJSON_CreateString("junk"));
  text = heartbeat_body("0.1.0", 42, obs);
  assert_non_null(text);
  j = json_parse(text, strlen(text));
  assert_non_null(j);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "version")->valuestring, "0.1.0");
  assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(j, "config_version")->valuedouble, 42);
  arr = cJSON_GetObjectItemCaseSensitive(j, "observations");
  assert_int_equal(cJSON_GetArraySize(arr), 1);
  assert_true(
      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(arr, 0), "skipped")));
  cJSON_Delete(j);
  free(text);
  text = heartbeat_body("0.1.0", 0, NULL);
  assert_non_null(strstr(text, "\"observations\":[]"));
  free(text);
}

/* A node's observations: origin ids ids[0..n), each with requests = reqs[i] (NULL: 10) and
   skipped when skip[i] (NULL: none). */
static cJSON *obs_of(const int64_t *ids, int n, const int64_t *reqs, const int *skip) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; i < n; i++) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "site_id", 1);
    cJSON_AddNumberToObject(x, "origin_id", (double)ids[i]);
    cJSON_AddNumberToObject(x, "requests", reqs ? (double)reqs[i] : 10);
    cJSON_AddNumberToObject(x, "failures", 0);
    cJSON_AddBoolToObject(x, "skipped", skip && skip[i]);
    cJSON_AddItemToArray(arr, x);
  }
  return arr;
}

/* The origin ids a picked array holds, in order, into out; how many. */
static int ids_in(const cJSON *arr, int64_t *out, int cap) {
  int n = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, arr) {
    if (n < cap) out[n] = (int64_t)cJSON_GetObjectItemCaseSensitive(x, "origin_id")->valuedouble;
    n++;
  }
  return n;
}

/* What a heartbeat carries: what controld has not acknowledged, what is skipped, within the
   budget and spread over beats; a refused beat is sent again. */
/* One beat: pick from obs within budget, the ids sent into got (at most 16), then controld's
   answer (acked 1: accepted, 0: refused). The number of observations sent. */
static int beat_at(struct hb_memo *m, cJSON *obs, size_t budget, int acked, int64_t *got,
                   int64_t now) {
  cJSON *a = heartbeat_pick(m, obs, budget, now);
  int n;
  assert_non_null(a);
  n = ids_in(a, got, 16);
  cJSON_Delete(a);
  heartbeat_acked(m, acked);
  return n;
}

/* How long an acknowledgement holds in these tests (a node's default). */
#define REFRESH (HEARTBEAT_REFRESH_BEATS * 10000)

/* The same, at the beats' usual time. */
static int beat(struct hb_memo *m, cJSON *obs, size_t budget, int acked, int64_t *got) {
  return beat_at(m, obs, budget, acked, got, 1000);
}

static void test_heartbeat_pick(void **state) {
  static const int64_t three[] = {30, 10, 20}, ten[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const size_t all = HEARTBEAT_OBS_BUDGET;
  int64_t reqs[3] = {10, 10, 10}, got[16];
  int skip[3] = {0, 0, 0};
  struct hb_memo m;
  cJSON *a;
  size_t one;
  (void)state;
  memset(&m, 0, sizeof m);
  m.refresh_ms = REFRESH;
  /* no observation at all (a node with no site yet): an empty list */
  assert_int_equal(beat(&m, NULL, all, 1, got), 0);
  assert_int_equal(beat(&m, cJSON_CreateArray(), all, 1, got), 0);
  /* the first beat carries everything, by origin id */
  assert_int_equal(beat(&m, obs_of(three, 3, reqs, skip), all, 1, got), 3);
  assert_true(got[0] == 10 && got[1] == 20 && got[2] == 30);
  assert_int_equal(m.n_acked, 3);
  /* nothing changed: nothing goes */
  assert_int_equal(beat(&m, obs_of(three, 3, reqs, skip), all, 1, got), 0);
  /* one changed: it alone; refused, it goes again */
  reqs[2] = 11; /* origin 20 */
  assert_int_equal(beat(&m, obs_of(three, 3, reqs, skip), all, 0, got), 1);
  assert_true(got[0] == 20);
  assert_int_equal(beat(&m, obs_of(three, 3, reqs, skip), all, 1, got), 1);
  assert_true(got[0] == 20);
  /* a skipped origin goes in every beat, changed or not */
  skip[0] = 1; /* origin 30 */
  for (int k = 0; k < 2; k++) {
    assert_int_equal(beat(&m, obs_of(three, 3, reqs, skip), all, 1, got), 1);
    assert_true(got[0] == 30);
  }
  /* an origin no longer observed is forgotten */
  beat(&m, obs_of(three, 2, reqs, skip), all, 1, got);
  assert_int_equal(m.n_acked, 2);
  heartbeat_memo_fini(&m);
  m.refresh_ms = REFRESH;
  /* a budget of four observations: ten go in three beats, each after the last sent */
  a = obs_of(ten, 1, NULL, NULL);
  {
    char *t = cJSON_PrintUnformatted(cJSON_GetArrayItem(a, 0));
    one = strlen(t) + 1;
    free(t);
  }
  cJSON_Delete(a);
  for (int k = 0; k < 3; k++) {
    int n = beat(&m, obs_of(ten, 10, NULL, NULL), 4 * one + 3, 1, got);
    assert_int_equal(n, k < 2 ? 4 : 2);
    for (int i = 0; i < n; i++)
      assert_int_equal(got[i], 4 * k + i + 1);
  }
  assert_int_equal(beat(&m, obs_of(ten, 10, NULL, NULL), 4 * one + 3, 1, got), 0);
  assert_int_equal(m.n_acked, 10);
  heartbeat_memo_fini(&m);
  m.refresh_ms = REFRESH;
  /* an acknowledgement holds refresh_ms; then the origin goes again unchanged (a controld
     restored from a backup has its row back), and holds as long again */
  assert_int_equal(beat_at(&m, obs_of(three, 3, NULL, NULL), all, 1, got, 1000), 3);
  assert_int_equal(beat_at(&m, obs_of(three, 3, NULL, NULL), all, 1, got, 1000 + 60000), 0);
  assert_int_equal(beat_at(&m, obs_of(three, 3, NULL, NULL), all, 1, got, 1000 + REFRESH - 1), 0);
  assert_int_equal(beat_at(&m, obs_of(three, 3, NULL, NULL), all, 0, got, 1000 + REFRESH), 3);
  assert_int_equal(beat_at(&m, obs_of(three, 3, NULL, NULL), all, 1, got, 2000 + REFRESH), 3);
  assert_int_equal(beat_at(&m, obs_of(three, 3, NULL, NULL), all, 1, got, 2000 + 2 * REFRESH - 1),
                   0);
  assert_int_equal(beat_at(&m, obs_of(three, 3, NULL, NULL), all, 1, got, 2000 + 2 * REFRESH), 3);
  heartbeat_memo_fini(&m);
}

static void test_atomic_write(void **state) {
  char dir[] = "/tmp/test_node_sync.XXXXXX", path[128], buf[64], err[256], cmd[160];
  FILE *f;
  size_t n;
  (void)state;
  assert_non_null(mkdtemp(dir));
  assert_int_equal(sync_write_atomic(dir, "config.json", "{\"a\":1}", 7, err, sizeof err), 0);
  assert_int_equal(sync_write_atomic(dir, "config.json", "{\"b\":2}", 7, err, sizeof err), 0);
  snprintf(path, sizeof path, "%s/config.json", dir);
  f = fopen(path, "rb");
  assert_non_null(f);
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  assert_string_equal(buf, "{\"b\":2}");
  snprintf(path, sizeof path, "%s/.config.json.tmp", dir);
  assert_int_equal(access(path, F_OK), -1); /* no temp file left behind */
  assert_int_equal(sync_write_atomic("/nonexistent/dir", "c", "x", 1, err, sizeof err), -1);
  assert_non_null(strstr(err, "/nonexistent/dir"));
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_url_target),     cmocka_unit_test(test_parse_tasks),
      cmocka_unit_test(test_heartbeat_body), cmocka_unit_test(test_heartbeat_pick),
      cmocka_unit_test(test_atomic_write),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
