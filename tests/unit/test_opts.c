/* Unit tests for common/opts: defaults, flags, the JSON file, errors naming the option. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "opts.h"

struct cfg {
  char listen[64];
  int64_t interval;
  char fmt[8];
};

static const char *const fmts[] = {"text", "json", NULL};
static const struct opt_def defs[] = {
    {"listen", OPT_STR, offsetof(struct cfg, listen), 64, 0, 0, NULL, "127.0.0.1:1", "listen"},
    {"probe-interval-ms", OPT_INT, offsetof(struct cfg, interval), 0, 100, 1000000, NULL, "30000",
     "iv"},
    {"log-format", OPT_ENUM, offsetof(struct cfg, fmt), 8, 0, 0, fmts, "text", "fmt"},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};

static enum opts_result run(struct cfg *c, char *err, int argc, char **argv) {
  memset(c, 0, sizeof *c);
  assert_int_equal(opts_defaults(defs, c), 0);
  return opts_parse(defs, c, argc, argv, err, 256);
}

static void test_defaults_and_flags(void **state) {
  struct cfg c;
  char err[256];
  char *argv[] = {"x", "--probe-interval-ms", "500", "--listen=127.0.0.2:9", NULL};
  assert_int_equal(run(&c, err, 1, argv), OPTS_OK);
  assert_string_equal(c.listen, "127.0.0.1:1");
  assert_int_equal(c.interval, 30000);
  assert_int_equal(run(&c, err, 4, argv), OPTS_OK);
  assert_int_equal(c.interval, 500);
  assert_string_equal(c.listen, "127.0.0.2:9");
}

static void test_errors(void **state) {
  struct cfg c;
  char err[256];
  char *a1[] = {"x", "--probe-interval-ms", "5", NULL};
  char *a2[] = {"x", "--nope", "1", NULL};
  char *a3[] = {"x", "--log-format", "xml", NULL};
  char *a4[] = {"x", "--probe-interval-ms", "12abc", NULL};
  char *a5[] = {"x", "--listen", NULL};
  char *a6[] = {"x", "--help", NULL};
  char *a7[] = {"x", "--version", NULL};
  assert_int_equal(run(&c, err, 3, a1), OPTS_ERROR);
  assert_non_null(strstr(err, "probe-interval-ms"));
  assert_int_equal(run(&c, err, 3, a2), OPTS_ERROR);
  assert_non_null(strstr(err, "nope"));
  assert_int_equal(run(&c, err, 3, a3), OPTS_ERROR);
  assert_non_null(strstr(err, "log-format"));
  assert_int_equal(run(&c, err, 3, a4), OPTS_ERROR);
  assert_int_equal(run(&c, err, 2, a5), OPTS_ERROR);
  assert_int_equal(run(&c, err, 2, a6), OPTS_HELP);
  assert_int_equal(run(&c, err, 2, a7), OPTS_VERSION);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_config_file(void **state) {
  struct cfg c;
  char err[256], path[] = "/tmp/cdnca-opts-XXXXXX";
  int fd = mkstemp(path);
  char *argv[] = {"x", "--config", path, "--log-format", "json", NULL};
  assert_true(fd >= 0);
  close(fd);
  write_file(
      path, "{\"probe_interval_ms\": 1500, \"log_format\": \"text\", \"listen\": \"127.0.0.3:5\"}");
  assert_int_equal(run(&c, err, 5, argv), OPTS_OK);
  assert_int_equal(c.interval, 1500);
  assert_string_equal(c.listen, "127.0.0.3:5");
  assert_string_equal(c.fmt, "json"); /* the flag overrides the file */
  write_file(path, "{\"probe_interval_ms\": \"fast\"}");
  assert_int_equal(run(&c, err, 3, argv), OPTS_ERROR);
  assert_non_null(strstr(err, "probe_interval_ms"));
  write_file(path, "{\"surprise\": 1}");
  assert_int_equal(run(&c, err, 3, argv), OPTS_ERROR);
  assert_non_null(strstr(err, "surprise"));
  write_file(path, "not json");
  assert_int_equal(run(&c, err, 3, argv), OPTS_ERROR);
  unlink(path);
  assert_int_equal(run(&c, err, 3, argv), OPTS_ERROR);
}

/* A list option: defaults, a repeated flag adding items (its first replacing the file's), the
 * file's string or array; empty items, line breaks and overflow refused with the option named. */
struct lcfg {
  char addrs[32];
};
static const struct opt_def ldefs[] = {
    {"addr", OPT_LIST, offsetof(struct lcfg, addrs), 32, 0, 0, NULL, "a:1", "addresses"},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};

static enum opts_result lrun(struct lcfg *c, char *err, int argc, char **argv) {
  memset(c, 0, sizeof *c);
  assert_int_equal(opts_defaults(ldefs, c), 0);
  return opts_parse(ldefs, c, argc, argv, err, 256);
}

