/* upstream — origin connections (TCP, TLS) and the per-worker keep-alive pools. */
#include "upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "log.h"

/* Pools hash into this many buckets: a node serves tens of origins per worker, so a chain
 * rarely holds more than one pool. */
#define POOL_BUCKETS 256

struct up_pool {
  char key[320];
  struct up_pool *next;
  struct upconn *idle; /* most recently used first */
  int n_idle;
};

struct upstream {
  SSL_CTX *ssl;
  int epfd, kind, max_idle;
  struct up_pool *pools[POOL_BUCKETS];
  struct upconn *grave; /* closed, freed by upstream_reap */
};

SSL_CTX *upstream_tls_ctx(const char *ca_file) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx) return NULL;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF); /* no close_notify: plain EOF */
  if (ca_file ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1
              : SSL_CTX_set_default_verify_paths(ctx) != 1) {
    log_error("cannot load origin CA file %s", ca_file ? ca_file : "(system default)");
    SSL_CTX_free(ctx);
    return NULL;
  }
  return ctx;
}

struct upstream *upstream_new(SSL_CTX *ssl, int epfd, int kind, int max_idle) {
  struct upstream *up = calloc(1, sizeof *up);
  if (!up) return NULL;
  up->ssl = ssl;
  up->epfd = epfd;
  up->kind = kind;
  up->max_idle = max_idle;
  return up;
}

void upstream_free(struct upstream **upp) {
  struct upstream *up = *upp;
  if (!up) return;
  for (int b = 0; b < POOL_BUCKETS; b++) {
    struct up_pool *pl = up->pools[b], *pn;
    for (; pl; pl = pn) {
      pn = pl->next;
      while (pl->idle)
        upstream_close(pl->idle);
      free(pl);
    }
    up->pools[b] = NULL;
  }
  upstream_reap(up);
  free(up);
  *upp = NULL;
}

static void set_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct upconn *upstream_connect(struct upstream *up, const struct sockaddr *sa, socklen_t salen,
                                int https, const char *tls_name, enum up_fail *fail) {
  struct upconn *u = NULL;
  struct epoll_event ev;
  int fd, rc;
  *fail = UP_FAIL_CONNECT;
  fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return NULL;
  set_nodelay(fd);
  rc = connect(fd, sa, salen);
  if (rc < 0 && errno != EINPROGRESS) {
    close(fd);
    return NULL;
  }
  if (!(u = calloc(1, sizeof *u))) {
    close(fd);
    return NULL;
  }
  u->kind = up->kind;
  u->fd = fd;
  u->up = up;
  u->st = rc == 0 ? (https ? UP_TLS : UP_READY) : UP_CONNECTING;
  u->can_write = rc == 0;
  if (https) {
    *fail = UP_FAIL_TLS;
    if (!(u->ssl = SSL_new(up->ssl)) || SSL_set_fd(u->ssl, fd) != 1) goto fail;
    SSL_set_connect_state(u->ssl);
    if (tls_name && *tls_name) {
      unsigned char tmp[16];
      if (inet_pton(AF_INET, tls_name, tmp) == 1 || inet_pton(AF_INET6, tls_name, tmp) == 1) {
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(u->ssl), tls_name) != 1) goto fail;
      } else {
        if (SSL_set_tlsext_host_name(u->ssl, tls_name) != 1 || SSL_set1_host(u->ssl, tls_name) != 1)
          goto fail;
      }
    }
  }
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = u;
  if (epoll_ctl(up->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) goto fail;
  return u;
fail:
  if (u->ssl) SSL_free(u->ssl);
  close(fd);
  free(u);
  return NULL;
}

enum up_fail upstream_progress(struct upconn *u) {
  if (u->st == UP_CONNECTING) {
    int err = 0;
    socklen_t len = sizeof err;
    if (!u->can_write && !u->can_read) return UP_OK;
    if (getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    if (err == EINPROGRESS || err == EALREADY) return UP_OK;
    if (err) return UP_FAIL_CONNECT;
    if (!u->can_write) return UP_OK;
    u->st = u->ssl ? UP_TLS : UP_READY;
  }
  if (u->st == UP_TLS) {
    int rc, e;
    ERR_clear_error();
    rc = SSL_do_handshake(u->ssl);
    if (rc == 1) {
      u->st = UP_READY;
      return UP_OK;
    }
    e = SSL_get_error(u->ssl, rc);
    if (e == SSL_ERROR_WANT_READ)
      u->can_read = 0;
    else if (e == SSL_ERROR_WANT_WRITE)
      u->can_write = 0;
    else {
      const char *why = ERR_reason_error_string(ERR_peek_last_error());
      log_warn("TLS handshake with an origin failed: %s", why ? why : "error");
      return UP_FAIL_TLS;
    }
  }
  return UP_OK;
}

ssize_t upstream_read(struct upconn *u, char *b, size_t n) {
  if (u->ssl) {
    int r, e;
    ERR_clear_error();
    r = SSL_read(u->ssl, b, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0) return r;
    e = SSL_get_error(u->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
      u->can_read = 0;
    else if (e == SSL_ERROR_WANT_WRITE)
      u->can_write = 0;
    else if (e == SSL_ERROR_ZERO_RETURN)
      return 0;
    else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0)
      return 0;
    else
      return -2;
    return -1;
  } else {
    ssize_t r = recv(u->fd, b, n, 0);
    if (r > 0 && (size_t)r < n && !u->hup) u->can_read = 0; /* drained: wait for the next edge */
    if (r >= 0) return r;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      u->can_read = 0;
      return -1;
    }
    if (errno == EINTR) return -1;
    return -2;
  }
}

