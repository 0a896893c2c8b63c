/* rewrite — the proxy's header policy and message rewriting, without sockets: header rules as a
 * table, the upstream request head planned from a parsed visitor request, the visitor's
 * response head planned from a parsed origin response (docs/design.md#the-edge-http-path). */
#ifndef CDNCA_REWRITE_H
#define CDNCA_REWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "http1.h"
#include "trust.h"

/* What the policy does with a header field (bits of rewrite_header_flags). */
enum rewrite_flag {
  RW_DROP_REQ = 1 << 0,  /* not copied from the visitor's request to the origin */
  RW_DROP_RESP = 1 << 1, /* not copied from the origin's response to the visitor */
  RW_REWRITE = 1 << 2,   /* written by the proxy itself (Host, framing, Via, X-Forwarded-*) */
  RW_HOP = 1 << 3        /* hop-by-hop (RFC 9110 §7.6.1) */
};

/* The rewrite_flag bits of a header name (0 for headers passed through as they are). */
unsigned rewrite_header_flags(const char *name, unsigned len);

/* A visitor request after the head rules: either a plan for the origin or a local answer. */
struct rewrite_req {
  int status;       /* 0: proxy it; else the status of the local answer */
  const char *code; /* local answer: error code and message (static strings) */
  const char *msg;
  char method[33];
  int idempotent, is_head, minor;
  int keepalive;             /* the visitor connection may carry another request (HTTP/1.1
                                without "Connection: close", HTTP/1.0 with "keep-alive") */
  int expect_continue;       /* "Expect: 100-continue" on an HTTP/1.1 request with a body */
  enum http1_body_kind body; /* HTTP1_BODY_NONE, _LENGTH (also 0) or _CHUNKED */
  uint64_t body_len;         /* _LENGTH */
  int has_body;              /* chunked or a Content-Length above 0 */
  int upgrade;               /* asks for a protocol switch (Upgrade + Connection: upgrade) */
  char host[256];            /* routing host (Host header or absolute-form authority) */
  char path[512];            /* the request target as received, truncated (for the log) */
  char visitor[64];          /* the visitor's address (rewrite_visitor), for the log */
};

/* Who sent a request: the connection's client and the proxies trusted with X-Forwarded-For
 * (docs/design.md#noded-behind-an-edge-cache). */
struct rewrite_peer {
  const char *addr;          /* the PROXY header's source, else the socket peer ("unix:" on a
                                Unix socket) */
  const struct trust *trust; /* NULL: nobody is trusted */
};

/* Apply the request rules to the parsed head m from peer: fills rq (rq->visitor too), and unless
 * rq->status is set, writes into ubase the upstream head without Host and the final empty line
 * (request line, passed headers, X-Forwarded-For extended when peer->addr is trusted and replaced
 * otherwise, X-Forwarded-Proto, Via, framing). 0, or -1 on OOM. */
int rewrite_request(const struct http1_msg *m, const struct rewrite_peer *peer,
                    struct rewrite_req *rq, struct buf *ubase);

/* The visitor behind peer for the access log: the rightmost address of the chain m's
 * X-Forwarded-For + peer->addr that is not a trusted proxy (peer->addr itself when it is not
 * trusted; an item that is not an address ends the walk at the one after it), into out[cap]. */
void rewrite_visitor(const struct http1_msg *m, const struct rewrite_peer *peer, char *out,
                     size_t cap);

/* Append "Host: <host>\r\n\r\n" to ubase's copy in out: the head of one attempt. 0 or -1. */
int rewrite_attempt_head(const struct buf *ubase, const char *host, struct buf *out);

/* An origin response after the framing rules. */
struct rewrite_resp {
  int bad;    /* 1: invalid framing (repeated Content-Length, a coding other than chunked): 502 */
  int status; /* the origin's status */
  enum http1_body_kind body; /* how the origin frames the body */
  uint64_t body_len;
  int chunked;      /* the origin sends chunked framing */
  int up_keepalive; /* the origin connection may be reused after this response */
};

/* Plan the response to the visitor's request (is_head) from the origin head m (a 1xx: no body). */
void rewrite_response(const struct http1_msg *m, int is_head, struct rewrite_resp *rs);

/* The Connection header noded writes on a response head: none, "close", or "keep-alive" (an
 * HTTP/1.0 visitor that asked to keep its connection and keeps it). */
enum rw_conn { RW_CONN_NONE = 0, RW_CONN_CLOSE = 1, RW_CONN_KEEPALIVE = 2 };

/* Write the visitor's response head for m into out: status line, passed headers, framing
 * ("Transfer-Encoding: chunked" when reframe_chunked), the Connection header of conn (enum
 * rw_conn); a 101 keeps its Upgrade header and gets "Connection: upgrade". 0 or -1. */
int rewrite_response_head(const struct http1_msg *m, const struct rewrite_resp *rs,
                          int reframe_chunked, int conn, struct buf *out);

/* The reason phrase of the statuses the proxy answers itself ("Unknown" for others). */
const char *rewrite_reason(int status);

/* Append s JSON-escaped (without the quotes) to b. 0 or -1. */
int rewrite_json_escape(struct buf *b, const char *s);

/* Write a local JSON error answer {"error":{"code","message"}} into out, with the Connection
 * header of conn (enum rw_conn). 0 or -1. */
int rewrite_local_answer(int status, const char *code, const char *msg, int conn, struct buf *out);

/* The TLS name (SNI, certificate check) of an attempt: host_header when the origin has one, else
 * the visitor's host without port and brackets, copied into tmp[cap]. */
const char *rewrite_tls_name(const char *visitor_host, const char *host_header, char *tmp,
                             size_t cap);

#endif
