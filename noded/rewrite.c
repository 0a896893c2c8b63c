/* rewrite — header policy table and head planning for the proxy (no sockets). */
#include "rewrite.h"

#include <stdio.h>
#include <string.h>

#include "skip.h"

/* The header policy. A rule with prefix set matches every name starting with its name. Headers
 * not listed pass through both ways; RW_REWRITE ones are written by the planner itself. */
#define RULE(n, f, p)                                                                              \
  { n, sizeof n - 1, f, p }
static const struct {
  const char *name;
  unsigned len, flags;
  int prefix;
} header_rules[] = {
    RULE("connection", RW_DROP_REQ | RW_DROP_RESP | RW_HOP, 0),
    RULE("keep-alive", RW_DROP_REQ | RW_DROP_RESP | RW_HOP, 0),
    RULE("proxy-", RW_DROP_REQ | RW_DROP_RESP | RW_HOP, 1), /* Proxy-Connection, -Authorization */
    RULE("te", RW_DROP_REQ | RW_DROP_RESP | RW_HOP, 0),
    RULE("trailer", RW_DROP_REQ | RW_DROP_RESP | RW_HOP, 0),
    RULE("transfer-encoding", RW_DROP_REQ | RW_DROP_RESP | RW_HOP | RW_REWRITE, 0),
    RULE("upgrade", RW_DROP_REQ | RW_DROP_RESP | RW_HOP, 0),
    RULE("host", RW_DROP_REQ | RW_REWRITE, 0),              /* per attempt: the origin's */
    RULE("content-length", RW_DROP_REQ | RW_REWRITE, 0),    /* from the parsed framing */
    RULE("expect", RW_DROP_REQ, 0),                         /* 100-continue answered here */
    RULE("x-forwarded-for", RW_DROP_REQ | RW_REWRITE, 0),   /* merged + the visitor's address */
    RULE("x-forwarded-proto", RW_DROP_REQ | RW_REWRITE, 0), /* set from the listener */
    RULE("via", RW_DROP_REQ | RW_REWRITE, 0),               /* merged + "1.1 cdnca-node" */
};
#undef RULE

static int iprefix(const char *a, size_t an, const char *pre, size_t pn) {
  if (an < pn) return 0;
  for (size_t i = 0; i < pn; i++)
    if (http1_lc((unsigned char)a[i]) != http1_lc((unsigned char)pre[i])) return 0;
  return 1;
}

unsigned rewrite_header_flags(const char *name, unsigned len) {
  int first = len ? http1_lc((unsigned char)name[0]) : 0;
  for (size_t i = 0; i < sizeof header_rules / sizeof header_rules[0]; i++) {
    unsigned nl = header_rules[i].len;
    if (header_rules[i].name[0] != first) continue; /* cheap reject: rules are lowercase */
    if (header_rules[i].prefix ? iprefix(name, len, header_rules[i].name, nl)
                               : len == nl && iprefix(name, len, header_rules[i].name, nl))
      return header_rules[i].flags;
  }
  return 0;
}

static void copy_trunc(char *dst, size_t cap, const char *src, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* 1 when a Connection header of m lists a token other than close, keep-alive and upgrade (the
 * headers named by those are dropped by the table anyway, but for "Close"): only then does each
 * field need connection_listed. */
static int connection_options(const struct http1_msg *m) {
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    if (http1_name_is(h, "connection") && !http1_ieq(h->value, h->value_len, "close") &&
        !http1_ieq(h->value, h->value_len, "keep-alive") &&
        !http1_ieq(h->value, h->value_len, "upgrade"))
      return 1;
  }
  return 0;
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
  return buf_append(b, n, nl) || buf_puts(b, ": ") || buf_append(b, v, vl) || buf_puts(b, "\r\n")
             ? -1
             : 0;
}

