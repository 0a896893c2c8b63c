/* proxy — HTTP/1.1 reverse proxy: one epoll loop per worker thread, SO_REUSEPORT listeners,
 * edge-triggered sockets driven by a per-connection pump through the phases of enum vphase.
 * Header rules live in rewrite.c, origin connections and pools in upstream.c. Bodies are decoded
 * and re-framed both ways (docs/design.md#the-edge-http-path): a peer never receives the other
 * side's framing bytes. */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "addr.h"
#include "alog.h"
#include "clock.h"
#include "http1.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "proxy_state.h"
#include "rewrite.h"
#include "skip.h"
#include "upstream.h"

/* A request or response head is at most 32 KiB (nginx's large_client_header_buffers allow
 * 4 x 8 KiB): larger request heads get 431, larger response heads fail the attempt. */
#define HEAD_MAX 32768
/* The visitor input buffer is allocated at the first byte (an idle connection holds none), starts
 * at 16 KiB (most heads fit) and grows once to 64 KiB, the most a body is buffered ahead of a
 * slow origin before reading from the visitor pauses. */
#define IN_INIT 16384
#define IN_CAP 65536
/* Origin response bytes buffered ahead of a slow visitor before reading the origin pauses. */
#define UIN_CAP 65536
/* Re-framed chunked bytes waiting for the peer: one input buffer of data plus chunk lines. */
#define REFRAME_CAP (IN_CAP + 256)
/* Steps one connection may take per turn before the others get theirs (fairness). */
#define PUMP_BUDGET 64
/* Timeouts are checked this often, so they fire at most this late. */
#define SWEEP_MS 200
/* A keep-alive connection idle this long gives its buffers back (10,000 idle connections then
 * hold little memory) while a busy one keeps reusing them. */
#define IDLE_RELEASE_MS 1000
#define MAX_EVENTS 256
/* Access lines are buffered per worker and written in batches: at most this many bytes, and
 * at most ALOG_FLUSH_MS after the oldest line (SIGHUP and stop write them out at once). */
#define ALOG_CAP 65536
#define ALOG_FLUSH_MS 100
/* File descriptors kept out of the visitor cap for origins' pools, the admin listener, controld
 * and the log: each visitor connection counts for two (itself and its origin connection). */
#define FD_RESERVE_MIN 64
/* accept() failing for lack of descriptors or memory pauses the listener this long, doubling up
 * to ACCEPT_BACKOFF_MAX while it keeps failing. */
#define ACCEPT_BACKOFF_MIN 50
#define ACCEPT_BACKOFF_MAX 1000

enum ev_kind { EV_LISTEN = 1, EV_WAKE, EV_VISITOR, EV_UPSTREAM };

/* Outcome of one origin attempt: its log word and metric label, one row each. */
enum attempt_result { AR_SUCCESS = 0, AR_STATUS, AR_CONNECT, AR_TIMEOUT, AR_TLS, AR_IO, AR__N };
static const struct {
  const char *name;
  const char *desc;
} attempt_results[AR__N] = {
    [AR_SUCCESS] = {"success", "the origin answered with a non-failure status"},
    [AR_STATUS] = {"error_status", "the origin answered with a status the site counts as failure"},
    [AR_CONNECT] = {"connect_error", "TCP connect refused, unreachable or not resolved"},
    [AR_TIMEOUT] = {"timeout", "connect or response head took too long"},
    [AR_TLS] = {"tls_error", "TLS handshake or certificate check failed"},
    [AR_IO] = {"io_error", "the connection broke or the response head was invalid"},
};

/* The visitor connection's phase; one request at a time goes through them in order. */
enum vphase {
  V_HEAD = 0,     /* reading a request head (an idle keep-alive connection too) */
  V_LOCAL,        /* writing an answer of noded's own (an error, 404, 502/504) */
  V_AWAIT_ORIGIN, /* an attempt connects, sends the request, waits for the response head */
  V_RESPONSE,     /* the origin's response streams to the visitor */
  V_TUNNEL        /* after a 101: bytes are relayed both ways until one side closes */
};

#define CINC(x) atomic_fetch_add_explicit(&(x), 1, memory_order_relaxed)

struct counters {
  _Atomic uint64_t codes[600];
  _Atomic uint64_t attempts[AR__N];
  _Atomic uint64_t retries, skips, fail_open, backup_picks;
};

/* [sent, fwd) ready to be written out; [fwd, len) not yet framed. */
struct sbuf {
  char *d;
  size_t cap, sent, fwd, len;
};

struct worker;

/* The request in progress on a visitor connection. */
struct req {
  int active; /* between the parsed head and the access log line */
  int64_t t_start;
  struct sitecfg_site *site;
  struct rewrite_req rq;   /* the visitor request after the head rules */
  struct http1_body vbody; /* framing of the visitor's body */
  struct buf ubase;        /* request line + forwarded headers, without Host and the empty line */
  struct buf uhead;        /* ubase + Host for the current attempt */
  size_t uhead_off;        /* bytes of uhead written to the origin */
  uint64_t tried;          /* bit i: origins[i] was tried */
  int attempts, oidx, last_fail;
  int status;        /* the status the visitor gets */
  int have_pick;     /* the pick may hold a half-open trial slot until an outcome is recorded */
  int request_sent;  /* bytes of this attempt's head reached the origin
                        (docs/design.md#node-skip-and-retry) */
  int body_sent;     /* bytes of the body reached the origin (the same retry rule) */
  int up_werr;       /* writing to the origin failed: wait for whatever it answers */
  int up_eof;        /* V_TUNNEL: the origin closed its side */
  int stale_retry;   /* a closed pooled connection was replaced once already */
  int sent_continue; /* noded answered "100 Continue" itself (the origin's is not forwarded) */
  struct proxy_pick pick;
  struct upconn *up;
  char ukey[320];          /* the pool key of the current attempt's origin */
  int64_t up_last;         /* last progress with the origin (connect and origin timeouts) */
  size_t uscan;            /* http1_head_end position in uin */
  struct http1_body ubody; /* framing of the origin's response body */
  int rchunked;            /* the response body is chunked: decoded from uin into rout */
  int rencode;             /* ... and re-encoded as chunks (an HTTP/1.1 visitor) */
  int up_keepalive;        /* the origin connection may go back to the pool after the response */
  int resp_started;        /* the visitor's status is chosen (for the access log on a close) */
  uint64_t bytes_out;
};

