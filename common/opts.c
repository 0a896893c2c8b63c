/* opts — table-driven flags and JSON config file. */
#include "opts.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

const char *const opts_log_formats[] = {"text", "json", NULL};
const char *const opts_log_levels[] = {"error", "warn", "info", "debug", NULL};

/* Compare a flag or JSON name with a table name, treating '_' and '-' alike. */
static int name_eq(const char *table, const char *given) {
  for (; *table && *given; table++, given++) {
    char a = *table == '_' ? '-' : *table, b = *given == '_' ? '-' : *given;
    if (a != b) return 0;
  }
  return *table == '\0' && *given == '\0';
}

static const struct opt_def *find(const struct opt_def *defs, const char *name) {
  for (; defs->name; defs++)
    if (name_eq(defs->name, name)) return defs;
  return NULL;
}

/* Put one item into the OPT_LIST at p: replacing the list, or appended with '\n'. 0 or -1. */
static int list_put(const struct opt_def *d, char *p, const char *value, int append, char *err,
                    size_t errlen) {
  size_t have = append ? strlen(p) : 0, n = strlen(value);
  if (n == 0 || strchr(value, '\n')) {
    snprintf(err, errlen, "option %s: an empty value or one with a line break", d->name);
    return -1;
  }
  if (have + (have ? 1 : 0) + n >= d->size) {
    snprintf(err, errlen, "option %s: values too long together (max %zu)", d->name, d->size - 1);
    return -1;
  }
  if (have) p[have++] = '\n';
  memcpy(p + have, value, n + 1);
  return 0;
}

static int apply(const struct opt_def *d, void *target, const char *value, char *err,
                 size_t errlen) {
  char *p = (char *)target + d->offset;
  if (d->type == OPT_INT) {
    char *end = NULL;
    long long v;
    errno = 0;
    v = strtoll(value, &end, 10);
    if (errno || !end || *end || end == value || v < d->min || v > d->max) {
      snprintf(err, errlen, "option %s: '%s' is not an integer in [%lld, %lld]", d->name, value,
               (long long)d->min, (long long)d->max);
      return -1;
    }
    *(int64_t *)(void *)p = v;
    return 0;
  }
  if (d->type == OPT_LIST) return list_put(d, p, value, 0, err, errlen);
  if (strlen(value) >= d->size) {
    snprintf(err, errlen, "option %s: value too long (max %zu)", d->name, d->size - 1);
    return -1;
  }
  if (d->type == OPT_ENUM) {
    int ok = 0;
    for (const char *const *c = d->choices; c && *c; c++)
      if (strcmp(*c, value) == 0) ok = 1;
    if (!ok) {
      snprintf(err, errlen, "option %s: '%s' is not one of the allowed values", d->name, value);
      return -1;
    }
  }
  memcpy(p, value, strlen(value) + 1);
  return 0;
}

int opts_defaults(const struct opt_def *defs, void *target) {
  char err[256];
  for (; defs->name; defs++) {
    if (defs->defval) {
      if (apply(defs, target, defs->defval, err, sizeof err) < 0) return -1;
    } else if (defs->type != OPT_INT) {
      ((char *)target + defs->offset)[0] = '\0';
    }
  }
  return 0;
}

int opts_set(const struct opt_def *defs, void *target, const char *name, const char *value,
             char *err, size_t errlen) {
  const struct opt_def *d = find(defs, name);
  if (!d) {
    snprintf(err, errlen, "unknown option '%s'", name);
    return -1;
  }
  return apply(d, target, value, err, errlen);
}

