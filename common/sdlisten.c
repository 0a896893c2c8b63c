/* sdlisten — sockets from the service manager, matched by address (sdlisten.h). */
#include "sdlisten.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

int sdlisten_same(const struct sdlisten_addr *a, const struct sdlisten_addr *b) {
  if (a->sa.ss_family != b->sa.ss_family) return 0;
  switch (a->sa.ss_family) {
  case AF_INET: {
    const struct sockaddr_in *x = (const void *)&a->sa, *y = (const void *)&b->sa;
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  case AF_INET6: {
    const struct sockaddr_in6 *x = (const void *)&a->sa, *y = (const void *)&b->sa;
    return x->sin6_port == y->sin6_port &&
           memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
  }
  case AF_UNIX: {
    const struct sockaddr_un *x = (const void *)&a->sa, *y = (const void *)&b->sa;
    return x->sun_path[0] && strncmp(x->sun_path, y->sun_path, sizeof x->sun_path) == 0;
  }
  default:
    return 0;
  }
}

void sdlisten_text(const struct sdlisten_addr *a, char *out, size_t cap) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (a->sa.ss_family == AF_INET) {
    const struct sockaddr_in *x = (const void *)&a->sa;
    inet_ntop(AF_INET, &x->sin_addr, ip, sizeof ip);
    snprintf(out, cap, "%s:%u", ip, ntohs(x->sin_port));
  } else if (a->sa.ss_family == AF_INET6) {
    const struct sockaddr_in6 *x = (const void *)&a->sa;
    inet_ntop(AF_INET6, &x->sin6_addr, ip, sizeof ip);
    snprintf(out, cap, "[%s]:%u", ip, ntohs(x->sin6_port));
  } else if (a->sa.ss_family == AF_UNIX) {
    const struct sockaddr_un *x = (const void *)&a->sa;
    snprintf(out, cap, "unix:%.*s", (int)sizeof x->sun_path, x->sun_path);
  } else {
    snprintf(out, cap, "(address family %d)", a->sa.ss_family);
  }
}

int sdlisten_match(const struct sdlisten_addr *got, int n, const struct sdlisten_addr *want, int m,
                   int *idx, char *err, size_t errlen) {
  char t[160];
  for (int j = 0; j < m; j++)
    idx[j] = -1;
  for (int i = 0; i < n; i++) {
    int hit = -1;
    for (int j = 0; j < m && hit < 0; j++)
      if (sdlisten_same(&got[i], &want[j])) hit = j;
    sdlisten_text(&got[i], t, sizeof t);
    if (hit < 0) {
      snprintf(err, errlen, "received socket %d (%s) matches no --listen or --admin-listen address",
               i + 3, t);
      return -1;
    }
    if (idx[hit] >= 0) {
      snprintf(err, errlen, "received two sockets for %s", t);
      return -1;
    }
    idx[hit] = i;
  }
  return 0;
}

int sdlisten_receive(int *fds, struct sdlisten_addr *addrs, int max, char *err, size_t errlen) {
  int n = sd_listen_fds(1);
  if (n < 0) {
    snprintf(err, errlen, "LISTEN_FDS: %s", strerror(-n));
    return -1;
  }
  if (n > max) {
    snprintf(err, errlen, "LISTEN_FDS: %d sockets passed, at most %d are used", n, max);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    int fd = SD_LISTEN_FDS_START + i, fl;
    addrs[i].len = sizeof addrs[i].sa;
    memset(&addrs[i].sa, 0, sizeof addrs[i].sa);
    if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0 ||
        getsockname(fd, (struct sockaddr *)&addrs[i].sa, &addrs[i].len) < 0) {
      snprintf(err, errlen, "received descriptor %d is not a listening stream socket", fd);
      return -1;
    }
    fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
      snprintf(err, errlen, "received descriptor %d: %s", fd, strerror(errno));
      return -1;
    }
    fds[i] = fd;
  }
  return n;
}

/* ---- a stop ---- */

int sdlisten_refuse_new(int fd) {
  /* a classic BPF program that keeps 0 bytes of every packet: the packet is dropped */
  static struct sock_filter drop_all[] = {BPF_STMT(BPF_RET | BPF_K, 0)};
  struct sock_fprog prog = {.len = 1, .filter = drop_all};
  return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
}
