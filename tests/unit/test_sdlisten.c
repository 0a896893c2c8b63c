/* Unit tests for common/sdlisten: listening addresses compared (IPv4, IPv6, Unix paths), and
 * received sockets matched to the configured addresses: in any order, some configured ones
 * without a socket, and an error naming a received socket that matches none or comes twice. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same),
      cmocka_unit_test(test_match),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
