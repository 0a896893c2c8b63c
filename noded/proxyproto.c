/* proxyproto — the PROXY protocol header, v1 and v2, read strictly in pieces (proxyproto.h). */
#include "proxyproto.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

enum { S_SIG = 0, S_V1, S_V2_HEAD, S_V2_ADDR, S_V2_REST, S_DONE, S_FAIL };

static const unsigned char v1_sig[6] = {'P', 'R', 'O', 'X', 'Y', ' '};
static const unsigned char v2_sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                         0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

void pp_init(struct pp *p) {
  memset(p, 0, sizeof *p);
}

static enum pp_status fail(struct pp *p, enum pp_status st, const char *why) {
  p->state = S_FAIL;
  p->why = why;
  p->err = st; /* returned again by a later feed */
  return st;
}

/* A decimal port: 1-5 digits, no leading zero but "0" itself, at most 65535. 0 or -1. */
static int parse_port(const char *s, size_t n, uint16_t *out) {
  unsigned v = 0;
  if (n == 0 || n > 5 || (n > 1 && s[0] == '0')) return -1;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (unsigned)(s[i] - '0');
  }
  if (v > 65535) return -1;
  *out = (uint16_t)v;
  return 0;
}

/* An address of family af in text: only the characters of its form, read by inet_pton (which
 * takes neither leading zeros in IPv4 nor anything around the address). Copied to out. */
static int parse_addr(int af, const char *s, size_t n, char *out, size_t cap) {
  unsigned char bin[16];
  char tmp[64];
  if (n == 0 || n >= sizeof tmp || n >= cap) return -1;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    int ok = (ch >= '0' && ch <= '9') || ch == '.';
    if (af == AF_INET6)
      ok = ok || ch == ':' || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
    if (!ok) return -1;
  }
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  if (inet_pton(af, tmp, bin) != 1) return -1;
  /* the canonical text (so the address reaches logs and headers in one form) */
  if (!inet_ntop(af, bin, out, (socklen_t)cap)) return -1;
  return 0;
}

/* The v1 line in p->buf[0, p->n), ending in CRLF: "PROXY TCP4|TCP6 src dst sport dport" or
 * "PROXY UNKNOWN[ anything]". */
static enum pp_status v1_line(struct pp *p) {
  const char *s = (const char *)p->buf + 6, *end = (const char *)p->buf + p->n - 2;
  const char *f[4];
  size_t fl[4];
  int af, k = 0;
  struct pp_result *r = &p->res;
  if ((size_t)(end - s) >= 7 && memcmp(s, "UNKNOWN", 7) == 0 && (s + 7 == end || s[7] == ' ')) {
    r->has_addr = 0;
    r->family = AF_UNSPEC;
    return PP_DONE;
  }
  if ((size_t)(end - s) >= 5 && memcmp(s, "TCP4 ", 5) == 0)
    af = AF_INET;
  else if ((size_t)(end - s) >= 5 && memcmp(s, "TCP6 ", 5) == 0)
    af = AF_INET6;
  else
    return fail(p, PP_BAD, "v1: protocol is not TCP4, TCP6 or UNKNOWN");
  s += 5;
  /* exactly four fields, each separated by one space */
  while (k < 4) {
    const char *sp = memchr(s, ' ', (size_t)(end - s));
    const char *fe = sp ? sp : end;
    f[k] = s;
    fl[k] = (size_t)(fe - s);
    k++;
    if (!sp) break;
    s = sp + 1;
    if (k == 4) return fail(p, PP_BAD, "v1: more than four fields after the protocol");
  }
  if (k != 4) return fail(p, PP_BAD, "v1: fewer than four fields after the protocol");
  if (parse_addr(af, f[0], fl[0], r->src, sizeof r->src) < 0 ||
      parse_addr(af, f[1], fl[1], r->dst, sizeof r->dst) < 0)
    return fail(p, PP_BAD, "v1: an address is not one of the protocol's family");
  if (parse_port(f[2], fl[2], &r->sport) < 0 || parse_port(f[3], fl[3], &r->dport) < 0)
    return fail(p, PP_BAD, "v1: a port is not a decimal in [0, 65535] without leading zeros");
  r->has_addr = 1;
  r->family = af;
  return PP_DONE;
}

/* v2: the 16 fixed bytes are in buf: check version, command, family and length. */
static enum pp_status v2_head(struct pp *p) {
  unsigned ver_cmd = p->buf[12], fam = p->buf[13];
  p->v2_len = ((size_t)p->buf[14] << 8) | p->buf[15];
  if ((ver_cmd >> 4) != 2) return fail(p, PP_BAD, "v2: version is not 2");
  if ((ver_cmd & 0xF) > 1) return fail(p, PP_BAD, "v2: command is neither LOCAL nor PROXY");
  if (p->v2_len > PP_V2_MAX_LEN) return fail(p, PP_BAD, "v2: length above the bound");
  p->res.has_addr = 0;
  p->res.family = AF_UNSPEC;
  if ((ver_cmd & 0xF) == 0) { /* LOCAL: the proxy's own connection; the block is ignored */
    p->v2_skip = 1;
    p->v2_addr = 0;
  } else {
    switch (fam) {
    case 0x00: /* UNSPEC: the addresses are unknown; the block is ignored */
      p->v2_skip = 1;
      p->v2_addr = 0;
      break;
    case 0x11: /* TCP over IPv4 */
      p->v2_addr = 12;
      break;
    case 0x21: /* TCP over IPv6 */
      p->v2_addr = 36;
      break;
    case 0x31: /* a Unix stream socket: two 108-byte paths */
      p->v2_addr = 216;
      break;
    default:
      return fail(p, PP_BAD, "v2: family and transport are not UNSPEC, TCP4, TCP6 or UNIX stream");
    }
    if (p->v2_len < p->v2_addr) return fail(p, PP_BAD, "v2: length shorter than the addresses");
  }
  p->left = p->v2_len - p->v2_addr;
  return PP_MORE;
}

