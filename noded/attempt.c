/* attempt — origin pick, connect, outcome and retry of one visitor request (attempt.h). */
#include "attempt.h"

#include <stdatomic.h>
#include <stdint.h>

#include "clock.h"
#include "log.h"
#include "proxy_state.h"
#include "rewrite.h"
#include "rng.h"
#include "sbuf.h"
#include "skip.h"
#include "upstream.h"
#include "vconn.h"

/* The TLS name and pool key of the current attempt's origin. */
static const char *attempt_tls_name(const struct req *r, char *tmp, size_t cap) {
  const struct sitecfg_origin *o = &r->site->origins[r->oidx];
  return rewrite_tls_name(r->rq.host, o->host_header, tmp, cap);
}

static void attempt_key(const struct req *r, char *key, size_t cap) {
  const struct sitecfg_origin *o = &r->site->origins[r->oidx];
  char tmp[256];
  upstream_key(key, cap, o->https, o->address, o->port, attempt_tls_name(r, tmp, sizeof tmp));
}

static void no_origin_left(struct vconn *c) {
  struct req *r = &c->r;
  if (r->attempts == 0)
    vconn_local_error(c, 502, "no_origin",
                      "the site has no origin on its current or a following level", 0);
  else if (r->last_fail == AR_TARGET)
    vconn_local_error(c, 502, "origin_refused_target",
                      "the origin's address is a refused target: no connection was made", 0);
  else if (r->last_fail == AR_TIMEOUT)
    vconn_local_error(c, 504, "origin_timeout", "no origin answered in time", 0);
  else
    vconn_local_error(c, 502, "origin_unreachable", "no origin could be reached", 0);
}

void attempt_connect(struct vconn *c, int allow_pool) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  const struct sitecfg_origin *o = &r->site->origins[r->oidx];
  char tmp[256];
  struct upconn *u = NULL;
  enum up_fail fail = UP_FAIL_CONNECT;
  r->uhead_off = 0;
  r->request_sent = 0;
  r->up_werr = 0;
  r->uscan = 0;
  c->phase = V_AWAIT_ORIGIN;
  if (sbuf_alloc(&c->uin, UIN_CAP) < 0) {
    vconn_local_error(c, 502, "internal", "out of memory", 1);
    return;
  }
  sbuf_reset(&c->uin);
  /* every connection, new or pooled, goes to an address checked against the refused targets of
     now (docs/design.md#errors-and-limits) */
  if (r->pick.resolved && r->pick.refused) {
    if (log_every(&w->p->last_target_log, w->now, 1000))
      log_warn("site %lld (%s) origin %lld: %s is %s, a refused target: not connected (the "
               "visitor gets 502 unless another origin answers)",
               (long long)r->site->id, r->site->name, (long long)o->id, o->address,
               r->pick.refused);
    attempt_fail(c, AR_TARGET);
    return;
  }
  attempt_key(r, r->ukey, sizeof r->ukey); /* kept for the pool_put at the end */
  if (allow_pool) u = upstream_pool_get(w->ups, r->ukey);
  if (!u && r->pick.resolved)
    u = upstream_connect(w->ups, (const struct sockaddr *)&r->pick.sa, r->pick.salen, o->https,
                         attempt_tls_name(r, tmp, sizeof tmp), &fail);
  if (!u) {
    attempt_fail(c, fail == UP_FAIL_TLS ? AR_TLS : AR_CONNECT);
    return;
  }
  u->owner = c;
  r->up = u;
  r->up_last = w->now;
}

/* A uniform draw in [0, 100) from this thread's generator (seeded at its first draw). */
static int draw100(void) {
  static _Thread_local struct rng r;
  static _Thread_local int seeded;
  if (!seeded) {
    r.s = rng_seed_fresh();
    seeded = 1;
  }
  return (int)rng_below(&r, 100);
}

