/* resolve — an origin's address to a socket address, and how long a name's answer may be kept. */
#ifndef CDNCA_RESOLVE_H
#define CDNCA_RESOLVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct resolve_result {
  struct sockaddr_storage sa;
  socklen_t salen;
  int literal;  /* 1: the address is an IP literal (never re-resolved) */
  int have_ttl; /* 1: the DNS answer's TTL is in ttl_s */
  int64_t ttl_s;
};

/* 1 when address is an IPv4 or IPv6 literal. */
int resolve_is_literal(const char *address);

/* Resolve address:port (a literal, or a name through getaddrinfo: the first address). With
 * want_ttl, a name's TTL is also read from a DNS query for its A (else AAAA) records, with a
 * short timeout; no answer leaves have_ttl 0. May block: call from a control thread.
 * 0, or -1 with the reason in err. */
int resolve_origin(const char *address, int port, int want_ttl, struct resolve_result *out,
                   char *err, size_t errlen);

#endif
