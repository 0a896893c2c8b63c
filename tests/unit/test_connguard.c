/* Unit tests for common/connguard: the address key (IPv4-mapped IPv6 as IPv4), the head
 * deadline, the per-address cap (admit, open, close; refusals counted), the sweep that shuts
 * down the socket of a head past its deadline (the peer reads the end of the stream), and what
 * such a connection was: a head too slow (a refusal), idle after a request, or already closed by
 * its client (neither counted), on real loopback TCP connections. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "connguard.h"

static struct sockaddr_in v4(const char *ip) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

static void test_ip_key(void **state) {
  struct sockaddr_in a = v4("192.0.2.7");
  struct sockaddr_in6 b;
  struct sockaddr_un u;
  char key[64];
  (void)state;
  assert_int_equal(connguard_ip_key((struct sockaddr *)&a, sizeof a, key, sizeof key), 0);
  assert_string_equal(key, "192.0.2.7");
  memset(&b, 0, sizeof b);
  b.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::ffff:192.0.2.7", &b.sin6_addr);
  assert_int_equal(connguard_ip_key((struct sockaddr *)&b, sizeof b, key, sizeof key), 0);
  assert_string_equal(key, "192.0.2.7");
  inet_pton(AF_INET6, "2001:db8::1", &b.sin6_addr);
  assert_int_equal(connguard_ip_key((struct sockaddr *)&b, sizeof b, key, sizeof key), 0);
  assert_string_equal(key, "2001:db8::1");
  memset(&u, 0, sizeof u);
  u.sun_family = AF_UNIX;
  assert_int_equal(connguard_ip_key((struct sockaddr *)&u, sizeof u, key, sizeof key), 0);
  assert_string_equal(key, "unix:");
  /* a truncated address is no key */
  assert_int_equal(connguard_ip_key((struct sockaddr *)&b, 8, key, sizeof key), -1);
}

static void test_head_expired(void **state) {
  (void)state;
  assert_false(connguard_head_expired(1000, 0, 11000, 10000)); /* exactly at the deadline */
  assert_true(connguard_head_expired(1000, 0, 11001, 10000));
  assert_false(connguard_head_expired(1000, 1, 99999, 10000)); /* head done */
  assert_false(connguard_head_expired(1000, 0, 99999, 0));     /* no deadline */
}

static void test_per_ip_cap(void **state) {
  struct connguard *g = connguard_new("test", 2, 0);
  struct sockaddr_in a = v4("192.0.2.1"), b = v4("192.0.2.2");
  struct gconn *c1, *c2, *c3;
  (void)state;
  assert_non_null(g);
  assert_true(connguard_admit(g, (struct sockaddr *)&a, sizeof a, 0));
  c1 = connguard_open(g, -1, (struct sockaddr *)&a, sizeof a, 0);
  assert_true(connguard_admit(g, (struct sockaddr *)&a, sizeof a, 0));
  c2 = connguard_open(g, -1, (struct sockaddr *)&a, sizeof a, 0);
  assert_int_equal(connguard_open_from(g, (struct sockaddr *)&a, sizeof a), 2);
  /* the third from a is refused and counted; another address is not affected */
  assert_false(connguard_admit(g, (struct sockaddr *)&a, sizeof a, 0));
  assert_int_equal(connguard_refused(g, CG_PER_IP), 1);
  assert_true(connguard_admit(g, (struct sockaddr *)&b, sizeof b, 0));
  c3 = connguard_open(g, -1, (struct sockaddr *)&b, sizeof b, 0);
  /* one closes: room again */
  connguard_close(g, c1);
  assert_int_equal(connguard_open_from(g, (struct sockaddr *)&a, sizeof a), 1);
  assert_true(connguard_admit(g, (struct sockaddr *)&a, sizeof a, 0));
  connguard_close(g, c2);
  connguard_close(g, c3);
  assert_int_equal(connguard_open_from(g, (struct sockaddr *)&a, sizeof a), 0);
  connguard_close(g, NULL);
  connguard_free(&g);
  assert_null(g);
}

