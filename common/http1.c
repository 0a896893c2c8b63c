/* http1 — HTTP/1.x head parsing and body framing. */
#include "http1.h"

#include <arpa/inet.h>
#include <string.h>

size_t http1_head_end(const char *buf, size_t len, size_t *scan) {
  size_t i = *scan;
  /* look for "\n\r\n" or "\n\n" */
  for (; i < len; i++) {
    if (buf[i] != '\n') continue;
    if (i + 1 >= len) break; /* not enough bytes yet to decide about this newline */
    if (buf[i + 1] == '\n') return i + 2;
    if (buf[i + 1] == '\r') {
      if (i + 2 >= len) break;
      if (buf[i + 2] == '\n') return i + 3;
    }
  }
  *scan = i;
  return 0;
}

static int is_tchar(unsigned char c) {
  if (c >= 'a' && c <= 'z') return 1;
  if (c >= 'A' && c <= 'Z') return 1;
  if (c >= '0' && c <= '9') return 1;
  return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

int http1_token(const char *s, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (!is_tchar((unsigned char)s[i])) return 0;
  return 1;
}

/* Next line [*pos, end): sets *ls and *ll (without CR LF); returns 0, or -1 when no newline. */
static int next_line(const char *buf, size_t len, size_t *pos, const char **ls, size_t *ll) {
  const char *s = buf + *pos;
  const char *nl = memchr(s, '\n', len - *pos);
  size_t n;
  if (!nl) return -1;
  n = (size_t)(nl - s);
  *pos += n + 1;
  if (n > 0 && s[n - 1] == '\r') n--;
  *ls = s;
  *ll = n;
  return 0;
}

static int parse_version(const char *p, size_t n, int *minor) {
  if (n != 8 || memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9') return -1;
  *minor = p[7] - '0';
  return 0;
}

static int parse_headers(const char *buf, size_t len, size_t pos, struct http1_msg *m) {
  const char *ls;
  size_t ll;
  m->n_headers = 0;
  for (;;) {
    size_t i = 0, vs, ve;
    if (next_line(buf, len, &pos, &ls, &ll) < 0) return HTTP1_BAD;
    if (ll == 0) return HTTP1_OK;
    if (m->n_headers >= HTTP1_MAX_HEADERS) return HTTP1_TOO_MANY_HEADERS;
    while (i < ll && is_tchar((unsigned char)ls[i]))
      i++;
    if (i == 0 || i >= ll || ls[i] != ':') return HTTP1_BAD; /* also rejects obs-fold */
    vs = i + 1;
    while (vs < ll && (ls[vs] == ' ' || ls[vs] == '\t'))
      vs++;
    ve = ll;
    while (ve > vs && (ls[ve - 1] == ' ' || ls[ve - 1] == '\t'))
      ve--;
    for (size_t k = vs; k < ve; k++) {
      unsigned char c = (unsigned char)ls[k];
      if ((c < 0x20 && c != '\t') || c == 0x7f) return HTTP1_BAD;
    }
    m->headers[m->n_headers].name = ls;
    m->headers[m->n_headers].name_len = (unsigned)i;
    m->headers[m->n_headers].value = ls + vs;
    m->headers[m->n_headers].value_len = (unsigned)(ve - vs);
    m->n_headers++;
  }
}

int http1_parse_request(const char *buf, size_t len, struct http1_msg *m) {
  const char *ls, *sp1, *sp2;
  size_t ll, pos = 0;
  memset(m, 0, offsetof(struct http1_msg, headers));
  /* tolerate empty lines before the request line */
  do {
    if (next_line(buf, len, &pos, &ls, &ll) < 0) return HTTP1_BAD;
  } while (ll == 0 && pos < len);
  sp1 = memchr(ls, ' ', ll);
  if (!sp1) return HTTP1_BAD;
  sp2 = memchr(sp1 + 1, ' ', ll - (size_t)(sp1 + 1 - ls));
  if (!sp2) return HTTP1_BAD;
  m->method = ls;
  m->method_len = (unsigned)(sp1 - ls);
  m->target = sp1 + 1;
  m->target_len = (unsigned)(sp2 - sp1 - 1);
  if (m->method_len == 0 || m->method_len > 32 || m->target_len == 0) return HTTP1_BAD;
  for (unsigned i = 0; i < m->method_len; i++)
    if (!is_tchar((unsigned char)m->method[i])) return HTTP1_BAD;
  for (unsigned i = 0; i < m->target_len; i++) {
    unsigned char c = (unsigned char)m->target[i];
    if (c <= 0x20 || c >= 0x7f) return HTTP1_BAD; /* VCHAR (ASCII) only, RFC 9112 §3.2 */
  }
  if (parse_version(sp2 + 1, ll - (size_t)(sp2 + 1 - ls), &m->minor) < 0) return HTTP1_BAD;
  return parse_headers(buf, len, pos, m);
}

int http1_parse_response(const char *buf, size_t len, struct http1_msg *m) {
  const char *ls;
  size_t ll, pos = 0;
  memset(m, 0, offsetof(struct http1_msg, headers));
  if (next_line(buf, len, &pos, &ls, &ll) < 0) return HTTP1_BAD;
  if (ll < 12 || parse_version(ls, 8, &m->minor) < 0 || ls[8] != ' ') return HTTP1_BAD;
  for (int i = 9; i < 12; i++)
    if (ls[i] < '0' || ls[i] > '9') return HTTP1_BAD;
  m->status = (ls[9] - '0') * 100 + (ls[10] - '0') * 10 + (ls[11] - '0');
  if (m->status < 100) return HTTP1_BAD;
  if (ll > 12 && ls[12] != ' ') return HTTP1_BAD;
  m->reason = ll > 13 ? ls + 13 : ls + ll;
  m->reason_len = ll > 13 ? (unsigned)(ll - 13) : 0;
  for (unsigned i = 0; i < m->reason_len; i++) {
    unsigned char c = (unsigned char)m->reason[i];
    if ((c < 0x20 && c != '\t') || c == 0x7f) return HTTP1_BAD;
  }
  return parse_headers(buf, len, pos, m);
}

int http1_lc(int c) {
  return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

int http1_ieq(const char *a, size_t an, const char *b) {
  size_t bn = strlen(b);
  if (an != bn) return 0;
  for (size_t i = 0; i < an; i++)
    if (http1_lc((unsigned char)a[i]) != http1_lc((unsigned char)b[i])) return 0;
  return 1;
}

int http1_name_is(const struct http1_header *h, const char *name) {
  return http1_ieq(h->name, h->name_len, name);
}

int http1_list_has(const char *v, unsigned len, const char *tok) {
  unsigned i = 0;
  while (i < len) {
    unsigned s, e;
    while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
      i++;
    s = i;
    while (i < len && v[i] != ',')
      i++;
    e = i;
    while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
      e--;
    if (e > s && http1_ieq(v + s, e - s, tok)) return 1;
  }
  return 0;
}

int http1_parse_length(const char *v, unsigned len, uint64_t *out) {
  uint64_t n = 0;
  if (len == 0 || len > 18) return -1;
  for (unsigned i = 0; i < len; i++) {
    if (v[i] < '0' || v[i] > '9') return -1;
    n = n * 10 + (uint64_t)(v[i] - '0');
  }
  *out = n;
  return 0;
}

/* Chunked parser states (RFC 9112 §7.1). Lines end only at CRLF; a chunk extension is
 * BWS ";" BWS token [BWS "=" BWS (token / quoted-string)], repeated. */
enum {
  CS_SIZE = 0,    /* hex digits of chunk-size */
  CS_SIZE_WS,     /* BWS after the size or an extension: ';' or CR next */
  CS_EXT_NAME0,   /* after ';': BWS, then the first char of the name */
  CS_EXT_NAME,    /* token chars of the name */
  CS_EXT_NAME_WS, /* BWS after a name: '=', ';' or CR next */
  CS_EXT_VAL0,    /* after '=': BWS, then a token or a quoted-string */
  CS_EXT_VAL,     /* token chars of the value */
  CS_EXT_QUOTED,  /* inside a quoted-string */
  CS_EXT_QPAIR,   /* after a backslash in a quoted-string */
  CS_SIZE_LF,     /* CR seen at the end of the size line: LF next */
  CS_DATA,        /* chunk data */
  CS_DATA_CR,     /* CRLF after the data */
  CS_DATA_LF,
  CS_TRAILER_START, /* start of a trailer line or the final CRLF */
  CS_TRAILER_NAME,
  CS_TRAILER_VALUE,
  CS_TRAILER_LF, /* CR seen at the end of a trailer line */
  CS_END_LF      /* CR of the final empty line seen */
};

/* Chunk extensions and trailers together are limited to 16 KiB per body: they carry nothing the
 * proxy uses and are dropped, so the limit only bounds the work a peer can cause. */
#define HTTP1_MAX_TRAILER 16384

int http1_response_framing(const struct http1_msg *m, int is_head, int *kind, uint64_t *len) {
  int n_cl = 0, n_te = 0, bad = 0, te = HTTP1_TE_CHUNKED;
  uint64_t cl = 0;
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    if (http1_name_is(h, "transfer-encoding")) {
      if (n_te++ || http1_te_classify(h->value, h->value_len) != HTTP1_TE_CHUNKED)
        te = HTTP1_TE_BAD;
    } else if (http1_name_is(h, "content-length")) {
      if (n_cl++ || http1_parse_length(h->value, h->value_len, &cl) < 0) bad = 1;
    }
  }
  *len = cl;
  if (m->status < 200 || is_head || m->status == 204 || m->status == 304) {
    /* no body follows: Transfer-Encoding means nothing here (the edge drops it as hop-by-hop) */
    *kind = HTTP1_BODY_NONE;
  } else if (n_te) {
    if (te != HTTP1_TE_CHUNKED || n_cl) bad = 1;
    *kind = HTTP1_BODY_CHUNKED;
  } else if (n_cl) {
    *kind = HTTP1_BODY_LENGTH;
  } else {
    *kind = HTTP1_BODY_CLOSE;
  }
  return bad ? -1 : 0;
}

void http1_body_init(struct http1_body *b, enum http1_body_kind kind, uint64_t length) {
  memset(b, 0, sizeof *b);
  b->kind = kind;
  b->remaining = length;
  b->done = kind == HTTP1_BODY_NONE || (kind == HTTP1_BODY_LENGTH && length == 0);
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = http1_lc(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* qdtext / quoted-pair octets: HTAB, SP, VCHAR except '"' and '\', obs-text. */
static int is_qdtext(unsigned char c) {
  return c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5b) ||
         (c >= 0x5d && c <= 0x7e) || c >= 0x80;
}

/* field-value octets of a trailer line: VCHAR, SP, HTAB, obs-text (no CTLs, no bare CR/LF). */
static int is_field_vchar(unsigned char c) {
  return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* The size line after the digits (RFC 9112 §7.1.1: BWS ";" BWS token [BWS "=" BWS (token /
   quoted-string)], repeated, then CRLF) as a table: a byte's class and the state it leaves,
   then the next state for each class. The classes are disjoint: '=', ';' and '"' are no tchar. */
enum { EC_TCHAR, EC_SEMI, EC_EQ, EC_WS, EC_CR, EC_DQUOTE, EC_OTHER, EC_N };
#define CS_BAD 0xff

static int ext_class(unsigned char c) {
  if (is_tchar(c)) return EC_TCHAR;
  switch (c) {
  case ';':
    return EC_SEMI;
  case '=':
    return EC_EQ;
  case ' ':
  case '\t':
    return EC_WS;
  case '\r':
    return EC_CR;
  case '"':
    return EC_DQUOTE;
  default:
    return EC_OTHER;
  }
}

/* clang-format off */
#define X CS_BAD
#define R(st) [(st) - CS_SIZE_WS]
static const unsigned char ext_next[CS_EXT_VAL - CS_SIZE_WS + 1][EC_N] = {
  /*                  tchar         ';'           '='          SP HTAB         CR          '"'            other */
  R(CS_SIZE_WS)     = {X,           CS_EXT_NAME0, X,           CS_SIZE_WS,     CS_SIZE_LF, X,             X},
  R(CS_EXT_NAME0)   = {CS_EXT_NAME, X,            X,           CS_EXT_NAME0,   X,          X,             X},
  R(CS_EXT_NAME)    = {CS_EXT_NAME, CS_EXT_NAME0, CS_EXT_VAL0, CS_EXT_NAME_WS, CS_SIZE_LF, X,             X},
  R(CS_EXT_NAME_WS) = {X,           CS_EXT_NAME0, CS_EXT_VAL0, CS_EXT_NAME_WS, CS_SIZE_LF, X,             X},
  R(CS_EXT_VAL0)    = {CS_EXT_VAL,  X,            X,           CS_EXT_VAL0,    X,          CS_EXT_QUOTED, X},
  R(CS_EXT_VAL)     = {CS_EXT_VAL,  CS_EXT_NAME0, X,           CS_SIZE_WS,     CS_SIZE_LF, X,             X},
};
#undef R
#undef X
/* clang-format on */

static long feed_chunked(struct http1_body *b, char *p, size_t n, size_t *out_len, int decode) {
  size_t i = 0, w = 0;
  while (i < n && !b->done) {
    unsigned char c = (unsigned char)p[i];
    int st = b->cstate;
    if (st == CS_DATA) {
      size_t k = n - i;
      if (k > b->remaining) k = (size_t)b->remaining;
      if (decode) {
        if (w != i) memmove(p + w, p + i, k);
        w += k;
        i += k;
      } else {
        i += k;
        w = i;
      }
      b->remaining -= k;
      if (b->remaining == 0) b->cstate = CS_DATA_CR;
      continue;
    }
    /* the allowance is for extensions and trailers: a size line's own digits and CRLF (of a
       body of any number of chunks) and the CRLF after the data are not counted */
    if (st != CS_SIZE && st != CS_DATA_CR && st != CS_DATA_LF && !(st == CS_SIZE_LF && c == '\n') &&
        ++b->trailer_bytes > HTTP1_MAX_TRAILER)
      goto bad;
    switch (st) {
    case CS_SIZE: {
      int h = hexval(c);
      if (h >= 0) {
        /* at most 16 digits (leading zeros included) and a size below 2^60 */
        if (b->digits >= 16 || (b->remaining >> 56)) goto bad;
        b->remaining = b->remaining * 16 + (uint64_t)h;
        b->digits++;
        break;
      }
      if (b->digits == 0) goto bad;
      st = CS_SIZE_WS; /* after the digits, the size line goes on as after BWS */
    }
      /* fall through */
    case CS_SIZE_WS:
    case CS_EXT_NAME0:
    case CS_EXT_NAME:
    case CS_EXT_NAME_WS:
    case CS_EXT_VAL0:
    case CS_EXT_VAL: {
      unsigned char next = ext_next[st - CS_SIZE_WS][ext_class(c)];
      if (next == CS_BAD) goto bad;
      b->cstate = next;
      break;
    }
    case CS_EXT_QUOTED:
      if (c == '"')
        b->cstate = CS_SIZE_WS;
      else if (c == '\\')
        b->cstate = CS_EXT_QPAIR;
      else if (!is_qdtext(c))
        goto bad;
      break;
    case CS_EXT_QPAIR:
      if (!is_qdtext(c) && c != '"' && c != '\\') goto bad;
      b->cstate = CS_EXT_QUOTED;
      break;
    case CS_SIZE_LF:
      if (c != '\n') goto bad;
      b->digits = 0;
      b->cstate = b->remaining == 0 ? CS_TRAILER_START : CS_DATA;
      break;
    case CS_DATA_CR:
      if (c != '\r') goto bad;
      b->cstate = CS_DATA_LF;
      break;
    case CS_DATA_LF:
      if (c != '\n') goto bad;
      b->cstate = CS_SIZE;
      break;
    case CS_TRAILER_START:
      if (c == '\r')
        b->cstate = CS_END_LF;
      else if (is_tchar(c))
        b->cstate = CS_TRAILER_NAME;
      else
        goto bad; /* also obs-fold */
      break;
    case CS_TRAILER_NAME:
      if (c == ':')
        b->cstate = CS_TRAILER_VALUE;
      else if (!is_tchar(c))
        goto bad;
      break;
    case CS_TRAILER_VALUE:
      if (c == '\r')
        b->cstate = CS_TRAILER_LF;
      else if (!is_field_vchar(c))
        goto bad;
      break;
    case CS_TRAILER_LF:
      if (c != '\n') goto bad;
      b->cstate = CS_TRAILER_START;
      break;
    case CS_END_LF:
      if (c != '\n') goto bad;
      b->done = 1;
      break;
    default:
      goto bad;
    }
    i++;
    if (!decode) w = i;
  }
  *out_len = w;
  return (long)i;
bad:
  *out_len = w; /* the data before the malformed byte is still the body's */
  return -1;
}

size_t http1_chunk_header(char *dst, size_t n) {
  static const char hex[] = "0123456789abcdef";
  char tmp[20];
  size_t k = 0, len = 0;
  do {
    tmp[k++] = hex[n & 15];
    n >>= 4;
  } while (n);
  while (k)
    dst[len++] = tmp[--k];
  dst[len++] = '\r';
  dst[len++] = '\n';
  return len;
}

long http1_body_feed(struct http1_body *b, char *p, size_t n, size_t *out_len, int decode) {
  size_t k;
  *out_len = 0;
  if (b->done) return 0;
  switch (b->kind) {
  case HTTP1_BODY_NONE:
    b->done = 1;
    return 0;
  case HTTP1_BODY_LENGTH:
    k = n < b->remaining ? n : (size_t)b->remaining;
    b->remaining -= k;
    if (b->remaining == 0) b->done = 1;
    *out_len = k;
    return (long)k;
  case HTTP1_BODY_CLOSE:
    *out_len = n;
    return (long)n;
  case HTTP1_BODY_CHUNKED:
    return feed_chunked(b, p, n, out_len, decode);
  }
  return -1;
}

size_t http1_chunk_encode(char *dst, const char *data, size_t n) {
  size_t hl = http1_chunk_header(dst, n);
  memcpy(dst + hl, data, n);
  memcpy(dst + hl + n, "\r\n", 2);
  return hl + n + 2;
}

int http1_te_classify(const char *v, unsigned len) {
  unsigned i = 0;
  int n = 0, n_chunked = 0;
  if (http1_ieq(v, len, "chunked")) return HTTP1_TE_CHUNKED;
  /* 1#transfer-coding, codings without parameters: anything else is malformed */
  for (;;) {
    unsigned s;
    while (i < len && (v[i] == ' ' || v[i] == '\t'))
      i++;
    s = i;
    while (i < len && is_tchar((unsigned char)v[i]))
      i++;
    if (i == s) return HTTP1_TE_BAD;
    n++;
    if (http1_ieq(v + s, i - s, "chunked")) n_chunked++;
    while (i < len && (v[i] == ' ' || v[i] == '\t'))
      i++;
    if (i == len) break;
    if (v[i] != ',') return HTTP1_TE_BAD;
    i++;
  }
  return n_chunked == n ? HTTP1_TE_BAD : HTTP1_TE_UNKNOWN;
}

/* IPv6address inside brackets (RFC 3986 IP-literal without IPvFuture). */
static int ipv6_valid(const char *v, unsigned len) {
  char tmp[64];
  unsigned char addr[16];
  if (len == 0 || len >= sizeof tmp) return 0;
  for (unsigned i = 0; i < len; i++)
    if (!(hexval((unsigned char)v[i]) >= 0 || v[i] == ':' || v[i] == '.')) return 0;
  memcpy(tmp, v, len);
  tmp[len] = '\0';
  return inet_pton(AF_INET6, tmp, addr) == 1;
}

int http1_host_valid(const char *v, unsigned len) {
  unsigned i = 0, hs;
  if (len == 0) return 0;
  if (v[0] == '[') {
    const char *e = memchr(v, ']', len);
    if (!e || !ipv6_valid(v + 1, (unsigned)(e - v - 1))) return 0;
    i = (unsigned)(e - v) + 1;
  } else {
    hs = i;
    /* reg-name / IPv4address: unreserved characters (no pct-encoding, no sub-delims) */
    while (i < len) {
      unsigned char c = (unsigned char)v[i];
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~'))
        break;
      i++;
    }
    if (i == hs) return 0;
  }
  if (i == len) return 1;
  if (v[i] != ':' || len - i - 1 > 5) return 0;
  for (i++; i < len; i++)
    if (v[i] < '0' || v[i] > '9') return 0;
  return 1;
}

int http1_parse_target(const char *t, unsigned len, struct http1_target *out) {
  unsigned i = 0, a;
  memset(out, 0, sizeof *out);
  /* a fragment is not part of any request-target form (RFC 9112 §3.2) */
  if (len == 0 || memchr(t, '#', len)) return out->form = HTTP1_TARGET_BAD;
  if (t[0] == '/') {
    out->path = t;
    out->path_len = len;
    return out->form = HTTP1_TARGET_ORIGIN;
  }
  if (len == 1 && t[0] == '*') return out->form = HTTP1_TARGET_ASTERISK;
  /* scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) followed by "://" */
  while (i < len &&
         ((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') ||
          (i > 0 && ((t[i] >= '0' && t[i] <= '9') || t[i] == '+' || t[i] == '-' || t[i] == '.'))))
    i++;
  if (i == 0 || len - i < 3 || memcmp(t + i, "://", 3) != 0)
    return out->form = HTTP1_TARGET_AUTHORITY; /* host:port, or garbage: never forwarded */
  if (!http1_ieq(t, i, "http") && !http1_ieq(t, i, "https"))
    return out->form = HTTP1_TARGET_OTHER_SCHEME;
  out->https = i == 5;
  a = i + 3;
  i = a;
  while (i < len && t[i] != '/' && t[i] != '?')
    i++;
  out->authority = t + a;
  out->authority_len = i - a;
  out->path = t + i;
  out->path_len = len - i;
  out->need_slash = i == len || t[i] == '?';
  return out->form = HTTP1_TARGET_ABSOLUTE;
}
