/* Tests for noded/proxy with HTTPS origins: TLS origins are test threads with certificates from
 * a CA the test generates with OpenSSL; the proxy trusts that CA through origin_ca_file. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
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
#include <fcntl.h>

#include "buf.h"
#include "log.h"
#include "proxy.h"
#include "sitecfg.h"

/* ---------- test PKI ---------- */

struct cert {
  EVP_PKEY *key;
  X509 *x509;
};

static void cert_free(struct cert *c) {
  X509_free(c->x509);
  EVP_PKEY_free(c->key);
  c->x509 = NULL;
  c->key = NULL;
}

static void add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value) {
  X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
  assert_non_null(e);
  assert_int_equal(X509_add_ext(x, e, -1), 1);
  X509_EXTENSION_free(e);
}

/* A new P-256 key and certificate for cn: self-signed CA when issuer is NULL, else a server
 * certificate with the subjectAltName san ("DNS:a.test,DNS:b.test") signed by issuer. */
static struct cert make_cert(const char *cn, const char *san, const struct cert *issuer,
                             long serial) {
  struct cert c = {NULL, NULL};
  X509V3_CTX ctx;
  X509_NAME *name;
  c.key = EVP_EC_gen("P-256");
  assert_non_null(c.key);
  c.x509 = X509_new();
  assert_non_null(c.x509);
  assert_int_equal(X509_set_version(c.x509, 2), 1);
  assert_int_equal(ASN1_INTEGER_set(X509_get_serialNumber(c.x509), serial), 1);
  assert_non_null(X509_gmtime_adj(X509_getm_notBefore(c.x509), -3600));
  assert_non_null(X509_gmtime_adj(X509_getm_notAfter(c.x509), 86400));
  assert_int_equal(X509_set_pubkey(c.x509, c.key), 1);
  name = X509_get_subject_name(c.x509);
  assert_int_equal(
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0),
      1);
  assert_int_equal(
      X509_set_issuer_name(c.x509, issuer ? X509_get_subject_name(issuer->x509) : name), 1);
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer ? issuer->x509 : c.x509, c.x509, NULL, NULL, 0);
  add_ext(c.x509, &ctx, NID_subject_key_identifier, "hash");
  if (!issuer) {
    add_ext(c.x509, &ctx, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(c.x509, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_ext(c.x509, &ctx, NID_authority_key_identifier, "keyid:always");
    add_ext(c.x509, &ctx, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(c.x509, &ctx, NID_key_usage, "critical,digitalSignature");
    add_ext(c.x509, &ctx, NID_ext_key_usage, "serverAuth");
    add_ext(c.x509, &ctx, NID_subject_alt_name, san);
  }
  assert_true(X509_sign(c.x509, issuer ? issuer->key : c.key, EVP_sha256()) > 0);
  return c;
}

/* ---------- TLS test origin ---------- */

#define MAX_CONN_THREADS 64

struct origin {
  int fd, port;
  SSL_CTX *ctx;
  pthread_t th;
  atomic_int stop;
  atomic_int accepts;    /* TCP connections */
  atomic_int handshakes; /* completed TLS handshakes */
  atomic_int hits;       /* requests answered */
  char name[16];
  pthread_mutex_t mu;
  char last_sni[256];
  char last_head[8192];
  pthread_t conn_th[MAX_CONN_THREADS];
  int n_conn;
};

struct conn_arg {
  struct origin *o;
  int fd;
};

/* Wait until fd is readable (or TLS bytes are buffered); -1 on stop or after 20 s. */
static int wait_readable(struct origin *o, SSL *ssl, int fd) {
  for (int i = 0; i < 200; i++) {
    struct pollfd pfd = {fd, POLLIN, 0};
    int r;
    if (ssl && SSL_pending(ssl) > 0) return 0;
    r = poll(&pfd, 1, 100);
    if (r > 0) return 0;
    if (r < 0 && errno != EINTR) return -1;
    if (atomic_load(&o->stop)) return -1;
  }
  return -1;
}

static int ssl_write_all(SSL *ssl, const char *p, size_t n) {
  while (n) {
    int w = SSL_write(ssl, p, (int)n);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

#define BIG_LEN (4u << 20)

static char big_byte(size_t i) {
  return (char)('a' + (i * 7 + i / 1000) % 26);
}

static void *origin_conn(void *arg) {
  struct conn_arg *ca = arg;
  struct origin *o = ca->o;
  int fd = ca->fd;
  struct timeval tv = {5, 0};
  SSL *ssl = NULL;
  char buf[16384];
  size_t len = 0;
  int notify = 1; /* send close_notify before closing */
  free(ca);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (!(ssl = SSL_new(o->ctx)) || SSL_set_fd(ssl, fd) != 1) goto out;
  if (wait_readable(o, NULL, fd) < 0 || SSL_accept(ssl) != 1) goto out;
  atomic_fetch_add(&o->handshakes, 1);
  {
    const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    pthread_mutex_lock(&o->mu);
    snprintf(o->last_sni, sizeof o->last_sni, "%s", sni ? sni : "");
    pthread_mutex_unlock(&o->mu);
  }
  for (;;) {
    char *end, body[512], hdr[512], path[256] = "";
    size_t hl;
    int bn, hn;
    while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
      int r;
      if (len == sizeof buf || wait_readable(o, ssl, fd) < 0) goto out;
      r = SSL_read(ssl, buf + len, (int)(sizeof buf - len));
      if (r <= 0) goto out;
      len += (size_t)r;
    }
    hl = (size_t)(end - buf) + 4;
    {
      /* the target of the request line */
      char line[300];
      size_t ln = (size_t)((char *)memchr(buf, '\r', hl) - buf);
      if (ln >= sizeof line) ln = sizeof line - 1;
      memcpy(line, buf, ln);
      line[ln] = '\0';
      sscanf(line, "%*15s %255s", path);
    }
    pthread_mutex_lock(&o->mu);
    memcpy(o->last_head, buf, hl < sizeof o->last_head ? hl : sizeof o->last_head - 1);
    o->last_head[hl < sizeof o->last_head ? hl : sizeof o->last_head - 1] = '\0';
    bn = snprintf(body, sizeof body, "{\"origin\":\"%s\",\"sni\":\"%s\"}", o->name, o->last_sni);
    pthread_mutex_unlock(&o->mu);
    memmove(buf, buf + hl, len - hl); /* requests here have no body */
    len -= hl;
    if (strcmp(path, "/close-eof-big") == 0) {
      /* BIG_LEN bytes delimited by the end of the connection, closed without close_notify */
      char chunk[16384];
      notify = 0;
      hn = snprintf(hdr, sizeof hdr, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
      atomic_fetch_add(&o->hits, 1);
      if (ssl_write_all(ssl, hdr, (size_t)hn) < 0) goto out;
      for (size_t off = 0; off < BIG_LEN; off += sizeof chunk) {
        for (size_t i = 0; i < sizeof chunk; i++)
          chunk[i] = big_byte(off + i);
        if (ssl_write_all(ssl, chunk, sizeof chunk) < 0) goto out;
      }
      goto out;
    }
    if (strcmp(path, "/short-eof") == 0) {
      /* a Content-Length the body never reaches, then a close without close_notify */
      notify = 0;
      hn = snprintf(hdr, sizeof hdr, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly this");
      atomic_fetch_add(&o->hits, 1);
      (void)ssl_write_all(ssl, hdr, (size_t)hn);
      goto out;
    }
    if (strncmp(path, "/close-", 7) == 0) {
      /* a body delimited by the end of the connection, closed with or without close_notify */
      notify = strcmp(path, "/close-notify") == 0;
      hn = snprintf(hdr, sizeof hdr,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    "Connection: close\r\n\r\n");
      atomic_fetch_add(&o->hits, 1);
      (void)(ssl_write_all(ssl, hdr, (size_t)hn) == 0 && ssl_write_all(ssl, body, (size_t)bn));
      goto out;
    }
    hn = snprintf(hdr, sizeof hdr,
                  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Origin: %s\r\n"
                  "Content-Length: %d\r\n\r\n",
                  o->name, bn);
    atomic_fetch_add(&o->hits, 1);
    if (ssl_write_all(ssl, hdr, (size_t)hn) < 0 || ssl_write_all(ssl, body, (size_t)bn) < 0)
      goto out;
  }
out:
  if (ssl) {
    if (notify) (void)SSL_shutdown(ssl);
    SSL_free(ssl);
  }
  close(fd);
  ERR_clear_error();
  return NULL;
}

static void *origin_main(void *arg) {
  struct origin *o = arg;
  while (!atomic_load(&o->stop)) {
    struct pollfd pfd = {o->fd, POLLIN, 0};
    struct conn_arg *ca;
    int fd;
    if (poll(&pfd, 1, 50) <= 0) continue;
    if ((fd = accept(o->fd, NULL, NULL)) < 0) continue;
    atomic_fetch_add(&o->accepts, 1);
    pthread_mutex_lock(&o->mu);
    ca = malloc(sizeof *ca);
    if (ca && o->n_conn < MAX_CONN_THREADS) {
      ca->o = o;
      ca->fd = fd;
      if (pthread_create(&o->conn_th[o->n_conn], NULL, origin_conn, ca) == 0) {
        o->n_conn++;
        ca = NULL;
        fd = -1;
      }
    }
    pthread_mutex_unlock(&o->mu);
    free(ca);
    if (fd >= 0) close(fd);
  }
  return NULL;
}

static int listen_any(int *port) {
  struct sockaddr_in sa;
  socklen_t sl = sizeof sa;
  int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 128) < 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

/* A TLS origin presenting cert c (chain: c alone, signed by its CA). */
static struct origin *origin_start(const char *name, const struct cert *c) {
  struct origin *o = calloc(1, sizeof *o);
  assert_non_null(o);
  snprintf(o->name, sizeof o->name, "%s", name);
  pthread_mutex_init(&o->mu, NULL);
  o->ctx = SSL_CTX_new(TLS_server_method());
  assert_non_null(o->ctx);
  assert_int_equal(SSL_CTX_use_certificate(o->ctx, c->x509), 1);
  assert_int_equal(SSL_CTX_use_PrivateKey(o->ctx, c->key), 1);
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
  SSL_CTX_free(o->ctx);
  pthread_mutex_destroy(&o->mu);
  free(o);
}

static void origin_sni(struct origin *o, char *out, size_t cap) {
  pthread_mutex_lock(&o->mu);
  snprintf(out, cap, "%s", o->last_sni);
  pthread_mutex_unlock(&o->mu);
}

/* ---------- plain HTTP test client (visitor side) ---------- */

struct resp {
  int status;
  char head[8192];
  char body[8192];
};

static int client_connect(int port) {
  struct sockaddr_in sa;
  struct timeval tv = {20, 0};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
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

/* Send one GET on fd and read its response (Content-Length framing). 0 or -1. */
static int get_on(int fd, const char *host, const char *path, int keep, struct resp *r) {
  char req[1024], buf[16384], *end, *p;
  size_t len = 0, hl;
  long cl = -1;
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", path, host,
                   keep ? "" : "Connection: close\r\n");
  memset(r, 0, sizeof *r);
  if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) return -1;
  while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
    ssize_t k;
    if (len == sizeof buf) return -1;
    if ((k = recv(fd, buf + len, sizeof buf - len, 0)) <= 0) return -1;
    len += (size_t)k;
  }
  hl = (size_t)(end - buf) + 4;
  if (hl >= sizeof r->head) return -1;
  memcpy(r->head, buf, hl);
  r->status = atoi(buf + 9);
  for (p = r->head; *p; p++)
    if (strncasecmp(p, "\r\nContent-Length:", 17) == 0) cl = atol(p + 17);
  if (cl < 0) { /* delimited by the end of the connection */
    for (;;) {
      ssize_t k;
      if (len == sizeof buf) return -1;
      if ((k = recv(fd, buf + len, sizeof buf - len, 0)) < 0) return -1;
      if (k == 0) break;
      len += (size_t)k;
    }
    cl = (long)(len - hl);
  }
  if ((size_t)cl >= sizeof r->body) return -1;
  while (len - hl < (size_t)cl) {
    ssize_t k;
    if (len == sizeof buf) return -1;
    if ((k = recv(fd, buf + len, sizeof buf - len, 0)) <= 0) return -1;
    len += (size_t)k;
  }
  memcpy(r->body, buf + hl, (size_t)cl);
  r->body[cl] = '\0';
  return 0;
}

/* GET path with a small receive buffer and read to the end of the connection slowly (16 KiB,
 * then a pause of pause_ms): *status, *n body bytes, *pattern_ok = 1 when they follow big_byte.
 * 0 or -1. */
static int get_slow(int port, const char *host, const char *path, int pause_ms, int *status,
                    size_t *n, int *pattern_ok) {
  static char buf[16384];
  char req[512], *end;
  size_t len = 0, hl = 0;
  int rcvbuf = 4096, rc = -1, fd;
  struct timespec ts = {pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L};
  struct sockaddr_in sa;
  struct timeval tv = {20, 0};
  int k = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                   path, host);
  *status = 0;
  *n = 0;
  *pattern_ok = 1;
  if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0) return -1;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
      send(fd, req, (size_t)k, MSG_NOSIGNAL) != k)
    goto out;
  while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
    ssize_t r;
    if (len == sizeof buf || (r = recv(fd, buf + len, sizeof buf - len, 0)) <= 0) goto out;
    len += (size_t)r;
  }
  hl = (size_t)(end - buf) + 4;
  *status = atoi(buf + 9);
  for (;;) {
    for (size_t i = hl; i < len; i++, (*n)++)
      if (buf[i] != big_byte(*n)) *pattern_ok = 0;
    hl = len = 0;
    ssize_t r;
    nanosleep(&ts, NULL);
    r = recv(fd, buf, sizeof buf, 0);
    if (r < 0) goto out;
    if (r == 0) break;
    len = (size_t)r;
  }
  rc = 0;
