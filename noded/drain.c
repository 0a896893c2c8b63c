/* drain — graceful stop and upgrade decisions (drain.h). */
#include "drain.h"

#include <signal.h>

enum drain_cmd drain_on_signal(enum drain_state st, int sig) {
  int term = sig == SIGTERM || sig == SIGINT;
  switch (st) {
  case DRAIN_SERVING:
    if (term) return DRAIN_CMD_DRAIN;
    if (sig == SIGHUP) return DRAIN_CMD_RELOAD;
    if (sig == SIGUSR2) return DRAIN_CMD_UPGRADE;
    return DRAIN_CMD_NONE;
  case DRAIN_UPGRADING:
    /* a stop while the new binary starts: both stop (each drains what it accepted) */
    if (term) return DRAIN_CMD_DRAIN;
    if (sig == SIGHUP) return DRAIN_CMD_RELOAD;
    return DRAIN_CMD_NONE;
  case DRAIN_DRAINING:
    return term ? DRAIN_CMD_END : DRAIN_CMD_NONE;
  case DRAIN_ENDING:
  default:
    return DRAIN_CMD_NONE;
  }
}

enum drain_conn drain_conn_decide(int between_requests, size_t buffered, int64_t now,
                                  int64_t deadline) {
  if (now >= deadline) return DRAIN_CONN_CLOSE;
  if (between_requests && buffered == 0) return DRAIN_CONN_CLOSE;
  return DRAIN_CONN_KEEP;
}

int drain_keepalive(int draining, int visitor_keepalive, int must_close) {
  return !draining && visitor_keepalive && !must_close;
}
