/* Unit tests for common/targets: the built-in refusals, IPv4-mapped and legacy numeric forms,
   IPv6 forms that embed an IPv4 address, trailing dots, --deny-targets parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "targets.h"

static void test_builtin(void **state) {
  static const struct {
    const char *host;
    int refused;
    const char *reason;
  } rows[] = {
      {"169.254.169.254", 1, "link-local"},
      {"169.254.0.1", 1, "link-local"},
      {"::ffff:169.254.169.254", 1, "link-local"},
      {"[::ffff:a9fe:a9fe]", 1, "link-local"},
      {"2852039166", 1, "link-local"},          /* 169.254.169.254 as one number */
      {"0xa9.0xfe.0xa9.0xfe", 1, "link-local"}, /* hex parts */
      {"169.254.43518", 1, "link-local"},       /* a.b.c with c 16 bits */
      {"fe80::1", 1, "link-local"},
      {"[fe80::1]", 1, "link-local"},
      {"0.0.0.0", 1, "unspecified"},
      {"0", 1, "unspecified"},
      {"::", 1, "unspecified"},
      {"100.100.100.200", 1, "metadata"},
      {"fd00:ec2::254", 1, "metadata"},
      {"127.0.0.1", 0, NULL}, /* loopback and private ranges stay allowed */
      {"::1", 0, NULL},
      {"10.0.0.1", 0, NULL},
      {"192.168.1.1", 0, NULL},
      {"172.16.0.1", 0, NULL},
      {"fd00::1", 0, NULL},
      {"169.255.0.1", 0, NULL},
      {"origin.example.com", 0, NULL}, /* names are checked when they resolve */
      {"origin.example.com.", 0, NULL},
      /* a trailing dot spells the same literal */
      {"169.254.169.254.", 1, "link-local"},
      {"169.254.169.254..", 1, "link-local"},
      {"2852039166.", 1, "link-local"},
      {"100.100.100.200.", 1, "metadata"},
      {"8.8.8.8.", 0, NULL},
      /* a zone does not change the address */
      {"fe80::1%eth0", 1, "link-local"},
      {"[fe80::1%25eth0]", 1, "link-local"},
      /* IPv4-compatible ::a.b.c.d */
      {"::169.254.169.254", 1, "link-local"},
      {"::a9fe:a9fe", 1, "link-local"},
      {"[::a9fe:a9fe]", 1, "link-local"},
      {"::100.100.100.200", 1, "metadata"},
      {"::0.0.0.2", 1, "unspecified"},
      {"::8.8.8.8", 0, NULL},
      {"::a9ff:a9fe", 0, NULL}, /* 169.255.169.254 */
      /* SIIT ::ffff:0:a.b.c.d */
      {"::ffff:0:a9fe:a9fe", 1, "link-local"},
      {"::ffff:0:169.254.169.254", 1, "link-local"},
      {"::ffff:0:8.8.8.8", 0, NULL},
      {"::1:0:a9fe:a9fe", 0, NULL}, /* not a translation prefix */
      /* IPv4-mapped, the neighbour */
      {"::ffff:8.8.8.8", 0, NULL},
      /* NAT64 well-known prefix 64:ff9b::/96 */
      {"64:ff9b::169.254.169.254", 1, "link-local"},
      {"64:ff9b::a9fe:a9fe", 1, "link-local"},
      {"64:ff9b::100.100.100.200", 1, "metadata"},
      {"64:ff9b::0.0.0.0", 1, "unspecified"},
      {"64:ff9b::8.8.8.8", 0, NULL},
      {"64:ff9b:0:0:1::a9fe:a9fe", 0, NULL}, /* outside the /96 */
      {"64:ff9a::169.254.169.254", 0, NULL},
      /* NAT64 local-use 64:ff9b:1::/48, every prefix length's place */
      {"64:ff9b:1::169.254.169.254", 1, "link-local"},    /* /96 */
      {"64:ff9b:1:a9fe:a9:fe00::", 1, "link-local"},      /* /48 */
      {"64:ff9b:1:ffa9:fe:a9fe::", 1, "link-local"},      /* /56 */
      {"64:ff9b:1:ffff:a9:fea9:fe00:0", 1, "link-local"}, /* /64 */
      {"64:ff9b:1::8.8.8.8", 0, NULL},
      {"64:ff9b:1:808:8:800::", 0, NULL}, /* 8.8.8.8 at /48 */
      {"64:ff9b:2::169.254.169.254", 0, NULL},
      /* 6to4 2002::/16, the IPv4 address in bits 16-47 */
      {"2002:a9fe:a9fe::1", 1, "link-local"},
      {"2002:6464:64c8::", 1, "metadata"},
      {"2002:0:0::1", 1, "unspecified"},
      {"2002:0808:0808::1", 0, NULL},
      {"2003:a9fe:a9fe::1", 0, NULL},
      /* Teredo 2001::/32: server in bits 32-63, client (inverted) in the last 32 */
      {"2001:0:a9fe:a9fe::1", 1, "link-local"},
      {"2001:0:4136:e378:8000:63bf:5601:5601", 1, "link-local"}, /* client ~56.01.56.01 */
      {"2001:0:4136:e378:8000:63bf:3fff:fdd2", 0, NULL},         /* client 192.0.2.45 */
      {"2001:1:a9fe:a9fe::1", 0, NULL},                          /* not Teredo */
      {"2001:db8::a9fe:a9fe", 0, NULL},
  };
  struct targets t;
  char err[128];
  (void)state;
  assert_int_equal(targets_init(&t, NULL, err, sizeof err), 0);
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const char *why = NULL;
    int r = targets_refused(&t, rows[i].host, &why);
    if (r != rows[i].refused || (r && strcmp(why, rows[i].reason) != 0))
      fail_msg("row %zu (%s): refused %d (%s)", i, rows[i].host, r, why ? why : "-");
  }
}

