/* proxy — HTTP/1.1 reverse proxy: one epoll loop per worker thread, SO_REUSEPORT listeners,
 * edge-triggered sockets driven by a per-connection pump, origin keep-alive pools per worker. */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clock.h"
#include "addr.h"
#include "http1.h"
#include "json.h"
#include "log.h"
#include "proxy_state.h"
#include "skip.h"

#define HEAD_MAX 32768 /* request or response head; larger -> 431 / bad origin response */
#define IN_INIT 16384
#define IN_CAP 65536
#define UIN_CAP 65536
#define POOL_BUCKETS 256
#define PUMP_BUDGET 64
#define SWEEP_MS 200
#define MAX_EVENTS 256

enum ev_kind { EV_LISTEN = 1, EV_WAKE, EV_VISITOR, EV_UPSTREAM };
enum attempt_result { AR_SUCCESS = 0, AR_STATUS, AR_CONNECT, AR_TIMEOUT, AR_TLS, AR_IO, AR__N };
static const char *const ar_names[AR__N] = {"success",     "error_status", "connect_error",
                                            "timeout",     "tls_error",    "io_error"};

enum vphase { V_HEAD = 0, V_LOCAL, V_PROXY };
enum rphase { R_WAIT_HEAD = 0, R_BODY };
enum ustate { U_CONNECTING = 0, U_TLS, U_READY };

#define CINC(x) atomic_fetch_add_explicit(&(x), 1, memory_order_relaxed)

struct counters {
  _Atomic uint64_t codes[600];
  _Atomic uint64_t attempts[AR__N];
  _Atomic uint64_t retries, skips, fail_open;
};

/* [sent, fwd) ready to be written out; [fwd, len) not yet framed. */
struct sbuf {
  char *d;
  size_t cap, sent, fwd, len;
};

struct worker;
struct vconn;

struct pool {
  char key[320];
  struct pool *next;
  struct upconn *idle;
  int n_idle;
};

struct upconn {
  int kind; /* EV_UPSTREAM; first member */
  int fd;
  SSL *ssl;
  struct worker *w;
  struct vconn *owner;
  struct pool *pool;
  struct upconn *pnext, *pprev, *gnext;
  int can_read, can_write, closed, st, reused;
  int64_t idle_since;
};

struct req {
  int active;
  int64_t t_start;
  struct sitecfg_site *site;
  char method[33];
  unsigned method_len;
  int idempotent, is_head, vminor, keepalive, has_body;
  char host[256];
  char path[512];
  struct http1_body vbody;
  struct buf ubase; /* request line + forwarded headers, without Host and the empty line */
  struct buf uhead; /* ubase + Host for the current attempt */
  size_t uhead_off;
  uint64_t tried;
  int attempts, oidx, have_pick, request_sent, body_sent, up_werr, last_fail, status;
  int stale_retry;
  struct proxy_pick pick;
  struct upconn *up;
  int64_t up_last;
  int rphase;
  size_t uscan;
  struct http1_body ubody;
  int decode, up_keepalive, resp_started;
  uint64_t bytes_out;
};

struct vconn {
  int kind; /* EV_VISITOR; first member */
  int fd;
  struct worker *w;
  struct vconn *prev, *next, *rnext, *gnext;
  int in_ready, can_read, can_write, closed, peer_eof, close_after;
  int phase;
  int64_t last_io;
  char ip[64];
  struct sbuf in;
  size_t head_scan;
  struct buf oh;
  size_t oh_off;
  struct sbuf uin;
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
  struct upconn *ugrave;
  struct pool *pools[POOL_BUCKETS];
  struct counters ctr;
  struct sitecfg_set *cfg;
  uint64_t cfg_gen;
  int stopping;
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
  _Atomic int stopping;
  struct worker *w;
};

static void v_pump(struct vconn *c);
static void attempt_start(struct vconn *c);

/* ---------- small helpers ---------- */

static const char *reason_of(int s) {
  switch (s) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 408: return "Request Timeout";
  case 431: return "Request Header Fields Too Large";
  case 501: return "Not Implemented";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  default: return "Unknown";
  }
}

static int ieq(const char *a, size_t an, const char *b) {
  size_t bn = strlen(b);
  if (an != bn) return 0;
  for (size_t i = 0; i < an; i++) {
    int x = (unsigned char)a[i], y = (unsigned char)b[i];
    if (x >= 'A' && x <= 'Z') x += 32;
    if (y >= 'A' && y <= 'Z') y += 32;
    if (x != y) return 0;
  }
  return 1;
}

static int iprefix(const char *a, size_t an, const char *pre) {
  size_t pn = strlen(pre);
  return an >= pn && ieq(a, pn, pre);
}

static void copy_trunc(char *dst, size_t cap, const char *src, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* Append s JSON-escaped (without quotes) to b. */
static int buf_json_str(struct buf *b, const char *s) {
  char tmp[8];
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') {
      tmp[0] = '\\';
      tmp[1] = (char)ch;
      if (buf_append(b, tmp, 2) < 0) return -1;
    } else if (ch < 0x20 || ch == 0x7f) {
      snprintf(tmp, sizeof tmp, "\\u%04x", ch);
      if (buf_puts(b, tmp) < 0) return -1;
    } else if (buf_append(b, s, 1) < 0) {
      return -1;
    }
  }
  return 0;
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

static void sbuf_reset(struct sbuf *s) { s->sent = s->fwd = s->len = 0; }

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

static void access_default(const struct proxy_access *a) {
  struct buf b;
  if (!log_enabled(LOG_INFO)) return;
  buf_init(&b, 8192);
  if (buf_printf(&b, "{\"type\":\"access\",\"site_id\":%lld,\"site\":\"", (long long)a->site_id) ||
      buf_json_str(&b, a->site) || buf_puts(&b, "\",\"host\":\"") || buf_json_str(&b, a->host) ||
      buf_puts(&b, "\",\"method\":\"") || buf_json_str(&b, a->method) ||
      buf_puts(&b, "\",\"path\":\"") || buf_json_str(&b, a->path) ||
      buf_printf(&b,
                 "\",\"origin_id\":%lld,\"attempts\":%d,\"status\":%d,\"duration_ms\":%lld,"
                 "\"bytes\":%llu}",
                 (long long)a->origin_id, a->attempts, a->status, (long long)a->duration_ms,
                 (unsigned long long)a->bytes) == 0) {
    log_info("%s", b.data);
  }
  buf_fini(&b);
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
  a.attempts = r->attempts;
  a.status = status;
  a.duration_ms = w->now - r->t_start;
  a.method = r->method;
  a.host = r->host;
  a.path = r->path;
  a.bytes = r->bytes_out;
  if (w->p->o.access_log) w->p->o.access_log(w->p->o.access_arg, &a);
  else access_default(&a);
  if (r->have_pick && r->site) proxy_state_release(w->p->state, r->site, r->oidx);
  r->have_pick = 0;
  sitecfg_site_unref(r->site);
  r->site = NULL;
  r->active = 0;
}

