/* vconn — a visitor connection's I/O, local answers, request ends and close (vconn.h). */
#include "vconn.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "access.h"
#include "alog.h"
#include "http1.h"
#include "log.h"
#include "proxy_state.h"
#include "rewrite.h"
#include "sbuf.h"
#include "upstream.h"

/* One JSON access line as a log_info line from this function, formatted in the worker's reused
 * buffer and batched in its access-log buffer. */
static void access_default(struct worker *w, const struct proxy_access *a) {
  struct buf *b = &w->logbuf;
  if (!log_enabled(LOG_INFO)) return;
  if (access_json(b, a) == 0) (void)alog_line(w->alog, LOG_INFO, __func__, b->data, b->len, w->now);
}

void vconn_finish(struct vconn *c, int status) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  struct proxy_access a;
  if (!r->active) return;
  if (status < 100 || status > 599) status = 499;
  CINC(w->ctr.codes[status]);
  memset(&a, 0, sizeof a);
  a.site_id = r->site ? r->site->id : 0;
  a.site = r->site ? r->site->name : "";
  a.origin_id = (r->site && r->attempts > 0) ? r->site->origins[r->oidx].id : 0;
  a.client = r->rq.visitor[0] ? r->rq.visitor : c->ip;
  a.level = (r->site && r->attempts > 0) ? r->pick.level : 0;
  a.attempts = r->attempts;
  a.status = status;
  a.duration_ms = w->now - r->t_start;
  a.method = r->rq.method;
  a.host = r->rq.host;
  a.path = r->rq.path;
  a.bytes = r->bytes_out;
  a.error = r->local_code;
  if (w->p->o.access_log)
    w->p->o.access_log(w->p->o.access_arg, &a);
  else
    access_default(w, &a);
  if (r->have_pick && r->site) proxy_state_release(w->p->state, r->site, r->oidx);
  r->have_pick = 0;
  sitecfg_site_unref(r->site);
  r->site = NULL;
  r->active = 0;
}

void vconn_close(struct vconn *c) {
  struct worker *w = c->w;
  if (c->closed) return;
  if (c->r.active) {
    if (c->r.up) {
      upstream_close(c->r.up);
      c->r.up = NULL;
    }
    vconn_finish(c, c->r.resp_started ? c->r.status : 499);
  }
  /* out of the epoll set before the close: while a binary upgrade's child holds a copy of the
     descriptor (between its fork and exec), closing ours alone would leave the registration,
     and its events would name this vconn after it is freed */
  epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->fd = -1;
  c->closed = 1;
  if (c->prev)
    c->prev->next = c->next;
  else
    w->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  w->n_conns--;
  atomic_fetch_sub_explicit(&w->p->n_conns, 1, memory_order_relaxed);
  c->gnext = w->vgrave;
  w->vgrave = c;
}

/* The visitor body bytes already buffered are parsed and dropped (a local answer ends the
 * body): 0, or -1 when they are malformed. vbody.done tells whether the body is complete. */
static int discard_buffered_body(struct vconn *c) {
  struct req *r = &c->r;
  while (!r->vbody.done && c->in.fwd < c->in.len) {
    size_t out;
    long k = http1_body_feed(&r->vbody, c->in.d + c->in.fwd, c->in.len - c->in.fwd, &out, 1);
    if (k <= 0) return k < 0 ? -1 : 0;
    c->in.fwd += (size_t)k;
  }
  c->in.sent = c->in.fwd;
  return 0;
}

int vconn_conn_header(const struct vconn *c) {
  if (c->close_after) return RW_CONN_CLOSE;
  return c->r.rq.minor == 0 && c->r.rq.keepalive ? RW_CONN_KEEPALIVE : RW_CONN_NONE;
}

/* Queue a JSON error (or any small local) response. The visitor connection closes after it when
 * close_after is set, or when the request body is not complete in what was read
 * (docs/design.md#the-edge-http-path: a local answer ends the body; its bytes are never parsed as a
 * request). */
void vconn_local_error(struct vconn *c, int status, const char *code, const char *msg,
                       int close_after) {
  struct req *r = &c->r;
  if (r->up) {
    upstream_close(r->up);
    r->up = NULL;
  }
  if (!close_after && (discard_buffered_body(c) < 0 || !r->vbody.done)) close_after = 1;
  if (close_after || c->w->stopping || !r->rq.keepalive) c->close_after = 1;
  if (rewrite_local_answer(status, code, msg, vconn_conn_header(c), &c->oh) < 0) c->close_after = 1;
  r->status = status;
  r->local_code = code;
  r->resp_started = 1;
  c->phase = V_LOCAL;
}

