/* Tests for the edge rules of noded/proxy (docs/design.md#the-edge-http-path), one per defect of
 * the visitor path: the proxy runs in-process on 127.0.0.1; the origin is a scripted thread that
 * records every byte it receives and answers by path. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "log.h"
#include "proxy.h"
#include "sitecfg.h"

/* ---------- scripted origin ---------- */

#define MAX_CONNS 64
#define LOG_CAP (1 << 20)

struct origin {
  int fd, port;
  pthread_t th;
  atomic_int stop;
  atomic_int tails; /* /big-extra answers whose bytes after the body are sent */
  pthread_mutex_t mu;
  char log[LOG_CAP]; /* every byte received, all connections */
  size_t log_len;
  int requests; /* request heads seen */
  pthread_t conn_th[MAX_CONNS];
  int n_conn;
};

struct conn_arg {
  struct origin *o;
  int fd;
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int sends(int fd, const char *s) {
  return send_all(fd, s, strlen(s));
}

/* recv with a poll timeout: >0 bytes, 0 EOF, -1 error, -2 timeout. */
static ssize_t recv_wait(int fd, char *b, size_t n, int ms) {
  struct pollfd pfd = {fd, POLLIN, 0};
  int r = poll(&pfd, 1, ms);
  if (r == 0) return -2;
  if (r < 0) return -1;
  return recv(fd, b, n, 0);
}

static void origin_record(struct origin *o, const char *b, size_t n) {
  pthread_mutex_lock(&o->mu);
  if (o->log_len + n < LOG_CAP) {
    memcpy(o->log + o->log_len, b, n);
    o->log_len += n;
  }
  pthread_mutex_unlock(&o->mu);
}

/* A large length-framed body (spliced by the proxy): byte i is big_byte(i). Larger than what a
 * loopback TCP connection holds while its visitor reads nothing (the proxy's send buffer starts
 * near 1.3 MiB there, ten segments of 64 KiB, plus the visitor's 128 KiB receive buffer), so the
 * proxy's moves to a visitor that pauses come up short and then say EAGAIN. */
#define BIG_LEN (4 * 1024 * 1024 + 7)
static char big_byte(size_t i) {
  return (char)('a' + i % 23);
}

/* Head, then n of the BIG_LEN body bytes in pieces with pauses (the proxy sees the socket
 * drained many times), then tail with no pause. */
static int send_big(int fd, size_t n, const char *tail) {
  static __thread char piece[100000];
  char head[128];
  int hn = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BIG_LEN);
  if (send_all(fd, head, (size_t)hn) < 0) return -1;
  for (size_t off = 0; off < n;) {
    size_t k = n - off < sizeof piece ? n - off : sizeof piece;
    for (size_t i = 0; i < k; i++)
      piece[i] = big_byte(off + i);
    if (send_all(fd, piece, k) < 0) return -1;
    off += k;
    if (off < n || !tail) sleep_ms(2);
  }
  return tail ? sends(fd, tail) : 0; /* right after the last body byte */
}

