/* Unit tests for common/addr: listen address forms. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "addr.h"

static void test_ipv4_and_ipv6(void **state) {
  struct sockaddr_storage ss;
  socklen_t len = 0;
  char txt[64];
  assert_int_equal(addr_parse_listen("127.0.0.1:7400", 0, &ss, &len), 0);
  assert_int_equal(ss.ss_family, AF_INET);
  assert_int_equal(len, sizeof(struct sockaddr_in));
  assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 7400);
  assert_int_equal(addr_parse_listen("[::1]:80", 0, &ss, &len), 0);
  assert_int_equal(ss.ss_family, AF_INET6);
  assert_int_equal(len, sizeof(struct sockaddr_in6));
  inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, txt, sizeof txt);
  assert_string_equal(txt, "::1");
  assert_int_equal(addr_parse_listen("127.0.0.1:0", 0, &ss, &len), 0);
}

static void test_any(void **state) {
  struct sockaddr_storage ss;
  socklen_t len = 0;
  assert_int_equal(addr_parse_listen(":7480", 0, &ss, &len), -1);
  assert_int_equal(addr_parse_listen(":7480", 1, &ss, &len), 0);
  assert_int_equal(((struct sockaddr_in *)&ss)->sin_addr.s_addr, htonl(INADDR_ANY));
}

static void test_rejects(void **state) {
  struct sockaddr_storage ss;
  socklen_t len;
  const char *bad[] = {"127.0.0.1",     "127.0.0.1:",   "127.0.0.1:65536", "127.0.0.1:-1",
                       "127.0.0.1:80x", "localhost:80", "::1:80",          "[::1]80",
                       "[zz]:80",       "[]:80",        "999.0.0.1:80",    NULL};
  for (int i = 0; bad[i]; i++)
    assert_int_equal(addr_parse_listen(bad[i], 1, &ss, &len), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ipv4_and_ipv6),
      cmocka_unit_test(test_any),
      cmocka_unit_test(test_rejects),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