struct vconn {
  int kind; /* EV_VISITOR; first member */
  int fd;
  struct worker *w;
  struct vconn *prev, *next, *rnext, *gnext;
  enum vphase phase;
  int in_ready; /* queued on w->ready (its pump budget ran out) */
  int can_read; /* edge-triggered readiness of fd */
  int can_write;
  int hup;            /* the peer's FIN or an error was reported: read until EOF */
  int closed;         /* closed, freed at the end of the loop turn */
  int peer_eof;       /* the visitor closed its side */
  int close_after;    /* close once the current response is written */
  int64_t last_io;    /* last byte read or written */
  int64_t last_read;  /* last byte read (body timeout) */
  int64_t head_start; /* V_HEAD: first byte of this head (or accept); 0 while idle keep-alive */
  char ip[64];
  struct sbuf in; /* visitor bytes: [sent, fwd) length-framed body waiting for the origin */
  size_t head_scan;
  struct buf oh; /* head bytes for the visitor (interim and final heads, local answers) */
  size_t oh_off;
  struct sbuf uin;  /* origin bytes: [sent, fwd) length-framed body waiting for the visitor */
  struct sbuf bout; /* a chunked request body re-framed for the origin */
  struct sbuf rout; /* a chunked response body re-framed (or decoded) for the visitor */
  struct req r;
};

struct tag {
  int kind;
};

struct worker {
  struct proxy *p;
  int idx, started;
  pthread_t th;
  int epfd, lfd, wfd;
  struct tag ltag, wtag;
  struct vconn *conns;
  int n_conns;
  struct vconn *ready, *vgrave;
  struct upstream *ups; /* origin connections and pools of this worker */
  struct http1_msg msg; /* the head being parsed (request or response), one at a time */
  struct buf logbuf;    /* the access line being formatted */
  struct alog *alog;    /* access lines waiting to be written */
  struct counters ctr;
  struct sitecfg_set *cfg;
  uint64_t cfg_gen;
  int stopping;
  int accept_paused; /* the listener is out of epoll until resume_at (cap or EMFILE) */
  int64_t resume_at;
  int64_t accept_backoff; /* current pause after an accept() failure, ms */
  int64_t stop_deadline, now, last_sweep;
};

struct proxy {
  struct proxy_opts o;
  char *listen, *ca_file;
  SSL_CTX *ssl;
  struct proxy_state *state;
  pthread_mutex_t cfg_mu;
  struct sitecfg_set *cfg;
  _Atomic uint64_t cfg_gen;
  int nthreads, port, started, stopped;
  _Atomic int max_conns;        /* the visitor cap in force: max_connections within the fd limit,
                                   followed every sweep (the limit may change, prlimit) */
  _Atomic int n_conns;          /* visitor connections open, all workers */
  _Atomic int64_t last_cap_log; /* the "accept paused" line is logged at most once a second */
  _Atomic int stopping;
  _Atomic uint64_t probe_skips; /* skips started by the node's own probes */
  struct worker *w;
};

static void v_pump(struct vconn *c);
static void attempt_start(struct vconn *c);

/* ---------- small helpers ---------- */

