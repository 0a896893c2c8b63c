/* proxyproto — a strict reader of the PROXY protocol header (versions 1 and 2 of HAProxy's
 * proxy-protocol.txt) that a front proxy sends first on a connection
 * (docs/design.md#noded-behind-an-edge-cache). Fed the connection's first bytes in pieces of any
 * size, it never takes a byte past the header and keeps at most PP_KEEP bytes, whatever it is
 * sent. Pure: no I/O, no allocation. */
#ifndef CDNCA_PROXYPROTO_H
#define CDNCA_PROXYPROTO_H

#include <stddef.h>
#include <stdint.h>

/* A version 1 header is at most 107 bytes with its CRLF. */
#define PP_V1_MAX 107
/* A version 2 header's length field (the bytes after its 16 fixed ones) is refused above this. */
#define PP_V2_MAX_LEN 4096
/* The bytes kept while reading: a v1 line, or v2's 16 fixed bytes and the Unix address block. */
#define PP_KEEP 232

enum pp_status {
  PP_MORE = 0,       /* the header is not complete yet: feed more */
  PP_DONE = 1,       /* the header is complete; the result is filled */
  PP_NOT_PROXY = -1, /* the first bytes are neither signature: no PROXY header was sent */
  PP_BAD = -2        /* a PROXY header that breaks the grammar or a bound */
};

/* What a complete header says. */
struct pp_result {
  int version;  /* 1 or 2 */
  int has_addr; /* 1: src/dst are the visitor's and the proxy's addresses (TCP over IPv4 or
                   IPv6); 0: v1 UNKNOWN, v2 LOCAL, v2 UNSPEC or a Unix address: the receiver
                   keeps the connection's own addresses */
  int family;   /* AF_INET or AF_INET6 when has_addr, else AF_UNSPEC */
  char src[46]; /* text form of the source address ("" without has_addr) */
  char dst[46]; /* and of the destination */
  uint16_t sport, dport;
  size_t len; /* bytes of the whole header */
};

/* The reader's state; zero it with pp_init. */
struct pp {
  int state;
  unsigned char buf[PP_KEEP];
  size_t n;       /* bytes kept in buf */
  size_t total;   /* bytes taken so far */
  size_t v2_len;  /* v2: the length field */
  size_t v2_addr; /* v2: bytes of the address block */
  size_t left;    /* v2: bytes of the header still to come after buf */
  int v2_skip;    /* v2: the rest is skipped unread (LOCAL, UNSPEC) rather than read as TLVs */
  unsigned char tlv_head[3];
  int tlv_n;       /* bytes of the current TLV's 3-byte head seen */
  size_t tlv_left; /* bytes of the current TLV's value still to come */
  int err;         /* PP_BAD or PP_NOT_PROXY once failed (returned again), else 0 */
  const char *why; /* after PP_BAD or PP_NOT_PROXY: what was wrong (a static string) */
  struct pp_result res;
};

/* Start reading a new header. */
void pp_init(struct pp *p);

/* Take bytes from data[0, len) up to the header's end at most: *used says how many. PP_MORE when
 * all of them were taken and the header goes on; PP_DONE with *out filled (the header's last
 * byte was data[*used - 1]; the bytes after it belong to the next protocol); PP_NOT_PROXY or
 * PP_BAD with p->why set (feeding again returns the same). */
enum pp_status pp_feed(struct pp *p, const unsigned char *data, size_t len, size_t *used,
                       struct pp_result *out);

#endif