static void test_sweep_shuts_slow_heads(void **state) {
  struct connguard *g = connguard_new("test", 0, 1000);
  struct sockaddr_in a = v4("192.0.2.1");
  int slow[2], fast[2];
  struct gconn *cs, *cf;
  char ch;
  (void)state;
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, slow), 0);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fast), 0);
  cs = connguard_open(g, slow[0], (struct sockaddr *)&a, sizeof a, 0);
  cf = connguard_open(g, fast[0], (struct sockaddr *)&a, sizeof a, 0);
  connguard_head_done(g, cf); /* its head arrived: a long-poll may hold it */
  assert_int_equal(connguard_sweep(g, 1000), 0);
  assert_int_equal(connguard_sweep(g, 1001), 1);
  assert_int_equal(connguard_refused(g, CG_HEAD_TIMEOUT), 1);
  assert_int_equal(read(slow[1], &ch, 1), 0);    /* the client sees the end of the stream */
  assert_int_equal(connguard_sweep(g, 5000), 0); /* once */
  /* the next request's head counts from the end of the last one */
  connguard_request_done(g, cf, 4000);
  assert_int_equal(connguard_sweep(g, 5000), 0);
  assert_int_equal(connguard_sweep(g, 5001), 1);
  connguard_close(g, cs);
  connguard_close(g, cf);
  connguard_free(&g);
  close(slow[0]);
  close(slow[1]);
  close(fast[0]);
  close(fast[1]);
}

/* What holds up a drain: a request in progress, a connection with no request yet until its
   head deadline; never one idle between requests. */
static void test_conn_busy(void **state) {
  (void)state;
  assert_true(connguard_conn_busy(1, 0, 0, 50000, 1000));   /* first request in progress */
  assert_true(connguard_conn_busy(1, 7, 0, 50000, 1000));   /* a later one */
  assert_true(connguard_conn_busy(0, 0, 0, 1000, 1000));    /* accepted, head not yet whole */
  assert_false(connguard_conn_busy(0, 0, 0, 1001, 1000));   /* ... past its deadline */
  assert_true(connguard_conn_busy(0, 0, 0, 99999, 0));      /* no deadline: waited for */
  assert_false(connguard_conn_busy(0, 1, 900, 1000, 1000)); /* idle keep-alive */
}

static void test_busy_count(void **state) {
  struct connguard *g = connguard_new("test", 0, 1000);
  struct sockaddr_in a = v4("192.0.2.1");
  struct gconn *c1, *c2;
  (void)state;
  c1 = connguard_open(g, -1, (struct sockaddr *)&a, sizeof a, 0);
  c2 = connguard_open(g, -1, (struct sockaddr *)&a, sizeof a, 0);
  assert_int_equal(connguard_busy(g, 10), 2); /* both accepted, no request yet */
  connguard_head_done(g, c1);
  connguard_request_done(g, c1, 20);
  assert_int_equal(connguard_busy(g, 30), 1); /* c1 idle after its request */
  connguard_head_done(g, c1);
  assert_int_equal(connguard_busy(g, 30), 2); /* c1's next request */
  connguard_request_done(g, c1, 40);
  assert_int_equal(connguard_busy(g, 1001), 0); /* c2's head deadline passed */
  connguard_close(g, c1);
  connguard_close(g, c2);
  assert_int_equal(connguard_busy(g, 0), 0);
  connguard_free(&g);
}

/* The pure rule: a closed client is gone; a connection with requests done and no byte received
   since the last one's answer was queued is idle; anything else, or no byte count, is a head too
   slow. */
static void test_expiry_of(void **state) {
  (void)state;
  assert_int_equal(connguard_expiry_of(0, 0, 1, 0, 0), CG_EXPIRED_HEAD);     /* no request yet */
  assert_int_equal(connguard_expiry_of(0, 1, 1, 0, 0), CG_EXPIRED_GONE);     /* came and went */
  assert_int_equal(connguard_expiry_of(3, 0, 1, 700, 700), CG_EXPIRED_IDLE); /* keep-alive */
  assert_int_equal(connguard_expiry_of(3, 0, 1, 700, 702), CG_EXPIRED_HEAD); /* next head begun */
  assert_int_equal(connguard_expiry_of(3, 1, 1, 700, 702), CG_EXPIRED_GONE);
  assert_int_equal(connguard_expiry_of(3, 0, 0, 0, 0), CG_EXPIRED_HEAD); /* no count (Unix) */
  /* the metric labels */
  assert_string_equal(connguard_expiry_name(CG_EXPIRED_HEAD), "head");
  assert_string_equal(connguard_expiry_name(CG_EXPIRED_IDLE), "idle");
  assert_string_equal(connguard_expiry_name(CG_EXPIRED_GONE), "gone");
  assert_string_equal(connguard_expiry_name(CG_EXPIRED__N), "unknown");
}

/* A loopback TCP connection: fd[0] the server's end, fd[1] the client's. */
static void tcp_pair(int lfd, int fd[2]) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &len), 0);
  fd[1] = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd[1] >= 0);
  assert_int_equal(connect(fd[1], (struct sockaddr *)&a, sizeof a), 0);
  fd[0] = accept(lfd, NULL, NULL);
  assert_true(fd[0] >= 0);
}

/* The server reads what the client sent (a whole request), as the HTTP server would. */
static void serve_request(int fd[2]) {
  static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  char buf[64];
  assert_int_equal(write(fd[1], req, sizeof req - 1), (ssize_t)(sizeof req - 1));
  assert_int_equal(read(fd[0], buf, sizeof buf), (ssize_t)(sizeof req - 1));
}