static void copy_trunc(char *dst, size_t cap, const char *src, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static void set_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int sbuf_alloc(struct sbuf *s, size_t cap) {
  if (s->d && s->cap >= cap) return 0;
  char *n = realloc(s->d, cap);
  if (!n) return -1;
  s->d = n;
  s->cap = cap;
  return 0;
}

/* Make room at the end by moving [sent, len) to the front. */
static void sbuf_compact(struct sbuf *s) {
  if (s->sent == 0) return;
  memmove(s->d, s->d + s->sent, s->len - s->sent);
  s->fwd -= s->sent;
  s->len -= s->sent;
  s->sent = 0;
}

static void sbuf_reset(struct sbuf *s) {
  s->sent = s->fwd = s->len = 0;
}

/* Give the memory back (an idle connection keeps none). */
static void sbuf_release(struct sbuf *s) {
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

/* Log at most once a second across workers (floods must not flood the log). */
static int log_allowed(struct proxy *p, int64_t now) {
  int64_t last = atomic_load_explicit(&p->last_cap_log, memory_order_relaxed);
  if (now - last < 1000) return 0;
  return atomic_compare_exchange_strong(&p->last_cap_log, &last, now);
}

/* ---------- config ---------- */

static void worker_refresh_cfg(struct worker *w) {
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
/* ---------- access log ---------- */

/* One JSON access line as a log_info line from this function, formatted in the worker's reused
 * buffer and batched in its access-log buffer. */
static void access_default(struct worker *w, const struct proxy_access *a) {
  struct buf *b = &w->logbuf;
  if (!log_enabled(LOG_INFO)) return;
  b->len = 0;
  if (!(buf_puts(b, "{\"type\":\"access\",\"site_id\":") || buf_put_i64(b, a->site_id) ||
        buf_puts(b, ",\"site\":\"") || rewrite_json_escape(b, a->site) ||
        buf_puts(b, "\",\"host\":\"") || rewrite_json_escape(b, a->host) ||
        buf_puts(b, "\",\"method\":\"") || rewrite_json_escape(b, a->method) ||
        buf_puts(b, "\",\"path\":\"") || rewrite_json_escape(b, a->path) ||
        buf_puts(b, "\",\"origin_id\":") || buf_put_i64(b, a->origin_id) ||
        buf_puts(b, ",\"level\":") || buf_put_i64(b, a->level) || buf_puts(b, ",\"attempts\":") ||
        buf_put_i64(b, a->attempts) || buf_puts(b, ",\"status\":") || buf_put_i64(b, a->status) ||
        buf_puts(b, ",\"duration_ms\":") || buf_put_i64(b, a->duration_ms) ||
        buf_puts(b, ",\"bytes\":") || buf_put_u64(b, a->bytes) || buf_puts(b, "}")))
    (void)alog_line(w->alog, LOG_INFO, __func__, b->data, b->len, w->now);
}

static void finish_request(struct vconn *c, int status) {
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
  a.level = (r->site && r->attempts > 0) ? r->pick.level : 0;
  a.attempts = r->attempts;
  a.status = status;
  a.duration_ms = w->now - r->t_start;
  a.method = r->rq.method;
  a.host = r->rq.host;
  a.path = r->rq.path;
  a.bytes = r->bytes_out;
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

/* ---------- visitor connections ---------- */

static void v_close(struct vconn *c) {
  struct worker *w = c->w;
  if (c->closed) return;
  if (c->r.active) {
    if (c->r.up) {
      upstream_close(c->r.up);
      c->r.up = NULL;
    }
    finish_request(c, c->r.resp_started ? c->r.status : 499);
  }
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

static void v_free(struct vconn *c) {
  sbuf_release(&c->in);
  sbuf_release(&c->uin);
  sbuf_release(&c->bout);
  sbuf_release(&c->rout);
  buf_fini(&c->oh);
  buf_fini(&c->r.ubase);
  buf_fini(&c->r.uhead);
  free(c);
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

/* The Connection header of the response head: "close" when the connection closes after it,
 * "keep-alive" for an HTTP/1.0 visitor whose connection stays open (it asked for that). */
static int conn_header(const struct vconn *c) {
  if (c->close_after) return RW_CONN_CLOSE;
  return c->r.rq.minor == 0 && c->r.rq.keepalive ? RW_CONN_KEEPALIVE : RW_CONN_NONE;
}

/* Queue a JSON error (or any small local) response. The visitor connection closes after it when
 * close_after is set, or when the request body is not complete in what was read
 * (docs/design.md#the-edge-http-path: a local answer ends the body; its bytes are never parsed as a
 * request). */
static void local_error(struct vconn *c, int status, const char *code, const char *msg,
                        int close_after) {
  struct req *r = &c->r;
  if (r->up) {
    upstream_close(r->up);
    r->up = NULL;
  }
  if (!close_after && (discard_buffered_body(c) < 0 || !r->vbody.done)) close_after = 1;
  if (close_after || c->w->stopping || !r->rq.keepalive) c->close_after = 1;
  if (rewrite_local_answer(status, code, msg, conn_header(c), &c->oh) < 0) c->close_after = 1;
  r->status = status;
  r->resp_started = 1;
  c->phase = V_LOCAL;
}

/* Give back every buffer of an idle connection (nothing pending in any of them). */
static void v_release_buffers(struct vconn *c) {
  sbuf_release(&c->in);
  sbuf_release(&c->uin);
  sbuf_release(&c->bout);
  sbuf_release(&c->rout);
  buf_fini(&c->oh);
  buf_fini(&c->r.ubase);
  buf_fini(&c->r.uhead);
  c->oh_off = 0;
}

/* Start the next request on a keep-alive connection: keep unconsumed bytes and the buffers (a
 * busy connection reuses them; sweep gives them back once it idles, IDLE_RELEASE_MS). */
static void v_next_request(struct vconn *c) {
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
  c->phase = V_HEAD;
  c->last_io = c->w->now;
  c->head_start = left ? c->w->now : 0;
}

/* Parse the request head of hl bytes and set up proxying (or a local answer). */
static void start_request(struct vconn *c, size_t hl) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  struct http1_msg *m = &w->msg;
  int rc;

  r->active = 1;
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
    local_error(c, 431, "header_too_large", "too many request header fields", 1);
    return;
  }
  if (rc != HTTP1_OK) {
    local_error(c, 400, "bad_request", "malformed request head", 1);
    return;
  }
  if (rewrite_request(m, c->ip, &r->rq, &r->ubase) < 0) {
    local_error(c, 502, "internal", "request head too large or out of memory", 1);
    return;
  }
  if (r->rq.status) {
    local_error(c, r->rq.status, r->rq.code, r->rq.msg, 1);
    return;
  }
  http1_body_init(&r->vbody, r->rq.body, r->rq.body_len);
  worker_refresh_cfg(w);
  r->site = sitecfg_site_ref(sitecfg_lookup(w->cfg, r->rq.host, strlen(r->rq.host)));
  if (!r->site) {
    local_error(c, 404, "unknown_host", "no site is configured for this host", 0);
    return;
  }
  if (r->rq.expect_continue) {
    if (buf_puts(&c->oh, "HTTP/1.1 100 Continue\r\n\r\n")) {
      local_error(c, 502, "internal", "out of memory", 1);
      return;
    }
    r->sent_continue = 1;
  }
  c->phase = V_AWAIT_ORIGIN;
  r->up = NULL;
  attempt_start(c);
}

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

static void attempt_fail(struct vconn *c, int kind);

static void no_origin_left(struct vconn *c) {
  struct req *r = &c->r;
  if (r->attempts == 0)
    local_error(c, 502, "no_origin", "the site has no origin on its current or a following level",
                0);
  else if (r->last_fail == AR_TIMEOUT)
    local_error(c, 504, "origin_timeout", "no origin answered in time", 0);
  else
    local_error(c, 502, "origin_unreachable", "no origin could be reached", 0);
}

/* (Re)connect for the current pick; on immediate failure record it. */
static void attempt_connect(struct vconn *c, int allow_pool) {
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
    local_error(c, 502, "internal", "out of memory", 1);
    return;
  }
  sbuf_reset(&c->uin);
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

static void attempt_start(struct vconn *c) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  const struct sitecfg_origin *o;
  if (proxy_state_pick(w->p->state, r->site, r->tried, w->now, &r->pick) < 0) {
    no_origin_left(c);
    return;
  }
  r->oidx = r->pick.index;
  r->tried |= UINT64_C(1) << r->oidx;
  r->attempts++;
  r->have_pick = 1;
  if (r->pick.fail_open) CINC(w->ctr.fail_open);
  if (r->pick.backup) CINC(w->ctr.backup_picks);
  if (r->attempts > 1) CINC(w->ctr.retries);
  o = &r->site->origins[r->oidx];
  if (rewrite_attempt_head(&r->ubase, o->host_header ? o->host_header : r->rq.host, &r->uhead)) {
    local_error(c, 502, "internal", "out of memory", 1);
    return;
  }
  /* a new connection for a body (a stale pooled one could not be retried) or a protocol switch */
  attempt_connect(c, !r->rq.has_body && !r->rq.upgrade);
}

/* Record a failed attempt and retry or answer. */
static void attempt_fail(struct vconn *c, int kind) {
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
  if (elapsed > r->site->retry.retry_budget_ms || kind == AR_TIMEOUT)
    local_error(
        c, 504, "origin_timeout",
        kind == AR_TIMEOUT ? "the origin did not answer in time" : "the retry budget ran out", 0);
  else
    local_error(c, 502, "origin_unreachable", "no origin could be reached", 0);
}

/* Record the attempt's outcome once the final head is accepted. */
static void attempt_done(struct vconn *c, int failed) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  CINC(w->ctr.attempts[failed ? AR_STATUS : AR_SUCCESS]);
  if (r->have_pick) {
    if (proxy_state_record(w->p->state, r->site, r->oidx, w->now, failed)) CINC(w->ctr.skips);
    r->have_pick = 0;
  }
}

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
      v_close(c);
      return;
    }
    c->uin.sent = hl;
    c->uin.fwd = c->uin.len;
    c->in.fwd = c->in.len; /* bytes the visitor sent after its head belong to the new protocol */
    c->phase = V_TUNNEL;
    return;
  }
  if (m->status < 200) {
    int rc = m->status == 101 ? -1 : interim_response(c, m, hl);
    if (rc < 0) attempt_fail(c, AR_IO); /* a 101 nobody asked for, bad framing, or OOM */
    return;
  }
  rewrite_response(m, r->rq.is_head, &rs);
  if (rs.bad) {
    log_warn("origin %lld sent invalid response framing", (long long)r->site->origins[r->oidx].id);
    attempt_fail(c, AR_IO);
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
  if (!r->rq.keepalive || rs.body == HTTP1_BODY_CLOSE || (r->rchunked && !r->rencode) ||
      w->stopping)
    c->close_after = 1;
  r->status = m->status;
  if (rewrite_response_head(m, &rs, r->rencode, conn_header(c), &c->oh) < 0) {
    r->status = 502;
    r->up_keepalive = 0;
    v_close(c);
    return;
  }
  r->resp_started = 1;
  c->uin.sent = c->uin.fwd = hl;
  c->phase = V_RESPONSE;
}

