/* alog — an access-log line buffer owned by one thread: lines are formatted as log_write would
 * write them and written to a descriptor in batches (one write(2) per batch on a regular file),
 * at most flush_ms after the oldest buffered line, when the next line would not fit, and on
 * alog_flush (from any thread: SIGHUP before a log reopen, and at stop). Bounded: cap bytes. */
#ifndef CDNCA_ALOG_H
#define CDNCA_ALOG_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"

struct alog;

/* A buffer of cap bytes (at least 8 KiB) writing to fd (not owned), lines due flush_ms after
 * the oldest one. NULL on OOM. Free with alog_free. */
struct alog *alog_new(int fd, size_t cap, int flush_ms);

/* Write out what is buffered, then free; sets *a to NULL. */
void alog_free(struct alog **a);

/* Buffer one line with msg[0, n) at level lvl from func (formatted as log_write would, now in
 * the real-time clock); now_ms is the caller's monotonic time. Writes the buffer out first when
 * the line does not fit, and after it when the oldest line is due. 0, or -1 when the line is
 * dropped (longer than the whole buffer). Thread-safe against alog_flush. */
int alog_line(struct alog *a, enum log_level lvl, const char *func, const char *msg, size_t n,
              int64_t now_ms);

/* Milliseconds until the buffered lines are due (0: now), or -1 when nothing is buffered. */
int64_t alog_due_in(struct alog *a, int64_t now_ms);

/* Write the buffered lines out when they are due at now_ms. */
void alog_tick(struct alog *a, int64_t now_ms);

/* Write every buffered line out now. Thread-safe. */
void alog_flush(struct alog *a);

/* Lines a failed or cut-short write (ENOSPC, EIO) did not write whole: the rest of the batch is
 * dropped, and the next write to the descriptor starts on a new line, so the cut line cannot join
 * another. Thread-safe. */
uint64_t alog_dropped(struct alog *a);

#endif
