/* connguard_mhd — libmicrohttpd glue of connguard (connguard_mhd.h). */
#include "connguard_mhd.h"

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"

static socklen_t sa_len(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET6) return (socklen_t)sizeof(struct sockaddr_in6);
  if (sa->sa_family == AF_INET) return (socklen_t)sizeof(struct sockaddr_in);
  return (socklen_t)sizeof(struct sockaddr);
}

enum MHD_Result connguard_mhd_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
  return connguard_admit(cls, addr, addrlen, clock_mono_ms()) ? MHD_YES : MHD_NO;
}

void connguard_mhd_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  struct connguard *g = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ad =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!fd || !ad || !ad->client_addr) return;
    *socket_context = connguard_open(g, fd->connect_fd, ad->client_addr, sa_len(ad->client_addr),
                                     clock_mono_ms());
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    connguard_close(g, *socket_context);
    *socket_context = NULL;
  }
}

static struct gconn *conn_of(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *i =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return i ? i->socket_context : NULL;
}

void connguard_mhd_head_done(struct connguard *g, struct MHD_Connection *c) {
  if (g) connguard_head_done(g, conn_of(c));
}

void connguard_mhd_answering(struct connguard *g, struct MHD_Connection *c) {
  if (g) connguard_answering(g, conn_of(c));
}

void connguard_mhd_request_done(struct connguard *g, struct MHD_Connection *c) {
  if (g) connguard_request_done(g, conn_of(c), clock_mono_ms());
}

static _Atomic int64_t closed_log;

void connguard_mhd_log(void *cls, const char *fmt, va_list ap) {
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[strcspn(msg, "\n")] = '\0';
  if (strncmp(msg, "Connection socket is closed", 27) == 0 &&
      !log_every(&closed_log, clock_mono_ms(), 1000))
    return;
  log_warn("%s: %s", (const char *)cls, msg);
}
