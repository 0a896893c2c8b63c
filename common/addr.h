/* addr — parsing listen addresses "host:port", "[v6]:port" (pure). */
#ifndef CDNCA_ADDR_H
#define CDNCA_ADDR_H

#include <sys/socket.h>

/* Parse an IPv4 "a.b.c.d:port" or IPv6 "[v6]:port" listen address into ss and *len. With
   allow_any, ":port" means every IPv4 address. 0, or -1 when it is not one of those forms. */
int addr_parse_listen(const char *s, int allow_any, struct sockaddr_storage *ss, socklen_t *len);

#endif
