/* Unit tests for common/log: the log file (open, reopen after a rename), level and format
   changes at run time, and structured event lines in text and JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "log.h"

static char dir[64];
static int saved_stderr = -1; /* cmocka reports on stderr: given back after the tests */

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  char *data;
  long n;
  if (!f) return strdup("");
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  data = calloc(1, (size_t)n + 1);
  assert_int_equal(fread(data, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return data;
}

static int setup(void **state) {
  char err[256];
  char path[128];
  snprintf(dir, sizeof dir, "/tmp/cdnca-test-log-XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/a.log", dir);
  log_init("test", LOG_TEXT, LOG_INFO);
  saved_stderr = dup(STDERR_FILENO);
  assert_int_equal(log_open_file(path, err, sizeof err), 0);
  return 0;
}

static int teardown(void **state) {
  char path[128];
  if (saved_stderr >= 0) dup2(saved_stderr, STDERR_FILENO);
  snprintf(path, sizeof path, "%s/a.log", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/a.log.1", dir);
  unlink(path);
  rmdir(dir);
  return 0;
}

static void test_file_and_reopen(void **state) {
  char a[128], b[128], err[256], *text;
  snprintf(a, sizeof a, "%s/a.log", dir);
  snprintf(b, sizeof b, "%s/a.log.1", dir);
  log_info("first line %d", 1);
  assert_int_equal(rename(a, b), 0);
  log_info("still into the renamed file");
  assert_int_equal(log_open_file(a, err, sizeof err), 0);
  log_info("after the reopen");
  text = slurp(b);
  assert_non_null(strstr(text, "first line 1"));
  assert_non_null(strstr(text, "still into the renamed file"));
  assert_null(strstr(text, "after the reopen"));
  free(text);
  text = slurp(a);
  assert_non_null(strstr(text, "test info: test_file_and_reopen: after the reopen\n"));
  free(text);
  /* a path that cannot be opened: an error, logging goes on where it went */
  assert_int_equal(log_open_file("/nonexistent-dir/x.log", err, sizeof err), -1);
  assert_non_null(strstr(err, "/nonexistent-dir/x.log"));
  log_info("kept");
  text = slurp(a);
  assert_non_null(strstr(text, "kept"));
  free(text);
}

static void test_set_level_and_format(void **state) {
  char a[128], *text;
  enum log_level lvl;
  enum log_format fmt;
  snprintf(a, sizeof a, "%s/a.log", dir);
  assert_int_equal(log_level_from_name("debug", &lvl), 0);
  assert_int_equal(lvl, LOG_DEBUG);
  assert_int_equal(log_level_from_name("loud", &lvl), -1);
  assert_int_equal(log_format_from_name("json", &fmt), 0);
  assert_int_equal(fmt, LOG_JSON);
  assert_int_equal(log_format_from_name("xml", &fmt), -1);
  log_debug("hidden at info");
  log_set(LOG_JSON, LOG_DEBUG);
  log_debug("shown at debug");
  log_set(LOG_TEXT, LOG_INFO);
  text = slurp(a);
  assert_null(strstr(text, "hidden at info"));
  assert_non_null(strstr(text, "\"level\":\"debug\",\"prog\":\"test\""));
  assert_non_null(strstr(text, "\"msg\":\"shown at debug\""));
  free(text);
}

static cJSON *fields(void) {
  cJSON *f = cJSON_CreateObject(), *votes;
  cJSON_AddNumberToObject(f, "site_id", 3);
  cJSON_AddStringToObject(f, "site", "shop");
  cJSON_AddNumberToObject(f, "origin_id", 11);
  cJSON_AddStringToObject(f, "to", "unhealthy");
  cJSON_AddStringToObject(f, "error", "HTTP 503 \"Service\" down");
  votes = cJSON_AddObjectToObject(f, "votes");
  cJSON_AddNumberToObject(votes, "failure", 2);
  cJSON_AddBoolToObject(f, "pinned", 0);
  cJSON_AddNullToObject(f, "why");
  return f;
}

static void test_event_text(void **state) {
  char a[128], *text, *line;
  cJSON *f = fields();
  snprintf(a, sizeof a, "%s/a.log", dir);
  log_event(LOG_INFO, "origin.health_changed", f);
  log_event(LOG_DEBUG, "not.written", f); /* below the level */
  cJSON_Delete(f);
  text = slurp(a);
  line = strstr(text, "test info: event=origin.health_changed ");
  assert_non_null(line);
  assert_non_null(strstr(line, " site_id=3 site=shop origin_id=11 to=unhealthy "
                               "error=\"HTTP 503 \\\"Service\\\" down\" votes.failure=2 "
                               "pinned=false why=null\n"));
  assert_null(strstr(text, "not.written"));
  free(text);
}

static void test_event_json(void **state) {
  char a[128], *text, *line, *end;
  cJSON *f = fields(), *j;
  snprintf(a, sizeof a, "%s/a.log", dir);
  log_set(LOG_JSON, LOG_INFO);
  log_event(LOG_WARN, "site.all_levels_unhealthy", f);
  log_set(LOG_TEXT, LOG_INFO);
  cJSON_Delete(f);
  text = slurp(a);
  line = strstr(text, "\"event\":\"site.all_levels_unhealthy\"");
  assert_non_null(line);
  while (line > text && line[-1] != '\n')
    line--;
  end = strchr(line, '\n');
  assert_non_null(end);
  *end = '\0';
  j = cJSON_Parse(line);
  assert_non_null(j);
  assert_string_equal(cJSON_GetObjectItem(j, "level")->valuestring, "warn");
  assert_string_equal(cJSON_GetObjectItem(j, "event")->valuestring, "site.all_levels_unhealthy");
  assert_int_equal(cJSON_GetObjectItem(j, "site_id")->valueint, 3);
  assert_string_equal(cJSON_GetObjectItem(j, "error")->valuestring, "HTTP 503 \"Service\" down");
  assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "votes"), "failure")->valueint, 2);
  cJSON_Delete(j);
  free(text);
}

/* log_every: once per period, the first call at once, whatever the calls in between. */
static void test_log_every(void **state) {
  _Atomic int64_t last = 0;
  (void)state;
  assert_int_equal(log_every(&last, 5000, 1000), 1);
  assert_int_equal(log_every(&last, 5000, 1000), 0);
  assert_int_equal(log_every(&last, 5999, 1000), 0);
  assert_int_equal(log_every(&last, 6000, 1000), 1);
  for (int64_t t = 6001; t < 7000; t++)
    assert_int_equal(log_every(&last, t, 1000), 0);
  assert_int_equal(log_every(&last, 9000, 1000), 1);
  assert_int_equal(log_every(&last, 8000, 1000), 0); /* a clock seen going back: no line */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_file_and_reopen), cmocka_unit_test(test_set_level_and_format),
      cmocka_unit_test(test_event_text),      cmocka_unit_test(test_event_json),
      cmocka_unit_test(test_log_every),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
