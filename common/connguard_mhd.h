/* connguard_mhd — a connguard on a libmicrohttpd daemon: pass
 *   MHD_OPTION_ACCEPT_POLICY_CALLBACK, connguard_mhd_accept, g,
 *   MHD_OPTION_NOTIFY_CONNECTION, connguard_mhd_notify, g,
 *   MHD_OPTION_EXTERNAL_LOGGER, connguard_mhd_log, "the listener's name",
 * to MHD_start_daemon, call connguard_mhd_head_done from the access handler's first call (the
 * head is complete), connguard_mhd_answering just before each MHD_queue_response and
 * connguard_mhd_request_done from the completion callback. */
#ifndef CDNCA_CONNGUARD_MHD_H
#define CDNCA_CONNGUARD_MHD_H

#include <microhttpd.h>
#include <stdarg.h>

#include "connguard.h"

/* MHD_AcceptPolicyCallback: cls is the struct connguard. */
enum MHD_Result connguard_mhd_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);

/* MHD_NotifyConnectionCallback: cls is the struct connguard. */
void connguard_mhd_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code);

/* MHD_LogCallback: cls is the name (a string) each line starts with, as a warning. The server's
   messages (a client gone mid-request, cut at its head deadline, or sending what does not parse)
   are said at most once a second in the process; the line after a pause says how many were not. */
void connguard_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

void connguard_mhd_head_done(struct connguard *g, struct MHD_Connection *c);
void connguard_mhd_answering(struct connguard *g, struct MHD_Connection *c);
void connguard_mhd_request_done(struct connguard *g, struct MHD_Connection *c);

#endif
