/* Tests for noded/proxy: the proxy runs in-process on 127.0.0.1 with origins as test threads. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "log.h"
#include "proxy.h"
#include "sitecfg.h"

/* ---------- test origin ---------- */

#define MAX_CONN_THREADS 256

struct origin {
  int fd, port;
  pthread_t th;
  atomic_int stop;
  atomic_int status; /* status to answer with */
  atomic_int drop;   /* close connections without answering */
  atomic_int hits, accepts;
  char name[16];
  pthread_mutex_t mu;
  char last_head[16384];
  size_t last_body_len;
  uint32_t last_body_sum;
  pthread_t conn_th[MAX_CONN_THREADS];
  int n_conn;
};

struct conn_arg {
  struct origin *o;
  int fd;
};

static uint32_t sum_bytes(uint32_t s, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    s = s * 31 + p[i];
  return s;
}

static int wait_readable(int fd, struct origin *o) {
  for (int i = 0; i < 200; i++) { /* up to 20 s */
    struct pollfd pfd = {fd, POLLIN, 0};
    int r = poll(&pfd, 1, 100);
    if (r > 0) return 0;
    if (r < 0 && errno != EINTR) return -1;
    if (o && atomic_load(&o->stop)) return -1;
  }
  return -1;
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

static char big_byte(size_t i) {
  return (char)('a' + (i * 7 + i / 1000) % 26);
}

static void *origin_conn(void *arg) {
  struct conn_arg *ca = arg;
  struct origin *o = ca->o;
  int fd = ca->fd;
  char buf[65536];
  size_t len = 0;
  free(ca);
  for (;;) {
    char *end = NULL;
    size_t hl, cl = 0, body_have, body_len = 0;
    uint32_t sum = 0;
    char *p, path[256] = "/", buf_method[16] = "";
    while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
      ssize_t r;
      if (len == sizeof buf || wait_readable(fd, o) < 0) goto out;
      r = recv(fd, buf + len, sizeof buf - len, 0);
      if (r <= 0) goto out;
      len += (size_t)r;
    }
    hl = (size_t)(end - buf) + 4;
    atomic_fetch_add(&o->hits, 1);
    if (atomic_load(&o->drop)) goto out;
    sscanf(buf, "%15s %255s", buf_method, path);
    for (p = buf; p < buf + hl; p++)
      if (strncasecmp(p, "\r\nContent-Length:", 17) == 0) cl = strtoul(p + 17, NULL, 10);
    pthread_mutex_lock(&o->mu);
    memcpy(o->last_head, buf, hl < sizeof o->last_head - 1 ? hl : sizeof o->last_head - 1);
    o->last_head[hl < sizeof o->last_head - 1 ? hl : sizeof o->last_head - 1] = '\0';
    pthread_mutex_unlock(&o->mu);
    if (memmem(buf, hl, "Transfer-Encoding: chunked", 26)) {
      /* collect the whole chunked body, then decode it */
      char *q, *e;
      memmove(buf, buf + hl, len - hl);
      len -= hl;
      while (!(e = memmem(buf, len, "0\r\n\r\n", 5))) {
        ssize_t r;
        if (len == sizeof buf || wait_readable(fd, o) < 0) goto out;
        r = recv(fd, buf + len, sizeof buf - len, 0);
        if (r <= 0) goto out;
        len += (size_t)r;
      }
      body_len = 0;
      sum = 0;
      for (q = buf; q < e;) {
        size_t sz = strtoul(q, NULL, 16);
        char *nl = memmem(q, (size_t)(e - q), "\r\n", 2);
        if (!nl) break;
        sum = sum_bytes(sum, (unsigned char *)nl + 2, sz);
        body_len += sz;
        q = nl + 2 + sz + 2;
      }
      e += 5;
      memmove(buf, e, len - (size_t)(e - buf));
      len -= (size_t)(e - buf);
      hl = 0;
      cl = body_len;
      body_have = body_len;
      goto have_body;
    }
    body_have = len - hl;
    if (body_have > cl) body_have = cl;
    sum = sum_bytes(0, (unsigned char *)buf + hl, body_have);
    body_len = body_have;
    memmove(buf, buf + hl + body_have, len - hl - body_have);
    len -= hl + body_have;
    while (body_len < cl) {
      ssize_t r;
      size_t want = cl - body_len < sizeof buf ? cl - body_len : sizeof buf;
      if (wait_readable(fd, o) < 0) goto out;
      r = recv(fd, buf, want, 0);
      if (r <= 0) goto out;
      sum = sum_bytes(sum, (unsigned char *)buf, (size_t)r);
      body_len += (size_t)r;
    }
  have_body:
    pthread_mutex_lock(&o->mu);
    o->last_body_len = body_len;
    o->last_body_sum = sum;
    pthread_mutex_unlock(&o->mu);
    if (strcmp(path, "/big") == 0) {
      size_t total = 20u << 20, off = 0;
      char hdr[256], chunk[65536];
      int n = snprintf(hdr, sizeof hdr, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", total);
      if (send_all(fd, hdr, (size_t)n) < 0) goto out;
      while (off < total) {
        size_t k = total - off < sizeof chunk ? total - off : sizeof chunk;
        for (size_t i = 0; i < k; i++)
          chunk[i] = big_byte(off + i);
        if (send_all(fd, chunk, k) < 0) goto out;
        off += k;
      }
    } else if (strcmp(path, "/chunked") == 0) {
      const char *resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n";
      if (send_all(fd, resp, strlen(resp)) < 0) goto out;
    } else {
      char body[256], hdr[512];
      int st = atomic_load(&o->status);
      int bn =
          snprintf(body, sizeof body, "{\"origin\":\"%s\",\"received\":%zu}", o->name, body_len);
      int n =
          snprintf(hdr, sizeof hdr,
                   "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nX-Origin: %s\r\n"
                   "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: %d\r\n\r\n",
                   st, o->name, bn);
      if (send_all(fd, hdr, (size_t)n) < 0) goto out;
      if (strncmp(buf_method, "HEAD", 4) != 0 && send_all(fd, body, (size_t)bn) < 0) goto out;
    }
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
    if (poll(&pfd, 1, 50) <= 0) continue;
    fd = accept(o->fd, NULL, NULL);
    if (fd < 0) continue;
    atomic_fetch_add(&o->accepts, 1);
    pthread_mutex_lock(&o->mu);
    if (o->n_conn < MAX_CONN_THREADS) {
      struct conn_arg *ca = malloc(sizeof *ca);
      ca->o = o;
      ca->fd = fd;
      if (pthread_create(&o->conn_th[o->n_conn], NULL, origin_conn, ca) == 0)
        o->n_conn++;
      else {
        free(ca);
        close(fd);
      }
    } else {
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

static struct origin *origin_start(const char *name) {
  struct origin *o = calloc(1, sizeof *o);
  assert_non_null(o);
  snprintf(o->name, sizeof o->name, "%s", name);
  atomic_init(&o->status, 200);
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

/* A port nothing listens on. */
static int dead_port(void) {
  int port, fd = listen_any(&port);
  close(fd);
  return port;
}

/* ---------- test client ---------- */

struct resp {
  int status;
  char head[8192];
  char *body;
  size_t body_len;
};

static int client_connect_rcvbuf(int port, int rcvbuf) {
  struct sockaddr_in sa;
  struct timeval tv = {20, 0};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int client_connect(int port) {
  return client_connect_rcvbuf(port, 0);
}

/* Read one response (Content-Length, chunked or until close). 0 or -1. */
static int read_response(int fd, struct resp *r, int is_head) {
  static char buf[1 << 16];
  size_t len = 0, hl, cap = 1 << 16;
  char *end, *p;
  long long cl = -1;
  int chunked = 0;
  memset(r, 0, sizeof *r);
  while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
    ssize_t n = recv(fd, buf + len, sizeof buf - len, 0);
    if (n <= 0) return -1;
    len += (size_t)n;
  }
  hl = (size_t)(end - buf) + 4;
  memcpy(r->head, buf, hl < sizeof r->head - 1 ? hl : sizeof r->head - 1);
  r->status = atoi(buf + 9);
  for (p = r->head; *p; p++) {
    if (strncasecmp(p, "\r\nContent-Length:", 17) == 0) cl = atoll(p + 17);
    if (strncasecmp(p, "\r\nTransfer-Encoding: chunked", 28) == 0) chunked = 1;
  }
  r->body = malloc(cap);
  memmove(buf, buf + hl, len - hl);
  len -= hl;
  if (is_head || r->status == 204 || r->status == 304) cl = 0;
  if (chunked) {
    /* collect raw then decode */
    char *raw = malloc(1 << 20);
    size_t rl = len;
    memcpy(raw, buf, len);
    while (!memmem(raw, rl, "\r\n0\r\n", 5) ||
           !(rl >= 4 && memcmp(raw + rl - 4, "\r\n\r\n", 4) == 0)) {
      ssize_t n = recv(fd, raw + rl, (1 << 20) - rl, 0);
      if (n <= 0) break;
      rl += (size_t)n;
    }
    p = raw;
    while (p < raw + rl) {
      long sz = strtol(p, NULL, 16);
      char *nl = memmem(p, (size_t)(raw + rl - p), "\r\n", 2);
      if (!nl || sz <= 0) break;
      memcpy(r->body + r->body_len, nl + 2, (size_t)sz);
      r->body_len += (size_t)sz;
      p = nl + 2 + sz + 2;
    }
    free(raw);
    r->body[r->body_len] = '\0';
    return 0;
  }
  for (;;) {
    ssize_t n;
    if (cl >= 0 && (long long)(r->body_len + len) >= cl) break;
    if (r->body_len + len + 65536 > cap) {
      cap = cap * 2 + 65536;
      r->body = realloc(r->body, cap);
    }
    memcpy(r->body + r->body_len, buf, len);
    r->body_len += len;
    len = 0;
    n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) return -1;
    if (n == 0) {
      if (cl >= 0) return -1;
      break;
    }
    len = (size_t)n;
  }
  if (len) {
    if (r->body_len + len + 1 > cap) r->body = realloc(r->body, r->body_len + len + 1);
    memcpy(r->body + r->body_len, buf, len);
    r->body_len += len;
  }
  r->body = realloc(r->body, r->body_len + 1);
  r->body[r->body_len] = '\0';
  return 0;
}

static void resp_free(struct resp *r) {
  free(r->body);
  r->body = NULL;
}

/* One request on a new connection. */
static int do_request(int port, const char *req, size_t req_len, struct resp *r) {
  int fd = client_connect(port), rc;
  if (fd < 0) return -1;
  if (send_all(fd, req, req_len) < 0) {
    close(fd);
    return -1;
  }
  rc = read_response(fd, r, strncmp(req, "HEAD ", 5) == 0);
  close(fd);
  return rc;
}

static int get(int port, const char *host, const char *path, struct resp *r) {
  char req[1024];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                   path, host);
  return do_request(port, req, (size_t)n, r);
}

/* ---------- fixture ---------- */

struct fx {
  struct origin *a, *b;
  struct proxy *p;
  int port;
};

static const char *RETRY = "\"node_retry\": {\"retries\": 2, \"retry_budget_ms\": 15000, "
                           "\"fail_count\": 3, \"fail_window_ms\": 10000, \"skip_ms\": 300, "
                           "\"half_open_requests\": 1, \"retry_on_status\": [502, 503, 504]}";

/* Start a proxy serving site "shop.test" with origins at ports pa (weight wa) and pb. */
static struct proxy *start_proxy(int pa, int wa, const char *hh_a, int pb, int wb, int *port) {
  char doc[4096], err[256];
  struct proxy_opts o;
  struct proxy *p;
  struct sitecfg_set *s;
  char hha[128];
  if (hh_a)
    snprintf(hha, sizeof hha, "\"%s\"", hh_a);
  else
    snprintf(hha, sizeof hha, "null");
  snprintf(doc, sizeof doc,
           "{\"seq\": 1, \"full\": true, \"sites\": [{\"id\": 1, \"name\": \"shop\", "
           "\"hostnames\": [\"shop.test\"], \"config_version\": 1, \"current_level\": 1, "
           "\"origins\": [{\"id\": 1, \"level\": 1, \"address\": \"127.0.0.1\", \"port\": %d, "
           "\"scheme\": \"http\", \"host_header\": %s, \"weight\": %d},"
           "{\"id\": 2, \"level\": 1, \"address\": \"127.0.0.1\", \"port\": %d, "
           "\"scheme\": \"http\", \"host_header\": null, \"weight\": %d},"
           "{\"id\": 3, \"level\": 2, \"address\": \"127.0.0.1\", \"port\": 9, "
           "\"scheme\": \"http\", \"host_header\": null, \"weight\": 1}], %s}]}",
           pa, hha, wa, pb, wb, RETRY);
  s = sitecfg_load(doc, strlen(doc), err, sizeof err);
  if (!s) fprintf(stderr, "config: %s\n", err);
  assert_non_null(s);
  proxy_opts_default(&o);
  o.listen = "127.0.0.1:0";
  o.threads = 2;
  o.stop_grace_ms = 3000;
  o.connect_timeout_ms = 2000;
  o.origin_timeout_ms = 10000;
  p = proxy_new(&o);
  assert_non_null(p);
  assert_int_equal(proxy_set_config(p, s), 0);
  sitecfg_set_unref(s);
  assert_int_equal(proxy_start(p), 0);
  *port = proxy_port(p);
  assert_true(*port > 0);
  return p;
}

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof *f);
  f->a = origin_start("a");
  f->b = origin_start("b");
  f->p = start_proxy(f->a->port, 1, "origin-a.test", f->b->port, 1, &f->port);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  proxy_free(&f->p);
  assert_null(f->p);
  origin_stop(f->a);
  origin_stop(f->b);
  free(f);
  return 0;
}

/* 1 once the metrics text contains needle (a request is counted just after its last byte). */
static int metric_has(struct proxy *p, const char *needle) {
  for (int i = 0; i < 100; i++) {
    struct buf m;
    int ok;
    buf_init(&m, 0);
    assert_int_equal(proxy_metrics(p, &m), 0);
    ok = strstr(m.data, needle) != NULL;
    if (!ok && i == 99) fprintf(stderr, "metrics lack '%s':\n%s", needle, m.data);
    buf_fini(&m);
    if (ok) return 1;
    sleep_ms(50);
  }
  return 0;
}

/* ---------- tests ---------- */

static void test_get_forwarded_headers(void **state) {
  struct fx *f = *state;
  struct resp r;
  int seen_a = 0, seen_b = 0;
  for (int i = 0; i < 4; i++) {
    char req[512];
    int n =
        snprintf(req, sizeof req,
                 "GET /path?q=1 HTTP/1.1\r\nHost: Shop.Test:8080\r\nX-Forwarded-For: 10.1.1.1\r\n"
                 "Connection: close, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: 5\r\nUpgrade: h2c\r\n"
                 "Via: 1.0 other\r\nX-Forwarded-Proto: https\r\n\r\n");
    assert_int_equal(do_request(f->port, req, (size_t)n, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.head, "X-Origin: "));
    assert_null(strstr(r.head, "Keep-Alive"));
    if (strstr(r.body, "\"a\"")) {
      seen_a = 1;
      pthread_mutex_lock(&f->a->mu);
      assert_non_null(strstr(f->a->last_head, "GET /path?q=1 HTTP/1.1\r\n"));
      assert_non_null(strstr(f->a->last_head, "\r\nHost: origin-a.test\r\n"));
      /* nobody is trusted (no trusted_proxies): the visitor's X-Forwarded-For is replaced */
      assert_non_null(strstr(f->a->last_head, "\r\nX-Forwarded-For: 127.0.0.1\r\n"));
      assert_non_null(strstr(f->a->last_head, "\r\nX-Forwarded-Proto: http\r\n"));
      assert_non_null(strstr(f->a->last_head, "\r\nVia: 1.0 other, 1.1 cdnca-node\r\n"));
      assert_null(strstr(f->a->last_head, "X-Secret"));
      assert_null(strstr(f->a->last_head, "Keep-Alive"));
      assert_null(strstr(f->a->last_head, "Upgrade"));
      assert_null(strstr(f->a->last_head, "https"));
      pthread_mutex_unlock(&f->a->mu);
    } else {
      seen_b = 1;
      pthread_mutex_lock(&f->b->mu);
      assert_non_null(strstr(f->b->last_head, "\r\nHost: Shop.Test:8080\r\n"));
      pthread_mutex_unlock(&f->b->mu);
    }
    resp_free(&r);
  }
  assert_true(seen_a && seen_b);
}

static void test_unknown_host(void **state) {
  struct fx *f = *state;
  struct resp r;
  assert_int_equal(get(f->port, "nope.test", "/", &r), 0);
  assert_int_equal(r.status, 404);
  assert_non_null(strstr(r.head, "application/json"));
  assert_non_null(strstr(r.body, "{\"error\":{\"code\":\"unknown_host\",\"message\":"));
  resp_free(&r);
  assert_int_equal(atomic_load(&f->a->hits) + atomic_load(&f->b->hits), 0);
}

static void test_post_body_intact(void **state) {
  struct fx *f = *state;
  size_t n = 1u << 20;
  char *body = malloc(n), hdr[256];
  struct resp r;
  int fd, hl;
  uint32_t sum;
  for (size_t i = 0; i < n; i++)
    body[i] = (char)(i * 13 + 7);
  sum = sum_bytes(0, (unsigned char *)body, n);
  hl = snprintf(hdr, sizeof hdr,
                "POST /upload HTTP/1.1\r\nHost: shop.test\r\nContent-Length: %zu\r\n"
                "Expect: 100-continue\r\nConnection: close\r\n\r\n",
                n);
  fd = client_connect(f->port);
  assert_true(fd >= 0);
  assert_int_equal(send_all(fd, hdr, (size_t)hl), 0);
  {
    /* the proxy answers 100 Continue itself */
    char cont[64];
    ssize_t k = recv(fd, cont, 25, MSG_WAITALL);
    assert_int_equal(k, 25);
    assert_memory_equal(cont, "HTTP/1.1 100 Continue\r\n\r\n", 25);
  }
  assert_int_equal(send_all(fd, body, n), 0);
  assert_int_equal(read_response(fd, &r, 0), 0);
  close(fd);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "\"received\":1048576"));
  {
    struct origin *o = strstr(r.body, "\"a\"") ? f->a : f->b;
    pthread_mutex_lock(&o->mu);
    assert_int_equal(o->last_body_len, n);
    assert_int_equal(o->last_body_sum, sum);
    pthread_mutex_unlock(&o->mu);
  }
  resp_free(&r);
  free(body);
}