out:
  close(fd);
  return rc;
}

static int get(int port, const char *host, const char *path, struct resp *r) {
  int fd = client_connect(port), rc;
  if (fd < 0) return -1;
  rc = get_on(fd, host, path, 0, r);
  close(fd);
  return rc;
}

/* ---------- proxy ---------- */

static const char *RETRY = "\"node_retry\": {\"retries\": 2, \"retry_budget_ms\": 15000, "
                           "\"fail_count\": 3, \"fail_window_ms\": 10000, \"skip_ms\": 30000, "
                           "\"half_open_requests\": 1, \"retry_on_status\": [502, 503, 504]}";

/* A proxy trusting ca_file, serving the publication doc. */
static struct proxy *start_proxy(const char *ca_file, const char *doc, int *port) {
  char err[256];
  struct proxy_opts o;
  struct proxy *p;
  struct sitecfg_set *s = sitecfg_load(doc, strlen(doc), err, sizeof err);
  if (!s) fprintf(stderr, "config: %s\n", err);
  assert_non_null(s);
  proxy_opts_default(&o);
  o.listen = "127.0.0.1:0";
  o.origin_ca_file = ca_file;
  o.threads = 2;
  o.stop_grace_ms = 3000;
  o.connect_timeout_ms = 5000;
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

/* One https origin of a publication. */
static void origin_json(char *out, size_t cap, int id, int level, int port, const char *hh) {
  char h[96];
  if (hh)
    snprintf(h, sizeof h, "\"%s\"", hh);
  else
    snprintf(h, sizeof h, "null");
  snprintf(out, cap,
           "{\"id\": %d, \"level\": %d, \"address\": \"127.0.0.1\", \"port\": %d, "
           "\"scheme\": \"https\", \"host_header\": %s, \"weight\": 1}",
           id, level, port, h);
}

/* A site of a publication: id, hostname and its origins (a JSON array body). */
static void site_json(char *out, size_t cap, int id, const char *host, const char *origins) {
  snprintf(out, cap,
           "{\"id\": %d, \"name\": \"s%d\", \"hostnames\": [\"%s\"], \"config_version\": 1, "
           "\"current_level\": 1, \"origins\": [%s], %s}",
           id, id, host, origins, RETRY);
}

/* Metric value of an exact "name{labels}" series, 0 when absent. */
static long long metric(struct proxy *p, const char *series) {
  struct buf m;
  long long v = 0;
  const char *at;
  size_t n = strlen(series);
  buf_init(&m, 0);
  assert_int_equal(proxy_metrics(p, &m), 0);
  for (at = m.data; (at = strstr(at, series)); at += n)
    if ((at == m.data || at[-1] == '\n') && at[n] == ' ') {
      v = atoll(at + n + 1);
      break;
    }
  buf_fini(&m);
  return v;
}

/* Wait (bounded) until a metric reaches at least want; returns the last value. */
static long long metric_at_least(struct proxy *p, const char *series, long long want) {
  long long v = 0;
  for (int i = 0; i < 200; i++) {
    if ((v = metric(p, series)) >= want) return v;
    sleep_ms(25);
  }
  fprintf(stderr, "%s stayed at %lld (want >= %lld)\n", series, v, want);
  return v;
}

/* ---------- fixture ---------- */

struct fx {
  char dir[64], ca_path[128];
  struct cert ca, ca2;
  struct cert good, wrong_name, other_ca;
};

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof *f);
  FILE *fp;
  assert_non_null(f);
  snprintf(f->dir, sizeof f->dir, "/tmp/test_proxy_tls.XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  f->ca = make_cert("cdnca test CA", NULL, NULL, 1);
  f->ca2 = make_cert("cdnca other CA", NULL, NULL, 2);
  f->good = make_cert("origin.tls.test", "DNS:origin.tls.test,DNS:plain.test", &f->ca, 10);
  f->wrong_name = make_cert("other.test", "DNS:other.test", &f->ca, 11);
  f->other_ca = make_cert("origin.tls.test", "DNS:origin.tls.test", &f->ca2, 12);
  snprintf(f->ca_path, sizeof f->ca_path, "%s/ca.pem", f->dir);
  fp = fopen(f->ca_path, "w");
  assert_non_null(fp);
  assert_int_equal(PEM_write_X509(fp, f->ca.x509), 1);
  assert_int_equal(fclose(fp), 0);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  cert_free(&f->ca);
  cert_free(&f->ca2);
  cert_free(&f->good);
  cert_free(&f->wrong_name);
  cert_free(&f->other_ca);
  unlink(f->ca_path);
  rmdir(f->dir);
  free(f);
  return 0;
}

