/* testutil — small helpers the unit tests share: sleeping, loopback sockets. */
#ifndef CDNCA_TESTUTIL_H
#define CDNCA_TESTUTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static inline void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A socket on 127.0.0.1 with an OS-chosen port (*port); listening (backlog 256) when listen_it,
 * else bound and never listening (connections to it are refused). -1 on failure. */
static inline int loopback_socket(int listen_it, int *port) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
  socklen_t len = sizeof sa;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0 || (listen_it && listen(fd, 256) != 0)) {
    close(fd);
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

#endif
