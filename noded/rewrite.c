/* rewrite — header policy table and head planning for the proxy (no sockets). */
#include "rewrite.h"

#include <stdio.h>
#include <string.h>

#include "skip.h"

/* The header policy. A name ending in '*' matches every name with that prefix. Headers not
 * listed pass through both ways; RW_REWRITE ones are written by the planner itself. */
static const struct {
  const char *name;
  unsigned flags;
} header_rules[] = {
    {"connection", RW_DROP_REQ | RW_DROP_RESP | RW_HOP},
    {"keep-alive", RW_DROP_REQ | RW_DROP_RESP | RW_HOP},
    {"proxy-*", RW_DROP_REQ | RW_DROP_RESP | RW_HOP}, /* Proxy-Connection, Proxy-Authorization */
    {"te", RW_DROP_REQ | RW_DROP_RESP | RW_HOP},
    {"trailer", RW_DROP_REQ | RW_DROP_RESP | RW_HOP},
    {"transfer-encoding", RW_DROP_REQ | RW_DROP_RESP | RW_HOP | RW_REWRITE},
    {"upgrade", RW_DROP_REQ | RW_DROP_RESP | RW_HOP},
    {"host", RW_DROP_REQ | RW_REWRITE},              /* per attempt: the origin's host_header */
    {"content-length", RW_DROP_REQ | RW_REWRITE},    /* re-written from the parsed framing */
    {"expect", RW_DROP_REQ},                         /* 100-continue is answered here */
    {"x-forwarded-for", RW_DROP_REQ | RW_REWRITE},   /* merged, the visitor's address appended */
    {"x-forwarded-proto", RW_DROP_REQ | RW_REWRITE}, /* set from the listener */
    {"via", RW_DROP_REQ | RW_REWRITE},               /* merged, "1.1 cdnca-node" appended */
};

