/* bench_probe — probe throughput of common/probe's engines in one run, against fast
 * in-process loopback origins (HTTP or HTTPS), N sites x 3 origins per batch.
 *
 * usage: bench_probe [--sites 1000,10000,...] [--engines epoll,poll,epoll-curl] [--conc N]
 *                    [--budget S]
 *                    [--delay-ms D] [--https] [--system-cas] [--tls-resume] [--spread]
 *   For each batch size, each engine runs one probe_run of sites x 3 probes (alternating, so
 *   both see the same machine load). Per run: wall time, probes/s, the CPU time of the probing
 *   thread (getrusage RUSAGE_THREAD) and probes per prober CPU-second, the whole process's CPU
 *   (prober + responder), failures. --delay-ms makes every origin answer D ms after the request
 *   (so up to --conc probes are in flight at once, as with real origins). --https: the origins
 *   speak TLS (ECDSA P-256 certificate for *.bench.test from a throwaway CA made with
 *   tests/integration/certs.py), a full handshake with verification per probe. --system-cas: the
 *   probers' CA file is the system bundle (/etc/ssl/certs/ca-certificates.crt) plus the test CA,
 *   a CA store of the size controld and noded load in production. --tls-resume
 *   lets each transfer slot resume its previous TLS session (measurement only, set through
 *   probe.h's easy-handle hook; the daemons never do this, see tests/bench/README.md). The poll
 *   engine is probe_poll.c's loop on probe.h's loop seam, not one of the prober's. --spread: every
 * origin of every site has its own address (127.a.b.c) and the port is closed, so each probe is a
 * refused connection: what a prober pays per probe as the number of distinct origin addresses grows
 * (failed = probes).
 */
#include "probe.h"
#include "probe_poll.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef CDNCA_TESTS_DIR
#error "CDNCA_TESTS_DIR must name the tests source directory"
#endif

#define ORIGINS 3
#define MAX_EVENTS 256
#define MAX_SIZES 16
#define MAX_ENGINES 3

/* The engines compared: the prober's two and the poll loop of probe_poll.c. */
enum bench_engine { ENG_EPOLL, ENG_EPOLL_CURL, ENG_POLL };
static const char *const ENGINE_NAMES[] = {"epoll", "epoll-curl", "poll"};

/* --tls-resume: libcurl's TLS session cache on, for each transfer slot (probe.h's easy-handle
   hook; the prober turns it off). */
static int tls_resume(void *easy, void *ud) {
  (void)ud;
  return curl_easy_setopt((CURL *)easy, CURLOPT_SSL_SESSIONID_CACHE, 1L) == CURLE_OK ? 0 : -1;
}

static const char RESPONSE[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                               "Content-Length: 3\r\nConnection: close\r\n\r\nok\n";

/* Per-connection state of the responder, indexed by fd. */
struct rconn {
  SSL *ssl;            /* NULL for plain HTTP */
  unsigned char match; /* how much of "\r\n\r\n" has been seen */
  unsigned char open;
};

/* A request read completely, to be answered at due (monotonic ms). FIFO: the delay is fixed. */
struct pending {
  int fd;
  int64_t due;
};

/* The responder: one epoll thread answering every request with RESPONSE, then closing. */
struct responder {
  int epfd;
  int stopfd;
  int lfd[ORIGINS];
  int port[ORIGINS];
  struct rconn *conn;
  size_t nconn;
  SSL_CTX *tls; /* NULL = plain HTTP */
  int delay_ms;
  struct pending *q; /* ring of nconn entries */
  size_t qhead, qlen;
  long answered;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t now_ms(void) {
  return (int64_t)(now_s() * 1000.0);
}

static double tv_s(struct timeval tv) {
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static int listen_loopback(int *port) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t len = sizeof sa;
  int one = 1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 4096) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

static void conn_close(struct responder *r, int fd) {
  struct rconn *c = &r->conn[fd];
  epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL);
  if (c->ssl) SSL_free(c->ssl);
  c->ssl = NULL;
  c->open = 0;
  close(fd);
}

static void answer(struct responder *r, int fd) {
  struct rconn *c = &r->conn[fd];
  if (c->ssl) {
    int w = SSL_write(c->ssl, RESPONSE, (int)sizeof RESPONSE - 1);
    (void)w; /* a tiny record always fits a fresh socket's send buffer */
  } else {
    ssize_t w = write(fd, RESPONSE, sizeof RESPONSE - 1);
    (void)w;
  }
  r->answered++;
  conn_close(r, fd);
}

/* The request is complete: answer now, or queue it for delay_ms. */
static void request_done(struct responder *r, int fd) {
  if (r->delay_ms <= 0) {
    answer(r, fd);
    return;
  }
  epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL); /* nothing more to read; wait for the timer */
  r->q[(r->qhead + r->qlen) % r->nconn] = (struct pending){fd, now_ms() + r->delay_ms};
  r->qlen++;
}

