/* jsonstrict — a strict RFC 8259 checker (see jsonstrict.h). One pass, an explicit stack (no
   recursion), duplicate keys found by sorting each object's key hashes when it closes. */
#include "jsonstrict.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One key of an open object: where its string starts and the hash of its unescaped bytes. */
struct key_ent {
  uint64_t hash;
  size_t start; /* offset of the opening quote */
};

/* One open object or array. */
struct frame {
  char kind;        /* '{' or '[' */
  size_t path_len;  /* length of the path of this container */
  long index;       /* arrays: the current element */
  size_t keys_mark; /* objects: first entry of this object in keys[] */
};

struct scan {
  const unsigned char *b;
  size_t len, i;
  struct jsonstrict_err *err;
  char path[96];
  size_t plen;
  struct frame st[JSONSTRICT_MAX_DEPTH];
  int depth;
  struct key_ent *keys;
  size_t nkeys, capkeys;
};

/* What a string scan produces: the hash of the unescaped bytes and the start of their text. */
struct str_out {
  uint64_t hash;
  char text[64]; /* the first unescaped characters (for paths), whole ones, NUL-terminated */
  size_t tlen;
  int full; /* a character did not fit: none is added after it */
};

const char *jsonstrict_message(enum jsonstrict_rc rc) {
  switch (rc) {
  case JSONSTRICT_OK:
    return "valid";
  case JSONSTRICT_SYNTAX:
    return "not valid JSON";
  case JSONSTRICT_TOO_DEEP:
    return "nested too deeply";
  case JSONSTRICT_DUPLICATE_KEY:
    return "duplicate key in an object";
  case JSONSTRICT_NUL:
    return "string contains U+0000";
  case JSONSTRICT_BAD_UTF8:
    return "string is not valid UTF-8";
  case JSONSTRICT_LONE_SURROGATE:
    return "string contains an unpaired UTF-16 surrogate escape";
  case JSONSTRICT_NO_MEMORY:
    return "out of memory";
  case JSONSTRICT_NUMBER:
    return "number out of range, or not one a double holds exactly";
  }
  return "invalid";
}

static int fail(struct scan *s, enum jsonstrict_rc rc, size_t at) {
  if (s->err) {
    s->err->rc = rc;
    s->err->offset = at;
    memcpy(s->err->path, s->path, s->plen);
    s->err->path[s->plen] = '\0';
  }
  return -1;
}

/* ---- UTF-8 ---- */

/* Length of the valid UTF-8 sequence at b[0..n), or 0 when invalid (RFC 3629 table). */
static size_t utf8_seq(const unsigned char *b, size_t n) {
  unsigned c = b[0];
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return n >= 2 && (b[1] & 0xC0) == 0x80 ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    if (n < 3 || b[1] < lo || b[1] > hi || (b[2] & 0xC0) != 0x80) return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    if (n < 4 || b[1] < lo || b[1] > hi || (b[2] & 0xC0) != 0x80 || (b[3] & 0xC0) != 0x80) return 0;
    return 4;
  }
  return 0;
}

int jsonstrict_utf8_valid(const char *buf, size_t len) {
  const unsigned char *b = (const unsigned char *)buf;
  size_t i = 0;
  while (i < len) {
    size_t k = utf8_seq(b + i, len - i);
    if (!k) return 0;
    i += k;
  }
  return 1;
}

char *jsonstrict_utf8_repair(const char *buf, size_t len, size_t *out_len) {
  const unsigned char *b = (const unsigned char *)buf;
  char *out;
  size_t i = 0, o = 0;
  if (len > (SIZE_MAX - 1) / 3) return NULL;
  out = malloc(len * 3 + 1); /* each bad byte becomes 3 bytes at most */
  if (!out) return NULL;
  while (i < len) {
    size_t k = utf8_seq(b + i, len - i);
    if (k) {
      memcpy(out + o, b + i, k);
      o += k;
      i += k;
    } else {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      i++;
    }
  }
  out[o] = '\0';
  *out_len = o;
  return out;
}

