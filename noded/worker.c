/* worker — a proxy worker thread's loop: accept, pump, sweep, stop (worker.h). */
#include "worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alog.h"
#include "attempt.h"
#include "clock.h"
#include "drain.h"
#include "log.h"
#include "relay.h"
#include "request.h"
#include "sdlisten.h"
#include "sitecfg.h"
#include "upstream.h"
#include "vconn.h"

/* Steps one connection may take per turn before the others get theirs (fairness). */
#define PUMP_BUDGET 64
/* Timeouts are checked this often, so they fire at most this late. */
#define SWEEP_MS 200
/* A keep-alive connection idle this long gives its buffers back (10,000 idle connections then
 * hold little memory) while a busy one keeps reusing them. */
#define IDLE_RELEASE_MS 1000
#define MAX_EVENTS 256
/* File descriptors kept out of the visitor cap for origins' pools, the admin listener, controld
 * and the log: each visitor connection counts for two (itself and its origin connection). */
#define FD_RESERVE_MIN 64
/* accept() failing for lack of descriptors or memory pauses the listener this long, doubling up
 * to ACCEPT_BACKOFF_MAX while it keeps failing. */
#define ACCEPT_BACKOFF_MIN 50
#define ACCEPT_BACKOFF_MAX 1000
/* At the stop, each worker accepts at most this many connections from each socket's backlog (the
 * kernel's backlog is 4,096 by default): a steady stream cannot hold the stop. */
#define LAST_ACCEPT_MAX 4096

static void copy_trunc(char *dst, size_t cap, const char *src, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static void set_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Drive c through its phases while it makes progress, at most PUMP_BUDGET steps; a connection
 * still busy then waits on the ready list for its next turn. */
static void v_pump(struct vconn *c) {
  struct worker *w = c->w;
  for (int i = 0; i < PUMP_BUDGET; i++) {
    int prog;
    if (c->closed) return;
    switch (c->phase) {
    case V_HEAD:
      prog = request_step(c);
      break;
    case V_PROXY:
      prog = request_proxy_step(c);
      break;
    case V_LOCAL:
      prog = vconn_step_local(c);
      break;
    case V_AWAIT_ORIGIN:
    case V_RESPONSE:
      prog = relay_step(c);
      break;
    case V_TUNNEL:
      prog = relay_tunnel(c);
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

void worker_update_cap(struct proxy *p) {
  int cap = visitor_cap(p->o.max_connections);
  int old = atomic_exchange_explicit(&p->max_conns, cap, memory_order_relaxed);
  if (cap != old && cap < p->o.max_connections)
    log_warn("visitor connections capped at %d (max-connections %d) by the descriptor limit", cap,
             p->o.max_connections);
}

/* Take the listeners out of epoll until now + ms (and below the cap). */
static void accept_pause(struct worker *w, int64_t ms) {
  if (!w->accept_paused)
    for (int i = 0; i < w->nwl; i++)
      if (w->wl[i].fd >= 0) epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->wl[i].fd, NULL);
  w->accept_paused = 1;
  w->resume_at = w->now + ms;
}

/* Put the listeners back when their pause is over and the cap allows. */
static void accept_maybe_resume(struct worker *w) {
  if (!w->accept_paused || w->stopping || w->now < w->resume_at) return;
  if (atomic_load_explicit(&w->p->n_conns, memory_order_relaxed) >=
      atomic_load_explicit(&w->p->max_conns, memory_order_relaxed)) {
    w->resume_at = w->now + SWEEP_MS; /* still at the cap: look again later, do not spin */
    return;
  }
  for (int i = 0; i < w->nwl; i++) {
    struct epoll_event ev;
    if (w->wl[i].fd < 0) continue;
    ev.events = EPOLLIN | EPOLLEXCLUSIVE;
    ev.data.ptr = &w->wl[i];
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wl[i].fd, &ev) < 0 && errno != EEXIST)
      log_warn("cannot resume accepting: %s", strerror(errno));
  }
  w->accept_paused = 0;
}

/* The client address text of an accepted socket: IPv4 (an IPv4-mapped IPv6 peer too), IPv6, or
 * "unix:" for a Unix socket (as nginx writes it). */
static void peer_text(const struct sockaddr_storage *sa, char *out, size_t cap) {
  if (sa->ss_family == AF_INET) {
    inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)cap);
  } else if (sa->ss_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a))
      inet_ntop(AF_INET, a->s6_addr + 12, out, (socklen_t)cap);
    else
      inet_ntop(AF_INET6, a, out, (socklen_t)cap);
  } else if (sa->ss_family == AF_UNIX) {
    copy_trunc(out, cap, "unix:", 5);
  } else {
    copy_trunc(out, cap, "unknown", 7);
  }
}

