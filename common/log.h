/* log — levelled, printf-checked log lines on stderr (or a log file), as text or JSON. */
#ifndef CDNCA_LOG_H
#define CDNCA_LOG_H

#include <pthread.h>
#include <stdint.h>

#include <stddef.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };
enum log_format { LOG_TEXT = 0, LOG_JSON = 1 };

/* Set the program name, format and most verbose level written (process-wide, call once at start).
 */
void log_init(const char *prog, enum log_format fmt, enum log_level max);

/* Change the format and level while running (SIGHUP reload); thread-safe. */
void log_set(enum log_format fmt, enum log_level max);

/* Send log lines (and anything else written to stderr) to path, opened for append and created
   0640 when missing; called again (SIGHUP) it reopens path, so a rotated file is let go. The
   switch is atomic (dup2 onto stderr): no line is lost or split. 0, or -1 with err filled and
   stderr unchanged. */
int log_open_file(const char *path, char *err, size_t errlen);

/* Parse a level or format name ("error".."debug", "text"/"json") into *out. 0 or -1. */
int log_level_from_name(const char *name, enum log_level *out);
int log_format_from_name(const char *name, enum log_format *out);

/* log_set with the format and level given by name (an unknown name: text, info), as a daemon's
   --log-format and --log-level hold them. */
void log_set_names(const char *format, const char *level);

struct cJSON;

/* Write one structured line for a state change: the event name and the members of fields (a
   JSON object: numbers, strings, booleans, null, nested objects; not consumed). Text format:
   `event=NAME key=value ...` (nested keys as `outer.inner`, values with spaces or quotes
   quoted); JSON format: the fields become members of the line's object next to "event".
   Thread-safe, one write(2). */
void log_event(enum log_level lvl, const char *event, const struct cJSON *fields);

/* 1 when a message at this level would be written. */
int log_enabled(enum log_level lvl);

/* One stream of log lines (a descriptor several threads write whole lines to): torn is set when
   a write to it was cut short inside a line (ENOSPC, EIO, a file size limit), so that the next
   write begins with a newline and the cut line ends there instead of joining the next one. */
struct log_stream {
  pthread_mutex_t mu; /* one writer at a time, so nothing lands between a cut and its newline */
  int torn;
};
#define LOG_STREAM_INIT                                                                            \
  { PTHREAD_MUTEX_INITIALIZER, 0 }

/* stderr's stream, shared by log_write, log_event and noded's access log (which all write to
   stderr, or to the log file dup2'ed onto it). */
struct log_stream *log_stderr_stream(void);

/* Write the whole lines p[0, n) to fd: one writev(2) when piece is 0 (on a file opened O_APPEND,
   atomically), else in pieces of whole lines of at most piece bytes (a line longer than a piece
   as is), a short write continued. When the stream was left torn, the first piece starts with a
   newline. An error stops the writing: the rest is dropped, and if that cut a line the stream is
   left torn. Returns the number of lines not written whole (the cut one included), 0 when all
   were. */
size_t log_stream_write(struct log_stream *s, int fd, const char *p, size_t n, size_t piece);

/* Write one line; never pass secrets. Thread-safe (one write(2) per line, through
   log_stderr_stream). */
void log_write(enum log_level lvl, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The date and time of day of a log line, formatted once per second (one cache per thread). */
struct log_tscache {
  long long sec; /* the second text holds; -1: none yet */
  char text[64]; /* "2026-12-03T07:01:56." */
};

/* Append one line exactly as log_write writes it (timestamp, program, level, func, msg, in the
   current format; msg cut at 2047 bytes) to out[*len, cap), using and refreshing tc. No check of
   the level (log_enabled). 0, or -1 when the line does not fit (nothing appended). */
int log_format_line(char *out, size_t cap, size_t *len, struct log_tscache *tc, enum log_level lvl,
                    const char *func, const char *msg, size_t msglen);

#define log_error(...) log_write(LOG_ERROR, __func__, __VA_ARGS__)
#define log_warn(...)                                                                              \
  do {                                                                                             \
    if (log_enabled(LOG_WARN)) log_write(LOG_WARN, __func__, __VA_ARGS__);                         \
  } while (0)
#define log_info(...)                                                                              \
  do {                                                                                             \
    if (log_enabled(LOG_INFO)) log_write(LOG_INFO, __func__, __VA_ARGS__);                         \
  } while (0)
#define log_debug(...)                                                                             \
  do {                                                                                             \
    if (log_enabled(LOG_DEBUG)) log_write(LOG_DEBUG, __func__, __VA_ARGS__);                       \
  } while (0)

/* 1 when a line of one kind may be logged at now (ms): at most once per every_ms across threads
   (*last holds the time of the last one), so a flood of one event cannot flood the log. */
int log_every(_Atomic int64_t *last, int64_t now, int64_t every_ms);

#endif
