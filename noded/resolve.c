/* resolve — origin addresses: literals, getaddrinfo, and the TTL from a DNS query. */
#include "resolve.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <string.h>

int resolve_is_literal(const char *address) {
  unsigned char buf[16];
  return inet_pton(AF_INET, address, buf) == 1 || inet_pton(AF_INET6, address, buf) == 1;
}

/* The smallest TTL of the answer's records of type type: 1 and *ttl, else 0. */
static int answer_ttl(const unsigned char *ans, int len, int type, int64_t *ttl) {
  ns_msg msg;
  int found = 0;
  if (ns_initparse(ans, len, &msg) < 0) return 0;
  for (int i = 0; i < ns_msg_count(msg, ns_s_an); i++) {
    ns_rr rr;
    if (ns_parserr(&msg, ns_s_an, i, &rr) < 0) break;
    if ((int)ns_rr_type(rr) != type) continue;
    if (!found || (int64_t)ns_rr_ttl(rr) < *ttl) *ttl = (int64_t)ns_rr_ttl(rr);
    found = 1;
  }
  return found;
}

/* The name's TTL from a DNS query (A, else AAAA), one try with a 1 s timeout. */
static int query_ttl(const char *name, int64_t *ttl) {
  struct __res_state st;
  unsigned char ans[4096];
  static const int types[] = {ns_t_a, ns_t_aaaa};
  int found = 0;
  memset(&st, 0, sizeof st);
  if (res_ninit(&st) != 0) return 0;
  st.retrans = 1; /* a slow resolver delays only the next refresh, never a request */
  st.retry = 1;
  for (size_t i = 0; i < sizeof types / sizeof types[0] && !found; i++) {
    int n = res_nquery(&st, name, ns_c_in, types[i], ans, sizeof ans);
    if (n > 0) found = answer_ttl(ans, n, types[i], ttl);
  }
  res_nclose(&st);
  return found;
}

int resolve_origin(const char *address, int port, int want_ttl, struct resolve_result *out,
                   char *err, size_t errlen) {
  struct sockaddr_in *s4 = (struct sockaddr_in *)&out->sa;
  struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->sa;
  struct addrinfo hints, *res = NULL;
  char portstr[8];
  int rc;
  memset(out, 0, sizeof *out);
  if (inet_pton(AF_INET, address, &s4->sin_addr) == 1) {
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    out->salen = sizeof *s4;
    out->literal = 1;
    return 0;
  }
  if (inet_pton(AF_INET6, address, &s6->sin6_addr) == 1) {
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    out->salen = sizeof *s6;
    out->literal = 1;
    return 0;
  }
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  snprintf(portstr, sizeof portstr, "%d", port);
  rc = getaddrinfo(address, portstr, &hints, &res);
  if (rc != 0 || !res || res->ai_addrlen > sizeof out->sa) {
    snprintf(err, errlen, "cannot resolve %s: %s", address, rc ? gai_strerror(rc) : "no address");
    if (res) freeaddrinfo(res);
    return -1;
  }
  memcpy(&out->sa, res->ai_addr, res->ai_addrlen);
  out->salen = (socklen_t)res->ai_addrlen;
  freeaddrinfo(res);
  if (want_ttl) out->have_ttl = query_ttl(address, &out->ttl_s);
  return 0;
}
