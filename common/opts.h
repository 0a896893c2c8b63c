/* opts — one table of options shared by command-line flags and a JSON config file. */
#ifndef CDNCA_OPTS_H
#define CDNCA_OPTS_H

#include <stddef.h>
#include <stdint.h>

enum opt_type {
  OPT_INT,  /* int64_t at offset, within [min, max] */
  OPT_STR,  /* char[size] at offset */
  OPT_ENUM, /* char[size] at offset, one of choices */
  OPT_LIST, /* char[size] at offset: items joined by '\n'. A repeated flag adds an item (the
               first one on the command line replaces the file's and the default); the file
               takes a string or an array of strings. Items are not empty and hold no '\n'. */
};

struct opt_def {
  const char *name; /* flag name without "--", e.g. "probe-interval-ms"; JSON key uses '_' */
  enum opt_type type;
  size_t offset;              /* into the target struct */
  size_t size;                /* for OPT_STR / OPT_ENUM: capacity of the char array */
  int64_t min, max;           /* for OPT_INT */
  const char *const *choices; /* for OPT_ENUM: NULL-terminated */
  const char *defval;         /* default as text, applied by opts_defaults; NULL = empty */
  const char *help;
};

/* The choices of the logging options both daemons share. */
extern const char *const opts_log_formats[]; /* "text", "json" */
extern const char *const opts_log_levels[];  /* "error", "warn", "info", "debug" */

/* The three logging rows (--log-format, --log-level, --log-file) of a daemon's table, for a config
   struct T with char arrays log_format, log_level and log_file. */
#define OPTS_LOG_ROWS(T)                                                                           \
  {"log-format",     OPT_ENUM, offsetof(T, log_format), sizeof(((T *)0)->log_format), 0, 0,        \
   opts_log_formats, "text",   "text or json"},                                                    \
      {"log-level",     OPT_ENUM, offsetof(T, log_level),      sizeof(((T *)0)->log_level), 0, 0,  \
       opts_log_levels, "info",   "error, warn, info or debug"},                                   \
  {                                                                                                \
    "log-file", OPT_STR, offsetof(T, log_file), sizeof(((T *)0)->log_file), 0, 0, NULL, NULL,      \
        "append log lines to this file, reopened on SIGHUP (empty = stderr)"                       \
  }

enum opts_result { OPTS_OK = 0, OPTS_ERROR = -1, OPTS_HELP = 1, OPTS_VERSION = 2 };

/* Apply every default of the table (terminated by a NULL name) to target. 0 or -1 (bad default). */
int opts_defaults(const struct opt_def *defs, void *target);

/* Parse argv: "--config FILE" (JSON, same keys) is applied first, then flags override it.
   --help / --version return OPTS_HELP / OPTS_VERSION. On error fills err and returns OPTS_ERROR. */
enum opts_result opts_parse(const struct opt_def *defs, void *target, int argc, char **argv,
                            char *err, size_t errlen);

/* A daemon's start: opts_defaults, then opts_parse. -1 when the options are read and the daemon
   goes on; else its exit status: 0 after --help (opts_usage with synopsis) or --version ("prog
   CDNCA_VERSION" on stdout), 2 after a bad default or an error (said on stderr as "prog: …"). */
int opts_start(const struct opt_def *defs, void *target, int argc, char **argv, const char *prog,
               const char *synopsis);

/* Apply one option given as text (name in flag or JSON form). 0, or -1 with err filled. */
int opts_set(const struct opt_def *defs, void *target, const char *name, const char *value,
             char *err, size_t errlen);

/* Apply a JSON object of options from a file; unknown keys and bad values are errors. 0 or -1. */
int opts_load_file(const struct opt_def *defs, void *target, const char *path, char *err,
                   size_t errlen);

/* Remove every argument equal to flag (a switch without a value, e.g. "--check-config") from
   argv, shifting the rest down and updating *argc. Returns 1 when it was there, else 0. */
int opts_take_flag(int *argc, char **argv, const char *flag);

/* Remove every "flag VALUE" and "flag=VALUE" (e.g. "--export FILE") from argv like
   opts_take_flag; *value points at the last value (into argv). Returns 1 when it was there, 0
   when not, -1 when the flag ends argv without a value or the value is empty. */
int opts_take_value(int *argc, char **argv, const char *flag, const char **value);

/* The --config FILE given in argv (the last one), or NULL. Points into argv. */
const char *opts_config_path(int argc, char **argv);

/* Checks of option values that touch the file system, for --check-config: each returns 0, or -1
   with err naming the option. Nothing is created or changed. */
/* path is a readable regular file */
int opts_check_readable(const char *option, const char *path, char *err, size_t errlen);
/* path can be opened for append: an existing writable file, or a writable directory for it */
int opts_check_appendable(const char *option, const char *path, char *err, size_t errlen);

/* Compare two option structs filled from the same table: the name of the first option whose
   value differs and is not listed in same_ok (NULL-terminated flag names), or NULL. Used on
   reload to name the options that need a restart. */
const char *opts_changed(const struct opt_def *defs, const void *a, const void *b,
                         const char *const *same_ok);

/* Copy the value of option name (as opts_changed names it) from src to dst, two structs filled
   from the same table: on reload, an option that needs a restart keeps its running value. */
void opts_copy(const struct opt_def *defs, void *dst, const void *src, const char *name);

/* 1 when the option name is in the NULL-terminated list (flag or JSON form), else 0. */
int opts_listed(const char *const *list, const char *name);

/* Print a usage text for the table to stdout. */
void opts_usage(const struct opt_def *defs, const char *prog, const char *synopsis);

#endif