int opts_load_file(const struct opt_def *defs, void *target, const char *path, char *err,
                   size_t errlen) {
  FILE *f = fopen(path, "rb");
  char *data = NULL;
  long n;
  cJSON *root = NULL, *it;
  int ret = -1;

  if (!f) {
    snprintf(err, errlen, "config %s: %s", path, strerror(errno));
    return -1;
  }
  if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || n > 1 << 20 || fseek(f, 0, SEEK_SET) < 0) {
    snprintf(err, errlen, "config %s: unreadable or larger than 1 MiB", path);
    goto out;
  }
  data = malloc((size_t)n + 1);
  if (!data || fread(data, 1, (size_t)n, f) != (size_t)n) {
    snprintf(err, errlen, "config %s: read failed", path);
    goto out;
  }
  root = json_parse(data, (size_t)n);
  if (!cJSON_IsObject(root)) {
    snprintf(err, errlen, "config %s: not a JSON object", path);
    goto out;
  }
  cJSON_ArrayForEach(it, root) {
    const struct opt_def *d = find(defs, it->string);
    char text[64], sub[200];
    const char *value = text;
    if (!d || strcmp(it->string, "config") == 0) {
      snprintf(err, errlen, "config %s: unknown key '%s'", path, it->string);
      goto out;
    }
    if (d->type == OPT_INT) {
      if (!json_is_int(it, d->min, d->max)) {
        snprintf(err, errlen, "config %s: key '%s' must be an integer in [%lld, %lld]", path,
                 it->string, (long long)d->min, (long long)d->max);
        goto out;
      }
      snprintf(text, sizeof text, "%lld", (long long)it->valuedouble);
    } else if (d->type == OPT_LIST && cJSON_IsArray(it)) {
      /* every item a string; an empty array is refused like an empty string */
      const cJSON *el;
      int k = 0;
      cJSON_ArrayForEach(el, it) {
        if (!cJSON_IsString(el) ||
            list_put(d, (char *)target + d->offset, el->valuestring, k > 0, sub, sizeof sub) < 0) {
          if (!cJSON_IsString(el))
            snprintf(sub, sizeof sub, "option %s: every item must be a string", d->name);
          snprintf(err, errlen, "config %s: %s", path, sub);
          goto out;
        }
        k++;
      }
      if (k == 0) {
        snprintf(err, errlen, "config %s: key '%s' is an empty list", path, it->string);
        goto out;
      }
      continue;
    } else if (d->type == OPT_ENUM && cJSON_IsBool(it)) {
      /* a true|false option may be written as a JSON boolean */
      value = cJSON_IsTrue(it) ? "true" : "false";
    } else {
      if (!cJSON_IsString(it)) {
        snprintf(err, errlen, "config %s: key '%s' must be a string", path, it->string);
        goto out;
      }
      value = it->valuestring;
    }
    if (apply(d, target, value, sub, sizeof sub) < 0) {
      snprintf(err, errlen, "config %s: %s", path, sub);
      goto out;
    }
  }
  ret = 0;
out:
  cJSON_Delete(root);
  free(data);
  fclose(f);
  return ret;
}

enum opts_result opts_parse(const struct opt_def *defs, void *target, int argc, char **argv,
                            char *err, size_t errlen) {
  unsigned char seen[256]; /* list options given on the command line already, by row */
  /* first pass: --help, --version, --config */
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return OPTS_HELP;
    if (strcmp(argv[i], "--version") == 0) return OPTS_VERSION;
  }
  for (int i = 1; i < argc; i++) {
    const char *cfg = NULL;
    if (strcmp(argv[i], "--config") == 0) {
      if (i + 1 >= argc) {
        snprintf(err, errlen, "option config: missing value");
        return OPTS_ERROR;
      }
      cfg = argv[i + 1];
    } else if (strncmp(argv[i], "--config=", 9) == 0) {
      cfg = argv[i] + 9;
    }
    if (cfg && opts_load_file(defs, target, cfg, err, errlen) < 0) return OPTS_ERROR;
  }
  memset(seen, 0, sizeof seen);
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *eq, *value;
    const struct opt_def *d;
    char name[64];
    size_t nl;
    if (strncmp(arg, "--", 2) != 0) {
      snprintf(err, errlen, "unexpected argument '%s'", arg);
      return OPTS_ERROR;
    }
    arg += 2;
    eq = strchr(arg, '=');
    nl = eq ? (size_t)(eq - arg) : strlen(arg);
    if (nl >= sizeof name) {
      snprintf(err, errlen, "unknown option '--%s'", arg);
      return OPTS_ERROR;
    }
    memcpy(name, arg, nl);
    name[nl] = '\0';
    if (eq) {
      value = eq + 1;
    } else {
      if (i + 1 >= argc) {
        snprintf(err, errlen, "option %s: missing value", name);
        return OPTS_ERROR;
      }
      value = argv[++i];
    }
    if (strcmp(name, "config") == 0) continue;
    if (!strchr(name, '_') && (d = find(defs, name)) && d->type == OPT_LIST) {
      /* a repeated list flag adds an item; its first one replaces the file's and the default */
      size_t idx = (size_t)(d - defs);
      int again = idx < sizeof seen && seen[idx];
      if (idx < sizeof seen) seen[idx] = 1;
      if (list_put(d, (char *)target + d->offset, value, again, err, errlen) < 0) return OPTS_ERROR;
      continue;
    }
    if (strchr(name, '_') || opts_set(defs, target, name, value, err, errlen) < 0) {
      if (strchr(name, '_')) snprintf(err, errlen, "unknown option '--%s'", name);
      return OPTS_ERROR;
    }
  }
  return OPTS_OK;
}

