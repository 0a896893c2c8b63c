/* test_probenat — the own client's request, one row per rule (pnat_request is pure). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hcheck.h"
#include "probenat.h"

#include <stdio.h>
#include <string.h>

struct row {
  const char *name;
  int head;
  const char *path, *host;
  int port;
  int n_headers; /* the first n of X-A: 1, X-B: two words */
  const char *want;
};

#define TAIL "User-Agent: ua/1\r\nAccept: */*\r\nConnection: close\r\n"

static const struct row rows[] = {
    {"GET, a name and a port", 0, "/hc?x=1", "origin.test", 8080, 0,
     "GET /hc?x=1 HTTP/1.1\r\nHost: origin.test:8080\r\n" TAIL "\r\n"},
    {"port 80 is left out of Host", 0, "/", "origin.test", 80, 0,
     "GET / HTTP/1.1\r\nHost: origin.test\r\n" TAIL "\r\n"},
    {"HEAD", 1, "/", "10.0.0.1", 81, 0, "HEAD / HTTP/1.1\r\nHost: 10.0.0.1:81\r\n" TAIL "\r\n"},
    {"an IPv6 literal goes in brackets", 0, "/", "::1", 8080, 0,
     "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n" TAIL "\r\n"},
    {"an IPv6 literal on port 80", 0, "/", "2001:db8::1", 80, 0,
     "GET / HTTP/1.1\r\nHost: [2001:db8::1]\r\n" TAIL "\r\n"},
    {"the check's headers come last, in their order", 0, "/", "h", 443, 2,
     "GET / HTTP/1.1\r\nHost: h:443\r\n" TAIL "X-A: 1\r\nX-B: two words\r\n\r\n"},
};

static void check_opts(struct hcheck_opts *c, int n) {
  hcheck_defaults(c);
  snprintf(c->headers[0].name, sizeof c->headers[0].name, "X-A");
  snprintf(c->headers[0].value, sizeof c->headers[0].value, "1");
  snprintf(c->headers[1].name, sizeof c->headers[1].name, "X-B");
  snprintf(c->headers[1].value, sizeof c->headers[1].value, "two words");
  c->n_headers = n;
}

static void test_rows(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const struct row *r = &rows[i];
    struct hcheck_opts c;
    struct buf out;
    int rc;
    check_opts(&c, r->n_headers);
    buf_init(&out, 1024);
    rc = pnat_request(&out, r->head, r->path, r->host, r->port, "ua/1", &c);
    if (rc != 0 || out.len != strlen(r->want) || memcmp(out.data, r->want, out.len) != 0) {
      fprintf(stderr, "row '%s': rc %d, got [%.*s]\n", r->name, rc, (int)out.len,
              out.data ? out.data : "");
      fail();
    }
    buf_fini(&out);
  }
}

/* No check (NULL) sends no extra header; a bound one byte short is an error (the request is
 * not whole), never a request that reads as complete. */
static void test_null_check_and_short_buffer(void **state) {
  const char *want = "GET / HTTP/1.1\r\nHost: h:81\r\n" TAIL "\r\n";
  size_t len = strlen(want);
  struct buf out;
  (void)state;
  buf_init(&out, 256);
  assert_int_equal(pnat_request(&out, 0, "/", "h", 81, "ua/1", NULL), 0);
  assert_int_equal(out.len, len);
  assert_memory_equal(out.data, want, len);
  buf_fini(&out);
  buf_init(&out, len);
  assert_int_equal(pnat_request(&out, 0, "/", "h", 81, "ua/1", NULL), 0);
  assert_int_equal(out.len, len);
  buf_fini(&out);
  for (size_t cap = 1; cap < len; cap++) {
    buf_init(&out, cap);
    assert_int_equal(pnat_request(&out, 0, "/", "h", 81, "ua/1", NULL), -1);
    assert_true(out.len < len);
    buf_fini(&out);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rows),
      cmocka_unit_test(test_null_check_and_short_buffer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