/* ---------- upstream connections ---------- */

static void up_close(struct upconn *u) {
  struct worker *w;
  if (!u || u->closed) return;
  w = u->w;
  if (u->pool) {
    if (u->pprev) u->pprev->pnext = u->pnext;
    else u->pool->idle = u->pnext;
    if (u->pnext) u->pnext->pprev = u->pprev;
    u->pool->n_idle--;
    u->pool = NULL;
  }
  if (u->ssl) {
    SSL_free(u->ssl);
    u->ssl = NULL;
  }
  if (u->fd >= 0) close(u->fd);
  u->fd = -1;
  u->closed = 1;
  u->owner = NULL;
  u->gnext = w->ugrave;
  w->ugrave = u;
}

static unsigned key_hash(const char *k) {
  unsigned h = 2166136261u;
  for (; *k; k++) h = (h ^ (unsigned char)*k) * 16777619u;
  return h % POOL_BUCKETS;
}

static struct pool *pool_find(struct worker *w, const char *key, int create) {
  unsigned h = key_hash(key);
  struct pool *pl;
  for (pl = w->pools[h]; pl; pl = pl->next)
    if (strcmp(pl->key, key) == 0) return pl;
  if (!create || !(pl = calloc(1, sizeof *pl))) return NULL;
  copy_trunc(pl->key, sizeof pl->key, key, strlen(key));
  pl->next = w->pools[h];
  w->pools[h] = pl;
  return pl;
}

static void pool_key(char *out, size_t cap, const struct sitecfg_origin *o, const char *sni) {
  snprintf(out, cap, "%c|%s|%d|%s", o->https ? 's' : 'h', o->address, o->port,
           o->https ? sni : "");
}

static struct upconn *pool_get(struct worker *w, const char *key) {
  struct pool *pl = pool_find(w, key, 0);
  struct upconn *u;
  if (!pl || !pl->idle) return NULL;
  u = pl->idle; /* most recently used first */
  pl->idle = u->pnext;
  if (u->pnext) u->pnext->pprev = NULL;
  pl->n_idle--;
  u->pool = NULL;
  u->pnext = u->pprev = NULL;
  u->reused = 1;
  return u;
}

static void pool_put(struct worker *w, struct upconn *u, const char *key) {
  struct pool *pl = pool_find(w, key, 1);
  if (!pl || pl->n_idle >= w->p->o.max_idle_per_origin || w->stopping) {
    up_close(u);
    return;
  }
  u->owner = NULL;
  u->idle_since = w->now;
  u->pool = pl;
  u->pprev = NULL;
  u->pnext = pl->idle;
  if (pl->idle) pl->idle->pprev = u;
  pl->idle = u;
  pl->n_idle++;
}

/* New connection to the picked address; NULL on immediate failure (*kind says which). */
static struct upconn *up_connect(struct worker *w, const struct proxy_pick *pk,
                                 const struct sitecfg_origin *o, const char *sni, int *kind) {
  struct upconn *u = NULL;
  struct epoll_event ev;
  int fd = -1, rc;
  *kind = AR_CONNECT;
  if (!pk->resolved) return NULL;
  fd = socket(pk->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return NULL;
  set_nodelay(fd);
  rc = connect(fd, (const struct sockaddr *)&pk->sa, pk->salen);
  if (rc < 0 && errno != EINPROGRESS) {
    close(fd);
    return NULL;
  }
  if (!(u = calloc(1, sizeof *u))) {
    close(fd);
    return NULL;
  }
  u->kind = EV_UPSTREAM;
  u->fd = fd;
  u->w = w;
  u->st = rc == 0 ? (o->https ? U_TLS : U_READY) : U_CONNECTING;
  u->can_write = rc == 0;
  if (o->https) {
    *kind = AR_TLS;
    if (!(u->ssl = SSL_new(w->p->ssl)) || SSL_set_fd(u->ssl, fd) != 1) goto fail;
    SSL_set_connect_state(u->ssl);
    if (sni && *sni) {
      unsigned char tmp[16];
      if (inet_pton(AF_INET, sni, tmp) == 1 || inet_pton(AF_INET6, sni, tmp) == 1) {
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(u->ssl), sni) != 1) goto fail;
      } else {
        if (SSL_set_tlsext_host_name(u->ssl, sni) != 1 || SSL_set1_host(u->ssl, sni) != 1)
          goto fail;
      }
    }
  }
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = u;
  if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) goto fail;
  return u;
fail:
  if (u->ssl) SSL_free(u->ssl);
  close(fd);
  free(u);
  return NULL;
}

/* Read: >0 bytes, 0 EOF, -1 would block, -2 error. */
static ssize_t up_read(struct upconn *u, char *b, size_t n) {
  if (u->ssl) {
    int r, e;
    ERR_clear_error();
    r = SSL_read(u->ssl, b, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0) return r;
    e = SSL_get_error(u->ssl, r);
    if (e == SSL_ERROR_WANT_READ) u->can_read = 0;
    else if (e == SSL_ERROR_WANT_WRITE) u->can_write = 0;
    else if (e == SSL_ERROR_ZERO_RETURN) return 0;
    else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0) return 0;
    else return -2;
    return -1;
  } else {
    ssize_t r = recv(u->fd, b, n, 0);
    if (r >= 0) return r;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      u->can_read = 0;
      return -1;
    }
    if (errno == EINTR) return -1;
    return -2;
  }
}