int opts_take_flag(int *argc, char **argv, const char *flag) {
  int found = 0, j = 1;
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], flag) == 0) {
      found = 1;
      continue;
    }
    argv[j++] = argv[i];
  }
  argv[j] = NULL;
  *argc = j;
  return found;
}

int opts_take_value(int *argc, char **argv, const char *flag, const char **value) {
  size_t fl = strlen(flag);
  int found = 0, j = 1;
  *value = NULL;
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], flag) == 0) {
      if (i + 1 >= *argc) return -1;
      *value = argv[++i];
      found = 1;
      continue;
    }
    if (strncmp(argv[i], flag, fl) == 0 && argv[i][fl] == '=') {
      *value = argv[i] + fl + 1;
      found = 1;
      continue;
    }
    argv[j++] = argv[i];
  }
  argv[j] = NULL;
  *argc = j;
  if (found && !**value) return -1;
  return found;
}

const char *opts_config_path(int argc, char **argv) {
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
      path = argv[++i];
    else if (strncmp(argv[i], "--config=", 9) == 0)
      path = argv[i] + 9;
  }
  return path;
}

int opts_check_readable(const char *option, const char *path, char *err, size_t errlen) {
  struct stat st;
  if (stat(path, &st) < 0 || access(path, R_OK) < 0) {
    snprintf(err, errlen, "option %s: %s: %s", option, path, strerror(errno));
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "option %s: %s is not a regular file", option, path);
    return -1;
  }
  return 0;
}

int opts_check_appendable(const char *option, const char *path, char *err, size_t errlen) {
  struct stat st;
  char dir[1024];
  const char *d;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      snprintf(err, errlen, "option %s: %s is a directory", option, path);
      return -1;
    }
    if (access(path, W_OK) < 0) {
      snprintf(err, errlen, "option %s: %s is not writable: %s", option, path, strerror(errno));
      return -1;
    }
    return 0;
  }
  if (errno != ENOENT) {
    snprintf(err, errlen, "option %s: %s: %s", option, path, strerror(errno));
    return -1;
  }
  snprintf(dir, sizeof dir, "%s", path);
  d = dirname(dir);
  if (access(d, W_OK | X_OK) < 0) {
    snprintf(err, errlen, "option %s: cannot create %s in %s: %s", option, path, d,
             strerror(errno));
    return -1;
  }
  return 0;
}

int opts_listed(const char *const *list, const char *name) {
  for (; list && *list; list++)
    if (name_eq(*list, name)) return 1;
  return 0;
}

const char *opts_changed(const struct opt_def *defs, const void *a, const void *b,
                         const char *const *same_ok) {
  for (; defs->name; defs++) {
    const char *pa = (const char *)a + defs->offset, *pb = (const char *)b + defs->offset;
    int differ;
    if (defs->type == OPT_INT)
      differ = *(const int64_t *)(const void *)pa != *(const int64_t *)(const void *)pb;
    else
      differ = strcmp(pa, pb) != 0;
    if (differ && !opts_listed(same_ok, defs->name)) return defs->name;
  }
  return NULL;
}

void opts_copy(const struct opt_def *defs, void *dst, const void *src, const char *name) {
  for (; defs->name; defs++)
    if (strcmp(defs->name, name) == 0)
      memcpy((char *)dst + defs->offset, (const char *)src + defs->offset,
             defs->type == OPT_INT ? sizeof(int64_t) : defs->size);
}

int opts_start(const struct opt_def *defs, void *target, int argc, char **argv, const char *prog,
               const char *synopsis) {
  char err[512];
  if (opts_defaults(defs, target) < 0) return 2;
  switch (opts_parse(defs, target, argc, argv, err, sizeof err)) {
  case OPTS_HELP:
    opts_usage(defs, prog, synopsis);
    return 0;
  case OPTS_VERSION:
    printf("%s %s\n", prog, CDNCA_VERSION);
    return 0;
  case OPTS_ERROR:
    fprintf(stderr, "%s: %s (see --help)\n", prog, err);
    return 2;
  case OPTS_OK:
    break;
  }
  return -1;
}

void opts_usage(const struct opt_def *defs, const char *prog, const char *synopsis) {
  printf("usage: %s %s\n\noptions (also accepted as keys of the --config JSON file, with '_'):\n",
         prog, synopsis);
  printf("  --config FILE             JSON file with the same keys; flags override it\n");
  for (; defs->name; defs++)
    printf("  --%-24s %s%s%s%s\n", defs->name, defs->help, defs->defval ? " [" : "",
           defs->defval ? defs->defval : "", defs->defval ? "]" : "");
  printf("  --help, --version\n");
}
