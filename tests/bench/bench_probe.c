/* bench_probe — probe throughput: N sites x 3 origins against fast in-process loopback origins.
 *
 * usage: bench_probe [max_sites [concurrency [budget_s]]]
 *   Runs batches of 1000, 3000, 10000, 20000 ... sites (3 probes each, never more than
 *   max_sites, default 20000) and prints wall time, probes/s and CPU per batch, then the
 *   largest batch that fits in budget_s (default 30) at the measured rate.
 */
#include "probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
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

#define ORIGINS 3
#define MAX_EVENTS 256

static const char RESPONSE[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                               "Content-Length: 3\r\nConnection: close\r\n\r\nok\n";

/* The responder: one epoll thread answering every request with RESPONSE, then closing. */
struct responder {
  int epfd;
  int stopfd;
  int lfd[ORIGINS];
  int port[ORIGINS];
  unsigned char *match; /* per fd: how much of "\r\n\r\n" has been seen */
  size_t nmatch;
  long answered;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
  epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL);
  close(fd);
}

static void conn_read(struct responder *r, int fd) {
  static const char end[] = "\r\n\r\n";
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      conn_close(r, fd);
      return;
    }
    if (n < 0) return;
    for (ssize_t i = 0; i < n; i++) {
      unsigned char *m = &r->match[fd];
      *m = (buf[i] == end[*m]) ? (unsigned char)(*m + 1) : (buf[i] == '\r' ? 1 : 0);
      if (*m == 4) {
        ssize_t w = write(fd, RESPONSE, sizeof RESPONSE - 1);
        (void)w; /* a tiny reply always fits a fresh socket's send buffer */
        r->answered++;
        conn_close(r, fd);
        return;
      }
    }
  }
}

static void *responder_main(void *arg) {
  struct responder *r = arg;
  struct epoll_event ev[MAX_EVENTS];
  for (;;) {
    int n = epoll_wait(r->epfd, ev, MAX_EVENTS, 1000);
    for (int i = 0; i < n; i++) {
      int fd = ev[i].data.fd;
      int is_listener = 0;
      if (fd == r->stopfd) return NULL;
      for (int k = 0; k < ORIGINS; k++)
        is_listener |= fd == r->lfd[k];
      if (!is_listener) {
        conn_read(r, fd);
        continue;
      }
      for (;;) {
        struct epoll_event cev = {.events = EPOLLIN};
        int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0) break;
        if ((size_t)c >= r->nmatch) {
          close(c);
          continue;
        }
        r->match[c] = 0;
        cev.data.fd = c;
        if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, c, &cev) != 0) close(c);
      }
    }
  }
}

static int responder_start(struct responder *r, pthread_t *th, size_t maxfd) {
  struct epoll_event ev = {.events = EPOLLIN};
  memset(r, 0, sizeof *r);
  r->nmatch = maxfd;
  r->match = calloc(maxfd, 1);
  r->epfd = epoll_create1(EPOLL_CLOEXEC);
  r->stopfd = eventfd(0, EFD_CLOEXEC);
  if (!r->match || r->epfd < 0 || r->stopfd < 0) return -1;
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
  for (int k = 0; k < ORIGINS; k++)
    close(r->lfd[k]);
  close(r->stopfd);
  close(r->epfd);
  free(r->match);
}

struct row {
  int sites;
  size_t probes;
  size_t failed;
  double wall, cpu_prober, cpu_all;
  char first_error[PROBE_ERROR_MAX];
};

static int run_batch(struct probe *p, const struct responder *r, int sites, struct row *row) {
  size_t n = (size_t)sites * ORIGINS;
  struct probe_target *t = calloc(n, sizeof *t);
  struct probe_result *res = calloc(n, sizeof *res);
  char(*hosts)[32] = calloc((size_t)sites, sizeof *hosts);
  struct rusage th0, th1, all0, all1;
  double t0;
  int rc = -1;
  if (!t || !res || !hosts) goto out;
  for (int s = 0; s < sites; s++) {
    snprintf(hosts[s], sizeof hosts[s], "site%d.bench.test", s);
    for (int k = 0; k < ORIGINS; k++) {
      struct probe_target *x = &t[(size_t)s * ORIGINS + (size_t)k];
      x->scheme = "http";
      x->address = "127.0.0.1";
      x->port = r->port[k];
      x->host = hosts[s];
      x->path = "/healthz";
      x->timeout_ms = 5000;
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
  return rc;
}

int main(int argc, char **argv) {
  static const int sizes[] = {1000, 3000, 10000, 20000, 40000, 80000};
  int max_sites = argc > 1 ? atoi(argv[1]) : 20000;
  int conc = argc > 2 ? atoi(argv[2]) : PROBE_DEFAULT_CONCURRENCY;
  double budget = argc > 3 ? atof(argv[3]) : 30.0;
  struct rlimit rl;
  struct responder r;
  pthread_t th;
  struct probe_opts o = {.user_agent = PROBE_UA_CONTROL, .max_concurrency = conc};
  struct probe *p = NULL;
  struct row best = {0};
  int rc = 1;

  if (max_sites <= 0 || conc <= 0 || budget <= 0) {
    fprintf(stderr, "usage: %s [max_sites [concurrency [budget_s]]]\n", argv[0]);
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
  if (responder_start(&r, &th, (size_t)rl.rlim_cur) != 0) {
    fprintf(stderr, "cannot start the responder\n");
    return 1;
  }
  p = probe_new(&o);
  if (!p) goto out;

  printf("probe throughput: %d origins per site, concurrency %d, loopback, nofile %lu\n", ORIGINS,
         conc, (unsigned long)rl.rlim_cur);
  printf("| sites | probes | wall s | probes/s | prober CPU s | process CPU s | failed |\n");
  printf("|------:|-------:|-------:|---------:|-------------:|--------------:|-------:|\n");
  fflush(stdout);
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && sizes[i] <= max_sites; i++) {
    struct row row;
    if (run_batch(p, &r, sizes[i], &row) != 0) {
      fprintf(stderr, "batch of %d sites failed to run\n", sizes[i]);
      goto out;
    }
    printf("| %d | %zu | %.2f | %.0f | %.2f | %.2f | %zu%s%s |\n", row.sites, row.probes, row.wall,
           (double)row.probes / row.wall, row.cpu_prober, row.cpu_all, row.failed,
           row.failed ? " first: " : "", row.first_error);
    fflush(stdout);
    if (row.wall <= budget) best = row;
    if (row.wall > budget) break;
  }
  if (best.probes > 0) {
    double rate = (double)best.probes / best.wall;
    printf("largest measured batch within %.0f s: %d sites (%zu probes, %.2f s); at %.0f "
           "probes/s a %.0f s round fits about %.0f sites x %d origins\n",
           budget, best.sites, best.probes, best.wall, rate, budget, rate * budget / ORIGINS,
           ORIGINS);
  }
  printf("responder answered %ld requests\n", r.answered);
  rc = 0;
out:
  probe_free(&p);
  responder_stop(&r, th);
  return rc;
}
