/* targets — refused destinations as IPv6 prefixes (see targets.h). */
#include "targets.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Built-in refusals, with why. */
static const struct {
  const char *cidr;
  const char *reason;
} builtin[] = {
    {"169.254.0.0/16", "link-local"}, /* incl. 169.254.169.254, the cloud metadata service */
    {"fe80::/10", "link-local"},
    {"0.0.0.0/8", "unspecified"}, /* "this network": 0.0.0.0 reaches the host itself */
    {"::/128", "unspecified"},
    {"100.100.100.200/32", "metadata"}, /* Alibaba Cloud metadata */
    {"fd00:ec2::254/128", "metadata"},  /* AWS metadata over IPv6 */
};
#define N_BUILTIN (sizeof builtin / sizeof builtin[0])

static void v4_mapped(const struct in_addr *a, unsigned char out[16]) {
  memset(out, 0, 10);
  out[10] = out[11] = 0xff;
  memcpy(out + 12, &a->s_addr, 4);
}

/* Parse "addr[/bits]" into c. 0 or -1. */
static int parse_cidr(const char *s, struct target_cidr *c) {
  char buf[64];
  char *slash, *end;
  long bits;
  struct in_addr a4;
  int v4;
  if (strlen(s) >= sizeof buf) return -1;
  memcpy(buf, s, strlen(s) + 1);
  slash = strchr(buf, '/');
  if (slash) *slash = '\0';
  if (inet_pton(AF_INET, buf, &a4) == 1) {
    v4_mapped(&a4, c->addr);
    v4 = 1;
  } else if (inet_pton(AF_INET6, buf, c->addr) == 1) {
    v4 = 0;
  } else {
    return -1;
  }
  if (!slash) {
    c->bits = 128;
    return 0;
  }
  bits = strtol(slash + 1, &end, 10);
  if (end == slash + 1 || *end || bits < 0 || bits > (v4 ? 32 : 128)) return -1;
  c->bits = (int)bits + (v4 ? 96 : 0);
  return 0;
}

static int in_cidr(const unsigned char a[16], const struct target_cidr *c) {
  int full = c->bits / 8, rest = c->bits % 8;
  if (memcmp(a, c->addr, (size_t)full) != 0) return 0;
  if (rest) {
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    if ((a[full] & mask) != (c->addr[full] & mask)) return 0;
  }
  return 1;
}

int targets_check_option(const char *list, char *err, size_t errlen) {
  struct targets t;
  char terr[160];
  if (targets_init(&t, list, terr, sizeof terr) == 0) return 0;
  snprintf(err, errlen, "option deny-targets: %s", terr);
  return -1;
}

int targets_init(struct targets *t, const char *list, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  for (size_t i = 0; i < N_BUILTIN; i++)
    if (parse_cidr(builtin[i].cidr, &t->cidr[t->n++]) < 0) return -1;
  return targets_add(t, list, err, errlen);
}

int targets_add(struct targets *t, const char *list, char *err, size_t errlen) {
  const char *p = list;
  int added = 0;
  while (p && *p) {
    char item[64];
    size_t n;
    while (*p == ' ' || *p == ',')
      p++;
    if (!*p) break;
    n = strcspn(p, ", ");
    if (n >= sizeof item || added >= TARGETS_MAX ||
        t->n >= (int)(sizeof t->cidr / sizeof t->cidr[0])) {
      snprintf(err, errlen, "too long a list or entry at '%.40s' (at most %d CIDRs)", p,
               TARGETS_MAX);
      return -1;
    }
    memcpy(item, p, n);
    item[n] = '\0';
    if (parse_cidr(item, &t->cidr[t->n]) < 0) {
      snprintf(err, errlen, "'%s' is not an IPv4 or IPv6 address or CIDR", item);
      return -1;
    }
    t->n++;
    added++;
    p += n;
  }
  return 0;
}

/* The reason for an address (16 bytes, IPv4 mapped), or NULL when allowed: the address itself,
   without looking inside it. */
