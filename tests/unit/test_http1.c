/* Tests for noded/http1: the parsing rules of the edge path (RFC 9112,
 * docs/design.md#the-edge-http-path), row by row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http1.h"

static void test_request_heads(void **state) {
  static const struct {
    const char *head;
    int rc;
  } rows[] = {
      {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP1_OK},
      {"GET / HTTP/1.0\r\n\r\n", HTTP1_OK},
      {"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP1_OK}, /* an empty line first is skipped */
      {"GET / HTTP/1.1\nHost: a\n\n", HTTP1_OK},           /* bare LF ends head lines */
      {"GET /a?b=c HTTP/1.1\r\nX:\r\n\r\n", HTTP1_OK},     /* empty value */
      {"G@T / HTTP/1.1\r\n\r\n", HTTP1_BAD},               /* method not a token */
      {"GET  / HTTP/1.1\r\n\r\n", HTTP1_BAD},              /* two spaces */
      {"GET / HTTP/2.0\r\n\r\n", HTTP1_BAD},
      {"GET / HTTP/1.1 \r\n\r\n", HTTP1_BAD},
      {"GET /\x01 HTTP/1.1\r\n\r\n", HTTP1_BAD},              /* CTL in the target */
      {"GET /\xc3\xa9 HTTP/1.1\r\n\r\n", HTTP1_BAD},          /* not ASCII */
      {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", HTTP1_BAD},      /* space before the colon */
      {"GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n", HTTP1_BAD}, /* obs-fold */
      {"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", HTTP1_BAD},       /* bare CR in a value */
      {"GET / HTTP/1.1\r\nX: a\x00"
       "b\r\n\r\n",
       HTTP1_BAD},                                  /* NUL */
      {"GET / HTTP/1.1\r\n: a\r\n\r\n", HTTP1_BAD}, /* empty name */
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    static struct http1_msg m;
    const char *h = rows[i].head;
    size_t len = strlen(h);
    int rc;
    if (i == 14) len = strlen("GET / HTTP/1.1\r\nX: a") + 1 + strlen("b\r\n\r\n"); /* NUL */
    rc = http1_parse_request(h, len, &m);
    if (rc != rows[i].rc) fail_msg("row %zu: rc %d, want %d", i, rc, rows[i].rc);
  }
}

static void test_response_heads(void **state) {
  static const struct {
    const char *head;
    int rc, status;
  } rows[] = {
      {"HTTP/1.1 200 OK\r\n\r\n", HTTP1_OK, 200},
      {"HTTP/1.1 204\r\n\r\n", HTTP1_OK, 204},
      {"HTTP/1.0 103 Early Hints\r\nLink: </a>\r\n\r\n", HTTP1_OK, 103},
      {"HTTP/1.1 99 X\r\n\r\n", HTTP1_BAD, 0},
      {"HTTP/1.1 2000 X\r\n\r\n", HTTP1_BAD, 0},
      {"HTTP/1.1 200 O\x01K\r\n\r\n", HTTP1_BAD, 0},
      {"HTTP/1.1 200 OK\r\nX: \x00\r\n\r\n", HTTP1_BAD, 0},
      {"ICY 200 OK\r\n\r\n", HTTP1_BAD, 0},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    static struct http1_msg m;
    size_t len = strlen(rows[i].head);
    int rc;
    if (i == 6) len = strlen("HTTP/1.1 200 OK\r\nX: ") + 1 + 4;
    rc = http1_parse_response(rows[i].head, len, &m);
    if (rc != rows[i].rc) fail_msg("row %zu: rc %d, want %d", i, rc, rows[i].rc);
    if (rc == HTTP1_OK) assert_int_equal(m.status, rows[i].status);
  }
}