/* Answer one request head (path, method) on fd; returns 0, or -1 to close. */
static int origin_answer(struct origin *o, int fd, const char *method, const char *path,
                         const char *head, char *buf, size_t *len) {
  if (strcmp(path, "/head-body") == 0) {
    /* a HEAD answer followed by body bytes: must never reach the next visitor */
    return sends(fd, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPOISON");
  }
  if (strcmp(path, "/big") == 0) return send_big(fd, BIG_LEN, NULL);
  /* bytes after the body: must never reach the next visitor */
  if (strcmp(path, "/big-extra") == 0) {
    int r = send_big(fd, BIG_LEN, "POISON");
    atomic_fetch_add(&o->tails, 1);
    return r;
  }
  if (strcmp(path, "/big-short") == 0) { /* half the body, then the close */
    send_big(fd, BIG_LEN / 2, NULL);
    return -1;
  }
  if (strcmp(path, "/early") == 0)
    return sends(fd, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
                     "HTTP/1.1 102 Processing\r\n\r\n"
                     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  if (strcmp(path, "/gzip-te") == 0)
    return sends(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                     "3\r\nabc\r\n0\r\n\r\n");
  if (strcmp(path, "/chunked") == 0)
    return sends(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "5;name=\"v a\"\r\nhello\r\n7 ; x = y\r\n, world\r\n0\r\nX-T: 1\r\n\r\n");
  if (strcmp(path, "/chunked-lf") == 0)
    return sends(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "5\nhello\r\n0\r\n\r\n");
  if (strcmp(path, "/ws") == 0 && strstr(head, "\r\nUpgrade: websocket\r\n")) {
    if (sends(fd, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                  "Connection: Upgrade\r\n\r\n"))
      return -1;
    /* echo until the peer closes */
    for (;;) {
      ssize_t r;
      if (*len) {
        origin_record(o, buf, *len);
        if (send_all(fd, buf, *len) < 0) return -1;
        *len = 0;
      }
      r = recv_wait(fd, buf, 4096, 100);
      if (r == -2) {
        if (atomic_load(&o->stop)) return -1;
        continue;
      }
      if (r <= 0) return -1;
      *len = (size_t)r;
    }
  }
  {
    char resp[256];
    int n = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(path) + 5, "from ");
    if (send_all(fd, resp, (size_t)n) < 0) return -1;
    if (strcmp(method, "HEAD") == 0) return 0;
    return sends(fd, path);
  }
}

/* Origin side of one connection: heads end at CRLF CRLF; bodies by Content-Length or chunked
 * (the proxy's canonical framing); every byte is recorded. */
static void *origin_conn(void *arg) {
  struct conn_arg *ca = arg;
  struct origin *o = ca->o;
  int fd = ca->fd;
  static __thread char buf[65536];
  size_t len = 0;
  free(ca);
  for (;;) {
    char *end, method[16] = "", path[256] = "", head[8192];
    size_t hl, cl = 0;
    char *p;
    while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
      ssize_t r = recv_wait(fd, buf + len, sizeof buf - len, 100);
      if (r == -2) {
        if (atomic_load(&o->stop)) goto out;
        continue;
      }
      if (r <= 0) goto out;
      origin_record(o, buf + len, (size_t)r);
      len += (size_t)r;
    }
    hl = (size_t)(end - buf) + 4;
    memcpy(head, buf, hl < sizeof head - 1 ? hl : sizeof head - 1);
    head[hl < sizeof head - 1 ? hl : sizeof head - 1] = '\0';
    pthread_mutex_lock(&o->mu);
    o->requests++;
    pthread_mutex_unlock(&o->mu);
    sscanf(buf, "%15s %255s", method, path);
    for (p = head; *p; p++)
      if (strncasecmp(p, "\r\nContent-Length:", 17) == 0) cl = strtoul(p + 17, NULL, 10);
    if (strstr(head, "\r\nTransfer-Encoding: chunked\r\n")) {
      /* wait for the last chunk */
      while (!memmem(buf + hl, len - hl, "0\r\n\r\n", 5)) {
        ssize_t r = recv_wait(fd, buf + len, sizeof buf - len, 5000);
        if (r <= 0) goto out;
        origin_record(o, buf + len, (size_t)r);
        len += (size_t)r;
      }
      cl = (size_t)((char *)memmem(buf + hl, len - hl, "0\r\n\r\n", 5) + 5 - (buf + hl));
    }
    while (len < hl + cl) {
      ssize_t r = recv_wait(fd, buf + len, sizeof buf - len, 5000);
      if (r <= 0) goto out;
      origin_record(o, buf + len, (size_t)r);
      len += (size_t)r;
    }
    memmove(buf, buf + hl + cl, len - hl - cl);
    len -= hl + cl;
    if (origin_answer(o, fd, method, path, head, buf, &len) < 0) goto out;
  }
out:
  close(fd);
  return NULL;
}

static void *origin_main(void *arg) {
  struct origin *o = arg;
  while (!atomic_load(&o->stop)) {
    struct pollfd pfd = {o->fd, POLLIN, 0};
    int fd;
    struct conn_arg *ca;
    if (poll(&pfd, 1, 50) <= 0) continue;
    fd = accept(o->fd, NULL, NULL);
    if (fd < 0) continue;
    pthread_mutex_lock(&o->mu);
    ca = malloc(sizeof *ca);
    ca->o = o;
    ca->fd = fd;
    if (o->n_conn < MAX_CONNS && pthread_create(&o->conn_th[o->n_conn], NULL, origin_conn, ca) == 0)
      o->n_conn++;
    else {
      free(ca);
      close(fd);
    }
    pthread_mutex_unlock(&o->mu);
  }
  return NULL;
}

static int listen_any(int *port) {
  struct sockaddr_in sa;
  socklen_t sl = sizeof sa;
  int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 128) < 0) {
    close(fd);
    return -1;
  }
  getsockname(fd, (struct sockaddr *)&sa, &sl);
  *port = ntohs(sa.sin_port);
  return fd;
}

static struct origin *origin_start(void) {
  struct origin *o = calloc(1, sizeof *o);
  assert_non_null(o);
  pthread_mutex_init(&o->mu, NULL);
  o->fd = listen_any(&o->port);
  assert_true(o->fd >= 0);
  assert_int_equal(pthread_create(&o->th, NULL, origin_main, o), 0);
  return o;
}

static void origin_stop(struct origin *o) {
  atomic_store(&o->stop, 1);
  pthread_join(o->th, NULL);
  close(o->fd);
  for (int i = 0; i < o->n_conn; i++)
    pthread_join(o->conn_th[i], NULL);
  pthread_mutex_destroy(&o->mu);
  free(o);
}