/* v2: the address block is in buf after the 16 fixed bytes. */
static enum pp_status v2_addr(struct pp *p) {
  const unsigned char *a = p->buf + 16;
  struct pp_result *r = &p->res;
  int af = p->v2_addr == 12 ? AF_INET : p->v2_addr == 36 ? AF_INET6 : AF_UNSPEC;
  size_t al = af == AF_INET ? 4 : 16;
  if (af == AF_UNSPEC) return PP_MORE; /* Unix paths: the connection's own address is kept */
  if (!inet_ntop(af, a, r->src, sizeof r->src) || !inet_ntop(af, a + al, r->dst, sizeof r->dst))
    return fail(p, PP_BAD, "v2: address");
  r->sport = (uint16_t)((a[2 * al] << 8) | a[2 * al + 1]);
  r->dport = (uint16_t)((a[2 * al + 2] << 8) | a[2 * al + 3]);
  r->has_addr = 1;
  r->family = af;
  return PP_MORE;
}

/* v2: take up to n bytes of the rest (TLVs, or skipped bytes); *took says how many. */
static enum pp_status v2_rest(struct pp *p, const unsigned char *d, size_t n, size_t *took) {
  size_t i = 0;
  if (n > p->left) n = p->left;
  if (p->v2_skip) {
    i = n;
  } else {
    while (i < n) {
      if (p->tlv_left) {
        size_t k = n - i < p->tlv_left ? n - i : p->tlv_left;
        p->tlv_left -= k;
        i += k;
        continue;
      }
      p->tlv_head[p->tlv_n++] = d[i++];
      if (p->tlv_n == 3) {
        p->tlv_left = ((size_t)p->tlv_head[1] << 8) | p->tlv_head[2];
        p->tlv_n = 0;
        /* the value must end within the header */
        if (p->tlv_left > p->left - i) {
          *took = i;
          return fail(p, PP_BAD, "v2: a TLV runs past the header's length");
        }
      }
    }
  }
  p->left -= i;
  *took = i;
  if (p->left == 0 && (p->tlv_n || p->tlv_left))
    return fail(p, PP_BAD, "v2: a TLV runs past the header's length");
  return p->left == 0 ? PP_DONE : PP_MORE;
}

enum pp_status pp_feed(struct pp *p, const unsigned char *data, size_t len, size_t *used,
                       struct pp_result *out) {
  size_t i = 0;
  enum pp_status st = PP_MORE;
  *used = 0;
  if (p->state == S_FAIL) return (enum pp_status)p->err;
  if (p->state == S_DONE) {
    *out = p->res;
    return PP_DONE;
  }
  while (i < len && st == PP_MORE) {
    unsigned char ch = data[i];
    switch (p->state) {
    case S_SIG:
      p->buf[p->n++] = ch;
      i++;
      if (p->buf[0] == 'P') {
        if (ch != v1_sig[p->n - 1]) {
          st = fail(p, PP_NOT_PROXY, "no PROXY header (v1 or v2 signature)");
          break;
        }
        if (p->n == sizeof v1_sig) p->state = S_V1;
      } else {
        if (ch != v2_sig[p->n - 1]) {
          st = fail(p, PP_NOT_PROXY, "no PROXY header (v1 or v2 signature)");
          break;
        }
        if (p->n == sizeof v2_sig) p->state = S_V2_HEAD;
      }
      break;
    case S_V1:
      if (ch == '\0') {
        st = fail(p, PP_BAD, "v1: NUL byte");
        break;
      }
      if (p->buf[p->n - 1] == '\r' && ch != '\n') {
        st = fail(p, PP_BAD, "v1: CR not followed by LF");
        break;
      }
      if (ch == '\n' && p->buf[p->n - 1] != '\r') {
        st = fail(p, PP_BAD, "v1: bare LF");
        break;
      }
      p->buf[p->n++] = ch;
      i++;
      if (ch == '\n') {
        st = v1_line(p);
        if (st == PP_DONE) p->res.version = 1;
      } else if (p->n >= PP_V1_MAX) {
        st = fail(p, PP_BAD, "v1: no CRLF within 107 bytes");
      }
      break;
    case S_V2_HEAD:
      p->buf[p->n++] = ch;
      i++;
      if (p->n == 16) {
        st = v2_head(p);
        if (st == PP_MORE) p->state = p->v2_addr ? S_V2_ADDR : S_V2_REST;
        if (st == PP_MORE && p->state == S_V2_REST && p->left == 0) st = PP_DONE;
      }
      break;
    case S_V2_ADDR:
      p->buf[p->n++] = ch;
      i++;
      if (p->n == 16 + p->v2_addr) {
        st = v2_addr(p);
        if (st == PP_MORE) p->state = S_V2_REST;
        if (st == PP_MORE && p->left == 0) st = PP_DONE;
      }
      break;
    case S_V2_REST: {
      size_t took = 0;
      st = v2_rest(p, data + i, len - i, &took);
      i += took;
      break;
    }
    default:
      st = fail(p, PP_BAD, "internal state");
      break;
    }
  }
  p->total += i;
  *used = i;
  if (st == PP_DONE) {
    if (p->res.version != 1) p->res.version = 2;
    p->res.len = p->total;
    p->state = S_DONE;
    *out = p->res;
  }
  return st;
}
