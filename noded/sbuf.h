/* sbuf — the edge path's byte buffers with a forwarding window, and body framing between two of
 * them: length- and close-framed bytes are forwarded as they are, chunked bodies are decoded and
 * re-framed (docs/design.md#the-edge-http-path: a peer never receives the other side's framing
 * bytes). No sockets. */
#ifndef CDNCA_SBUF_H
#define CDNCA_SBUF_H

#include <stddef.h>

#include "http1.h"

/* [sent, fwd) ready to be written out; [fwd, len) not yet framed. */
struct sbuf {
  char *d;
  size_t cap, sent, fwd, len;
};

/* Make s hold at least cap bytes (contents kept). 0, or -1 on OOM (s unchanged). */
int sbuf_alloc(struct sbuf *s, size_t cap);

/* Make room at the end by moving [sent, len) to the front. */
void sbuf_compact(struct sbuf *s);

/* Empty s, keeping its memory. */
void sbuf_reset(struct sbuf *s);

/* Give the memory back (an idle connection keeps none). */
void sbuf_release(struct sbuf *s);

/* Frame the bytes of src [fwd, len) as body b: length- or close-framed bytes stay in src (fwd
 * moves past them), chunked ones are re-framed into dst (as canonical chunks when encode, else
 * decoded). 1 progress, 0 none, -1 malformed or OOM. */
int sbuf_frame(struct http1_body *b, struct sbuf *src, struct sbuf *dst, int encode);

#endif