static const char *refused_plain(const struct targets *t, const unsigned char a[16]) {
  for (int i = 0; i < t->n; i++)
    if (in_cidr(a, &t->cidr[i]))
      return i < (int)N_BUILTIN ? builtin[i].reason : "denied by --deny-targets";
  return NULL;
}

static int all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

/* The IPv4 address made of a's bytes at the given offsets (xor applied), as ::ffff:a.b.c.d. */
static void embedded_v4(const unsigned char a[16], const int at[4], unsigned char x,
                        unsigned char out[16]) {
  memset(out, 0, 10);
  out[10] = out[11] = 0xff;
  for (int i = 0; i < 4; i++)
    out[12 + i] = (unsigned char)(a[at[i]] ^ x);
}

/* The IPv6 forms that carry an IPv4 address a packet may end up at
   (docs/design.md#errors-and-limits): up to 4 of them into v4[]; returns how many. */
static int embedded(const unsigned char a[16], unsigned char v4[][16]) {
  static const unsigned char nat64[4] = {0x00, 0x64, 0xff, 0x9b};
  static const int last[4] = {12, 13, 14, 15};
  int n = 0;
  if (all_zero(a, 12)) {
    /* IPv4-compatible ::a.b.c.d; :: and ::1 are IPv6's own unspecified and loopback */
    if (!(all_zero(a + 12, 3) && a[15] <= 1)) embedded_v4(a, last, 0, v4[n++]);
  } else if (all_zero(a, 8) && a[8] == 0xff && a[9] == 0xff && a[10] == 0 && a[11] == 0) {
    embedded_v4(a, last, 0, v4[n++]); /* SIIT ::ffff:0:a.b.c.d */
  } else if (memcmp(a, nat64, 4) == 0 && all_zero(a + 4, 8)) {
    embedded_v4(a, last, 0, v4[n++]); /* NAT64 well-known prefix 64:ff9b::/96 */
  } else if (memcmp(a, nat64, 4) == 0 && a[4] == 0 && a[5] == 1) {
    /* NAT64 local-use 64:ff9b:1::/48: the prefix length (48, 56, 64 or 96) is the network's
       choice, so each place the IPv4 address can sit (RFC 6052 section 2.2) is checked when the
       bits after it are zero, as that layout requires; /96 unless a shorter one fits it */
    static const int p48[4] = {6, 7, 9, 10}, p56[4] = {7, 9, 10, 11}, p64[4] = {9, 10, 11, 12};
    if (all_zero(a + 11, 5)) embedded_v4(a, p48, 0, v4[n++]);
    if (all_zero(a + 12, 4)) embedded_v4(a, p56, 0, v4[n++]);
    if (all_zero(a + 13, 3)) embedded_v4(a, p64, 0, v4[n++]);
    if (n == 0 || !all_zero(a + 12, 4)) embedded_v4(a, last, 0, v4[n++]);
  } else if (a[0] == 0x20 && a[1] == 0x02) {
    static const int sixto4[4] = {2, 3, 4, 5}; /* 6to4 2002:AABB:CCDD::/48 */
    embedded_v4(a, sixto4, 0, v4[n++]);
  } else if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) {
    static const int server[4] = {4, 5, 6, 7}; /* Teredo 2001::/32: server, then client */
    embedded_v4(a, server, 0, v4[n++]);
    embedded_v4(a, last, 0xff, v4[n++]);
  }
  return n;
}

/* The reason for an address (16 bytes, IPv4 mapped), or NULL when allowed: the address, then
   every IPv4 address embedded in it, each against the same refusals. */
static const char *refused16(const struct targets *t, const unsigned char a[16]) {
  unsigned char v4[4][16];
  const char *why = refused_plain(t, a);
  int n = why ? 0 : embedded(a, v4);
  for (int i = 0; !why && i < n; i++)
    why = refused_plain(t, v4[i]);
  return why;
}

