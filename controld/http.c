/* http — libmicrohttpd glue: one access handler, a route table, bearer auth, JSON replies. */
#include "http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "addr.h"
#include "clock.h"
#include "connguard_mhd.h"
#include "httphead_mhd.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "route.h"
#include "sdlisten.h"
#include "token.h"

/* The daemon's closure: the configuration (its strings copied), the route tables, the daemon. */
struct http_srv {
  struct http_cfg cfg;
  char listen[128];
  const struct route *const *tables;
  char *tls_cert, *tls_key;
  struct MHD_Daemon *mhd;
  struct connguard *guard; /* per-address cap and request-head deadline */
  /* the listening socket, received or opened here: this acceptor hands its connections to the
     daemon, so accepting can stop while the daemon answers what was accepted (docs/design.md,
     Restarts and upgrades) */
  int listen_fd, stop_pipe[2];
  int own_fd; /* opened here: closed at the drain (a received one stays open for the next) */
  pthread_t acceptor;
  int acceptor_started;
  atomic_uint_fast64_t added, started; /* handed to the daemon; seen started by it */
  atomic_int draining;                 /* answers carry Connection: close */
  atomic_int stop_accepting;           /* the acceptor returns before its next accept */
};

/* ---- replies ---- */

static void reply_reset(struct req *r) {
  r->resp_etag[0] = '\0';
  free(r->resp_body);
  r->resp_body = NULL;
  r->resp_len = 0;
}

void req_raw(struct req *r, unsigned status, const char *ctype, char *data, size_t len) {
  reply_reset(r);
  r->status = status;
  r->resp_type = ctype;
  r->resp_body = data;
  r->resp_len = len;
  r->done = 1;
}

void req_static(struct req *r, unsigned status, const char *ctype, const void *data, size_t len) {
  char *copy = malloc(len ? len : 1);
  if (copy && len) memcpy(copy, data, len);
  req_raw(r, status, ctype, copy, copy ? len : 0);
}

void req_response(struct req *r, unsigned status, struct MHD_Response *resp) {
  reply_reset(r);
  if (r->resp_shared) MHD_destroy_response(r->resp_shared);
  r->resp_shared = resp;
  r->status = status;
  r->done = 1;
}

void req_json(struct req *r, unsigned status, cJSON *body) {
  char *text = NULL;
  if (body) {
    text = json_print(body);
    cJSON_Delete(body);
    if (!text) {
      req_error(r, 500, "internal", NULL, "out of memory");
      return;
    }
  }
  req_raw(r, status, text ? "application/json" : NULL, text, text ? strlen(text) : 0);
}

void req_error(struct req *r, unsigned status, const char *code, const char *field, const char *fmt,
               ...) {
  char msg[512];
  va_list ap;
  cJSON *root = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(root, "error");
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  cJSON_AddStringToObject(err, "code", code);
  cJSON_AddStringToObject(err, "message", msg);
  json_add_str_or_null(err, "field", field);
  req_json(r, status, root);
}

/* ---- request accessors ---- */

