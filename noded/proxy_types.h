/* proxy_types — the state the proxy's modules share: struct proxy behind proxy.h, its worker
 * threads, a visitor connection and the request in progress on it, the phases a connection goes
 * through, the counters, and the limits more than one module applies. No functions. */
#ifndef CDNCA_PROXY_TYPES_H
#define CDNCA_PROXY_TYPES_H

#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "alog.h"
#include "buf.h"
#include "http1.h"
#include "listen.h"
#include "proxy_opts.h"
#include "proxy_state.h"
#include "proxyproto.h"
#include "rewrite.h"
#include "sbuf.h"
#include "sitecfg.h"
#include "trust.h"
#include "upstream.h"

/* A request or response head is at most 32 KiB (nginx's large_client_header_buffers allow
 * 4 x 8 KiB): larger request heads get 431, larger response heads fail the attempt. */
#define HEAD_MAX 32768
/* The visitor input buffer is allocated at the first byte (an idle connection holds none), starts
 * at 16 KiB (most heads fit) and grows once to 64 KiB, the most a body is buffered ahead of a
 * slow origin before reading from the visitor pauses. */
#define IN_INIT 16384
#define IN_CAP 65536
/* Origin response bytes buffered ahead of a slow visitor before reading the origin pauses. */
#define UIN_CAP 65536
/* A connection holds a pipe only while a spliced body passes; a worker keeps this many empty
 * ones for the next (docs/design.md#the-edge-http-path, Splice). */
#define PIPE_CACHE 8

/* What an epoll event's data.ptr points to: its first int says which. */
enum ev_kind { EV_LISTEN = 1, EV_WAKE, EV_VISITOR, EV_UPSTREAM };

/* Outcome of one origin attempt (its log word and metric label: attempt_results in proxy.c). */
enum attempt_result {
  AR_SUCCESS = 0,
  AR_STATUS,
  AR_CONNECT,
  AR_TIMEOUT,
  AR_TLS,
  AR_IO,
  AR_TARGET,  /* the origin's address is a refused target: no connection was made */
  AR_REFUSED, /* an answer noded refuses to relay (framing, an unrequested 101): not a failure */
  AR__N
};

/* Why a connection on a proxy-protocol listener was closed before its first request (the
 * metric label of each: pp_errors in proxy.c). */
enum pp_error {
  PPE_MISSING = 0, /* its first bytes are no PROXY header */
  PPE_MALFORMED,   /* a PROXY header that breaks the grammar or a bound */
  PPE_INCOMPLETE,  /* closed, or silent past the header timeout, before a whole header */
  PPE__N
};

/* The visitor connection's phase; one request at a time goes through them in order. */
enum vphase {
  V_HEAD = 0,     /* reading a request head (an idle keep-alive connection too) */
  V_LOCAL,        /* writing an answer of noded's own (an error, 404, 502/504) */
  V_AWAIT_ORIGIN, /* an attempt connects, sends the request, waits for the response head */
  V_RESPONSE,     /* the origin's response streams to the visitor */
  V_TUNNEL,       /* after a 101: bytes are relayed both ways until one side closes */
  V_PROXY         /* a proxy-protocol listener's connection: reading its PROXY header first */
};

#define CINC(x) atomic_fetch_add_explicit(&(x), 1, memory_order_relaxed)

struct counters {
  _Atomic uint64_t codes[600];
  _Atomic uint64_t attempts[AR__N];
  _Atomic uint64_t retries, skips, fail_open, backup_picks;
  _Atomic uint64_t ramp_to, ramp_from; /* requests of a ramping site sent to its ramp level, and
                                          to its current level */
  _Atomic uint64_t pp_errors[PPE__N];
};

struct worker;

/* The request in progress on a visitor connection. */
struct req {
  int active; /* between the parsed head and the access log line */
  int64_t t_start;
  struct sitecfg_site *site;
  struct rewrite_req rq;   /* the visitor request after the head rules */
  struct http1_body vbody; /* framing of the visitor's body */
  struct buf ubase;        /* request line + forwarded headers, without Host and the empty line */
  struct buf uhead;        /* ubase + Host for the current attempt */
  size_t uhead_off;        /* bytes of uhead written to the origin */
  uint64_t tried;          /* bit i: origins[i] was tried */
  int attempts, oidx, last_fail;
  int64_t t_attempt; /* when the current attempt's pick was made (its answer's latency) */
  int start_level;   /* the level the first pick started on (a failback ramp's, or the current) */
  int status;        /* the status the visitor gets */
  const char *local_code; /* the code of noded's own error answer, NULL when none */
  int have_pick;     /* the pick may hold a half-open trial slot until an outcome is recorded */
  int request_sent;  /* bytes of this attempt's head reached the origin
                        (docs/design.md#node-skip-and-retry) */
  int body_sent;     /* bytes of the body reached the origin (the same retry rule) */
  int up_werr;       /* writing to the origin failed: wait for whatever it answers */
  int up_eof;        /* V_TUNNEL: the origin closed its side */
  int stale_retry;   /* a closed pooled connection was replaced once already */
  int sent_continue; /* noded answered "100 Continue" itself (the origin's is not forwarded) */
  struct proxy_pick pick;
  struct upconn *up;
  char ukey[320];          /* the pool key of the current attempt's origin */
  int64_t up_last;         /* last progress with the origin (connect and origin timeouts) */
  size_t uscan;            /* http1_head_end position in uin */
  struct http1_body ubody; /* framing of the origin's response body */
  int rchunked;            /* the response body is chunked: decoded from uin into rout */
  int rencode;             /* ... and re-encoded as chunks (an HTTP/1.1 visitor) */
  int up_keepalive;        /* the origin connection may go back to the pool after the response */
  int resp_started;        /* the visitor's status is chosen (for the access log on a close) */
  uint64_t bytes_out;
};

