/* probenat — one plain HTTP (or tcp) probe on a socket of our own. */
#include "probenat.h"

#include "hcheck.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* Events that mean "something to read": data, the origin's FIN, or an error to collect. */
#define PNAT_INPUT (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)

static int finish(struct pnat *c) {
  if (c->fd >= 0) close(c->fd); /* also leaves the epoll set: the socket is not shared */
  c->fd = -1;
  c->state = PNAT_DONE;
  free(c->pending);
  c->pending = NULL;
  return PNAT_DONE;
}

int pnat_errno_local(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

static void fail_errno(struct pnat *c, const char *what, int err) {
  char eb[96];
  snprintf(c->error, sizeof c->error, "%s%s", what, strerror_r(err, eb, sizeof eb));
}

int pnat_start(struct pnat *c, int epfd, uint64_t tag, const struct sockaddr *sa, socklen_t salen,
               int tcp, int head_only, int keep) {
  struct epoll_event ev;
  memset(c, 0, sizeof *c);
  c->fd = -1;
  c->tcp = tcp ? 1 : 0;
  presp_init(&c->resp, head_only, keep);
  c->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) {
    c->local = pnat_errno_local(errno);
    fail_errno(c, "connect failed: ", errno);
    return finish(c);
  }
  if (connect(c->fd, sa, salen) == 0) {
    c->connected = 1;
  } else if (errno != EINPROGRESS) {
    fail_errno(c, "connect failed: ", errno);
    return finish(c);
  }
  if (c->connected && c->tcp) return finish(c);
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = tag;
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
    c->local = 1;
    fail_errno(c, "internal: epoll_ctl: ", errno);
    return finish(c);
  }
  c->state = c->connected ? PNAT_SENDING : PNAT_CONNECTING;
  return c->state;
}

/* Read until the socket has nothing more for now, the answer is complete or the origin closed.
 * ev: the wake-up's events (a short read with no FIN announced means the socket is drained). */
static int read_all(struct pnat *c, uint32_t ev, char *rbuf, size_t rcap) {
  for (;;) {
    ssize_t k = recv(c->fd, rbuf, rcap, 0);
    if (k > 0) {
      int st = presp_feed(&c->resp, rbuf, (size_t)k);
      if (st == PRESP_DONE || st == PRESP_BAD) return finish(c);
      /* edge-triggered: a read shorter than asked took everything there was; more data or the
         FIN brings a new edge unless this wake-up already announced the FIN */
      if ((size_t)k < rcap && !(ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return c->state;
      continue;
    }
    if (k == 0) {
      presp_eof(&c->resp);
      return finish(c);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return c->state;
    if (c->resp.state == PRESP_HEAD) fail_errno(c, "Recv failure: ", errno);
    return finish(c);
  }
}

/* Write what is left of the request. */
static int write_pending(struct pnat *c, char *rbuf, size_t rcap) {
  while (c->pending_off < c->pending_len) {
    ssize_t k =
        send(c->fd, c->pending + c->pending_off, c->pending_len - c->pending_off, MSG_NOSIGNAL);
    if (k >= 0) {
      c->pending_off += (size_t)k;
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return c->state;
    {
      /* the origin closed early: an answer it sent first still counts */
      int err = errno, st;
      c->state = PNAT_READING;
      st = read_all(c, EPOLLIN | EPOLLRDHUP, rbuf, rcap);
      if (st == PNAT_DONE && c->resp.state != PRESP_BODY && c->resp.state != PRESP_DONE) {
        c->error[0] = '\0';
        fail_errno(c, "Send failure: ", err);
      }
      return st;
    }
  }
  free(c->pending);
  c->pending = NULL;
  c->pending_len = c->pending_off = 0;
  c->state = PNAT_READING;
  return c->state;
}

int pnat_send(struct pnat *c, const char *req, size_t len, uint32_t ev, char *rbuf, size_t rcap) {
  ssize_t k;
  if (c->state != PNAT_SENDING || c->pending) return c->state;
  k = send(c->fd, req, len, MSG_NOSIGNAL);
  if (k == (ssize_t)len) {
    c->state = PNAT_READING;
  } else {
    size_t off = k > 0 ? (size_t)k : 0; /* a failed write is retried, then reported, below */
    c->pending = malloc(len - off);
    if (!c->pending) {
      snprintf(c->error, sizeof c->error, "internal: out of memory");
      return finish(c);
    }
    memcpy(c->pending, req + off, len - off);
    c->pending_len = len - off;
    c->pending_off = 0;
    write_pending(c, rbuf, rcap);
    if (c->state == PNAT_DONE) return PNAT_DONE;
  }
  if (ev & PNAT_INPUT) return read_all(c, ev, rbuf, rcap);
  return c->state;
}

int pnat_event(struct pnat *c, uint32_t ev, char *rbuf, size_t rcap) {
  if (c->state == PNAT_DONE) return PNAT_DONE;
  if (c->state == PNAT_CONNECTING) {
    if (ev & (EPOLLERR | EPOLLHUP)) {
      int err = 0;
      socklen_t l = sizeof err;
      if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err == 0) err = ECONNREFUSED;
      fail_errno(c, "connect failed: ", err);
      return finish(c);
    }
    if (!(ev & EPOLLOUT)) return c->state;
    c->connected = 1;
    if (c->tcp) return finish(c);
    c->state = PNAT_SENDING;
    return c->state; /* the owner writes the request (pnat_send) */
  }
  if (c->state == PNAT_SENDING) {
    if (!c->pending) return c->state;
    if ((ev & EPOLLOUT) && write_pending(c, rbuf, rcap) == PNAT_DONE) return PNAT_DONE;
  }
  if (ev & PNAT_INPUT) return read_all(c, ev, rbuf, rcap);
  return c->state;
}

int pnat_request(struct buf *out, int head, const char *path, const char *host, int port,
                 const char *ua, const struct hcheck_opts *c) {
  /* one append per statement: the operands of | are evaluated in no fixed order */
  int bad = 0, v6 = strchr(host, ':') != NULL;
  bad |= buf_puts(out, head ? "HEAD " : "GET ");
  bad |= buf_puts(out, path);
  bad |= buf_puts(out, " HTTP/1.1\r\nHost: ");
  bad |= buf_puts(out, v6 ? "[" : "");
  bad |= buf_puts(out, host);
  bad |= buf_puts(out, v6 ? "]" : "");
  if (port != 80) {
    bad |= buf_puts(out, ":");
    bad |= buf_put_u64(out, (uint64_t)port);
  }
  bad |= buf_puts(out, "\r\nUser-Agent: ");
  bad |= buf_puts(out, ua);
  bad |= buf_puts(out, "\r\nAccept: */*\r\nConnection: close\r\n");
  for (int i = 0; c && i < c->n_headers; i++) {
    bad |= buf_puts(out, c->headers[i].name);
    bad |= buf_puts(out, ": ");
    bad |= buf_puts(out, c->headers[i].value);
    bad |= buf_puts(out, "\r\n");
  }
  bad |= buf_puts(out, "\r\n");
  return bad ? -1 : 0;
}

void pnat_close(struct pnat *c) {
  finish(c);
}

void pnat_free(struct pnat *c) {
  if (c->state != PNAT_DONE) finish(c);
  free(c->pending);
  c->pending = NULL;
  presp_free(&c->resp);
}
