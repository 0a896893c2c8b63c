/* log — levelled log lines on stderr (or a log file dup2'ed onto it). */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
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

void log_set_names(const char *format, const char *level) {
  enum log_level lvl = LOG_INFO;
  enum log_format fmt = LOG_TEXT;
  if (log_level_from_name(level, &lvl) < 0) lvl = LOG_INFO;
  if (log_format_from_name(format, &fmt) < 0) fmt = LOG_TEXT;
  log_set(fmt, lvl);
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

static struct log_stream stderr_stream = LOG_STREAM_INIT;

struct log_stream *log_stderr_stream(void) {
  return &stderr_stream;
}

/* Write lead (0 or 1: a newline first) and p[0, n) with writev, a short write continued. The bytes
   of p written; *lead_done is set when the newline went out. */
static size_t write_piece(int fd, size_t lead, const char *p, size_t n, int *lead_done,
                          int *failed) {
  size_t sent = 0, total = lead + n;
  while (sent < total) {
    struct iovec iov[2];
    int k = 0;
    size_t from = sent > lead ? sent - lead : 0;
    if (sent < lead) iov[k++] = (struct iovec){.iov_base = (void *)"\n", .iov_len = 1};
    iov[k++] = (struct iovec){.iov_base = (void *)(p + from), .iov_len = n - from};
    ssize_t w = writev(fd, iov, k);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *failed = 1;
      break;
    }
    sent += (size_t)w;
  }
  *lead_done = sent >= lead;
  return sent > lead ? sent - lead : 0;
}

size_t log_stream_write(struct log_stream *s, int fd, const char *p, size_t n, size_t piece) {
  size_t off = 0, dropped = 0;
  int failed = 0, lead_done = 0;
  pthread_mutex_lock(&s->mu);
  size_t lead = s->torn ? 1 : 0;
  while (off < n && !failed) {
    size_t end = n;
    if (piece && lead + (n - off) > piece) {
      size_t lim = off + (piece > lead + 1 ? piece - lead : 1);
      end = off;
      for (size_t i = off; i < lim; i++)
        if (p[i] == '\n') end = i + 1;
      if (end == off) end = lim; /* a line longer than a piece: as is */
    }
    size_t wrote = write_piece(fd, lead, p + off, end - off, &lead_done, &failed);
    if (lead_done) lead = 0; /* the cut line is ended: later pieces go on from a line's start */
    off += wrote;
  }
  /* torn: a line of p cut, or the newline owed for an earlier cut still not written */
  s->torn = off > 0 ? p[off - 1] != '\n' : lead > 0;
  for (size_t i = off; i < n; i++)
    if (p[i] == '\n') dropped++;
  if (off < n && p[n - 1] != '\n') dropped++;
  pthread_mutex_unlock(&s->mu);
  return dropped;
}

int log_enabled(enum log_level lvl) {
  return (int)lvl <= atomic_load(&log_max);
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
  (void)log_stream_write(&stderr_stream, STDERR_FILENO, line, n, 0);
}

/* Append n bytes of p at out[*len] if they fit below cap. */
static int app(char *out, size_t cap, size_t *len, const char *p, size_t n) {
  if (n > cap - *len) return -1;
  memcpy(out + *len, p, n);
  *len += n;
  return 0;
}

/* Append msg[0, n) JSON-escaped, at most ESC_MAX bytes of escaped text (as json_escape). */
#define ESC_MAX 4200
static int app_escaped(char *out, size_t cap, size_t *len, const char *msg, size_t n) {
  size_t k = 0, start = *len;
  for (size_t i = 0; i < n && msg[i] && k + 7 < ESC_MAX; i++) {
    unsigned char c = (unsigned char)msg[i];
    char e[8];
    size_t el = 1;
    if (c == '"' || c == '\\') {
      e[0] = '\\';
      e[1] = (char)c;
      el = 2;
    } else if (c < 0x20) {
      el = (size_t)snprintf(e, sizeof e, "\\u%04x", c);
    } else {
      e[0] = (char)c;
    }
    if (app(out, cap, len, e, el) < 0) {
      *len = start;
      return -1;
    }
    k += el;
  }
  return 0;
}

int log_format_line(char *out, size_t cap, size_t *len, struct log_tscache *tc, enum log_level lvl,
                    const char *func, const char *msg, size_t msglen) {
  struct timespec now;
  char ms[8];
  size_t n = *len;
  const char *lv = level_names[lvl];
  clock_gettime(CLOCK_REALTIME, &now);
  if (tc->sec != (long long)now.tv_sec) {
    struct tm tm;
    time_t sec = now.tv_sec;
    gmtime_r(&sec, &tm);
    snprintf(tc->text, sizeof tc->text, "%04d-%02d-%02dT%02d:%02d:%02d.", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    tc->sec = (long long)now.tv_sec;
  }
  {
    long m = now.tv_nsec / 1000000;
    ms[0] = (char)('0' + m / 100);
    ms[1] = (char)('0' + m / 10 % 10);
    ms[2] = (char)('0' + m % 10);
    ms[3] = 'Z';
  }
  if (msglen > 2047) msglen = 2047;
  if (atomic_load(&log_fmt) == LOG_JSON) {
    if (app(out, cap, &n, "{\"ts\":\"", 7) || app(out, cap, &n, tc->text, strlen(tc->text)) ||
        app(out, cap, &n, ms, 4) || app(out, cap, &n, "\",\"level\":\"", 11) ||
        app(out, cap, &n, lv, strlen(lv)) || app(out, cap, &n, "\",\"prog\":\"", 10) ||
        app(out, cap, &n, log_prog, strlen(log_prog)) || app(out, cap, &n, "\",\"func\":\"", 10) ||
        app(out, cap, &n, func, strlen(func)) || app(out, cap, &n, "\",\"msg\":\"", 9) ||
        app_escaped(out, cap, &n, msg, msglen) || app(out, cap, &n, "\"}\n", 3))
      return -1;
  } else {
    if (app(out, cap, &n, tc->text, strlen(tc->text)) || app(out, cap, &n, ms, 4) ||
        app(out, cap, &n, " ", 1) || app(out, cap, &n, log_prog, strlen(log_prog)) ||
        app(out, cap, &n, " ", 1) || app(out, cap, &n, lv, strlen(lv)) ||
        app(out, cap, &n, ": ", 2) || app(out, cap, &n, func, strlen(func)) ||
        app(out, cap, &n, ": ", 2) || app(out, cap, &n, msg, strnlen(msg, msglen)) ||
        app(out, cap, &n, "\n", 1))
      return -1;
  }
  *len = n;
  return 0;
}

void log_write(enum log_level lvl, const char *func, const char *fmt, ...) {
  char msg[2048], line[4608];
  struct log_tscache tc = {.sec = -1};
  size_t n = 0;
  va_list ap;

  if (!log_enabled(lvl)) return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (log_format_line(line, sizeof line, &n, &tc, lvl, func, msg, strlen(msg)) < 0) return;
  (void)log_stream_write(&stderr_stream, STDERR_FILENO, line, n, 0);
}

int log_every(_Atomic int64_t *last, int64_t now, int64_t every_ms) {
  int64_t prev = atomic_load_explicit(last, memory_order_relaxed);
  if (now - prev < every_ms) return 0;
  return atomic_compare_exchange_strong(last, &prev, now);
}