struct vconn {
  int kind; /* EV_VISITOR; first member */
  int fd;
  struct worker *w;
  struct vconn *prev, *next, *rnext, *gnext;
  enum vphase phase;
  int in_ready; /* queued on w->ready (its pump budget ran out) */
  int can_read; /* edge-triggered readiness of fd */
  int can_write;
  int hup;            /* the peer's FIN or an error was reported: read until EOF */
  int closed;         /* closed, freed at the end of the loop turn */
  int peer_eof;       /* the visitor closed its side */
  int close_after;    /* close once the current response is written */
  int64_t last_io;    /* last byte read or written */
  int64_t last_read;  /* last byte read (body timeout) */
  int64_t head_start; /* V_HEAD: first byte of this head (or accept); 0 while idle keep-alive */
  char ip[64];        /* the client: the PROXY header's source, else the socket peer ("unix:") */
  struct pp *pp;      /* V_PROXY: the header being read (freed once it is read) */
  struct sbuf in;     /* visitor bytes: [sent, fwd) length-framed body waiting for the origin */
  size_t head_scan;
  struct buf oh; /* head bytes for the visitor (interim and final heads, local answers) */
  size_t oh_off;
  struct sbuf uin;  /* origin bytes: [sent, fwd) length-framed body waiting for the visitor */
  struct sbuf bout; /* a chunked request body re-framed for the origin */
  struct sbuf rout; /* a chunked response body re-framed (or decoded) for the visitor */
  int pfd[2];       /* the pipe a response body is spliced through, when has_pipe */
  int has_pipe;
  int spliced; /* this response's body: 1 through the pipe (relay.c), -1 no pipe, 0 not yet */
  size_t plen; /* body bytes in the pipe, not yet written to the visitor */
  struct req r;
};

struct tag {
  int kind;
};

/* One listener in a worker's epoll: TCP ones are the worker's own (SO_REUSEPORT), a Unix one is
 * shared by every worker (struct listener's fd). */
struct wlisten {
  int kind; /* EV_LISTEN; first member */
  int fd;
  int own;            /* this process alone listens on it (not received): the stop accepts what
                         its backlog holds, then shuts it down */
  int proxy_protocol; /* each connection starts with a PROXY header */
  int is_unix;
};

/* A --listen value and, for a Unix socket, its one descriptor and socket file. */
struct listener {
  struct listen_spec spec;
  int fd;        /* the socket every worker accepts on */
  int inherited; /* received from systemd or the process before an upgrade: never shut down
                    here, and its Unix socket file is not ours to remove */
  dev_t dev;
  ino_t ino;
};

struct worker {
  struct proxy *p;
  int idx, started;
  pthread_t th;
  int epfd, wfd;
  struct wlisten wl[LISTEN_MAX];
  int nwl;
  struct tag wtag;
  struct vconn *conns;
  int n_conns;
  struct vconn *ready, *vgrave;
  struct upstream *ups; /* origin connections and pools of this worker */
  struct http1_msg msg; /* the head being parsed (request or response), one at a time */
  struct buf logbuf;    /* the access line being formatted */
  struct alog *alog;    /* access lines waiting to be written */
  struct counters ctr;
  int pipes[PIPE_CACHE][2]; /* empty pipes for the next spliced body (relay.c) */
  int n_pipes;
  struct sitecfg_set *cfg;
  uint64_t cfg_gen;
  int stopping;
  int accept_paused; /* the listeners are out of epoll until resume_at (cap or EMFILE) */
  int64_t resume_at;
  int64_t accept_backoff; /* current pause after an accept() failure, ms */
  int64_t stop_deadline, now, last_sweep;
};

struct proxy {
  struct proxy_opts o;
  char *listen, *ca_file, *trusted;
  struct listener ls[LISTEN_MAX];
  int nls;
  struct trust trust; /* --trusted-proxies */
  SSL_CTX *ssl;
  struct proxy_state *state;
  pthread_mutex_t cfg_mu;
  struct sitecfg_set *cfg;
  _Atomic uint64_t cfg_gen;
  int nthreads, port, started, stopped;
  _Atomic int max_conns;        /* the visitor cap in force: max_connections within the fd limit,
                                   followed every sweep (the limit may change, prlimit) */
  _Atomic int n_conns;          /* visitor connections open, all workers */
  _Atomic int64_t last_cap_log; /* the "accept paused" line is logged at most once a second */
  _Atomic int64_t last_refused_log; /* and the "response refused" line */
  _Atomic int64_t last_target_log;  /* and the "refused target" line */
  _Atomic int64_t last_pp_log;      /* and the "PROXY header refused" line */
  _Atomic int stopping;
  _Atomic int ending;            /* close every connection now (a second SIGTERM) */
  _Atomic int workers_done;      /* workers whose loop has ended */
  _Atomic int keep_paths;        /* the listeners were handed over: Unix socket files stay */
  _Atomic int workers_swept;     /* workers that have accepted their last at the stop */
  _Atomic uint64_t probe_skips;  /* skips started by the node's own probes */
  _Atomic int64_t *clock_offset; /* controld's clock minus ours (ms); NULL = 0 (proxy_set_clock) */
  struct worker *w;
};

#endif
