/* sdlisten — listening sockets handed over by the service manager (systemd socket activation) or
 * by the noded being upgraded (docs/design.md, Restarts and upgrades): LISTEN_FDS/LISTEN_PID
 * read through sd_listen_fds, and each received socket matched to the address of a --listen or
 * --admin-listen by its own address (TCP: family, address and port; Unix: the path). A received
 * socket that matches no configured address is an error at start. And the last step of a stop
 * for a listener of the process's own: take no new connection, so that closing it resets none. */
#ifndef CDNCA_SDLISTEN_H
#define CDNCA_SDLISTEN_H

#include <stddef.h>
#include <sys/socket.h>

#define SDLISTEN_MAX 32

/* A listening address. */
struct sdlisten_addr {
  struct sockaddr_storage sa;
  socklen_t len;
};

/* ---- pure ---- */

/* 1 when a and b are the same listening address (IPv4, IPv6: address and port; Unix: the
   path), else 0. */
int sdlisten_same(const struct sdlisten_addr *a, const struct sdlisten_addr *b);

/* The address as text ("127.0.0.1:80", "[::1]:80", "unix:/path") into out. */
void sdlisten_text(const struct sdlisten_addr *a, char *out, size_t cap);

/* Match the n received addresses got[] to the m wanted ones: idx[j] = the index in got of
   want[j]'s socket, or -1 when none was received for it. 0, or -1 with err naming a received
   socket no wanted address matches (or one received twice). */
int sdlisten_match(const struct sdlisten_addr *got, int n, const struct sdlisten_addr *want, int m,
                   int *idx, char *err, size_t errlen);

/* ---- the environment ---- */

/* Take the sockets passed in LISTEN_FDS for this process (the variables are unset): up to max
   descriptors into fds (from 3 on, made close-on-exec and non-blocking) with their addresses.
   The count (0 when none were passed), or -1 with err. */
int sdlisten_receive(int *fds, struct sdlisten_addr *addrs, int max, char *err, size_t errlen);

/* ---- a stop ---- */

/* Make TCP listener fd take no new connection, for a stop that must reset nobody: from now on
   the kernel drops every packet that reaches it (a socket filter that passes nothing), a SYN and
   a handshake's last ACK included, so once its queue has been accepted to the end it stays empty
   and closing it resets no connection; a client that connects meanwhile retries its SYN and is
   refused once the socket is closed. The connections already queued are not touched. 0, or -1
   with errno. */
int sdlisten_refuse_new(int fd);

#endif
