/* responder — see responder.h. */
#include "responder.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

static void *responder_run(void *arg) {
  struct responder *r = arg;
  struct epoll_event evs[256];
  char buf[4096];
  for (;;) {
    int n = epoll_wait(r->ep, evs, 256, 1000);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd, is_listener = 0;
      if (fd == r->stop_pipe[0]) return NULL;
      for (int k = 0; k < N_ORIGINS; k++)
        if (fd == r->lfd[k]) is_listener = 1;
      if (is_listener) {
        for (;;) {
          int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
          struct epoll_event ev;
          if (c < 0) break;
          ev.events = EPOLLIN;
          ev.data.fd = c;
          if (epoll_ctl(r->ep, EPOLL_CTL_ADD, c, &ev) < 0) close(c);
        }
        continue;
      }
      if (read(fd, buf, sizeof buf) > 0) {
        ssize_t w = write(fd, reply, sizeof reply - 1);
        (void)w;
      }
      close(fd); /* closing also removes it from the epoll set */
    }
  }
}

int responder_start(struct responder *r) {
  struct epoll_event ev;
  memset(r, 0, sizeof *r);
  r->ep = epoll_create1(EPOLL_CLOEXEC);
  if (r->ep < 0 || pipe(r->stop_pipe) < 0) return -1;
  ev.events = EPOLLIN;
  ev.data.fd = r->stop_pipe[0];
  epoll_ctl(r->ep, EPOLL_CTL_ADD, r->stop_pipe[0], &ev);
  for (int k = 0; k < N_ORIGINS; k++) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int one = 1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    r->lfd[k] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (r->lfd[k] < 0) return -1;
    setsockopt(r->lfd[k], SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(r->lfd[k], (struct sockaddr *)&a, sizeof a) < 0 || listen(r->lfd[k], 4096) < 0 ||
        getsockname(r->lfd[k], (struct sockaddr *)&a, &len) < 0)
      return -1;
    r->port[k] = ntohs(a.sin_port);
    ev.events = EPOLLIN;
    ev.data.fd = r->lfd[k];
    epoll_ctl(r->ep, EPOLL_CTL_ADD, r->lfd[k], &ev);
  }
  return pthread_create(&r->thr, NULL, responder_run, r) == 0 ? 0 : -1;
}

void responder_stop(struct responder *r) {
  ssize_t w = write(r->stop_pipe[1], "x", 1);
  (void)w;
  pthread_join(r->thr, NULL);
  for (int k = 0; k < N_ORIGINS; k++)
    close(r->lfd[k]);
  close(r->stop_pipe[0]);
  close(r->stop_pipe[1]);
  close(r->ep);
}