/* Write: >0 bytes, -1 would block, -2 error. */
static ssize_t up_write(struct upconn *u, const char *b, size_t n) {
  if (u->ssl) {
    int r, e;
    ERR_clear_error();
    r = SSL_write(u->ssl, b, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0) return r;
    e = SSL_get_error(u->ssl, r);
    if (e == SSL_ERROR_WANT_WRITE) u->can_write = 0;
    else if (e == SSL_ERROR_WANT_READ) u->can_read = 0;
    else return -2;
    return -1;
  } else {
    ssize_t r = send(u->fd, b, n, MSG_NOSIGNAL);
    if (r >= 0) return r;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      u->can_write = 0;
      return -1;
    }
    if (errno == EINTR) return -1;
    return -2;
  }
}

/* ---------- visitor connections ---------- */

static void v_close(struct vconn *c) {
  struct worker *w = c->w;
  if (c->closed) return;
  if (c->r.active) {
    if (c->r.up) {
      up_close(c->r.up);
      c->r.up = NULL;
    }
    finish_request(c, c->r.resp_started ? c->r.status : 499);
  }
  close(c->fd);
  c->fd = -1;
  c->closed = 1;
  if (c->prev) c->prev->next = c->next;
  else w->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  w->n_conns--;
  c->gnext = w->vgrave;
  w->vgrave = c;
}

static void v_free(struct vconn *c) {
  free(c->in.d);
  free(c->uin.d);
  buf_fini(&c->oh);
  buf_fini(&c->r.ubase);
  buf_fini(&c->r.uhead);
  free(c);
}

/* Queue a JSON error (or any small local) response; the visitor connection closes after it when
 * close_after is set. */
static void local_error(struct vconn *c, int status, const char *code, const char *msg,
                        int close_after) {
  struct buf body;
  struct req *r = &c->r;
  buf_init(&body, 4096);
  if (buf_puts(&body, "{\"error\":{\"code\":\"") || buf_json_str(&body, code) ||
      buf_puts(&body, "\",\"message\":\"") || buf_json_str(&body, msg) || buf_puts(&body, "\"}}"))
    close_after = 1;
  if (close_after || c->w->stopping || !r->keepalive) c->close_after = 1;
  if (buf_printf(&c->oh,
                 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "Via: 1.1 cdnca-node\r\n%s\r\n",
                 status, reason_of(status), body.len, c->close_after ? "Connection: close\r\n" : "") ||
      buf_append(&c->oh, body.data ? body.data : "", body.len)) {
    c->close_after = 1;
  }
  buf_fini(&body);
  r->status = status;
  r->resp_started = 1;
  if (r->up) {
    up_close(r->up);
    r->up = NULL;
  }
  c->phase = V_LOCAL;
}

/* Start the next request on a keep-alive connection: keep unconsumed bytes. */
static void v_next_request(struct vconn *c) {
  size_t left = c->in.len - c->in.fwd;
  if (left && c->in.fwd) memmove(c->in.d, c->in.d + c->in.fwd, left);
  c->in.sent = c->in.fwd = 0;
  c->in.len = left;
  c->head_scan = 0;
  c->oh.len = 0;
  if (c->oh.data) c->oh.data[0] = '\0';
  c->oh_off = 0;
  sbuf_reset(&c->uin);
  c->phase = V_HEAD;
  c->last_io = c->w->now;
}

/* Header names the proxy never forwards as-is (hop-by-hop or rewritten). */
static int hop_by_hop(const struct http1_header *h) {
  return http1_name_is(h, "connection") || http1_name_is(h, "keep-alive") ||
         iprefix(h->name, h->name_len, "proxy-") || http1_name_is(h, "te") ||
         http1_name_is(h, "trailer") || http1_name_is(h, "transfer-encoding") ||
         http1_name_is(h, "upgrade");
}

/* 1 when a Connection header of m lists this header's name. */
static int connection_listed(const struct http1_msg *m, const struct http1_header *h) {
  char name[128];
  if (h->name_len >= sizeof name) return 0;
  memcpy(name, h->name, h->name_len);
  name[h->name_len] = '\0';
  for (int i = 0; i < m->n_headers; i++)
    if (http1_name_is(&m->headers[i], "connection") &&
        http1_list_has(m->headers[i].value, m->headers[i].value_len, name))
      return 1;
  return 0;
}