const char *req_query(struct req *r, const char *key) {
  return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *req_header(struct req *r, const char *key) {
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

int req_query_int(struct req *r, const char *key, int64_t min, int64_t max, int64_t def,
                  int64_t *out) {
  const char *v = req_query(r, key);
  char *end = NULL;
  long long n;
  if (!v) {
    *out = def;
    return 0;
  }
  errno = 0;
  n = strtoll(v, &end, 10);
  /* digits, with a '-' before them at most: strtoll alone would take " 5" and "+5" */
  if (errno || end == v || *end || !(isdigit((unsigned char)v[0]) || v[0] == '-') || n < min ||
      n > max) {
    req_error(r, 400, "invalid_query", key, "query parameter %s must be an integer in [%lld, %lld]",
              key, (long long)min, (long long)max);
    return -1;
  }
  *out = n;
  return 0;
}

cJSON *req_body_object(struct req *r) {
  const char *ct = req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
  struct jsonstrict_err err;
  cJSON *v;
  if (!ct || strncasecmp(ct, "application/json", 16) != 0 ||
      (ct[16] && ct[16] != ';' && ct[16] != ' ')) {
    req_error(r, 415, "unsupported_media_type", NULL, "Content-Type must be application/json");
    return NULL;
  }
  v = json_parse_strict(r->body.data, r->body.len, &err);
  if (!v) {
    const char *field = err.path[0] ? err.path : NULL;
    switch (err.rc) {
    case JSONSTRICT_DUPLICATE_KEY:
      req_error(r, 400, "duplicate_key", field, "request body: %s is given twice",
                field ? field : "a key");
      break;
    case JSONSTRICT_NUL:
    case JSONSTRICT_BAD_UTF8:
    case JSONSTRICT_LONE_SURROGATE:
      /* valid JSON, but a string that cannot be stored exactly as sent */
      req_error(r, 422, "invalid_string", field, "%s%s%s", field ? field : "", field ? ": " : "",
                jsonstrict_message(err.rc));
      break;
    case JSONSTRICT_NUMBER:
      req_error(r, 422, "out_of_range", field, "%s%s%s", field ? field : "", field ? ": " : "",
                jsonstrict_message(err.rc));
      break;
    case JSONSTRICT_NO_MEMORY:
      req_error(r, 500, "internal", NULL, "out of memory");
      break;
    case JSONSTRICT_TOO_DEEP:
      req_error(r, 400, "malformed_json", field, "request body is nested more than %d levels",
                JSONSTRICT_MAX_DEPTH);
      break;
    case JSONSTRICT_OK:
    case JSONSTRICT_SYNTAX:
    default:
      req_error(r, 400, "malformed_json", NULL, "request body is not valid JSON (at byte %zu)",
                err.offset);
      break;
    }
    return NULL;
  }
  if (!cJSON_IsObject(v)) {
    cJSON_Delete(v);
    req_error(r, 400, "malformed_json", NULL, "request body must be a JSON object");
    return NULL;
  }
  return v;
}

void req_add_header(struct req *r, const char *name, const char *value) {
  if (r->n_resp_headers >= 4) return;
  r->resp_headers[r->n_resp_headers][0] = name;
  r->resp_headers[r->n_resp_headers][1] = value;
  r->n_resp_headers++;
}

void req_set_etag(struct req *r, int64_t revision) {
  if (revision > 0)
    snprintf(r->resp_etag, sizeof r->resp_etag, "\"%lld\"", (long long)revision);
  else
    r->resp_etag[0] = '\0';
}

void req_suspend(struct req *r) {
  r->suspended = 1;
  MHD_suspend_connection(r->conn);
}

void req_resume(struct req *r) {
  atomic_store(&r->ready, 1);
  MHD_resume_connection(r->conn);
}

/* ---- auth ---- */

/* Resolve the bearer token through the API layer's hook. 0 = known (r->auth, token id and name
   set), 1 = none presented, 2 = unknown, revoked or expired, 3 = the database cannot be reached,
   4 = another storage error. */
static int authenticate(struct req *r) {
  const char *h = req_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
  struct http_identity id;
  if (!h || strncasecmp(h, "Bearer ", 7) != 0) return 1;
  h += 7;
  while (*h == ' ')
    h++;
  if (!*h || strlen(h) > 256) return 2;
  memset(&id, 0, sizeof id);
  switch (r->srv->cfg.authenticate(r->ctx, h, &id)) {
  case HTTP_ID_KNOWN:
    break;
  case HTTP_ID_UNKNOWN:
    return 2;
  case HTTP_ID_DB_DOWN:
    return 3;
  default:
    return 4;
  }
  if (id.auth == AUTH_NONE) return 2; /* a role this controld does not know: refuse */
  r->auth = id.auth;
  r->node_id = id.node_id;
  r->token_id = id.token_id;
  snprintf(r->token_name, sizeof r->token_name, "%s", id.name);
  return 0;
}

/* ---- MHD callbacks ---- */

static enum MHD_Result queue(struct req *r) {
  struct MHD_Response *resp;
  enum MHD_Result ret;
  if (r->resp_shared) {
    resp = r->resp_shared;
    r->resp_shared = NULL;
  } else {
    resp = MHD_create_response_from_buffer(r->resp_len, r->resp_body, MHD_RESPMEM_MUST_FREE);
    if (!resp) return MHD_NO;
    r->resp_body = NULL;
    if (r->resp_type) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->resp_type);
    for (int i = 0; i < r->n_resp_headers; i++)
      MHD_add_response_header(resp, r->resp_headers[i][0], r->resp_headers[i][1]);
    if (r->resp_etag[0]) MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, r->resp_etag);
    /* draining: the client opens its next connection to the next process */
    if (atomic_load(&r->srv->draining) || r->close_after)
      MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    /* a node's clock reference (docs/design.md, Failback ramp); a shared config answer has none,
       the node's other calls carry it */
    if (strncmp(r->url, "/v1/node/", 9) == 0) {
      char now[24], id[24];
      snprintf(now, sizeof now, "%lld", (long long)clock_wall_ms());
      MHD_add_response_header(resp, "X-Cdnca-Now", now);
      /* and the node's id (a node restarted from its cached config learns it from any answer;
         a shared config answer carries its own) */
      if (r->node_id > 0) {
        snprintf(id, sizeof id, "%lld", (long long)r->node_id);
        MHD_add_response_header(resp, "X-Cdnca-Node-Id", id);
      }
    }
  }
  connguard_mhd_answering(r->srv->guard, r->conn);
  ret = MHD_queue_response(r->conn, r->status, resp);
  MHD_destroy_response(resp);
  return ret;
}

