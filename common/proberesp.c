/* proberesp — a probe's reading of an origin's HTTP/1.x answer. */
#include "proberesp.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void presp_init(struct presp *r, int head_only, int keep) {
  memset(r, 0, sizeof *r);
  r->head_only = head_only ? 1 : 0;
  r->keep = keep ? 1 : 0;
  r->state = PRESP_HEAD;
  buf_init(&r->head, 0);
}

void presp_free(struct presp *r) {
  buf_fini(&r->head);
  free(r->kept);
  r->kept = NULL;
  r->kept_len = 0;
}

static int bad(struct presp *r, const char *why) {
  r->state = PRESP_BAD;
  r->status = 0;
  r->error = why;
  return PRESP_BAD;
}

/* Take a complete head of hl bytes at h: an interim one is skipped, a final one sets the status
 * and the body's framing. Returns the state. */
static int take_head(struct presp *r, const char *h, size_t hl) {
  struct http1_msg m;
  uint64_t len = 0;
  int kind;
  r->head_total += hl;
  if (r->head_total > PRESP_HEAD_MAX) return bad(r, "response head too large");
  if (http1_parse_response(h, hl, &m) != HTTP1_OK) return bad(r, "bad response head");
  /* a probe never asks to upgrade (RFC 9110 §15.2.2: a server must not switch unasked) */
  if (m.status == 101) return bad(r, "unrequested protocol switch (101)");
  if (m.status < 200) return PRESP_HEAD; /* interim: the next head follows */
  if (http1_response_framing(&m, r->head_only, &kind, &len) < 0)
    return bad(r, "bad response framing"); /* the edge answers such a response 502 */
  r->status = m.status;
  http1_body_init(&r->body, (enum http1_body_kind)kind, len);
  r->state = r->body.done ? PRESP_DONE : PRESP_BODY;
  return r->state;
}

/* Body bytes: find the body's end, keep its first bytes when asked. The outcome does not depend
 * on how the bytes were split into pieces: chunked bodies are always decoded so that only
 * payload counts towards PRESP_BODY_MAX, a body over it is cut even when its end came in the
 * same piece, and the payload before malformed framing is kept. */
static int take_body(struct presp *r, char *p, size_t n) {
  while (n > 0 && r->state == PRESP_BODY) {
    size_t out = 0;
    long k = http1_body_feed(&r->body, p, n, &out, 1);
    if (r->keep && r->kept_len < PRESP_KEEP_MAX && out > 0) {
      size_t take = PRESP_KEEP_MAX - r->kept_len;
      if (take > out) take = out;
      if (!r->kept && !(r->kept = malloc(PRESP_KEEP_MAX))) return bad(r, "out of memory");
      memcpy(r->kept + r->kept_len, p, take);
      r->kept_len += take;
    }
    r->body_bytes += out;
    if (k < 0 || r->body_bytes > PRESP_BODY_MAX) {
      r->cut = 1;
      r->state = PRESP_DONE;
    } else if (r->body.done) {
      r->state = PRESP_DONE;
    }
    if (k <= 0) break; /* malformed, or nothing consumed: done */
    p += k;
    n -= (size_t)k;
  }
  return r->state;
}

/* Invariant while in PRESP_HEAD: head_total + head.len <= PRESP_HEAD_MAX. */
int presp_feed(struct presp *r, char *p, size_t n) {
  while (n > 0 && r->state == PRESP_HEAD) {
    size_t hl, room = PRESP_HEAD_MAX - r->head_total - r->head.len, take, before;
    if (r->head.len == 0) {
      /* the common case: a whole head in this piece, read where it lies */
      size_t scan = 0;
      hl = http1_head_end(p, n, &scan);
      if (hl != 0) {
        take_head(r, p, hl);
        p += hl;
        n -= hl;
        continue;
      }
    }
    /* a head split across pieces: gather it, at most up to the limit */
    take = n < room ? n : room;
    if (take == 0) return bad(r, "response head too large");
    before = r->head.len;
    if (buf_append(&r->head, p, take) < 0) return bad(r, "out of memory");
    hl = http1_head_end(r->head.data, r->head.len, &r->scan);
    if (hl == 0) {
      if (take < n) return bad(r, "response head too large");
      return r->state;
    }
    r->head.len = 0; /* its memory stays for a next split head */
    r->scan = 0;
    take_head(r, r->head.data, hl);
    p += hl - before;
    n -= hl - before;
  }
  if (r->state == PRESP_BODY && n > 0) take_body(r, p, n);
  return r->state;
}

int presp_eof(struct presp *r) {
  if (r->state == PRESP_HEAD)
    return bad(r, (r->head_total == 0 && r->head.len == 0) ? "empty reply"
                                                           : "incomplete response head");
  if (r->state == PRESP_BODY) {
    if (r->body.kind != HTTP1_BODY_CLOSE) r->cut = 1;
    r->state = PRESP_DONE;
  }
  return r->state;
}
