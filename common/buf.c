/* buf — growable byte buffer. */
#include "buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(struct buf *b, size_t max) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  b->max = max;
}

static int buf_reserve(struct buf *b, size_t extra) {
  size_t need = b->len + extra + 1, ncap;
  char *p;
  if (b->max && b->len + extra > b->max) return -1;
  if (need <= b->cap) return 0;
  ncap = b->cap ? b->cap : 256;
  while (ncap < need)
    ncap *= 2;
  p = realloc(b->data, ncap);
  if (!p) return -1;
  b->data = p;
  b->cap = ncap;
  return 0;
}

int buf_append(struct buf *b, const void *p, size_t n) {
  if (buf_reserve(b, n) < 0) return -1;
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int buf_puts(struct buf *b, const char *s) {
  return buf_append(b, s, strlen(s));
}

int buf_printf(struct buf *b, const char *fmt, ...) {
  va_list ap;
  int n;
  size_t room = b->cap > b->len ? b->cap - b->len : 0;
  /* one pass when the text fits in the room left (the usual case), a second after growing */
  va_start(ap, fmt);
  n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
  va_end(ap);
  if (n < 0) {
    if (room) b->data[b->len] = '\0';
    return -1;
  }
  if ((size_t)n < room && !(b->max && b->len + (size_t)n > b->max)) {
    b->len += (size_t)n;
    return 0;
  }
  if (room) b->data[b->len] = '\0';
  if (buf_reserve(b, (size_t)n) < 0) return -1;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 0;
}

int buf_put_u64(struct buf *b, uint64_t v) {
  char d[20];
  size_t n = 0;
  do {
    d[sizeof d - 1 - n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  return buf_append(b, d + sizeof d - n, n);
}

int buf_put_i64(struct buf *b, int64_t v) {
  if (v < 0) {
    if (buf_append(b, "-", 1)) return -1;
    return buf_put_u64(b, (uint64_t)0 - (uint64_t)v);
  }
  return buf_put_u64(b, (uint64_t)v);
}

char *buf_take(struct buf *b) {
  char *p = b->data;
  if (!p) p = calloc(1, 1);
  b->data = NULL;
  b->len = b->cap = 0;
  return p;
}

void buf_fini(struct buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}