struct qbuf {
  char *p;
  size_t len, cap;
  int oom;
};

static void qbuf_put(struct qbuf *q, const char *s) {
  size_t n = strlen(s);
  if (q->oom) return;
  if (q->len + n + 1 > q->cap) {
    size_t cap = (q->len + n + 1) * 2;
    char *p = realloc(q->p, cap);
    if (!p) {
      q->oom = 1;
      return;
    }
    q->p = p;
    q->cap = cap;
  }
  memcpy(q->p + q->len, s, n + 1);
  q->len += n;
}

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value) {
  (void)kind;
  qbuf_put(cls, key ? key : "");
  qbuf_put(cls, "=");
  qbuf_put(cls, value ? value : "");
  qbuf_put(cls, "&");
  return MHD_YES;
}

char *req_query_text(struct req *r) {
  struct qbuf q = {NULL, 0, 0, 0};
  qbuf_put(&q, "?");
  if (r->conn) MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_arg, &q);
  if (q.oom) {
    free(q.p);
    return NULL;
  }
  return q.p;
}

/* What a scan of the query found first. */
enum arg_fault {
  ARG_OK,
  ARG_UNKNOWN,  /* a parameter the route does not take */
  ARG_TWICE,    /* one it takes, given twice: which would count? */
  ARG_NO_VALUE, /* one it takes, with no "=" */
};

struct arg_scan {
  const char *allowed; /* the route's query list */
  enum arg_fault fault;
  char bad[65];  /* the parameter at fault (printable ASCII) */
  unsigned seen; /* bit i: the list's i-th name was given */
};

static enum MHD_Result scan_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value) {
  struct arg_scan *s = cls;
  size_t i = 0;
  int at;
  (void)kind;
  if (!route_query_allowed(s->allowed, key ? key : ""))
    s->fault = ARG_UNKNOWN;
  else if ((at = route_query_index(s->allowed, key ? key : "")) >= 0 && at < 32) {
    if (s->seen & (1u << at))
      s->fault = ARG_TWICE;
    else if (!value)
      s->fault = ARG_NO_VALUE;
    s->seen |= 1u << at;
  }
  if (s->fault == ARG_OK) return MHD_YES;
  for (const char *k = key ? key : ""; *k && i < sizeof s->bad - 1; k++)
    s->bad[i++] = (unsigned char)*k > 0x20 && (unsigned char)*k < 0x7f ? *k : '?';
  s->bad[i] = '\0';
  return MHD_NO;
}

/* The query parameters against the route's list, each once and with a value: 0, or -1 with a
   400. */
static int check_args(struct req *r) {
  struct arg_scan s;
  memset(&s, 0, sizeof s);
  s.allowed = r->route->query;
  MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, scan_query, &s);
  switch (s.fault) {
  case ARG_OK:
    return 0;
  case ARG_UNKNOWN:
    req_error(r, 400, "unknown_query_parameter", s.bad[0] ? s.bad : NULL,
              "%s %s takes no query parameter '%s' (it takes: %s)", r->method, r->route->pattern,
              s.bad, r->route->query ? r->route->query : "none");
    break;
  case ARG_TWICE:
    req_error(r, 400, "invalid_query", s.bad, "query parameter %s may be given only once", s.bad);
    break;
  case ARG_NO_VALUE:
    req_error(r, 400, "invalid_query", s.bad, "query parameter %s needs a value (%s=...)", s.bad,
              s.bad);
    break;
  }
  return -1;
}