/* Accept up to max connections from wl (fewer when the backlog is empty, the cap is reached or
 * accept fails; the last two pause accepting). */
static void accept_some(struct worker *w, struct wlisten *wl, int max) {
  struct proxy *p = w->p;
  int n = 0;
  for (; n < max; n++) {
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    struct vconn *c;
    struct epoll_event ev;
    int fd;
    int cap = atomic_load_explicit(&p->max_conns, memory_order_relaxed);
    if (atomic_load_explicit(&p->n_conns, memory_order_relaxed) >= cap) {
      if (log_every(&p->last_cap_log, w->now, 1000))
        log_warn("visitor connections at the cap (%d): accepting paused", cap);
      accept_pause(w, SWEEP_MS);
      return;
    }
    fd = accept4(wl->fd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
        return;
      /* EMFILE, ENFILE, ENOBUFS, ENOMEM: back off instead of spinning on the ready listener */
      w->accept_backoff = w->accept_backoff ? w->accept_backoff * 2 : ACCEPT_BACKOFF_MIN;
      if (w->accept_backoff > ACCEPT_BACKOFF_MAX) w->accept_backoff = ACCEPT_BACKOFF_MAX;
      if (log_every(&p->last_cap_log, w->now, 1000))
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
    peer_text(&sa, c->ip, sizeof c->ip);
    if (wl->proxy_protocol) {
      /* the PROXY header comes first (docs/design.md#noded-behind-an-edge-cache) */
      if (!(c->pp = malloc(sizeof *c->pp))) {
        vconn_free(c);
        close(fd);
        continue;
      }
      pp_init(c->pp);
      c->phase = V_PROXY;
    }
    if (!wl->is_unix) set_nodelay(fd);
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = c;
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
      vconn_free(c);
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
  case V_PROXY: /* the header timeout counts from accept */
    return now - c->head_start > o->header_timeout_ms;
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
  if ((c->oh.len > 0 || c->uin.sent < c->uin.fwd || c->rout.sent < c->rout.fwd || c->plen > 0) &&
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
    if (w->stopping && (c->phase == V_HEAD || c->phase == V_PROXY)) {
      /* bytes already in the socket are a request to finish, not an idle connection: read
         once more whatever epoll said (its event may wait further down this round's list) */
      if (c->in.len == 0 && !c->peer_eof) c->can_read = 1;
      if (c->in.len == 0 && vconn_read(c) < 0) {
        vconn_close(c);
        continue;
      }
      if (drain_conn_decide(c->phase == V_HEAD && !c->head_start, c->in.len, now,
                            w->stop_deadline) == DRAIN_CONN_CLOSE) {
        vconn_close(c);
        continue;
      }
      if (c->in.len > 0) v_pump(c);
    }
    if ((c->phase == V_HEAD || c->phase == V_PROXY) && c->in.len == 0 && c->in.d &&
        now - c->last_io >= IDLE_RELEASE_MS)
      vconn_release_buffers(c);
    if (r->up && (c->phase == V_AWAIT_ORIGIN || c->phase == V_RESPONSE)) {
      int connecting = r->up->st != UP_READY;
      int waiting_origin =
          c->phase == V_AWAIT_ORIGIN ||
          (!r->ubody.done && (c->spliced > 0 ? c->plen == 0 : c->uin.len < c->uin.cap));
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
          vconn_close(c);
        }
        continue;
      }
    }
    if (visitor_expired(w, c)) {
      if (c->phase == V_PROXY) request_proxy_refused(c, PPE_INCOMPLETE, "no whole header in time");
      vconn_close(c);
    }
  }
  upstream_pool_sweep(w->ups, now, p->o.origin_idle_ms, w->stopping);
  if (w->idx == 0) worker_update_cap(p);
}