/* ---- strings ---- */

/* One character's n bytes: into the hash, and into the text when the whole character fits. */
static void out_bytes(struct str_out *o, const unsigned char *p, size_t n) {
  for (size_t k = 0; k < n; k++) {
    o->hash ^= p[k];
    o->hash *= 1099511628211ULL; /* FNV-1a */
  }
  if (o->full || o->tlen + n >= sizeof o->text) {
    o->full = 1;
    return;
  }
  memcpy(o->text + o->tlen, p, n);
  o->tlen += n;
}

static size_t utf8_encode(uint32_t cp, unsigned char *u) {
  if (cp < 0x80) {
    u[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    u[0] = (unsigned char)(0xC0 | (cp >> 6));
    u[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    u[0] = (unsigned char)(0xE0 | (cp >> 12));
    u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    u[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  u[0] = (unsigned char)(0xF0 | (cp >> 18));
  u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
  u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
  u[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

static int hex4(const unsigned char *p, uint32_t *out) {
  uint32_t v = 0;
  for (int k = 0; k < 4; k++) {
    unsigned c = p[k];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if (c >= 'a' && c <= 'f')
      v |= c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v |= c - 'A' + 10;
    else
      return -1;
  }
  *out = v;
  return 0;
}

/* The next code point of the string whose text starts at *pos (already checked valid); moves
 *pos. Returns -1 at the closing quote. */
static long next_cp(const unsigned char *b, size_t *pos) {
  size_t i = *pos;
  uint32_t cp = 0, lo = 0xDC00; /* the text was checked: hex4 below cannot fail, but say so */
  if (b[i] == '"') return -1;
  if (b[i] != '\\') {
    size_t k = utf8_seq(b + i, 4);
    cp = b[i];
    if (k == 2)
      cp = ((b[i] & 0x1Fu) << 6) | (b[i + 1] & 0x3Fu);
    else if (k == 3)
      cp = ((b[i] & 0x0Fu) << 12) | ((b[i + 1] & 0x3Fu) << 6) | (b[i + 2] & 0x3Fu);
    else if (k == 4)
      cp = ((b[i] & 0x07u) << 18) | ((b[i + 1] & 0x3Fu) << 12) | ((b[i + 2] & 0x3Fu) << 6) |
           (b[i + 3] & 0x3Fu);
    *pos = i + (k ? k : 1);
    return (long)cp;
  }
  switch (b[i + 1]) {
  case 'b':
    cp = '\b';
    break;
  case 'f':
    cp = '\f';
    break;
  case 'n':
    cp = '\n';
    break;
  case 'r':
    cp = '\r';
    break;
  case 't':
    cp = '\t';
    break;
  case 'u':
    hex4(b + i + 2, &cp);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      hex4(b + i + 8, &lo);
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      *pos = i + 12;
      return (long)cp;
    }
    *pos = i + 6;
    return (long)cp;
  default:
    cp = b[i + 1]; /* " \ / */
    break;
  }
  *pos = i + 2;
  return (long)cp;
}

/* Scan the string at s->i (on its opening quote) to just after its closing quote. 0 or -1. */
static int scan_string(struct scan *s, struct str_out *o) {
  const unsigned char *b = s->b;
  size_t i = s->i + 1;
  o->hash = 14695981039346656037ULL;
  o->tlen = 0;
  o->full = 0;
  for (;;) {
    unsigned c;
    if (i >= s->len) return fail(s, JSONSTRICT_SYNTAX, i);
    c = b[i];
    if (c == '"') break;
    if (c == '\\') {
      unsigned char u[4];
      uint32_t cp, lo;
      if (i + 1 >= s->len) return fail(s, JSONSTRICT_SYNTAX, i);
      switch (b[i + 1]) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't': {
        size_t p = i;
        cp = (uint32_t)next_cp(b, &p);
        u[0] = (unsigned char)cp;
        out_bytes(o, u, 1);
        i += 2;
        continue;
      }
      case 'u':
        if (i + 6 > s->len || hex4(b + i + 2, &cp) < 0) return fail(s, JSONSTRICT_SYNTAX, i);
        if (cp == 0) return fail(s, JSONSTRICT_NUL, i);
        if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(s, JSONSTRICT_LONE_SURROGATE, i);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (i + 12 > s->len || b[i + 6] != '\\' || b[i + 7] != 'u' || hex4(b + i + 8, &lo) < 0 ||
              lo < 0xDC00 || lo > 0xDFFF)
            return fail(s, JSONSTRICT_LONE_SURROGATE, i);
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          out_bytes(o, u, utf8_encode(cp, u));
          i += 12;
          continue;
        }
        out_bytes(o, u, utf8_encode(cp, u));
        i += 6;
        continue;
      default:
        return fail(s, JSONSTRICT_SYNTAX, i);
      }
    }
    if (c == 0) return fail(s, JSONSTRICT_NUL, i);
    if (c < 0x20) return fail(s, JSONSTRICT_SYNTAX, i); /* raw control characters */
    if (c < 0x80) {
      out_bytes(o, b + i, 1);
      i++;
    } else {
      size_t k = utf8_seq(b + i, s->len - i);
      if (!k) return fail(s, JSONSTRICT_BAD_UTF8, i);
      out_bytes(o, b + i, k);
      i += k;
    }
  }
  o->text[o->tlen] = '\0';
  s->i = i + 1;
  return 0;
}

/* ---- paths ---- */

static void path_set(struct scan *s, size_t len) {
  s->plen = len < s->plen ? len : s->plen;
}

static void path_append(struct scan *s, const char *seg) {
  int n = snprintf(s->path + s->plen, sizeof s->path - s->plen, "%s", seg);
  if (n < 0) return;
  s->plen += (size_t)n < sizeof s->path - s->plen ? (size_t)n : sizeof s->path - s->plen - 1;
}

static void path_key(struct scan *s, const char *key) {
  if (s->plen > 0) path_append(s, ".");
  path_append(s, key);
}

static void path_index(struct scan *s, long i) {
  char seg[24];
  snprintf(seg, sizeof seg, "[%ld]", i);
  path_append(s, seg);
}

/* ---- objects ---- */

static int key_push(struct scan *s, uint64_t hash, size_t start) {
  if (s->nkeys == s->capkeys) {
    size_t ncap = s->capkeys ? s->capkeys * 2 : 32;
    struct key_ent *n = realloc(s->keys, ncap * sizeof *n);
    if (!n) return fail(s, JSONSTRICT_NO_MEMORY, start);
    s->keys = n;
    s->capkeys = ncap;
  }
  s->keys[s->nkeys].hash = hash;
  s->keys[s->nkeys].start = start;
  s->nkeys++;
  return 0;
}

static int key_cmp(const void *a, const void *b) {
  const struct key_ent *x = a, *y = b;
  if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* 1 when the (valid) strings starting at a and b unescape to the same text. */
static int key_equal(const unsigned char *buf, size_t a, size_t b) {
  size_t i = a + 1, j = b + 1;
  for (;;) {
    long x = next_cp(buf, &i), y = next_cp(buf, &j);
    if (x != y) return 0;
    if (x < 0) return 1;
  }
}

/* The object whose keys start at mark closes: a duplicate key fails with its path. */
static int keys_check(struct scan *s, size_t mark) {
  size_t n = s->nkeys - mark;
  struct key_ent *k = s->keys + mark;
  size_t dup = SIZE_MAX;
  if (n > 1) {
    qsort(k, n, sizeof *k, key_cmp);
    for (size_t i = 1; i < n; i++)
      for (size_t j = i; j > 0 && k[j - 1].hash == k[i].hash; j--)
        if (key_equal(s->b, k[j - 1].start, k[i].start) && k[i].start < dup) dup = k[i].start;
  }
  s->nkeys = mark;
  if (dup != SIZE_MAX) {
    struct str_out o;
    size_t save = s->i;
    s->i = dup;
    scan_string(s, &o); /* already checked: only fills o */
    s->i = save;
    path_key(s, o.text);
    return fail(s, JSONSTRICT_DUPLICATE_KEY, dup);
  }
  return 0;
}

/* ---- the scan ---- */

static void skip_ws(struct scan *s) {
  while (s->i < s->len &&
         (s->b[s->i] == ' ' || s->b[s->i] == '\t' || s->b[s->i] == '\n' || s->b[s->i] == '\r'))
    s->i++;
}

static int is_digit(unsigned c) {
  return c >= '0' && c <= '9';
}

/* 0 when d, the double of the JSON number text num, is a whole number but the text has a fraction
   (1000.00000000000001 reads as 1000): it would be stored as another number. A fraction read as
   a fraction (0.1) is the nearest double, as everywhere, and so is an integer past 2^53
   (9007199254740993 reads as 9007199254740992): a double's own digits printed back read the same
   way, so what controld prints is accepted again. */
static int number_exact(const char *num, double d) {
  char digits[260];
  size_t nd = 0, point = 0;
  long exp = 0, pos;
  const char *p = num;
  if (d != floor(d)) return 1;
  if (*p == '-') p++;
  for (; *p && *p != 'e' && *p != 'E'; p++) {
    if (*p == '.')
      point = nd;
    else
      digits[nd++] = *p;
  }
  if (!strchr(num, '.')) point = nd;
  if (*p) exp = strtol(p + 1, NULL, 10); /* bounded by the text's length */
  if (exp > 300 || exp < -300) return 1; /* far out: the finite check judged it */
  pos = (long)point + exp;               /* the digits from pos on are the fraction */
  for (long k = pos < 0 ? 0 : pos; k < (long)nd; k++)
    if (digits[k] != '0') return 0;
  return 1;
}

static int scan_number(struct scan *s) {
  const unsigned char *b = s->b;
  size_t i = s->i, start = s->i;
  if (i < s->len && b[i] == '-') i++;
  if (i >= s->len) return fail(s, JSONSTRICT_SYNTAX, i);
  if (b[i] == '0')
    i++;
  else if (b[i] >= '1' && b[i] <= '9')
    while (i < s->len && is_digit(b[i]))
      i++;
  else
    return fail(s, JSONSTRICT_SYNTAX, start);
  if (i < s->len && b[i] == '.') {
    i++;
    if (i >= s->len || !is_digit(b[i])) return fail(s, JSONSTRICT_SYNTAX, i);
    while (i < s->len && is_digit(b[i]))
      i++;
  }
  if (i < s->len && (b[i] == 'e' || b[i] == 'E')) {
    i++;
    if (i < s->len && (b[i] == '+' || b[i] == '-')) i++;
    if (i >= s->len || !is_digit(b[i])) return fail(s, JSONSTRICT_SYNTAX, i);
    while (i < s->len && is_digit(b[i]))
      i++;
  }
  /* a parser reading it as a double must get a finite value, or it could read it two ways; and a
     fraction must not read as a whole number (number_exact) */
  {
    char num[257];
    double d;
    if (i - start >= sizeof num) return fail(s, JSONSTRICT_NUMBER, start);
    memcpy(num, b + start, i - start);
    num[i - start] = '\0';
    d = strtod(num, NULL);
    if (!isfinite(d) || !number_exact(num, d)) return fail(s, JSONSTRICT_NUMBER, start);
  }
  s->i = i;
  return 0;
}

static int scan_literal(struct scan *s, const char *word) {
  size_t n = strlen(word);
  if (s->len - s->i < n || memcmp(s->b + s->i, word, n) != 0)
    return fail(s, JSONSTRICT_SYNTAX, s->i);
  s->i += n;
  return 0;
}

static int push(struct scan *s, char kind) {
  struct frame *f;
  if (s->depth >= JSONSTRICT_MAX_DEPTH) return fail(s, JSONSTRICT_TOO_DEEP, s->i);
  f = &s->st[s->depth++];
  f->kind = kind;
  f->path_len = s->plen;
  f->index = 0;
  f->keys_mark = s->nkeys;
  s->i++; /* the bracket */
  return 0;
}

/* At an object's key (after '{' or ','): scan "key" ':' and set the path. 0 or -1. */
static int scan_key(struct scan *s) {
  struct frame *f = &s->st[s->depth - 1];
  struct str_out o;
  size_t start;
  skip_ws(s);
  if (s->i >= s->len || s->b[s->i] != '"') return fail(s, JSONSTRICT_SYNTAX, s->i);
  start = s->i;
  path_set(s, f->path_len);
  if (scan_string(s, &o) < 0) return -1;
  if (key_push(s, o.hash, start) < 0) return -1;
  skip_ws(s);
  if (s->i >= s->len || s->b[s->i] != ':') return fail(s, JSONSTRICT_SYNTAX, s->i);
  s->i++;
  path_key(s, o.text);
  return 0;
}

static int run(struct scan *s) {
  for (;;) {
    /* a value */
    struct str_out o;
    skip_ws(s);
    if (s->i >= s->len) return fail(s, JSONSTRICT_SYNTAX, s->i);
    switch (s->b[s->i]) {
    case '{':
      if (push(s, '{') < 0) return -1;
      skip_ws(s);
      if (s->i < s->len && s->b[s->i] == '}') {
        s->i++;
        s->depth--;
        break; /* to "after a value" */
      }
      if (scan_key(s) < 0) return -1;
      continue; /* its first value */
    case '[':
      if (push(s, '[') < 0) return -1;
      skip_ws(s);
      if (s->i < s->len && s->b[s->i] == ']') {
        s->i++;
        s->depth--;
        break;
      }
      path_index(s, 0);
      continue;
    case '"':
      if (scan_string(s, &o) < 0) return -1;
      break;
    case 't':
      if (scan_literal(s, "true") < 0) return -1;
      break;
    case 'f':
      if (scan_literal(s, "false") < 0) return -1;
      break;
    case 'n':
      if (scan_literal(s, "null") < 0) return -1;
      break;
    default:
      if (scan_number(s) < 0) return -1;
      break;
    }
    /* after a value: close containers until one takes another element */
    for (;;) {
      struct frame *f;
      skip_ws(s);
      if (s->depth == 0) {
        if (s->i != s->len) return fail(s, JSONSTRICT_SYNTAX, s->i);
        return 0;
      }
      f = &s->st[s->depth - 1];
      if (s->i >= s->len) return fail(s, JSONSTRICT_SYNTAX, s->i);
      if (s->b[s->i] == ',') {
        s->i++;
        if (f->kind == '{') {
          if (scan_key(s) < 0) return -1;
        } else {
          path_set(s, f->path_len);
          path_index(s, ++f->index);
        }
        break; /* the next value */
      }
      if (s->b[s->i] != (f->kind == '{' ? '}' : ']')) return fail(s, JSONSTRICT_SYNTAX, s->i);
      path_set(s, f->path_len);
      if (f->kind == '{' && keys_check(s, f->keys_mark) < 0) return -1;
      s->i++;
      s->depth--;
    }
  }
}

int jsonstrict_check(const char *buf, size_t len, struct jsonstrict_err *err) {
  struct scan s;
  int rc;
  memset(&s, 0, sizeof s);
  s.b = (const unsigned char *)buf;
  s.len = buf ? len : 0;
  s.err = err;
  if (err) memset(err, 0, sizeof *err);
  rc = run(&s);
  free(s.keys);
  return rc;
}
