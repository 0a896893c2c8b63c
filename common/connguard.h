/* connguard — no single client can starve an HTTP listener (docs/design.md, Restarts and
 * upgrades): a cap on the connections open from one address, and a deadline for each complete
 * request head (from the connection's start, or from the end of the previous request on a
 * keep-alive connection). A head still incomplete at its deadline has its socket shut down
 * (never closed here: the server closes it). Each refusal is counted by reason and logged at
 * most once a second; a connection past its deadline that was only idle between requests, or
 * whose client had already closed, is shut down the same way but is no refusal
 * (connguard_expiry_of). Thread-safe; used by controld's API and noded's admin listener. */
#ifndef CDNCA_CONNGUARD_H
#define CDNCA_CONNGUARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct connguard;
struct gconn; /* one guarded connection */

enum connguard_reason {
  CG_PER_IP,       /* the address had per_ip_max connections open */
  CG_HEAD_TIMEOUT, /* no whole request head in time */
  CG__N,
};

/* The metric label of each reason ("per_ip", "head_timeout"). */
const char *connguard_reason_name(enum connguard_reason r);

/* ---- pure ---- */

/* The address part of sa as text (an IPv4-mapped IPv6 address as IPv4; "unix:" for Unix
   sockets) into out: 0, or -1 for an unknown family. */
int connguard_ip_key(const struct sockaddr *sa, socklen_t len, char *out, size_t cap);

/* Whether a head begun at head_start and not done has passed timeout_ms at now. */
int connguard_head_expired(int64_t head_start, int head_done, int64_t now, int64_t timeout_ms);

/* Whether a connection holds up a drain at now (docs/design.md, Restarts and upgrades): one
   whose request is in progress (head_done), or one that has not had a request yet (requests 0)
   while its head deadline (timeout_ms, 0 = none) has not passed: a connection accepted is
   answered. One idle between requests does not. */
int connguard_conn_busy(int head_done, uint64_t requests, int64_t head_start, int64_t now,
                        int64_t timeout_ms);

/* What a connection past its head deadline was (connguard_expiry_of). */
enum connguard_expiry {
  CG_EXPIRED_HEAD, /* a request head too slow: a head_timeout refusal */
  CG_EXPIRED_IDLE, /* idle after a request, no byte since: a keep-alive timeout, not counted */
  CG_EXPIRED_GONE, /* its client had closed, nothing unread: not counted */
  CG_EXPIRED__N,
};

/* The metric label of each kind ("head", "idle", "gone"). */
const char *connguard_expiry_name(enum connguard_expiry k);

/* The kind of a connection past its head deadline, from what the sweep reads of its socket:
   peer_closed when a peek finds the end of the stream and no byte before it; rx_known when the
   kernel counts the bytes received (TCP), rx_at_answer that count when the last of requests
   done had its answer queued, rx_now the count now. Without a byte count (a Unix socket),
   a connection still open counts as a head too slow. Bytes that came before the last answer (a
   pipelined head) are not told apart: such a connection counts as idle. */
enum connguard_expiry connguard_expiry_of(uint64_t requests, int peer_closed, int rx_known,
                                          uint64_t rx_at_answer, uint64_t rx_now);

/* ---- the guard ---- */

/* A guard named listener (for messages) allowing per_ip_max connections per address (0 = no
   cap) and head_timeout_ms for each request head (0 = none). NULL on OOM. */
struct connguard *connguard_new(const char *listener, int per_ip_max, int64_t head_timeout_ms);

/* Start its sweeper thread (checks head deadlines every 100 ms). 0 or -1. */
int connguard_start(struct connguard *g);

/* Stop the sweeper, free everything; NULLs *g. The server must have closed its connections. */
void connguard_free(struct connguard **g);

/* A connection from sa is being accepted at now: 1 admit, 0 refuse (counted, logged). */
int connguard_admit(struct connguard *g, const struct sockaddr *sa, socklen_t len, int64_t now);

/* The admitted connection on fd is open at now: its record (counted against its address), or
   NULL on OOM (then it is not guarded). */
struct gconn *connguard_open(struct connguard *g, int fd, const struct sockaddr *sa, socklen_t len,
                             int64_t now);

/* c's request head is complete: no deadline until its request is done. c may be NULL. */
void connguard_head_done(struct connguard *g, struct gconn *c);

/* c's request is read whole and its answer is being queued: the bytes received so far are its
   own (connguard_expiry_of). Before the answer is sent, so a client that reads it and sends its
   next request at once is not counted idle. c may be NULL. */
void connguard_answering(struct connguard *g, struct gconn *c);

/* c's request ended at now: the next head's deadline counts from here. c may be NULL. */
void connguard_request_done(struct connguard *g, struct gconn *c, int64_t now);

/* c is closing (before its descriptor is closed): forget it. c may be NULL. */
void connguard_close(struct connguard *g, struct gconn *c);

/* Shut down the sockets whose head passed its deadline at now: how many (refusals counted for
   CG_EXPIRED_HEAD only). */
int connguard_sweep(struct connguard *g, int64_t now);

/* The connections that hold up a drain at now (connguard_conn_busy). */
int connguard_busy(struct connguard *g, int64_t now);

/* Call fn(arg, reason) at each refusal (e.g. to count it in a metrics registry); before use. */
void connguard_on_refuse(struct connguard *g, void (*fn)(void *arg, enum connguard_reason r),
                         void *arg);

/* Call fn(arg, kind) at each connection shut down at its deadline that was no refusal (kind
   CG_EXPIRED_IDLE or CG_EXPIRED_GONE; e.g. to count it in a metrics registry); before use. */
void connguard_on_idle_close(struct connguard *g, void (*fn)(void *arg, enum connguard_expiry kind),
                             void *arg);

/* Refusals so far for reason r. */
uint64_t connguard_refused(struct connguard *g, enum connguard_reason r);

/* Connections shut down at their deadline so far that were of kind k (CG_EXPIRED_HEAD: the
   head_timeout refusals). */
uint64_t connguard_expired(struct connguard *g, enum connguard_expiry k);

/* Connections open from the address of sa now. */
int connguard_open_from(struct connguard *g, const struct sockaddr *sa, socklen_t len);

#endif
