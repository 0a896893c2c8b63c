/* log — levelled log lines on stderr. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Set once by log_init before threads start; read-only afterwards. */
static const char *log_prog = "cdnca";
static enum log_format log_fmt = LOG_TEXT;
static enum log_level log_max = LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_init(const char *prog, enum log_format fmt, enum log_level max) {
  log_prog = prog;
  log_fmt = fmt;
  log_max = max;
}

int log_enabled(enum log_level lvl) { return lvl <= log_max; }

/* Append s to out as a JSON string body (no quotes), bounded by cap. */
static size_t json_escape(char *out, size_t cap, const char *s) {
  size_t n = 0;
  for (; *s && n + 7 < cap; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      out[n++] = '\\';
      out[n++] = (char)c;
    } else if (c < 0x20) {
      n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
    } else {
      out[n++] = (char)c;
    }
  }
  out[n] = '\0';
  return n;
}

void log_write(enum log_level lvl, const char *func, const char *fmt, ...) {
  char msg[2048], line[4608], ts[64];
  struct timespec now;
  struct tm tm;
  va_list ap;
  int n;

  if (!log_enabled(lvl)) return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);

  clock_gettime(CLOCK_REALTIME, &now);
  gmtime_r(&now.tv_sec, &tm);
  snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
           tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
           tm.tm_sec, now.tv_nsec / 1000000);
  if (log_fmt == LOG_JSON) {
    char esc[4200];
    json_escape(esc, sizeof esc, msg);
    n = snprintf(line, sizeof line,
                 "{\"ts\":\"%s\",\"level\":\"%s\",\"prog\":\"%s\",\"func\":\"%s\","
                 "\"msg\":\"%s\"}\n",
                 ts, level_names[lvl], log_prog, func, esc);
  } else {
    n = snprintf(line, sizeof line, "%s %s %s: %s: %s\n", ts, log_prog,
                 level_names[lvl], func, msg);
  }
  if (n < 0) return;
  if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
  if (write(STDERR_FILENO, line, (size_t)n) < 0) {
    /* nothing sensible left to do */
  }
}
