/* targets — refused destinations as IPv6 prefixes (see targets.h). */
#include "targets.h"

#include <arpa/inet.h>
#include <curl/curl.h>
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

int targets_init(struct targets *t, const char *list, char *err, size_t errlen) {
  const char *p = list;
  memset(t, 0, sizeof *t);
  for (size_t i = 0; i < N_BUILTIN; i++)
    if (parse_cidr(builtin[i].cidr, &t->cidr[t->n++]) < 0) return -1;
  while (p && *p) {
    char item[64];
    size_t n;
    while (*p == ' ' || *p == ',')
      p++;
    if (!*p) break;
    n = strcspn(p, ", ");
    if (n >= sizeof item || t->n >= (int)N_BUILTIN + TARGETS_MAX) {
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
    p += n;
  }
  return 0;
}

/* The reason for an address (16 bytes, IPv4 mapped), or NULL when allowed. */
static const char *refused16(const struct targets *t, const unsigned char a[16]) {
  for (int i = 0; i < t->n; i++)
    if (in_cidr(a, &t->cidr[i]))
      return i < (int)N_BUILTIN ? builtin[i].reason : "denied by --deny-targets";
  return NULL;
}

int targets_refused(const struct targets *t, const char *host, const char **reason) {
  unsigned char a[16];
  struct in_addr a4;
  char buf[80];
  size_t n = strlen(host);
  const char *why;
  /* "[v6]" as in a URL */
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof buf) {
    memcpy(buf, host + 1, n - 2);
    buf[n - 2] = '\0';
    host = buf;
  }
  if (inet_pton(AF_INET6, host, a) == 1) {
    why = refused16(t, a);
  } else if (inet_aton(host, &a4) == 1) { /* also the legacy forms a resolver accepts */
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