static void test_head_end(void **state) {
  size_t scan = 0;
  (void)state;
  assert_int_equal(http1_head_end("GET / HTTP/1.1\r\n\r\nX", 19, &scan), 18);
  scan = 0;
  assert_int_equal(http1_head_end("GET / HTTP/1.1\r\n\r", 17, &scan), 0);
  assert_int_equal(http1_head_end("GET / HTTP/1.1\r\n\r\n", 18, &scan), 18);
  scan = 0;
  assert_int_equal(http1_head_end("GET / HTTP/1.1\n\n", 16, &scan), 16);
}

static void test_token(void **state) {
  (void)state;
  assert_true(http1_token("Content-Length", 14));
  assert_true(http1_token("x!#$%&'*+-.^_`|~9", 17));
  assert_false(http1_token("", 0));
  assert_false(http1_token("Content-Length ", 15)); /* white space before a colon */
  assert_false(http1_token("a\tb", 3));
  assert_false(http1_token("a:b", 3));
  assert_false(http1_token("a\0b", 3)); /* read to its length, not to a NUL */
  assert_false(http1_token("\xc3\xa9", 2));
}

static void test_content_length(void **state) {
  static const struct {
    const char *v;
    int rc;
    uint64_t n;
  } rows[] = {
      {"0", 0, 0},
      {"42", 0, 42},
      {"000123", 0, 123},
      {"", -1, 0},
      {"+1", -1, 0},
      {"-1", -1, 0},
      {"1 2", -1, 0},
      {"3, 3", -1, 0},
      {"0x10", -1, 0},
      {"1e3", -1, 0},
      {"1234567890123456789", -1, 0},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    uint64_t n = 99;
    int rc = http1_parse_length(rows[i].v, (unsigned)strlen(rows[i].v), &n);
    if (rc != rows[i].rc) fail_msg("row %zu '%s': rc %d", i, rows[i].v, rc);
    if (rc == 0) assert_int_equal(n, rows[i].n);
  }
}

static void test_transfer_encoding(void **state) {
  static const struct {
    const char *v;
    int te;
  } rows[] = {
      {"chunked", HTTP1_TE_CHUNKED},       {"Chunked", HTTP1_TE_CHUNKED},
      {"CHUNKED", HTTP1_TE_CHUNKED},       {"gzip", HTTP1_TE_UNKNOWN},
      {"gzip, chunked", HTTP1_TE_UNKNOWN}, {"xchunked", HTTP1_TE_UNKNOWN},
      {"identity", HTTP1_TE_UNKNOWN},      {"chunked, chunked", HTTP1_TE_BAD},
      {"chunked,", HTTP1_TE_BAD},          {",chunked", HTTP1_TE_BAD},
      {"\"chunked\"", HTTP1_TE_BAD},       {"chunked;q=1", HTTP1_TE_BAD},
      {"chunk ed", HTTP1_TE_BAD},          {"", HTTP1_TE_BAD},
      {"chunked\x0b", HTTP1_TE_BAD},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    int te = http1_te_classify(rows[i].v, (unsigned)strlen(rows[i].v));
    if (te != rows[i].te) fail_msg("row %zu '%s': %d, want %d", i, rows[i].v, te, rows[i].te);
  }
}

static void test_host_values(void **state) {
  static const struct {
    const char *v;
    int ok;
  } rows[] = {
      {"demo.test", 1},
      {"demo.test:80", 1},
      {"demo.test:", 1},
      {"127.0.0.1:8080", 1},
      {"[::1]", 1},
      {"[::1]:443", 1},
      {"a_b~c", 1},
      {"", 0},
      {":80", 0},
      {"demo.test:80?", 0},
      {"demo.test/x", 0},
      {"user@demo.test", 0},
      {"demo.test:123456", 0},
      {"demo.test:8a", 0},
      {"[::1", 0},
      {"[zz::1]", 0},
      {"demo test", 0},
      {"demo.test#x", 0},
      {"[::1]x", 0},
      {"d%41", 0},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    int ok = http1_host_valid(rows[i].v, (unsigned)strlen(rows[i].v));
    if (ok != rows[i].ok) fail_msg("row %zu '%s': %d", i, rows[i].v, ok);
  }
}

