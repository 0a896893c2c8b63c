/* targets — which network destinations origins and webhooks may name
   (docs/design.md#errors-and-limits): link-local (cloud metadata lives there), unspecified and
   known metadata addresses are refused by default, plus an operator's --deny-targets CIDR list;
   loopback and private ranges stay allowed (CDNs use private origins). Pure. */
#ifndef CDNCA_TARGETS_H
#define CDNCA_TARGETS_H

#include <stddef.h>

/* Most CIDRs an operator may add. */
#define TARGETS_MAX 64

/* One IPv6 prefix (IPv4 is held as ::ffff:a.b.c.d/96+n). */
struct target_cidr {
  unsigned char addr[16];
  int bits;
};

/* The refused prefixes: the built-in ones and the configured ones (two lists at most: noded adds
   its own to controld's). */
struct targets {
  int n;
  struct target_cidr cidr[2 * TARGETS_MAX + 16];
};

/* Fill t with the built-in refusals, then add the comma-separated CIDRs of list (NULL or "" =
   none; "a.b.c.d", "a.b.c.d/n", "x::y", "x::y/n"). 0, or -1 with err naming the bad entry. */
int targets_init(struct targets *t, const char *list, char *err, size_t errlen);

/* The check of a daemon's --deny-targets list: 0, or -1 with err "option deny-targets: …". */
int targets_check_option(const char *list, char *err, size_t errlen);

/* Add the CIDRs of one more list (at most TARGETS_MAX of them) to an initialised t; their
   reason is "denied by --deny-targets". 0, or -1 with err naming the bad entry (t may then hold
   part of the list). */
int targets_add(struct targets *t, const char *list, char *err, size_t errlen);

/* Is host (an address literal, or a name) refused? 1 refused (reason set: "link-local",
   "unspecified", "metadata", "denied by --deny-targets"), 0 allowed. A name is allowed here (its
   addresses are not known until resolved); numeric forms a resolver would read as IPv4
   ("2852039166", "0xa9.0xfe.0xa9.0xfe", "169.254.43518") are checked as the address they are. */
int targets_refused(const struct targets *t, const char *host, const char **reason);

/* The same for a resolved socket address (struct sockaddr *, for connect-time checks). */
int targets_refused_sa(const struct targets *t, const void *sa, const char **reason);

/* Set on a curl easy handle: every address curl is about to connect to (after DNS) is checked,
   and a refused one is not connected (the transfer fails with "couldn't connect"). t must outlive
   the handle. 0 or -1. */
int targets_guard_curl(void *curl_easy, const struct targets *t);

/* What one guarded transfer met: the sockets opened and the addresses refused (the last one
   kept, with its reason), so that a failure can say the deny list, not the network, stopped it. */
struct targets_guard {
  const struct targets *t; /* set by the caller; NULL refuses nothing */
  int opened, refused;
  int sock_errno;     /* errno of the last socket() that failed (0: none): curl reports it as a
                         connect failure without it, and no descriptor is not the peer's fault */
  char addr[48];      /* the last refused address, printable */
  const char *reason; /* its reason ("denied by --deny-targets", "link-local", ...) */
};

/* targets_guard_curl that also counts into g (t taken from g->t; g must outlive the handle). */
int targets_guard_curl_note(void *curl_easy, struct targets_guard *g);

#endif
