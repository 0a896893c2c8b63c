/* sbuf — byte buffers with a forwarding window and body framing between them (sbuf.h). */
#include "sbuf.h"

#include <stdlib.h>
#include <string.h>

/* Re-framed chunked bytes waiting for the peer: one input buffer of data (IN_CAP and UIN_CAP of
 * proxy_types.h, 64 KiB) plus chunk lines. */
#define REFRAME_CAP (65536 + 256)

int sbuf_alloc(struct sbuf *s, size_t cap) {
  if (s->d && s->cap >= cap) return 0;
  char *n = realloc(s->d, cap);
  if (!n) return -1;
  s->d = n;
  s->cap = cap;
  return 0;
}

void sbuf_compact(struct sbuf *s) {
  if (s->sent == 0) return;
  memmove(s->d, s->d + s->sent, s->len - s->sent);
  s->fwd -= s->sent;
  s->len -= s->sent;
  s->sent = 0;
}

void sbuf_reset(struct sbuf *s) {
  s->sent = s->fwd = s->len = 0;
}

void sbuf_release(struct sbuf *s) {
  free(s->d);
  memset(s, 0, sizeof *s);
}

/* Decode chunked bytes of src [fwd, len) and append them to dst (allocated on first use) as
 * canonical chunks when encode, else as plain data; "0\r\n\r\n" closes an encoded body. src's
 * consumed bytes are marked sent (nothing of them is forwarded as is). 1 progress, 0 none
 * (dst full or no input), -1 malformed framing or OOM. */
static int reframe(struct http1_body *b, struct sbuf *src, struct sbuf *dst, int encode) {
  size_t room, n, out;
  long k;
  if (src->fwd >= src->len || b->done) return 0;
  if (sbuf_alloc(dst, REFRAME_CAP) < 0) return -1;
  if (dst->sent == dst->len)
    sbuf_reset(dst);
  else if (dst->len + 1024 > dst->cap)
    sbuf_compact(dst);
  /* room for a chunk line, the data, its CRLF and the last chunk */
  if (dst->cap - dst->len < HTTP1_CHUNK_HEADER_MAX + 2 + sizeof HTTP1_LAST_CHUNK + 1) return 0;
  room = dst->cap - dst->len - (HTTP1_CHUNK_HEADER_MAX + 2 + sizeof HTTP1_LAST_CHUNK);
  n = src->len - src->fwd;
  if (n > room) n = room;
  k = http1_body_feed(b, src->d + src->fwd, n, &out, 1);
  if (k < 0) return -1;
  if (out > 0 && encode) {
    dst->len += http1_chunk_encode(dst->d + dst->len, src->d + src->fwd, out);
  } else if (out > 0) {
    memcpy(dst->d + dst->len, src->d + src->fwd, out);
    dst->len += out;
  }
  if (b->done && encode) {
    memcpy(dst->d + dst->len, HTTP1_LAST_CHUNK, sizeof HTTP1_LAST_CHUNK - 1);
    dst->len += sizeof HTTP1_LAST_CHUNK - 1;
  }
  dst->fwd = dst->len;
  src->fwd += (size_t)k;
  src->sent = src->fwd;
  return k > 0;
}

int sbuf_frame(struct http1_body *b, struct sbuf *src, struct sbuf *dst, int encode) {
  size_t out;
  long k;
  if (b->done || src->fwd >= src->len) return 0;
  if (b->kind == HTTP1_BODY_CHUNKED) return reframe(b, src, dst, encode);
  k = http1_body_feed(b, src->d + src->fwd, src->len - src->fwd, &out, 0);
  if (k < 0) return -1;
  src->fwd += (size_t)k;
  return k > 0;
}