static void test_targets(void **state) {
  static const struct {
    const char *t;
    int form;
    const char *authority, *path;
    int need_slash;
  } rows[] = {
      {"/a?b", HTTP1_TARGET_ORIGIN, "", "/a?b", 0},
      {"*", HTTP1_TARGET_ASTERISK, "", "", 0},
      {"http://demo.test/x?y", HTTP1_TARGET_ABSOLUTE, "demo.test", "/x?y", 0},
      {"HTTPS://demo.test", HTTP1_TARGET_ABSOLUTE, "demo.test", "", 1},
      {"http://demo.test:80?/admin", HTTP1_TARGET_ABSOLUTE, "demo.test:80", "?/admin", 1},
      {"http://demo.test#frag", HTTP1_TARGET_BAD, "", "", 0},
      {"/a#b", HTTP1_TARGET_BAD, "", "", 0},
      {"", HTTP1_TARGET_BAD, "", "", 0},
      {"http://u@demo.test/", HTTP1_TARGET_ABSOLUTE, "u@demo.test", "/", 0},
      {"ftp://demo.test/", HTTP1_TARGET_OTHER_SCHEME, "", "", 0},
      {"h2c://demo.test/", HTTP1_TARGET_OTHER_SCHEME, "", "", 0},
      {"demo.test:443", HTTP1_TARGET_AUTHORITY, "", "", 0},
      {"http:/demo.test", HTTP1_TARGET_AUTHORITY, "", "", 0},
      {"**", HTTP1_TARGET_AUTHORITY, "", "", 0},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct http1_target t;
    int form = http1_parse_target(rows[i].t, (unsigned)strlen(rows[i].t), &t);
    if (form != rows[i].form) fail_msg("row %zu '%s': form %d", i, rows[i].t, form);
    if (form == HTTP1_TARGET_ABSOLUTE) {
      assert_int_equal(t.authority_len, strlen(rows[i].authority));
      assert_memory_equal(t.authority, rows[i].authority, t.authority_len);
    }
    if (form == HTTP1_TARGET_ABSOLUTE || form == HTTP1_TARGET_ORIGIN) {
      assert_int_equal(t.path_len, strlen(rows[i].path));
      assert_memory_equal(t.path, rows[i].path, t.path_len);
      assert_int_equal(t.need_slash, rows[i].need_slash);
    }
  }
}

/* Feed a whole chunked body, in steps of `step` bytes: the decoded data, or NULL when refused.
 * *consumed = bytes of the input the body took. */
static char *decode(const char *in, size_t n, size_t step, size_t *consumed) {
  struct http1_body b;
  char *copy = malloc(n + 1), *out = malloc(n + 1);
  size_t pos = 0, w = 0;
  memcpy(copy, in, n);
  http1_body_init(&b, HTTP1_BODY_CHUNKED, 0);
  while (pos < n && !b.done) {
    size_t k = n - pos < step ? n - pos : step, o;
    long r = http1_body_feed(&b, copy + pos, k, &o, 1);
    if (r < 0) {
      free(copy);
      free(out);
      return NULL;
    }
    memcpy(out + w, copy + pos, o);
    w += o;
    pos += (size_t)r;
    if (r == 0) break;
  }
  free(copy);
  if (!b.done) {
    free(out);
    return NULL;
  }
  out[w] = '\0';
  *consumed = pos;
  return out;
}