/* Feed bytes to the end-of-head matcher; 1 when the request head is complete. */
static int scan(struct rconn *c, const char *buf, size_t n) {
  static const char end[] = "\r\n\r\n";
  for (size_t i = 0; i < n; i++) {
    c->match = (buf[i] == end[c->match]) ? (unsigned char)(c->match + 1) : (buf[i] == '\r' ? 1 : 0);
    if (c->match == 4) return 1;
  }
  return 0;
}

static void conn_event(struct responder *r, int fd) {
  struct rconn *c = &r->conn[fd];
  char buf[4096];
  if (!c->open) return;
  if (c->ssl) {
    for (;;) {
      int n = SSL_read(c->ssl, buf, sizeof buf);
      if (n > 0) {
        if (scan(c, buf, (size_t)n)) {
          request_done(r, fd);
          return;
        }
        continue;
      }
      switch (SSL_get_error(c->ssl, n)) {
      case SSL_ERROR_WANT_READ:
        return;
      case SSL_ERROR_WANT_WRITE: {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.fd = fd};
        epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &ev);
        return;
      }
      default:
        ERR_clear_error();
        conn_close(r, fd);
        return;
      }
    }
  }
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      conn_close(r, fd);
      return;
    }
    if (n < 0) return;
    if (scan(c, buf, (size_t)n)) {
      request_done(r, fd);
      return;
    }
  }
}

static void accept_all(struct responder *r, int lfd) {
  for (;;) {
    struct epoll_event cev = {.events = EPOLLIN};
    int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) break;
    if ((size_t)c >= r->nconn) {
      close(c);
      continue;
    }
    memset(&r->conn[c], 0, sizeof r->conn[c]);
    r->conn[c].open = 1;
    if (r->tls) {
      r->conn[c].ssl = SSL_new(r->tls);
      if (!r->conn[c].ssl || SSL_set_fd(r->conn[c].ssl, c) != 1) {
        conn_close(r, c);
        continue;
      }
      SSL_set_accept_state(r->conn[c].ssl);
    }
    cev.data.fd = c;
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, c, &cev) != 0) conn_close(r, c);
  }
}

static void *responder_main(void *arg) {
  struct responder *r = arg;
  struct epoll_event ev[MAX_EVENTS];
  for (;;) {
    int wait = 1000, n;
    if (r->qlen > 0) {
      int64_t left = r->q[r->qhead].due - now_ms();
      wait = left < 0 ? 0 : (int)left;
    }
    n = epoll_wait(r->epfd, ev, MAX_EVENTS, wait);
    for (int i = 0; i < n; i++) {
      int fd = ev[i].data.fd;
      int listener = -1;
      if (fd == r->stopfd) return NULL;
      for (int k = 0; k < ORIGINS; k++)
        if (fd == r->lfd[k]) listener = k;
      if (listener >= 0)
        accept_all(r, fd);
      else
        conn_event(r, fd);
    }
    while (r->qlen > 0 && r->q[r->qhead].due <= now_ms()) {
      answer(r, r->q[r->qhead].fd);
      r->qhead = (r->qhead + 1) % r->nconn;
      r->qlen--;
    }
  }
}