static void test_chunked_request_body(void **state) {
  struct fx *f = *state;
  const char *req = "PUT /c HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n"
                    "Connection: close\r\n\r\n4\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n";
  struct resp r;
  struct origin *o;
  assert_int_equal(do_request(f->port, req, strlen(req), &r), 0);
  assert_int_equal(r.status, 200);
  o = strstr(r.body, "\"a\"") ? f->a : f->b;
  pthread_mutex_lock(&o->mu);
  assert_non_null(strstr(o->last_head, "Transfer-Encoding: chunked"));
  pthread_mutex_unlock(&o->mu);
  resp_free(&r);
}

static void test_post_not_replayed(void **state) {
  struct fx *f = *state;
  const char *req = "POST /x HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 5\r\n"
                    "Connection: close\r\n\r\nhello";
  struct resp r;
  atomic_store(&f->a->status, 502);
  atomic_store(&f->b->status, 502);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(do_request(f->port, req, strlen(req), &r), 0);
    /* the origin's own 502 comes back: the body was sent, so no other origin is tried */
    assert_int_equal(r.status, 502);
    assert_non_null(strstr(r.head, "X-Origin: "));
    resp_free(&r);
  }
  assert_int_equal(atomic_load(&f->a->hits), 1);
  assert_int_equal(atomic_load(&f->b->hits), 1);
}