/* Visitor request finished: pool the origin connection (complete response, nothing unread, the
 * request fully sent), then keep-alive or close. */
static void proxy_done(struct vconn *c) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  int reuse = r->up && r->up_keepalive && r->ubody.done && c->uin.fwd == c->uin.len &&
              r->vbody.done && c->in.sent == c->in.fwd && c->bout.sent == c->bout.len &&
              r->uhead_off == r->uhead.len && !r->up_werr;
  if (r->up) {
    if (reuse) {
      upstream_pool_put(w->ups, r->up, r->ukey, w->now, w->stopping);
    } else {
      upstream_close(r->up);
    }
    r->up = NULL;
  }
  finish_request(c, r->status);
  if (c->close_after || !r->rq.keepalive || !r->vbody.done || w->stopping)
    v_close(c);
  else
    v_next_request(c);
}

/* Write pending head bytes and body bytes to the visitor. 1 progress, 0 none, -1 error. */
static int v_flush(struct vconn *c, struct sbuf *body) {
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

/* Read from the visitor into c->in (allocated at the first byte); 1 progress, 0 none, -1 EOF
 * or error. */
static int v_read(struct vconn *c) {
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

/* A request head over HEAD_MAX: 431 and close. */
static void head_too_large(struct vconn *c) {
  struct req *r = &c->r;
  r->active = 1;
  r->t_start = c->w->now;
  r->site = NULL;
  r->attempts = 0;
  memset(&r->rq, 0, sizeof r->rq);
  http1_body_init(&r->vbody, HTTP1_BODY_NONE, 0);
  local_error(c, 431, "header_too_large", "request head larger than 32 KiB", 1);
}

static int step_head(struct vconn *c) {
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
  if (c->w->stopping && c->in.len == 0) {
    v_close(c);
    return 0;
  }
  rd = v_read(c);
  if (rd < 0) {
    v_close(c);
    return 0;
  }
  return rd;
}

static int step_local(struct vconn *c) {
  int f = v_flush(c, NULL);
  if (f < 0) {
    v_close(c);
    return 0;
  }
  if (c->oh.len == 0) {
    finish_request(c, c->r.status);
    /* only a complete body lets the connection carry another request */
    if (c->close_after || !c->r.vbody.done) {
      v_close(c);
      return 0;
    }
    c->in.sent = c->in.fwd; /* the body bytes are dropped, what follows them is kept */
    v_next_request(c);
    return 1;
  }
  return f;
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

/* Drive the upstream side: connect, TLS, send head and body, read the response. */
static int step_upstream(struct vconn *c) {
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
  if (u->can_read && (c->phase == V_AWAIT_ORIGIN || !r->ubody.done)) {
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
          /* truncated response: nothing sensible to tell the visitor but a close */
          log_warn("origin %lld closed mid-response", (long long)r->site->origins[r->oidx].id);
          r->up_keepalive = 0;
          upstream_close(u);
          r->up = NULL;
          v_close(c);
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

/* Frame the bytes of src [fwd, len) as body b: length- or close-framed bytes stay in src (fwd
 * moves past them), chunked ones are re-framed into dst (as canonical chunks when encode, else
 * decoded). The visitor's body goes from in to bout (encoded), the origin's from uin to rout
 * (encoded for an HTTP/1.1 visitor). 1 progress, 0 none, -1 malformed or OOM. */
static int frame_body(struct http1_body *b, struct sbuf *src, struct sbuf *dst, int encode) {
  size_t out;
  long k;
  if (b->done || src->fwd >= src->len) return 0;
  if (b->kind == HTTP1_BODY_CHUNKED) return reframe(b, src, dst, encode);
  k = http1_body_feed(b, src->d + src->fwd, src->len - src->fwd, &out, 0);
  if (k < 0) return -1;
  src->fwd += (size_t)k;
  return k > 0;
}

static int step_proxy(struct vconn *c) {
  struct req *r = &c->r;
  struct sbuf *rsrc;
  int prog = 0, rc;
  /* visitor body in */
  if (!r->vbody.done) {
    rc = v_read(c);
    if (rc < 0) {
      v_close(c);
      return 0;
    }
    prog |= rc;
  }
  rc = frame_body(&r->vbody, &c->in, &c->bout, 1);
  if (rc < 0) {
    if (!r->resp_started)
      local_error(c, 400, "bad_request", "malformed chunked body", 1);
    else
      v_close(c);
    return 1;
  }
  prog |= rc;
  if (r->up) prog |= step_upstream(c);
  if (c->closed || (c->phase != V_AWAIT_ORIGIN && c->phase != V_RESPONSE)) return 1;
  /* response framing and out */
  if (c->phase == V_RESPONSE) {
    rc = frame_body(&r->ubody, &c->uin, &c->rout, r->rencode);
    if (rc < 0) {
      log_warn("origin %lld sent malformed chunked framing",
               (long long)r->site->origins[r->oidx].id);
      if (c->oh.len > 0 && c->oh_off == 0 && r->bytes_out == 0) {
        /* nothing of this response reached the visitor yet: a 502 instead of its head */
        c->oh.len = 0;
        local_error(c, 502, "bad_origin_response", "the origin sent malformed chunked framing", 1);
        return 1;
      }
      v_close(c); /* the head is out: only a close tells the visitor */
      return 0;
    }
    prog |= rc;
  }
  rsrc = c->phase != V_RESPONSE ? NULL : r->rchunked ? &c->rout : &c->uin;
  rc = v_flush(c, rsrc);
  if (rc < 0) {
    v_close(c);
    return 0;
  }
  prog |= rc;
  if (c->phase == V_RESPONSE && r->ubody.done && c->oh.len == 0 && rsrc->sent == rsrc->fwd &&
      (r->rchunked || c->uin.sent == c->uin.fwd)) {
    proxy_done(c);
    return 1;
  }
  return prog;
}

/* After a 101: visitor bytes go to the origin as they come (in [sent, fwd)), origin bytes to
 * the visitor (uin [sent, fwd)); when one side has closed and its bytes are delivered, close. */
static int step_tunnel(struct vconn *c) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  struct upconn *u = r->up;
  int prog = 0, rc;
  if (!u) {
    v_close(c);
    return 0;
  }
  if (!c->peer_eof) {
    rc = v_read(c);
    if (rc < 0 && !c->peer_eof) {
      v_close(c);
      return 0;
    }
    prog |= rc > 0;
  }
  c->in.fwd = c->in.len;
  if (c->in.sent < c->in.fwd && u->can_write) {
    ssize_t wr = upstream_write(u, c->in.d + c->in.sent, c->in.fwd - c->in.sent);
    if (wr == -2) {
      v_close(c);
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
  rc = v_flush(c, &c->uin);
  if (rc < 0) {
    v_close(c);
    return 0;
  }
  prog |= rc;
  if ((r->up_eof && c->oh.len == 0 && c->uin.sent == c->uin.fwd) ||
      (c->peer_eof && c->in.sent == c->in.len)) {
    v_close(c);
    return 0;
  }
  return prog;
}

static void v_pump(struct vconn *c) {
  struct worker *w = c->w;
  for (int i = 0; i < PUMP_BUDGET; i++) {
    int prog;
    if (c->closed) return;
    switch (c->phase) {
    case V_HEAD:
      prog = step_head(c);
      break;
    case V_LOCAL:
      prog = step_local(c);
      break;
    case V_AWAIT_ORIGIN:
    case V_RESPONSE:
      prog = step_proxy(c);
      break;
    case V_TUNNEL:
      prog = step_tunnel(c);
      break;
    default:
      prog = 0;
      break;
    }
    if (!prog) return;
  }
  /* still busy: continue after other connections had a turn */
  if (!c->closed && !c->in_ready) {
    c->in_ready = 1;
    c->rnext = w->ready;
    w->ready = c;
  }
}

/* The visitor cap within the descriptor limit: each visitor connection counts for two
 * descriptors (itself and its origin connection) and a reserve (64 + 1/8 of the limit, at most
 * half of it) stays free for pools, the admin listener and controld. */
static int visitor_cap(int max_connections) {
  struct rlimit rl;
  int64_t reserve, fit;
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
      rl.rlim_cur > (rlim_t)INT32_MAX)
    return max_connections;
  reserve = FD_RESERVE_MIN + (int64_t)rl.rlim_cur / 8;
  if (reserve > (int64_t)rl.rlim_cur / 2) reserve = (int64_t)rl.rlim_cur / 2;
  fit = ((int64_t)rl.rlim_cur - reserve) / 2;
  if (fit < 1) fit = 1;
  return fit < max_connections ? (int)fit : max_connections;
}

/* Follow the descriptor limit (worker 0, every sweep); say so when it lowers the cap. */
static void update_cap(struct proxy *p) {
  int cap = visitor_cap(p->o.max_connections);
  int old = atomic_exchange_explicit(&p->max_conns, cap, memory_order_relaxed);
  if (cap != old && cap < p->o.max_connections)
    log_warn("visitor connections capped at %d (max-connections %d) by the descriptor limit", cap,
             p->o.max_connections);
}

/* ---------- worker loop ---------- */

/* Take the listener out of epoll until now + ms (and below the cap). */
static void accept_pause(struct worker *w, int64_t ms) {
  if (!w->accept_paused && w->lfd >= 0) epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->lfd, NULL);
  w->accept_paused = 1;
  w->resume_at = w->now + ms;
}

/* Put the listener back when its pause is over and the cap allows. */
static void accept_maybe_resume(struct worker *w) {
  struct epoll_event ev;
  if (!w->accept_paused || w->stopping || w->lfd < 0 || w->now < w->resume_at) return;
  if (atomic_load_explicit(&w->p->n_conns, memory_order_relaxed) >=
      atomic_load_explicit(&w->p->max_conns, memory_order_relaxed)) {
    w->resume_at = w->now + SWEEP_MS; /* still at the cap: look again later, do not spin */
    return;
  }
  ev.events = EPOLLIN;
  ev.data.ptr = &w->ltag;
  if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->lfd, &ev) == 0) w->accept_paused = 0;
}

static void accept_all(struct worker *w) {
  struct proxy *p = w->p;
  for (int i = 0; i < 64; i++) {
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    struct vconn *c;
    struct epoll_event ev;
    int fd;
    int cap = atomic_load_explicit(&p->max_conns, memory_order_relaxed);
    if (atomic_load_explicit(&p->n_conns, memory_order_relaxed) >= cap) {
      if (log_allowed(p, w->now))
        log_warn("visitor connections at the cap (%d): accepting paused", cap);
      accept_pause(w, SWEEP_MS);
      return;
    }
    fd = accept4(w->lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
        return;
      /* EMFILE, ENFILE, ENOBUFS, ENOMEM: back off instead of spinning on the ready listener */
      w->accept_backoff = w->accept_backoff ? w->accept_backoff * 2 : ACCEPT_BACKOFF_MIN;
      if (w->accept_backoff > ACCEPT_BACKOFF_MAX) w->accept_backoff = ACCEPT_BACKOFF_MAX;
      if (log_allowed(p, w->now))
        log_warn("accept: %s: accepting paused for %lld ms", strerror(errno),
                 (long long)w->accept_backoff);
      accept_pause(w, w->accept_backoff);
      return;
    }
    w->accept_backoff = 0;
    if (!(c = calloc(1, sizeof *c))) {
      close(fd);
      continue;
    }
    c->kind = EV_VISITOR;
    c->fd = fd;
    c->w = w;
    c->last_io = c->last_read = c->head_start = w->now;
    buf_init(&c->oh, 0);
    buf_init(&c->r.ubase, HEAD_MAX * 2);
    buf_init(&c->r.uhead, HEAD_MAX * 2 + 1024);
    if (sa.ss_family == AF_INET)
      inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, c->ip, sizeof c->ip);
    else if (sa.ss_family == AF_INET6)
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, c->ip, sizeof c->ip);
    else
      copy_trunc(c->ip, sizeof c->ip, "unknown", 7);
    set_nodelay(fd);
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = c;
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
      v_free(c);
      close(fd);
      continue;
    }
    c->next = w->conns;
    if (w->conns) w->conns->prev = c;
    w->conns = c;
    w->n_conns++;
    atomic_fetch_add_explicit(&p->n_conns, 1, memory_order_relaxed);
  }
}