static int responder_start(struct responder *r, pthread_t *th, size_t maxfd, SSL_CTX *tls,
                           int delay_ms) {
  struct epoll_event ev = {.events = EPOLLIN};
  memset(r, 0, sizeof *r);
  r->nconn = maxfd;
  r->tls = tls;
  r->delay_ms = delay_ms;
  r->conn = calloc(maxfd, sizeof *r->conn);
  r->q = calloc(maxfd, sizeof *r->q);
  r->epfd = epoll_create1(EPOLL_CLOEXEC);
  r->stopfd = eventfd(0, EFD_CLOEXEC);
  if (!r->conn || !r->q || r->epfd < 0 || r->stopfd < 0) return -1;
  ev.data.fd = r->stopfd;
  epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->stopfd, &ev);
  for (int k = 0; k < ORIGINS; k++) {
    r->lfd[k] = listen_loopback(&r->port[k]);
    if (r->lfd[k] < 0) return -1;
    ev.data.fd = r->lfd[k];
    epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->lfd[k], &ev);
  }
  return pthread_create(th, NULL, responder_main, r) == 0 ? 0 : -1;
}

static void responder_stop(struct responder *r, pthread_t th) {
  uint64_t one = 1;
  ssize_t w = write(r->stopfd, &one, sizeof one);
  (void)w;
  pthread_join(th, NULL);
  for (size_t fd = 0; fd < r->nconn; fd++)
    if (r->conn[fd].open) conn_close(r, (int)fd);
  for (int k = 0; k < ORIGINS; k++)
    close(r->lfd[k]);
  close(r->stopfd);
  close(r->epfd);
  free(r->conn);
  free(r->q);
}

/* ---- TLS test PKI (throwaway, in a temp dir) ---- */

#define SYSTEM_CAS "/etc/ssl/certs/ca-certificates.crt"

struct pki {
  char dir[64];
  char ca[128], cert[128], key[128];
};

/* system_cas: ca names the test CA followed by the system bundle. */
static int make_pki(struct pki *k, int system_cas) {
  char cmd[512];
  snprintf(k->dir, sizeof k->dir, "/tmp/cdnca-bench-probe-XXXXXX");
  if (!mkdtemp(k->dir)) return -1;
  snprintf(cmd, sizeof cmd,
           "python3 '%s/integration/certs.py' --dir '%s' --host '*.bench.test' --ip 127.0.0.1 "
           ">/dev/null",
           CDNCA_TESTS_DIR, k->dir);
  if (system(cmd) != 0) return -1;
  snprintf(k->ca, sizeof k->ca, "%s/ca.pem", k->dir);
  snprintf(k->cert, sizeof k->cert, "%s/server.pem", k->dir);
  snprintf(k->key, sizeof k->key, "%s/server.key", k->dir);
  if (system_cas) {
    snprintf(cmd, sizeof cmd, "cat '%s' '%s' > '%s/bundle.pem'", k->ca, SYSTEM_CAS, k->dir);
    if (system(cmd) != 0) return -1;
    snprintf(k->ca, sizeof k->ca, "%s/bundle.pem", k->dir);
  }
  return 0;
}

static void remove_pki(const struct pki *k) {
  char cmd[128];
  if (!k->dir[0]) return;
  snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", k->dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", k->dir);
}

static SSL_CTX *server_ctx(const struct pki *k) {
  SSL_CTX *c = SSL_CTX_new(TLS_server_method());
  if (!c) return NULL;
  if (SSL_CTX_use_certificate_chain_file(c, k->cert) != 1 ||
      SSL_CTX_use_PrivateKey_file(c, k->key, SSL_FILETYPE_PEM) != 1) {
    SSL_CTX_free(c);
    return NULL;
  }
  return c;
}

/* ---- batches ---- */