/* 1 when the origin received needle (after waiting up to ms for it). */
static int origin_saw(struct origin *o, const char *needle, int ms) {
  int64_t until = now_ms() + ms;
  do {
    int hit;
    pthread_mutex_lock(&o->mu);
    hit = memmem(o->log, o->log_len, needle, strlen(needle)) != NULL;
    pthread_mutex_unlock(&o->mu);
    if (hit) return 1;
    if (ms) sleep_ms(20);
  } while (now_ms() < until);
  return 0;
}

static int origin_requests(struct origin *o) {
  int n;
  pthread_mutex_lock(&o->mu);
  n = o->requests;
  pthread_mutex_unlock(&o->mu);
  return n;
}

/* A port nothing listens on. */
static int dead_port(void) {
  int port, fd = listen_any(&port);
  close(fd);
  return port;
}

/* ---------- the proxy ---------- */

struct fx {
  struct origin *o;
  struct proxy *p;
  int port;
};

static struct proxy *start_proxy(int live_port, const struct proxy_opts *oo, int *port) {
  char doc[4096], err[256];
  struct proxy_opts o;
  struct proxy *p;
  struct sitecfg_set *s;
  snprintf(
      doc, sizeof doc,
      "{\"seq\": 1, \"full\": true, \"sites\": ["
      "{\"id\": 1, \"name\": \"demo\", \"hostnames\": [\"demo.test\"], \"config_version\": 1,"
      " \"current_level\": 1, \"origins\": [{\"id\": 1, \"level\": 1, \"address\": "
      "\"127.0.0.1\", \"port\": %d, \"scheme\": \"http\", \"host_header\": null, \"weight\": 1}]},"
      "{\"id\": 2, \"name\": \"dead\", \"hostnames\": [\"dead.test\"], \"config_version\": 1,"
      " \"current_level\": 1, \"origins\": [{\"id\": 2, \"level\": 1, \"address\": "
      "\"127.0.0.1\", \"port\": %d, \"scheme\": \"http\", \"host_header\": null, \"weight\": 1}]}"
      "]}",
      live_port, dead_port());
  s = sitecfg_load(doc, strlen(doc), err, sizeof err);
  if (!s) fprintf(stderr, "config: %s\n", err);
  assert_non_null(s);
  if (oo) {
    o = *oo;
  } else {
    proxy_opts_default(&o);
  }
  o.listen = "127.0.0.1:0";
  o.threads = 1;
  o.stop_grace_ms = 1000;
  o.connect_timeout_ms = 1000;
  o.origin_timeout_ms = 5000;
  p = proxy_new(&o);
  assert_non_null(p);
  assert_int_equal(proxy_set_config(p, s), 0);
  sitecfg_set_unref(s);
  assert_int_equal(proxy_start(p), 0);
  *port = proxy_port(p);
  return p;
}

static int setup_opts(void **state, const struct proxy_opts *o) {
  struct fx *f = calloc(1, sizeof *f);
  f->o = origin_start();
  f->p = start_proxy(f->o->port, o, &f->port);
  *state = f;
  return 0;
}

static int setup(void **state) {
  return setup_opts(state, NULL);
}

static int setup_short(void **state) {
  struct proxy_opts o;
  proxy_opts_default(&o);
  o.header_timeout_ms = 600;
  o.keepalive_timeout_ms = 500;
  o.body_timeout_ms = 500;
  o.max_connections = 4;
  return setup_opts(state, &o);
}

static int teardown(void **state) {
  struct fx *f = *state;
  proxy_free(&f->p);
  origin_stop(f->o);
  free(f);
  return 0;
}

/* ---------- visitor side ---------- */

static int client(int port) {
  struct sockaddr_in sa;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Everything the proxy sends on fd until it closes or stays silent for quiet_ms. *closed is set
 * when it closed. Returns the NUL-terminated bytes (caller frees). */
static char *read_all(int fd, int quiet_ms, int *closed, size_t *n_out) {
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap + 1);
  *closed = 0;
  for (;;) {
    ssize_t r = recv_wait(fd, b + n, cap - n, quiet_ms);
    if (r == -2) break;
    if (r <= 0) {
      *closed = 1;
      break;
    }
    n += (size_t)r;
    if (n == cap) break;
  }
  b[n] = '\0';
  if (n_out) *n_out = n;
  return b;
}

/* Count "HTTP/1.1 " status lines in s. */
static int n_responses(const char *s) {
  int k = 0;
  for (const char *p = s; (p = strstr(p, "HTTP/1.1 ")); p += 9)
    k++;
  return k;
}

