/* buf — a growable byte buffer, always NUL-terminated. */
#ifndef CDNCA_BUF_H
#define CDNCA_BUF_H

#include <stddef.h>
#include <stdint.h>

struct buf {
  char *data; /* NUL-terminated; NULL while empty and never grown */
  size_t len;
  size_t cap;
  size_t max; /* 0 = unbounded; appends past it fail */
};

/* Initialise an empty buffer with an optional size cap (0 = none). */
void buf_init(struct buf *b, size_t max);

/* Append n bytes; 0 on success, -1 when over max or out of memory. */
int buf_append(struct buf *b, const void *p, size_t n) __attribute__((warn_unused_result));

/* Append a NUL-terminated string; 0 or -1 as buf_append. */
int buf_puts(struct buf *b, const char *s) __attribute__((warn_unused_result));

/* Append printf-formatted text; 0 or -1. */
int buf_printf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), warn_unused_result));

/* Append the decimal digits of v (with a '-' when negative); 0 or -1 as buf_append. */
int buf_put_u64(struct buf *b, uint64_t v) __attribute__((warn_unused_result));
int buf_put_i64(struct buf *b, int64_t v) __attribute__((warn_unused_result));

/* Hand the data to the caller (caller frees); the buffer is left empty. */
char *buf_take(struct buf *b);

/* Free the data and reset. */
void buf_fini(struct buf *b);

#endif