static void test_large_response(void **state) {
  struct fx *f = *state;
  struct resp r;
  size_t total = 20u << 20, bad = 0;
  assert_int_equal(get(f->port, "shop.test", "/big", &r), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_len, total);
  for (size_t i = 0; i < total; i++)
    if (r.body[i] != big_byte(i)) bad++;
  assert_int_equal(bad, 0);
  resp_free(&r);
}

static void test_slow_reader(void **state) {
  struct fx *f = *state;
  const char *req = "GET /big HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n";
  int fd = client_connect_rcvbuf(f->port, 16384);
  size_t got = 0;
  char buf[8192];
  assert_true(fd >= 0);
  assert_int_equal(send_all(fd, req, strlen(req)), 0);
  sleep_ms(300); /* the proxy must hold back, not buffer everything */
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  assert_true(got > (20u << 20));
}

static void test_chunked_response(void **state) {
  struct fx *f = *state;
  struct resp r;
  const char *req10 = "GET /chunked HTTP/1.0\r\nHost: shop.test\r\n\r\n";
  assert_int_equal(get(f->port, "shop.test", "/chunked", &r), 0);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.head, "Transfer-Encoding: chunked"));
  assert_string_equal(r.body, "hello, world");
  resp_free(&r);
  /* an HTTP/1.0 visitor gets it decoded, delimited by close */
  assert_int_equal(do_request(f->port, req10, strlen(req10), &r), 0);
  assert_int_equal(r.status, 200);
  assert_null(strstr(r.head, "chunked"));
  assert_int_equal(r.body_len, 12);
  assert_memory_equal(r.body, "hello, world", 12);
  resp_free(&r);
}

