/* relay — bodies both ways, the end of a proxied response, the tunnel after a 101 (relay.h). */
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "exchange.h"
#include "http1.h"
#include "log.h"
#include "sbuf.h"
#include "upstream.h"
#include "vconn.h"

/* Visitor request finished: pool the origin connection (complete response, nothing unread, the
 * request fully sent), then keep-alive or close. */
static void relay_done(struct vconn *c) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  int reuse = r->up && r->up_keepalive && r->ubody.done && c->uin.fwd == c->uin.len &&
              r->vbody.done && c->in.sent == c->in.fwd && c->bout.sent == c->bout.len &&
              r->uhead_off == r->uhead.len && !r->up_werr && c->plen == 0;
  if (r->up) {
    if (reuse) {
      upstream_pool_put(w->ups, r->up, r->ukey, w->now, w->stopping);
    } else {
      upstream_close(r->up);
    }
    r->up = NULL;
  }
  vconn_pipe_put(c);
  vconn_finish(c, r->status);
  if (c->close_after || !r->rq.keepalive || !r->vbody.done || w->stopping)
    vconn_close(c);
  else
    vconn_next_request(c);
}

/* docs/design.md#the-edge-http-path, Splice: a length-framed response body of at least
 * SPLICE_MIN bytes from a plain origin connection goes to the visitor through a pipe once its
 * head is out and nothing of it waits in uin: the kernel moves the bytes (no copy into or out of
 * user space, fewer calls per MiB). Bytes pass as they are, which only a body that needs no
 * re-framing allows, and at most the bytes left of its Content-Length are taken from the origin:
 * anything after them stays in the socket, where the pool's check for unread bytes finds it. */
#define SPLICE_MIN 65536
#define PIPE_BYTES (1024 * 1024)

static int splice_wanted(const struct vconn *c) {
  const struct req *r = &c->r;
  if (c->spliced) return c->spliced > 0;
  return c->phase == V_RESPONSE && r->up && !r->up->ssl && r->up->fd >= 0 &&
         r->ubody.kind == HTTP1_BODY_LENGTH && !r->ubody.done && !r->rchunked &&
         r->ubody.remaining >= SPLICE_MIN && c->oh.len == 0 && c->uin.sent == c->uin.len;
}

static int pipe_open(struct vconn *c) {
  struct worker *w = c->w;
  if (c->has_pipe) return 0;
  if (w->n_pipes > 0) {
    w->n_pipes--;
    c->pfd[0] = w->pipes[w->n_pipes][0];
    c->pfd[1] = w->pipes[w->n_pipes][1];
  } else {
    if (pipe2(c->pfd, O_CLOEXEC | O_NONBLOCK) < 0) return -1;
    (void)fcntl(c->pfd[1], F_SETPIPE_SZ, PIPE_BYTES); /* else the default 64 KiB */
  }
  c->has_pipe = 1;
  c->plen = 0;
  return 0;
}

/* Origin socket -> pipe (only into an empty pipe: then a short move is never a full pipe, and
 * EAGAIN means the socket is drained), pipe -> visitor. 1 progress, 0 none, -1 closed c. */
static int relay_splice(struct vconn *c) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  struct upconn *u = r->up;
  int prog = 0;
  if (c->plen == 0 && !r->ubody.done && u && u->can_read) {
    size_t want = r->ubody.remaining > PIPE_BYTES ? PIPE_BYTES : (size_t)r->ubody.remaining;
    ssize_t n = splice(u->fd, NULL, c->pfd[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      c->plen = (size_t)n;
      r->ubody.remaining -= (uint64_t)n;
      if (r->ubody.remaining == 0) r->ubody.done = 1;
      r->up_last = w->now;
      prog = 1;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      u->can_read = 0;
    } else if (n < 0 && errno == EINTR) {
      /* again on the next turn */
    } else {
      /* EOF or an error before the Content-Length is complete */
      exchange_truncated(c);
      return -1;
    }
  }
  if (c->plen > 0 && c->can_write) {
    ssize_t n = splice(c->pfd[0], NULL, c->fd, NULL, c->plen, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      c->plen -= (size_t)n;
      r->bytes_out += (uint64_t)n;
      c->last_io = w->now;
      prog = 1; /* a short move: the next one says EAGAIN, which the socket's next edge follows */
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      c->can_write = 0;
    } else if (!(n < 0 && errno == EINTR)) {
      vconn_close(c);
      return -1;
    }
  }
  return prog;
}