/* Parse the request head of hl bytes and set up proxying (or a local answer). */
static void start_request(struct vconn *c, size_t hl) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  struct http1_msg *m = NULL;
  const char *host = NULL, *target;
  unsigned host_len = 0, target_len;
  int n_host = 0, n_cl = 0, te_chunked = 0, te_other = 0, conn_close = 0, expect = 0;
  uint64_t cl = 0;
  const char *xff = NULL;
  int rc;
  struct buf xffb;

  buf_init(&xffb, 16384);
  r->active = 1;
  r->t_start = w->now;
  r->site = NULL;
  r->method[0] = r->host[0] = r->path[0] = '\0';
  r->attempts = r->have_pick = r->status = r->resp_started = 0;
  r->tried = 0;
  r->bytes_out = 0;
  r->keepalive = 1;
  r->has_body = 0;
  r->stale_retry = 0;
  c->close_after = 0;
  c->in.sent = c->in.fwd = hl;
  http1_body_init(&r->vbody, HTTP1_BODY_NONE, 0);

  if (!(m = malloc(sizeof *m))) {
    local_error(c, 502, "internal", "out of memory", 1);
    goto out;
  }
  rc = http1_parse_request(c->in.d, hl, m);
  if (rc == HTTP1_TOO_MANY_HEADERS) {
    local_error(c, 431, "header_too_large", "too many request header fields", 1);
    goto out;
  }
  if (rc != HTTP1_OK) {
    local_error(c, 400, "bad_request", "malformed request head", 1);
    goto out;
  }
  copy_trunc(r->method, sizeof r->method, m->method, m->method_len);
  r->method_len = m->method_len;
  r->idempotent = skip_method_idempotent(m->method, m->method_len);
  r->is_head = ieq(m->method, m->method_len, "HEAD") && m->method[0] == 'H';
  r->vminor = m->minor;
  r->keepalive = m->minor >= 1;
  target = m->target;
  target_len = m->target_len;
  copy_trunc(r->path, sizeof r->path, target, target_len);
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    if (http1_name_is(h, "host")) {
      n_host++;
      host = h->value;
      host_len = h->value_len;
    } else if (http1_name_is(h, "content-length")) {
      uint64_t v;
      if (http1_parse_length(h->value, h->value_len, &v) < 0 || (n_cl && v != cl)) {
        local_error(c, 400, "bad_request", "invalid Content-Length", 1);
        goto out;
      }
      cl = v;
      n_cl++;
    } else if (http1_name_is(h, "transfer-encoding")) {
      if (ieq(h->value, h->value_len, "chunked") && !te_chunked) te_chunked = 1;
      else te_other = 1;
    } else if (http1_name_is(h, "connection")) {
      if (http1_list_has(h->value, h->value_len, "close")) conn_close = 1;
    } else if (http1_name_is(h, "expect")) {
      if (ieq(h->value, h->value_len, "100-continue")) expect = 1;
    }
  }
  if (conn_close) r->keepalive = 0;
  if (te_other) {
    local_error(c, 501, "not_implemented", "unsupported Transfer-Encoding", 1);
    goto out;
  }
  if (te_chunked && n_cl) {
    local_error(c, 400, "bad_request", "both Content-Length and Transfer-Encoding", 1);
    goto out;
  }
  if (te_chunked && m->minor == 0) {
    local_error(c, 400, "bad_request", "chunked body in an HTTP/1.0 request", 1);
    goto out;
  }
  /* absolute-form target: its authority is the host */
  if (target_len > 7 && (iprefix(target, target_len, "http://") || iprefix(target, target_len,
                                                                             "https://"))) {
    const char *a = memchr(target, '/', target_len) + 2;
    const char *end = target + target_len;
    const char *slash = memchr(a, '/', (size_t)(end - a));
    host = a;
    host_len = (unsigned)((slash ? slash : end) - a);
    n_host = 1;
    if (slash) {
      target = slash;
      target_len = (unsigned)(end - slash);
    } else {
      target = "/";
      target_len = 1;
    }
  }
  if (n_host > 1 || (m->minor >= 1 && n_host == 0) || host_len >= sizeof r->host) {
    local_error(c, 400, "bad_request", "missing or invalid Host header", 1);
    goto out;
  }
  if (host) copy_trunc(r->host, sizeof r->host, host, host_len);
  if (te_chunked) {
    r->has_body = 1;
    http1_body_init(&r->vbody, HTTP1_BODY_CHUNKED, 0);
  } else if (cl > 0) {
    r->has_body = 1;
    http1_body_init(&r->vbody, HTTP1_BODY_LENGTH, cl);
  }
  worker_refresh_cfg(w);
  r->site = sitecfg_site_ref(sitecfg_lookup(w->cfg, r->host, strlen(r->host)));
  if (!r->site) {
    local_error(c, 404, "unknown_host", "no site is configured for this host", r->has_body);
    goto out;
  }

  /* the request head for the origin, minus Host (added per attempt) */
  r->ubase.len = 0;
  if (buf_printf(&r->ubase, "%.*s %.*s HTTP/1.1\r\n", (int)m->method_len, m->method,
                 (int)target_len, target))
    goto oom;
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    if (http1_name_is(h, "x-forwarded-for")) {
      if (xffb.len && buf_puts(&xffb, ", ")) goto oom;
      if (buf_append(&xffb, h->value, h->value_len)) goto oom;
      xff = xffb.data;
      continue;
    }
    if (hop_by_hop(h) || http1_name_is(h, "host") || http1_name_is(h, "x-forwarded-proto") ||
        http1_name_is(h, "expect") || http1_name_is(h, "content-length") ||
        http1_name_is(h, "via") || connection_listed(m, h))
      continue;
    if (buf_append(&r->ubase, h->name, h->name_len) || buf_puts(&r->ubase, ": ") ||
        buf_append(&r->ubase, h->value, h->value_len) || buf_puts(&r->ubase, "\r\n"))
      goto oom;
  }
  {
    int has_via = 0;
    if (buf_printf(&r->ubase, "X-Forwarded-For: %s%s%s\r\nX-Forwarded-Proto: http\r\nVia: ",
                   xff ? xff : "", xff ? ", " : "", c->ip))
      goto oom;
    for (int i = 0; i < m->n_headers; i++)
      if (http1_name_is(&m->headers[i], "via")) {
        if (buf_append(&r->ubase, m->headers[i].value, m->headers[i].value_len) ||
            buf_puts(&r->ubase, ", "))
          goto oom;
        has_via = 1;
      }
    (void)has_via;
    if (buf_puts(&r->ubase, "1.1 cdnca-node\r\n")) goto oom;
  }
  if (te_chunked && buf_puts(&r->ubase, "Transfer-Encoding: chunked\r\n")) goto oom;
  if (n_cl && buf_printf(&r->ubase, "Content-Length: %llu\r\n", (unsigned long long)cl)) goto oom;
  if (expect && r->has_body && m->minor >= 1 &&
      buf_puts(&c->oh, "HTTP/1.1 100 Continue\r\n\r\n"))
    goto oom;
  c->phase = V_PROXY;
  r->rphase = R_WAIT_HEAD;
  r->up = NULL;
  attempt_start(c);
  goto out;
oom:
  local_error(c, 502, "internal", "request head too large or out of memory", 1);
out:
  buf_fini(&xffb);
  free(m);
}

/* The Host value for the origin and the TLS name. */
static const char *origin_host(const struct req *r, const struct sitecfg_origin *o, char *tmp,
                               size_t cap) {
  const char *h = o->host_header ? o->host_header : r->host;
  if (!o->host_header) {
    /* strip a port for the TLS name */
    const char *colon = r->host[0] == '[' ? strchr(r->host, ']') : strchr(r->host, ':');
    size_t n = strlen(r->host);
    if (colon && r->host[0] == '[') {
      n = (size_t)(colon - r->host) + 1;
      if (n >= 2) {
        copy_trunc(tmp, cap, r->host + 1, n - 2);
        return tmp;
      }
    } else if (colon) {
      n = (size_t)(colon - r->host);
    }
    copy_trunc(tmp, cap, r->host, n);
    return tmp;
  }
  return h;
}

static void attempt_fail(struct vconn *c, int kind);

static void no_origin_left(struct vconn *c) {
  struct req *r = &c->r;
  if (r->attempts == 0)
    local_error(c, 502, "no_origin", "the site has no origin on its current level",
                !r->vbody.done);
  else if (r->last_fail == AR_TIMEOUT)
    local_error(c, 504, "origin_timeout", "no origin answered in time", !r->vbody.done);
  else
    local_error(c, 502, "origin_unreachable", "no origin could be reached", !r->vbody.done);
}

