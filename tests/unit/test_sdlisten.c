/* Unit tests for common/sdlisten: listening addresses compared (IPv4, IPv6, Unix paths), and
 * received sockets matched to the configured addresses: in any order, some configured ones
 * without a socket, and an error naming a received socket that matches none or comes twice. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "sdlisten.h"

static struct sdlisten_addr v4(const char *ip, int port) {
  struct sdlisten_addr a;
  struct sockaddr_in *s = (struct sockaddr_in *)&a.sa;
  memset(&a, 0, sizeof a);
  s->sin_family = AF_INET;
  s->sin_port = htons((unsigned short)port);
  inet_pton(AF_INET, ip, &s->sin_addr);
  a.len = sizeof *s;
  return a;
}

static struct sdlisten_addr v6(const char *ip, int port) {
  struct sdlisten_addr a;
  struct sockaddr_in6 *s = (struct sockaddr_in6 *)&a.sa;
  memset(&a, 0, sizeof a);
  s->sin6_family = AF_INET6;
  s->sin6_port = htons((unsigned short)port);
  inet_pton(AF_INET6, ip, &s->sin6_addr);
  a.len = sizeof *s;
  return a;
}

static struct sdlisten_addr un(const char *path) {
  struct sdlisten_addr a;
  struct sockaddr_un *s = (struct sockaddr_un *)&a.sa;
  memset(&a, 0, sizeof a);
  s->sun_family = AF_UNIX;
  snprintf(s->sun_path, sizeof s->sun_path, "%s", path);
  a.len = sizeof *s;
  return a;
}

static void test_same(void **state) {
  struct sdlisten_addr a = v4("127.0.0.1", 80), b = v4("127.0.0.1", 80), c = v4("127.0.0.1", 81),
                       d = v4("127.0.0.2", 80), e = v6("::1", 80), f = v6("::1", 80),
                       g = un("/run/cdnca/noded.sock"), h = un("/run/cdnca/noded.sock"),
                       i = un("/run/cdnca/other.sock"), z = un("");
  char t[100];
  (void)state;
  assert_true(sdlisten_same(&a, &b));
  assert_false(sdlisten_same(&a, &c));
  assert_false(sdlisten_same(&a, &d));
  assert_false(sdlisten_same(&a, &e));
  assert_true(sdlisten_same(&e, &f));
  assert_true(sdlisten_same(&g, &h));
  assert_false(sdlisten_same(&g, &i));
  assert_false(sdlisten_same(&z, &z)); /* an unnamed socket matches nothing */
  sdlisten_text(&a, t, sizeof t);
  assert_string_equal(t, "127.0.0.1:80");
  sdlisten_text(&e, t, sizeof t);
  assert_string_equal(t, "[::1]:80");
  sdlisten_text(&g, t, sizeof t);
  assert_string_equal(t, "unix:/run/cdnca/noded.sock");
}

static void test_match(void **state) {
  struct sdlisten_addr want[3] = {v4("127.0.0.1", 8080), un("/run/cdnca/noded.sock"),
                                  v4("127.0.0.1", 7401)};
  struct sdlisten_addr got[3] = {v4("127.0.0.1", 7401), v4("127.0.0.1", 8080)};
  int idx[3];
  char err[200] = "";
  (void)state;
  /* in another order, the Unix one not passed (noded opens it itself) */
  assert_int_equal(sdlisten_match(got, 2, want, 3, idx, err, sizeof err), 0);
  assert_int_equal(idx[0], 1);
  assert_int_equal(idx[1], -1);
  assert_int_equal(idx[2], 0);
  /* nothing received: nothing matched */
  assert_int_equal(sdlisten_match(got, 0, want, 3, idx, err, sizeof err), 0);
  assert_int_equal(idx[0], -1);
  /* a received socket on an address not configured */
  got[2] = v4("0.0.0.0", 8080);
  assert_int_equal(sdlisten_match(got, 3, want, 3, idx, err, sizeof err), -1);
  assert_non_null(strstr(err, "socket 5 (0.0.0.0:8080) matches no --listen"));
  /* the same address twice */
  got[2] = v4("127.0.0.1", 8080);
  assert_int_equal(sdlisten_match(got, 3, want, 3, idx, err, sizeof err), -1);
  assert_non_null(strstr(err, "two sockets for 127.0.0.1:8080"));
}

/* A connection queued before sdlisten_refuse_new is accepted and works; one attempted after it is
   not completed (its SYN dropped: no accept, the client still connecting) and, once the listener
   is closed, is refused (its SYN retried), never reset after a handshake. Without the filter the
   second connection completes at once and the close resets it. */
static void test_refuse_new_then_close(void **state) {
  struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof in;
  int lfd, a, b, acc, err = 0;
  struct pollfd pf;
  char buf[4];
  (void)state;
  lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  assert_true(lfd >= 0);
  assert_int_equal(bind(lfd, (struct sockaddr *)&in, sizeof in), 0);
  assert_int_equal(listen(lfd, 16), 0);
  assert_int_equal(getsockname(lfd, (struct sockaddr *)&in, &len), 0);
  a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_int_equal(connect(a, (struct sockaddr *)&in, sizeof in), 0); /* queued */
  assert_int_equal(sdlisten_refuse_new(lfd), 0);
  b = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  assert_int_equal(connect(b, (struct sockaddr *)&in, sizeof in), -1);
  assert_int_equal(errno, EINPROGRESS);
  pf = (struct pollfd){.fd = b, .events = POLLOUT};
  assert_int_equal(poll(&pf, 1, 300), 0); /* no SYN-ACK: still connecting */
  acc = accept(lfd, NULL, NULL);          /* a, queued before the filter */
  assert_true(acc >= 0);
  assert_int_equal(accept(lfd, NULL, NULL), -1);
  assert_true(errno == EAGAIN || errno == EWOULDBLOCK); /* nothing else entered the queue */
  assert_int_equal(send(a, "hi", 2, 0), 2);
  assert_int_equal(recv(acc, buf, sizeof buf, 0), 2); /* the queued connection works */
  close(lfd);
  /* b's SYN is retried after ~1 s and meets no listener: refused */
  pf = (struct pollfd){.fd = b, .events = POLLOUT};
  assert_int_equal(poll(&pf, 1, 5000), 1);
  len = sizeof err;
  assert_int_equal(getsockopt(b, SOL_SOCKET, SO_ERROR, &err, &len), 0);
  assert_int_equal(err, ECONNREFUSED);
  close(acc);
  close(a);
  close(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same),
      cmocka_unit_test(test_match),
      cmocka_unit_test(test_refuse_new_then_close),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