/* The visitor-side deadline of c in its phase: 1 when it has passed. */
static int visitor_expired(const struct worker *w, const struct vconn *c) {
  const struct proxy_opts *o = &w->p->o;
  const struct req *r = &c->r;
  int64_t now = w->now;
  switch (c->phase) {
  case V_HEAD:
    if (c->head_start) return now - c->head_start > o->header_timeout_ms;
    return now - c->last_io > o->keepalive_timeout_ms; /* idle between requests */
  case V_LOCAL:
    return now - c->last_io > o->visitor_timeout_ms;
  case V_TUNNEL:
    return now - c->last_io > o->visitor_timeout_ms && now - r->up_last > o->origin_timeout_ms;
  default:
    break;
  }
  /* waiting for body bytes the visitor does not send */
  if (!r->vbody.done && c->in.fwd == c->in.len && c->in.sent == c->in.fwd &&
      c->bout.sent == c->bout.fwd && now - c->last_read > o->body_timeout_ms)
    return 1;
  /* bytes for the visitor it does not take */
  if ((c->oh.len > 0 || c->uin.sent < c->uin.fwd || c->rout.sent < c->rout.fwd) &&
      now - c->last_io > o->visitor_timeout_ms)
    return 1;
  return 0;
}

static void sweep(struct worker *w) {
  struct proxy *p = w->p;
  int64_t now = w->now;
  struct vconn *c, *next;
  for (c = w->conns; c; c = next) {
    struct req *r = &c->r;
    next = c->next;
    if (c->phase == V_HEAD && w->stopping && c->in.len == 0) {
      v_close(c);
      continue;
    }
    if (c->phase == V_HEAD && c->in.len == 0 && c->in.d && now - c->last_io >= IDLE_RELEASE_MS)
      v_release_buffers(c);
    if (r->up && (c->phase == V_AWAIT_ORIGIN || c->phase == V_RESPONSE)) {
      int connecting = r->up->st != UP_READY;
      int waiting_origin =
          c->phase == V_AWAIT_ORIGIN || (!r->ubody.done && c->uin.len < c->uin.cap);
      if (connecting && now - r->up_last > p->o.connect_timeout_ms) {
        attempt_fail(c, AR_TIMEOUT);
        v_pump(c);
        continue;
      }
      if (!connecting && waiting_origin && now - r->up_last > p->o.origin_timeout_ms) {
        if (c->phase == V_AWAIT_ORIGIN) {
          attempt_fail(c, AR_TIMEOUT);
          v_pump(c);
        } else {
          v_close(c);
        }
        continue;
      }
    }
    if (visitor_expired(w, c)) v_close(c);
  }
  upstream_pool_sweep(w->ups, now, p->o.origin_idle_ms, w->stopping);
  if (w->idx == 0) update_cap(p);
}

