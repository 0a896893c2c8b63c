/* exchange — an attempt's request out and response in, up to the accepted head (exchange.h). */
#include "exchange.h"

#include <string.h>

#include "attempt.h"
#include "drain.h"
#include "http1.h"
#include "log.h"
#include "rewrite.h"
#include "skip.h"
#include "upstream.h"
#include "vconn.h"

/* A 1xx head of hl bytes from the origin: forwarded to an HTTP/1.1 visitor (except a 100 when
 * noded sent its own), then dropped from uin. 0, or -1 on OOM or an invalid Content-Length. */
static int interim_response(struct vconn *c, const struct http1_msg *m, size_t hl) {
  struct req *r = &c->r;
  struct rewrite_resp rs;
  rewrite_response(m, r->rq.is_head, &rs);
  if (rs.bad) return -1;
  if (r->rq.minor >= 1 && !(m->status == 100 && r->sent_continue) &&
      rewrite_response_head(m, &rs, 0, 0, &c->oh) < 0)
    return -1;
  memmove(c->uin.d, c->uin.d + hl, c->uin.len - hl);
  c->uin.len -= hl;
  r->uscan = 0;
  return 0;
}

/* A complete origin head of hl bytes is in uin. */
static void got_response_head(struct vconn *c, size_t hl) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  struct http1_msg *m = &w->msg;
  struct rewrite_resp rs;
  int failed;
  if (http1_parse_response(c->uin.d, hl, m) != HTTP1_OK) {
    attempt_fail(c, AR_IO);
    return;
  }
  if (m->status == 101 && r->rq.upgrade) {
    /* the protocol switch: relay bytes both ways from here on; not an origin failure */
    attempt_done(c, 0);
    rewrite_response(m, 0, &rs);
    r->status = 101;
    r->resp_started = 1;
    r->up_keepalive = 0;
    if (rewrite_response_head(m, &rs, 0, 0, &c->oh) < 0) {
      vconn_close(c);
      return;
    }
    c->uin.sent = hl;
    c->uin.fwd = c->uin.len;
    c->in.fwd = c->in.len; /* bytes the visitor sent after its head belong to the new protocol */
    c->phase = V_TUNNEL;
    return;
  }
  if (m->status == 101) {
    attempt_refused(c, "a protocol switch nobody asked for");
    return;
  }
  if (m->status < 200) {
    if (interim_response(c, m, hl) < 0) attempt_fail(c, AR_IO); /* bad framing or OOM */
    return;
  }
  rewrite_response(m, r->rq.is_head, &rs);
  if (rs.bad) {
    attempt_refused(c, "invalid framing");
    return;
  }
  failed = skip_is_failure(&r->site->retry, 0, m->status);
  if (failed && skip_may_retry(r->attempts, w->now - r->t_start, &r->site->retry, r->rq.idempotent,
                               r->request_sent, r->body_sent)) {
    attempt_fail(c, AR_STATUS);
    return;
  }
  attempt_done(c, failed);
  http1_body_init(&r->ubody, rs.body, rs.body_len);
  r->rchunked = rs.body == HTTP1_BODY_CHUNKED;
  r->rencode = r->rchunked && r->rq.minor >= 1;
  r->up_keepalive = rs.up_keepalive;
  /* draining: the visitor reads Connection: close (docs/design.md, Restarts and upgrades) */
  if (!drain_keepalive(w->stopping, r->rq.keepalive,
                       rs.body == HTTP1_BODY_CLOSE || (r->rchunked && !r->rencode)))
    c->close_after = 1;
  r->status = m->status;
  if (rewrite_response_head(m, &rs, r->rencode, vconn_conn_header(c), &c->oh) < 0) {
    r->status = 502;
    r->up_keepalive = 0;
    vconn_close(c);
    return;
  }
  r->resp_started = 1;
  c->uin.sent = c->uin.fwd = hl;
  c->phase = V_RESPONSE;
}

/* Write the request head, then the body (length-framed bytes from in, re-framed chunks from
 * bout) to the origin. 1 progress, else 0. */