ssize_t upstream_write(struct upconn *u, const char *b, size_t n) {
  if (u->ssl) {
    int r, e;
    ERR_clear_error();
    r = SSL_write(u->ssl, b, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0) return r;
    e = SSL_get_error(u->ssl, r);
    if (e == SSL_ERROR_WANT_WRITE)
      u->can_write = 0;
    else if (e == SSL_ERROR_WANT_READ)
      u->can_read = 0;
    else
      return -2;
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

void upstream_close(struct upconn *u) {
  if (!u || u->closed) return;
  if (u->pool) {
    if (u->pprev)
      u->pprev->pnext = u->pnext;
    else
      u->pool->idle = u->pnext;
    if (u->pnext) u->pnext->pprev = u->pprev;
    u->pool->n_idle--;
    u->pool = NULL;
  }
  if (u->ssl) {
    SSL_free(u->ssl);
    u->ssl = NULL;
  }
  if (u->fd >= 0) {
    epoll_ctl(u->up->epfd, EPOLL_CTL_DEL, u->fd, NULL); /* as vconn_close: a forked copy */
    close(u->fd);
  }
  u->fd = -1;
  u->closed = 1;
  u->owner = NULL;
  u->gnext = u->up->grave;
  u->up->grave = u;
}

void upstream_reap(struct upstream *up) {
  while (up->grave) {
    struct upconn *u = up->grave;
    up->grave = u->gnext;
    free(u);
  }
}

void upstream_key(char *out, size_t cap, int https, const char *address, int port,
                  const char *tls_name) {
  snprintf(out, cap, "%c|%s|%d|%s", https ? 's' : 'h', address, port, https ? tls_name : "");
}

static unsigned key_hash(const char *k) {
  unsigned h = 2166136261u;
  for (; *k; k++)
    h = (h ^ (unsigned char)*k) * 16777619u;
  return h % POOL_BUCKETS;
}

static struct up_pool *pool_find(struct upstream *up, const char *key, int create) {
  unsigned h = key_hash(key);
  struct up_pool *pl;
  size_t n = strlen(key);
  for (pl = up->pools[h]; pl; pl = pl->next)
    if (strcmp(pl->key, key) == 0) return pl;
  if (!create || n >= sizeof pl->key || !(pl = calloc(1, sizeof *pl))) return NULL;
  memcpy(pl->key, key, n + 1);
  pl->next = up->pools[h];
  up->pools[h] = pl;
  return pl;
}

int upstream_unread(struct upconn *u) {
  char b;
  ssize_t r;
  if (u->ssl && SSL_pending(u->ssl) > 0) return 1;
  r = recv(u->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r >= 0) return 1; /* a byte, or the origin closed */
  return errno != EAGAIN && errno != EWOULDBLOCK;
}

struct upconn *upstream_pool_get(struct upstream *up, const char *key) {
  struct up_pool *pl = pool_find(up, key, 0);
  struct upconn *u;
  while (pl && pl->idle) {
    u = pl->idle;
    pl->idle = u->pnext;
    if (u->pnext) u->pnext->pprev = NULL;
    pl->n_idle--;
    u->pool = NULL;
    u->pnext = u->pprev = NULL;
    if (upstream_unread(u)) { /* bytes after a complete response, or closed: never reused */
      upstream_close(u);
      continue;
    }
    u->reused = 1;
    return u;
  }
  return NULL;
}

void upstream_pool_put(struct upstream *up, struct upconn *u, const char *key, int64_t now,
                       int stopping) {
  struct up_pool *pl = pool_find(up, key, 1);
  if (!pl || pl->n_idle >= up->max_idle || stopping) {
    upstream_close(u);
    return;
  }
  u->owner = NULL;
  u->idle_since = now;
  u->pool = pl;
  u->pprev = NULL;
  u->pnext = pl->idle;
  if (pl->idle) pl->idle->pprev = u;
  pl->idle = u;
  pl->n_idle++;
}

void upstream_pool_sweep(struct upstream *up, int64_t now, int64_t idle_ms, int all) {
  for (int b = 0; b < POOL_BUCKETS; b++)
    for (struct up_pool *pl = up->pools[b]; pl; pl = pl->next) {
      struct upconn *u = pl->idle, *un;
      for (; u; u = un) {
        un = u->pnext;
        if (all || now - u->idle_since > idle_ms) upstream_close(u);
      }
    }
}
