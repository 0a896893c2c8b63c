/* svc — a daemon's life with its service manager: the signal loop, systemd readiness, reload
   and stop notices, and watchdog pings (libsystemd's sd_notify; no-ops without NOTIFY_SOCKET). */
#ifndef CDNCA_SVC_H
#define CDNCA_SVC_H

#include <signal.h>
#include <stdint.h>

/* Block SIGTERM, SIGINT and SIGHUP in the calling thread (threads started later inherit the
   mask), fill *set with them for svc_wait, and ignore SIGPIPE. Call before starting threads. */
void svc_block_signals(sigset_t *set);

/* Wait up to timeout_ms (< 0: forever) for one of the signals in set. Returns the signal number,
   or 0 when the time ran out. */
int svc_wait(const sigset_t *set, int64_t timeout_ms);

/* The main loop of a daemon once it is ready: sends watchdog pings on time, runs reload(arg) for
   each SIGHUP (between RELOADING=1 and READY=1 with status), and returns the SIGTERM or SIGINT
   that ends it after telling the service manager STOPPING=1. */
int svc_loop(const sigset_t *set, const char *status, void (*reload)(void *arg), void *arg);

/* How often to send watchdog pings: half of the service's WatchdogSec (from WATCHDOG_USEC for
   this process), or 0 when no watchdog is asked for. */
int64_t svc_watchdog_ping_ms(void);

/* Tell the service manager: ready (with a one-line status), reloading (SIGHUP taken), stopping,
   or alive (a watchdog ping). Each is one datagram to NOTIFY_SOCKET; nothing without it. */
void svc_ready(const char *status);
void svc_reloading(void);
void svc_stopping(void);
void svc_watchdog_ping(void);

#endif
