/* bench_alog — what noded's access log costs a request by itself: the line's JSON (access_json),
 * its log prefix and its place in the worker's batch (alog_line, 64 KiB and 100 ms as noded's
 * workers use), and its share of the batched write(2) to a regular file, timed over N lines for
 * the text and the JSON log formats; against the check a request makes when the log is off
 * (log_enabled). The request is a typical one of bench_edge.sh: a site, a visitor address, a
 * host and a path, one attempt, 200, 1 KiB.
 * usage: bench_alog [N (default 2000000)] [ROUNDS (default 5)] [DIR (default /tmp)]
 * Prints ns per request, the median over ROUNDS, and the bytes written per line. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "access.h"
#include "alog.h"
#include "benchutil.h"
#include "buf.h"
#include "log.h"

static const struct proxy_access req = {.site_id = 1,
                                        .site = "bench",
                                        .origin_id = 1,
                                        .client = "127.0.0.1",
                                        .level = 1,
                                        .attempts = 1,
                                        .status = 200,
                                        .duration_ms = 1,
                                        .method = "GET",
                                        .host = "bench.test",
                                        .path = "/",
                                        .bytes = 1024,
                                        .error = NULL};

/* ns per request with the log on, lines written to path; *bytes: the file's size per line */
static double run_on(const char *path, long n, double *bytes) {
  struct buf b = {0};
  struct alog *a;
  struct stat st;
  double t0, t;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0 || !(a = alog_new(fd, 65536, 100))) return -1;
  t0 = bench_now_ns();
  for (long i = 0; i < n; i++) {
    /* the worker's clock advances once per loop of ~25 requests; here once per 25 lines */
    int64_t now_ms = (int64_t)(i / 25);
    if (log_enabled(LOG_INFO) && access_json(&b, &req) == 0)
      (void)alog_line(a, LOG_INFO, "access_default", b.data, b.len, now_ms);
  }
  alog_flush(a);
  t = (bench_now_ns() - t0) / (double)n;
  alog_free(&a);
  *bytes = fstat(fd, &st) == 0 ? (double)st.st_size / (double)n : 0;
  close(fd);
  unlink(path);
  buf_fini(&b);
  return t;
}

/* ns per request with the log off: the level check the request makes */
static double run_off(long n, long *sink) {
  double t0 = bench_now_ns();
  long acc = 0;
  for (long i = 0; i < n; i++)
    acc += log_enabled(LOG_INFO);
  *sink += acc;
  return (bench_now_ns() - t0) / (double)n;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000000, sink = 0;
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  const char *dir = argc > 3 ? argv[3] : "/tmp";
  static const struct {
    const char *name;
    enum log_format fmt;
  } fmts[] = {{"text", LOG_TEXT}, {"json", LOG_JSON}};
  char path[512];
  double on[64], off[64], bytes = 0;
  if (n < 1 || rounds < 1 || rounds > 64) {
    fprintf(stderr, "usage: bench_alog [N] [ROUNDS 1..64] [DIR]\n");
    return 2;
  }
  snprintf(path, sizeof path, "%s/bench_alog.%ld.log", dir, (long)getpid());
  for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
    log_init("noded", fmts[f].fmt, LOG_INFO);
    for (int i = 0; i < rounds; i++)
      if ((on[i] = run_on(path, n, &bytes)) < 0) {
        perror(path);
        return 1;
      }
    printf("access log on, %s format: %.1f ns per request (median of %d rounds of %ld), %.0f "
           "bytes a line\n",
           fmts[f].name, bench_median(on, rounds), rounds, n, bytes);
  }
  log_init("noded", LOG_TEXT, LOG_WARN);
  for (int i = 0; i < rounds; i++)
    off[i] = run_off(n, &sink);
  printf("access log off (--log-level warn): %.2f ns per request%s\n", bench_median(off, rounds),
         sink < 0 ? " " : "");
  return 0;
}