int relay_step(struct vconn *c) {
  struct req *r = &c->r;
  struct sbuf *rsrc;
  int prog = 0, rc;
  /* visitor body in */
  if (!r->vbody.done) {
    rc = vconn_read(c);
    if (rc < 0) {
      vconn_close(c);
      return 0;
    }
    prog |= rc;
  }
  rc = sbuf_frame(&r->vbody, &c->in, &c->bout, 1);
  if (rc < 0) {
    if (!r->resp_started)
      vconn_local_error(c, 400, "bad_request", "malformed chunked body", 1);
    else
      vconn_close(c);
    return 1;
  }
  prog |= rc;
  if (splice_wanted(c) && pipe_open(c) < 0) c->spliced = -1; /* no pipe: copied as before */
  if (splice_wanted(c)) {
    c->spliced = 1;
    if (r->up) prog |= exchange_step(c); /* the rest of the request body, if any */
    if (c->closed) return 1;
    rc = relay_splice(c);
    if (rc < 0) return 0;
    prog |= rc;
    if (r->ubody.done && c->plen == 0) {
      relay_done(c);
      return 1;
    }
    return prog;
  }
  if (r->up) prog |= exchange_step(c);
  if (c->closed || (c->phase != V_AWAIT_ORIGIN && c->phase != V_RESPONSE)) return 1;
  /* response framing and out */
  if (c->phase == V_RESPONSE) {
    rc = sbuf_frame(&r->ubody, &c->uin, &c->rout, r->rencode);
    if (rc < 0) {
      log_warn("origin %lld sent malformed chunked framing",
               (long long)r->site->origins[r->oidx].id);
      if (c->oh.len > 0 && c->oh_off == 0 && r->bytes_out == 0) {
        /* nothing of this response reached the visitor yet: a 502 instead of its head */
        c->oh.len = 0;
        vconn_local_error(c, 502, "bad_origin_response",
                          "the origin sent malformed chunked framing", 1);
        return 1;
      }
      vconn_close(c); /* the head is out: only a close tells the visitor */
      return 0;
    }
    prog |= rc;
  }
  rsrc = c->phase != V_RESPONSE ? NULL : r->rchunked ? &c->rout : &c->uin;
  rc = vconn_flush(c, rsrc);
  if (rc < 0) {
    vconn_close(c);
    return 0;
  }
  prog |= rc;
  if (c->phase == V_RESPONSE && r->ubody.done && c->oh.len == 0 && rsrc->sent == rsrc->fwd &&
      (r->rchunked || c->uin.sent == c->uin.fwd)) {
    relay_done(c);
    return 1;
  }
  return prog;
}

/* After a 101: visitor bytes go to the origin as they come (in [sent, fwd)), origin bytes to
 * the visitor (uin [sent, fwd)); when one side has closed and its bytes are delivered, close. */
int relay_tunnel(struct vconn *c) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  struct upconn *u = r->up;
  int prog = 0, rc;
  if (!u) {
    vconn_close(c);
    return 0;
  }
  if (!c->peer_eof) {
    rc = vconn_read(c);
    if (rc < 0 && !c->peer_eof) {
      vconn_close(c);
      return 0;
    }
    prog |= rc > 0;
  }
  c->in.fwd = c->in.len;
  if (c->in.sent < c->in.fwd && u->can_write) {
    ssize_t wr = upstream_write(u, c->in.d + c->in.sent, c->in.fwd - c->in.sent);
    if (wr == -2) {
      vconn_close(c);
      return 0;
    }
    if (wr > 0) {
      c->in.sent += (size_t)wr;
      r->up_last = w->now;
      if (c->in.sent == c->in.len) sbuf_reset(&c->in);
      prog = 1;
    }
  }
  if (!r->up_eof && u->can_read) {
    struct sbuf *b = &c->uin;
    if (b->len == b->cap && b->sent > 0) sbuf_compact(b);
    if (b->len < b->cap) {
      ssize_t rd = upstream_read(u, b->d + b->len, b->cap - b->len);
      if (rd > 0) {
        b->len += (size_t)rd;
        r->up_last = w->now;
        prog = 1;
      } else if (rd == 0 || rd == -2) {
        r->up_eof = 1;
        prog = 1;
      }
    }
  }
  c->uin.fwd = c->uin.len;
  rc = vconn_flush(c, &c->uin);
  if (rc < 0) {
    vconn_close(c);
    return 0;
  }
  prog |= rc;
  if ((r->up_eof && c->oh.len == 0 && c->uin.sent == c->uin.fwd) ||
      (c->peer_eof && c->in.sent == c->in.len)) {
    vconn_close(c);
    return 0;
  }
  return prog;
}