static int lc(int c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

static int ieq(const char *a, size_t an, const char *b) {
  size_t bn = strlen(b);
  if (an != bn) return 0;
  for (size_t i = 0; i < an; i++)
    if (lc((unsigned char)a[i]) != lc((unsigned char)b[i])) return 0;
  return 1;
}

static int iprefix(const char *a, size_t an, const char *pre, size_t pn) {
  if (an < pn) return 0;
  for (size_t i = 0; i < pn; i++)
    if (lc((unsigned char)a[i]) != lc((unsigned char)pre[i])) return 0;
  return 1;
}

unsigned rewrite_header_flags(const char *name, unsigned len) {
  for (size_t i = 0; i < sizeof header_rules / sizeof header_rules[0]; i++) {
    const char *n = header_rules[i].name;
    size_t nl = strlen(n);
    if (n[nl - 1] == '*' ? iprefix(name, len, n, nl - 1) : ieq(name, len, n))
      return header_rules[i].flags;
  }
  return 0;
}

static void copy_trunc(char *dst, size_t cap, const char *src, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* 1 when a Connection header of m lists this header's name. */
static int connection_listed(const struct http1_msg *m, const struct http1_header *h) {
  char name[128];
  if (h->name_len >= sizeof name) return 0;
  memcpy(name, h->name, h->name_len);
  name[h->name_len] = '\0';
  for (int i = 0; i < m->n_headers; i++)
    if (http1_name_is(&m->headers[i], "connection") &&
        http1_list_has(m->headers[i].value, m->headers[i].value_len, name))
      return 1;
  return 0;
}

static void local(struct rewrite_req *rq, int status, const char *code, const char *msg) {
  rq->status = status;
  rq->code = code;
  rq->msg = msg;
}

/* Append a header line "name: value\r\n". */
static int put_header(struct buf *b, const char *n, size_t nl, const char *v, size_t vl) {
  return buf_append(b, n, nl) || buf_puts(b, ": ") || buf_append(b, v, vl) ||
                 buf_puts(b, "\r\n")
             ? -1
             : 0;
}

/* The upstream head from a validated request: request line, passed headers, rewritten ones. */
static int build_upstream(const struct http1_msg *m, const char *target, unsigned target_len,
                          const char *client_ip, const struct rewrite_req *rq, struct buf *ub) {
  ub->len = 0;
  if (buf_printf(ub, "%.*s %.*s HTTP/1.1\r\n", (int)m->method_len, m->method, (int)target_len,
                 target))
    return -1;
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    if ((rewrite_header_flags(h->name, h->name_len) & RW_DROP_REQ) || connection_listed(m, h))
      continue;
    if (put_header(ub, h->name, h->name_len, h->value, h->value_len)) return -1;
  }
  if (buf_puts(ub, "X-Forwarded-For: ")) return -1;
  for (int i = 0; i < m->n_headers; i++)
    if (http1_name_is(&m->headers[i], "x-forwarded-for")) {
      if (buf_append(ub, m->headers[i].value, m->headers[i].value_len) || buf_puts(ub, ", "))
        return -1;
    }
  if (buf_printf(ub, "%s\r\nX-Forwarded-Proto: http\r\nVia: ", client_ip)) return -1;
  for (int i = 0; i < m->n_headers; i++)
    if (http1_name_is(&m->headers[i], "via") &&
        (buf_append(ub, m->headers[i].value, m->headers[i].value_len) || buf_puts(ub, ", ")))
      return -1;
  if (buf_puts(ub, "1.1 cdnca-node\r\n")) return -1;
  if (rq->body == HTTP1_BODY_CHUNKED && buf_puts(ub, "Transfer-Encoding: chunked\r\n")) return -1;
  if (rq->body == HTTP1_BODY_LENGTH &&
      buf_printf(ub, "Content-Length: %llu\r\n", (unsigned long long)rq->body_len))
    return -1;
  return 0;
}

int rewrite_request(const struct http1_msg *m, const char *client_ip, struct rewrite_req *rq,
                    struct buf *ubase) {
  const char *host = NULL, *target = m->target;
  unsigned host_len = 0, target_len = m->target_len;
  int n_host = 0, n_cl = 0, te_chunked = 0, te_other = 0, conn_close = 0, expect = 0;
  uint64_t cl = 0;

  memset(rq, 0, sizeof *rq);
  copy_trunc(rq->method, sizeof rq->method, m->method, m->method_len);
  rq->idempotent = skip_method_idempotent(m->method, m->method_len);
  rq->is_head = m->method_len == 4 && memcmp(m->method, "HEAD", 4) == 0;
  rq->minor = m->minor;
  rq->keepalive = m->minor >= 1;
  copy_trunc(rq->path, sizeof rq->path, target, target_len);
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    if (http1_name_is(h, "host")) {
      n_host++;
      host = h->value;
      host_len = h->value_len;
    } else if (http1_name_is(h, "content-length")) {
      uint64_t v;
      if (http1_parse_length(h->value, h->value_len, &v) < 0 || (n_cl && v != cl)) {
        local(rq, 400, "bad_request", "invalid Content-Length");
        rq->keepalive = 0;
        return 0;
      }
      cl = v;
      n_cl++;
    } else if (http1_name_is(h, "transfer-encoding")) {
      if (ieq(h->value, h->value_len, "chunked") && !te_chunked) te_chunked = 1;
      else te_other = 1;
    } else if (http1_name_is(h, "connection")) {
      if (http1_list_has(h->value, h->value_len, "close")) conn_close = 1;
    } else if (http1_name_is(h, "expect")) {
      if (ieq(h->value, h->value_len, "100-continue")) expect = 1;
    }
  }
  if (conn_close) rq->keepalive = 0;
  if (te_other) {
    local(rq, 501, "not_implemented", "unsupported Transfer-Encoding");
    return 0;
  }
  if (te_chunked && n_cl) {
    local(rq, 400, "bad_request", "both Content-Length and Transfer-Encoding");
    return 0;
  }
  if (te_chunked && m->minor == 0) {
    local(rq, 400, "bad_request", "chunked body in an HTTP/1.0 request");
    return 0;
  }
  /* absolute-form target: its authority is the host */
  if (target_len > 7 && (iprefix(target, target_len, "http://", 7) ||
                         iprefix(target, target_len, "https://", 8))) {
    const char *a = (const char *)memchr(target, '/', target_len) + 2;
    const char *end = target + target_len;
    const char *slash = memchr(a, '/', (size_t)(end - a));
    host = a;
    host_len = (unsigned)((slash ? slash : end) - a);
    n_host = 1;
    if (slash) {
      target = slash;
      target_len = (unsigned)(end - slash);
    } else {
      target = "/";
      target_len = 1;
    }
  }
  if (n_host > 1 || (m->minor >= 1 && n_host == 0) || host_len >= sizeof rq->host) {
    local(rq, 400, "bad_request", "missing or invalid Host header");
    return 0;
  }
  if (host) copy_trunc(rq->host, sizeof rq->host, host, host_len);
  if (te_chunked) {
    rq->body = HTTP1_BODY_CHUNKED;
  } else if (n_cl) {
    rq->body = HTTP1_BODY_LENGTH; /* "Content-Length: 0" is passed on as such */
    rq->body_len = cl;
  } else {
    rq->body = HTTP1_BODY_NONE;
  }
  rq->has_body = te_chunked || cl > 0;
  rq->expect_continue = expect && rq->has_body && m->minor >= 1;
  return build_upstream(m, target, target_len, client_ip, rq, ubase);
}

int rewrite_attempt_head(const struct buf *ubase, const char *host, struct buf *out) {
  out->len = 0;
  if (buf_append(out, ubase->data ? ubase->data : "", ubase->len) ||
      buf_printf(out, "Host: %s\r\n\r\n", host))
    return -1;
  return 0;
}