/* The upstream head from a validated request: request line, passed headers, rewritten ones. */
static int build_upstream(const struct http1_msg *m, const struct http1_target *t,
                          const struct rewrite_peer *peer, const struct rewrite_req *rq,
                          struct buf *ub) {
  int opts = connection_options(m);
  const char *client_ip = peer->addr;
  int trusted = peer->trust && trust_has(peer->trust, client_ip, strlen(client_ip));
  ub->len = 0;
  /* appended piece by piece (no printf on the per-request path) */
  if (buf_append(ub, m->method, m->method_len) || buf_append(ub, " ", 1)) return -1;
  if (t->form == HTTP1_TARGET_ASTERISK) {
    if (buf_append(ub, "*", 1)) return -1;
  } else if ((t->need_slash && buf_append(ub, "/", 1)) || buf_append(ub, t->path, t->path_len)) {
    return -1;
  }
  if (buf_append(ub, " HTTP/1.1\r\n", 11)) return -1;
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    if ((rewrite_header_flags(h->name, h->name_len) & RW_DROP_REQ) ||
        ((opts || h->name_len == 5) && connection_listed(m, h)))
      continue;
    if (put_header(ub, h->name, h->name_len, h->value, h->value_len)) return -1;
  }
  /* a trusted peer's X-Forwarded-For is extended with its address (a trusted Unix-socket peer,
     which has none, passes its own on as it is); anyone else's is replaced */
  if (buf_puts(ub, "X-Forwarded-For: ")) return -1;
  {
    int n = 0, peer_has_ip = strcmp(client_ip, "unix:") != 0;
    for (int i = 0; trusted && i < m->n_headers; i++)
      if (http1_name_is(&m->headers[i], "x-forwarded-for")) {
        if ((n++ && buf_puts(ub, ", ")) ||
            buf_append(ub, m->headers[i].value, m->headers[i].value_len))
          return -1;
      }
    if ((n && peer_has_ip && buf_puts(ub, ", ")) ||
        ((!n || peer_has_ip) && buf_puts(ub, client_ip)))
      return -1;
  }
  if (buf_puts(ub, "\r\nX-Forwarded-Proto: http\r\nVia: ")) return -1;
  for (int i = 0; i < m->n_headers; i++)
    if (http1_name_is(&m->headers[i], "via") &&
        (buf_append(ub, m->headers[i].value, m->headers[i].value_len) || buf_puts(ub, ", ")))
      return -1;
  if (buf_puts(ub, "1.1 cdnca-node\r\n")) return -1;
  if (rq->upgrade) {
    for (int i = 0; i < m->n_headers; i++)
      if (http1_name_is(&m->headers[i], "upgrade") &&
          put_header(ub, "Upgrade", 7, m->headers[i].value, m->headers[i].value_len))
        return -1;
    if (buf_puts(ub, "Connection: upgrade\r\n")) return -1;
  }
  if (rq->body == HTTP1_BODY_CHUNKED && buf_puts(ub, "Transfer-Encoding: chunked\r\n")) return -1;
  if (rq->body == HTTP1_BODY_LENGTH && (buf_puts(ub, "Content-Length: ") ||
                                        buf_put_u64(ub, rq->body_len) || buf_append(ub, "\r\n", 2)))
    return -1;
  return 0;
}

/* X-Forwarded-For items looked at from the right at most (a longer chain of trusted proxies
 * ends there). */
#define XFF_WALK_MAX 64

void rewrite_visitor(const struct http1_msg *m, const struct rewrite_peer *peer, char *out,
                     size_t cap) {
  const char *best = peer->addr;
  size_t best_len = strlen(peer->addr);
  int walked = 0;
  if (!peer->trust || !trust_has(peer->trust, best, best_len)) goto done;
  for (int i = m->n_headers - 1; i >= 0 && walked < XFF_WALK_MAX; i--) {
    const struct http1_header *h = &m->headers[i];
    size_t end = h->value_len;
    if (!http1_name_is(h, "x-forwarded-for")) continue;
    /* the items of this field, from the right */
    while (end > 0 && walked < XFF_WALK_MAX) {
      size_t b = end, e;
      while (b > 0 && h->value[b - 1] != ',')
        b--;
      e = end;
      end = b ? b - 1 : 0;
      while (b < e && (h->value[b] == ' ' || h->value[b] == '\t'))
        b++;
      while (e > b && (h->value[e - 1] == ' ' || h->value[e - 1] == '\t'))
        e--;
      if (e == b) { /* an empty list element */
        if (!end) break;
        continue;
      }
      walked++;
      if (!trust_is_addr(h->value + b, e - b)) goto done;
      best = h->value + b;
      best_len = e - b;
      if (!trust_has(peer->trust, best, best_len)) goto done;
      if (!end) break;
    }
  }
done:
  copy_trunc(out, cap, best, best_len);
}

