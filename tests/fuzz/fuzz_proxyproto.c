/* libFuzzer target for noded's PROXY protocol reader (noded/proxyproto.c,
 * docs/design.md#noded-behind-an-edge-cache).
 *
 * Properties: the input (after its first byte, which picks the piece size) read whole and read in
 * pieces gives the same status, the same bytes taken and the same result; the reader never keeps
 * more than PP_KEEP bytes nor takes a byte past the header; a complete header is within its
 * version's bound; a v1 TCP4 header is exactly the line its result writes back, and a v2
 * address block holds exactly the addresses and ports of the result. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz_check.h"
#include "proxyproto.h"

static enum pp_status run(const unsigned char *d, size_t n, size_t piece, struct pp_result *r,
                          size_t *taken) {
  struct pp p;
  enum pp_status st = PP_MORE;
  size_t off = 0;
  pp_init(&p);
  memset(r, 0, sizeof *r);
  while (off < n) {
    size_t k = n - off > piece ? piece : n - off, used = 0;
    st = pp_feed(&p, d + off, k, &used, r);
    FUZZ_CHECK(used <= k);
    FUZZ_CHECK(p.n <= PP_KEEP);
    off += used;
    if (st != PP_MORE) break;
    FUZZ_CHECK(used == k);
  }
  if (st == PP_BAD || st == PP_NOT_PROXY) FUZZ_CHECK(p.why != NULL);
  *taken = off;
  return st;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  struct pp_result whole, pieces;
  size_t tw, tp, piece;
  enum pp_status sw, sp;
  unsigned char bin[16];
  if (size < 1) return 0;
  piece = (size_t)data[0] % 17 + 1;
  data++;
  size--;
  sw = run(data, size, size ? size : 1, &whole, &tw);
  sp = run(data, size, piece, &pieces, &tp);
  FUZZ_CHECK(sw == sp);
  FUZZ_CHECK(tw == tp);
  if (sw != PP_DONE) return 0;
  FUZZ_CHECK(memcmp(&whole, &pieces, sizeof whole) == 0);
  FUZZ_CHECK(whole.len == tw && tw <= size);
  FUZZ_CHECK(FUZZ_TERMINATED(whole.src) && FUZZ_TERMINATED(whole.dst));
  if (whole.version == 1) {
    FUZZ_CHECK(whole.len <= PP_V1_MAX);
    FUZZ_CHECK(data[whole.len - 2] == '\r' && data[whole.len - 1] == '\n');
    if (whole.has_addr && whole.family == AF_INET) {
      char line[PP_V1_MAX + 32];
      int k = snprintf(line, sizeof line, "PROXY TCP4 %s %s %u %u\r\n", whole.src, whole.dst,
                       (unsigned)whole.sport, (unsigned)whole.dport);
      FUZZ_CHECK(k > 0 && (size_t)k == whole.len && memcmp(line, data, whole.len) == 0);
    }
  } else {
    FUZZ_CHECK(whole.version == 2);
    FUZZ_CHECK(whole.len >= 16 && whole.len <= 16 + PP_V2_MAX_LEN);
    FUZZ_CHECK(whole.len == 16 + (((size_t)data[14] << 8) | data[15]));
    if (whole.has_addr) {
      size_t al = whole.family == AF_INET ? 4 : 16;
      FUZZ_CHECK(inet_pton(whole.family, whole.src, bin) == 1 && memcmp(bin, data + 16, al) == 0);
      FUZZ_CHECK(inet_pton(whole.family, whole.dst, bin) == 1 &&
                 memcmp(bin, data + 16 + al, al) == 0);
      FUZZ_CHECK(whole.sport == ((data[16 + 2 * al] << 8) | data[17 + 2 * al]));
      FUZZ_CHECK(whole.dport == ((data[18 + 2 * al] << 8) | data[19 + 2 * al]));
    }
  }
  if (!whole.has_addr) FUZZ_CHECK(whole.src[0] == '\0' && whole.dst[0] == '\0');
  return 0;
}
