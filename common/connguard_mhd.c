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

/* Every message of the server comes from what a client sent or did: at most one line a second
   in the process, the rest counted and said with the next line. */
static _Atomic int64_t mhd_log_at;
static _Atomic uint64_t mhd_log_held;

void connguard_mhd_log(void *cls, const char *fmt, va_list ap) {
  char msg[512];
  uint64_t held;
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[strcspn(msg, "\n")] = '\0';
  if (!log_every(&mhd_log_at, clock_mono_ms(), 1000)) {
    atomic_fetch_add(&mhd_log_held, 1);
    return;
  }
  held = atomic_exchange(&mhd_log_held, 0);
  if (held)
    log_warn("%s: %s (and %llu more messages of the HTTP server since the last one, not logged)",
             (const char *)cls, msg, (unsigned long long)held);
  else
    log_warn("%s: %s", (const char *)cls, msg);
}
