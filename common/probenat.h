/* probenat — one plain HTTP (or tcp) probe on a socket of our own: connect, send the request,
 * read the answer with proberesp. The epoll engine of probe.c runs these for plain-HTTP and tcp
 * checks of address literals, and libcurl for the rest (HTTPS, DNS names).
 *
 * The connection is non-blocking and registered edge-triggered for both directions at once
 * (one epoll_ctl per probe); the owner's loop passes each wake-up's events to pnat_event. What
 * a probe reports matches libcurl's outcome for the same answer (tests/unit/test_probe.c runs
 * every case on both): "connect failed: <strerror>", "empty reply", "Recv failure: <strerror>",
 * and proberesp's errors for answers the edge would refuse. Not thread-safe: one owner.
 */
#ifndef CDNCA_PROBENAT_H
#define CDNCA_PROBENAT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "buf.h"
#include "proberesp.h"

struct hcheck_opts;

#define PNAT_ERROR_MAX 128

enum pnat_state {
  PNAT_CONNECTING = 0,
  PNAT_SENDING = 1, /* connected, request not all written */
  PNAT_READING = 2,
  PNAT_DONE = 3 /* finished: see connected, resp, error; the socket is closed */
};

struct pnat {
  int fd;
  int state;     /* enum pnat_state */
  int tcp;       /* a tcp check: done once connected, no request */
  int connected; /* the TCP connection was established */
  char *pending; /* the part of the request a short write left (malloc) */
  size_t pending_len, pending_off;
  struct presp resp;
  char error[PNAT_ERROR_MAX]; /* a transport failure before a status: "" = none */
  int local; /* the failure is the prober's own (pnat_errno_local, or epoll): not the origin's */
};

/* 1 when err is the prober's own shortage (no descriptor, no buffer, no memory), which says
 * nothing about the origin it was about to connect to. */
int pnat_errno_local(int err);

/* Open a non-blocking socket to sa and start connecting; register it in epfd for in/out,
 * edge-triggered, with data.u64 = tag. tcp = a tcp check; head_only, keep: see presp_init.
 * Returns the state: PNAT_CONNECTING; PNAT_SENDING when connected at once (call pnat_send with
 * ev 0); PNAT_DONE when it failed at once (error set) or a tcp check connected at once. */
int pnat_start(struct pnat *c, int epfd, uint64_t tag, const struct sockaddr *sa, socklen_t salen,
               int tcp, int head_only, int keep);

/* Handle epoll events ev on c; rbuf[0..rcap) is scratch for reads. Returns the state.
 * PNAT_SENDING with no pending bytes means "connected, the request is due": the owner builds it
 * and calls pnat_send (so a request is built only for a connection that stands). */
int pnat_event(struct pnat *c, uint32_t ev, char *rbuf, size_t rcap);

/* Write the request req[0..len) (copied when the write is short); ev are the events of the
 * wake-up that connected c: input they announced is read at once (an edge is not repeated).
 * Returns the state. */
int pnat_send(struct pnat *c, const char *req, size_t len, uint32_t ev, char *rbuf, size_t rcap);

/* Append the request of one probe to out: the lines libcurl sends, in its order —
 * "GET path HTTP/1.1" (HEAD with head), Host (host, in brackets when it is an IPv6 literal,
 * with ":port" unless port is 80), User-Agent: ua, Accept (any type), "Connection: close", then
 * the check's headers (c; NULL = none) — and the empty line. 0, or -1 when it does not fit
 * out's max (the request is then not whole: do not send it). Pure. */
int pnat_request(struct buf *out, int head, const char *path, const char *host, int port,
                 const char *ua, const struct hcheck_opts *c);

/* End c now (a timeout or a cancel): close the socket; state becomes PNAT_DONE. */
void pnat_close(struct pnat *c);

/* Free what c holds after PNAT_DONE (the kept body too). */
void pnat_free(struct pnat *c);

#endif
