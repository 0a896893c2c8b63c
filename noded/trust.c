/* trust — trusted front proxies as CIDRs (trust.h). */
#include "trust.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* Read the address literal a[0, n) into bin (16 bytes): its family, or 0 when it is none. An
 * IPv4-mapped IPv6 address is read as IPv4. */
static int read_addr(const char *a, size_t n, unsigned char *bin) {
  char tmp[64];
  if (n == 0 || n >= sizeof tmp) return 0;
  memcpy(tmp, a, n);
  tmp[n] = '\0';
  if (inet_pton(AF_INET, tmp, bin) == 1) return AF_INET;
  if (inet_pton(AF_INET6, tmp, bin) == 1) {
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(bin, mapped, 12) == 0) {
      memmove(bin, bin + 12, 4);
      return AF_INET;
    }
    return AF_INET6;
  }
  return 0;
}

int trust_parse(const char *text, struct trust *t, char *err, size_t errlen) {
  const char *s = text;
  memset(t, 0, sizeof *t);
  while (*s) {
    const char *e = strchr(s, ','), *slash;
    size_t n = e ? (size_t)(e - s) : strlen(s), al;
    struct trust_net *net;
    int maxbits;
    if (n == 4 && memcmp(s, "unix", 4) == 0) {
      t->unix_peers = 1;
      goto next;
    }
    if (t->n >= TRUST_MAX) {
      snprintf(err, errlen, "option trusted-proxies: more than %d networks", TRUST_MAX);
      return -1;
    }
    net = &t->net[t->n];
    slash = memchr(s, '/', n);
    al = slash ? (size_t)(slash - s) : n;
    if (!(net->family = read_addr(s, al, net->addr)) ||
        (al && memchr(s, ':', al) && net->family == AF_INET)) {
      snprintf(err, errlen, "option trusted-proxies: '%.*s' is not an IPv4 or IPv6 CIDR or unix",
               (int)(n > 64 ? 64 : n), s);
      return -1;
    }
    maxbits = net->family == AF_INET ? 32 : 128;
    net->bits = maxbits;
    if (slash) {
      const char *d = slash + 1;
      size_t dl = n - al - 1;
      int v = 0;
      if (dl == 0 || dl > 3 || (dl > 1 && d[0] == '0')) goto bad_bits;
      for (size_t i = 0; i < dl; i++) {
        if (d[i] < '0' || d[i] > '9') goto bad_bits;
        v = v * 10 + (d[i] - '0');
      }
      if (v > maxbits) goto bad_bits;
      net->bits = v;
    }
    for (int b = net->bits; b < maxbits; b++)
      if (net->addr[b / 8] & (0x80 >> (b % 8))) {
        snprintf(err, errlen,
                 "option trusted-proxies: '%.*s' has address bits set past its prefix length",
                 (int)(n > 64 ? 64 : n), s);
        return -1;
      }
    t->n++;
  next:
    if (!e) break;
    s = e + 1;
    if (!*s) {
      snprintf(err, errlen, "option trusted-proxies: an empty item");
      return -1;
    }
    continue;
  bad_bits:
    snprintf(err, errlen, "option trusted-proxies: '%.*s' has a bad prefix length",
             (int)(n > 64 ? 64 : n), s);
    return -1;
  }
  if (text[0] == ',') {
    snprintf(err, errlen, "option trusted-proxies: an empty item");
    return -1;
  }
  return 0;
}

int trust_has(const struct trust *t, const char *a, size_t n) {
  unsigned char bin[16];
  int fam;
  if (n == 5 && memcmp(a, "unix:", 5) == 0) return t->unix_peers;
  if (!t->n || !(fam = read_addr(a, n, bin))) return 0;
  for (int i = 0; i < t->n; i++) {
    const struct trust_net *net = &t->net[i];
    int full = net->bits / 8, rest = net->bits % 8;
    if (net->family != fam) continue;
    if (memcmp(bin, net->addr, (size_t)full) != 0) continue;
    if (rest && ((bin[full] ^ net->addr[full]) & (0xff << (8 - rest)) & 0xff)) continue;
    return 1;
  }
  return 0;
}

int trust_is_addr(const char *a, size_t n) {
  unsigned char bin[16];
  return read_addr(a, n, bin) != 0;
}