static void free_graves(struct worker *w) {
  while (w->vgrave) {
    struct vconn *c = w->vgrave;
    w->vgrave = c->gnext;
    v_free(c);
  }
  upstream_reap(w->ups);
}

static void begin_stop(struct worker *w) {
  if (w->stopping) return;
  w->stopping = 1;
  w->stop_deadline = w->now + w->p->o.stop_grace_ms;
  if (w->lfd >= 0) {
    if (!w->accept_paused) epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->lfd, NULL);
    close(w->lfd);
    w->lfd = -1;
  }
  sweep(w);
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct epoll_event evs[MAX_EVENTS];
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  w->now = clock_mono_ms();
  w->last_sweep = w->now;
  for (;;) {
    int timeout = w->ready ? 0 : SWEEP_MS;
    int n;
    struct vconn *rl;
    if (w->accept_paused && !w->ready) {
      int64_t left = w->resume_at - clock_mono_ms();
      if (left < timeout) timeout = left > 0 ? (int)left : 0;
    }
    if (timeout > 0) {
      int64_t due = alog_due_in(w->alog, clock_mono_ms());
      if (due >= 0 && due < timeout) timeout = (int)due;
    }
    n = epoll_wait(w->epfd, evs, MAX_EVENTS, timeout);
    if (n < 0 && errno != EINTR) {
      log_error("epoll_wait: %s", strerror(errno));
      break;
    }
    w->now = clock_mono_ms();
    for (int i = 0; i < n; i++) {
      int kind = *(int *)evs[i].data.ptr;
      uint32_t e = evs[i].events;
      if (kind == EV_LISTEN) {
        if (!w->stopping && !w->accept_paused) accept_all(w);
      } else if (kind == EV_WAKE) {
        uint64_t v;
        if (read(w->wfd, &v, sizeof v) < 0) { /* nothing */
        }
        if (atomic_load(&w->p->stopping)) begin_stop(w);
      } else if (kind == EV_VISITOR) {
        struct vconn *c = evs[i].data.ptr;
        if (c->closed) continue;
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->can_read = 1;
        if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->hup = 1;
        if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) c->can_write = 1;
        v_pump(c);
      } else if (kind == EV_UPSTREAM) {
        struct upconn *u = evs[i].data.ptr;
        if (u->closed) continue;
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) u->can_read = 1;
        if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) u->hup = 1;
        if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) u->can_write = 1;
        if (u->owner)
          v_pump(u->owner);
        else if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
          upstream_close(u);
      }
    }
    rl = w->ready;
    w->ready = NULL;
    while (rl) {
      struct vconn *c = rl;
      rl = c->rnext;
      c->in_ready = 0;
      if (!c->closed) v_pump(c);
    }
    if (w->now - w->last_sweep >= SWEEP_MS) {
      w->last_sweep = w->now;
      sweep(w);
    }
    free_graves(w);
    accept_maybe_resume(w);
    alog_tick(w->alog, w->now);
    if (w->stopping) {
      if (w->n_conns == 0) break;
      if (w->now >= w->stop_deadline) {
        while (w->conns)
          v_close(w->conns);
        free_graves(w);
        break;
      }
    }
  }
  while (w->conns)
    v_close(w->conns);
  free_graves(w);
  upstream_pool_sweep(w->ups, w->now, 0, 1); /* drop idle origin connections */
  upstream_reap(w->ups);
  sitecfg_set_unref(w->cfg);
  w->cfg = NULL;
  alog_flush(w->alog);
  return NULL;
}