struct row {
  const char *engine;
  int sites;
  size_t probes;
  size_t failed;
  double wall, cpu_prober, cpu_all;
  char first_error[PROBE_ERROR_MAX];
};

/* one_host: every probe uses the same host name (the best case for TLS session reuse, whose
   cache is keyed by host and port); else one host name per site, as in a real round. */
static int run_batch(struct probe *p, const struct responder *r, int sites, int https, int one_host,
                     int spread_port, struct row *row) {
  size_t n = (size_t)sites * ORIGINS;
  struct probe_target *t = calloc(n, sizeof *t);
  struct probe_result *res = calloc(n, sizeof *res);
  char(*hosts)[32] = calloc((size_t)sites, sizeof *hosts);
  char(*addrs)[20] = spread_port ? calloc(n, sizeof *addrs) : NULL;
  struct rusage th0, th1, all0, all1;
  double t0;
  int rc = -1;
  if (!t || !res || !hosts || (spread_port && !addrs)) goto out;
  for (int s = 0; s < sites; s++) {
    snprintf(hosts[s], sizeof hosts[s], "site%d.bench.test", one_host ? 0 : s);
    for (int k = 0; k < ORIGINS; k++) {
      struct probe_target *x = &t[(size_t)s * ORIGINS + (size_t)k];
      x->scheme = https ? "https" : "http";
      x->address = "127.0.0.1";
      x->port = r->port[k];
      if (spread_port) { /* one address per origin in 127.0.0.0/8, a closed port */
        size_t j = (size_t)s * ORIGINS + (size_t)k;
        snprintf(addrs[j], sizeof addrs[j], "127.%zu.%zu.%zu", 1 + (j >> 16) % 250, (j >> 8) & 255,
                 1 + (j & 255) % 254);
        x->address = addrs[j];
        x->port = spread_port;
      }
      x->host = hosts[s];
      x->path = "/healthz";
      x->timeout_ms = 10000;
    }
  }
  getrusage(RUSAGE_THREAD, &th0);
  getrusage(RUSAGE_SELF, &all0);
  t0 = now_s();
  if (probe_run(p, t, n, res, NULL) != 0) goto out;
  row->wall = now_s() - t0;
  getrusage(RUSAGE_THREAD, &th1);
  getrusage(RUSAGE_SELF, &all1);
  row->cpu_prober =
      tv_s(th1.ru_utime) + tv_s(th1.ru_stime) - tv_s(th0.ru_utime) - tv_s(th0.ru_stime);
  row->cpu_all =
      tv_s(all1.ru_utime) + tv_s(all1.ru_stime) - tv_s(all0.ru_utime) - tv_s(all0.ru_stime);
  row->sites = sites;
  row->probes = n;
  row->failed = 0;
  row->first_error[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    if (res[i].ok) continue;
    if (row->failed++ == 0) snprintf(row->first_error, sizeof row->first_error, "%s", res[i].error);
  }
  rc = 0;
out:
  free(t);
  free(res);
  free(hosts);
  free(addrs);
  return rc;
}

static int parse_sizes(const char *s, int *out, int max) {
  int n = 0;
  while (*s && n < max) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v <= 0 || v > 10000000) return -1;
    out[n++] = (int)v;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return n;
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--sites 1000,10000,...] [--engines epoll,poll,epoll-curl] [--conc N]\n"
          "          [--budget S]\n"
          "          [--delay-ms D] [--https] [--system-cas] [--tls-resume] [--spread]\n",
          argv0);
}

