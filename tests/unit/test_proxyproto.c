/* Unit tests for noded/proxyproto: the PROXY protocol header, v1 and v2, row by row; each row is
 * fed whole, byte by byte and at every split point, and must read the same way each time. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "proxyproto.h"

/* Feed in[0, n) in pieces of at most piece bytes (0: whole); the status, *used the bytes taken. */
static enum pp_status feed_pieces(const unsigned char *in, size_t n, size_t piece,
                                  struct pp_result *r, size_t *taken) {
  struct pp p;
  size_t off = 0;
  enum pp_status st = PP_MORE;
  pp_init(&p);
  memset(r, 0, sizeof *r);
  while (off < n) {
    size_t k = piece && n - off > piece ? piece : n - off, used = 0;
    st = pp_feed(&p, in + off, k, &used, r);
    assert_true(used <= k);
    off += used;
    if (st != PP_MORE) break;
    assert_int_equal(used, k); /* PP_MORE takes every byte it is given */
  }
  *taken = off;
  assert_true(p.n <= PP_KEEP);
  return st;
}

/* Feed two pieces split at cut. */
static enum pp_status feed_split(const unsigned char *in, size_t n, size_t cut, struct pp_result *r,
                                 size_t *taken) {
  struct pp p;
  size_t u1 = 0, u2 = 0;
  enum pp_status st;
  pp_init(&p);
  memset(r, 0, sizeof *r);
  st = pp_feed(&p, in, cut, &u1, r);
  if (st == PP_MORE && cut < n) st = pp_feed(&p, in + u1, n - u1, &u2, r);
  *taken = u1 + u2;
  return st;
}

struct row {
  const char *name;
  const unsigned char *in;
  size_t n;
  enum pp_status want;
  int has_addr;
  const char *src, *dst;
  int sport, dport;
  size_t hdr_len; /* PP_DONE: the header's length (bytes after it are not taken) */
};

static void check_row(const struct row *w) {
  struct pp_result r, first;
  size_t taken, first_taken;
  enum pp_status st = feed_pieces(w->in, w->n, 0, &first, &first_taken);
  if (st != w->want) fail_msg("%s: status %d, want %d", w->name, st, w->want);
  if (st == PP_DONE) {
    assert_int_equal(first.has_addr, w->has_addr);
    assert_int_equal(first_taken, w->hdr_len);
    assert_int_equal(first.len, w->hdr_len);
    if (w->has_addr) {
      assert_string_equal(first.src, w->src);
      assert_string_equal(first.dst, w->dst);
      assert_int_equal(first.sport, w->sport);
      assert_int_equal(first.dport, w->dport);
    }
  }
  for (size_t piece = 1; piece <= 3; piece++) {
    st = feed_pieces(w->in, w->n, piece, &r, &taken);
    if (st != w->want) fail_msg("%s: piece %zu: status %d, want %d", w->name, piece, st, w->want);
    if (st == PP_DONE) {
      assert_int_equal(taken, first_taken);
      assert_memory_equal(&r, &first, sizeof r);
    }
  }
  for (size_t cut = 0; cut <= w->n; cut++) {
    st = feed_split(w->in, w->n, cut, &r, &taken);
    if (st != w->want) fail_msg("%s: cut %zu: status %d, want %d", w->name, cut, st, w->want);
    if (st == PP_DONE) {
      assert_int_equal(taken, first_taken);
      assert_memory_equal(&r, &first, sizeof r);
    }
  }
}

#define T(s) (const unsigned char *)(s), sizeof(s) - 1