void rewrite_response(const struct http1_msg *m, int is_head, struct rewrite_resp *rs) {
  int n_cl = 0, conn_close = 0, te = 0;
  uint64_t cl = 0;
  memset(rs, 0, sizeof *rs);
  rs->status = m->status;
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    if (http1_name_is(h, "transfer-encoding")) {
      te = 1;
      if (http1_list_has(h->value, h->value_len, "chunked")) rs->chunked = 1;
    } else if (http1_name_is(h, "content-length")) {
      uint64_t v;
      if (http1_parse_length(h->value, h->value_len, &v) < 0 || (n_cl && v != cl)) {
        rs->bad = 1;
        return;
      }
      cl = v;
      n_cl++;
    } else if (http1_name_is(h, "connection")) {
      if (http1_list_has(h->value, h->value_len, "close")) conn_close = 1;
    }
  }
  if (is_head || m->status == 204 || m->status == 304) rs->body = HTTP1_BODY_NONE;
  else if (rs->chunked) rs->body = HTTP1_BODY_CHUNKED;
  else if (te) rs->body = HTTP1_BODY_CLOSE;
  else if (n_cl) rs->body = HTTP1_BODY_LENGTH;
  else rs->body = HTTP1_BODY_CLOSE;
  rs->body_len = cl;
  rs->up_keepalive = m->minor >= 1 && !conn_close && rs->body != HTTP1_BODY_CLOSE;
}

int rewrite_response_head(const struct http1_msg *m, const struct rewrite_resp *rs,
                          int reframe_chunked, int close, struct buf *o) {
  int chunked = rs->body == HTTP1_BODY_CHUNKED;
  if (buf_printf(o, "HTTP/1.1 %d %.*s\r\n", m->status, (int)m->reason_len, m->reason)) return -1;
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    if ((rewrite_header_flags(h->name, h->name_len) & RW_DROP_RESP) || connection_listed(m, h))
      continue;
    if (chunked && http1_name_is(h, "content-length")) continue;
    if (put_header(o, h->name, h->name_len, h->value, h->value_len)) return -1;
  }
  if (reframe_chunked && buf_puts(o, "Transfer-Encoding: chunked\r\n")) return -1;
  if (close && buf_puts(o, "Connection: close\r\n")) return -1;
  return buf_puts(o, "\r\n");
}

/* Reason phrases of the statuses noded answers itself. */
static const struct {
  int status;
  const char *reason;
} reasons[] = {
    {200, "OK"},
    {400, "Bad Request"},
    {404, "Not Found"},
    {408, "Request Timeout"},
    {431, "Request Header Fields Too Large"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
};

const char *rewrite_reason(int status) {
  for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
    if (reasons[i].status == status) return reasons[i].reason;
  return "Unknown";
}

int rewrite_json_escape(struct buf *b, const char *s) {
  char tmp[8];
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') {
      tmp[0] = '\\';
      tmp[1] = (char)ch;
      if (buf_append(b, tmp, 2) < 0) return -1;
    } else if (ch < 0x20 || ch == 0x7f) {
      snprintf(tmp, sizeof tmp, "\\u%04x", ch);
      if (buf_puts(b, tmp) < 0) return -1;
    } else if (buf_append(b, s, 1) < 0) {
      return -1;
    }
  }
  return 0;
}

int rewrite_local_answer(int status, const char *code, const char *msg, int close,
                         struct buf *out) {
  struct buf body;
  int rc = -1;
  buf_init(&body, 4096);
  if (buf_puts(&body, "{\"error\":{\"code\":\"") || rewrite_json_escape(&body, code) ||
      buf_puts(&body, "\",\"message\":\"") || rewrite_json_escape(&body, msg) || buf_puts(&body, "\"}}"))
    goto out;
  if (buf_printf(out,
                 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "Via: 1.1 cdnca-node\r\n%s\r\n",
                 status, rewrite_reason(status), body.len, close ? "Connection: close\r\n" : "") ||
      buf_append(out, body.data ? body.data : "", body.len))
    goto out;
  rc = 0;
out:
  buf_fini(&body);
  return rc;
}

const char *rewrite_tls_name(const char *visitor_host, const char *host_header, char *tmp,
                             size_t cap) {
  const char *h = visitor_host, *colon;
  size_t n = strlen(h);
  if (host_header) return host_header;
  colon = h[0] == '[' ? strchr(h, ']') : strchr(h, ':');
  if (colon && h[0] == '[') {
    n = (size_t)(colon - h) + 1;
    if (n >= 2) {
      copy_trunc(tmp, cap, h + 1, n - 2);
      return tmp;
    }
  } else if (colon) {
    n = (size_t)(colon - h);
  }
  copy_trunc(tmp, cap, h, n);
  return tmp;
}
