/* drain — noded's graceful stop and binary upgrade as decisions (docs/design.md, Restarts and
 * upgrades): what a signal does in each state of the process, and what a visitor connection
 * gets once the proxy drains. Pure: no I/O, time passed in. */
#ifndef CDNCA_DRAIN_H
#define CDNCA_DRAIN_H

#include <stddef.h>
#include <stdint.h>

/* The life of the process after it became ready. */
enum drain_state {
  DRAIN_SERVING,   /* serving visitors */
  DRAIN_UPGRADING, /* a new binary was started with the listeners; waiting for its readiness */
  DRAIN_DRAINING,  /* no new connections; in-flight requests finish until the deadline */
  DRAIN_ENDING,    /* every connection is being closed now */
};

/* What to do for a signal. */
enum drain_cmd {
  DRAIN_CMD_NONE,    /* nothing (e.g. a second SIGUSR2 while an upgrade is running) */
  DRAIN_CMD_RELOAD,  /* SIGHUP: reopen the log and reload, as while serving */
  DRAIN_CMD_DRAIN,   /* the first SIGTERM or SIGINT: start draining */
  DRAIN_CMD_END,     /* a second SIGTERM or SIGINT while draining: close everything now */
  DRAIN_CMD_UPGRADE, /* SIGUSR2 while serving: start the new binary with the listeners */
};

/* The command for signal sig in state st. */
enum drain_cmd drain_on_signal(enum drain_state st, int sig);

/* What an open visitor connection gets while the proxy drains. */
enum drain_conn {
  DRAIN_CONN_KEEP,  /* a request is on it (or its head is arriving): let it finish */
  DRAIN_CONN_CLOSE, /* idle between requests with nothing read: close at once */
};

/* A connection between requests (between_requests: no request started, head not begun) with
   buffered bytes of the next request head read so far, at now against the drain deadline:
   idle ones close at once, all close once the deadline has passed. */
enum drain_conn drain_conn_decide(int between_requests, size_t buffered, int64_t now,
                                  int64_t deadline);

/* Whether the response being started may keep the connection open: never while draining
   (the visitor gets Connection: close and opens its next connection elsewhere or to the new
   process), else when the visitor asked for keep-alive and nothing forces a close. */
int drain_keepalive(int draining, int visitor_keepalive, int must_close);

#endif
