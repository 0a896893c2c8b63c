/* libFuzzer target for noded's HTTP/1 edge path (http1.c + rewrite.c,
 * docs/design.md#the-edge-http-path).
 *
 * Property: whatever noded accepts and re-frames, an independent strict parser reads as the same
 * message. The first input byte picks the side:
 *   even: a visitor request -> the upstream request noded writes (head from rewrite_request and
 *         rewrite_attempt_head, body re-framed as the proxy does it);
 *   odd:  an origin response -> the response head noded writes for the visitor + its body.
 * The strict parser (below, written apart from http1.c) must read exactly one message covering
 * all the bytes, with the same method/target or status, every forwarded field equal to one of
 * the input's, and the same body bytes. It aborts on any difference. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "http1.h"
#include "rewrite.h"
#include "trust.h"

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "fuzz_http1: " __VA_ARGS__);                                                   \
    fprintf(stderr, "\n");                                                                         \
    abort();                                                                                       \
  } while (0)

/* ---------- the strict reference parser ---------- */

struct ref_field {
  const char *name, *value;
  size_t name_len, value_len;
};

struct ref_msg {
  const char *start_line;
  size_t start_len;
  struct ref_field f[HTTP1_MAX_HEADERS + 16];
  int n;
  char *body;
  size_t body_len;
  size_t total; /* bytes the message took */
};

static int ref_tchar(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int ref_ieq(const char *a, size_t n, const char *b) {
  if (strlen(b) != n) return 0;
  for (size_t i = 0; i < n; i++) {
    int x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x += 32;
    if (y >= 'A' && y <= 'Z') y += 32;
    if (x != y) return 0;
  }
  return 1;
}

/* A CRLF-terminated line at p[0..n): its length without CRLF, or -1. Bare CR or LF: -1. */
static long ref_line(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] == '\n') return -1;
    if (p[i] == '\r') return i + 1 < n && p[i + 1] == '\n' ? (long)i : -1;
  }
  return -1;
}

/* Parse one message at p[0..n) strictly; no_body for HEAD answers and 1xx/204/304. 0 or -1. */
static int ref_parse(const char *p, size_t n, int no_body, struct ref_msg *m) {
  size_t pos = 0;
  long l = ref_line(p, n);
  int chunked = 0, have_cl = 0;
  unsigned long long cl = 0;
  m->n = 0;
  m->body = NULL;
  m->body_len = 0;
  m->total = 0;
  if (l <= 0) return -1;
  m->start_line = p;
  m->start_len = (size_t)l;
  pos = (size_t)l + 2;
  for (;;) {
    size_t i = 0, vs, ve;
    const char *s = p + pos;
    l = ref_line(s, n - pos);
    if (l < 0) return -1;
    pos += (size_t)l + 2;
    if (l == 0) break;
    if (m->n >= (int)(sizeof m->f / sizeof m->f[0])) return -1;
    while (i < (size_t)l && ref_tchar((unsigned char)s[i]))
      i++;
    if (i == 0 || i >= (size_t)l || s[i] != ':') return -1;
    vs = i + 1;
    while (vs < (size_t)l && (s[vs] == ' ' || s[vs] == '\t'))
      vs++;
    ve = (size_t)l;
    while (ve > vs && (s[ve - 1] == ' ' || s[ve - 1] == '\t'))
      ve--;
    for (size_t k = vs; k < ve; k++)
      if (((unsigned char)s[k] < 0x20 && s[k] != '\t') || s[k] == 0x7f) return -1;
    m->f[m->n++] = (struct ref_field){s, s + vs, i, ve - vs};
    if (ref_ieq(s, i, "content-length")) {
      if (have_cl++) return -1;
      cl = 0;
      if (ve == vs) return -1;
      for (size_t k = vs; k < ve; k++) {
        if (s[k] < '0' || s[k] > '9' || ve - vs > 18) return -1; /* fits in 64 bits */
        cl = cl * 10 + (unsigned)(s[k] - '0');
      }
    } else if (ref_ieq(s, i, "transfer-encoding")) {
      if (chunked++ || !ref_ieq(s + vs, ve - vs, "chunked")) return -1;
    }
  }
  if (chunked && have_cl) return -1;
  m->body = malloc(n + 1);
  if (no_body) {
    /* nothing */
  } else if (chunked) {
    for (;;) {
      unsigned long long sz = 0;
      size_t d = 0;
      const char *s = p + pos;
      l = ref_line(s, n - pos);
      if (l <= 0) return -1;
      for (; d < (size_t)l; d++) {
        int h = s[d] >= '0' && s[d] <= '9'   ? s[d] - '0'
                : s[d] >= 'a' && s[d] <= 'f' ? s[d] - 'a' + 10
                                             : -1;
        if (h < 0 || sz > (1ULL << 40)) return -1; /* canonical: lowercase hex, no extension */
        sz = sz * 16 + (unsigned)h;
      }
      pos += (size_t)l + 2;
      if (sz == 0) break;
      if (n - pos < sz + 2 || memcmp(p + pos + sz, "\r\n", 2) != 0) return -1;
      memcpy(m->body + m->body_len, p + pos, sz);
      m->body_len += sz;
      pos += sz + 2;
    }
    if (n - pos < 2 || memcmp(p + pos, "\r\n", 2) != 0) return -1; /* no trailer is written */
    pos += 2;
  } else if (have_cl) {
    if (n - pos < cl) return -1;
    memcpy(m->body, p + pos, cl);
    m->body_len = cl;
    pos += cl;
  } else {
    /* a request without framing has no body; a response is read until the close */
    if (m->start_len >= 5 && memcmp(m->start_line, "HTTP/", 5) == 0) {
      memcpy(m->body, p + pos, n - pos);
      m->body_len = n - pos;
      pos = n;
    }
  }
  m->total = pos;
  return 0;
}

