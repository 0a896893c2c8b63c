/* libFuzzer target for the bound and framing rule of libcurl answers (common/curlhead.c,
 * docs/design.md#one-message-one-reading).
 *
 * The input's first byte picks a HEAD answer (odd) or not, the second the byte bound (256 times
 * it, 0 = the default); the rest is header lines split after each '\n', each copied into a buffer
 * of exactly its length (no terminator) and fed as libcurl would. Properties: a refusal names one
 * of the three reasons and sticks (every later line is refused too, through the callback as 0);
 * the bytes taken never pass the bound; a head accepted whole holds at most one Content-Length,
 * and not beside a Transfer-Encoding unless it answers a HEAD. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "curlhead.h"
#include "fuzz_check.h"

static int starts(const unsigned char *p, size_t n, const char *name) {
  size_t k = strlen(name);
  return n > k && strncasecmp((const char *)p, name, k) == 0 && p[k] == ':';
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  struct curlhead h;
  size_t off = 2, max;
  int no_body, refused = 0, lengths = 0, codings = 0, in_final_head = 0;
  if (size < 2) return 0;
  no_body = data[0] & 1;
  max = (size_t)data[1] * 256;
  curlhead_init(&h, max, no_body);
  FUZZ_CHECK(h.max == (max ? max : CURLHEAD_MAX));
  while (off < size) {
    const unsigned char *nl = memchr(data + off, '\n', size - off);
    size_t n = nl ? (size_t)(nl - (data + off)) + 1 : size - off;
    char *line = malloc(n ? n : 1);
    int rc;
    if (!line) break;
    memcpy(line, data + off, n);
    rc = curlhead_line(&h, line, n);
    FUZZ_CHECK(rc == 0 || rc == -1);
    if (refused) FUZZ_CHECK(rc == -1 && curlhead_cb(line, 1, n, &h) == 0);
    if (rc < 0) {
      FUZZ_CHECK(h.why && (strcmp(h.why, "bad response framing") == 0 ||
                           strcmp(h.why, "bad response head") == 0 ||
                           strcmp(h.why, "response head too large") == 0));
      refused = 1;
    } else {
      FUZZ_CHECK(h.bytes <= h.max);
      /* a second reading of what an accepted head held */
      if (n >= 5 && memcmp(line, "HTTP/", 5) == 0 && !h.final_done) {
        lengths = codings = 0;
        in_final_head = 1;
      } else if (in_final_head && !h.final_done && !h.in_head) {
        /* the blank line that ended a head was accepted */
        FUZZ_CHECK(lengths <= 1);
        FUZZ_CHECK(no_body || !(lengths && codings));
        in_final_head = 0;
      } else if (h.in_head) {
        lengths += starts((const unsigned char *)line, n, "Content-Length");
        codings += starts((const unsigned char *)line, n, "Transfer-Encoding");
      }
    }
    free(line);
    off += n;
  }
  return 0;
}
