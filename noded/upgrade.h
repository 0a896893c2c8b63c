/* upgrade — noded's binary upgrade on SIGUSR2 (docs/design.md, Restarts and upgrades): the
 * binary at the path noded was started from (a package may have replaced it since) is started
 * again with the same arguments and the listening sockets (LISTEN_FDS from 3, LISTEN_PID), and
 * a pipe on which it says it is ready. The old process drains once it is; a new process that
 * exits or closes the pipe first has failed, and the old one goes on serving. */
#ifndef CDNCA_UPGRADE_H
#define CDNCA_UPGRADE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The environment variable naming the readiness pipe in the new process. */
#define UPGRADE_FD_ENV "CDNCA_UPGRADE_FD"

/* A new process being started. */
struct upgrade {
  pid_t pid;
  int ready_fd; /* the read end of its readiness pipe */
  int64_t started_ms;
};

/* The running binary's path into out (at start: the file may be replaced later). 0 or -1. */
int upgrade_self_path(char *out, size_t cap);

/* Start path with argv, the n sockets fds as LISTEN_FDS, and token (if not empty) as
   CDNCA_NODE_TOKEN. 0 with *u filled, or -1 with err. */
int upgrade_spawn(struct upgrade *u, const char *path, char *const argv[], const int *fds, int n,
                  const char *token, char *err, size_t errlen);

/* How the new process fares: 1 ready, 0 still starting, -1 failed (err says how; it is reaped
   or killed when it outlives timeout_ms). */
int upgrade_poll(struct upgrade *u, int64_t now, int64_t timeout_ms, char *err, size_t errlen);

/* In the new process: tell the old one this one serves (when started by an upgrade). */
void upgrade_ready(void);

#endif
