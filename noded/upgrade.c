/* upgrade — re-executing noded with its listening sockets (upgrade.h). */
#include "upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define HIGH_FD 200

int upgrade_self_path(char *out, size_t cap) {
  ssize_t n = readlink("/proc/self/exe", out, cap - 1);
  if (n <= 0 || (size_t)n >= cap - 1) return -1;
  out[n] = '\0';
  return 0;
}

static int env_skip(const char *e) {
  static const char *const names[] = {"LISTEN_FDS=",      "LISTEN_PID=",       "LISTEN_FDNAMES=",
                                      UPGRADE_FD_ENV "=", "CDNCA_NODE_TOKEN=", NULL};
  for (int i = 0; names[i]; i++)
    if (strncmp(e, names[i], strlen(names[i])) == 0) return 1;
  return 0;
}

int upgrade_spawn(struct upgrade *u, const char *path, char *const argv[], const int *fds, int n,
                  const char *token, char *err, size_t errlen) {
  size_t ne = 0, k = 0;
  char **envp;
  char listen_fds[32], listen_pid[32] = "LISTEN_PID=", ready[48], *tok = NULL;
  int pfd[2];
  pid_t pid;
  for (char **e = environ; *e; e++)
    ne++;
  if (!(envp = calloc(ne + 5, sizeof *envp))) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (pipe2(pfd, O_CLOEXEC) < 0) {
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    free(envp);
    return -1;
  }
  snprintf(listen_fds, sizeof listen_fds, "LISTEN_FDS=%d", n);
  snprintf(ready, sizeof ready, "%s=%d", UPGRADE_FD_ENV, 3 + n);
  for (char **e = environ; *e; e++)
    if (!env_skip(*e)) envp[k++] = *e;
  envp[k++] = listen_fds;
  envp[k++] = listen_pid; /* its number is written by the child */
  envp[k++] = ready;
  if (token && token[0]) {
    size_t tl = strlen(token) + sizeof "CDNCA_NODE_TOKEN=";
    if ((tok = malloc(tl))) {
      snprintf(tok, tl, "CDNCA_NODE_TOKEN=%s", token);
      envp[k++] = tok;
    }
  }
  envp[k] = NULL;
  pid = fork();
  if (pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    close(pfd[0]);
    close(pfd[1]);
    free(tok);
    free(envp);
    return -1;
  }
  if (pid == 0) { /* the child: async-signal-safe calls only */
    sigset_t none;
    int hi[64], me = (int)getpid(), len = 0;
    char digits[16];
    /* out of the way first (a socket may sit where another one goes), then in place; dup2
       clears close-on-exec */
    for (int i = 0; i < n && i < 63; i++)
      hi[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, HIGH_FD);
    hi[n] = fcntl(pfd[1], F_DUPFD_CLOEXEC, HIGH_FD);
    for (int i = 0; i <= n; i++)
      if (hi[i] < 0 || dup2(hi[i], 3 + i) < 0) _exit(127);
    do {
      digits[len++] = (char)('0' + me % 10);
      me /= 10;
    } while (me);
    for (int i = 0; i < len; i++)
      listen_pid[11 + i] = digits[len - 1 - i];
    listen_pid[11 + len] = '\0';
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(path, argv, envp);
    _exit(127);
  }
  close(pfd[1]);
  if (tok) {
    memset(tok, 0, strlen(tok));
    free(tok);
  }
  free(envp);
  u->pid = pid;
  u->ready_fd = pfd[0];
  (void)fcntl(pfd[0], F_SETFL, O_NONBLOCK);
  return 0;
}

int upgrade_poll(struct upgrade *u, int64_t now, int64_t timeout_ms, char *err, size_t errlen) {
  char c;
  int st;
  ssize_t r = read(u->ready_fd, &c, 1);
  if (r == 1) {
    close(u->ready_fd);
    u->ready_fd = -1;
    return 1;
  }
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
    snprintf(err, errlen, "the new process (pid %d) ended before it was ready", (int)u->pid);
  } else if (waitpid(u->pid, &st, WNOHANG) == u->pid) {
    snprintf(err, errlen, "the new process (pid %d) exited (status %d) before it was ready",
             (int)u->pid, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    close(u->ready_fd);
    u->ready_fd = -1;
    return -1;
  } else if (now - u->started_ms > timeout_ms) {
    snprintf(err, errlen, "the new process (pid %d) was not ready within %lld ms; killed",
             (int)u->pid, (long long)timeout_ms);
    kill(u->pid, SIGKILL);
  } else {
    return 0;
  }
  close(u->ready_fd);
  u->ready_fd = -1;
  (void)waitpid(u->pid, &st, 0);
  return -1;
}

void upgrade_ready(void) {
  const char *v = getenv(UPGRADE_FD_ENV);
  char *end;
  long fd;
  if (!v) return;
  errno = 0;
  fd = strtol(v, &end, 10);
  if (errno || *end || fd < 3 || fd > 1023) {
    unsetenv(UPGRADE_FD_ENV);
    return;
  }
  unsetenv(UPGRADE_FD_ENV);
  if (write((int)fd, "1", 1) != 1) { /* the old process is gone: nothing to tell */
  }
  close((int)fd);
}