/* 1 when the input head has a field with this exact name and value. */
static int has_field(const struct http1_msg *in, const struct ref_field *f) {
  for (int i = 0; i < in->n_headers; i++)
    if (in->headers[i].name_len == f->name_len && in->headers[i].value_len == f->value_len &&
        memcmp(in->headers[i].name, f->name, f->name_len) == 0 &&
        memcmp(in->headers[i].value, f->value, f->value_len) == 0)
      return 1;
  return 0;
}

/* Decode the body at p[0..n) by framing kind as the proxy does; the decoded bytes go to out,
 * re-framed as canonical chunks to framed when encode. 1 complete, 0 incomplete, -1 refused. */
static int body_reframe(enum http1_body_kind kind, uint64_t len, char *p, size_t n, int encode,
                        struct buf *out, struct buf *framed, size_t *consumed) {
  struct http1_body b;
  size_t pos = 0;
  http1_body_init(&b, kind, len);
  *consumed = 0;
  while (!b.done && pos < n) {
    size_t o;
    /* feed in uneven slices: the parser keeps its state across calls */
    size_t step = (pos % 7) + 1 < n - pos ? (pos % 7) + 1 : n - pos;
    long k = http1_body_feed(&b, p + pos, step, &o, kind == HTTP1_BODY_CHUNKED);
    if (k < 0) return -1;
    if (o) {
      char tmp[16 + HTTP1_CHUNK_HEADER_MAX + 2];
      if (buf_append(out, p + pos, o)) return -1;
      if (encode && kind == HTTP1_BODY_CHUNKED) {
        size_t w = http1_chunk_encode(tmp, p + pos, o); /* o <= 7 here */
        if (buf_append(framed, tmp, w)) return -1;
      } else if (buf_append(framed, p + pos, o)) {
        return -1;
      }
    }
    pos += (size_t)k;
    if (k == 0 && !b.done) break;
  }
  if (kind == HTTP1_BODY_CLOSE) b.done = 1;
  if (!b.done) return 0;
  if (encode && kind == HTTP1_BODY_CHUNKED && buf_puts(framed, HTTP1_LAST_CHUNK)) return -1;
  *consumed = pos;
  return 1;
}