void vconn_pipe_put(struct vconn *c) {
  struct worker *w = c->w;
  if (!c->has_pipe) return;
  if (c->plen == 0 && w->n_pipes < PIPE_CACHE) {
    w->pipes[w->n_pipes][0] = c->pfd[0];
    w->pipes[w->n_pipes][1] = c->pfd[1];
    w->n_pipes++;
  } else { /* what a pipe still holds is dropped with it */
    close(c->pfd[0]);
    close(c->pfd[1]);
  }
  c->has_pipe = 0;
  c->plen = 0;
}

void vconn_release_buffers(struct vconn *c) {
  vconn_pipe_put(c);
  sbuf_release(&c->in);
  sbuf_release(&c->uin);
  sbuf_release(&c->bout);
  sbuf_release(&c->rout);
  buf_fini(&c->oh);
  buf_fini(&c->r.ubase);
  buf_fini(&c->r.uhead);
  c->oh_off = 0;
}

void vconn_free(struct vconn *c) {
  vconn_release_buffers(c);
  free(c->pp);
  free(c);
}

/* Start the next request on a keep-alive connection: keep unconsumed bytes and the buffers (a
 * busy connection reuses them; the worker's sweep gives them back once it idles). */
void vconn_next_request(struct vconn *c) {
  size_t left = c->in.len - c->in.fwd;
  if (left && c->in.fwd) memmove(c->in.d, c->in.d + c->in.fwd, left);
  c->in.sent = c->in.fwd = 0;
  c->in.len = left;
  c->head_scan = 0;
  c->oh.len = 0;
  c->oh_off = 0;
  sbuf_reset(&c->uin);
  sbuf_reset(&c->bout);
  sbuf_reset(&c->rout);
  c->spliced = 0;
  c->phase = V_HEAD;
  c->last_io = c->w->now;
  c->head_start = left ? c->w->now : 0;
}

int vconn_flush(struct vconn *c, struct sbuf *body) {
  struct iovec iov[2];
  int n = 0;
  ssize_t wr;
  size_t head_left = c->oh.len - c->oh_off;
  size_t body_left = body ? body->fwd - body->sent : 0;
  struct msghdr mh;
  if (!c->can_write || (head_left == 0 && body_left == 0)) return 0;
  if (head_left) iov[n++] = (struct iovec){c->oh.data + c->oh_off, head_left};
  if (body_left) iov[n++] = (struct iovec){body->d + body->sent, body_left};
  memset(&mh, 0, sizeof mh);
  mh.msg_iov = iov;
  mh.msg_iovlen = (size_t)n;
  wr = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
  if (wr < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      c->can_write = 0;
      return 0;
    }
    if (errno == EINTR) return 0;
    return -1;
  }
  c->last_io = c->w->now;
  if ((size_t)wr <= head_left) {
    c->oh_off += (size_t)wr;
  } else {
    c->oh_off = c->oh.len;
    body->sent += (size_t)wr - head_left;
    c->r.bytes_out += (size_t)wr - head_left;
  }
  if (c->oh_off == c->oh.len) {
    c->oh.len = 0;
    c->oh_off = 0;
  }
  if (body && body->sent == body->fwd && body->fwd == body->len) sbuf_reset(body);
  if ((size_t)wr < head_left + body_left) c->can_write = 0;
  return 1;
}

int vconn_read(struct vconn *c) {
  ssize_t rd;
  if (!c->can_read) return 0;
  if (!c->in.d && sbuf_alloc(&c->in, IN_INIT) < 0) return -1;
  if (c->in.len == c->in.cap) {
    if (c->in.sent > 0)
      sbuf_compact(&c->in);
    else if (c->in.cap < IN_CAP && sbuf_alloc(&c->in, IN_CAP) < 0)
      return -1;
    if (c->in.len == c->in.cap) return 0;
  }
  rd = recv(c->fd, c->in.d + c->in.len, c->in.cap - c->in.len, 0);
  if (rd > 0) {
    /* a short read drained the socket: the next byte brings a new edge (unless the peer's FIN
       came with this one, which must still be read as EOF) */
    if ((size_t)rd < c->in.cap - c->in.len && !c->hup) c->can_read = 0;
    c->in.len += (size_t)rd;
    c->last_io = c->last_read = c->w->now;
    if (c->phase == V_HEAD && !c->head_start) c->head_start = c->w->now;
    return 1;
  }
  if (rd == 0) {
    c->peer_eof = 1;
    return -1;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    c->can_read = 0;
    return 0;
  }
  if (errno == EINTR) return 0;
  return -1;
}

int vconn_step_local(struct vconn *c) {
  int f = vconn_flush(c, NULL);
  if (f < 0) {
    vconn_close(c);
    return 0;
  }
  if (c->oh.len == 0) {
    vconn_finish(c, c->r.status);
    /* only a complete body lets the connection carry another request */
    if (c->close_after || !c->r.vbody.done) {
      vconn_close(c);
      return 0;
    }
    c->in.sent = c->in.fwd; /* the body bytes are dropped, what follows them is kept */
    vconn_next_request(c);
    return 1;
  }
  return f;
}