static void free_graves(struct worker *w) {
  while (w->vgrave) {
    struct vconn *c = w->vgrave;
    w->vgrave = c->gnext;
    vconn_free(c);
  }
  upstream_reap(w->ups);
}

/* The stop of listening: each worker accepts what the backlogs of the sockets of this process
 * alone hold (at most LAST_ACCEPT_MAX each); the last worker to stop makes each such socket take
 * no new connection (sdlisten_refuse_new), accepts what is left and shuts it down, so a
 * connection the kernel queued before the stop is answered, not reset (closing a listening
 * socket resets its queue, which the filter keeps empty after that last accept). Sockets handed
 * to a new process or received from systemd are left to the process that accepts on them next
 * (docs/design.md, Restarts and upgrades). */
static void begin_stop(struct worker *w) {
  struct proxy *p = w->p;
  int handed_over = atomic_load(&p->keep_paths), last;
  if (w->stopping) return;
  for (int i = 0; i < w->nwl; i++) {
    struct wlisten *wl = &w->wl[i];
    if (wl->fd >= 0 && wl->own && !handed_over) accept_some(w, wl, LAST_ACCEPT_MAX);
  }
  for (int i = 0; i < w->nwl; i++)
    if (w->wl[i].fd >= 0 && !w->accept_paused) epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->wl[i].fd, NULL);
  w->stopping = 1;
  w->stop_deadline = w->now + p->o.stop_grace_ms;
  last = atomic_fetch_add(&p->workers_swept, 1) + 1 == p->nthreads;
  for (int i = 0; i < w->nwl; i++) {
    struct wlisten *wl = &w->wl[i];
    if (wl->fd >= 0 && wl->own && !handed_over && last) {
      /* a TCP socket takes no new connection from here (SYNs dropped: the clients' retries are
         refused after the close), so the accept below empties its queue for good and the
         shutdown resets nobody; a Unix socket's path is gone already (proxy_drain) */
      (void)sdlisten_refuse_new(wl->fd);
      accept_some(w, wl, LAST_ACCEPT_MAX); /* what came since the first pass */
      (void)shutdown(wl->fd, SHUT_RD);
    }
    wl->fd = -1; /* the proxy's socket: closed by proxy_free */
  }
  sweep(w);
}

void *worker_main(void *arg) {
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
        if (!w->stopping && !w->accept_paused && !atomic_load(&w->p->stopping))
          accept_some(w, evs[i].data.ptr, 64); /* at the stop, begin_stop accepts the rest */
      } else if (kind == EV_WAKE) {
        uint64_t v;
        if (read(w->wfd, &v, sizeof v) < 0) { /* nothing */
        }
        if (atomic_load(&w->p->stopping)) begin_stop(w);
        if (atomic_load(&w->p->ending)) w->stop_deadline = w->now;
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
          vconn_close(w->conns);
        free_graves(w);
        break;
      }
    }
  }
  while (w->conns)
    vconn_close(w->conns);
  free_graves(w);
  upstream_pool_sweep(w->ups, w->now, 0, 1); /* drop idle origin connections */
  upstream_reap(w->ups);
  sitecfg_set_unref(w->cfg);
  w->cfg = NULL;
  alog_flush(w->alog);
  atomic_fetch_add(&w->p->workers_done, 1);
  return NULL;
}
