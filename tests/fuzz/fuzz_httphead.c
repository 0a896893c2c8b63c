/* libFuzzer target for the request-head rules of controld's API and noded's admin port
 * (common/httphead.c, docs/design.md#one-message-one-reading).
 *
 * The input's first byte picks HTTP/1.0 (even) or 1.1 (odd); the rest is header lines split at
 * '\n', each at its first ':' into name and value, each copied into a buffer of exactly its
 * length (no terminator: a read past a field's length is an out-of-bounds read under ASan).
 * Properties: the check accepts exactly when a second, independent reading of the same rules
 * finds nothing wrong; a refusal carries a status of 400 or 501, a code, a message and a field. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "httphead.h"

#define MAXF 100

static int same_name(const struct httphead_field *f, const char *name) {
  size_t n = strlen(name);
  if (f->name_len != n) return 0;
  for (size_t i = 0; i < n; i++)
    if (tolower((unsigned char)f->name[i]) != tolower((unsigned char)name[i])) return 0;
  return 1;
}

/* The value between optional white space, as a NUL-terminated copy into out (cap 32, cut). */
static size_t trimmed(const struct httphead_field *f, char *out) {
  size_t a = 0, b = f->value_len, n;
  while (a < b && (f->value[a] == ' ' || f->value[a] == '\t'))
    a++;
  while (b > a && (f->value[b - 1] == ' ' || f->value[b - 1] == '\t'))
    b--;
  n = b - a;
  memcpy(out, f->value + a, n < 31 ? n : 31);
  out[n < 31 ? n : 31] = '\0';
  return n;
}

/* 1 when the rules see nothing wrong, read a second way. */
static int reference_ok(const struct httphead_field *f, size_t n, int minor) {
  static const char *const once[] = {"host",           "content-length", "transfer-encoding",
                                     "authorization",  "content-type",   "if-match",
                                     "idempotency-key"};
  static const char tchars[] = "!#$%&'*+-.^_`|~";
  int hosts = 0, cls = 0, tes = 0;
  const struct httphead_field *cl = NULL, *te = NULL;
  char v[32];
  size_t len;
  for (size_t i = 0; i < n; i++) {
    if (f[i].name_len == 0) return 0;
    for (size_t k = 0; k < f[i].name_len; k++) {
      unsigned char c = (unsigned char)f[i].name[k];
      if (!(isalnum(c) && c < 0x80) && !(c && memchr(tchars, c, sizeof tchars - 1))) return 0;
    }
  }
  for (size_t w = 0; w < sizeof once / sizeof once[0]; w++) {
    int count = 0;
    for (size_t i = 0; i < n; i++)
      count += same_name(&f[i], once[w]);
    if (count > 1) return 0;
  }
  for (size_t i = 0; i < n; i++) {
    if (same_name(&f[i], "host")) hosts++;
    if (same_name(&f[i], "content-length")) cls++, cl = &f[i];
    if (same_name(&f[i], "transfer-encoding")) tes++, te = &f[i];
  }
  if (minor && !hosts) return 0;
  if (tes) {
    len = trimmed(te, v);
    if (len != 7) return 0;
    for (size_t k = 0; k < 7; k++)
      v[k] = (char)tolower((unsigned char)v[k]);
    if (strcmp(v, "chunked") != 0 || cls) return 0;
  }
  if (cls) {
    len = trimmed(cl, v);
    if (len == 0 || len > 18) return 0;
    for (size_t k = 0; k < len; k++)
      if (v[k] < '0' || v[k] > '9') return 0;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  struct httphead_field f[MAXF];
  char *bufs[MAXF];
  struct httphead_verdict v;
  size_t n = 0, off = 1;
  int minor, rc;
  if (size < 1) return 0;
  minor = data[0] & 1;
  while (off <= size && n < MAXF) {
    const unsigned char *line = data + off, *nl = memchr(line, '\n', size - off), *colon;
    size_t ll = nl ? (size_t)(nl - line) : size - off, nl_len, vl;
    colon = memchr(line, ':', ll);
    nl_len = colon ? (size_t)(colon - line) : ll;
    vl = colon ? ll - nl_len - 1 : 0;
    bufs[n] = malloc(nl_len + vl + 1); /* +1: never a zero-size block */
    if (!bufs[n]) break;
    memcpy(bufs[n], line, nl_len);
    if (vl) memcpy(bufs[n] + nl_len, colon + 1, vl);
    f[n] = (struct httphead_field){bufs[n], nl_len, bufs[n] + nl_len, vl};
    n++;
    if (!nl) break;
    off += ll + 1;
  }
  rc = httphead_check(f, n, minor, &v);
  FUZZ_CHECK(rc == 0 || rc == -1);
  FUZZ_CHECK((rc == 0) == reference_ok(f, n, minor));
  if (rc < 0) {
    FUZZ_CHECK(v.status == 400 || v.status == 501);
    FUZZ_CHECK(v.code && v.code[0]);
    FUZZ_CHECK(v.field != NULL);
    FUZZ_CHECK(v.message[0] != '\0' && FUZZ_TERMINATED(v.message));
    FUZZ_CHECK(FUZZ_TERMINATED(v.name));
  }
  for (size_t i = 0; i < n; i++)
    free(bufs[i]);
  return 0;
}
