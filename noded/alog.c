/* alog — per-thread access-log buffer, written in batches (see alog.h). */
#include "alog.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ALOG_MIN_CAP 8192

struct alog {
  pthread_mutex_t mu;
  int fd;
  int flush_ms;
  char *d;
  size_t cap, len;
  int64_t first_ms; /* monotonic time of the oldest buffered line */
  struct log_tscache tc;
  struct log_stream own;     /* fd's stream, unless fd is stderr (shared with the log) */
  struct log_stream *stream; /* &own, or log_stderr_stream() */
  _Atomic uint64_t dropped;  /* lines a failed or cut-short write did not write whole */
};

struct alog *alog_new(int fd, size_t cap, int flush_ms) {
  struct alog *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  if (cap < ALOG_MIN_CAP) cap = ALOG_MIN_CAP;
  if (!(a->d = malloc(cap))) {
    free(a);
    return NULL;
  }
  pthread_mutex_init(&a->mu, NULL);
  a->fd = fd;
  a->cap = cap;
  a->flush_ms = flush_ms > 0 ? flush_ms : 0;
  a->tc.sec = -1;
  a->own = (struct log_stream)LOG_STREAM_INIT;
  a->stream = fd == STDERR_FILENO ? log_stderr_stream() : &a->own;
  return a;
}

/* Write the buffer out with a->mu held. A regular file (O_APPEND) takes the whole batch in one
 * write; a pipe or socket (the journal) gets pieces of whole lines of at most PIPE_BUF bytes, so
 * other threads' lines are never interleaved into one of ours. A write cut short drops the rest
 * of the batch (counted) and leaves the stream torn: the next write there starts on a new line. */
static void flush_locked(struct alog *a) {
  struct stat st;
  if (a->len == 0) return;
  size_t piece = fstat(a->fd, &st) == 0 && S_ISREG(st.st_mode) ? 0 : PIPE_BUF;
  size_t dropped = log_stream_write(a->stream, a->fd, a->d, a->len, piece);
  if (dropped) atomic_fetch_add_explicit(&a->dropped, dropped, memory_order_relaxed);
  a->len = 0;
}

uint64_t alog_dropped(struct alog *a) {
  return atomic_load_explicit(&a->dropped, memory_order_relaxed);
}

void alog_flush(struct alog *a) {
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  flush_locked(a);
  pthread_mutex_unlock(&a->mu);
}

void alog_free(struct alog **ap) {
  struct alog *a = ap ? *ap : NULL;
  if (!a) return;
  alog_flush(a);
  pthread_mutex_destroy(&a->mu);
  free(a->d);
  free(a);
  *ap = NULL;
}

int alog_line(struct alog *a, enum log_level lvl, const char *func, const char *msg, size_t n,
              int64_t now_ms) {
  int rc = 0;
  pthread_mutex_lock(&a->mu);
  size_t before = a->len;
  if (log_format_line(a->d, a->cap, &a->len, &a->tc, lvl, func, msg, n) < 0) {
    flush_locked(a);
    before = 0;
    if (log_format_line(a->d, a->cap, &a->len, &a->tc, lvl, func, msg, n) < 0) rc = -1;
  }
  if (rc == 0 && before == 0) a->first_ms = now_ms;
  if (a->len > 0 && now_ms - a->first_ms >= a->flush_ms) flush_locked(a);
  pthread_mutex_unlock(&a->mu);
  return rc;
}

int64_t alog_due_in(struct alog *a, int64_t now_ms) {
  int64_t left = -1;
  pthread_mutex_lock(&a->mu);
  if (a->len > 0) {
    left = a->first_ms + a->flush_ms - now_ms;
    if (left < 0) left = 0;
  }
  pthread_mutex_unlock(&a->mu);
  return left;
}

void alog_tick(struct alog *a, int64_t now_ms) {
  pthread_mutex_lock(&a->mu);
  if (a->len > 0 && now_ms - a->first_ms >= a->flush_ms) flush_locked(a);
  pthread_mutex_unlock(&a->mu);
}