/* The body of the chunked response in s, decoded in place, when its chunks are canonical
 * (lowercase hex size, CRLF, data, CRLF; "0" CRLF CRLF last, nothing after); else "".*/
static char *dechunk(char *s) {
  char *p = strstr(s, "\r\n\r\n"), *w, *body;
  if (!p) return "";
  p += 4;
  w = body = p;
  for (;;) {
    char *e;
    unsigned long n = strtoul(p, &e, 16);
    if (e == p || strncmp(e, "\r\n", 2) != 0) return "";
    if (n == 0) {
      if (strcmp(e, "\r\n\r\n") != 0) return "";
      *w = '\0';
      return body;
    }
    e += 2;
    if (strlen(e) < n + 2 || strncmp(e + n, "\r\n", 2) != 0) return "";
    memmove(w, e, n);
    w += n;
    p = e + n + 2;
  }
}

/* Send req on a new connection; return what came back within quiet_ms of silence. */
static char *exchange(int port, const char *req, int quiet_ms, int *closed) {
  int fd = client(port);
  char *out;
  assert_true(fd >= 0);
  assert_int_equal(sends(fd, req), 0);
  out = read_all(fd, quiet_ms, closed, NULL);
  close(fd);
  return out;
}

/* ---------- tests ---------- */

/* Defect 1: a request body is never run as the next request after a local 502/504. */
static void test_local_answer_ends_body(void **state) {
  struct fx *f = *state;
  int closed;
  char *out;
  static const char smuggle[] = "GET /SMUGGLED HTTP/1.1\r\nHost: demo.test\r\n\r\n";
  char req[512];
  snprintf(req, sizeof req,
           "POST /upload HTTP/1.1\r\nHost: dead.test\r\nContent-Length: %zu\r\n\r\n%s",
           strlen(smuggle), smuggle);
  out = exchange(f->port, req, 1500, &closed);
  assert_int_equal(n_responses(out), 1);
  assert_non_null(strstr(out, "HTTP/1.1 502 "));
  free(out);
  /* chunked: the same request inside a chunk */
  snprintf(req, sizeof req,
           "POST /upload HTTP/1.1\r\nHost: dead.test\r\nTransfer-Encoding: chunked\r\n\r\n"
           "%zx\r\n%s\r\n0\r\n\r\n",
           strlen(smuggle), smuggle);
  out = exchange(f->port, req, 1500, &closed);
  assert_int_equal(n_responses(out), 1);
  assert_non_null(strstr(out, "HTTP/1.1 502 "));
  free(out);
  /* a body not complete when noded answers: the connection closes */
  out = exchange(f->port,
                 "POST /upload HTTP/1.1\r\nHost: dead.test\r\nContent-Length: 100\r\n\r\n"
                 "GET /SMUGGLED HTTP/1.1\r\nHost: demo.test\r\n\r\n",
                 1500, &closed);
  assert_int_equal(n_responses(out), 1);
  assert_non_null(strstr(out, "Connection: close\r\n"));
  assert_true(closed);
  free(out);
  assert_false(origin_saw(f->o, "SMUGGLED", 300));
  assert_int_equal(origin_requests(f->o), 0);
  /* an honest client: a complete body, then its next request is served */
  out = exchange(f->port,
                 "POST /upload HTTP/1.1\r\nHost: dead.test\r\nContent-Length: 3\r\n\r\nabc"
                 "GET /next HTTP/1.1\r\nHost: demo.test\r\n\r\n",
                 1000, &closed);
  assert_int_equal(n_responses(out), 2);
  assert_non_null(strstr(out, "from /next"));
  free(out);
  assert_int_equal(origin_requests(f->o), 1);
}

/* Defect 2: chunk lines end only at CRLF; extensions are tokens or quoted strings; what the
 * origin receives is canonical chunks. */