/* ---------- tests ---------- */

/* A valid origin certificate: the request goes through, SNI and Host are the origin's
 * host_header (or the visitor's Host without its port), and the TLS connection is pooled. */
static void test_https_origin_ok(void **state) {
  struct fx *f = *state;
  struct origin *o = origin_start("good", &f->good);
  char doc[8192], o1[512], o2[512], s1[1536], s2[1536], sni[256];
  struct resp r;
  struct proxy *p;
  int port, fd;
  origin_json(o1, sizeof o1, 1, 1, o->port, "origin.tls.test");
  origin_json(o2, sizeof o2, 2, 1, o->port, NULL);
  site_json(s1, sizeof s1, 1, "shop.test", o1);
  site_json(s2, sizeof s2, 2, "plain.test", o2);
  snprintf(doc, sizeof doc, "{\"seq\": 1, \"full\": true, \"sites\": [%s, %s]}", s1, s2);
  p = start_proxy(f->ca_path, doc, &port);

  /* three requests on one visitor connection: one worker, one pooled TLS connection */
  fd = client_connect(port);
  assert_true(fd >= 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(get_on(fd, "shop.test", "/tls?x=1", 1, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.head, "X-Origin: good\r\n"));
    assert_string_equal(r.body, "{\"origin\":\"good\",\"sni\":\"origin.tls.test\"}");
  }
  close(fd);
  origin_sni(o, sni, sizeof sni);
  assert_string_equal(sni, "origin.tls.test");
  pthread_mutex_lock(&o->mu);
  assert_non_null(strstr(o->last_head, "GET /tls?x=1 HTTP/1.1\r\n"));
  assert_non_null(strstr(o->last_head, "\r\nHost: origin.tls.test\r\n"));
  pthread_mutex_unlock(&o->mu);
  assert_int_equal(atomic_load(&o->hits), 3);
  assert_int_equal(atomic_load(&o->handshakes), 1);

  /* no host_header: SNI is the visitor's Host without its port, and the Host goes as sent */
  assert_int_equal(get(port, "plain.test:8443", "/", &r), 0);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "{\"origin\":\"good\",\"sni\":\"plain.test\"}");
  pthread_mutex_lock(&o->mu);
  assert_non_null(strstr(o->last_head, "\r\nHost: plain.test:8443\r\n"));
  pthread_mutex_unlock(&o->mu);
  assert_int_equal(atomic_load(&o->handshakes), 2);
  assert_int_equal(metric_at_least(p, "cdnca_node_requests_total{code=\"200\"}", 4), 4);
  assert_int_equal(metric(p, "cdnca_node_origin_attempts_total{result=\"tls_error\"}"), 0);

  proxy_free(&p);
  origin_stop(o);
}