static void test_v1_rows(void **state) {
  static const struct row rows[] = {
      {"tcp4", T("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET /"), PP_DONE, 1, "192.0.2.1",
       "198.51.100.2", 56324, 443, 45},
      {"tcp6", T("PROXY TCP6 2001:db8::1 ::1 1 65535\r\n"), PP_DONE, 1, "2001:db8::1", "::1", 1,
       65535, 36},
      {"tcp6 canonical", T("PROXY TCP6 2001:DB8:0:0::1 ::1 0 80\r\n"), PP_DONE, 1, "2001:db8::1",
       "::1", 0, 80, 37},
      {"unknown", T("PROXY UNKNOWN\r\nGET"), PP_DONE, 0, NULL, NULL, 0, 0, 15},
      {"unknown with junk", T("PROXY UNKNOWN ffff::1 ::1 1 2\r\n"), PP_DONE, 0, NULL, NULL, 0, 0,
       31},
      /* the longest TCP6 line: 104 bytes with CRLF */
      {"tcp6 long",
       T("PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
         "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
         "65535 65535\r\n"),
       PP_DONE, 1, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
       "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535, 65535, 104},
      {"not proxy: GET", T("GET / HTTP/1.1\r\n"), PP_NOT_PROXY, 0, NULL, NULL, 0, 0, 0},
      {"not proxy: lowercase", T("proxy TCP4 1.2.3.4 1.2.3.4 1 2\r\n"), PP_NOT_PROXY, 0, NULL, NULL,
       0, 0, 0},
      {"not proxy: no space", T("PROXYTCP4"), PP_NOT_PROXY, 0, NULL, NULL, 0, 0, 0},
      {"tcp4 with v6 address", T("PROXY TCP4 ::1 ::1 1 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"tcp6 with v4 address", T("PROXY TCP6 1.2.3.4 1.2.3.4 1 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0,
       0},
      {"tcp5", T("PROXY TCP5 1.2.3.4 1.2.3.4 1 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"unknownx", T("PROXY UNKNOWNX\r\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"two spaces", T("PROXY TCP4  1.2.3.4 1.2.3.4 1 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"trailing space", T("PROXY TCP4 1.2.3.4 1.2.3.4 1 2 \r\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"five fields", T("PROXY TCP4 1.2.3.4 1.2.3.4 1 2 3\r\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"three fields", T("PROXY TCP4 1.2.3.4 1.2.3.4 1\r\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"leading zero octet", T("PROXY TCP4 01.2.3.4 1.2.3.4 1 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0,
       0},
      {"octet above 255", T("PROXY TCP4 256.2.3.4 1.2.3.4 1 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0,
       0},
      {"short v4", T("PROXY TCP4 1.2.3 1.2.3.4 1 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"port leading zero", T("PROXY TCP4 1.2.3.4 1.2.3.4 01 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0,
       0},
      {"port above 65535", T("PROXY TCP4 1.2.3.4 1.2.3.4 65536 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0,
       0},
      {"port sign", T("PROXY TCP4 1.2.3.4 1.2.3.4 +1 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"port six digits", T("PROXY TCP4 1.2.3.4 1.2.3.4 000001 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0,
       0},
      {"tab", T("PROXY TCP4 1.2.3.4\t1.2.3.4 1 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"bare LF", T("PROXY TCP4 1.2.3.4 1.2.3.4 1 2\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"CR alone", T("PROXY TCP4 1.2.3.4 1.2.3.4 1 2\rX\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"NUL", T("PROXY UNKNOWN \0\r\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
      {"v6 zone", T("PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n"), PP_BAD, 0, NULL, NULL, 0, 0, 0},
  };
  char line[200];
  struct row w;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    check_row(&rows[i]);
  /* the longest line is 107 bytes with its CRLF; 108 is refused, and so is 107 without CRLF */
  memset(line, 'x', sizeof line);
  memcpy(line, "PROXY UNKNOWN ", 14);
  memcpy(line + 105, "\r\nGET", 5);
  w = (struct row){"107 bytes", (const unsigned char *)line, 110, PP_DONE, 0, NULL, NULL, 0, 0,
                   107};
  check_row(&w);
  memset(line, 'x', sizeof line);
  memcpy(line, "PROXY UNKNOWN ", 14);
  memcpy(line + 106, "\r\n", 2);
  w = (struct row){"108 bytes", (const unsigned char *)line, 108, PP_BAD, 0, NULL, NULL, 0, 0, 0};
  check_row(&w);
  memset(line, 'x', sizeof line);
  memcpy(line, "PROXY UNKNOWN ", 14);
  w = (struct row){"no CRLF", (const unsigned char *)line, sizeof line, PP_BAD, 0, NULL, NULL, 0, 0,
                   0};
  check_row(&w);
}

/* v2 headers built here: sig, ver_cmd, fam, len, then body. */
static size_t v2(unsigned char *out, unsigned ver_cmd, unsigned fam, const unsigned char *body,
                 size_t blen, size_t len_field) {
  static const unsigned char sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                        0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
  memcpy(out, sig, 12);
  out[12] = (unsigned char)ver_cmd;
  out[13] = (unsigned char)fam;
  out[14] = (unsigned char)(len_field >> 8);
  out[15] = (unsigned char)len_field;
  if (blen) memcpy(out + 16, body, blen);
  return 16 + blen;
}

static void test_v2_rows(void **state) {
  static unsigned char buf[40][8192];
  static const unsigned char in4[] = {192, 0, 2, 1, 198, 51, 100, 2, 0xDC, 0x04, 0x01, 0xBB};
  unsigned char in6[36] = {0x20, 0x01, 0x0d, 0xb8};
  unsigned char in4tlv[12 + 3 + 5 + 3 + 0];
  unsigned char unixb[216];
  unsigned char big[PP_V2_MAX_LEN + 1];
  struct row rows[40];
  int k = 0;
  in6[15] = 1;
  in6[31] = 2;
  in6[32] = 0x00;
  in6[33] = 0x50;
  in6[34] = 0x01;
  in6[35] = 0xBB;
  memcpy(in4tlv, in4, 12);
  memcpy(in4tlv + 12, "\x04\x00\x05hello\xEE\x00\x00", 11); /* NOOP with 5 bytes, an empty TLV */
  memset(unixb, 'a', sizeof unixb);
  memset(big, 0, sizeof big);
#define ROW(nm, st, ha, s, d, sp, dp, vc, fm, body, blen, lenf, extra)                             \
  do {                                                                                             \
    size_t n_ = v2(buf[k], vc, fm, body, blen, lenf);                                              \
    memcpy(buf[k] + n_, extra, sizeof extra - 1);                                                  \
    rows[k] = (struct row){nm, buf[k], n_ + sizeof extra - 1, st, ha, s, d, sp, dp, 16 + (lenf)};  \
    k++;                                                                                           \
  } while (0)
  ROW("tcp4", PP_DONE, 1, "192.0.2.1", "198.51.100.2", 56324, 443, 0x21, 0x11, in4, 12, 12,
      "GET / HTTP/1.1\r\n");
  ROW("tcp6", PP_DONE, 1, "2001:db8::1", "::2", 80, 443, 0x21, 0x21, in6, 36, 36, "");
  ROW("tcp4 with TLVs", PP_DONE, 1, "192.0.2.1", "198.51.100.2", 56324, 443, 0x21, 0x11, in4tlv,
      sizeof in4tlv, sizeof in4tlv, "G");
  ROW("local", PP_DONE, 0, NULL, NULL, 0, 0, 0x20, 0x00, NULL, 0, 0, "GET");
  ROW("local with a block", PP_DONE, 0, NULL, NULL, 0, 0, 0x20, 0x11, in4, 12, 12, "");
  ROW("unspec", PP_DONE, 0, NULL, NULL, 0, 0, 0x21, 0x00, NULL, 0, 0, "x");
  ROW("unix", PP_DONE, 0, NULL, NULL, 0, 0, 0x21, 0x31, unixb, 216, 216, "");
  ROW("at the length bound", PP_DONE, 0, NULL, NULL, 0, 0, 0x20, 0x00, big, PP_V2_MAX_LEN,
      PP_V2_MAX_LEN, "");
  ROW("above the length bound", PP_BAD, 0, NULL, NULL, 0, 0, 0x20, 0x00, big, PP_V2_MAX_LEN + 1,
      PP_V2_MAX_LEN + 1, "");
  ROW("version 1 in v2", PP_BAD, 0, NULL, NULL, 0, 0, 0x11, 0x11, in4, 12, 12, "");
  ROW("version 3", PP_BAD, 0, NULL, NULL, 0, 0, 0x31, 0x11, in4, 12, 12, "");
  ROW("command 2", PP_BAD, 0, NULL, NULL, 0, 0, 0x22, 0x11, in4, 12, 12, "");
  ROW("udp4", PP_BAD, 0, NULL, NULL, 0, 0, 0x21, 0x12, in4, 12, 12, "");
  ROW("unix dgram", PP_BAD, 0, NULL, NULL, 0, 0, 0x21, 0x32, unixb, 216, 216, "");
  ROW("family 4", PP_BAD, 0, NULL, NULL, 0, 0, 0x21, 0x41, in4, 12, 12, "");
  ROW("inet, transport unspec", PP_BAD, 0, NULL, NULL, 0, 0, 0x21, 0x10, in4, 12, 12, "");
  ROW("tcp4 short length", PP_BAD, 0, NULL, NULL, 0, 0, 0x21, 0x11, in4, 11, 11, "");
  ROW("tcp6 short length", PP_BAD, 0, NULL, NULL, 0, 0, 0x21, 0x21, in6, 12, 12, "");
  ROW("tlv past the end", PP_BAD, 0, NULL, NULL, 0, 0, 0x21, 0x11, in4tlv, 16, 16, "");
  ROW("tlv head cut", PP_BAD, 0, NULL, NULL, 0, 0, 0x21, 0x11, in4tlv, 14, 14, "");
  rows[k++] = (struct row){
      "bad signature", T("\r\n\r\n\0\r\nQUIX\n!\x11\0\0"), PP_NOT_PROXY, 0, NULL, NULL, 0, 0, 0};
  for (int i = 0; i < k; i++)
    check_row(&rows[i]);
#undef ROW
}

/* Once failed, the reader says so again and takes nothing; once done, it takes nothing more. */
static void test_sticky(void **state) {
  struct pp p;
  struct pp_result r;
  size_t used;
  pp_init(&p);
  assert_int_equal(pp_feed(&p, (const unsigned char *)"XYZ", 3, &used, &r), PP_NOT_PROXY);
  assert_non_null(p.why);
  assert_int_equal(pp_feed(&p, (const unsigned char *)"PROXY ", 6, &used, &r), PP_NOT_PROXY);
  assert_int_equal(used, 0);
  pp_init(&p);
  assert_int_equal(pp_feed(&p, (const unsigned char *)"PROXY UNKNOWN\r\nABC", 18, &used, &r),
                   PP_DONE);
  assert_int_equal(used, 15);
  assert_int_equal(r.version, 1);
  assert_int_equal(pp_feed(&p, (const unsigned char *)"ABC", 3, &used, &r), PP_DONE);
  assert_int_equal(used, 0);
}

/* A v2 header that keeps sending TLVs up to the bound holds no more than PP_KEEP bytes; an
 * endless v1 line is refused at byte 107. */
static void test_bounds(void **state) {
  struct pp p;
  struct pp_result r;
  unsigned char hdr[16], tlv[3] = {0xEA, 0x00, 0x00};
  size_t used, total = 0;
  enum pp_status st = PP_MORE;
  v2(hdr, 0x21, 0x00, NULL, 0, PP_V2_MAX_LEN - (PP_V2_MAX_LEN % 3));
  pp_init(&p);
  hdr[13] = 0x11; /* tcp4 needs 12 address bytes first */
  assert_int_equal(pp_feed(&p, hdr, 16, &used, &r), PP_MORE);
  for (int i = 0; i < 4; i++)
    assert_int_equal(pp_feed(&p, tlv, 3, &used, &r), PP_MORE); /* 12 address bytes */
  for (int i = 0; i < 10000 && st == PP_MORE; i++) {
    st = pp_feed(&p, tlv, 3, &used, &r);
    total += used;
    assert_true(p.n <= PP_KEEP);
  }
  assert_int_equal(st, PP_DONE);
  assert_true(total + 12 + 16 <= 16 + PP_V2_MAX_LEN);
  pp_init(&p);
  st = pp_feed(&p, (const unsigned char *)"PROXY ", 6, &used, &r);
  for (int i = 0; i < 1000 && st == PP_MORE; i++)
    st = pp_feed(&p, (const unsigned char *)"x", 1, &used, &r);
  assert_int_equal(st, PP_BAD);
  assert_int_equal(p.total, PP_V1_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_v1_rows),
      cmocka_unit_test(test_v2_rows),
      cmocka_unit_test(test_sticky),
      cmocka_unit_test(test_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
