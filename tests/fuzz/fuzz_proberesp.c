/* fuzz_proberesp — libFuzzer target for common/proberesp, a health probe's reading of an origin's
 * HTTP/1.x answer.
 *
 * Property: how the answer's bytes are split into pieces changes nothing. The bytes are read
 * once in one piece and once in pieces of a stride; after presp_eof both readings have the same
 * state, status, cut, error and kept bytes (and the same state before presp_eof). Each reading
 * also keeps the header's promises: after presp_eof the state is DONE or BAD; the status is 0
 * unless the state is BODY or DONE, and then it is 101 or 200-999; an error only with BAD; cut
 * only with DONE; kept_len <= PRESP_KEEP_MAX, and 0 without keep. Bytes fed after the end change
 * nothing.
 *
 * Input: byte 0 = bit 0 head_only, bit 1 keep, bits 2-6 the stride - 1 (1..32), bit 7 expand;
 * with expand, bytes 1-4 = a filler byte, its length (bit 0 of byte 2: 33000 or 70000 bytes,
 * beyond PRESP_HEAD_MAX or PRESP_BODY_MAX) and where it goes (bytes 3-4, little endian, modulo
 * the answer's length). The rest is the answer. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "proberesp.h"

struct reading {
  int fed, state, status, cut;
  const char *error;
  char *kept;
  size_t kept_len;
};

/* Read p[0..n) in pieces of at most step bytes, each in a heap block of its own. */
static void read_answer(const char *p, size_t n, size_t step, int head_only, int keep,
                        struct reading *o) {
  struct presp r;
  size_t pos = 0;
  presp_init(&r, head_only, keep);
  do {
    size_t k = n - pos < step ? n - pos : step;
    char *piece = malloc(k ? k : 1);
    int st;
    FUZZ_CHECK(piece != NULL);
    if (k) memcpy(piece, p + pos, k);
    st = presp_feed(&r, piece, k);
    free(piece);
    FUZZ_CHECK(st == r.state);
    FUZZ_CHECK(r.kept_len <= PRESP_KEEP_MAX);
    if (r.state != PRESP_BODY && r.state != PRESP_DONE) FUZZ_CHECK(r.status == 0);
    pos += k;
  } while (pos < n);
  o->fed = r.state;
  o->state = presp_eof(&r);
  FUZZ_CHECK(o->state == r.state);
  FUZZ_CHECK(r.state == PRESP_DONE || r.state == PRESP_BAD);
  if (r.state == PRESP_DONE)
    FUZZ_CHECK(r.status == 101 || (r.status >= 200 && r.status <= 999));
  else
    FUZZ_CHECK(r.status == 0);
  FUZZ_CHECK((r.error != NULL) == (r.state == PRESP_BAD));
  FUZZ_CHECK(!r.cut || r.state == PRESP_DONE);
  FUZZ_CHECK(r.kept_len <= PRESP_KEEP_MAX);
  FUZZ_CHECK(keep || r.kept_len == 0);
  o->status = r.status;
  o->cut = r.cut;
  o->error = r.error;
  o->kept_len = r.kept_len;
  o->kept = malloc(r.kept_len + 1);
  FUZZ_CHECK(o->kept != NULL);
  if (r.kept_len) memcpy(o->kept, r.kept, r.kept_len);
  {
    /* the answer is over: more bytes and another eof change nothing */
    char more[] = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
    FUZZ_CHECK(presp_feed(&r, more, sizeof more - 1) == o->state);
    FUZZ_CHECK(presp_eof(&r) == o->state);
    FUZZ_CHECK(r.status == o->status && r.cut == o->cut && r.error == o->error);
    FUZZ_CHECK(r.kept_len == o->kept_len);
  }
  presp_free(&r);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  int head_only, keep;
  size_t step, n;
  char *p;
  struct reading a, b;
  if (size < 1) return 0;
  head_only = data[0] & 1;
  keep = (data[0] >> 1) & 1;
  step = (size_t)((data[0] >> 2) & 31) + 1;
  if (data[0] & 0x80) {
    size_t fill, at, rest;
    if (size < 5) return 0;
    fill = (data[2] & 1) ? 70000 : 33000;
    rest = size - 5;
    at = rest ? ((size_t)data[3] | (size_t)data[4] << 8) % (rest + 1) : 0;
    n = rest + fill;
    p = malloc(n);
    FUZZ_CHECK(p != NULL);
    memcpy(p, data + 5, at);
    memset(p + at, data[1], fill);
    memcpy(p + at + fill, data + 5 + at, rest - at);
  } else {
    n = size - 1;
    p = malloc(n ? n : 1);
    FUZZ_CHECK(p != NULL);
    if (n) memcpy(p, data + 1, n);
  }
  read_answer(p, n, n ? n : 1, head_only, keep, &a);
  read_answer(p, n, step, head_only, keep, &b);
  FUZZ_CHECK(a.fed == b.fed);
  FUZZ_CHECK(a.state == b.state);
  FUZZ_CHECK(a.status == b.status);
  FUZZ_CHECK(a.cut == b.cut);
  FUZZ_CHECK((a.error == NULL) == (b.error == NULL));
  FUZZ_CHECK(a.error == NULL || strcmp(a.error, b.error) == 0);
  FUZZ_CHECK(a.kept_len == b.kept_len);
  FUZZ_CHECK(a.kept_len == 0 || memcmp(a.kept, b.kept, a.kept_len) == 0);
  free(a.kept);
  free(b.kept);
  free(p);
  return 0;
}