static void test_chunked_accepted(void **state) {
  static const struct {
    const char *in, *data;
  } rows[] = {
      {"5\r\nhello\r\n0\r\n\r\n", "hello"},
      {"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world"},
      {"A\r\n0123456789\r\n0\r\n\r\n", "0123456789"},
      {"0005\r\nhello\r\n000\r\n\r\n", "hello"},
      {"5;a\r\nhello\r\n0\r\n\r\n", "hello"},
      {"5;a=b;c=\"d e\"\r\nhello\r\n0;z\r\n\r\n", "hello"},
      {"5 ; a = b\r\nhello\r\n0\r\n\r\n", "hello"},
      {"5;a=\"q\\\"x\"\r\nhello\r\n0\r\n\r\n", "hello"},
      {"5\t;a\r\nhello\r\n0\r\n\r\n", "hello"},
      {"5\r\nhello\r\n0\r\nX-T: 1\r\nY:\r\n\r\n", "hello"},
      {"0\r\n\r\n", ""},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    for (size_t step = 1; step <= 64; step *= 4) {
      size_t used = 0;
      char *out = decode(rows[i].in, strlen(rows[i].in), step, &used);
      if (!out || strcmp(out, rows[i].data) != 0 || used != strlen(rows[i].in))
        fail_msg("row %zu step %zu: %s", i, step, out ? out : "(refused)");
      free(out);
    }
}

static void test_chunked_refused(void **state) {
  static const char *const rows[] = {
      "5\nhello\r\n0\r\n\r\n",         /* bare LF after the size */
      "5\r\nhello\n0\r\n\r\n",         /* bare LF after the data */
      "5\r\nhello\r\n0\n\r\n",         /* bare LF after the last chunk */
      "5\r\nhello\r\n0\r\n\n",         /* bare LF at the end */
      "5\r\nhello\r\n0\r\nX: 1\n\r\n", /* bare LF after a trailer */
      "5\rhello\r\n0\r\n\r\n",         /* bare CR */
      "5 junk\r\nhello\r\n0\r\n\r\n",  /* text after the size */
      "2;\nxx\r\n0\r\n\r\n",           /* ';' without a name */
      "5;\r\nhello\r\n0\r\n\r\n",
      "5;a=\r\nhello\r\n0\r\n\r\n",         /* '=' without a value */
      "5;a=\"x\r\nhello\r\n0\r\n\r\n",      /* unterminated quote */
      "5;a=\"\x01\"\r\nhello\r\n0\r\n\r\n", /* CTL in a quoted value */
      "5;a=b c\r\nhello\r\n0\r\n\r\n",      /* two values */
      "5;a\x7f\r\nhello\r\n0\r\n\r\n",      /* DEL */
      "5;a\x00\r\nhello\r\n0\r\n\r\n",      /* NUL */
      "\r\nhello\r\n0\r\n\r\n",             /* no size */
      " 5\r\nhello\r\n0\r\n\r\n",           /* space before the size */
      "0x5\r\nhello\r\n0\r\n\r\n",
      "-5\r\nhello\r\n0\r\n\r\n",
      "5\r\nhelloX\r\n0\r\n\r\n",                /* data longer than the size */
      "00000000000000005\r\nhello\r\n0\r\n\r\n", /* 17 digits */
      "fffffffffffffffff\r\n",                   /* overflow */
      "5\r\nhello\r\n0\r\n X: 1\r\n\r\n",        /* obs-fold in trailers */
      "5\r\nhello\r\n0\r\nX : 1\r\n\r\n",        /* space before a trailer colon */
      "5\r\nhello\r\n0\r\nX\r\n\r\n",            /* trailer without a colon */
      "5\r\nhello\r\n0\r\nX: \x01\r\n\r\n",      /* CTL in a trailer */
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    size_t used, n = strlen(rows[i]);
    char *out;
    if (i == 14) n = strlen("5;a") + 1 + strlen("\r\nhello\r\n0\r\n\r\n");
    for (size_t step = 1; step <= 64; step *= 8) {
      out = decode(rows[i], n, step, &used);
      if (out) fail_msg("row %zu step %zu accepted: '%s'", i, step, out);
    }
  }
}

/* The body ends where its framing ends: bytes after it are not consumed. */
static void test_body_boundaries(void **state) {
  struct http1_body b;
  char buf[] = "3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n";
  size_t out;
  long k;
  (void)state;
  http1_body_init(&b, HTTP1_BODY_CHUNKED, 0);
  k = http1_body_feed(&b, buf, strlen(buf), &out, 1);
  assert_int_equal(k, 13);
  assert_int_equal(out, 3);
  assert_memory_equal(buf, "abc", 3);
  assert_true(b.done);
  http1_body_init(&b, HTTP1_BODY_LENGTH, 4);
  k = http1_body_feed(&b, buf, 10, &out, 0);
  assert_int_equal(k, 4);
  assert_true(b.done);
  http1_body_init(&b, HTTP1_BODY_LENGTH, 0);
  assert_true(b.done);
}

/* Malformed chunked framing: -1, and *out_len still counts the bytes before the bad one. */
static void test_body_malformed_out(void **state) {
  struct http1_body b;
  char dec[] = "3\r\nabc\r\n2\r\nde\r\nzz\r\n";
  char raw[] = "3\r\nabc\r\nzz\r\n";
  size_t out = 99;
  (void)state;
  http1_body_init(&b, HTTP1_BODY_CHUNKED, 0);
  assert_int_equal(http1_body_feed(&b, dec, strlen(dec), &out, 1), -1);
  assert_int_equal(out, 5);
  assert_memory_equal(dec, "abcde", 5);
  http1_body_init(&b, HTTP1_BODY_CHUNKED, 0);
  assert_int_equal(http1_body_feed(&b, raw, strlen(raw), &out, 0), -1);
  assert_int_equal(out, 8); /* "3\r\nabc\r\n" */
  http1_body_init(&b, HTTP1_BODY_CHUNKED, 0);
  assert_int_equal(http1_body_feed(&b, raw + 8, 4, &out, 1), -1);
  assert_int_equal(out, 0);
}

/* A body of many small chunks is not cut: only extension and trailer bytes use the allowance. */
static void test_body_many_chunks(void **state) {
  enum { N = 40000 };
  struct http1_body b;
  char *raw = malloc(N * 6 + 6), *p = raw;
  size_t out = 0, len;
  long k;
  (void)state;
  assert_non_null(raw);
  for (int i = 0; i < N; i++) {
    memcpy(p, "1\r\nx\r\n", 6);
    p += 6;
  }
  memcpy(p, "0\r\n\r\n", 5);
  len = (size_t)(p + 5 - raw);
  http1_body_init(&b, HTTP1_BODY_CHUNKED, 0);
  k = http1_body_feed(&b, raw, len, &out, 1);
  assert_int_equal(k, (long)len);
  assert_int_equal(out, N);
  assert_true(b.done);
  free(raw);
}

static void test_chunk_header(void **state) {
  char b[HTTP1_CHUNK_HEADER_MAX + 1];
  size_t n;
  (void)state;
  n = http1_chunk_header(b, 1);
  assert_memory_equal(b, "1\r\n", n);
  n = http1_chunk_header(b, 0xabc);
  assert_memory_equal(b, "abc\r\n", n);
  n = http1_chunk_header(b, SIZE_MAX);
  assert_int_equal(n, sizeof(size_t) * 2 + 2);
  assert_true(n <= HTTP1_CHUNK_HEADER_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_request_heads),    cmocka_unit_test(test_response_heads),
      cmocka_unit_test(test_head_end),         cmocka_unit_test(test_token),
      cmocka_unit_test(test_content_length),   cmocka_unit_test(test_transfer_encoding),
      cmocka_unit_test(test_host_values),      cmocka_unit_test(test_targets),
      cmocka_unit_test(test_chunked_accepted), cmocka_unit_test(test_chunked_refused),
      cmocka_unit_test(test_body_boundaries),  cmocka_unit_test(test_body_malformed_out),
      cmocka_unit_test(test_body_many_chunks), cmocka_unit_test(test_chunk_header),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
