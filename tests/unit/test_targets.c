/* Unit tests for common/targets: the built-in refusals, IPv4-mapped and legacy numeric forms,
   --deny-targets parsing. */
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
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_builtin),
                                     cmocka_unit_test(test_deny_list)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
