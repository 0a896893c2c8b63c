/* admin — the admin HTTP listener of noded. */
#include "admin.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "addr.h"
#include "connguard_mhd.h"
#include "httphead_mhd.h"
#include "json.h"
#include "log.h"

/* The admin listener's own limits, apart from the visitor port's: monitoring needs a handful of
 * connections, so 1024 is generous. A request head must be whole within ADMIN_HEAD_TIMEOUT_MS of
 * the connection's start or of its last request's end (slow-header clients; docs/design.md,
 * Restarts and upgrades): so an idle connection is dropped after 10 s, by the guard, which counts
 * it as an idle close, and idle floods clear quickly. The server's own inactivity timeout is a
 * second longer: it only ends a client that stops reading an answer. Its descriptors come from the
 * reserve the proxy keeps out of its visitor cap. */
#define ADMIN_MAX_CONNECTIONS 1024u
#define ADMIN_HEAD_TIMEOUT_MS 10000
#define ADMIN_IDLE_TIMEOUT_S 11u

struct admin {
  struct admin_src src;
  struct MHD_Daemon *mhd;
  struct connguard *guard;
};

/* Queue data (malloc'd, taken) as the answer; close: the connection closes after it. */
static enum MHD_Result answer(struct admin *a, struct MHD_Connection *c, unsigned status,
                              const char *ctype, char *data, size_t len, int close) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
  enum MHD_Result ret;
  if (!r) {
    free(data);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  if (close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  connguard_mhd_answering(a->guard, c);
  ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result reply(struct admin *a, struct MHD_Connection *c, unsigned status,
                             const char *ctype, char *data, size_t len) {
  return answer(a, c, status, ctype, data, len, 0);
}

static enum MHD_Result reply_error(struct admin *a, struct MHD_Connection *c, unsigned status,
                                   const char *code, const char *msg) {
  cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
  char *t;
  cJSON_AddStringToObject(e, "code", code);
  cJSON_AddStringToObject(e, "message", msg);
  cJSON_AddNullToObject(e, "field");
  t = json_print(j);
  cJSON_Delete(j);
  if (!t) return MHD_NO;
  return reply(a, c, status, "application/json", t, strlen(t));
}

/* A head that could be read two ways (httphead_mhd_check): answered at once, the connection
   closed, its body never read. */
static enum MHD_Result reply_head_refused(struct admin *a, struct MHD_Connection *c,
                                          const struct httphead_verdict *v) {
  cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
  char *t;
  cJSON_AddStringToObject(e, "code", v->code);
  cJSON_AddStringToObject(e, "message", v->message);
  if (v->field)
    cJSON_AddStringToObject(e, "field", v->field);
  else
    cJSON_AddNullToObject(e, "field");
  t = json_print(j);
  cJSON_Delete(j);
  if (!t) return MHD_NO;
  return answer(a, c, v->status, "application/json", t, strlen(t), 1);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
  struct admin *a = cls;
  static int first_call;
  if (!*con_cls) {
    struct httphead_verdict v;
    connguard_mhd_head_done(a->guard, c);
    *con_cls = &first_call; /* headers only: wait for the (ignored) body */
    if (httphead_mhd_check(c, version, &v) < 0) return reply_head_refused(a, c, &v);
    return MHD_YES;
  }
  if (*upload_size) {
    *upload_size = 0;
    return MHD_YES;
  }
  if (strcmp(url, "/healthz") != 0 && strcmp(url, "/status") != 0 && strcmp(url, "/metrics") != 0)
    return reply_error(a, c, 404, "not_found", "no such route");
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
    return reply_error(a, c, 405, "method_not_allowed", "only GET is allowed here");
  if (strcmp(url, "/healthz") == 0) {
    static const char ok[] = "{\"status\":\"ok\",\"version\":\"" CDNCA_VERSION "\"}";
    char *t = strdup(ok);
    if (!t) return MHD_NO;
    return reply(a, c, 200, "application/json", t, strlen(t));
  }
  if (strcmp(url, "/status") == 0) {
    cJSON *j = cJSON_CreateObject();
    char *t;
    if (a->src.status && a->src.status(a->src.arg, j) < 0) {
      cJSON_Delete(j);
      return reply_error(a, c, 500, "internal", "cannot build the status");
    }
    t = json_print(j);
    cJSON_Delete(j);
    if (!t) return MHD_NO;
    return reply(a, c, 200, "application/json", t, strlen(t));
  }
  {
    struct buf b;
    size_t len;
    buf_init(&b, 0);
    if ((a->src.metrics && a->src.metrics(a->src.arg, &b) < 0) || buf_puts(&b, "") < 0) {
      buf_fini(&b);
      return reply_error(a, c, 500, "internal", "cannot render the metrics");
    }
    len = b.len;
    return reply(a, c, 200, "text/plain; version=0.0.4", buf_take(&b), len);
  }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  struct admin *a = cls;
  (void)con_cls;
  (void)toe;
  connguard_mhd_request_done(a->guard, c);
}

int admin_metrics(struct admin *a, struct buf *out) {
  if (buf_printf(out, "# HELP cdnca_node_admin_refused_total admin listener connections refused or "
                      "closed, by reason (per_ip: the address had --max-connections-per-ip open; "
                      "head_timeout: no whole request head in time)\n"
                      "# TYPE cdnca_node_admin_refused_total counter\n") < 0)
    return -1;
  for (int r = 0; r < CG__N; r++)
    if (buf_printf(out, "cdnca_node_admin_refused_total{reason=\"%s\"} %llu\n",
                   connguard_reason_name(r),
                   (unsigned long long)(a && a->guard ? connguard_refused(a->guard, r) : 0)) < 0)
      return -1;
  if (buf_printf(out, "# HELP cdnca_node_admin_idle_closed_total admin listener connections shut "
                      "down at the request-head deadline that were no refusal, by kind (idle: no "
                      "byte since its last answer; gone: its client had closed)\n"
                      "# TYPE cdnca_node_admin_idle_closed_total counter\n") < 0)
    return -1;
  for (int k = CG_EXPIRED_IDLE; k < CG_EXPIRED__N; k++)
    if (buf_printf(out, "cdnca_node_admin_idle_closed_total{kind=\"%s\"} %llu\n",
                   connguard_expiry_name(k),
                   (unsigned long long)(a && a->guard ? connguard_expired(a->guard, k) : 0)) < 0)
      return -1;
  return 0;
}

int admin_listen_fd(const struct admin *a) {
  const union MHD_DaemonInfo *i =
      a && a->mhd ? MHD_get_daemon_info(a->mhd, MHD_DAEMON_INFO_LISTEN_FD) : NULL;
  return i ? (int)i->listen_fd : -1;
}

struct admin *admin_start(const char *listen, int fd, int max_per_ip, const struct admin_src *src) {
  struct admin *a = calloc(1, sizeof *a);
  struct sockaddr_storage ss;
  socklen_t sl;
  /* ITC wakes the thread at stop, so the listening socket is never shut down: after an upgrade or
     under socket activation another process accepts on it */
  unsigned flags =
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_USE_ITC;
  if (!a) return NULL;
  a->src = *src;
  if (addr_parse_listen(listen, 0, &ss, &sl) < 0) {
    log_error("option admin-listen: '%s' is not host:port (IPv4 or [IPv6])", listen);
    free(a);
    return NULL;
  }
  if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  {
    char name[200];
    snprintf(name, sizeof name, "admin listener %s", listen);
    a->guard = connguard_new(name, max_per_ip, ADMIN_HEAD_TIMEOUT_MS);
    if (!a->guard || connguard_start(a->guard) < 0) {
      connguard_free(&a->guard);
      free(a);
      return NULL;
    }
  }
  a->mhd = MHD_start_daemon(flags, 0, connguard_mhd_accept, a->guard, on_access, a,
                            MHD_OPTION_EXTERNAL_LOGGER, connguard_mhd_log, (void *)"admin listener",
                            MHD_OPTION_NOTIFY_CONNECTION, connguard_mhd_notify, a->guard,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, a, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                            MHD_OPTION_CONNECTION_LIMIT, ADMIN_MAX_CONNECTIONS,
                            MHD_OPTION_CONNECTION_TIMEOUT, ADMIN_IDLE_TIMEOUT_S, MHD_OPTION_END);
  if (!a->mhd) {
    log_error("cannot listen on the admin address %s", listen);
    connguard_free(&a->guard);
    free(a);
    return NULL;
  }
  log_info("admin listener on %s%s", listen, fd >= 0 ? " (socket received)" : "");
  return a;
}

void admin_stop(struct admin **ap) {
  struct admin *a = *ap;
  if (!a) return;
  if (a->mhd) MHD_stop_daemon(a->mhd);
  connguard_free(&a->guard);
  free(a);
  *ap = NULL;
}