/* The head's framing and single headers (httphead_mhd_check): 0, or -1 with a reply that closes
   the connection: what follows a head read two ways is not read at all. */
static int check_head(struct req *r, const char *version) {
  struct httphead_verdict v;
  if (httphead_mhd_check(r->conn, version, &v) == 0) return 0;
  req_error(r, v.status, v.code, v.field, "%s", v.message);
  r->close_after = 1;
  return -1;
}

/* The most bytes of body r's route takes (docs/design.md#errors-and-limits). */
static size_t body_max_of(const struct req *r) {
  return r->route && r->route->body_max ? r->route->body_max : HTTP_BODY_MAX;
}

static void too_large(struct req *r) {
  req_error(r, 413, "payload_too_large", NULL, "request body larger than %zu bytes",
            body_max_of(r));
}

/* Checks on the headers, before any body is read. 0 = go on, -1 = a reply is set. */
static int precheck(struct req *r) {
  int known = 0, a;
  char path[1024];
  const char *q = strchr(r->url, '?');
  size_t pl = q ? (size_t)(q - r->url) : strlen(r->url);
  const char *cl;

  if (pl >= sizeof path) {
    req_error(r, 404, "not_found", NULL, "no such route");
    return -1;
  }
  memcpy(path, r->url, pl);
  path[pl] = '\0';
  r->route = route_find(r->srv->tables, r->method, path, r->params, &r->nparams, &known);
  if (!r->route) {
    if (known)
      req_error(r, 405, "method_not_allowed", NULL, "method %s not allowed here", r->method);
    else
      req_error(r, 404, "not_found", NULL, "no such route");
    return -1;
  }
  if (r->route->auth != AUTH_NONE) {
    a = authenticate(r);
    if (a == 1) {
      req_error(r, 401, "unauthorized", NULL, "missing bearer token");
      return -1;
    }
    if (a == 2) {
      req_error(r, 401, "unauthorized", NULL, "unknown or revoked token");
      return -1;
    }
    if (a == 3 || a == 4) {
      /* not the client's fault: a token that cannot be checked now is neither refused (401)
         nor accepted */
      if (a == 3)
        req_error(r, 503, "db_unavailable", NULL,
                  "the database cannot be reached: nothing was changed (retry shortly)");
      else
        req_error(r, 500, "internal", NULL, "storage error while checking the token");
      return -1;
    }
    switch (route_authorize(r->route->auth, r->auth)) {
    case ROUTE_ALLOW:
      break;
    case ROUTE_FORBIDDEN_ROLE:
      req_error(r, 403, "forbidden_role", NULL, "the token's role %s may not %s %s (needs %s)",
                route_role_name(r->auth), r->method, r->route->pattern,
                route_role_name(r->route->auth));
      return -1;
    case ROUTE_WRONG_KIND:
    default:
      req_error(r, 403, "forbidden", NULL, "%s token not accepted on this route",
                r->auth == AUTH_NODE ? "a node" : "an API");
      return -1;
    }
  }
  if (check_args(r) < 0) return -1;
  cl = req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (cl) r->declared_len = strtoull(cl, NULL, 10);
  r->body.max = body_max_of(r);
  if (cl && r->declared_len > r->body.max) {
    too_large(r);
    return -1;
  }
  return 0;
}

/* The mark a request's raw path had an encoded '/' (%2F): the address is handed to on_access as
   its first *con_cls. Decoded before routing, "/v1/sites/1%2Forigins%2F5" would reach the route
   of /v1/sites/1/origins/5, past any front proxy's rule written per path. */
static char encoded_slash;

/* The request a connection's *con_cls holds: none while it is only the encoded-slash mark. */
static struct req *req_of(void *con_cls) {
  return con_cls == &encoded_slash ? NULL : con_cls;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  size_t pl = strcspn(uri, "?");
  (void)cls;
  (void)conn;
  for (size_t i = 0; i + 2 < pl; i++)
    if (uri[i] == '%' && uri[i + 1] == '2' && (uri[i + 2] == 'f' || uri[i + 2] == 'F'))
      return &encoded_slash;
  return NULL;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
  struct http_srv *srv = cls;
  struct req *r = req_of(*con_cls);
  int slash = *con_cls == &encoded_slash;