int rewrite_request(const struct http1_msg *m, const struct rewrite_peer *peer,
                    struct rewrite_req *rq, struct buf *ubase) {
  const char *host = NULL;
  unsigned host_len = 0;
  int n_host = 0, n_cl = 0, n_te = 0, te = HTTP1_TE_CHUNKED, conn_close = 0, expect = 0;
  int n_upgrade = 0, conn_upgrade = 0, websocket = 0;
  uint64_t cl = 0;
  struct http1_target t;

  memset(rq, 0, sizeof *rq);
  rewrite_visitor(m, peer, rq->visitor, sizeof rq->visitor);
  copy_trunc(rq->method, sizeof rq->method, m->method, m->method_len);
  rq->idempotent = skip_method_idempotent(m->method, m->method_len);
  rq->is_head = m->method_len == 4 && memcmp(m->method, "HEAD", 4) == 0;
  rq->minor = m->minor;
  rq->keepalive = m->minor >= 1;
  copy_trunc(rq->path, sizeof rq->path, m->target, m->target_len);
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    if (http1_name_is(h, "host")) {
      n_host++;
      host = h->value;
      host_len = h->value_len;
    } else if (http1_name_is(h, "content-length")) {
      /* one Content-Length of digits only: a second one, even equal, or a list is refused */
      if (n_cl++ || http1_parse_length(h->value, h->value_len, &cl) < 0) {
        local(rq, 400, "bad_request", "invalid or repeated Content-Length");
        return 0;
      }
    } else if (http1_name_is(h, "transfer-encoding")) {
      int k = http1_te_classify(h->value, h->value_len);
      if (n_te++ || k == HTTP1_TE_BAD)
        te = HTTP1_TE_BAD;
      else if (k == HTTP1_TE_UNKNOWN && te != HTTP1_TE_BAD)
        te = HTTP1_TE_UNKNOWN;
    } else if (http1_name_is(h, "connection")) {
      if (http1_list_has(h->value, h->value_len, "close")) conn_close = 1;
      if (http1_list_has(h->value, h->value_len, "upgrade")) conn_upgrade = 1;
      /* an HTTP/1.0 visitor asks to keep its connection (as nginx honours it) */
      if (http1_list_has(h->value, h->value_len, "keep-alive")) rq->keepalive = 1;
    } else if (http1_name_is(h, "expect")) {
      if (http1_ieq(h->value, h->value_len, "100-continue")) expect = 1;
    } else if (http1_name_is(h, "upgrade")) {
      n_upgrade++;
      /* only WebSocket is tunnelled: one token, exactly "websocket" in any case. Any other
         protocol (h2c above all: requests inside such a tunnel would reach the origin with no
         X-Forwarded-For or Via and any Host) is forwarded without Upgrade, as nginx does */
      if (http1_ieq(h->value, h->value_len, "websocket")) websocket = 1;
    }
  }
  if (conn_close) rq->keepalive = 0;
  if (n_te && te == HTTP1_TE_BAD) {
    local(rq, 400, "bad_request", "Transfer-Encoding other than exactly chunked");
    return 0;
  }
  if (n_te && te == HTTP1_TE_UNKNOWN) {
    local(rq, 501, "not_implemented", "unsupported Transfer-Encoding");
    return 0;
  }
  if (n_te && n_cl) {
    local(rq, 400, "bad_request", "both Content-Length and Transfer-Encoding");
    return 0;
  }
  if (n_te && m->minor == 0) {
    local(rq, 400, "bad_request", "Transfer-Encoding in an HTTP/1.0 request");
    return 0;
  }
  if (http1_ieq(m->method, m->method_len, "CONNECT")) {
    local(rq, 400, "bad_request", "CONNECT is not supported");
    return 0;
  }
  switch (http1_parse_target(m->target, m->target_len, &t)) {
  case HTTP1_TARGET_ORIGIN:
    break;
  case HTTP1_TARGET_ABSOLUTE:
    if (!http1_host_valid(t.authority, t.authority_len)) {
      local(rq, 400, "bad_request", "invalid authority in the request target");
      return 0;
    }
    break;
  case HTTP1_TARGET_ASTERISK:
    if (m->method_len == 7 && memcmp(m->method, "OPTIONS", 7) == 0) break;
    local(rq, 400, "bad_request", "the * target is only for OPTIONS");
    return 0;
  case HTTP1_TARGET_OTHER_SCHEME:
    local(rq, 400, "bad_request", "only http and https targets are proxied");
    return 0;
  default:
    local(rq, 400, "bad_request", "invalid request target");
    return 0;
  }
  if (n_host > 1 || (m->minor >= 1 && n_host == 0) ||
      (n_host && !http1_host_valid(host, host_len))) {
    local(rq, 400, "bad_request", "missing or invalid Host header");
    return 0;
  }
  if (t.form == HTTP1_TARGET_ABSOLUTE) { /* the authority wins over Host (RFC 9112 §3.2.2) */
    host = t.authority;
    host_len = t.authority_len;
  }
  if (host_len >= sizeof rq->host) {
    local(rq, 400, "bad_request", "missing or invalid Host header");
    return 0;
  }
  if (host) copy_trunc(rq->host, sizeof rq->host, host, host_len);
  if (n_te) {
    rq->body = HTTP1_BODY_CHUNKED;
  } else if (n_cl) {
    rq->body = HTTP1_BODY_LENGTH; /* "Content-Length: 0" is passed on as such */
    rq->body_len = cl;
  } else {
    rq->body = HTTP1_BODY_NONE;
  }
  rq->has_body = n_te || cl > 0;
  rq->expect_continue = expect && rq->has_body && m->minor >= 1;
  /* a protocol switch (WebSocket only): HTTP/1.1, "Connection: upgrade", one Upgrade that is
     "websocket", no body */
  rq->upgrade = conn_upgrade && n_upgrade == 1 && websocket && m->minor >= 1 && !rq->has_body;
  return build_upstream(m, &t, peer, rq, ubase);
}

