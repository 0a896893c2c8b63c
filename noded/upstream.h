/* upstream — the proxy's origin connections: non-blocking connect, TLS, reads and writes, and
 * one keep-alive pool per worker thread keyed by (scheme, address, port, TLS name). Not
 * thread-safe: each worker owns its own struct upstream. */
#ifndef CDNCA_UPSTREAM_H
#define CDNCA_UPSTREAM_H

#include <openssl/ssl.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

enum up_state { UP_CONNECTING = 0, UP_TLS, UP_READY };

/* Why an attempt to open or use a connection failed. */
enum up_fail { UP_OK = 0, UP_FAIL_CONNECT, UP_FAIL_TLS };

/* One origin connection. The proxy reads the fields marked (r); the module owns the rest. */
struct upconn {
  int kind;      /* (r) the epoll tag of the owner's loop; first member */
  int fd;        /* (r) */
  int can_read;  /* (r/w) edge-triggered readiness, set by the owner's loop */
  int can_write; /* (r/w) */
  int hup;       /* (w) the loop saw the origin's FIN or an error: read until EOF */
  int closed;    /* (r) closed, waiting to be freed with upstream_reap */
  int st;        /* (r) enum up_state */
  int reused;    /* (r) taken from the pool (the origin may have closed it meanwhile) */
  void *owner;   /* (r/w) the visitor connection using it; NULL while pooled */
  SSL *ssl;
  struct upstream *up;
  struct up_pool *pool; /* set while idle in a pool */
  struct upconn *pnext, *pprev, *gnext;
  int64_t idle_since;
};

struct upstream;

/* A TLS client context for origins: TLS >= 1.2, peer verification against ca_file (NULL: the
 * system store). NULL on error (logged). Free with SSL_CTX_free. */
SSL_CTX *upstream_tls_ctx(const char *ca_file);

/* New per-worker upstream set registering its sockets in epfd with tag kind; borrows ssl.
 * max_idle is the pool size per key. NULL on OOM. Free with upstream_free. */
struct upstream *upstream_new(SSL_CTX *ssl, int epfd, int kind, int max_idle);

/* Close every pooled connection, free closed ones and the pools; sets *u to NULL. Connections
 * still owned by a visitor must have been closed before. */
void upstream_free(struct upstream **u);

/* Start a connection to sa; with https, TLS towards tls_name (SNI and name check; an IP
 * literal is checked as an IP). NULL on immediate failure, *fail says which. */
struct upconn *upstream_connect(struct upstream *up, const struct sockaddr *sa, socklen_t salen,
                                int https, const char *tls_name, enum up_fail *fail);

/* Drive connect and TLS handshake. UP_OK when ready or still in progress (see u->st),
 * else the failure. */
enum up_fail upstream_progress(struct upconn *u);

/* Read: >0 bytes, 0 EOF, -1 would block, -2 error. */
ssize_t upstream_read(struct upconn *u, char *b, size_t n);

/* Write: >0 bytes, -1 would block, -2 error. */
ssize_t upstream_write(struct upconn *u, const char *b, size_t n);

/* Close u (also when pooled); its memory is freed by the next upstream_reap. NULL is a no-op. */
void upstream_close(struct upconn *u);

/* Free the connections closed since the last call. */
void upstream_reap(struct upstream *up);

/* The pool key of an origin: scheme, address, port and TLS name, into out[cap]. */
void upstream_key(char *out, size_t cap, int https, const char *address, int port,
                  const char *tls_name);

/* 1 when u has a byte pending (decrypted or on the socket), was closed by the origin or is in
 * error: such a connection is never reused (docs/design.md#the-edge-http-path). */
int upstream_unread(struct upconn *u);

/* Take the most recently used idle connection of key with no unread byte (others are closed);
 * NULL when none. */
struct upconn *upstream_pool_get(struct upstream *up, const char *key);

/* Give u back to the pool of key at now, or close it when the pool is full or stopping is set.
 * The caller pools only after a complete response with nothing left in its own buffer; bytes
 * that arrive later are found by upstream_pool_get (or close it through the idle EPOLLIN). */
void upstream_pool_put(struct upstream *up, struct upconn *u, const char *key, int64_t now,
                       int stopping);

/* Close pooled connections idle longer than idle_ms (all of them with all set). */
void upstream_pool_sweep(struct upstream *up, int64_t now, int64_t idle_ms, int all);

#endif