  if (!r) {
    r = calloc(1, sizeof *r);
    if (!r) return MHD_NO;
    r->ctx = srv->cfg.app;
    r->srv = srv;
    r->conn = conn;
    r->url = url;
    r->method = method;
    r->started_ms = clock_mono_ms();
    /* the head is whole: its deadline is over (a long-poll is held only from here) */
    connguard_mhd_head_done(srv->guard, conn);
    buf_init(&r->body, HTTP_BODY_MAX);
    *con_cls = r;
    /* a head that breaks the framing rules is answered at once and its connection closed: its
       body, if any, cannot be told apart from a next request */
    if (check_head(r, version) < 0) return queue(r);
    if (slash) {
      req_error(r, 404, "not_found", NULL, "no such route (an encoded '/' in a path matches none)");
      r->close_after = 1; /* its body, if any, is not read */
      return queue(r);
    }
    /* an early reply is queued once the body is in, so the connection stays open
       (keep-alive) and a client still sending can read it: a body announced as too large is
       read and dropped (up to HTTP_DRAIN_MAX). A client waiting for "100 Continue" gets the
       413 at once and sends nothing; a body beyond the drain limit closes the connection. */
    if (precheck(r) < 0 && r->status == 413) {
      const char *exp = req_header(r, "Expect");
      if ((exp && strcasecmp(exp, "100-continue") == 0) || r->declared_len > HTTP_DRAIN_MAX)
        return queue(r);
    }
    return MHD_YES;
  }
  if (*upload_data_size) {
    /* a rejected request's body is read and dropped; buf's cap bounds what is kept */
    if (!r->done && !r->body_too_large && buf_append(&r->body, upload_data, *upload_data_size) < 0)
      r->body_too_large = 1;
    if (r->done || r->body_too_large) {
      r->dropped += *upload_data_size;
      if (r->dropped > HTTP_DRAIN_MAX) return MHD_NO; /* a sender that never stops */
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (r->done && !r->suspended) return queue(r); /* the precheck reply */
  if (r->suspended) {
    if (!atomic_load(&r->ready)) return MHD_YES; /* spurious wake */
    r->suspended = 0;
    return queue(r);
  }
  if (r->body_too_large) {
    too_large(r);
    return queue(r);
  }
  if (r->route->fn(r) == HTTP_SUSPENDED) return MHD_YES;
  if (!r->done) req_error(r, 500, "internal", NULL, "handler set no reply");
  return queue(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  struct http_srv *srv = cls;
  struct req *r = req_of(*con_cls);
  char labels[200];
  connguard_mhd_request_done(srv->guard, conn);
  *con_cls = NULL;
  if (!r) return;
  snprintf(labels, sizeof labels, "route=\"%s\",code=\"%u\"",
           r->route ? r->route->pattern : "unmatched", r->status);
  metrics_add(srv->cfg.metrics, "cdnca_http_requests_total", labels, 1);
  if (r->user_free) r->user_free(r->user);
  if (r->resp_shared) MHD_destroy_response(r->resp_shared);
  free(r->resp_body);
  buf_fini(&r->body);
  free(r);
  *con_cls = NULL;
}

/* One more in the listener's series of family{listener,label=value}. */
static void count_for_listener(struct http_srv *srv, const char *family, const char *label,
                               const char *value) {
  char labels[120];
  snprintf(labels, sizeof labels, "listener=\"%s\",%s=\"%s\"", srv->cfg.name, label, value);
  metrics_add(srv->cfg.metrics, family, labels, 1);
}

/* A refusal of the guard, counted in cdnca_http_refused_total{listener,reason}. */
static void on_refuse(void *arg, enum connguard_reason why) {
  count_for_listener(arg, "cdnca_http_refused_total", "reason", connguard_reason_name(why));
}

/* A connection shut down at its deadline that was no refusal, counted in
   cdnca_http_idle_closed_total{listener,kind}. */
static void on_idle_close(void *arg, enum connguard_expiry kind) {
  count_for_listener(arg, "cdnca_http_idle_closed_total", "kind", connguard_expiry_name(kind));
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decoding of the path and query (in place), except %00: a NUL would cut the string
   and make "/v1/sites/1%00/x" act on site 1; kept as "%00" it matches no route and no integer. */
static size_t on_unescape(void *cls, struct MHD_Connection *conn, char *s) {
  char *w = s;
  (void)cls;
  (void)conn;
  for (const char *p = s; *p;) {
    int hi, lo;
    if (p[0] == '%' && (hi = hexval(p[1])) >= 0 && (lo = hexval(p[2])) >= 0 && (hi | lo)) {
      *w++ = (char)(hi * 16 + lo);
      p += 3;
    } else {
      *w++ = *p++;
    }
  }
  *w = '\0';
  return (size_t)(w - s);
}

/* ---- the acceptor of a received socket ---- */

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  struct http_srv *srv = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) atomic_fetch_add(&srv->started, 1);
  connguard_mhd_notify(srv->guard, c, socket_context, code);
}

/* Accept what the backlog holds, each connection past the per-address cap handed to the daemon,
   until it is empty or the acceptor is told to stop (until_ms 0); under a steady stream of
   connections the backlog never empties: the stop is checked before every accept. until_ms > 0:
   the last sweep, before a socket of the server's own closes (its backlog would be reset), which
   ends at that monotonic time or after 4,096 connections, whatever the daemon's pace. */
static void accept_some(struct http_srv *srv, int64_t until_ms) {
  static _Atomic int64_t last_log;
  int left = 4096;
  while (until_ms > 0 ? left-- > 0 && clock_mono_ms() < until_ms
                      : !atomic_load(&srv->stop_accepting)) {
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    int fd = accept4(srv->listen_fd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        if (log_every(&last_log, clock_mono_ms(), 1000))
          log_warn("%s listener: accept: %s", srv->cfg.name, strerror(errno));
        usleep(10000); /* out of descriptors: the backlog keeps the visitors */
      }
      break;
    }
    /* the per-address cap, as the daemon's accept policy applies it to its own accepts */
    if (!connguard_admit(srv->guard, (struct sockaddr *)&sa, sl, clock_mono_ms())) {
      close(fd);
      continue;
    }
    atomic_fetch_add(&srv->added, 1);
    /* the daemon closes fd when it refuses it (its connection cap) */
    if (MHD_add_connection(srv->mhd, fd, (struct sockaddr *)&sa, sl) != MHD_YES) {
      atomic_fetch_sub(&srv->added, 1);
      continue;
    }
    /* with a per-address cap, the daemon's thread takes it up (and connguard counts it
       against its address) before the next accept, so a burst from one address meets the cap
       as with the daemon's own accepts; one it drops without starting is written off after
       100 ms. Without a cap nothing waits: a slow start of one connection (a loaded host)
       must not hold the backlog behind it. */
    for (int i = 0;
         srv->cfg.max_per_ip > 0 && atomic_load(&srv->started) < atomic_load(&srv->added); i++) {
      if (i == 500) {
        atomic_store(&srv->added, atomic_load(&srv->started));
        break;
      }
      usleep(200);
    }
  }
}

static void *acceptor_main(void *arg) {
  struct http_srv *srv = arg;
  struct pollfd pf[2] = {{srv->listen_fd, POLLIN, 0}, {srv->stop_pipe[0], POLLIN, 0}};
  for (;;) {
    if (poll(pf, 2, -1) < 0) {
      if (errno == EINTR) continue;
      log_error("%s listener: poll: %s", srv->cfg.name, strerror(errno));
      return NULL;
    }
    if (pf[1].revents) return NULL;
    if (!(pf[0].revents & POLLIN)) continue;
    accept_some(srv, 0);
  }
}

static int acceptor_start(struct http_srv *srv) {
  int fl = fcntl(srv->listen_fd, F_GETFL);
  if (fl < 0 || fcntl(srv->listen_fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
      pipe2(srv->stop_pipe, O_CLOEXEC) < 0) {
    log_error("%s listener: %s", srv->cfg.name, strerror(errno));
    return -1;
  }
  if (pthread_create(&srv->acceptor, NULL, acceptor_main, srv) != 0) {
    log_error("%s listener: cannot start its acceptor thread", srv->cfg.name);
    return -1;
  }
  srv->acceptor_started = 1;
  return 0;
}

static void acceptor_stop(struct http_srv *srv) {
  if (!srv->acceptor_started) return;
  atomic_store(&srv->stop_accepting, 1);
  if (write(srv->stop_pipe[1], "x", 1) < 0) log_warn("cannot stop the acceptor thread");
  pthread_join(srv->acceptor, NULL);
  srv->acceptor_started = 0;
}

void http_drain(struct http_srv *srv, int64_t timeout_ms) {
  int64_t t0 = clock_mono_ms(), now;
  int busy = 0;
  if (!srv || srv->listen_fd <= 0 || !srv->acceptor_started) return;
  acceptor_stop(srv);
  atomic_store(&srv->draining, 1);
  if (srv->own_fd) { /* no next process takes this backlog: answer it, then refuse the rest */
    /* each sweep has a quarter of the drain time of its own: a steady stream that uses the
       first one's whole share still leaves the second its time to empty the queue */
    accept_some(srv, t0 + timeout_ms / 4);
    /* a TCP socket takes no new connection from here (SYNs dropped: the clients' retries are
       refused after the close), so the accept below empties its queue for good and the close
       resets nobody */
    (void)sdlisten_refuse_new(srv->listen_fd);
    accept_some(srv, clock_mono_ms() + timeout_ms / 4);
    close(srv->listen_fd);
    srv->listen_fd = -1;
  }
  for (;;) {
    int pending = atomic_load(&srv->started) < atomic_load(&srv->added);
    /* the sweeps above took their time: now is read at every turn, the first too */
    now = clock_mono_ms();
    busy = connguard_busy(srv->guard, now);
    if ((!pending && busy == 0) || now - t0 >= timeout_ms) break;
    usleep(10000);
  }
  if (busy > 0)
    log_warn("%s listener: %d connections still busy after %lld ms; closing them", srv->cfg.name,
             busy, (long long)timeout_ms);
  else
    log_info("%s listener: answered what it had accepted (%lld ms)", srv->cfg.name,
             (long long)(now - t0));
}

/* ---- lifecycle ---- */

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  char *data = NULL;
  long n;
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && n < (1 << 20) &&
      fseek(f, 0, SEEK_SET) == 0) {
    data = calloc(1, (size_t)n + 1);
    if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
      free(data);
      data = NULL;
    }
  }
  fclose(f);
  return data;
}