/* (Re)connect for the current pick; on immediate failure record it. */
static void attempt_connect(struct vconn *c, int allow_pool) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  const struct sitecfg_origin *o = &r->site->origins[r->oidx];
  char tmp[256], key[320];
  const char *sni = origin_host(r, o, tmp, sizeof tmp);
  struct upconn *u = NULL;
  int kind;
  r->uhead_off = 0;
  r->request_sent = 0;
  r->up_werr = 0;
  r->rphase = R_WAIT_HEAD;
  r->uscan = 0;
  sbuf_reset(&c->uin);
  pool_key(key, sizeof key, o, sni);
  if (allow_pool) u = pool_get(w, key);
  if (!u) u = up_connect(w, &r->pick, o, sni, &kind);
  if (!u) {
    attempt_fail(c, kind);
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
  char tmp[256];
  if (proxy_state_pick(w->p->state, r->site, r->tried, w->now, &r->pick) < 0) {
    no_origin_left(c);
    return;
  }
  r->oidx = r->pick.index;
  r->tried |= UINT64_C(1) << r->oidx;
  r->attempts++;
  r->have_pick = 1;
  if (r->pick.fail_open) CINC(w->ctr.fail_open);
  if (r->attempts > 1) CINC(w->ctr.retries);
  o = &r->site->origins[r->oidx];
  r->uhead.len = 0;
  if (buf_append(&r->uhead, r->ubase.data, r->ubase.len) ||
      buf_printf(&r->uhead, "Host: %s\r\n\r\n", o->host_header ? o->host_header : r->host)) {
    local_error(c, 502, "internal", "out of memory", 1);
    return;
  }
  (void)tmp;
  attempt_connect(c, !r->has_body);
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
    up_close(r->up);
    r->up = NULL;
  }
  r->last_fail = kind;
  if (skip_may_retry(r->attempts, elapsed, &r->site->retry, r->idempotent, r->request_sent,
                     r->body_sent)) {
    attempt_start(c);
    return;
  }
  if (elapsed > r->site->retry.retry_budget_ms || kind == AR_TIMEOUT)
    local_error(c, 504, "origin_timeout",
                kind == AR_TIMEOUT ? "the origin did not answer in time"
                                   : "the retry budget ran out",
                !r->vbody.done);
  else
    local_error(c, 502, "origin_unreachable", "no origin could be reached", !r->vbody.done);
}

/* Build the visitor's response head from the origin head m. 0 or -1. */
static int build_response_head(struct vconn *c, const struct http1_msg *m, int chunked) {
  struct req *r = &c->r;
  struct buf *o = &c->oh;
  if (buf_printf(o, "HTTP/1.1 %d %.*s\r\n", m->status, (int)m->reason_len, m->reason)) return -1;
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    if (hop_by_hop(h) || connection_listed(m, h)) continue;
    if (chunked && http1_name_is(h, "content-length")) continue;
    if (buf_append(o, h->name, h->name_len) || buf_puts(o, ": ") ||
        buf_append(o, h->value, h->value_len) || buf_puts(o, "\r\n"))
      return -1;
  }
  if (chunked && !r->decode && buf_puts(o, "Transfer-Encoding: chunked\r\n")) return -1;
  if (c->close_after && buf_puts(o, "Connection: close\r\n")) return -1;
  return buf_puts(o, "\r\n");
}

/* A complete origin head of hl bytes is in uin. */
static void got_response_head(struct vconn *c, size_t hl) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  struct http1_msg *m = malloc(sizeof *m);
  int failed, chunked = 0, n_cl = 0, conn_close = 0, te = 0;
  uint64_t cl = 0;
  enum http1_body_kind kind;
  if (!m || http1_parse_response(c->uin.d, hl, m) != HTTP1_OK) {
    free(m);
    attempt_fail(c, AR_IO);
    return;
  }
  if (m->status < 200) {
    int st = m->status;
    free(m);
    if (st == 101) {
      attempt_fail(c, AR_IO);
      return;
    }
    /* interim response: drop it */
    memmove(c->uin.d, c->uin.d + hl, c->uin.len - hl);
    c->uin.len -= hl;
    r->uscan = 0;
    return;
  }
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    if (http1_name_is(h, "transfer-encoding")) {
      te = 1;
      if (http1_list_has(h->value, h->value_len, "chunked")) chunked = 1;
    } else if (http1_name_is(h, "content-length")) {
      uint64_t v;
      if (http1_parse_length(h->value, h->value_len, &v) < 0 || (n_cl && v != cl)) {
        free(m);
        attempt_fail(c, AR_IO);
        return;
      }
      cl = v;
      n_cl++;
    } else if (http1_name_is(h, "connection")) {
      if (http1_list_has(h->value, h->value_len, "close")) conn_close = 1;
    }
  }
  failed = skip_is_failure(&r->site->retry, 0, m->status);
  if (failed) {
    if (skip_may_retry(r->attempts, w->now - r->t_start, &r->site->retry, r->idempotent,
                       r->request_sent, r->body_sent)) {
      free(m);
      attempt_fail(c, AR_STATUS);
      return;
    }
    CINC(w->ctr.attempts[AR_STATUS]);
  } else {
    CINC(w->ctr.attempts[AR_SUCCESS]);
  }
  if (r->have_pick) {
    if (proxy_state_record(w->p->state, r->site, r->oidx, w->now, failed)) CINC(w->ctr.skips);
    r->have_pick = 0;
  }
  if (r->is_head || m->status == 204 || m->status == 304) kind = HTTP1_BODY_NONE;
  else if (chunked) kind = HTTP1_BODY_CHUNKED;
  else if (te) kind = HTTP1_BODY_CLOSE;
  else if (n_cl) kind = HTTP1_BODY_LENGTH;
  else kind = HTTP1_BODY_CLOSE;
  http1_body_init(&r->ubody, kind, cl);
  r->decode = kind == HTTP1_BODY_CHUNKED && r->vminor == 0;
  r->up_keepalive = m->minor >= 1 && !conn_close && kind != HTTP1_BODY_CLOSE;
  if (!r->keepalive || kind == HTTP1_BODY_CLOSE || r->decode || w->stopping) c->close_after = 1;
  r->status = m->status;
  if (build_response_head(c, m, kind == HTTP1_BODY_CHUNKED) < 0) {
    free(m);
    r->status = 502;
    r->up_keepalive = 0;
    v_close(c);
    return;
  }
  free(m);
  r->resp_started = 1;
  c->uin.sent = c->uin.fwd = hl;
  r->rphase = R_BODY;
}

