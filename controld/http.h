/* http — controld's HTTP layer over libmicrohttpd: routing, auth, bodies, JSON replies,
 * suspend/resume. */
#ifndef CDNCA_HTTP_H
#define CDNCA_HTTP_H

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdint.h>

#include "buf.h"
#include "route.h"

struct ctx;
struct http_srv;
struct metrics;
struct MHD_Connection;
struct MHD_Response;

#define HTTP_BODY_MAX (1024 * 1024)
/* A refused body is still read (and dropped) up to this much, so a client that sends it all
   before reading can read the 413; beyond it the connection is closed. */
#define HTTP_DRAIN_MAX (16 * 1024 * 1024)
#define HTTP_MAX_PARAMS ROUTE_MAX_PARAMS
/* How long a stop waits for the answers to what a listener accepted. */
#define HTTP_DRAIN_MS 10000

/* One request in flight. Fields are read-only for handlers except `user` / `user_free`. */
struct req {
  struct ctx *ctx; /* the API layer's context (http_cfg.app), opaque here */
  struct http_srv *srv;
  struct MHD_Connection *conn;
  const struct route *route;
  const char *method;
  const char *url;
  int64_t params[HTTP_MAX_PARAMS]; /* the ":id" values of the path, in order */
  int nparams;
  enum http_auth auth; /* kind of the presented token: its role, or AUTH_NODE */
  int64_t node_id;     /* for node tokens */
  int64_t token_id;    /* the presented token's id (0 on open routes) */
  char token_name[65]; /* API tokens: its name ("bootstrap" for CDNCA_ADMIN_TOKEN) */
  struct buf body;
  int body_too_large;
  uint64_t declared_len; /* Content-Length, 0 when none */
  uint64_t dropped;      /* body bytes read and dropped (refused request) */
  int64_t started_ms;
  /* reply */
  unsigned status;
  char *resp_body; /* owned; freed after queueing */
  size_t resp_len;
  const char *resp_type;
  struct MHD_Response *resp_shared; /* optional prebuilt response (reference held) */
  const char *resp_headers[4][2];   /* extra reply headers (static strings) */
  char resp_etag[32];               /* ETag reply header value ("" = none) */
  int n_resp_headers;
  int suspended;
  atomic_int ready; /* set by req_resume's caller after the reply is set */
  int done;
  int close_after; /* the reply closes the connection (a head that could be read two ways) */
  /* handler state kept across suspend/resume */
  void *user;
  void (*user_free)(void *user);
};

/* Who a presented token is, as the API layer's authenticate hook finds it. */
struct http_identity {
  enum http_auth auth; /* its role, AUTH_NODE, or AUTH_NONE for a role this build does not know */
  int64_t node_id;     /* node tokens */
  int64_t token_id;
  char name[65];
};

/* The authenticate hook's answers. */
enum http_id_rc {
  HTTP_ID_KNOWN = 0,   /* *out filled */
  HTTP_ID_UNKNOWN = 1, /* unknown, revoked or expired: 401 */
  HTTP_ID_DB_DOWN = 2, /* the database cannot be reached: 503 */
  HTTP_ID_ERROR = 3,   /* another storage error: 500 */
};

/* The server's configuration. Strings are copied; app is handed to every request as r->ctx and to
   the hook. */
struct http_cfg {
  const char *listen; /* host:port */
  const char *name;   /* the listener in messages and metric labels ("api", "admin") */
  int listen_fd;      /* a listening socket received for it (socket activation), or -1 */
  int64_t max_connections, http_threads;
  const char *cap_option;  /* the option that sets max_connections, for log lines; NULL: fixed */
  int64_t max_per_ip;      /* open connections from one address at most (0 = no cap) */
  int64_t head_timeout_ms; /* a request head must be whole within this (0 = no deadline) */
  const char *tls_cert, *tls_key; /* file paths, NULL or "" for plain HTTP */
  struct metrics *metrics;        /* cdnca_http_requests_total */
  struct ctx *app;
  /* Who the bearer token is (the raw token; the hook hashes it): an enum http_id_rc. */
  int (*authenticate)(struct ctx *app, const char *token, struct http_identity *out);
};

