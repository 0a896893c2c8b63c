/* fuzz_opts — libFuzzer target: the option table's two inputs. An input starting with an even
 * byte is a --config JSON file (written to a memfd and read back by path through
 * opts_load_file); an odd one is an argv ('\0'-separated words) for opts_parse. Whatever is
 * accepted must respect the table: integers in range, strings terminated within their arrays,
 * enums one of their choices. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "log.h"
#include "opts.h"

#define MAX_ARGS 24

struct fz_cfg {
  char listen[16];
  int64_t interval_ms;
  int64_t offset;
  int64_t big;
  char format[8];
  char tiny[1];
};

static const char *const formats[] = {"text", "json", NULL};

#define O(f) offsetof(struct fz_cfg, f)
#define S(f) sizeof(((struct fz_cfg *)0)->f)
static const struct opt_def defs[] = {
    {"listen", OPT_STR, O(listen), S(listen), 0, 0, NULL, "127.0.0.1:7400", "address"},
    {"probe-interval-ms", OPT_INT, O(interval_ms), 0, 1, 86400000, NULL, "30000", "interval"},
    {"offset", OPT_INT, O(offset), 0, -1000, 1000, NULL, "-5", "signed"},
    {"big", OPT_INT, O(big), 0, INT64_MIN, INT64_MAX, NULL, NULL, "whole int64 range"},
    {"log-format", OPT_ENUM, O(format), S(format), 0, 0, formats, "text", "format"},
    {"tiny", OPT_STR, O(tiny), S(tiny), 0, 0, NULL, NULL, "only the empty string fits"},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};

static void check_cfg(const struct fz_cfg *c) {
  FUZZ_CHECK(FUZZ_TERMINATED(c->listen));
  FUZZ_CHECK(FUZZ_TERMINATED(c->format));
  FUZZ_CHECK(c->tiny[0] == '\0');
  FUZZ_CHECK(c->interval_ms >= 1 && c->interval_ms <= 86400000);
  FUZZ_CHECK(c->offset >= -1000 && c->offset <= 1000);
  FUZZ_CHECK(strcmp(c->format, "text") == 0 || strcmp(c->format, "json") == 0);
}

static void check_err(const char *err, size_t cap) {
  FUZZ_CHECK(memchr(err, '\0', cap) != NULL);
  FUZZ_CHECK(err[0] != '\0');
}

/* The bytes as a config file, read back through its path. */
static void run_file(const unsigned char *data, size_t size) {
  struct fz_cfg c;
  char err[256], path[64];
  int fd = memfd_create("fuzz_opts", 0);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(size == 0 || write(fd, data, size) == (ssize_t)size);
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  memset(&c, 0x5a, sizeof c);
  FUZZ_CHECK(opts_defaults(defs, &c) == 0);
  err[0] = '\0';
  if (opts_load_file(defs, &c, path, err, sizeof err) == 0)
    check_cfg(&c);
  else
    check_err(err, sizeof err);
  close(fd);
}

/* The bytes as argv words; --config is left out so no path from the input is ever opened. */
static void run_argv(const unsigned char *data, size_t size) {
  struct fz_cfg c;
  char err[256], *copy, *argv[MAX_ARGS + 1];
  int argc = 0;
  size_t i = 0;
  copy = malloc(size + 1);
  FUZZ_CHECK(copy != NULL);
  if (size) memcpy(copy, data, size);
  copy[size] = '\0';
  argv[argc++] = "fuzz_opts";
  while (i <= size && argc < MAX_ARGS) {
    char *w = copy + i;
    size_t n = strlen(w);
    if (strncmp(w, "--config", 8) != 0) argv[argc++] = w;
    i += n + 1;
  }
  argv[argc] = NULL;
  memset(&c, 0x5a, sizeof c);
  FUZZ_CHECK(opts_defaults(defs, &c) == 0);
  err[0] = '\0';
  switch (opts_parse(defs, &c, argc, argv, err, sizeof err)) {
  case OPTS_OK:
    check_cfg(&c);
    break;
  case OPTS_ERROR:
    check_err(err, sizeof err);
    break;
  case OPTS_HELP:
  case OPTS_VERSION:
    break;
  }
  free(copy);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  log_init("fuzz_opts", LOG_TEXT, LOG_ERROR);
  return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1)
    run_argv(data + 1, size - 1);
  else
    run_file(data + 1, size - 1);
  return 0;
}