int targets_refused(const struct targets *t, const char *host, const char **reason) {
  unsigned char a[16];
  struct in_addr a4;
  char buf[256];
  size_t n = strlen(host);
  const char *why;
  /* "[v6]" as in a URL */
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    host++;
    n -= 2;
  }
  if (n >= sizeof buf) return 0; /* longer than any name or literal */
  memcpy(buf, host, n);
  buf[n] = '\0';
  /* a zone ("fe80::1%eth0", "%25" in a URL) does not change where the address points */
  if (strchr(buf, ':') && strchr(buf, '%')) *strchr(buf, '%') = '\0';
  /* "169.254.169.254." is a fully qualified spelling of the literal */
  for (n = strlen(buf); n > 0 && buf[n - 1] == '.'; n--)
    buf[n - 1] = '\0';
  if (inet_pton(AF_INET6, buf, a) == 1) {
    why = refused16(t, a);
  } else if (inet_aton(buf, &a4) == 1) { /* also the legacy forms a resolver accepts */
    v4_mapped(&a4, a);
    why = refused16(t, a);
  } else {
    return 0;
  }
  if (why && reason) *reason = why;
  return why != NULL;
}

/* CURLOPT_OPENSOCKETFUNCTION: refuse a denied address, else open the socket curl asked for. */
static curl_socket_t guard_open(void *clientp, curlsocktype purpose, struct curl_sockaddr *a) {
  const struct targets *t = clientp;
  (void)purpose;
  if (targets_refused_sa(t, &a->addr, NULL)) return CURL_SOCKET_BAD;
  return socket(a->family, a->socktype, a->protocol);
}

/* The same, counting into a struct targets_guard. */
static curl_socket_t guard_open_note(void *clientp, curlsocktype purpose, struct curl_sockaddr *a) {
  struct targets_guard *g = clientp;
  const char *why = NULL;
  curl_socket_t s;
  (void)purpose;
  if (g->t && targets_refused_sa(g->t, &a->addr, &why)) {
    const void *in = a->family == AF_INET6
                         ? (const void *)&((struct sockaddr_in6 *)&a->addr)->sin6_addr
                         : (const void *)&((struct sockaddr_in *)&a->addr)->sin_addr;
    if (!inet_ntop(a->family, in, g->addr, sizeof g->addr)) snprintf(g->addr, sizeof g->addr, "?");
    g->reason = why;
    g->refused++;
    return CURL_SOCKET_BAD;
  }
  s = socket(a->family, a->socktype, a->protocol);
  if (s != CURL_SOCKET_BAD)
    g->opened++;
  else
    g->sock_errno = errno;
  return s;
}

int targets_guard_curl_note(void *curl_easy, struct targets_guard *g) {
  CURLcode rc = curl_easy_setopt(curl_easy, CURLOPT_OPENSOCKETFUNCTION, guard_open_note);
  if (rc == CURLE_OK) rc = curl_easy_setopt(curl_easy, CURLOPT_OPENSOCKETDATA, (void *)g);
  return rc == CURLE_OK ? 0 : -1;
}

int targets_guard_curl(void *curl_easy, const struct targets *t) {
  CURLcode rc = curl_easy_setopt(curl_easy, CURLOPT_OPENSOCKETFUNCTION, guard_open);
  if (rc == CURLE_OK) rc = curl_easy_setopt(curl_easy, CURLOPT_OPENSOCKETDATA, (void *)t);
  return rc == CURLE_OK ? 0 : -1;
}

int targets_refused_sa(const struct targets *t, const void *sa, const char **reason) {
  const struct sockaddr *s = sa;
  unsigned char a[16];
  const char *why;
  if (s->sa_family == AF_INET) {
    v4_mapped(&((const struct sockaddr_in *)sa)->sin_addr, a);
  } else if (s->sa_family == AF_INET6) {
    memcpy(a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
  } else {
    return 0;
  }
  why = refused16(t, a);
  if (why && reason) *reason = why;
  return why != NULL;
}