static void test_failover_skip_and_return(void **state) {
  struct fx *f = *state;
  struct resp r;
  cJSON *obs;
  atomic_store(&f->a->status, 502);
  for (int i = 0; i < 8; i++) {
    assert_int_equal(get(f->port, "shop.test", "/", &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"b\""));
    resp_free(&r);
  }
  /* three failures skipped a; it saw no more traffic after that */
  assert_int_equal(atomic_load(&f->a->hits), 3);
  obs = proxy_observations(f->p);
  assert_non_null(obs);
  {
    int found = 0;
    cJSON *it;
    cJSON_ArrayForEach(it, obs) {
      if (cJSON_GetObjectItem(it, "origin_id")->valueint == 1) {
        found = 1;
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(it, "skipped")));
        assert_int_equal(cJSON_GetObjectItem(it, "failures")->valueint, 3);
      }
    }
    assert_true(found);
  }
  cJSON_Delete(obs);
  assert_true(metric_has(f->p, "cdnca_node_requests_total{code=\"200\"} 8\n"));
  assert_true(metric_has(f->p, "cdnca_node_origin_skips_total 1\n"));
  assert_true(metric_has(f->p, "cdnca_node_retries_total 3\n"));
  assert_true(metric_has(f->p, "cdnca_node_origin_attempts_total{result=\"error_status\"} 3\n"));
  assert_true(metric_has(f->p, "cdnca_node_fail_open_total 0\n"));
  assert_true(metric_has(f->p, "cdnca_node_access_log_dropped_total 0\n"));
  /* a recovers; after skip_ms its half-open trial succeeds and it is back in rotation */
  atomic_store(&f->a->status, 200);
  sleep_ms(450);
  for (int i = 0; i < 6; i++) {
    assert_int_equal(get(f->port, "shop.test", "/", &r), 0);
    assert_int_equal(r.status, 200);
    resp_free(&r);
  }
  assert_true(atomic_load(&f->a->hits) >= 6);
  {
    cJSON *st = proxy_status(f->p);
    char *txt = cJSON_PrintUnformatted(st);
    assert_non_null(strstr(txt, "\"state\":\"healthy\""));
    assert_null(strstr(txt, "\"state\":\"skipped\""));
    free(txt);
    cJSON_Delete(st);
  }
}