/* ---------- lifecycle ---------- */

void proxy_opts_default(struct proxy_opts *o) {
  memset(o, 0, sizeof *o);
  o->listen = "127.0.0.1:7480";
  o->threads = 2;
  o->connect_timeout_ms = 5000;
  o->origin_timeout_ms = 60000;
  o->visitor_timeout_ms = 60000;
  o->header_timeout_ms = 10000;
  o->keepalive_timeout_ms = 60000;
  o->body_timeout_ms = 60000;
  o->max_connections = 10000;
  o->stop_grace_ms = 10000;
  o->origin_idle_ms = 30000;
  o->max_idle_per_origin = 32;
}

static char *dupstr(const char *s) {
  size_t n;
  char *d;
  if (!s) return NULL;
  n = strlen(s);
  if ((d = malloc(n + 1))) memcpy(d, s, n + 1);
  return d;
}

/* Raise the descriptor soft limit to the hard one (once, at start). */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
}

static int make_listener(struct sockaddr_storage *sa, socklen_t len) {
  int one = 1;
  int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
      bind(fd, (struct sockaddr *)sa, len) < 0 || listen(fd, 1024) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

struct proxy *proxy_new(const struct proxy_opts *o) {
  struct proxy *p = calloc(1, sizeof *p);
  struct sockaddr_storage sa;
  socklen_t salen;
  if (!p) return NULL;
  p->o = *o;
  pthread_mutex_init(&p->cfg_mu, NULL);
  p->listen = dupstr(o->listen ? o->listen : "127.0.0.1:7480");
  p->ca_file = dupstr(o->origin_ca_file);
  p->o.listen = p->listen;
  p->o.origin_ca_file = p->ca_file;
  if (p->o.threads < 1) p->o.threads = 1;
  if (p->o.threads > 64) p->o.threads = 64;
  if (p->o.connect_timeout_ms <= 0) p->o.connect_timeout_ms = 5000;
  if (p->o.origin_timeout_ms <= 0) p->o.origin_timeout_ms = 60000;
  if (p->o.visitor_timeout_ms <= 0) p->o.visitor_timeout_ms = 60000;
  if (p->o.header_timeout_ms <= 0) p->o.header_timeout_ms = 10000;
  if (p->o.keepalive_timeout_ms <= 0) p->o.keepalive_timeout_ms = 60000;
  if (p->o.body_timeout_ms <= 0) p->o.body_timeout_ms = 60000;
  if (p->o.max_connections <= 0) p->o.max_connections = 10000;
  raise_fd_limit();
  atomic_store(&p->max_conns, p->o.max_connections);
  update_cap(p);
  if (p->o.stop_grace_ms < 0) p->o.stop_grace_ms = 0;
  if (p->o.origin_idle_ms <= 0) p->o.origin_idle_ms = 30000;
  if (p->o.max_idle_per_origin < 0) p->o.max_idle_per_origin = 0;
  p->nthreads = p->o.threads;
  if (!(p->state = proxy_state_new())) goto fail;
  if (!(p->ssl = upstream_tls_ctx(p->ca_file))) goto fail;
  if (addr_parse_listen(p->listen, 1, &sa, &salen) < 0) {
    log_error("invalid listen address '%s' (want host:port)", p->listen);
    goto fail;
  }
  if (!(p->w = calloc((size_t)p->nthreads, sizeof *p->w))) goto fail;
  for (int i = 0; i < p->nthreads; i++) {
    struct worker *w = &p->w[i];
    w->p = p;
    w->idx = i;
    w->lfd = w->wfd = w->epfd = -1;
    buf_init(&w->logbuf, 8192); /* a longer access line is not logged */
    if (!(w->alog = alog_new(STDERR_FILENO, ALOG_CAP, ALOG_FLUSH_MS))) goto fail;
  }
  for (int i = 0; i < p->nthreads; i++) {
    struct worker *w = &p->w[i];
    struct epoll_event ev;
    if ((w->lfd = make_listener(&sa, salen)) < 0) {
      log_error("cannot listen on %s: %s", p->listen, strerror(errno));
      goto fail;
    }
    if (i == 0) {
      struct sockaddr_storage bound;
      socklen_t bl = sizeof bound;
      if (getsockname(w->lfd, (struct sockaddr *)&bound, &bl) < 0) goto fail;
      p->port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                                 : ((struct sockaddr_in6 *)&bound)->sin6_port);
      if (sa.ss_family == AF_INET)
        ((struct sockaddr_in *)&sa)->sin_port = htons((uint16_t)p->port);
      else
        ((struct sockaddr_in6 *)&sa)->sin6_port = htons((uint16_t)p->port);
    }
    if ((w->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (w->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        !(w->ups = upstream_new(p->ssl, w->epfd, EV_UPSTREAM, p->o.max_idle_per_origin)))
      goto fail;
    w->ltag.kind = EV_LISTEN;
    w->wtag.kind = EV_WAKE;
    ev.events = EPOLLIN;
    ev.data.ptr = &w->ltag;
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->lfd, &ev) < 0) goto fail;
    ev.data.ptr = &w->wtag;
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wfd, &ev) < 0) goto fail;
  }
  return p;
fail:
  proxy_free(&p);
  return NULL;
}

int proxy_port(const struct proxy *p) {
  return p->port;
}

int proxy_set_config(struct proxy *p, struct sitecfg_set *s) {
  struct sitecfg_set *old;
  if (proxy_state_sync(p->state, s) < 0) return -1;
  pthread_mutex_lock(&p->cfg_mu);
  old = p->cfg;
  p->cfg = s ? sitecfg_set_ref(s) : NULL;
  atomic_fetch_add_explicit(&p->cfg_gen, 1, memory_order_release);
  pthread_mutex_unlock(&p->cfg_mu);
  sitecfg_set_unref(old);
  return 0;
}

int proxy_start(struct proxy *p) {
  if (p->started) return 0;
  if (proxy_state_resolver_start(p->state) < 0) {
    log_error("cannot start the origin resolver thread");
    return -1;
  }
  for (int i = 0; i < p->nthreads; i++) {
    if (pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i]) != 0) {
      log_error("cannot start proxy worker %d", i);
      proxy_stop(p);
      return -1;
    }
    p->w[i].started = 1;
  }
  p->started = 1;
  return 0;
}