/* Send fd 2 to a new file path (returns the saved fd 2), or back (restore_stderr). */
static int capture_stderr(const char *path) {
  int saved = dup(STDERR_FILENO), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(saved >= 0 && fd >= 0);
  assert_true(dup2(fd, STDERR_FILENO) >= 0);
  close(fd);
  return saved;
}

static void restore_stderr(int saved, const char *path, char *out, size_t cap) {
  FILE *fp;
  size_t n;
  assert_true(dup2(saved, STDERR_FILENO) >= 0);
  close(saved);
  fp = fopen(path, "r");
  assert_non_null(fp);
  n = fread(out, 1, cap - 1, fp);
  out[n] = '\0';
  fclose(fp);
  unlink(path);
  if (n) fprintf(stderr, "%s", out); /* still show what was logged */
}

/* A response delimited by the end of the connection arrives whole and ends cleanly (no
 * truncation reported), whether the origin ends its TLS stream with close_notify or just
 * closes the TCP connection (OpenSSL 3 reports the latter as an "unexpected EOF"). */
static void test_close_delimited_body(void **state) {
  struct fx *f = *state;
  struct origin *o = origin_start("good", &f->good);
  char doc[4096], o1[512], s1[1536], logpath[160], logged[4096];
  struct resp r;
  struct proxy *p;
  int port, saved;
  origin_json(o1, sizeof o1, 1, 1, o->port, "origin.tls.test");
  site_json(s1, sizeof s1, 1, "shop.test", o1);
  snprintf(doc, sizeof doc, "{\"seq\": 1, \"full\": true, \"sites\": [%s]}", s1);
  p = start_proxy(f->ca_path, doc, &port);
  snprintf(logpath, sizeof logpath, "%s/stderr.log", f->dir);
  saved = capture_stderr(logpath);
  assert_int_equal(get(port, "shop.test", "/close-notify", &r), 0);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "{\"origin\":\"good\",\"sni\":\"origin.tls.test\"}");
  assert_int_equal(get(port, "shop.test", "/close-eof", &r), 0);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "{\"origin\":\"good\",\"sni\":\"origin.tls.test\"}");
  assert_int_equal(atomic_load(&o->hits), 2);
  {
    /* a slow visitor: the origin's end arrives while the proxy still holds body bytes */
    int status, ok;
    size_t n;
    assert_int_equal(get_slow(port, "shop.test", "/close-eof-big", 1, &status, &n, &ok), 0);
    assert_int_equal(status, 200);
    assert_int_equal(n, BIG_LEN);
    assert_true(ok);
  }
  restore_stderr(saved, logpath, logged, sizeof logged);
  assert_null(strstr(logged, "closed mid-response"));
  /* a length-delimited body cut short is still a truncation: the visitor's connection closes
   * before the announced length */
  assert_int_equal(get(port, "shop.test", "/short-eof", &r), -1);
  assert_int_equal(r.status, 200);
  proxy_free(&p);
  origin_stop(o);
}