static void check_request(char *p, size_t n) {
  static struct http1_msg m;
  static struct trust trust; /* the peer is a trusted proxy: its X-Forwarded-For is walked */
  struct rewrite_peer peer = {"192.0.2.1", &trust};
  char terr[128];
  struct rewrite_req rq;
  struct buf ubase, head, msg, body, framed;
  struct ref_msg ref;
  size_t scan = 0, hl = http1_head_end(p, n, &scan), used;
  int rc;
  if (!hl || http1_parse_request(p, hl, &m) != HTTP1_OK) return;
  buf_init(&ubase, 1 << 20);
  buf_init(&head, 1 << 20);
  buf_init(&msg, 1 << 21);
  buf_init(&body, 1 << 20);
  buf_init(&framed, 1 << 21);
  if (!trust.n && trust_parse("192.0.2.0/24", &trust, terr, sizeof terr) < 0) abort();
  if (rewrite_request(&m, &peer, &rq, &ubase) < 0 || rq.status) goto out;
  if (!memchr(rq.visitor, '\0', sizeof rq.visitor)) FAIL("visitor not terminated");
  rc = body_reframe(rq.body, rq.body_len, p + hl, n - hl, 1, &body, &framed, &used);
  if (rc <= 0) goto out;
  if (rewrite_attempt_head(&ubase, rq.host, &head) || buf_append(&msg, head.data, head.len) ||
      buf_append(&msg, framed.data ? framed.data : "", framed.len))
    goto out;
  if (ref_parse(msg.data, msg.len, 0, &ref) < 0)
    FAIL("re-framed request unreadable:\n%s", msg.data);
  if (ref.total != msg.len) FAIL("one request became more than one message:\n%s", msg.data);
  if (ref.start_len < m.method_len + 1 || memcmp(ref.start_line, m.method, m.method_len) != 0 ||
      ref.start_line[m.method_len] != ' ')
    FAIL("method changed");
  if (m.target[0] == '/' && (ref.start_len != m.method_len + 1 + m.target_len + 9 ||
                             memcmp(ref.start_line + m.method_len + 1, m.target, m.target_len)))
    FAIL("target changed");
  for (int i = 0; i < ref.n; i++) {
    unsigned fl = rewrite_header_flags(ref.f[i].name, (unsigned)ref.f[i].name_len);
    if (!(fl & RW_REWRITE) && !ref_ieq(ref.f[i].name, ref.f[i].name_len, "connection") &&
        !ref_ieq(ref.f[i].name, ref.f[i].name_len, "upgrade") && !has_field(&m, &ref.f[i]))
      FAIL("field %.*s is not one of the request's", (int)ref.f[i].name_len, ref.f[i].name);
    if (fl & RW_DROP_REQ && !(fl & RW_REWRITE) &&
        !ref_ieq(ref.f[i].name, ref.f[i].name_len, "connection") &&
        !ref_ieq(ref.f[i].name, ref.f[i].name_len, "upgrade"))
      FAIL("dropped field %.*s forwarded", (int)ref.f[i].name_len, ref.f[i].name);
  }
  if (ref.body_len != body.len || (body.len && memcmp(ref.body, body.data, body.len) != 0))
    FAIL("body bytes changed");
  free(ref.body);
out:
  buf_fini(&ubase);
  buf_fini(&head);
  buf_fini(&msg);
  buf_fini(&body);
  buf_fini(&framed);
}

static void check_response(char *p, size_t n, int is_head, int visitor_minor) {
  static struct http1_msg m;
  struct rewrite_resp rs;
  struct buf head, msg, body, framed;
  struct ref_msg ref;
  size_t scan = 0, hl = http1_head_end(p, n, &scan), used;
  int encode, rc, no_body;
  if (!hl || http1_parse_response(p, hl, &m) != HTTP1_OK) return;
  rewrite_response(&m, is_head, &rs);
  if (rs.bad || m.status == 101) return;
  buf_init(&head, 1 << 20);
  buf_init(&msg, 1 << 21);
  buf_init(&body, 1 << 20);
  buf_init(&framed, 1 << 21);
  encode = rs.body == HTTP1_BODY_CHUNKED && visitor_minor >= 1;
  rc = body_reframe(rs.body, rs.body_len, p + hl, n - hl, encode, &body, &framed, &used);
  if (rc <= 0) goto out;
  if (rewrite_response_head(&m, &rs, encode, rs.body == HTTP1_BODY_CLOSE || !encode, &head) ||
      buf_append(&msg, head.data, head.len) ||
      buf_append(&msg, framed.data ? framed.data : "", framed.len))
    goto out;
  no_body = is_head || m.status < 200 || m.status == 204 || m.status == 304;
  if (ref_parse(msg.data, msg.len, no_body, &ref) < 0)
    FAIL("re-framed response unreadable:\n%s", msg.data);
  if (ref.total != msg.len) FAIL("response bytes beyond the message");
  if (ref.start_len < 12 || memcmp(ref.start_line, "HTTP/1.1 ", 9) != 0 ||
      atoi(ref.start_line + 9) != m.status)
    FAIL("status changed");
  for (int i = 0; i < ref.n; i++) {
    unsigned fl = rewrite_header_flags(ref.f[i].name, (unsigned)ref.f[i].name_len);
    if (!(fl & RW_REWRITE) && !ref_ieq(ref.f[i].name, ref.f[i].name_len, "connection") &&
        !has_field(&m, &ref.f[i]))
      FAIL("field %.*s is not one of the response's", (int)ref.f[i].name_len, ref.f[i].name);
  }
  if (!no_body &&
      (ref.body_len != body.len || (body.len && memcmp(ref.body, body.data, body.len) != 0)))
    FAIL("response body bytes changed");
  free(ref.body);
out:
  buf_fini(&head);
  buf_fini(&msg);
  buf_fini(&body);
  buf_fini(&framed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *p;
  if (size < 1 || size > (1 << 16)) return 0;
  p = malloc(size);
  memcpy(p, data + 1, size - 1);
  if ((data[0] & 1) == 0)
    check_request(p, size - 1);
  else
    check_response(p, size - 1, (data[0] >> 1) & 1, (data[0] >> 2) & 1);
  free(p);
  return 0;
}