static void wait_readable(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  assert_int_equal(poll(&p, 1, 5000), 1);
}

/* Counts each kind the guard reports through connguard_on_idle_close. */
static void count_idle_close(void *arg, enum connguard_expiry kind) {
  ((int *)arg)[kind]++;
}

static void test_sweep_kinds(void **state) {
  struct connguard *g = connguard_new("test", 0, 1000);
  int told[CG_EXPIRED__N] = {0};
  struct sockaddr_in a = v4("127.0.0.1");
  int lfd = socket(AF_INET, SOCK_STREAM, 0), idle[2], next[2], gone[2], fresh_gone[2], slow[2];
  struct gconn *ci, *cn, *cg, *cfg, *cs;
  char ch;
  (void)state;
  assert_non_null(g);
  connguard_on_idle_close(g, count_idle_close, told);
  assert_true(lfd >= 0);
  assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(lfd, 8), 0);
  tcp_pair(lfd, idle);
  tcp_pair(lfd, next);
  tcp_pair(lfd, gone);
  tcp_pair(lfd, fresh_gone);
  tcp_pair(lfd, slow);
  ci = connguard_open(g, idle[0], (struct sockaddr *)&a, sizeof a, 0);
  cn = connguard_open(g, next[0], (struct sockaddr *)&a, sizeof a, 0);
  cg = connguard_open(g, gone[0], (struct sockaddr *)&a, sizeof a, 0);
  cfg = connguard_open(g, fresh_gone[0], (struct sockaddr *)&a, sizeof a, 0);
  cs = connguard_open(g, slow[0], (struct sockaddr *)&a, sizeof a, 0);
  for (int i = 0; i < 3; i++) {
    int *fd = i == 0 ? idle : i == 1 ? next : gone;
    struct gconn *c = i == 0 ? ci : i == 1 ? cn : cg;
    serve_request(fd);
    connguard_head_done(g, c);
    connguard_answering(g, c); /* the answer is queued */
  }
  /* next's client has read its answer and begins its next head before the server's end of the
     request (the completion callback) comes: the bytes still count as the next head's */
  assert_int_equal(write(next[1], "GE", 2), 2);
  wait_readable(next[0]);
  connguard_request_done(g, ci, 100);
  connguard_request_done(g, cn, 100);
  connguard_request_done(g, cg, 100);
  /* then gone's client closes; one client closes before any request; slow's sends a byte of a
     head and stalls */
  close(gone[1]);
  gone[1] = -1;
  wait_readable(gone[0]);
  close(fresh_gone[1]);
  fresh_gone[1] = -1;
  wait_readable(fresh_gone[0]);
  assert_int_equal(write(slow[1], "G", 1), 1);
  wait_readable(slow[0]);
  assert_int_equal(connguard_sweep(g, 1000), 0);
  assert_int_equal(connguard_sweep(g, 1101), 5); /* all five shut down */
  /* only the two heads too slow are refusals */
  assert_int_equal(connguard_refused(g, CG_HEAD_TIMEOUT), 2);
  assert_int_equal(connguard_expired(g, CG_EXPIRED_HEAD), 2); /* next, slow */
  assert_int_equal(connguard_expired(g, CG_EXPIRED_IDLE), 1); /* idle */
  assert_int_equal(connguard_expired(g, CG_EXPIRED_GONE), 2); /* gone, fresh_gone */
  assert_int_equal(told[CG_EXPIRED_HEAD], 0); /* a refusal is told through on_refuse */
  assert_int_equal(told[CG_EXPIRED_IDLE], 1);
  assert_int_equal(told[CG_EXPIRED_GONE], 2);
  assert_int_equal(read(idle[1], &ch, 1), 0);    /* the idle client sees the end of the stream */
  assert_int_equal(connguard_sweep(g, 9000), 0); /* once */
  connguard_close(g, ci);
  connguard_close(g, cn);
  connguard_close(g, cg);
  connguard_close(g, cfg);
  connguard_close(g, cs);
  connguard_free(&g);
  close(lfd);
  close(idle[0]);
  close(idle[1]);
  close(next[0]);
  close(next[1]);
  close(gone[0]);
  close(fresh_gone[0]);
  close(slow[0]);
  close(slow[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ip_key),     cmocka_unit_test(test_head_expired),
      cmocka_unit_test(test_per_ip_cap), cmocka_unit_test(test_sweep_shuts_slow_heads),
      cmocka_unit_test(test_conn_busy),  cmocka_unit_test(test_busy_count),
      cmocka_unit_test(test_expiry_of),  cmocka_unit_test(test_sweep_kinds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
