/* addr — listen address syntax. */
#include "addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int addr_check_listen(const char *option, const char *s, char *err, size_t errlen) {
  struct sockaddr_storage ss;
  socklen_t sl;
  if (addr_parse_listen(s, 0, &ss, &sl) == 0) return 0;
  snprintf(err, errlen, "option %s: '%s' is not host:port (IPv4 or [IPv6])", option, s);
  return -1;
}

int addr_parse_listen(const char *s, int allow_any, struct sockaddr_storage *ss, socklen_t *len) {
  char host[128];
  const char *colon = strrchr(s, ':');
  char *end;
  long port;
  size_t hl;
  if (!colon) return -1;
  port = strtol(colon + 1, &end, 10);
  if (*end || end == colon + 1 || port < 0 || port > 65535) return -1;
  hl = (size_t)(colon - s);
  if (hl >= sizeof host || (hl == 0 && !allow_any)) return -1;
  memcpy(host, s, hl);
  host[hl] = '\0';
  memset(ss, 0, sizeof *ss);
  if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    host[hl - 1] = '\0';
    if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1) return -1;
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)port);
    *len = sizeof *a6;
    return 0;
  }
  {
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    if (inet_pton(AF_INET, hl ? host : "0.0.0.0", &a4->sin_addr) != 1) return -1;
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    *len = sizeof *a4;
  }
  return 0;
}
