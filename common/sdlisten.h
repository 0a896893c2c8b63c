/* sdlisten — listening sockets handed over by the service manager (systemd socket activation) or
 * by the noded being upgraded (docs/design.md, Restarts and upgrades): LISTEN_FDS/LISTEN_PID
 * read through sd_listen_fds, and each received socket matched to the address of a --listen or
 * --admin-listen by its own address (TCP: family, address and port; Unix: the path). A received
 * socket that matches no configured address is an error at start. */
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

#endif