static void test_deny_list(void **state) {
  struct targets t;
  char err[128];
  const char *why = NULL;
  struct sockaddr_in sa;
  (void)state;
  assert_int_equal(targets_init(&t, "10.0.0.0/8, 2001:db8::/32,192.0.2.7", err, sizeof err), 0);
  assert_int_equal(targets_refused(&t, "10.200.0.1", &why), 1);
  assert_string_equal(why, "denied by --deny-targets");
  assert_int_equal(targets_refused(&t, "11.0.0.1", &why), 0);
  assert_int_equal(targets_refused(&t, "2001:db8:1::5", &why), 1);
  assert_int_equal(targets_refused(&t, "192.0.2.7", &why), 1);
  assert_int_equal(targets_refused(&t, "192.0.2.8", &why), 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  inet_pton(AF_INET, "10.1.1.1", &sa.sin_addr);
  assert_int_equal(targets_refused_sa(&t, &sa, &why), 1);
  inet_pton(AF_INET, "169.254.169.254", &sa.sin_addr);
  assert_int_equal(targets_refused_sa(&t, &sa, &why), 1);
  assert_string_equal(why, "link-local");
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  assert_int_equal(targets_refused_sa(&t, &sa, &why), 0);
  assert_int_equal(targets_init(&t, "10.0.0.0/33", err, sizeof err), -1);
  assert_non_null(strstr(err, "10.0.0.0/33"));
  assert_int_equal(targets_init(&t, "example.com", err, sizeof err), -1);
  assert_int_equal(targets_init(&t, "::/129", err, sizeof err), -1);
  /* a second list adds to the first */
  assert_int_equal(targets_init(&t, "10.0.0.0/8", err, sizeof err), 0);
  assert_int_equal(targets_add(&t, "192.0.2.0/24", err, sizeof err), 0);
  assert_int_equal(targets_refused(&t, "10.9.9.9", &why), 1);
  assert_int_equal(targets_refused(&t, "::ffff:192.0.2.1", &why), 1);
  assert_int_equal(targets_refused(&t, "198.51.100.1", &why), 0);
  assert_int_equal(targets_add(&t, "192.0.2.0/24,bad", err, sizeof err), -1);
  assert_non_null(strstr(err, "bad"));
}

/* With --deny-targets 127.0.0.0/8, every spelling of a 127.x address is refused, the rest of
   loopback IPv6 and its neighbours not. */
static void test_deny_embedded(void **state) {
  static const struct {
    const char *host;
    int refused;
  } rows[] = {
      {"127.0.0.1", 1},
      {"127.0.0.1.", 1},
      {"2130706433", 1},
      {"0x7f.1", 1},
      {"::ffff:127.0.0.1", 1},
      {"::127.0.0.1", 1},
      {"::7f00:1", 1},
      {"::ffff:0:127.0.0.1", 1},
      {"64:ff9b::127.0.0.1", 1},
      {"64:ff9b:1::127.0.0.9", 1},
      {"2002:7f00:1::1", 1},
      {"2001:0:4136:e378:8000:63bf:80ff:fffe", 1}, /* Teredo client 127.0.0.1 */
      {"::1", 0},
      {"::", 1}, /* unspecified */
      {"128.0.0.1", 0},
      {"::128.0.0.1", 0},
      {"64:ff9b::128.0.0.1", 0},
      {"2002:8000:1::1", 0},
  };
  struct targets t;
  char err[128];
  (void)state;
  assert_int_equal(targets_init(&t, "127.0.0.0/8", err, sizeof err), 0);
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const char *why = NULL;
    int r = targets_refused(&t, rows[i].host, &why);
    if (r != rows[i].refused) fail_msg("row %zu (%s): refused %d", i, rows[i].host, r);
  }
}

/* A resolved address is checked with the same rules, embedded forms included. */
static void test_sockaddr_embedded(void **state) {
  static const struct {
    const char *addr;
    int refused;
  } rows[] = {
      {"::a9fe:a9fe", 1},       {"64:ff9b::a9fe:a9fe", 1},
      {"2002:a9fe:a9fe::1", 1}, {"::ffff:0:a9fe:a9fe", 1},
      {"fd00:ec2::254", 1},     {"64:ff9b::808:808", 0},
      {"2002:808:808::1", 0},   {"::1", 0},
  };
  struct targets t;
  char err[128];
  struct sockaddr_in6 sa;
  (void)state;
  assert_int_equal(targets_init(&t, NULL, err, sizeof err), 0);
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    memset(&sa, 0, sizeof sa);
    sa.sin6_family = AF_INET6;
    assert_int_equal(inet_pton(AF_INET6, rows[i].addr, &sa.sin6_addr), 1);
    if (targets_refused_sa(&t, &sa, NULL) != rows[i].refused)
      fail_msg("row %zu (%s)", i, rows[i].addr);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builtin), cmocka_unit_test(test_deny_list),
      cmocka_unit_test(test_deny_embedded), cmocka_unit_test(test_sockaddr_embedded)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