/* A listening socket of the server's own on ss, as libmicrohttpd would open it (SO_REUSEADDR,
   IPv6 only for an IPv6 address, the system's largest backlog), or -1 (errno set). */
static int listen_open(const struct sockaddr_storage *ss, socklen_t sl) {
  int one = 1, e, fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
      (ss->ss_family != AF_INET6 ||
       setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) == 0) &&
      bind(fd, (const struct sockaddr *)ss, sl) == 0 && listen(fd, SOMAXCONN) == 0)
    return fd;
  e = errno;
  close(fd);
  errno = e;
  return -1;
}

/* Stop srv's daemon (its acceptor stopped or never started), close its pipe, free the rest (the
   TLS key wiped). */
static void srv_free(struct http_srv *srv) {
  if (srv->mhd) MHD_stop_daemon(srv->mhd);
  if (srv->own_fd && srv->listen_fd >= 0) close(srv->listen_fd);
  for (int i = 0; i < 2; i++)
    if (srv->stop_pipe[i] >= 0) close(srv->stop_pipe[i]);
  connguard_free(&srv->guard);
  free(srv->tls_cert);
  if (srv->tls_key) token_wipe(srv->tls_key, strlen(srv->tls_key));
  free(srv->tls_key);
  free(srv);
}

struct http_srv *http_start(const struct http_cfg *cfg, const struct route *const *tables) {
  struct http_srv *srv = calloc(1, sizeof *srv);
  struct sockaddr_storage ss;
  socklen_t sl = 0;
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  struct rlimit rl;
  rlim_t want = (rlim_t)cfg->max_connections * 2 + 256;
  char gname[200];
  unsigned threads;