void proxy_stop(struct proxy *p) {
  if (!p || p->stopped) return;
  atomic_store(&p->stopping, 1);
  for (int i = 0; p->w && i < p->nthreads; i++) {
    uint64_t one = 1;
    if (p->w[i].wfd >= 0 && write(p->w[i].wfd, &one, sizeof one) < 0)
      log_warn("cannot wake proxy worker %d", i);
  }
  for (int i = 0; p->w && i < p->nthreads; i++)
    if (p->w[i].started) {
      pthread_join(p->w[i].th, NULL);
      p->w[i].started = 0;
    }
  p->stopped = 1;
}

void proxy_free(struct proxy **pp) {
  struct proxy *p = pp ? *pp : NULL;
  if (!p) return;
  proxy_stop(p);
  for (int i = 0; p->w && i < p->nthreads; i++) {
    struct worker *w = &p->w[i];
    if (w->lfd >= 0) close(w->lfd);
    if (w->wfd >= 0) close(w->wfd);
    upstream_free(&w->ups);
    buf_fini(&w->logbuf);
    alog_free(&w->alog);
    if (w->epfd >= 0) close(w->epfd);
    sitecfg_set_unref(w->cfg);
  }
  free(p->w);
  sitecfg_set_unref(p->cfg);
  proxy_state_free(&p->state);
  if (p->ssl) SSL_CTX_free(p->ssl);
  pthread_mutex_destroy(&p->cfg_mu);
  free(p->listen);
  free(p->ca_file);
  free(p);
  *pp = NULL;
}

void proxy_flush_log(struct proxy *p) {
  for (int i = 0; p && p->w && i < p->nthreads; i++)
    alog_flush(p->w[i].alog);
}

/* ---------- observability ---------- */

int proxy_metrics(struct proxy *p, struct buf *out) {
  uint64_t codes[600], att[AR__N], retries = 0, skips = 0, fo = 0, bp = 0;
  int64_t seq = 0;
  struct metrics *m;
  char label[64];
  int rc;
  memset(codes, 0, sizeof codes);
  memset(att, 0, sizeof att);
  for (int i = 0; i < p->nthreads; i++) {
    struct counters *c = &p->w[i].ctr;
    for (int k = 100; k < 600; k++)
      codes[k] += atomic_load_explicit(&c->codes[k], memory_order_relaxed);
    for (int k = 0; k < AR__N; k++)
      att[k] += atomic_load_explicit(&c->attempts[k], memory_order_relaxed);
    retries += atomic_load_explicit(&c->retries, memory_order_relaxed);
    skips += atomic_load_explicit(&c->skips, memory_order_relaxed);
    fo += atomic_load_explicit(&c->fail_open, memory_order_relaxed);
    bp += atomic_load_explicit(&c->backup_picks, memory_order_relaxed);
  }
  skips += atomic_load_explicit(&p->probe_skips, memory_order_relaxed);
  pthread_mutex_lock(&p->cfg_mu);
  if (p->cfg) seq = p->cfg->seq;
  pthread_mutex_unlock(&p->cfg_mu);
  /* the workers count with relaxed atomics; the snapshot renders through a registry */
  if (!(m = metrics_new())) return -1;
  metrics_declare(m, "cdnca_node_requests_total", "counter",
                  "Visitor requests answered, by status.");
  for (int k = 100; k < 600; k++)
    if (codes[k]) {
      snprintf(label, sizeof label, "code=\"%d\"", k);
      metrics_add(m, "cdnca_node_requests_total", label, (double)codes[k]);
    }
  metrics_declare(m, "cdnca_node_origin_attempts_total", "counter", "Origin attempts, by result.");
  for (int k = 0; k < AR__N; k++) {
    snprintf(label, sizeof label, "result=\"%s\"", attempt_results[k].name);
    metrics_add(m, "cdnca_node_origin_attempts_total", label, (double)att[k]);
  }
  metrics_declare(m, "cdnca_node_retries_total", "counter", "Attempts retried on another origin.");
  metrics_add(m, "cdnca_node_retries_total", "", (double)retries);
  metrics_declare(m, "cdnca_node_origin_skips_total", "counter",
                  "Times an origin was put into skip.");
  metrics_add(m, "cdnca_node_origin_skips_total", "", (double)skips);
  metrics_declare(m, "cdnca_node_fail_open_total", "counter",
                  "Picks made while every origin was skipped.");
  metrics_add(m, "cdnca_node_fail_open_total", "", (double)fo);
  metrics_declare(m, "cdnca_node_backup_picks_total", "counter",
                  "Picks of an origin on a level after the site's current one.");
  metrics_add(m, "cdnca_node_backup_picks_total", "", (double)bp);
  metrics_declare(m, "cdnca_node_config_seq", "gauge", "Sequence of the config being served.");
  metrics_set(m, "cdnca_node_config_seq", "", (double)seq);
  rc = metrics_render(m, out);
  metrics_free(&m);
  return rc;
}

int proxy_skip_metrics(struct proxy *p, int max_labelled, struct buf *out) {
  return proxy_state_skip_metrics(p->state, clock_mono_ms(), max_labelled, out);
}

void proxy_probe_result(struct proxy *p, int64_t origin_id, int ok) {
  int n = proxy_state_probe(p->state, origin_id, clock_mono_ms(), ok);
  if (n > 0) atomic_fetch_add_explicit(&p->probe_skips, (uint64_t)n, memory_order_relaxed);
}

cJSON *proxy_observations(struct proxy *p) {
  return proxy_state_observations(p->state, clock_mono_ms());
}

cJSON *proxy_status(struct proxy *p) {
  struct sitecfg_set *s;
  cJSON *root = cJSON_CreateObject(), *arr;
  int64_t now = clock_mono_ms();
  if (!root) return NULL;
  pthread_mutex_lock(&p->cfg_mu);
  s = p->cfg ? sitecfg_set_ref(p->cfg) : NULL;
  pthread_mutex_unlock(&p->cfg_mu);
  json_add_i64(root, "seq", s ? s->seq : 0);
  arr = cJSON_AddArrayToObject(root, "sites");
  for (int i = 0; s && arr && i < s->n_sites; i++) {
    const struct sitecfg_site *site = s->sites[i];
    cJSON *j = cJSON_CreateObject(), *o;
    if (!j) break;
    json_add_i64(j, "id", site->id);
    cJSON_AddStringToObject(j, "name", site->name);
    json_add_i64(j, "config_version", site->config_version);
    json_add_i64(j, "current_level", site->current_level);
    if ((o = proxy_state_site_json(p->state, site, now))) cJSON_AddItemToObject(j, "origins", o);
    cJSON_AddItemToArray(arr, j);
  }
  sitecfg_set_unref(s);
  return root;
}