int rewrite_attempt_head(const struct buf *ubase, const char *host, struct buf *out) {
  out->len = 0;
  if (buf_append(out, ubase->data ? ubase->data : "", ubase->len) || buf_append(out, "Host: ", 6) ||
      buf_puts(out, host) || buf_append(out, "\r\n\r\n", 4))
    return -1;
  return 0;
}

void rewrite_response(const struct http1_msg *m, int is_head, struct rewrite_resp *rs) {
  int conn_close = 0, kind = HTTP1_BODY_NONE;
  memset(rs, 0, sizeof *rs);
  rs->status = m->status;
  rs->bad = http1_response_framing(m, is_head, &kind, &rs->body_len) < 0;
  rs->body = (enum http1_body_kind)kind;
  rs->chunked = kind == HTTP1_BODY_CHUNKED;
  for (int i = 0; i < m->n_headers; i++)
    if (http1_name_is(&m->headers[i], "connection") &&
        http1_list_has(m->headers[i].value, m->headers[i].value_len, "close"))
      conn_close = 1;
  rs->up_keepalive = m->minor >= 1 && !conn_close && rs->body != HTTP1_BODY_CLOSE;
}

int rewrite_response_head(const struct http1_msg *m, const struct rewrite_resp *rs,
                          int reframe_chunked, int conn, struct buf *o) {
  int upgrade = m->status == 101, opts = connection_options(m);
  if (buf_append(o, "HTTP/1.1 ", 9) || buf_put_u64(o, (uint64_t)m->status) ||
      buf_append(o, " ", 1) || buf_append(o, m->reason, m->reason_len) || buf_append(o, "\r\n", 2))
    return -1;
  for (int i = 0; i < m->n_headers; i++) {
    const struct http1_header *h = &m->headers[i];
    unsigned f = rewrite_header_flags(h->name, h->name_len);
    if (upgrade && http1_name_is(h, "upgrade")) {
      f = 0; /* the switched-to protocol, though "Connection: upgrade" lists it */
    } else if ((opts || h->name_len == 5) && connection_listed(m, h)) {
      continue;
    }
    if (f & RW_DROP_RESP) continue;
    /* the body is re-framed: the origin's length does not apply to chunks noded writes */
    if ((rs->body == HTTP1_BODY_CHUNKED || rs->body == HTTP1_BODY_CLOSE) &&
        http1_name_is(h, "content-length"))
      continue;
    if (put_header(o, h->name, h->name_len, h->value, h->value_len)) return -1;
  }
  if (upgrade && buf_puts(o, "Connection: upgrade\r\n")) return -1;
  if (reframe_chunked && buf_puts(o, "Transfer-Encoding: chunked\r\n")) return -1;
  if (conn == RW_CONN_CLOSE && !upgrade && buf_puts(o, "Connection: close\r\n")) return -1;
  if (conn == RW_CONN_KEEPALIVE && !upgrade && buf_puts(o, "Connection: keep-alive\r\n")) return -1;
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
  while (*s) {
    size_t run = 0;
    unsigned char ch;
    /* bytes that need no escape go in one append */
    while ((ch = (unsigned char)s[run]) && ch != '"' && ch != '\\' && ch >= 0x20 && ch != 0x7f)
      run++;
    if (run && buf_append(b, s, run) < 0) return -1;
    s += run;
    if (!*s) break;
    ch = (unsigned char)*s++;
    if (ch == '"' || ch == '\\') {
      tmp[0] = '\\';
      tmp[1] = (char)ch;
      if (buf_append(b, tmp, 2) < 0) return -1;
    } else {
      snprintf(tmp, sizeof tmp, "\\u%04x", ch);
      if (buf_puts(b, tmp) < 0) return -1;
    }
  }
  return 0;
}

int rewrite_local_answer(int status, const char *code, const char *msg, int conn, struct buf *out) {
  struct buf body;
  int rc = -1;
  buf_init(&body, 4096);
  if (buf_puts(&body, "{\"error\":{\"code\":\"") || rewrite_json_escape(&body, code) ||
      buf_puts(&body, "\",\"message\":\"") || rewrite_json_escape(&body, msg) ||
      buf_puts(&body, "\"}}"))
    goto out;
  if (buf_printf(out,
                 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "Via: 1.1 cdnca-node\r\n%s\r\n",
                 status, rewrite_reason(status), body.len,
                 conn == RW_CONN_CLOSE       ? "Connection: close\r\n"
                 : conn == RW_CONN_KEEPALIVE ? "Connection: keep-alive\r\n"
                                             : "") ||
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