static void test_list(void **state) {
  struct lcfg c;
  char err[256], path[] = "/tmp/cdnca-opts-XXXXXX";
  int fd = mkstemp(path);
  char *a1[] = {"x", NULL};
  char *a2[] = {"x", "--addr", "b:2", "--addr=c:3", NULL};
  char *a3[] = {"x", "--config", path, NULL};
  char *a4[] = {"x", "--config", path, "--addr", "d:4", NULL};
  char *a5[] = {"x", "--addr", "", NULL};
  char *a6[] = {"x", "--addr", "0123456789", "--addr", "0123456789", "--addr", "0123456789", NULL};
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(lrun(&c, err, 1, a1), OPTS_OK);
  assert_string_equal(c.addrs, "a:1");
  assert_int_equal(lrun(&c, err, 4, a2), OPTS_OK);
  assert_string_equal(c.addrs, "b:2\nc:3");
  write_file(path, "{\"addr\": [\"e:5\", \"f:6\"]}");
  assert_int_equal(lrun(&c, err, 3, a3), OPTS_OK);
  assert_string_equal(c.addrs, "e:5\nf:6");
  assert_int_equal(lrun(&c, err, 5, a4), OPTS_OK);
  assert_string_equal(c.addrs, "d:4");
  write_file(path, "{\"addr\": \"g:7\"}");
  assert_int_equal(lrun(&c, err, 3, a3), OPTS_OK);
  assert_string_equal(c.addrs, "g:7");
  write_file(path, "{\"addr\": []}");
  assert_int_equal(lrun(&c, err, 3, a3), OPTS_ERROR);
  assert_non_null(strstr(err, "addr"));
  write_file(path, "{\"addr\": [\"a\", 1]}");
  assert_int_equal(lrun(&c, err, 3, a3), OPTS_ERROR);
  write_file(path, "{\"addr\": [\"a\\nb\"]}");
  assert_int_equal(lrun(&c, err, 3, a3), OPTS_ERROR);
  assert_int_equal(lrun(&c, err, 3, a5), OPTS_ERROR);
  assert_non_null(strstr(err, "addr"));
  assert_int_equal(lrun(&c, err, 7, a6), OPTS_ERROR);
  assert_non_null(strstr(err, "too long"));
  unlink(path);
}

/* A switch is taken out of argv wherever it stands; the rest keeps its order. */
static void test_take_flag(void **state) {
  char *argv[] = {"x", "--check-config", "--listen", "127.0.0.2:9", "--check-config", NULL};
  int argc = 5;
  assert_int_equal(opts_take_flag(&argc, argv, "--check-config"), 1);
  assert_int_equal(argc, 3);
  assert_string_equal(argv[1], "--listen");
  assert_string_equal(argv[2], "127.0.0.2:9");
  assert_null(argv[3]);
  assert_int_equal(opts_take_flag(&argc, argv, "--check-config"), 0);
  assert_int_equal(argc, 3);
}

/* A flag with a value is taken out in both spellings; the last one wins; a missing value is -1. */
static void test_take_value(void **state) {
  char *argv[] = {"x", "--export", "a.json", "--db", "d", "--export=b.json", NULL};
  char *bare[] = {"x", "--db", "d", "--export", NULL};
  char *empty[] = {"x", "--import=", NULL};
  const char *v;
  int argc = 6;
  (void)state;
  assert_int_equal(opts_take_value(&argc, argv, "--export", &v), 1);
  assert_string_equal(v, "b.json");
  assert_int_equal(argc, 3);
  assert_string_equal(argv[1], "--db");
  assert_string_equal(argv[2], "d");
  assert_null(argv[3]);
  assert_int_equal(opts_take_value(&argc, argv, "--export", &v), 0);
  assert_null(v);
  argc = 4;
  assert_int_equal(opts_take_value(&argc, bare, "--export", &v), -1);
  argc = 2;
  assert_int_equal(opts_take_value(&argc, empty, "--import", &v), -1);
}

/* Reload: only options outside the reloadable list are named. */
static void test_changed(void **state) {
  struct cfg a, b;
  char err[256];
  const char *const reloadable[] = {"log-format", "probe_interval_ms", NULL};
  char *argv0[] = {"x", NULL};
  char *argv1[] = {"x", "--probe-interval-ms", "500", "--log-format", "json", NULL};
  char *argv2[] = {"x", "--listen", "127.0.0.9:1", NULL};
  assert_int_equal(run(&a, err, 1, argv0), OPTS_OK);
  assert_int_equal(run(&b, err, 1, argv0), OPTS_OK);
  assert_null(opts_changed(defs, &a, &b, reloadable));
  assert_int_equal(run(&b, err, 5, argv1), OPTS_OK);
  assert_null(opts_changed(defs, &a, &b, reloadable));
  assert_string_equal(opts_changed(defs, &a, &b, NULL), "probe-interval-ms");
  assert_int_equal(run(&b, err, 3, argv2), OPTS_OK);
  assert_string_equal(opts_changed(defs, &a, &b, reloadable), "listen");
  /* the option that needs a restart keeps its running value: the next one is named */
  assert_int_equal(run(&b, err, 5, argv1), OPTS_OK);
  opts_copy(defs, &b, &a, "probe-interval-ms");
  assert_string_equal(opts_changed(defs, &a, &b, NULL), "log-format");
  opts_copy(defs, &b, &a, "log-format");
  assert_null(opts_changed(defs, &a, &b, NULL));
  assert_int_equal(opts_listed(reloadable, "probe-interval-ms"), 1);
  assert_int_equal(opts_listed(reloadable, "listen"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_and_flags),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_config_file),
      cmocka_unit_test(test_take_flag),
      cmocka_unit_test(test_take_value),
      cmocka_unit_test(test_changed),
      cmocka_unit_test(test_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