void attempt_start(struct vconn *c) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  const struct sitecfg_origin *o;
  if (r->attempts == 0) {
    /* docs/design.md, Failback ramp: the split comes before the level's own pick */
    r->start_level = r->site->current_level;
    if (r->site->ramp.from_level) {
      _Atomic int64_t *off = w->p->clock_offset;
      r->start_level =
          proxy_state_start_level(r->site, clock_wall_ms(), off ? atomic_load(off) : 0, draw100());
      if (r->start_level != r->site->current_level)
        CINC(w->ctr.ramp_to);
      else
        CINC(w->ctr.ramp_from);
    }
  }
  if (proxy_state_pick_from(w->p->state, r->site, r->start_level, r->tried, w->now, &r->pick) < 0) {
    no_origin_left(c);
    return;
  }
  r->oidx = r->pick.index;
  r->t_attempt = w->now;
  r->tried |= UINT64_C(1) << r->oidx;
  r->attempts++;
  r->have_pick = 1;
  if (r->pick.fail_open) CINC(w->ctr.fail_open);
  if (r->pick.backup) CINC(w->ctr.backup_picks);
  if (r->attempts > 1) CINC(w->ctr.retries);
  o = &r->site->origins[r->oidx];
  if (rewrite_attempt_head(&r->ubase, o->host_header ? o->host_header : r->rq.host, &r->uhead)) {
    vconn_local_error(c, 502, "internal", "out of memory", 1);
    return;
  }
  /* a new connection for a body (a stale pooled one could not be retried) or a protocol switch */
  attempt_connect(c, !r->rq.has_body && !r->rq.upgrade);
}

void attempt_fail(struct vconn *c, int kind) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  int64_t elapsed = w->now - r->t_start;
  CINC(w->ctr.attempts[kind]);
  if (r->have_pick) {
    if (proxy_state_record(w->p->state, r->site, r->oidx, w->now, 1)) CINC(w->ctr.skips);
    r->have_pick = 0;
  }
  if (r->up) {
    upstream_close(r->up);
    r->up = NULL;
  }
  r->last_fail = kind;
  if (skip_may_retry(r->attempts, elapsed, &r->site->retry, r->rq.idempotent, r->request_sent,
                     r->body_sent)) {
    attempt_start(c);
    return;
  }
  if (kind == AR_TARGET)
    vconn_local_error(c, 502, "origin_refused_target",
                      "the origin's address is a refused target: no connection was made", 0);
  else if (elapsed > r->site->retry.retry_budget_ms || kind == AR_TIMEOUT)
    vconn_local_error(
        c, 504, "origin_timeout",
        kind == AR_TIMEOUT ? "the origin did not answer in time" : "the retry budget ran out", 0);
  else
    vconn_local_error(c, 502, "origin_unreachable", "no origin could be reached", 0);
}

void attempt_done(struct vconn *c, int failed) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  CINC(w->ctr.attempts[failed ? AR_STATUS : AR_SUCCESS]);
  if (r->have_pick) {
    /* an answer: its latency counts (docs/design.md, Drills) */
    proxy_state_latency(w->p->state, r->site, r->oidx, w->now - r->t_attempt);
    if (proxy_state_record(w->p->state, r->site, r->oidx, w->now, failed)) CINC(w->ctr.skips);
    r->have_pick = 0;
  }
}

void attempt_refused(struct vconn *c, const char *why) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  CINC(w->ctr.attempts[AR_REFUSED]);
  if (r->have_pick) {
    proxy_state_release(w->p->state, r->site, r->oidx);
    r->have_pick = 0;
  }
  if (r->up) {
    upstream_close(r->up);
    r->up = NULL;
  }
  if (log_every(&w->p->last_refused_log, w->now, 1000))
    log_warn("site %lld (%s) origin %lld: response refused (%s); the visitor got 502, the origin "
             "is not counted as failing",
             (long long)r->site->id, r->site->name, (long long)r->site->origins[r->oidx].id, why);
  vconn_local_error(c, 502, "origin_response_refused", "the origin's response was refused", 0);
}