/* Start the server on cfg->listen with the given NULL-terminated route tables; the server, or
   NULL (logged). */
struct http_srv *http_start(const struct http_cfg *cfg, const struct route *const *tables);

/* Stop accepting and wait up to timeout_ms until every connection accepted is answered: a
   request in progress, or a connection with no request yet within its head deadline
   (docs/design.md, Restarts and upgrades). Answers given meanwhile carry Connection: close. A
   received socket (http_cfg.listen_fd) stays open and listening, for the next process; a socket
   of the server's own has what its backlog holds accepted, then closes. Not libmicrohttpd
   0.9.75's MHD_quiesce_daemon, which races its own epoll thread (both remove the listen socket;
   the loser aborts the process with "Failed to remove listen FD from epoll set"): the daemon has
   no listening socket, a thread of the server's own accepts and hands each connection to it.
   The config hub and the task board must answer their long-polls at once first. */
void http_drain(struct http_srv *srv, int64_t timeout_ms);

/* Stop accepting and shut the daemon down (callers must have resumed every suspended request),
   free it and NULL *srv. Connections still open (idle keep-alive ones after http_drain) are
   closed. */
void http_stop(struct http_srv **srv);

/* Query-string parameter or NULL. */
const char *req_query(struct req *r, const char *key);

/* The query parameters as received, in order: "?name=value&name=value&" ("?" when none), malloc'd
   (caller frees); NULL when memory runs out. */
char *req_query_text(struct req *r);

/* Request header or NULL. */
const char *req_header(struct req *r, const char *key);

/* Parse a query parameter as an integer in [min, max]; 0 ok (or absent: *out = def), -1 invalid (a
 * 400 reply is set). */
int req_query_int(struct req *r, const char *key, int64_t min, int64_t max, int64_t def,
                  int64_t *out);

/* Set a JSON reply; takes ownership of body (may be NULL for no body). */
void req_json(struct req *r, unsigned status, cJSON *body);

/* Set the error reply of docs/design.md#errors-and-limits {"error":{"code","message","field"}};
 * field may be NULL. */
void req_error(struct req *r, unsigned status, const char *code, const char *field, const char *fmt,
               ...) __attribute__((format(printf, 5, 6)));

/* Set a reply with a raw body (taken, malloc'd) and a content type. */
void req_raw(struct req *r, unsigned status, const char *ctype, char *data, size_t len);

/* Set a reply from static memory (not freed). */
void req_static(struct req *r, unsigned status, const char *ctype, const void *data, size_t len);

/* Set a prebuilt libmicrohttpd response as the reply (taken: released after sending). */
void req_response(struct req *r, unsigned status, struct MHD_Response *resp);

/* Set the reply's ETag header to "<revision>" (0 = none). After the body: setting a body
   (req_json, req_raw, req_error …) starts the reply afresh, ETag included, so an error answered
   after a tag was set never carries it. */
void req_set_etag(struct req *r, int64_t revision);

/* Add a reply header (name and value must be static strings); at most 4. */
void req_add_header(struct req *r, const char *name, const char *value);

/* Parse the body as a JSON object (strictly, jsonstrict.h); NULL with a reply set when it is not
   one: 415 wrong type, 400 malformed_json / duplicate_key, 422 invalid_string (U+0000, invalid
   UTF-8, lone surrogate; field named). Caller frees. */
cJSON *req_body_object(struct req *r);

/* Suspend the connection (only from a handler, which then returns HTTP_SUSPENDED). */
void req_suspend(struct req *r);

/* From any thread: after the reply is set on a suspended request, wake it so it is sent. Call once.
 */
void req_resume(struct req *r);

#endif