static void test_refused_retried(void **state) {
  struct origin *b = origin_start("b");
  struct resp r;
  int port;
  struct proxy *p = start_proxy(dead_port(), 1, NULL, b->port, 1, &port);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(get(port, "shop.test", "/", &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"b\""));
    resp_free(&r);
  }
  proxy_free(&p);
  origin_stop(b);
}

static void test_all_down(void **state) {
  struct resp r;
  int port;
  struct proxy *p = start_proxy(dead_port(), 1, NULL, dead_port(), 1, &port);
  for (int i = 0; i < 5; i++) {
    assert_int_equal(get(port, "shop.test", "/", &r), 0);
    assert_int_equal(r.status, 502);
    assert_non_null(strstr(r.head, "application/json"));
    assert_non_null(strstr(r.body, "{\"error\":{\"code\":\""));
    resp_free(&r);
  }
  assert_true(metric_has(p, "cdnca_node_requests_total{code=\"502\"} 5\n"));
  {
    struct buf m;
    buf_init(&m, 0);
    assert_int_equal(proxy_metrics(p, &m), 0);
    /* after both were skipped, picks are fail opens */
    assert_null(strstr(m.data, "cdnca_node_fail_open_total 0\n"));
    buf_fini(&m);
  }
  proxy_free(&p);
}

