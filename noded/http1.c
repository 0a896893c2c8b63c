/* http1 — HTTP/1.x head parsing and body framing. */
#include "http1.h"

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
    while (i < ll && is_tchar((unsigned char)ls[i])) i++;
    if (i == 0 || i >= ll || ls[i] != ':') return HTTP1_BAD; /* also rejects obs-fold */
    vs = i + 1;
    while (vs < ll && (ls[vs] == ' ' || ls[vs] == '\t')) vs++;
    ve = ll;
    while (ve > vs && (ls[ve - 1] == ' ' || ls[ve - 1] == '\t')) ve--;
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
    if (c <= 0x20 || c == 0x7f) return HTTP1_BAD;
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

static int lc(int c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

static int ieq(const char *a, size_t an, const char *b) {
  size_t bn = strlen(b);
  if (an != bn) return 0;
  for (size_t i = 0; i < an; i++)
    if (lc((unsigned char)a[i]) != lc((unsigned char)b[i])) return 0;
  return 1;
}

int http1_name_is(const struct http1_header *h, const char *name) {
  return ieq(h->name, h->name_len, name);
}

int http1_list_has(const char *v, unsigned len, const char *tok) {
  unsigned i = 0;
  while (i < len) {
    unsigned s, e;
    while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
    s = i;
    while (i < len && v[i] != ',') i++;
    e = i;
    while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
    if (e > s && ieq(v + s, e - s, tok)) return 1;
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

enum {
  CS_SIZE = 0,
  CS_EXT,
  CS_SIZE_LF,
  CS_DATA,
  CS_DATA_CR,
  CS_DATA_LF,
  CS_TRAILER_START,
  CS_TRAILER_LINE,
  CS_TRAILER_LF
};

#define HTTP1_MAX_TRAILER 16384

void http1_body_init(struct http1_body *b, enum http1_body_kind kind, uint64_t length) {
  memset(b, 0, sizeof *b);
  b->kind = kind;
  b->remaining = length;
  b->done = kind == HTTP1_BODY_NONE || (kind == HTTP1_BODY_LENGTH && length == 0);
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = lc(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

static long feed_chunked(struct http1_body *b, char *p, size_t n, size_t *out_len, int decode) {
  size_t i = 0, w = 0;
  while (i < n && !b->done) {
    int c = (unsigned char)p[i];
    switch (b->cstate) {
    case CS_SIZE: {
      int h = hexval(c);
      if (h >= 0) {
        if (b->remaining >> 56) return -1;
        b->remaining = b->remaining * 16 + (uint64_t)h;
        b->digits++;
      } else if (c == ';' || c == ' ' || c == '\t') {
        b->cstate = CS_EXT;
      } else if (c == '\r') {
        b->cstate = CS_SIZE_LF;
      } else if (c == '\n') {
        goto size_done;
      } else {
        return -1;
      }
      i++;
      if (!decode) w = i;
      continue;
    }
    case CS_EXT:
      if (++b->trailer_bytes > HTTP1_MAX_TRAILER) return -1;
      i++;
      if (!decode) w = i;
      if (c == '\n') goto size_done_consumed;
      continue;
    case CS_SIZE_LF:
      if (c != '\n') return -1;
      i++;
      if (!decode) w = i;
      goto size_done_consumed;
    case CS_DATA: {
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
    case CS_DATA_CR:
      if (c == '\r') b->cstate = CS_DATA_LF;
      else if (c == '\n') b->cstate = CS_SIZE;
      else return -1;
      i++;
      if (!decode) w = i;
      continue;
    case CS_DATA_LF:
      if (c != '\n') return -1;
      b->cstate = CS_SIZE;
      i++;
      if (!decode) w = i;
      continue;
    case CS_TRAILER_START:
      if (c == '\r') b->cstate = CS_TRAILER_LF;
      else if (c == '\n') b->done = 1;
      else b->cstate = CS_TRAILER_LINE;
      i++;
      if (!decode) w = i;
      continue;
    case CS_TRAILER_LINE:
      if (++b->trailer_bytes > HTTP1_MAX_TRAILER) return -1;
      if (c == '\n') b->cstate = CS_TRAILER_START;
      i++;
      if (!decode) w = i;
      continue;
    case CS_TRAILER_LF:
      if (c != '\n') return -1;
      b->done = 1;
      i++;
      if (!decode) w = i;
      continue;
    }
    return -1;
  size_done:
    i++;
    if (!decode) w = i;
  size_done_consumed:
    if (b->digits == 0) return -1;
    b->digits = 0;
    if (b->remaining == 0) {
      b->cstate = CS_TRAILER_START;
    } else {
      b->cstate = CS_DATA;
    }
  }
  *out_len = w;
  return (long)i;
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
