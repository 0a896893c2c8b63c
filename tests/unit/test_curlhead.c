/* Unit tests for common/curlhead: the bound and the framing rule of a libcurl answer's head, as
   an outcome table of whole answers fed line by line as libcurl hands them over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "curlhead.h"

struct hcase {
  const char *what;
  const char *lines; /* the header lines, each ending in \n (CRLF kept), as libcurl passes them */
  int no_body;
  const char *why; /* NULL: accepted */
};

static const struct hcase cases[] = {
    {"a plain answer", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", 0, NULL},
    {"chunked, with trailers",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\nX-T: 1\r\n\r\n", 0, NULL},
    {"1xx heads before",
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", 0, NULL},
    {"a length per head",
     "HTTP/1.1 103 Early\r\nContent-Length: 1\r\n\r\nHTTP/1.1 200 OK\r\n"
     "Content-Length: 2\r\n\r\n",
     0, NULL},
    {"HTTP/2 status line", "HTTP/2 200\r\ncontent-length: 9\r\n\r\n", 0, NULL},
    {"a folded line (libcurl's to judge)", "HTTP/1.1 200 OK\r\nX-A: a\r\n  b\r\n\r\n", 0, NULL},
    {"two lengths, equal", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nContent-Length: 9\r\n\r\n", 0,
     "bad response framing"},
    {"length and chunked",
     "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n"
     "\r\n",
     0, "bad response framing"},
    {"chunked and length",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n"
     "\r\n",
     0, "bad response framing"},
    {"gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, "bad response framing"},
    {"gzip after a HEAD", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 1, NULL},
    {"length and chunked after a HEAD",
     "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n"
     "Transfer-Encoding: chunked\r\n\r\n",
     1, NULL},
    {"two lengths after a HEAD",
     "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nContent-Length: 8\r\n\r\n", 1,
     "bad response framing"},
    {"chunked twice",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked"
     "\r\n\r\n",
     0, "bad response framing"},
    {"a signed length", "HTTP/1.1 200 OK\r\nContent-Length: +9\r\n\r\n", 0, "bad response framing"},
    {"a space before the colon", "HTTP/1.1 200 OK\r\nContent-Length : 9\r\n\r\n", 0,
     "bad response head"},
    {"trailers are not fields of the head",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     "Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
     0, NULL},
};

/* Feed the lines of c; the result of the last call that refused, or 0. */
static int feed(struct curlhead *h, const char *lines) {
  const char *p = lines;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
    if (curlhead_line(h, p, n) < 0) return -1;
    p += n;
  }
  return 0;
}

static void test_outcomes(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct curlhead h;
    int rc;
    curlhead_init(&h, 0, cases[i].no_body);
    rc = feed(&h, cases[i].lines);
    print_message("%s\n", cases[i].what);
    if (!cases[i].why) {
      assert_int_equal(rc, 0);
      assert_null(h.why);
      assert_null(curlhead_unfinished(&h)); /* each accepted answer's final head is whole */
    } else {
      assert_int_equal(rc, -1);
      assert_string_equal(h.why, cases[i].why);
    }
  }
}

/* A transfer libcurl ends without an error is refused unless a final head reached its blank
   line: a connection closed inside the head left the status line's code standing. */
static void test_unfinished(void **state) {
  static const char *const cut[] = {
      "",
      "HTTP/1.1 200 OK\r\n",
      "HTTP/1.1 200 OK\r\nContent-Le",
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n",
      "HTTP/1.1 100 Continue\r\n\r\n",
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n",
  };
  (void)state;
  for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
    struct curlhead h;
    curlhead_init(&h, 0, 0);
    assert_int_equal(feed(&h, cut[i]), 0);
    print_message("cut: %s\n", cut[i]);
    assert_non_null(curlhead_unfinished(&h));
    assert_string_equal(curlhead_unfinished(&h), "response head cut short");
  }
}

/* Trailer lines that never end are cut at the bound, and a refusal sticks. */
static void test_bound(void **state) {
  static const char head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  static const char trailer[] = "X-T: tttttttttttttttttttttttttttttttttttttttttttttttttttttttt\r\n";
  struct curlhead h;
  int lines = 0;
  (void)state;
  curlhead_init(&h, 4096, 0);
  assert_int_equal(feed(&h, head), 0);
  while (curlhead_line(&h, trailer, sizeof trailer - 1) == 0)
    lines++;
  assert_int_equal(lines, (int)((4096 - (sizeof head - 1)) / (sizeof trailer - 1)));
  assert_string_equal(h.why, "response head too large");
  assert_int_equal(curlhead_line(&h, "\r\n", 2), -1);
  /* as a libcurl callback: 0 (not the length) stops the transfer */
  assert_int_equal(curlhead_cb((char *)"\r\n", 1, 2, &h), 0);
  curlhead_init(&h, 0, 0);
  assert_int_equal(h.max, CURLHEAD_MAX);
  assert_int_equal(curlhead_cb((char *)"HTTP/1.1 200 OK\r\n", 1, 17, &h), 17);
}

/* The body as read off the wire: exactly CURLHEAD_WIRE_MAX bytes pass, one more cuts, the cut
   sticks, and no count wraps (a huge n after a partial count). */
static void test_wire(void **state) {
  struct curlhead h;
  (void)state;
  curlhead_init(&h, 0, 0);
  assert_int_equal(curlhead_wire(&h, CURLHEAD_WIRE_MAX - 10), 0);
  assert_int_equal(curlhead_wire(&h, 10), 0);
  assert_int_equal(h.wire, CURLHEAD_WIRE_MAX);
  assert_int_equal(curlhead_wire(&h, 0), 0);
  assert_int_equal(curlhead_wire(&h, 1), 1);
  assert_int_equal(h.wire_cut, 1);
  assert_int_equal(curlhead_wire(&h, 0), 1);
  assert_true(h.why == NULL); /* not a refusal: the head stands */
  curlhead_init(&h, 0, 0);
  assert_int_equal(h.wire_cut, 0);
  assert_int_equal(curlhead_wire(&h, 5), 0);
  assert_int_equal(curlhead_wire(&h, SIZE_MAX), 1);
  assert_true(h.wire <= CURLHEAD_WIRE_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_outcomes),
      cmocka_unit_test(test_unfinished),
      cmocka_unit_test(test_bound),
      cmocka_unit_test(test_wire),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