static void test_dropping_origin(void **state) {
  struct fx *f = *state;
  struct resp r;
  atomic_store(&f->a->drop, 1);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(get(f->port, "shop.test", "/", &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"b\""));
    resp_free(&r);
  }
}

static void test_keepalive_visitor(void **state) {
  struct fx *f = *state;
  int fd = client_connect(f->port);
  assert_true(fd >= 0);
  for (int i = 0; i < 10; i++) {
    struct resp r;
    const char *req = i % 2 ? "GET /k HTTP/1.1\r\nHost: shop.test\r\n\r\n"
                            : "HEAD /k HTTP/1.1\r\nHost: shop.test\r\n\r\n";
    assert_int_equal(send_all(fd, req, strlen(req)), 0);
    assert_int_equal(read_response(fd, &r, i % 2 == 0), 0);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.head, "Connection: close"));
    resp_free(&r);
  }
  /* an unknown host keeps the connection too */
  {
    struct resp r;
    const char *req = "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n";
    assert_int_equal(send_all(fd, req, strlen(req)), 0);
    assert_int_equal(read_response(fd, &r, 0), 0);
    assert_int_equal(r.status, 404);
    resp_free(&r);
  }
  close(fd);
  assert_int_equal(atomic_load(&f->a->hits) + atomic_load(&f->b->hits), 10);
  /* origin connections were pooled: one per origin for this visitor's worker */
  assert_true(atomic_load(&f->a->accepts) + atomic_load(&f->b->accepts) <= 2);
}

