/* request — a visitor request head: read, parse, route, first attempt (request.h). */
#include "request.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "attempt.h"
#include "http1.h"
#include "log.h"
#include "proxyproto.h"
#include "rewrite.h"
#include "sitecfg.h"
#include "vconn.h"

/* Take the proxy's newest config snapshot when it changed since the worker took its own. */
static void refresh_cfg(struct worker *w) {
  struct proxy *p = w->p;
  uint64_t g = atomic_load_explicit(&p->cfg_gen, memory_order_acquire);
  struct sitecfg_set *old;
  if (g == w->cfg_gen && w->cfg) return;
  pthread_mutex_lock(&p->cfg_mu);
  old = w->cfg;
  w->cfg = p->cfg ? sitecfg_set_ref(p->cfg) : NULL;
  w->cfg_gen = atomic_load_explicit(&p->cfg_gen, memory_order_acquire);
  pthread_mutex_unlock(&p->cfg_mu);
  sitecfg_set_unref(old);
}

/* Parse the request head of hl bytes and set up proxying (or a local answer). */
static void start_request(struct vconn *c, size_t hl) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  struct http1_msg *m = &w->msg;
  struct rewrite_peer peer;
  int rc;

  r->active = 1;
  r->local_code = NULL;
  r->t_start = w->now;
  r->site = NULL;
  memset(&r->rq, 0, sizeof r->rq);
  r->attempts = r->have_pick = r->status = r->resp_started = 0;
  r->tried = 0;
  r->bytes_out = 0;
  r->stale_retry = r->sent_continue = r->up_eof = 0;
  r->rchunked = r->rencode = 0;
  c->close_after = 0;
  c->in.sent = c->in.fwd = hl;
  c->last_read = w->now;
  http1_body_init(&r->vbody, HTTP1_BODY_NONE, 0);

  rc = http1_parse_request(c->in.d, hl, m);
  if (rc == HTTP1_TOO_MANY_HEADERS) {
    vconn_local_error(c, 431, "header_too_large", "too many request header fields", 1);
    return;
  }
  if (rc != HTTP1_OK) {
    vconn_local_error(c, 400, "bad_request", "malformed request head", 1);
    return;
  }
  peer.addr = c->ip;
  peer.trust = &w->p->trust;
  if (rewrite_request(m, &peer, &r->rq, &r->ubase) < 0) {
    vconn_local_error(c, 502, "internal", "request head too large or out of memory", 1);
    return;
  }
  if (r->rq.status) {
    vconn_local_error(c, r->rq.status, r->rq.code, r->rq.msg, 1);
    return;
  }
  http1_body_init(&r->vbody, r->rq.body, r->rq.body_len);
  refresh_cfg(w);
  r->site = sitecfg_site_ref(sitecfg_lookup(w->cfg, r->rq.host, strlen(r->rq.host)));
  if (!r->site) {
    vconn_local_error(c, 404, "unknown_host", "no site is configured for this host", 0);
    return;
  }
  if (r->rq.expect_continue) {
    if (buf_puts(&c->oh, "HTTP/1.1 100 Continue\r\n\r\n")) {
      vconn_local_error(c, 502, "internal", "out of memory", 1);
      return;
    }
    r->sent_continue = 1;
  }
  c->phase = V_AWAIT_ORIGIN;
  r->up = NULL;
  attempt_start(c);
}

/* A request head over HEAD_MAX: 431 and close. */
static void head_too_large(struct vconn *c) {
  struct req *r = &c->r;
  r->active = 1;
  r->local_code = NULL;
  r->t_start = c->w->now;
  r->site = NULL;
  r->attempts = 0;
  memset(&r->rq, 0, sizeof r->rq);
  http1_body_init(&r->vbody, HTTP1_BODY_NONE, 0);
  vconn_local_error(c, 431, "header_too_large", "request head larger than 32 KiB", 1);
}

int request_step(struct vconn *c) {
  size_t hl = http1_head_end(c->in.d ? c->in.d : "", c->in.len, &c->head_scan);
  int rd;
  if (hl) {
    if (hl > HEAD_MAX)
      head_too_large(c);
    else
      start_request(c, hl);
    return 1;
  }
  if (c->in.len >= HEAD_MAX) {
    head_too_large(c);
    return 1;
  }
  rd = vconn_read(c);
  if (rd < 0) {
    vconn_close(c);
    return 0;
  }
  /* draining: a keep-alive connection with no next request closes (docs/design.md, Restarts
     and upgrades); one whose bytes arrived gets its answer, with Connection: close */
  if (c->w->stopping && c->in.len == 0 && !c->head_start) {
    vconn_close(c);
    return 0;
  }
  return rd;
}

void request_proxy_refused(struct vconn *c, enum pp_error why, const char *detail) {
  struct proxy *p = c->w->p;
  static const char *const words[PPE__N] = {"missing", "malformed", "incomplete"};
  CINC(c->w->ctr.pp_errors[why]);
  /* at most one line a second, whatever a visitor sends */
  if (log_every(&p->last_pp_log, c->w->now, 1000))
    log_warn("PROXY header %s from %s: %s; connection closed (further ones for a second are only "
             "counted)",
             words[why], c->ip, detail);
}

int request_proxy_step(struct vconn *c) {
  struct pp_result res;
  size_t used = 0;
  enum pp_status st;
  int rd;
  if (c->in.len == 0) {
    /* a fresh connection gets its request served while draining (its header timeout holds) */
    rd = vconn_read(c);
    if (rd < 0) {
      request_proxy_refused(c, PPE_INCOMPLETE, "closed before a whole header");
      vconn_close(c);
      return 0;
    }
    if (rd == 0) return 0;
  }
  st = pp_feed(c->pp, (const unsigned char *)c->in.d, c->in.len, &used, &res);
  if (st == PP_MORE) { /* every byte is in the reader (at most PP_KEEP of them are kept) */
    c->in.len = 0;
    return 1;
  }
  if (st != PP_DONE) {
    request_proxy_refused(c, st == PP_NOT_PROXY ? PPE_MISSING : PPE_MALFORMED, c->pp->why);
    vconn_close(c);
    return 0;
  }
  /* the bytes after the header are the first request's */
  memmove(c->in.d, c->in.d + used, c->in.len - used);
  c->in.len -= used;
  if (res.has_addr) memcpy(c->ip, res.src, strlen(res.src) + 1); /* 46 bytes at most */
  free(c->pp);
  c->pp = NULL;
  c->phase = V_HEAD;
  c->head_scan = 0;
  return 1;
}