/* A certificate for another name fails the attempt (TLS failure), which is retried on the
 * other origin of the level; alone, it gives the visitor a 502 JSON error. */
static void test_wrong_name_fails_over(void **state) {
  struct fx *f = *state;
  struct origin *bad = origin_start("bad", &f->wrong_name);
  struct origin *good = origin_start("good", &f->good);
  char doc[8192], ob[512], og[512], both[1100], s1[2048], s2[1536];
  struct resp r;
  struct proxy *p;
  long long tls_err, failed_502;
  int port;
  origin_json(ob, sizeof ob, 1, 1, bad->port, "origin.tls.test");
  origin_json(og, sizeof og, 2, 1, good->port, "origin.tls.test");
  snprintf(both, sizeof both, "%s, %s", ob, og);
  site_json(s1, sizeof s1, 1, "shop.test", both);
  origin_json(ob, sizeof ob, 3, 1, bad->port, "origin.tls.test");
  site_json(s2, sizeof s2, 2, "bad.test", ob);
  snprintf(doc, sizeof doc, "{\"seq\": 1, \"full\": true, \"sites\": [%s, %s]}", s1, s2);
  p = start_proxy(f->ca_path, doc, &port);

  /* round-robin over both: the bad one is picked at least once, every visitor gets 200 */
  for (int i = 0; i < 6; i++) {
    assert_int_equal(get(port, "shop.test", "/", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"origin\":\"good\",\"sni\":\"origin.tls.test\"}");
  }
  tls_err = metric_at_least(p, "cdnca_node_origin_attempts_total{result=\"tls_error\"}", 1);
  assert_true(tls_err >= 1);
  assert_int_equal(metric(p, "cdnca_node_retries_total"), tls_err);
  assert_true(atomic_load(&bad->accepts) >= 1);
  assert_int_equal(atomic_load(&bad->handshakes), 0);
  assert_int_equal(atomic_load(&bad->hits), 0);
  assert_int_equal(atomic_load(&good->hits), 6);

  /* the bad origin alone: 502 with a JSON error, counted as a failed request */
  assert_int_equal(get(port, "bad.test", "/", &r), 0);
  assert_int_equal(r.status, 502);
  assert_non_null(strstr(r.head, "Content-Type: application/json\r\n"));
  assert_non_null(strstr(r.body, "{\"error\":{\"code\":\"origin_unreachable\""));
  failed_502 = metric_at_least(p, "cdnca_node_requests_total{code=\"502\"}", 1);
  assert_int_equal(failed_502, 1);
  assert_int_equal(
      metric_at_least(p, "cdnca_node_origin_attempts_total{result=\"tls_error\"}", tls_err + 1),
      tls_err + 1);
  assert_int_equal(atomic_load(&bad->hits), 0);
  {
    /* the failure is in the origin's observations */
    cJSON *obs = proxy_observations(p), *e;
    int seen = 0;
    assert_non_null(obs);
    cJSON_ArrayForEach(e, obs) {
      cJSON *sid = cJSON_GetObjectItemCaseSensitive(e, "site_id");
      cJSON *fl = cJSON_GetObjectItemCaseSensitive(e, "failures");
      if (cJSON_IsNumber(sid) && sid->valuedouble == 2) {
        assert_true(cJSON_IsNumber(fl) && fl->valuedouble == 1);
        seen = 1;
      }
    }
    assert_true(seen);
    cJSON_Delete(obs);
  }

  proxy_free(&p);
  origin_stop(bad);
  origin_stop(good);
}

/* A certificate with the right name from a CA the proxy does not trust fails. */
static void test_unknown_ca_fails(void **state) {
  struct fx *f = *state;
  struct origin *o = origin_start("stranger", &f->other_ca);
  char doc[2048], o1[512], s1[1536];
  struct resp r;
  struct proxy *p;
  int port;
  origin_json(o1, sizeof o1, 1, 1, o->port, "origin.tls.test");
  site_json(s1, sizeof s1, 1, "shop.test", o1);
  snprintf(doc, sizeof doc, "{\"seq\": 1, \"full\": true, \"sites\": [%s]}", s1);
  p = start_proxy(f->ca_path, doc, &port);
  assert_int_equal(get(port, "shop.test", "/", &r), 0);
  assert_int_equal(r.status, 502);
  assert_non_null(strstr(r.body, "{\"error\":{\"code\":\"origin_unreachable\""));
  assert_int_equal(metric_at_least(p, "cdnca_node_origin_attempts_total{result=\"tls_error\"}", 1),
                   1);
  assert_int_equal(metric_at_least(p, "cdnca_node_requests_total{code=\"502\"}", 1), 1);
  assert_true(atomic_load(&o->accepts) >= 1);
  assert_int_equal(atomic_load(&o->handshakes), 0);
  assert_int_equal(atomic_load(&o->hits), 0);
  proxy_free(&p);
  origin_stop(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_https_origin_ok, setup, teardown),
      cmocka_unit_test_setup_teardown(test_close_delimited_body, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wrong_name_fails_over, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_ca_fails, setup, teardown),
  };
  signal(SIGPIPE, SIG_IGN);
  log_init("test_proxy_tls", LOG_TEXT, LOG_WARN);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
