/* buf — growable byte buffer. */
#include "buf.h"

#include <stdarg.h>
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
  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || buf_reserve(b, (size_t)n) < 0) return -1;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 0;
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