  if (!srv) return NULL;
  srv->cfg = *cfg;
  snprintf(srv->listen, sizeof srv->listen, "%s", cfg->listen);
  srv->cfg.listen = srv->listen;
  srv->cfg.tls_cert = srv->cfg.tls_key = NULL; /* read below, not kept as paths */
  srv->tables = tables;
  srv->listen_fd = cfg->listen_fd;
  srv->stop_pipe[0] = srv->stop_pipe[1] = -1;
  if (!srv->cfg.name) srv->cfg.name = "api";
  snprintf(gname, sizeof gname, "%s listener %s", srv->cfg.name, srv->listen);
  if (!(srv->guard = connguard_new(gname, (int)cfg->max_per_ip, cfg->head_timeout_ms))) {
    free(srv);
    return NULL;
  }
  if (srv->cfg.metrics) {
    connguard_on_refuse(srv->guard, on_refuse, srv);
    connguard_on_idle_close(srv->guard, on_idle_close, srv);
  }
  if (connguard_start(srv->guard) < 0) {
    connguard_free(&srv->guard);
    free(srv);
    return NULL;
  }
  if (addr_parse_listen(srv->listen, 0, &ss, &sl) < 0) {
    log_error("listen address '%s' is not host:port (IPv4 or [IPv6])", srv->listen);
    connguard_free(&srv->guard);
    free(srv);
    return NULL;
  }
  /* suspended long-polls count against the limits: make room for them */
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
    rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
      log_warn("cannot raise RLIMIT_NOFILE: %s", strerror(errno));
    /* short of what the cap needs: when the connections take every descriptor, accepting waits
       and a probe round or the database finds none; the operator can raise the limit or lower
       the cap */
    if (rl.rlim_max < want)
      log_warn("%s listener: the descriptor limit (RLIMIT_NOFILE) is %llu, below the %llu that "
               "%u connections need (2 each and 256 more): at that many, accepting waits and "
               "probes and the database may find no descriptor; raise the hard limit (LimitNOFILE= "
               "in the systemd unit, ulimit -Hn)%s%s",
               srv->cfg.name, (unsigned long long)rl.rlim_max, (unsigned long long)want,
               (unsigned)cfg->max_connections, cfg->cap_option ? " or lower " : "",
               cfg->cap_option ? cfg->cap_option : "");
  }
  if ((cfg->tls_cert && cfg->tls_cert[0]) || (cfg->tls_key && cfg->tls_key[0])) {
    srv->tls_cert = cfg->tls_cert ? read_file(cfg->tls_cert) : NULL;
    srv->tls_key = cfg->tls_key ? read_file(cfg->tls_key) : NULL;
    if (!srv->tls_cert || !srv->tls_key) {
      log_error("cannot read --tls-cert %s / --tls-key %s", cfg->tls_cert ? cfg->tls_cert : "",
                cfg->tls_key ? cfg->tls_key : "");
      goto fail;
    }
    flags |= MHD_USE_TLS;
  }
  if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  /* the daemon has no listening socket: the acceptor thread hands it the connections, so that a
     drain can stop accepting while the daemon answers (libmicrohttpd 0.9.75's own quiesce races
     its epoll thread); a socket of the server's own is opened here, a received one outlives it */
  if (srv->listen_fd <= 0) {
    if ((srv->listen_fd = listen_open(&ss, sl)) < 0) {
      log_error("cannot listen on %s: %s", srv->listen, strerror(errno));
      goto fail;
    }
    srv->own_fd = 1;
  }
  flags |= MHD_USE_NO_LISTEN_SOCKET;
  threads = (unsigned)cfg->http_threads;
  {
    /* with TLS: the certificate and key, and room for the TLS session in each connection */
    struct MHD_OptionItem tls[] = {{MHD_OPTION_HTTPS_MEM_CERT, 0, srv->tls_cert},
                                   {MHD_OPTION_HTTPS_MEM_KEY, 0, srv->tls_key},
                                   {MHD_OPTION_END, 0, NULL}};
    size_t conn_mem = (size_t)(srv->tls_cert ? 64 : 32) * 1024;
    srv->mhd = MHD_start_daemon(
        flags, 0, connguard_mhd_accept, srv->guard, on_access, srv, MHD_OPTION_EXTERNAL_LOGGER,
        connguard_mhd_log, (void *)"libmicrohttpd", MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        90u, MHD_OPTION_CONNECTION_MEMORY_LIMIT, conn_mem, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, srv, MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
        MHD_OPTION_ARRAY, srv->tls_cert ? tls : &tls[2], MHD_OPTION_END);
  }
  if (!srv->mhd) {
    log_error("cannot start the HTTP server for %s: %s", srv->listen, strerror(errno));
    goto fail;
  }
  if (acceptor_start(srv) < 0) goto fail;
  log_info("listening on %s%s%s", srv->listen, srv->tls_cert ? " (TLS)" : "",
           cfg->listen_fd > 0 ? " (socket received)" : "");
  return srv;
fail:
  srv_free(srv);
  return NULL;
}

void http_stop(struct http_srv **srvp) {
  struct http_srv *srv = *srvp;
  if (!srv) return;
  acceptor_stop(srv);
  srv_free(srv);
  *srvp = NULL;
}