/* Visitor request finished: pool the origin connection, then keep-alive or close. */
static void proxy_done(struct vconn *c) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  int reuse = r->up && r->up_keepalive && r->ubody.done && c->uin.fwd == c->uin.len &&
              r->vbody.done && c->in.sent == c->in.fwd && r->uhead_off == r->uhead.len &&
              !r->up_werr;
  if (r->up) {
    if (reuse) {
      char tmp[256], key[320];
      const struct sitecfg_origin *o = &r->site->origins[r->oidx];
      pool_key(key, sizeof key, o, origin_host(r, o, tmp, sizeof tmp));
      pool_put(w, r->up, key);
    } else {
      up_close(r->up);
    }
    r->up = NULL;
  }
  finish_request(c, r->status);
  if (c->close_after || !r->keepalive || !r->vbody.done || w->stopping) v_close(c);
  else v_next_request(c);
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

/* Read from the visitor into c->in; 1 progress, 0 none, -1 EOF or error. */
static int v_read(struct vconn *c) {
  ssize_t rd;
  if (!c->can_read) return 0;
  if (c->in.len == c->in.cap) {
    if (c->in.sent > 0) sbuf_compact(&c->in);
    else if (c->in.cap < IN_CAP && sbuf_alloc(&c->in, IN_CAP) < 0) return -1;
    if (c->in.len == c->in.cap) return 0;
  }
  rd = recv(c->fd, c->in.d + c->in.len, c->in.cap - c->in.len, 0);
  if (rd > 0) {
    c->in.len += (size_t)rd;
    c->last_io = c->w->now;
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

static int step_head(struct vconn *c) {
  size_t hl = http1_head_end(c->in.d ? c->in.d : "", c->in.len, &c->head_scan);
  int rd;
  if (hl) {
    if (hl > HEAD_MAX) {
      c->r.active = 1;
      c->r.t_start = c->w->now;
      c->r.keepalive = 0;
      local_error(c, 431, "header_too_large", "request head larger than 32 KiB", 1);
      return 1;
    }
    start_request(c, hl);
    return 1;
  }
  if (c->in.len >= HEAD_MAX) {
    c->r.active = 1;
    c->r.t_start = c->w->now;
    c->r.site = NULL;
    c->r.method[0] = c->r.host[0] = c->r.path[0] = '\0';
    c->r.keepalive = 0;
    c->r.attempts = 0;
    local_error(c, 431, "header_too_large", "request head larger than 32 KiB", 1);
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
    if (c->close_after) {
      v_close(c);
      return 0;
    }
    c->in.fwd = c->in.sent; /* nothing of a body was consumed: only bodiless requests stay */
    v_next_request(c);
    return 1;
  }
  return f;
}

/* Drive the upstream side: connect, TLS, send head and body, read the response. */
static int step_upstream(struct vconn *c) {
  struct worker *w = c->w;
  struct req *r = &c->r;
  struct upconn *u = r->up;
  int prog = 0;
  if (!u) return 0;
  if (u->st == U_CONNECTING) {
    int err = 0;
    socklen_t len = sizeof err;
    if (!u->can_write && !u->can_read) return 0;
    if (getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    if (err == EINPROGRESS || err == EALREADY) return 0;
    if (err) {
      attempt_fail(c, AR_CONNECT);
      return 1;
    }
    if (!u->can_write) return 0;
    u->st = u->ssl ? U_TLS : U_READY;
    r->up_last = w->now;
    prog = 1;
  }
  if (u->st == U_TLS) {
    int rc, e;
    ERR_clear_error();
    rc = SSL_do_handshake(u->ssl);
    if (rc == 1) {
      u->st = U_READY;
      r->up_last = w->now;
      prog = 1;
    } else {
      e = SSL_get_error(u->ssl, rc);
      if (e == SSL_ERROR_WANT_READ) u->can_read = 0;
      else if (e == SSL_ERROR_WANT_WRITE) u->can_write = 0;
      else {
        log_warn("TLS handshake with origin %lld failed: %s", (long long)r->site->origins[r->oidx].id,
                  ERR_reason_error_string(ERR_peek_last_error()) ? ERR_reason_error_string(ERR_peek_last_error()) : "error");
        attempt_fail(c, AR_TLS);
        return 1;
      }
      return prog;
    }
  }
  /* request head */
  if (r->uhead_off < r->uhead.len && u->can_write && !r->up_werr) {
    ssize_t wr = up_write(u, r->uhead.data + r->uhead_off, r->uhead.len - r->uhead_off);
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
  /* request body */
  if (r->uhead_off == r->uhead.len && c->in.sent < c->in.fwd && u->can_write && !r->up_werr) {
    ssize_t wr = up_write(u, c->in.d + c->in.sent, c->in.fwd - c->in.sent);
    if (wr > 0) {
      c->in.sent += (size_t)wr;
      r->body_sent = 1;
      r->up_last = w->now;
      if (c->in.sent == c->in.fwd && c->in.fwd == c->in.len) c->in.sent = c->in.fwd = c->in.len = 0;
      prog = 1;
    } else if (wr == -2) {
      r->up_werr = 1;
      r->body_sent = 1;
    }
  }
  /* response */
  if (u->can_read && (r->rphase == R_WAIT_HEAD || !r->ubody.done)) {
    struct sbuf *b = &c->uin;
    ssize_t rd;
    if (b->len == b->cap && b->sent > 0) sbuf_compact(b);
    if (b->len < b->cap) {
      rd = up_read(u, b->d + b->len, b->cap - b->len);
      if (rd > 0) {
        b->len += (size_t)rd;
        r->up_last = w->now;
        prog = 1;
      } else if (rd == 0 || rd == -2) {
        if (r->rphase == R_WAIT_HEAD) {
          if (b->len == 0 && u->reused && !r->body_sent && !r->stale_retry && r->idempotent) {
            /* a pooled connection the origin had closed: reconnect once, not a failure (only
               for idempotent methods: another request may never be sent twice) */
            r->stale_retry = 1;
            up_close(u);
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
          up_close(u);
          r->up = NULL;
          v_close(c);
          return 0;
        }
      }
    }
  }
  if (r->rphase == R_WAIT_HEAD) {
    size_t hl = http1_head_end(c->uin.d, c->uin.len, &r->uscan);
    if (hl) {
      got_response_head(c, hl);
      return 1;
    }
    if (c->uin.len >= HEAD_MAX) {
      attempt_fail(c, AR_IO);
      return 1;
    }
  }
  return prog;
}

static int step_proxy(struct vconn *c) {
  struct req *r = &c->r;
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
  if (!r->vbody.done && c->in.fwd < c->in.len) {
    size_t out;
    long k = http1_body_feed(&r->vbody, c->in.d + c->in.fwd, c->in.len - c->in.fwd, &out, 0);
    if (k < 0) {
      if (!r->resp_started) local_error(c, 400, "bad_request", "malformed chunked body", 1);
      else v_close(c);
      return 1;
    }
    c->in.fwd += (size_t)k;
    if (k > 0) prog = 1;
  }
  if (r->up) prog |= step_upstream(c);
  if (c->closed || c->phase != V_PROXY) return 1;
  /* response framing and out */
  if (r->rphase == R_BODY) {
    if (!r->ubody.done && c->uin.fwd < c->uin.len) {
      size_t out;
      long k = http1_body_feed(&r->ubody, c->uin.d + c->uin.fwd, c->uin.len - c->uin.fwd, &out,
                               r->decode);
      if (k < 0) {
        log_warn("origin %lld sent malformed chunked framing",
                 (long long)r->site->origins[r->oidx].id);
        v_close(c);
        return 0;
      }
      if (out < (size_t)k) {
        memmove(c->uin.d + c->uin.fwd + out, c->uin.d + c->uin.fwd + k,
                c->uin.len - c->uin.fwd - (size_t)k);
        c->uin.len -= (size_t)k - out;
      }
      c->uin.fwd += out;
      if (k > 0) prog = 1;
    }
  }
  rc = v_flush(c, r->rphase == R_BODY ? &c->uin : NULL);
  if (rc < 0) {
    v_close(c);
    return 0;
  }
  prog |= rc;
  if (r->rphase == R_BODY && r->ubody.done && c->oh.len == 0 && c->uin.sent == c->uin.fwd) {
    proxy_done(c);
    return 1;
  }
  return prog;
}

static void v_pump(struct vconn *c) {
  struct worker *w = c->w;
  for (int i = 0; i < PUMP_BUDGET; i++) {
    int prog;
    if (c->closed) return;
    switch (c->phase) {
    case V_HEAD: prog = step_head(c); break;
    case V_LOCAL: prog = step_local(c); break;
    default: prog = step_proxy(c); break;
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

/* ---------- worker loop ---------- */

static void accept_all(struct worker *w) {
  for (int i = 0; i < 64; i++) {
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    struct vconn *c;
    struct epoll_event ev;
    int fd = accept4(w->lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        log_warn("accept: %s", strerror(errno));
      return;
    }
    if (!(c = calloc(1, sizeof *c)) || sbuf_alloc(&c->in, IN_INIT) < 0) {
      if (c) free(c);
      close(fd);
      continue;
    }
    c->kind = EV_VISITOR;
    c->fd = fd;
    c->w = w;
    c->last_io = w->now;
    buf_init(&c->oh, 0);
    buf_init(&c->r.ubase, HEAD_MAX * 2);
    buf_init(&c->r.uhead, HEAD_MAX * 2 + 1024);
    if (sa.ss_family == AF_INET)
      inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, c->ip, sizeof c->ip);
    else if (sa.ss_family == AF_INET6)
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, c->ip, sizeof c->ip);
    else
      copy_trunc(c->ip, sizeof c->ip, "unknown", 7);
    if (sbuf_alloc(&c->uin, UIN_CAP) < 0) {
      v_free(c);
      close(fd);
      continue;
    }
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
  }
}

static void sweep(struct worker *w) {
  struct proxy *p = w->p;
  int64_t now = w->now;
  struct vconn *c, *next;
  for (c = w->conns; c; c = next) {
    struct req *r = &c->r;
    next = c->next;
    if (c->phase == V_HEAD || c->phase == V_LOCAL) {
      if (now - c->last_io > p->o.visitor_timeout_ms || (w->stopping && c->phase == V_HEAD &&
                                                          c->in.len == 0))
        v_close(c);
      continue;
    }
    if (r->up) {
      int connecting = r->up->st != U_READY;
      int waiting_origin = r->rphase == R_WAIT_HEAD ||
                           (!r->ubody.done && c->uin.len < c->uin.cap);
      if (connecting && now - r->up_last > p->o.connect_timeout_ms) {
        attempt_fail(c, AR_TIMEOUT);
        v_pump(c);
        continue;
      }
      if (!connecting && waiting_origin && now - r->up_last > p->o.origin_timeout_ms) {
        if (r->rphase == R_WAIT_HEAD) {
          attempt_fail(c, AR_TIMEOUT);
          v_pump(c);
        } else {
          v_close(c);
        }
        continue;
      }
    }
    {
      int want_visitor = (!r->vbody.done && c->in.sent == c->in.fwd) || c->oh.len > 0 ||
                         c->uin.sent < c->uin.fwd;
      if (want_visitor && now - c->last_io > p->o.visitor_timeout_ms) v_close(c);
    }
  }
  for (int b = 0; b < POOL_BUCKETS; b++)
    for (struct pool *pl = w->pools[b]; pl; pl = pl->next) {
      struct upconn *u = pl->idle, *un;
      for (; u; u = un) {
        un = u->pnext;
        if (now - u->idle_since > p->o.origin_idle_ms || w->stopping) up_close(u);
      }
    }
}

static void free_graves(struct worker *w) {
  while (w->vgrave) {
    struct vconn *c = w->vgrave;
    w->vgrave = c->gnext;
    v_free(c);
  }
  while (w->ugrave) {
    struct upconn *u = w->ugrave;
    w->ugrave = u->gnext;
    free(u);
  }
}

static void begin_stop(struct worker *w) {
  if (w->stopping) return;
  w->stopping = 1;
  w->stop_deadline = w->now + w->p->o.stop_grace_ms;
  if (w->lfd >= 0) {
    epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->lfd, NULL);
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
    int n = epoll_wait(w->epfd, evs, MAX_EVENTS, w->ready ? 0 : SWEEP_MS);
    struct vconn *rl;
    if (n < 0 && errno != EINTR) {
      log_error("epoll_wait: %s", strerror(errno));
      break;
    }
    w->now = clock_mono_ms();
    for (int i = 0; i < n; i++) {
      int kind = *(int *)evs[i].data.ptr;
      uint32_t e = evs[i].events;
      if (kind == EV_LISTEN) {
        if (!w->stopping) accept_all(w);
      } else if (kind == EV_WAKE) {
        uint64_t v;
        if (read(w->wfd, &v, sizeof v) < 0) { /* nothing */
        }
        if (atomic_load(&w->p->stopping)) begin_stop(w);
      } else if (kind == EV_VISITOR) {
        struct vconn *c = evs[i].data.ptr;
        if (c->closed) continue;
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->can_read = 1;
        if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) c->can_write = 1;
        v_pump(c);
      } else if (kind == EV_UPSTREAM) {
        struct upconn *u = evs[i].data.ptr;
        if (u->closed) continue;
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) u->can_read = 1;
        if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) u->can_write = 1;
        if (u->owner) v_pump(u->owner);
        else if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) up_close(u);
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
    if (w->stopping) {
      if (w->n_conns == 0) break;
      if (w->now >= w->stop_deadline) {
        while (w->conns) v_close(w->conns);
        free_graves(w);
        break;
      }
    }
  }
  /* drop idle origin connections and pools */
  for (int b = 0; b < POOL_BUCKETS; b++) {
    struct pool *pl = w->pools[b], *pn;
    for (; pl; pl = pn) {
      pn = pl->next;
      while (pl->idle) up_close(pl->idle);
      free(pl);
    }
    w->pools[b] = NULL;
  }
  while (w->conns) v_close(w->conns);
  free_graves(w);
  sitecfg_set_unref(w->cfg);
  w->cfg = NULL;
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
  if (p->o.stop_grace_ms < 0) p->o.stop_grace_ms = 0;
  if (p->o.origin_idle_ms <= 0) p->o.origin_idle_ms = 30000;
  if (p->o.max_idle_per_origin < 0) p->o.max_idle_per_origin = 0;
  p->nthreads = p->o.threads;
  if (!(p->state = proxy_state_new())) goto fail;
  if (!(p->ssl = SSL_CTX_new(TLS_client_method()))) goto fail;
  SSL_CTX_set_min_proto_version(p->ssl, TLS1_2_VERSION);
  SSL_CTX_set_verify(p->ssl, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_mode(p->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_options(p->ssl, SSL_OP_IGNORE_UNEXPECTED_EOF); /* no close_notify: plain EOF */
  if (p->ca_file ? SSL_CTX_load_verify_locations(p->ssl, p->ca_file, NULL) != 1
                 : SSL_CTX_set_default_verify_paths(p->ssl) != 1) {
    log_error("cannot load origin CA file %s", p->ca_file ? p->ca_file : "(system default)");
    goto fail;
  }
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
      if (sa.ss_family == AF_INET) ((struct sockaddr_in *)&sa)->sin_port = htons((uint16_t)p->port);
      else ((struct sockaddr_in6 *)&sa)->sin6_port = htons((uint16_t)p->port);
    }
    if ((w->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (w->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
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

int proxy_port(const struct proxy *p) { return p->port; }

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

/* ---------- observability ---------- */

int proxy_metrics(struct proxy *p, struct buf *out) {
  uint64_t codes[600], att[AR__N], retries = 0, skips = 0, fo = 0;
  int64_t seq = 0;
  memset(codes, 0, sizeof codes);
  memset(att, 0, sizeof att);
  for (int i = 0; i < p->nthreads; i++) {
    struct counters *c = &p->w[i].ctr;
    for (int k = 100; k < 600; k++) codes[k] += atomic_load_explicit(&c->codes[k], memory_order_relaxed);
    for (int k = 0; k < AR__N; k++) att[k] += atomic_load_explicit(&c->attempts[k], memory_order_relaxed);
    retries += atomic_load_explicit(&c->retries, memory_order_relaxed);
    skips += atomic_load_explicit(&c->skips, memory_order_relaxed);
    fo += atomic_load_explicit(&c->fail_open, memory_order_relaxed);
  }
  pthread_mutex_lock(&p->cfg_mu);
  if (p->cfg) seq = p->cfg->seq;
  pthread_mutex_unlock(&p->cfg_mu);
  if (buf_puts(out, "# HELP cdnca_node_requests_total Visitor requests answered, by status.\n"
                    "# TYPE cdnca_node_requests_total counter\n"))
    return -1;
  for (int k = 100; k < 600; k++)
    if (codes[k] && buf_printf(out, "cdnca_node_requests_total{code=\"%d\"} %llu\n", k,
                               (unsigned long long)codes[k]))
      return -1;
  if (buf_puts(out, "# HELP cdnca_node_origin_attempts_total Origin attempts, by result.\n"
                    "# TYPE cdnca_node_origin_attempts_total counter\n"))
    return -1;
  for (int k = 0; k < AR__N; k++)
    if (buf_printf(out, "cdnca_node_origin_attempts_total{result=\"%s\"} %llu\n", ar_names[k],
                   (unsigned long long)att[k]))
      return -1;
  if (buf_printf(out,
                 "# HELP cdnca_node_retries_total Attempts retried on another origin.\n"
                 "# TYPE cdnca_node_retries_total counter\ncdnca_node_retries_total %llu\n"
                 "# HELP cdnca_node_origin_skips_total Times an origin was put into skip.\n"
                 "# TYPE cdnca_node_origin_skips_total counter\n"
                 "cdnca_node_origin_skips_total %llu\n"
                 "# HELP cdnca_node_fail_open_total Picks made while every origin was skipped.\n"
                 "# TYPE cdnca_node_fail_open_total counter\ncdnca_node_fail_open_total %llu\n"
                 "# HELP cdnca_node_config_seq Sequence of the config being served.\n"
                 "# TYPE cdnca_node_config_seq gauge\ncdnca_node_config_seq %lld\n",
                 (unsigned long long)retries, (unsigned long long)skips,
                 (unsigned long long)fo, (long long)seq))
    return -1;
  return 0;
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