int main(int argc, char **argv) {
  int sizes[MAX_SIZES] = {1000, 10000, 30000, 100000}, nsizes = 4;
  enum bench_engine engines[MAX_ENGINES] = {ENG_EPOLL, ENG_POLL};
  int nengines = 2, conc = PROBE_DEFAULT_CONCURRENCY, delay_ms = 0, https = 0, resume = 0;
  int system_cas = 0, spread = 0, spread_port = 0, spread_fd = -1;
  double budget = 30.0;
  struct rlimit rl;
  struct responder r;
  struct pki pki;
  SSL_CTX *tls = NULL;
  pthread_t th;
  struct probe *p[MAX_ENGINES] = {NULL};
  struct row best[MAX_ENGINES];
  double per_cpu[MAX_ENGINES] = {0};
  int rc = 1, started = 0;

  memset(&pki, 0, sizeof pki);
  memset(best, 0, sizeof best);
  signal(SIGPIPE, SIG_IGN); /* a probe that gave up closes first: the responder's write fails */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--https") == 0) {
      https = 1;
    } else if (strcmp(a, "--spread") == 0) {
      spread = 1;
    } else if (strcmp(a, "--system-cas") == 0) {
      system_cas = 1;
    } else if (strcmp(a, "--tls-resume") == 0) {
      resume = 1;
    } else if (v && strcmp(a, "--sites") == 0) {
      nsizes = parse_sizes(v, sizes, MAX_SIZES);
      i++;
    } else if (v && strcmp(a, "--engines") == 0) {
      char list[32], *save = NULL;
      nengines = 0;
      snprintf(list, sizeof list, "%s", v);
      for (char *w = strtok_r(list, ",", &save); w && nengines < MAX_ENGINES;
           w = strtok_r(NULL, ",", &save)) {
        if (strcmp(w, "epoll") == 0)
          engines[nengines++] = ENG_EPOLL;
        else if (strcmp(w, "poll") == 0)
          engines[nengines++] = ENG_POLL;
        else if (strcmp(w, "epoll-curl") == 0)
          engines[nengines++] = ENG_EPOLL_CURL;
        else
          nengines = -10;
      }
      i++;
    } else if (v && strcmp(a, "--conc") == 0) {
      conc = atoi(v);
      i++;
    } else if (v && strcmp(a, "--budget") == 0) {
      budget = atof(v);
      i++;
    } else if (v && strcmp(a, "--delay-ms") == 0) {
      delay_ms = atoi(v);
      i++;
    } else {
      usage(argv[0]);
      return 2;
    }
  }
  if (nsizes <= 0 || nengines <= 0 || conc <= 0 || budget <= 0 || delay_ms < 0) {
    usage(argv[0]);
    return 2;
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  if ((rlim_t)conc * 2 + 64 > rl.rlim_cur) {
    fprintf(stderr, "RLIMIT_NOFILE %lu too low for concurrency %d\n", (unsigned long)rl.rlim_cur,
            conc);
    return 1;
  }
  if (https) {
    if (make_pki(&pki, system_cas) != 0 || !(tls = server_ctx(&pki))) {
      fprintf(stderr, "cannot make the TLS test PKI (python3, openssl)\n");
      goto out;
    }
  }
  if (responder_start(&r, &th, (size_t)rl.rlim_cur, tls, delay_ms) != 0) {
    fprintf(stderr, "cannot start the responder\n");
    goto out;
  }
  started = 1;
  if (spread) { /* a port bound on every loopback address and never listening: refused */
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof sa;
    spread_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (spread_fd < 0 || bind(spread_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(spread_fd, (struct sockaddr *)&sa, &len) != 0) {
      fprintf(stderr, "cannot reserve a closed port\n");
      goto out;
    }
    spread_port = ntohs(sa.sin_port);
  }
  for (int e = 0; e < nengines; e++) {
    struct probe_opts o = {.user_agent = PROBE_UA_CONTROL,
                           .max_concurrency = conc,
                           .engine = engines[e] == ENG_EPOLL ? PROBE_ENGINE_EPOLL
                                                             : PROBE_ENGINE_EPOLL_CURL,
                           .ca_file = https ? pki.ca : NULL};
    p[e] = probe_new(&o);
    if (!p[e]) goto out;
    if (engines[e] == ENG_POLL && probe_poll_use(p[e]) != 0) goto out;
    if (resume) probe_set_easy_hook(p[e], tls_resume, NULL);
  }

  if (spread)
    printf("--spread: one address per origin (127.a.b.c), closed port: every probe is refused\n");
  printf("probe throughput: %s%s, %d origins per site, concurrency %d, origin delay %d ms%s, "
         "nofile %lu\n",
         https ? "HTTPS (full handshake, ECDSA P-256, verified)" : "HTTP",
         https && system_cas ? ", CA file = system bundle + test CA" : "", ORIGINS, conc, delay_ms,
         resume ? ", TLS session reuse ON and one host name (best case; measurement only)" : "",
         (unsigned long)rl.rlim_cur);
  printf("| engine | sites | probes | wall s | probes/s | prober CPU s | probes per prober "
         "CPU-s | process CPU s | failed |\n");
  printf("|---|------:|-------:|-------:|---------:|-------------:|------:|--------------:|----"
         "---:|\n");
  fflush(stdout);
  for (int i = 0; i < nsizes; i++) {
    int over = 0;
    for (int e = 0; e < nengines; e++) {
      struct row row;
      if (run_batch(p[e], &r, sizes[i], https, resume, spread_port, &row) != 0) {
        fprintf(stderr, "batch of %d sites failed to run\n", sizes[i]);
        goto out;
      }
      row.engine = ENGINE_NAMES[engines[e]];
      printf("| %s | %d | %zu | %.2f | %.0f | %.2f | %.0f | %.2f | %zu%s%s |\n", row.engine,
             row.sites, row.probes, row.wall, (double)row.probes / row.wall, row.cpu_prober,
             (double)row.probes / row.cpu_prober, row.cpu_all, row.failed,
             row.failed ? " first: " : "", row.first_error);
      fflush(stdout);
      if (row.wall <= budget && row.failed == 0) {
        best[e] = row;
        per_cpu[e] = (double)row.probes / row.cpu_prober;
      }
      if (row.wall > budget) over = 1;
    }
    if (over) break;
  }
  for (int e = 0; e < nengines; e++) {
    if (best[e].probes == 0) {
      printf("%s: no batch ran within %.0f s without failures\n", ENGINE_NAMES[engines[e]], budget);
      continue;
    }
    printf("%s: largest batch within %.0f s: %d sites x %d (%.2f s wall); at %.0f probes per "
           "prober CPU-second one core fits about %.0f sites x %d in a %.0f s round\n",
           ENGINE_NAMES[engines[e]], budget, best[e].sites, ORIGINS, best[e].wall, per_cpu[e],
           per_cpu[e] * budget / ORIGINS, ORIGINS, budget);
  }
  /* every engine against every other that ran the same largest batch */
  for (int a = 0; a < nengines; a++)
    for (int b = 0; b < nengines; b++)
      if (a != b && engines[b] == ENG_POLL && per_cpu[b] > 0 && per_cpu[a] > 0 &&
          best[a].sites == best[b].sites)
        printf("%s / %s, probes per prober CPU-second at %d sites: %.2fx\n",
               ENGINE_NAMES[engines[a]], ENGINE_NAMES[engines[b]], best[a].sites,
               per_cpu[a] / per_cpu[b]);
  for (int a = 0; a < nengines; a++)
    for (int b = 0; b < nengines; b++)
      if (engines[a] == ENG_EPOLL && engines[b] == ENG_EPOLL_CURL && per_cpu[b] > 0 &&
          per_cpu[a] > 0 && best[a].sites == best[b].sites)
        printf("%s / %s, probes per prober CPU-second at %d sites: %.2fx\n",
               ENGINE_NAMES[engines[a]], ENGINE_NAMES[engines[b]], best[a].sites,
               per_cpu[a] / per_cpu[b]);
  printf("responder answered %ld requests\n", r.answered);
  rc = 0;
out:
  for (int e = 0; e < MAX_ENGINES; e++)
    probe_free(&p[e]);
  if (spread_fd >= 0) close(spread_fd);
  if (started) responder_stop(&r, th);
  if (tls) SSL_CTX_free(tls);
  remove_pki(&pki);
  return rc;
}