static int send_request(struct vconn *c, struct upconn *u) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  struct sbuf *src = r->vbody.kind == HTTP1_BODY_CHUNKED ? &c->bout : &c->in;
  int prog = 0;
  if (r->uhead_off < r->uhead.len && u->can_write && !r->up_werr) {
    ssize_t wr = upstream_write(u, r->uhead.data + r->uhead_off, r->uhead.len - r->uhead_off);
    if (wr > 0) {
      r->uhead_off += (size_t)wr;
      r->request_sent = 1;
      r->up_last = w->now;
      prog = 1;
    } else if (wr == -2) {
      r->up_werr = 1;
      r->request_sent = 1;
    }
  }
  if (r->uhead_off == r->uhead.len && src->sent < src->fwd && u->can_write && !r->up_werr) {
    ssize_t wr = upstream_write(u, src->d + src->sent, src->fwd - src->sent);
    if (wr > 0) {
      src->sent += (size_t)wr;
      r->body_sent = 1;
      r->up_last = w->now;
      if (src->sent == src->fwd && src->fwd == src->len) sbuf_reset(src);
      prog = 1;
    } else if (wr == -2) {
      r->up_werr = 1;
      r->body_sent = 1;
    }
  }
  return prog;
}

void exchange_truncated(struct vconn *c) {
  struct req *r = &c->r;
  log_warn("origin %lld closed mid-response", (long long)r->site->origins[r->oidx].id);
  r->up_keepalive = 0;
  upstream_close(r->up);
  r->up = NULL;
  vconn_close(c);
}

int exchange_step(struct vconn *c) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  struct upconn *u = r->up;
  int prog = 0;
  if (!u) return 0;
  if (u->st != UP_READY) {
    int st0 = u->st;
    enum up_fail f = upstream_progress(u);
    if (f != UP_OK) {
      attempt_fail(c, f == UP_FAIL_TLS ? AR_TLS : AR_CONNECT);
      return 1;
    }
    if (u->st != st0) {
      r->up_last = w->now;
      prog = 1;
    }
    if (u->st != UP_READY) return prog;
  }
  prog |= send_request(c, u);
  /* response */
  /* a spliced body is read by relay.c */
  if (u->can_read && !c->spliced && (c->phase == V_AWAIT_ORIGIN || !r->ubody.done)) {
    struct sbuf *b = &c->uin;
    ssize_t rd;
    if (b->len == b->cap && b->sent > 0) sbuf_compact(b);
    if (b->len < b->cap) {
      rd = upstream_read(u, b->d + b->len, b->cap - b->len);
      if (rd > 0) {
        b->len += (size_t)rd;
        r->up_last = w->now;
        prog = 1;
      } else if (rd == 0 || rd == -2) {
        if (c->phase == V_AWAIT_ORIGIN) {
          if (b->len == 0 && u->reused && !r->body_sent && !r->stale_retry && r->rq.idempotent) {
            /* a pooled connection the origin had closed: reconnect once, not a failure (only
               for idempotent methods: another request may never be sent twice) */
            r->stale_retry = 1;
            upstream_close(u);
            r->up = NULL;
            attempt_connect(c, 0);
            return 1;
          }
          attempt_fail(c, AR_IO);
          return 1;
        }
        if (r->ubody.kind == HTTP1_BODY_CLOSE && rd == 0) {
          r->ubody.done = 1;
          r->up_keepalive = 0;
          prog = 1;
        } else {
          exchange_truncated(c);
          return 0;
        }
      }
    }
  }
  while (c->phase == V_AWAIT_ORIGIN && r->up == u) {
    size_t hl = http1_head_end(c->uin.d, c->uin.len, &r->uscan);
    if (hl) {
      got_response_head(c, hl); /* an interim head leaves the phase as it is: look again */
      prog = 1;
      continue;
    }
    if (c->uin.len >= HEAD_MAX) {
      attempt_fail(c, AR_IO);
      return 1;
    }
    break;
  }
  return prog;
}