static void test_strict_chunked_request(void **state) {
  struct fx *f = *state;
  static const char *const bad[] = {
      "5\nhello\r\n0\r\n\r\n",               /* bare LF after the size */
      "5\r\nhello\n0\r\n\r\n",               /* bare LF after the data */
      "5 junk\r\nhello\r\n0\r\n\r\n",        /* junk after the size */
      "2;\nxx\r\n0\r\n\r\n",                 /* empty extension, bare LF */
      "5;a=\"x\x01\"\r\nhello\r\n0\r\n\r\n", /* control byte in a quoted value */
      "5\r\nhello\r\n0\r\nX: 1\n\r\n",       /* bare LF in a trailer */
      "5\r\nhello\r\n0\r\n\n",               /* bare LF at the end */
      "0x5\r\nhello\r\n0\r\n\r\n",           /* not hex digits */
      "5\rhello\r\n0\r\n\r\n",               /* bare CR */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char req[512];
    int closed;
    char *out;
    snprintf(req, sizeof req,
             "POST /c%zu HTTP/1.1\r\nHost: demo.test\r\nTransfer-Encoding: chunked\r\n\r\n%s"
             "GET /after HTTP/1.1\r\nHost: demo.test\r\n\r\n",
             i, bad[i]);
    out = exchange(f->port, req, 1500, &closed);
    if (!strstr(out, "HTTP/1.1 400 ") || n_responses(out) != 1 || !closed)
      fail_msg("case %zu: %s", i, out);
    free(out);
  }
  assert_false(origin_saw(f->o, "/after", 200));
  {
    int closed;
    char *out = exchange(f->port,
                         "POST /good HTTP/1.1\r\nHost: demo.test\r\nTransfer-Encoding: chunked\r\n"
                         "\r\n5;name=\"q\\\"v\" ; b = c\r\nhello\r\n000\r\nX-Trailer: t\r\n\r\n",
                         1000, &closed);
    assert_non_null(strstr(out, "from /good"));
    free(out);
    assert_true(origin_saw(f->o, "\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 1000));
    assert_false(origin_saw(f->o, "name=", 0));
    assert_false(origin_saw(f->o, "X-Trailer", 0));
  }
}

/* Defect 2, responses: chunks are re-framed; bare LF from the origin never completes. */
static void test_response_reframed(void **state) {
  struct fx *f = *state;
  int closed;
  char *out = exchange(f->port, "GET /chunked HTTP/1.1\r\nHost: demo.test\r\n\r\n", 800, &closed);
  if (!strstr(out, "Transfer-Encoding: chunked\r\n") || strcmp(dechunk(out), "hello, world") != 0)
    fail_msg("%s", out);
  assert_null(strstr(out, "name="));
  assert_null(strstr(out, "X-T"));
  free(out);
  /* an HTTP/1.0 visitor gets the decoded body, delimited by the close */
  out = exchange(f->port, "GET /chunked HTTP/1.0\r\nHost: demo.test\r\n\r\n", 800, &closed);
  assert_non_null(strstr(out, "\r\n\r\nhello, world"));
  assert_true(closed);
  free(out);
  out = exchange(f->port, "GET /chunked-lf HTTP/1.1\r\nHost: demo.test\r\n\r\n", 800, &closed);
  assert_true(closed);
  assert_null(strstr(out, "hello"));
  free(out);
  /* a coding other than chunked: 502 */
  out = exchange(f->port, "GET /gzip-te HTTP/1.1\r\nHost: demo.test\r\n\r\n", 800, &closed);
  assert_non_null(strstr(out, "HTTP/1.1 502 "));
  assert_null(strstr(out, "abc"));
  free(out);
}

/* Defects 2-3: framing headers and targets noded refuses, status by row; the connection
 * closes after each. */
static void test_refused_heads(void **state) {
  struct fx *f = *state;
  static const struct {
    const char *req;
    int status;
  } rows[] = {
      {"POST / HTTP/1.1\r\nHost: demo.test\r\nContent-Length: 3\r\nTransfer-Encoding: "
       "chunked\r\n\r\n",
       400},
      {"POST / HTTP/1.1\r\nHost: demo.test\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: demo.test\r\nContent-Length: 3, 3\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: demo.test\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: demo.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
       "chunked\r\n\r\n",
       400},
      {"POST / HTTP/1.1\r\nHost: demo.test\r\nTransfer-Encoding: \"chunked\"\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: demo.test\r\nTransfer-Encoding: chunked;q=1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: demo.test\r\nTransfer-Encoding: xchunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nHost: demo.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nHost: demo.test\r\nTransfer-Encoding : chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: demo.test\r\nX: a\r\n b\r\n\r\n", 400},
      {"GET http://demo.test:80?/admin HTTP/1.1\r\nHost: demo.test:80?\r\n\r\n", 400},
      {"CONNECT demo.test:443 HTTP/1.1\r\nHost: demo.test:443\r\n\r\n", 400},
      {"GET demo.test:80 HTTP/1.1\r\nHost: demo.test\r\n\r\n", 400},
      {"GET * HTTP/1.1\r\nHost: demo.test\r\n\r\n", 400},
      {"GET ftp://demo.test/ HTTP/1.1\r\nHost: demo.test\r\n\r\n", 400},
      {"GET http://user@demo.test/ HTTP/1.1\r\nHost: demo.test\r\n\r\n", 400},
      {"GET http:///x HTTP/1.1\r\nHost: demo.test\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: demo.test/x\r\n\r\n", 400},
      {"GET /a\xc3\xa9 HTTP/1.1\r\nHost: demo.test\r\n\r\n", 400},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    int closed;
    char want[32];
    char *out = exchange(f->port, rows[i].req, 1500, &closed);
    snprintf(want, sizeof want, "HTTP/1.1 %d ", rows[i].status);
    if (strncmp(out, want, strlen(want)) != 0 || !closed) fail_msg("row %zu: %s", i, out);
    free(out);
  }
  assert_int_equal(origin_requests(f->o), 0);
}

/* Defect 3: absolute-form targets per RFC 9112 §3.2; OPTIONS * is forwarded. */
static void test_absolute_form(void **state) {
  struct fx *f = *state;
  int closed;
  char *out = exchange(f->port,
                       "GET http://demo.test:80?/admin HTTP/1.1\r\nHost: demo.test\r\n"
                       "Connection: close\r\n\r\n",
                       1000, &closed);
  assert_non_null(strstr(out, "HTTP/1.1 200 "));
  free(out);
  assert_true(origin_saw(f->o, "GET /?/admin HTTP/1.1\r\n", 1000));
  assert_true(origin_saw(f->o, "\r\nHost: demo.test:80\r\n", 0));
  out = exchange(f->port, "OPTIONS * HTTP/1.1\r\nHost: demo.test\r\nConnection: close\r\n\r\n",
                 1000, &closed);
  free(out);
  assert_true(origin_saw(f->o, "OPTIONS * HTTP/1.1\r\n", 1000));
}

/* Defect 4: bytes an origin sends after a complete response never reach another visitor. */
static void test_pool_not_poisoned(void **state) {
  struct fx *f = *state;
  for (int i = 0; i < 4; i++) {
    int closed;
    char *out =
        exchange(f->port, "HEAD /head-body HTTP/1.1\r\nHost: demo.test\r\n\r\n", 300, &closed);
    assert_non_null(strstr(out, "HTTP/1.1 200 "));
    assert_null(strstr(out, "POISON"));
    free(out);
    out = exchange(f->port, "GET /next HTTP/1.1\r\nHost: demo.test\r\n\r\n", 300, &closed);
    if (strncmp(out, "HTTP/1.1 200 ", 13) != 0 || !strstr(out, "from /next") ||
        strstr(out, "POISON"))
      fail_msg("try %d: %s", i, out);
    free(out);
  }
}

/* Read one response with a BIG_LEN body from fd, pausing PAUSE_MS after its first bytes (the
 * visitor's socket fills and the proxy waits for its next write edge), then as fast as the
 * socket gives; 0 when the head and every body byte are right. */
#define PAUSE_MS 300
static int read_big(int fd, size_t *got) {
  char *b = malloc(BIG_LEN + 4096), cl[64];
  size_t n = 0, hl = 0;
  int bad = 0;
  *got = 0;
  for (;;) {
    char *e;
    ssize_t r = recv_wait(fd, b + n, BIG_LEN + 4096 - n, 2000);
    if (r <= 0) break;
    if (n == 0) sleep_ms(PAUSE_MS);
    n += (size_t)r;
    if (!hl && (e = memmem(b, n, "\r\n\r\n", 4))) hl = (size_t)(e - b) + 4;
    if (hl && n >= hl + BIG_LEN) break;
  }
  snprintf(cl, sizeof cl, "\r\nContent-Length: %d\r\n", BIG_LEN);
  if (!hl || strncmp(b, "HTTP/1.1 200 ", 13) != 0 || !memmem(b, hl, cl, strlen(cl))) bad = 1;
  if (hl) {
    *got = n - hl;
    for (size_t i = 0; !bad && i < n - hl && i < BIG_LEN; i++)
      if (b[hl + i] != big_byte(i)) bad = 1;
    if (n - hl != BIG_LEN) bad = 1;
  }
  free(b);
  return bad ? -1 : 0;
}

/* docs/design.md#the-edge-http-path, Splice: a large length-framed body reaches, whole, a visitor
 * that pauses; the keep-alive connection goes on, bytes after the body never reach anybody, and a
 * body cut short closes the visitor's connection. */
static void test_spliced_body(void **state) {
  struct fx *f = *state;
  for (int i = 0; i < 3; i++) {
    int fd = client(f->port), closed;
    size_t got;
    char *out;
    assert_true(fd >= 0);
    assert_int_equal(sends(fd, "GET /big HTTP/1.1\r\nHost: demo.test\r\n\r\n"), 0);
    if (read_big(fd, &got) < 0) fail_msg("try %d: %zu body bytes, or wrong ones", i, got);
    assert_int_equal(sends(fd, "GET /next HTTP/1.1\r\nHost: demo.test\r\n\r\n"), 0);
    out = read_all(fd, 300, &closed, NULL);
    if (strncmp(out, "HTTP/1.1 200 ", 13) != 0 || !strstr(out, "from /next")) fail_msg("%s", out);
    free(out);
    close(fd);
  }
  for (int i = 0; i < 3; i++) {
    int fd = client(f->port), closed;
    size_t got;
    char *out;
    assert_true(fd >= 0);
    assert_int_equal(sends(fd, "GET /big-extra HTTP/1.1\r\nHost: demo.test\r\n\r\n"), 0);
    if (read_big(fd, &got) < 0) fail_msg("extra %d: %zu body bytes, or wrong ones", i, got);
    close(fd);
    /* the pool's check sees bytes that arrived before the connection is taken: wait for the
     * origin's send of them (it may still be waking up when the visitor has the whole body) */
    for (int ms = 0; atomic_load(&f->o->tails) < i + 1 && ms < 5000; ms += 5)
      sleep_ms(5);
    assert_int_equal(atomic_load(&f->o->tails), i + 1);
    out = exchange(f->port, "GET /next HTTP/1.1\r\nHost: demo.test\r\n\r\n", 300, &closed);
    if (strncmp(out, "HTTP/1.1 200 ", 13) != 0 || !strstr(out, "from /next") ||
        strstr(out, "POISON"))
      fail_msg("extra %d: %s", i, out);
    free(out);
  }
  {
    int fd = client(f->port);
    size_t got;
    assert_true(fd >= 0);
    assert_int_equal(sends(fd, "GET /big-short HTTP/1.1\r\nHost: demo.test\r\n\r\n"), 0);
    char c;
    assert_int_equal(read_big(fd, &got), -1);
    assert_true(got < BIG_LEN);
    assert_int_equal(recv_wait(fd, &c, 1, 2000), 0); /* closed, not left waiting */
    close(fd);
  }
}

/* Defect 5: the head deadline, the keep-alive and the body timeouts. */
static void test_timeouts(void **state) {
  struct fx *f = *state;
  int fd = client(f->port), closed = 0;
  int64_t t0 = now_ms();
  const char *slow = "GET / HTTP/1.1\r\nHost: demo.test\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  char *out;
  /* one byte every 100 ms: cut at the head deadline (600 ms) */
  for (const char *p = slow; *p && !closed; p++) {
    if (send(fd, p, 1, MSG_NOSIGNAL) < 0)
      closed = 1;
    else {
      char b[64];
      ssize_t r = recv_wait(fd, b, sizeof b, 100);
      if (r == 0 || r == -1) closed = 1;
    }
  }
  assert_true(closed);
  assert_true(now_ms() - t0 < 2000);
  close(fd);
  /* keep-alive: closed 0.5 s after the response */
  fd = client(f->port);
  assert_int_equal(sends(fd, "GET /k HTTP/1.1\r\nHost: demo.test\r\n\r\n"), 0);
  t0 = now_ms();
  out = read_all(fd, 3000, &closed, NULL);
  assert_non_null(strstr(out, "from /k"));
  assert_true(closed);
  assert_true(now_ms() - t0 >= 400 && now_ms() - t0 < 2500);
  free(out);
  close(fd);
  /* a stalled body: closed after the body timeout */
  fd = client(f->port);
  assert_int_equal(sends(fd, "POST /b HTTP/1.1\r\nHost: demo.test\r\nContent-Length: 10\r\n\r\nab"),
                   0);
  t0 = now_ms();
  out = read_all(fd, 3000, &closed, NULL);
  assert_true(closed);
  assert_true(now_ms() - t0 < 2500);
  free(out);
  close(fd);
}

/* Defects 5-6: at --max-connections accepting pauses; a request waits until a slot frees. */
static void test_connection_cap(void **state) {
  struct fx *f = *state;
  int idle[4], extra, closed;
  char *out;
  for (int i = 0; i < 4; i++) {
    idle[i] = client(f->port);
    assert_true(idle[i] >= 0);
    assert_int_equal(sends(idle[i], "G"), 0); /* in a head: held until the head deadline */
  }
  sleep_ms(100);
  extra = client(f->port); /* completes in the kernel backlog */
  assert_true(extra >= 0);
  assert_int_equal(sends(extra, "GET /extra HTTP/1.1\r\nHost: demo.test\r\n\r\n"), 0);
  out = read_all(extra, 300, &closed, NULL);
  assert_int_equal(strlen(out), 0); /* not served while 4 are open */
  free(out);
  for (int i = 0; i < 4; i++)
    close(idle[i]);
  out = read_all(extra, 1500, &closed, NULL);
  assert_non_null(strstr(out, "from /extra"));
  free(out);
  close(extra);
}

/* Defect 8: 1xx responses are forwarded, 103 Early Hints with its Link. */
static void test_interim_forwarded(void **state) {
  struct fx *f = *state;
  int closed;
  char *out = exchange(f->port, "GET /early HTTP/1.1\r\nHost: demo.test\r\n\r\n", 800, &closed);
  char *a = strstr(out, "HTTP/1.1 103 "), *b = strstr(out, "HTTP/1.1 102 "),
       *c = strstr(out, "HTTP/1.1 200 ");
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(c);
  assert_true(a < b && b < c);
  assert_non_null(strstr(out, "Link: </a.css>; rel=preload\r\n"));
  assert_non_null(strstr(out, "\r\n\r\nok"));
  free(out);
  /* an HTTP/1.0 visitor gets no interim response */
  out = exchange(f->port, "GET /early HTTP/1.0\r\nHost: demo.test\r\n\r\n", 800, &closed);
  assert_null(strstr(out, " 103 "));
  assert_non_null(strstr(out, "HTTP/1.1 200 "));
  free(out);
}

/* Defect 8: Upgrade is tunnelled both ways after the origin's 101, not counted as a failure. */
static void test_upgrade_tunnel(void **state) {
  struct fx *f = *state;
  int fd = client(f->port), closed;
  char *out;
  struct buf m;
  assert_int_equal(sends(fd, "GET /ws HTTP/1.1\r\nHost: demo.test\r\nConnection: Upgrade\r\n"
                             "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n"),
                   0);
  out = read_all(fd, 500, &closed, NULL);
  if (!strstr(out, "HTTP/1.1 101 ") || !strstr(out, "\r\nUpgrade: websocket\r\n"))
    fail_msg("%s", out);
  assert_non_null(strstr(out, "\r\nUpgrade: websocket\r\n"));
  assert_non_null(strstr(out, "\r\nConnection: upgrade\r\n"));
  free(out);
  assert_true(origin_saw(f->o, "\r\nUpgrade: websocket\r\n", 0));
  assert_int_equal(sends(fd, "ping-1"), 0);
  out = read_all(fd, 500, &closed, NULL);
  assert_string_equal(out, "ping-1");
  free(out);
  assert_int_equal(sends(fd, "ping-2"), 0);
  out = read_all(fd, 500, &closed, NULL);
  assert_string_equal(out, "ping-2");
  free(out);
  close(fd);
  buf_init(&m, 0);
  assert_int_equal(proxy_metrics(f->p, &m), 0);
  assert_non_null(strstr(m.data, "cdnca_node_origin_attempts_total{result=\"success\"} 1\n"));
  assert_non_null(strstr(m.data, "cdnca_node_origin_attempts_total{result=\"io_error\"} 0\n"));
  buf_fini(&m);
}

/* Defect 6: at the descriptor limit accept() does not spin: the process stays idle. */
static void test_fd_limit_no_spin(void **state) {
  struct fx *f = *state;
  struct rlimit old, low;
  struct rusage r0, r1;
  int fds[40], n = 0, probe, closed;
  char *out;
  int64_t used0, used1;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  /* lower the limit to what is open now + 24: the visitor side runs out of descriptors */
  probe = dup(0);
  low.rlim_cur = (rlim_t)probe + 24;
  low.rlim_max = old.rlim_max;
  close(probe);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  for (int i = 0; i < 40; i++) {
    int fd = client(f->port);
    if (fd < 0) break;
    fds[n++] = fd;
  }
  sleep_ms(300);
  getrusage(RUSAGE_SELF, &r0);
  sleep_ms(1000);
  getrusage(RUSAGE_SELF, &r1);
  used0 = r0.ru_utime.tv_sec * 1000000 + r0.ru_utime.tv_usec + r0.ru_stime.tv_sec * 1000000 +
          r0.ru_stime.tv_usec;
  used1 = r1.ru_utime.tv_sec * 1000000 + r1.ru_utime.tv_usec + r1.ru_stime.tv_sec * 1000000 +
          r1.ru_stime.tv_usec;
  for (int i = 0; i < n; i++)
    close(fds[i]);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
  if (used1 - used0 > 300000)
    fail_msg("%lld us of CPU in 1 s at the fd limit", (long long)(used1 - used0));
  out = exchange(f->port, "GET /again HTTP/1.1\r\nHost: demo.test\r\n\r\n", 1500, &closed);
  assert_non_null(strstr(out, "from /again"));
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_local_answer_ends_body, setup, teardown),
      cmocka_unit_test_setup_teardown(test_strict_chunked_request, setup, teardown),
      cmocka_unit_test_setup_teardown(test_response_reframed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refused_heads, setup, teardown),
      cmocka_unit_test_setup_teardown(test_absolute_form, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pool_not_poisoned, setup, teardown),
      cmocka_unit_test_setup_teardown(test_spliced_body, setup, teardown),
      cmocka_unit_test_setup_teardown(test_timeouts, setup_short, teardown),
      cmocka_unit_test_setup_teardown(test_connection_cap, setup_short, teardown),
      cmocka_unit_test_setup_teardown(test_interim_forwarded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_upgrade_tunnel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fd_limit_no_spin, setup, teardown),
  };
  log_init("test", LOG_TEXT, LOG_ERROR);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
