/* Tests for noded/rewrite: the header policy table and head planning, without sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "access.h"
#include "http1.h"
#include "rewrite.h"
#include "trust.h"

/* Parse a request head (must be valid) and plan it from 192.0.2.7, a trusted proxy. */
static int plan(const char *head, struct rewrite_req *rq, struct buf *ub) {
  static struct http1_msg m;
  static struct trust t;
  struct rewrite_peer peer = {"192.0.2.7", &t};
  char err[256];
  assert_int_equal(trust_parse("192.0.2.0/24", &t, err, sizeof err), 0);
  assert_int_equal(http1_parse_request(head, strlen(head), &m), HTTP1_OK);
  buf_init(ub, 65536);
  return rewrite_request(&m, &peer, rq, ub);
}

/* X-Forwarded-For from a trusted peer is extended, from anyone else replaced; the visitor is the
 * rightmost untrusted address of the chain (docs/design.md#noded-behind-an-edge-cache). */
static void test_forwarded_for(void **state) {
  static const struct {
    const char *trusted, *peer, *fields; /* fields: the request's X-Forwarded-For lines */
    const char *xff, *visitor;
  } rows[] = {
      {"", "203.0.113.5", "", "203.0.113.5", "203.0.113.5"},
      {"", "203.0.113.5", "X-Forwarded-For: 1.1.1.1\r\n", "203.0.113.5", "203.0.113.5"},
      {"10.0.0.0/8", "203.0.113.5", "X-Forwarded-For: 1.1.1.1\r\n", "203.0.113.5", "203.0.113.5"},
      {"10.0.0.0/8", "10.1.2.3", "", "10.1.2.3", "10.1.2.3"},
      {"10.0.0.0/8", "10.1.2.3", "X-Forwarded-For: 1.1.1.1\r\n", "1.1.1.1, 10.1.2.3", "1.1.1.1"},
      /* several fields and items: the rightmost untrusted one is the visitor */
      {"10.0.0.0/8", "10.1.2.3",
       "X-Forwarded-For: 6.6.6.6, 1.1.1.1\r\nX-Forwarded-For: 10.9.9.9\r\n",
       "6.6.6.6, 1.1.1.1, 10.9.9.9, 10.1.2.3", "1.1.1.1"},
      /* an item that is no address ends the walk: the last trusted hop stays the visitor */
      {"10.0.0.0/8", "10.1.2.3", "X-Forwarded-For: 1.1.1.1, unknown\r\n",
       "1.1.1.1, unknown, 10.1.2.3", "10.1.2.3"},
      {"10.0.0.0/8", "10.1.2.3", "X-Forwarded-For: 10.0.0.1, 10.0.0.2\r\n",
       "10.0.0.1, 10.0.0.2, 10.1.2.3", "10.0.0.1"},
      {"10.0.0.0/8", "10.1.2.3", "X-Forwarded-For: ,1.1.1.1 , \r\n", ",1.1.1.1 ,, 10.1.2.3",
       "1.1.1.1"},
      /* a trusted Unix-socket peer has no address to add: its header goes on as it is */
      {"unix", "unix:", "X-Forwarded-For: 2001:db8::1\r\n", "2001:db8::1", "2001:db8::1"},
      {"unix", "unix:", "X-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: 2.2.2.2\r\n",
       "1.1.1.1, 2.2.2.2", "2.2.2.2"},
      {"unix", "unix:", "", "unix:", "unix:"},
      {"10.0.0.0/8", "unix:", "X-Forwarded-For: 1.1.1.1\r\n", "unix:", "unix:"},
      {"::1", "::1", "X-Forwarded-For: 1.1.1.1\r\n", "1.1.1.1, ::1", "1.1.1.1"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    static struct http1_msg m;
    struct trust t;
    struct rewrite_req rq;
    struct rewrite_peer peer = {rows[i].peer, &t};
    struct buf ub, head, want;
    char err[256];
    assert_int_equal(trust_parse(rows[i].trusted, &t, err, sizeof err), 0);
    buf_init(&head, 0);
    buf_init(&want, 0);
    buf_init(&ub, 65536);
    assert_int_equal(buf_printf(&head, "GET / HTTP/1.1\r\nHost: a.test\r\n%s\r\n", rows[i].fields),
                     0);
    assert_int_equal(http1_parse_request(head.data, head.len, &m), HTTP1_OK);
    assert_int_equal(rewrite_request(&m, &peer, &rq, &ub), 0);
    assert_int_equal(buf_printf(&want, "\r\nX-Forwarded-For: %s\r\n", rows[i].xff), 0);
    if (!strstr(ub.data, want.data)) fail_msg("row %zu: %s", i, ub.data);
    if (strcmp(rq.visitor, rows[i].visitor) != 0)
      fail_msg("row %zu: visitor %s, want %s", i, rq.visitor, rows[i].visitor);
    buf_fini(&ub);
    buf_fini(&head);
    buf_fini(&want);
  }
  (void)state;
}

/* --trusted-proxies: CIDRs of both families and "unix"; bad items named. */
static void test_trust_parse(void **state) {
  struct trust t;
  char err[256];
  static const char *const bad[] = {"10.0.0.1/8",      "10.0.0.0/33", "10.0.0.0/",   "10.0.0.0/08",
                                    "::1/129",         "example.com", "10.0.0.0/8,", ",10.0.0.0/8",
                                    "::ffff:10.0.0.1", "unix:",       "1.2.3.4 ",    NULL};
  assert_int_equal(
      trust_parse("10.0.0.0/8,192.0.2.1,2001:db8::/32,unix,0.0.0.0/0", &t, err, sizeof err), 0);
  assert_int_equal(t.n, 4);
  assert_true(t.unix_peers);
  assert_int_equal(trust_parse("172.16.0.0/12,2001:db8::/33", &t, err, sizeof err), 0);
  assert_true(trust_has(&t, "172.31.255.255", 14));
  assert_false(trust_has(&t, "172.32.0.0", 10));
  assert_true(trust_has(&t, "::ffff:172.16.0.1", 17)); /* IPv4-mapped counts as IPv4 */
  assert_true(trust_has(&t, "2001:db8:7fff::1", 16));
  assert_false(trust_has(&t, "2001:db8:8000::1", 16));
  assert_false(trust_has(&t, "unix:", 5));
  assert_false(trust_has(&t, "garbage", 7));
  for (int i = 0; bad[i]; i++)
    if (trust_parse(bad[i], &t, err, sizeof err) == 0) fail_msg("'%s' was accepted", bad[i]);
  (void)state;
}

static void test_header_flags(void **state) {
  (void)state;
  static const struct {
    const char *name;
    unsigned flags;
  } rows[] = {
      {"Connection", RW_DROP_REQ | RW_DROP_RESP | RW_HOP},
      {"keep-alive", RW_DROP_REQ | RW_DROP_RESP | RW_HOP},
      {"Proxy-Authorization", RW_DROP_REQ | RW_DROP_RESP | RW_HOP},
      {"TE", RW_DROP_REQ | RW_DROP_RESP | RW_HOP},
      {"Upgrade", RW_DROP_REQ | RW_DROP_RESP | RW_HOP},
      {"Transfer-Encoding", RW_DROP_REQ | RW_DROP_RESP | RW_HOP | RW_REWRITE},
      {"Host", RW_DROP_REQ | RW_REWRITE},
      {"content-length", RW_DROP_REQ | RW_REWRITE},
      {"X-Forwarded-For", RW_DROP_REQ | RW_REWRITE},
      {"Via", RW_DROP_REQ | RW_REWRITE},
      {"Expect", RW_DROP_REQ},
      {"Accept", 0},
      {"Proxy", 0}, /* only "proxy-" names are hop-by-hop */
      {"Hostx", 0},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    unsigned got = rewrite_header_flags(rows[i].name, (unsigned)strlen(rows[i].name));
    if (got != rows[i].flags) fail_msg("%s: flags %u, want %u", rows[i].name, got, rows[i].flags);
  }
}

static void test_plan_get(void **state) {
  struct rewrite_req rq;
  struct buf ub;
  (void)state;
  assert_int_equal(plan("GET /a?b HTTP/1.1\r\nHost: demo.test\r\nAccept: */*\r\n"
                        "Connection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: 5\r\n"
                        "X-Forwarded-For: 10.0.0.1\r\nVia: 1.0 other\r\nTE: trailers\r\n\r\n",
                        &rq, &ub),
                   0);
  assert_int_equal(rq.status, 0);
  assert_string_equal(rq.host, "demo.test");
  assert_string_equal(rq.method, "GET");
  assert_string_equal(rq.path, "/a?b");
  assert_true(rq.idempotent);
  assert_true(rq.keepalive);
  assert_int_equal(rq.body, HTTP1_BODY_NONE);
  assert_string_equal(ub.data, "GET /a?b HTTP/1.1\r\nAccept: */*\r\n"
                               "X-Forwarded-For: 10.0.0.1, 192.0.2.7\r\nX-Forwarded-Proto: http\r\n"
                               "Via: 1.0 other, 1.1 cdnca-node\r\n");
  {
    struct buf h;
    buf_init(&h, 0);
    assert_int_equal(rewrite_attempt_head(&ub, "origin.test", &h), 0);
    assert_non_null(strstr(h.data, "\r\nHost: origin.test\r\n\r\n"));
    buf_fini(&h);
  }
  buf_fini(&ub);
}

/* Fields named by Connection are dropped, also "Close" when only "close" is listed. */
static void test_connection_listed(void **state) {
  struct rewrite_req rq;
  struct buf ub;
  (void)state;
  assert_int_equal(plan("GET / HTTP/1.1\r\nHost: d\r\nConnection: close\r\nClose: 1\r\n"
                        "Closed: 2\r\n\r\n",
                        &rq, &ub),
                   0);
  assert_null(strstr(ub.data, "Close: 1"));
  assert_non_null(strstr(ub.data, "Closed: 2\r\n"));
  assert_false(rq.keepalive);
  buf_fini(&ub);
  assert_int_equal(plan("GET / HTTP/1.1\r\nHost: d\r\nConnection: a, B\r\nA: 1\r\nb: 2\r\n"
                        "C: 3\r\n\r\n",
                        &rq, &ub),
                   0);
  assert_null(strstr(ub.data, "A: 1"));
  assert_null(strstr(ub.data, "b: 2"));
  assert_non_null(strstr(ub.data, "C: 3\r\n"));
  buf_fini(&ub);
}

/* Only WebSocket is tunnelled: an h2c (or any other) upgrade is forwarded without Upgrade and
   its Connection tokens, so an origin's 101 to it stays a failure. */
static void test_upgrade_websocket_only(void **state) {
  static const struct {
    const char *head;
    int upgrade;
  } rows[] = {
      {"GET /ws HTTP/1.1\r\nHost: d\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 1},
      {"GET /ws HTTP/1.1\r\nHost: d\r\nConnection: upgrade\r\nUpgrade: WebSocket\r\n\r\n", 1},
      {"GET / HTTP/1.1\r\nHost: d\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
       "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
       0},
      {"GET / HTTP/1.1\r\nHost: d\r\nConnection: Upgrade\r\nUpgrade: websocket, h2c\r\n\r\n", 0},
      {"GET / HTTP/1.1\r\nHost: d\r\nConnection: Upgrade\r\nUpgrade: websocketx\r\n\r\n", 0},
      {"GET / HTTP/1.1\r\nHost: d\r\nConnection: Upgrade\r\nUpgrade: TLS/1.2\r\n\r\n", 0},
      {"GET / HTTP/1.1\r\nHost: d\r\nUpgrade: websocket\r\n\r\n", 0}, /* no Connection */
      {"GET / HTTP/1.0\r\nHost: d\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 0},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct rewrite_req rq;
    struct buf ub;
    assert_int_equal(plan(rows[i].head, &rq, &ub), 0);
    if (rq.upgrade != rows[i].upgrade) fail_msg("row %zu: upgrade %d", i, rq.upgrade);
    if (!rows[i].upgrade &&
        (strstr(ub.data, "Upgrade") || strstr(ub.data, "h2c") || strstr(ub.data, "HTTP2-Settings")))
      fail_msg("row %zu: the upstream head keeps the upgrade: %s", i, ub.data);
    if (rows[i].upgrade && !strstr(ub.data, "Connection: upgrade\r\n"))
      fail_msg("row %zu: no Connection: upgrade upstream", i);
    buf_fini(&ub);
  }
}

static void test_plan_bodies(void **state) {
  struct rewrite_req rq;
  struct buf ub;
  (void)state;
  assert_int_equal(plan("POST /u HTTP/1.1\r\nHost: d\r\nContent-Length: 12\r\n"
                        "Expect: 100-continue\r\n\r\n",
                        &rq, &ub),
                   0);
  assert_int_equal(rq.status, 0);
  assert_int_equal(rq.body, HTTP1_BODY_LENGTH);
  assert_int_equal(rq.body_len, 12);
  assert_true(rq.has_body);
  assert_true(rq.expect_continue);
  assert_false(rq.idempotent);
  assert_non_null(strstr(ub.data, "Content-Length: 12\r\n"));
  assert_null(strstr(ub.data, "Expect"));
  buf_fini(&ub);

  assert_int_equal(
      plan("POST /u HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: chunked\r\n\r\n", &rq, &ub), 0);
  assert_int_equal(rq.body, HTTP1_BODY_CHUNKED);
  assert_non_null(strstr(ub.data, "Transfer-Encoding: chunked\r\n"));
  buf_fini(&ub);

  assert_int_equal(plan("POST /u HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\n\r\n", &rq, &ub), 0);
  assert_int_equal(rq.status, 0);
  assert_false(rq.has_body);
  assert_non_null(strstr(ub.data, "Content-Length: 0\r\n"));
  buf_fini(&ub);
}

/* Requests answered locally: head -> status. */
static void test_plan_rejects(void **state) {
  static const struct {
    const char *head;
    int status;
  } rows[] = {
      {"GET / HTTP/1.1\r\n\r\n", 400},                       /* no Host */
      {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400}, /* two Hosts */
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
       400},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct rewrite_req rq;
    struct buf ub;
    assert_int_equal(plan(rows[i].head, &rq, &ub), 0);
    if (rq.status != rows[i].status)
      fail_msg("row %zu: status %d, want %d", i, rq.status, rows[i].status);
    buf_fini(&ub);
  }
}

static void test_absolute_form(void **state) {
  struct rewrite_req rq;
  struct buf ub;
  (void)state;
  assert_int_equal(plan("GET http://demo.test/x HTTP/1.1\r\nHost: other\r\n\r\n", &rq, &ub), 0);
  assert_int_equal(rq.status, 0);
  assert_string_equal(rq.host, "demo.test");
  assert_true(strncmp(ub.data, "GET /x HTTP/1.1\r\n", 17) == 0);
  buf_fini(&ub);
}

static void test_response(void **state) {
  static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close, X-A\r\n"
                             "X-A: 1\r\nX-B: 2\r\nKeep-Alive: timeout=5\r\n\r\n";
  struct http1_msg m;
  struct rewrite_resp rs;
  struct buf o;
  (void)state;
  assert_int_equal(http1_parse_response(head, strlen(head), &m), HTTP1_OK);
  rewrite_response(&m, 0, &rs);
  assert_false(rs.bad);
  assert_int_equal(rs.body, HTTP1_BODY_LENGTH);
  assert_int_equal(rs.body_len, 5);
  assert_false(rs.up_keepalive);
  buf_init(&o, 0);
  assert_int_equal(rewrite_response_head(&m, &rs, 0, 0, &o), 0);
  assert_string_equal(o.data, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-B: 2\r\n\r\n");
  buf_fini(&o);
  rewrite_response(&m, 1, &rs); /* HEAD: no body whatever the length says */
  assert_int_equal(rs.body, HTTP1_BODY_NONE);
}

static void test_local_answer(void **state) {
  struct buf o;
  (void)state;
  buf_init(&o, 0);
  assert_int_equal(rewrite_local_answer(502, "x\"y", "m", 1, &o), 0);
  assert_non_null(strstr(o.data, "HTTP/1.1 502 Bad Gateway\r\n"));
  assert_non_null(strstr(o.data, "Connection: close\r\n"));
  assert_non_null(strstr(o.data, "{\"error\":{\"code\":\"x\\\"y\",\"message\":\"m\"}}"));
  buf_fini(&o);
  assert_string_equal(rewrite_reason(431), "Request Header Fields Too Large");
  assert_string_equal(rewrite_reason(299), "Unknown");
}

/* HTTP/1.1 keeps the connection unless "close"; HTTP/1.0 only with "keep-alive" (as nginx);
   the Connection header written on the answers says which */
static void test_keepalive(void **state) {
  static const struct {
    const char *head;
    int keepalive;
  } rows[] = {
      {"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", 1},
      {"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n", 0},
      {"GET / HTTP/1.0\r\nHost: a.test\r\n\r\n", 0},
      {"GET / HTTP/1.0\r\nHost: a.test\r\nConnection: keep-alive\r\n\r\n", 1},
      {"GET / HTTP/1.0\r\nHost: a.test\r\nConnection: Keep-Alive\r\n\r\n", 1},
      {"GET / HTTP/1.0\r\nHost: a.test\r\nConnection: keep-alive, close\r\n\r\n", 0},
      {"GET / HTTP/1.0\r\nHost: a.test\r\nKeep-Alive: timeout=5\r\n\r\n", 0},
  };
  static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nKeep-Alive: x\r\n\r\n";
  struct http1_msg m;
  struct rewrite_resp rs;
  struct rewrite_req rq;
  struct buf ub, o;
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    assert_int_equal(plan(rows[i].head, &rq, &ub), 0);
    if (rq.keepalive != rows[i].keepalive)
      fail_msg("%s: keepalive %d, want %d", rows[i].head, rq.keepalive, rows[i].keepalive);
    assert_null(strstr(ub.data, "eep-")); /* never forwarded to the origin */
    buf_fini(&ub);
  }
  assert_int_equal(http1_parse_response(resp, strlen(resp), &m), HTTP1_OK);
  rewrite_response(&m, 0, &rs);
  buf_init(&o, 0);
  assert_int_equal(rewrite_response_head(&m, &rs, 0, RW_CONN_KEEPALIVE, &o), 0);
  assert_string_equal(o.data,
                      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n");
  o.len = 0;
  assert_int_equal(rewrite_response_head(&m, &rs, 0, RW_CONN_NONE, &o), 0);
  assert_string_equal(o.data, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  o.len = 0;
  assert_int_equal(rewrite_local_answer(404, "c", "m", RW_CONN_KEEPALIVE, &o), 0);
  assert_non_null(strstr(o.data, "\r\nConnection: keep-alive\r\n\r\n{"));
  assert_null(strstr(o.data, "close"));
  buf_fini(&o);
}

static void test_json_escape(void **state) {
  struct buf b;
  (void)state;
  buf_init(&b, 0);
  assert_int_equal(rewrite_json_escape(&b, ""), 0);
  assert_int_equal(b.len, 0);
  assert_int_equal(rewrite_json_escape(&b, "plain/path?x=1"), 0);
  assert_int_equal(rewrite_json_escape(&b, "|a\"b\\c\x01\x7f\td\xc3\xa9\""), 0);
  assert_string_equal(b.data, "plain/path?x=1|a\\\"b\\\\c\\u0001\\u007f\\u0009d\xc3\xa9\\\"");
  buf_fini(&b);
  buf_init(&b, 4); /* bounded: -1 when it does not fit */
  assert_int_equal(rewrite_json_escape(&b, "abcdef"), -1);
  buf_fini(&b);
}

static void test_tls_name(void **state) {
  char tmp[64];
  (void)state;
  assert_string_equal(rewrite_tls_name("demo.test:8080", NULL, tmp, sizeof tmp), "demo.test");
  assert_string_equal(rewrite_tls_name("[::1]:8443", NULL, tmp, sizeof tmp), "::1");
  assert_string_equal(rewrite_tls_name("demo.test", "o.test", tmp, sizeof tmp), "o.test");
}

/* the access line's JSON: every field, strings escaped, the error code only when noded answered
   itself, a buffer too small refused */
static void test_access_json(void **state) {
  struct buf b;
  struct proxy_access a = {.site_id = 7,
                           .site = "shop",
                           .origin_id = 12,
                           .client = "192.0.2.1",
                           .level = 2,
                           .attempts = 3,
                           .status = 502,
                           .duration_ms = 41,
                           .method = "GET",
                           .host = "shop.test",
                           .path = "/a\"b\n",
                           .bytes = 1024,
                           .error = NULL};
  (void)state;
  buf_init(&b, 0);
  assert_int_equal(access_json(&b, &a), 0);
  assert_string_equal(b.data, "{\"type\":\"access\",\"site_id\":7,\"site\":\"shop\",\"client\":"
                              "\"192.0.2.1\",\"host\":\"shop.test\",\"method\":\"GET\",\"path\":"
                              "\"/a\\\"b\\u000a\",\"origin_id\":12,\"level\":2,\"attempts\":3,"
                              "\"status\":502,\"duration_ms\":41,\"bytes\":1024}");
  a.error = "origin_unreachable";
  assert_int_equal(access_json(&b, &a), 0); /* emptied first: one line, not two */
  assert_non_null(strstr(b.data, ",\"bytes\":1024,\"error\":\"origin_unreachable\"}"));
  assert_int_equal(strncmp(b.data, "{\"type\":\"access\"", 16), 0);
  buf_fini(&b);
  buf_init(&b, 40);
  assert_int_equal(access_json(&b, &a), -1);
  buf_fini(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_access_json),  cmocka_unit_test(test_header_flags),
      cmocka_unit_test(test_plan_get),     cmocka_unit_test(test_forwarded_for),
      cmocka_unit_test(test_trust_parse),  cmocka_unit_test(test_upgrade_websocket_only),
      cmocka_unit_test(test_plan_bodies),  cmocka_unit_test(test_connection_listed),
      cmocka_unit_test(test_plan_rejects), cmocka_unit_test(test_absolute_form),
      cmocka_unit_test(test_response),     cmocka_unit_test(test_local_answer),
      cmocka_unit_test(test_tls_name),     cmocka_unit_test(test_json_escape),
      cmocka_unit_test(test_keepalive),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