static void test_bad_requests(void **state) {
  struct fx *f = *state;
  struct resp r;
  const char *nohost = "GET / HTTP/1.1\r\n\r\n";
  const char *garbage = "this is not http\r\n\r\n";
  const char *both = "POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 3\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n";
  char *huge = malloc(40000);
  int n;
  assert_int_equal(do_request(f->port, nohost, strlen(nohost), &r), 0);
  assert_int_equal(r.status, 400);
  resp_free(&r);
  assert_int_equal(do_request(f->port, garbage, strlen(garbage), &r), 0);
  assert_int_equal(r.status, 400);
  resp_free(&r);
  assert_int_equal(do_request(f->port, both, strlen(both), &r), 0);
  assert_int_equal(r.status, 400);
  resp_free(&r);
  n = snprintf(huge, 40000, "GET / HTTP/1.1\r\nHost: shop.test\r\nX-Big: ");
  memset(huge + n, 'x', 35000);
  memcpy(huge + n + 35000, "\r\n\r\n", 4);
  assert_int_equal(do_request(f->port, huge, (size_t)n + 35004, &r), 0);
  assert_int_equal(r.status, 431);
  resp_free(&r);
  free(huge);
  assert_int_equal(atomic_load(&f->a->hits) + atomic_load(&f->b->hits), 0);
}

