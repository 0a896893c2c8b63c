/* trust — the front proxies noded trusts with X-Forwarded-For (--trusted-proxies,
 * docs/design.md#noded-behind-an-edge-cache): IPv4 and IPv6 CIDRs, and "unix" for the peers of
 * Unix-socket listeners. Pure. */
#ifndef CDNCA_TRUST_H
#define CDNCA_TRUST_H

#include <stddef.h>

/* CIDRs in one --trusted-proxies value at most. */
#define TRUST_MAX 64

struct trust_net {
  int family;             /* AF_INET or AF_INET6 */
  unsigned char addr[16]; /* network address, host bits zero */
  int bits;
};

struct trust {
  int n;
  struct trust_net net[TRUST_MAX];
  int unix_peers; /* "unix" was listed */
};

/* Parse "CIDR,CIDR,...,unix" (an address without /bits is one host; host bits past the prefix
 * are refused; "" trusts nobody) into t. 0, or -1 with err naming the item. */
int trust_parse(const char *text, struct trust *t, char *err, size_t errlen);

/* 1 when the address text a[0, n) (an IPv4 or IPv6 literal; an IPv4-mapped IPv6 address counts as
 * its IPv4 one; "unix:" for a Unix-socket peer) is trusted by t, else 0 (not an address too). */
int trust_has(const struct trust *t, const char *a, size_t n);

/* 1 when a[0, n) is an IPv4 or IPv6 literal (what an X-Forwarded-For item must be), else 0. */
int trust_is_addr(const char *a, size_t n);

#endif
