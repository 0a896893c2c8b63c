/* log — levelled log lines on stderr (or a log file dup2'ed onto it). */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

/* log_prog is set once by log_init before threads start; format and level change on reload. */
static const char *log_prog = "cdnca";
static atomic_int log_fmt = LOG_TEXT;
static atomic_int log_max = LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const char *const format_names[] = {"text", "json"};

void log_init(const char *prog, enum log_format fmt, enum log_level max) {
  log_prog = prog;
  log_set(fmt, max);
}

void log_set(enum log_format fmt, enum log_level max) {
  atomic_store(&log_fmt, (int)fmt);
  atomic_store(&log_max, (int)max);
}

int log_level_from_name(const char *name, enum log_level *out) {
  for (int i = 0; i < (int)(sizeof level_names / sizeof *level_names); i++)
    if (strcmp(level_names[i], name) == 0) {
      *out = (enum log_level)i;
      return 0;
    }
  return -1;
}

int log_format_from_name(const char *name, enum log_format *out) {
  for (int i = 0; i < (int)(sizeof format_names / sizeof *format_names); i++)
    if (strcmp(format_names[i], name) == 0) {
      *out = (enum log_format)i;
      return 0;
    }
  return -1;
}

int log_open_file(const char *path, char *err, size_t errlen) {
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) {
    snprintf(err, errlen, "log file %s: %s", path, strerror(errno));
    return -1;
  }
  /* dup2 swaps the file behind stderr in one step: a concurrent write lands in one file or the
     other, never nowhere */
  if (fd != STDERR_FILENO && dup2(fd, STDERR_FILENO) < 0) {
    snprintf(err, errlen, "log file %s: dup2: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  if (fd != STDERR_FILENO) close(fd);
  return 0;
}

int log_enabled(enum log_level lvl) {
  return (int)lvl <= atomic_load(&log_max);
}

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

/* The line's timestamp, e.g. 2026-12-03T07:01:56.123Z. */
static void timestamp(char *ts, size_t n) {
  struct timespec now;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &now);
  gmtime_r(&now.tv_sec, &tm);
  snprintf(ts, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000);
}

/* Append text to line at *n (bounded by cap, always NUL-terminated). */
static void put(char *line, size_t cap, size_t *n, const char *text) {
  size_t len = strlen(text);
  if (*n >= cap - 1) return;
  if (len > cap - 1 - *n) len = cap - 1 - *n;
  memcpy(line + *n, text, len);
  *n += len;
  line[*n] = '\0';
}

/* Append one value as text: bare when it is a plain word, else quoted with \" and \\ escaped
   and control bytes dropped. */
static void put_value(char *line, size_t cap, size_t *n, const char *v) {
  int bare = *v != '\0';
  for (const char *p = v; *p; p++)
    if (*p == ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p < 0x20) bare = 0;
  if (bare) {
    put(line, cap, n, v);
    return;
  }
  put(line, cap, n, "\"");
  for (const char *p = v; *p; p++) {
    char c[3] = {*p, 0, 0};
    if ((unsigned char)*p < 0x20) continue;
    if (*p == '"' || *p == '\\') {
      c[0] = '\\';
      c[1] = *p;
    }
    put(line, cap, n, c);
  }
  put(line, cap, n, "\"");
}

/* Append ` key=value` for each member of o, nested objects as prefix.key. */
static void put_fields(char *line, size_t cap, size_t *n, const cJSON *o, const char *prefix) {
  const cJSON *it;
  cJSON_ArrayForEach(it, o) {
    char key[128], num[64];
    if (!it->string) continue;
    snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", it->string);
    if (cJSON_IsObject(it)) {
      put_fields(line, cap, n, it, key);
      continue;
    }
    put(line, cap, n, " ");
    put(line, cap, n, key);
    put(line, cap, n, "=");
    if (cJSON_IsString(it)) {
      put_value(line, cap, n, it->valuestring);
    } else if (cJSON_IsNumber(it)) {
      if (it->valuedouble == (double)(long long)it->valuedouble)
        snprintf(num, sizeof num, "%lld", (long long)it->valuedouble);
      else
        snprintf(num, sizeof num, "%g", it->valuedouble);
      put(line, cap, n, num);
    } else if (cJSON_IsBool(it)) {
      put(line, cap, n, cJSON_IsTrue(it) ? "true" : "false");
    } else if (cJSON_IsNull(it)) {
      put(line, cap, n, "null");
    } else {
      char *arr = cJSON_PrintUnformatted(it);
      put_value(line, cap, n, arr ? arr : "?");
      cJSON_free(arr);
    }
  }
}

void log_event(enum log_level lvl, const char *event, const cJSON *fields) {
  char line[4608], ts[64];
  size_t n = 0;
  if (!log_enabled(lvl)) return;
  timestamp(ts, sizeof ts);
  line[0] = '\0';
  if (atomic_load(&log_fmt) == LOG_JSON) {
    cJSON *o = cJSON_CreateObject();
    char *text = NULL;
    const cJSON *it;
    if (!o) return;
    cJSON_AddStringToObject(o, "ts", ts);
    cJSON_AddStringToObject(o, "level", level_names[lvl]);
    cJSON_AddStringToObject(o, "prog", log_prog);
    cJSON_AddStringToObject(o, "event", event);
    cJSON_ArrayForEach(it, fields) {
      if (it->string && !cJSON_GetObjectItemCaseSensitive(o, it->string))
        cJSON_AddItemToObject(o, it->string, cJSON_Duplicate(it, 1));
    }
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text) return;
    put(line, sizeof line - 1, &n, text);
    cJSON_free(text);
  } else {
    put(line, sizeof line - 1, &n, ts);
    put(line, sizeof line - 1, &n, " ");
    put(line, sizeof line - 1, &n, log_prog);
    put(line, sizeof line - 1, &n, " ");
    put(line, sizeof line - 1, &n, level_names[lvl]);
    put(line, sizeof line - 1, &n, ": event=");
    put_value(line, sizeof line - 1, &n, event);
    put_fields(line, sizeof line - 1, &n, fields, "");
  }
  line[n++] = '\n';
  if (write(STDERR_FILENO, line, n) < 0) {
    /* nothing sensible left to do */
  }
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
  snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000);
  if (atomic_load(&log_fmt) == LOG_JSON) {
    char esc[4200];
    json_escape(esc, sizeof esc, msg);
    n = snprintf(line, sizeof line,
                 "{\"ts\":\"%s\",\"level\":\"%s\",\"prog\":\"%s\",\"func\":\"%s\","
                 "\"msg\":\"%s\"}\n",
                 ts, level_names[lvl], log_prog, func, esc);
  } else {
    n = snprintf(line, sizeof line, "%s %s %s: %s: %s\n", ts, log_prog, level_names[lvl], func,
                 msg);
  }
  if (n < 0) return;
  if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
  if (write(STDERR_FILENO, line, (size_t)n) < 0) {
    /* nothing sensible left to do */
  }
}