static void test_weighted(void **state) {
  struct origin *a = origin_start("a"), *b = origin_start("b");
  struct resp r;
  int port, na = 0, nb = 0;
  struct proxy *p = start_proxy(a->port, 1, NULL, b->port, 3, &port);
  for (int i = 0; i < 200; i++) {
    assert_int_equal(get(port, "shop.test", "/", &r), 0);
    assert_int_equal(r.status, 200);
    if (strstr(r.body, "\"a\""))
      na++;
    else
      nb++;
    resp_free(&r);
  }
  assert_int_equal(na + nb, 200);
  assert_in_range(na, 35, 65);
  assert_in_range(nb, 135, 165);
  proxy_free(&p);
  origin_stop(a);
  origin_stop(b);
}

static void test_config_swap_keeps_skip(void **state) {
  struct fx *f = *state;
  struct resp r;
  char doc[2048], err[256];
  struct sitecfg_set *s;
  atomic_store(&f->a->status, 503);
  for (int i = 0; i < 5; i++) {
    assert_int_equal(get(f->port, "shop.test", "/", &r), 0);
    resp_free(&r);
  }
  assert_int_equal(atomic_load(&f->a->hits), 3);
  /* a new version with a changed weight and host header: same identity, skip kept */
  snprintf(
      doc, sizeof doc,
      "{\"seq\": 2, \"full\": true, \"sites\": [{\"id\": 1, \"name\": \"shop\", "
      "\"hostnames\": [\"shop.test\", \"www.shop.test\"], \"config_version\": 2, "
      "\"current_level\": 1, \"origins\": [{\"id\": 1, \"level\": 1, \"address\": "
      "\"127.0.0.1\", \"port\": %d, \"scheme\": \"http\", \"host_header\": null, \"weight\": 5},"
      "{\"id\": 2, \"level\": 1, \"address\": \"127.0.0.1\", \"port\": %d, \"scheme\": "
      "\"http\", \"host_header\": null, \"weight\": 1}], \"node_retry\": {\"skip_ms\": 60000}}]}",
      f->a->port, f->b->port);
  s = sitecfg_load(doc, strlen(doc), err, sizeof err);
  assert_non_null(s);
  assert_int_equal(proxy_set_config(f->p, s), 0);
  sitecfg_set_unref(s);
  for (int i = 0; i < 5; i++) {
    assert_int_equal(get(f->port, "www.shop.test", "/", &r), 0);
    assert_int_equal(r.status, 200);
    resp_free(&r);
  }
  assert_int_equal(atomic_load(&f->a->hits), 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_get_forwarded_headers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_host, setup, teardown),
      cmocka_unit_test_setup_teardown(test_post_body_intact, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chunked_request_body, setup, teardown),
      cmocka_unit_test_setup_teardown(test_post_not_replayed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_large_response, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slow_reader, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chunked_response, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failover_skip_and_return, setup, teardown),
      cmocka_unit_test(test_refused_retried),
      cmocka_unit_test(test_all_down),
      cmocka_unit_test_setup_teardown(test_dropping_origin, setup, teardown),
      cmocka_unit_test_setup_teardown(test_keepalive_visitor, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
      cmocka_unit_test(test_weighted),
      cmocka_unit_test_setup_teardown(test_config_swap_keeps_skip, setup, teardown),
  };
  signal(SIGPIPE, SIG_IGN);
  log_init("test_proxy", LOG_TEXT, LOG_WARN);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
