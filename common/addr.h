/* addr — parsing listen addresses "host:port", "[v6]:port" (pure). */
#ifndef CDNCA_ADDR_H
#define CDNCA_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* Parse an IPv4 "a.b.c.d:port" or IPv6 "[v6]:port" listen address into ss and *len. With
   allow_any, ":port" means every IPv4 address. 0, or -1 when it is not one of those forms. */
int addr_parse_listen(const char *s, int allow_any, struct sockaddr_storage *ss, socklen_t *len);

/* The check of a daemon's listen option (allow_any off): 0, or -1 with err "option NAME: 's' is
   not host:port (IPv4 or [IPv6])". */
int addr_check_listen(const char *option, const char *s, char *err, size_t errlen);

#endif
