/* probe — batch HTTP(S) origin health probes over one libcurl multi handle. */
#include "probe.h"

#include "curlhead.h"
#include "hcheck.h"
#include "log.h"
#include "probenat.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME_MAX 253
#define PROBE_PATH_MAX 2048
#define PROBE_URL_MAX (PROBE_NAME_MAX + PROBE_PATH_MAX + 32)
#define PROBE_POLL_MS 100
/* Events taken from epoll per wake-up; more ready sockets are simply served on the next turn. */
#define PROBE_EVENTS 256
/* epoll data of a socket of our own: this bit and the slot number (libcurl's carry the fd). */
#define PROBE_NATIVE_TAG (UINT64_C(1) << 63)
/* Read scratch of the native probes: one read takes a small answer whole. */
#define PROBE_RBUF 65536

/* How long libcurl may keep the CA store it built from the CA file before reading it again. */
#define PROBE_CA_CACHE_S 600L

/* One reusable transfer: an easy handle and the state of the probe it currently runs. The easy
 * handle keeps its fixed options across probes; only a probe's own options are set per probe. */
struct probe_slot {
  CURL *easy;                      /* created on first use, kept across runs */
  int busy;                        /* 1 while a probe runs on this slot */
  int fixed_set;                   /* 1 when easy carries the fixed options (slot_setup_fixed) */
  int connect_only;                /* 1 when the last probe was a tcp check (CONNECT_ONLY) */
  struct curl_slist connect_to;    /* this probe's CONNECT_TO entry, data = conn */
  struct curl_slist *own_headers;  /* request headers of a check with extra headers; freed when
                                      the probe ends (others share probe.headers) */
  const struct hcheck_opts *check; /* the target's options (never NULL while running) */
  size_t idx;                      /* index of the target/result */
  size_t body_bytes;               /* body bytes seen so far */
  char *body;                      /* the first HCHECK_BODY_MAX bytes, only with expected_body */
  int headers_done;                /* 1 once a final (>= 200) header block is complete */
  struct curlhead head;            /* the answer's head and trailers: bounded, one framing */
  char errbuf[CURL_ERROR_SIZE];
  char conn[PROBE_NAME_MAX + 16]; /* "::address:port" */
  struct targets_guard guard;     /* the prober's refused targets (t NULL: none) and this
                                     probe's sockets: a socket() that failed keeps its errno */
  /* a probe on a socket of our own (PROBE_ENGINE_EPOLL, probenat.h) */
  int native;         /* 1 while nat runs this slot's probe */
  int timed_out;      /* its deadline passed */
  int hpos;           /* index in probe.heap, -1 when not there */
  int64_t start_us;   /* monotonic µs at its start */
  int64_t connect_at; /* monotonic ms: the connect phase's deadline */
  int64_t end_at;     /* monotonic ms: the whole probe's deadline */
  int64_t due;        /* the heap key: connect_at while connecting, then end_at */
  struct pnat nat;
};

struct probe {
  CURLM *multi;
  enum probe_engine engine;
  int epfd;         /* the epoll loop: the sockets libcurl asked us to watch, and our own */
  int64_t timer_at; /* the epoll loop: monotonic ms libcurl wants to be called at; -1 none */
  /* test seams (probe.h): a loop in place of the epoll loop, a hook on each easy handle */
  probe_loop_fn *loop;
  probe_easy_fn *easy_hook;
  void *easy_ud;
  /* the batch probe_run is working on, for probe_loop_collect */
  const struct probe_target *run_targets;
  struct probe_result *run_results;
  char *user_agent;
  char *ca_file;
  int ca_cacheable; /* 1 = CAPATH cleared so that libcurl builds the CA store once (probe_new) */
  struct curl_slist *headers; /* "Connection: close": the headers of a check without its own */
  int max_conc;
  const struct targets *deny;
  struct probe_slot *slots; /* max_conc entries */
  size_t *idle;             /* stack of idle slot numbers */
  size_t nidle;
  /* PROBE_ENGINE_EPOLL's own sockets */
  int *heap; /* slot numbers of the running native probes, a min-heap on slot.due */
  int nheap;
  char *rbuf;     /* PROBE_RBUF bytes of read scratch */
  struct buf req; /* the request being written, bounded by its longest form */
};

/* The options of a target without its own: the seed's rule. */
static const struct hcheck_opts default_check = {
    .type = HCHECK_HTTP, .method = HCHECK_GET, .level_min_healthy = 1};

static void result_fail(struct probe_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void result_fail(struct probe_result *r, const char *fmt, ...) {
  va_list ap;
  r->ok = 0;
  va_start(ap, fmt);
  vsnprintf(r->error, sizeof r->error, fmt, ap);
  va_end(ap);
}

/* The probe was not made for a reason of the prober's own: no verdict on the origin. */
static void result_internal(struct probe_result *r, const char *what) {
  result_fail(r, "internal: %s", what);
  r->local = 1;
}

/* 1 when s is a DNS name or IPv4 literal we are willing to put in a URL. */
static int name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > PROBE_NAME_MAX) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '-' || c == '_'))
      return 0;
  }
  return 1;
}

/* 1 when s is an IPv6 literal without brackets. */
static int ipv6_ok(const char *s) {
  struct in6_addr a;
  return strchr(s, ':') != NULL && inet_pton(AF_INET6, s, &a) == 1;
}

static int host_ok(const char *s) {
  return ipv6_ok(s) || name_ok(s);
}

/* 1 when path is an absolute, printable-ASCII request target without a fragment. */
static int path_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > PROBE_PATH_MAX || s[0] != '/') return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c <= 0x20 || c >= 0x7f || c == '#') return 0;
  }
  return 1;
}

/* A validated target: where to connect and what to ask. */
struct target_parts {
  const struct hcheck_opts *check;
  const char *scheme; /* "http" for a tcp check */
  const char *host;   /* Host header, SNI */
  const char *path;
  int port; /* the check's port, else the origin's */
  int v6h;  /* host is an IPv6 literal */
  int v6a;  /* address is an IPv6 literal */
};

/* Check target t and fill parts; 0, or -1 with why. */
static int target_parts(const struct probe_target *t, struct target_parts *tp, char *why,
                        size_t why_cap) {
  const struct hcheck_opts *c = t->check ? t->check : &default_check;
  if (!t->scheme || (strcmp(t->scheme, "http") != 0 && strcmp(t->scheme, "https") != 0)) {
    snprintf(why, why_cap, "scheme must be http or https");
    return -1;
  }
  if (!t->address || !host_ok(t->address)) {
    snprintf(why, why_cap, "bad address");
    return -1;
  }
  if (t->port < 1 || t->port > 65535 || c->port < 0 || c->port > 65535) {
    snprintf(why, why_cap, "bad port");
    return -1;
  }
  tp->check = c;
  tp->port = c->port > 0 ? c->port : t->port;
  /* tcp: a plain connect, no TLS and no request, whatever the origin's scheme */
  tp->scheme = c->type == HCHECK_TCP ? "http" : t->scheme;
  tp->host = (t->host && t->host[0]) ? t->host : t->address;
  if (!host_ok(tp->host)) {
    snprintf(why, why_cap, "bad host");
    return -1;
  }
  tp->path = (t->path && t->path[0]) ? t->path : "/";
  if (!path_ok(tp->path)) {
    snprintf(why, why_cap, "bad path");
    return -1;
  }
  tp->v6h = ipv6_ok(tp->host);
  tp->v6a = ipv6_ok(t->address);
  return 0;
}

/* libcurl's form of a validated target: the URL and the CONNECT_TO entry; 0 or -1 with why. */
static int target_curl(const struct probe_target *t, const struct target_parts *tp, char *url,
                       size_t url_cap, char *conn, size_t conn_cap, char *why, size_t why_cap) {
  int n = snprintf(url, url_cap, "%s://%s%s%s:%d%s", tp->scheme, tp->v6h ? "[" : "", tp->host,
                   tp->v6h ? "]" : "", tp->port, tp->path);
  if (n < 0 || (size_t)n >= url_cap) {
    snprintf(why, why_cap, "url too long");
    return -1;
  }
  /* Empty HOST and PORT match whatever the URL names: every connection goes to address:port. */
  n = snprintf(conn, conn_cap, "::%s%s%s:%d", tp->v6a ? "[" : "", t->address, tp->v6a ? "]" : "",
               tp->port);
  if (n < 0 || (size_t)n >= conn_cap) {
    snprintf(why, why_cap, "address too long");
    return -1;
  }
  return 0;
}

/* Body sink: keep the first HCHECK_BODY_MAX bytes when the check looks for a marker, else count
 * and drop; cut the transfer past PROBE_BODY_MAX. */
static size_t on_body(char *data, size_t size, size_t nmemb, void *ud) {
  struct probe_slot *s = ud;
  size_t n = size * nmemb;
  if (s->check->expected_body[0] && s->body_bytes < HCHECK_BODY_MAX) {
    size_t take = HCHECK_BODY_MAX - s->body_bytes;
    if (take > n) take = n;
    if (!s->body) s->body = malloc(HCHECK_BODY_MAX);
    if (!s->body) return 0; /* out of memory: the body reads as missing (body mismatch) */
    memcpy(s->body + s->body_bytes, data, take);
  }
  s->body_bytes += n;
  if (s->body_bytes > PROBE_BODY_MAX) return 0;
  return n;
}

/* Header sink: bound the head and trailers and refuse a second framing (curlhead); note when a
 * final response's header block is complete. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *ud) {
  struct probe_slot *s = ud;
  size_t n = size * nmemb;
  if (curlhead_line(&s->head, data, n) < 0) return 0; /* the transfer ends: s->head.why */
  if ((n == 2 && data[0] == '\r' && data[1] == '\n') || (n == 1 && data[0] == '\n')) {
    long code = 0;
    if (curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code >= 200)
      s->headers_done = 1;
  }
  return n;
}

static int is_tls_error(CURLcode rc) {
  switch (rc) {
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_ENGINE_NOTFOUND:
  case CURLE_SSL_ENGINE_SETFAILED:
  case CURLE_SSL_ENGINE_INITFAILED:
  case CURLE_SSL_SHUTDOWN_FAILED:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
  case CURLE_SSL_INVALIDCERTSTATUS:
  case CURLE_SSL_CLIENTCERT:
  case CURLE_USE_SSL_FAILED:
    return 1;
  default:
    return 0;
  }
}

static void text_set(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Format into out (cap bytes), truncating: error texts are bounded by PROBE_ERROR_MAX. */
static void text_set(char *out, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, cap, fmt, ap);
  va_end(ap);
}

/* Put the transport failure of a transfer that got no response into words (r->error). */
static void transport_error(struct probe_slot *s, CURLcode rc, const struct probe_target *t,
                            char *out, size_t cap) {
  long oserr = 0;
  const char *detail = s->errbuf[0] ? s->errbuf : curl_easy_strerror(rc);
  switch (rc) {
  case CURLE_OPERATION_TIMEDOUT:
    text_set(out, cap, "timeout");
    break;
  case CURLE_COULDNT_CONNECT:
    curl_easy_getinfo(s->easy, CURLINFO_OS_ERRNO, &oserr);
    if (oserr > 0) {
      char eb[96];
      text_set(out, cap, "connect failed: %s", strerror_r((int)oserr, eb, sizeof eb));
    } else {
      text_set(out, cap, "connect failed: %s", detail);
    }
    break;
  case CURLE_COULDNT_RESOLVE_HOST:
    text_set(out, cap, "resolve failed: %s", t->address);
    break;
  case CURLE_GOT_NOTHING:
    text_set(out, cap, "empty reply");
    break;
  case CURLE_OK:
    text_set(out, cap, "incomplete response head");
    break;
  default:
    if (is_tls_error(rc))
      text_set(out, cap, "tls: %s", detail);
    else
      text_set(out, cap, "%s", detail);
    break;
  }
}

/* Fill r from a finished transfer on slot s with curl result rc: what was seen, judged by the
 * target's options (hcheck_judge). */
static void slot_finish(struct probe_slot *s, CURLcode rc, const struct probe_target *t,
                        struct probe_result *r) {
  long code = 0;
  curl_off_t total_us = 0, connect_us = 0, tls_us = 0;
  struct hcheck_outcome out;
  char terr[PROBE_ERROR_MAX];
  int https = s->check->type == HCHECK_HTTP && strcmp(t->scheme, "https") == 0;

  memset(&out, 0, sizeof out);
  if (curl_easy_getinfo(s->easy, CURLINFO_TOTAL_TIME_T, &total_us) == CURLE_OK && total_us > 0)
    r->latency_ms = (int)((total_us + 999) / 1000);
  curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_getinfo(s->easy, CURLINFO_CONNECT_TIME_T, &connect_us);
  curl_easy_getinfo(s->easy, CURLINFO_APPCONNECT_TIME_T, &tls_us);
  /* established = TCP connected, and for https the handshake (certificate checked) done too */
  out.connected = https ? tls_us > 0 : connect_us > 0;
  if (s->check->type == HCHECK_TCP && rc == CURLE_OK) out.connected = 1;
  out.timed_out = rc == CURLE_OPERATION_TIMEDOUT;
  /* a status counts only with its whole header block: libcurl 7.88 ends a transfer whose
     connection closed inside the head with CURLE_OK and the status line's code */
  if (s->check->type == HCHECK_HTTP && s->head.why) {
    out.connected = 1; /* an answer came, and it was refused */
    out.timed_out = 0;
    out.error = s->head.why;
  } else if (s->check->type == HCHECK_HTTP && s->headers_done && code >= 100 && code <= 999) {
    out.connected = 1;
    out.timed_out = 0;
    out.status = (int)code;
    out.body = s->body;
    out.body_len = s->body_bytes < HCHECK_BODY_MAX ? s->body_bytes : HCHECK_BODY_MAX;
    if (!s->body) out.body_len = 0;
  } else if (s->check->type == HCHECK_HTTP || rc != CURLE_OK) {
    transport_error(s, rc, t, terr, sizeof terr);
    out.error = terr;
  }
  r->status = out.status;
  r->ok = hcheck_judge(s->check, &out, r->error, sizeof r->error);
  /* no socket or no memory on our side: the origin was never asked */
  if (!r->ok && !out.connected &&
      (rc == CURLE_OUT_OF_MEMORY || rc == CURLE_FAILED_INIT ||
       (rc == CURLE_COULDNT_CONNECT && s->guard.opened == 0 &&
        pnat_errno_local(s->guard.sock_errno)))) {
    char eb[96];
    r->local = 1;
    if (s->guard.sock_errno)
      text_set(r->error, sizeof r->error, "connect failed: %s",
               strerror_r(s->guard.sock_errno, eb, sizeof eb));
  }
}

/* Set the options every probe shares on s->easy (after init or reset); 0 or -1. They stay set
 * across probes: libcurl keeps options until curl_easy_reset. */
static int slot_setup_fixed(struct probe *p, struct probe_slot *s) {
  CURL *e = s->easy;
  CURLcode rc = CURLE_OK;

  /* Checked together: a failure here means a libcurl built without a feature we need. */
  rc |= curl_easy_setopt(e, CURLOPT_PRIVATE, s);
  rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  rc |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  rc |= curl_easy_setopt(e, CURLOPT_PROXY, "");
  rc |= curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  rc |= curl_easy_setopt(e, CURLOPT_USERAGENT, p->user_agent);
  rc |= curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  rc |= curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
  rc |= curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
  /* No DNS cache: libcurl 7.88 keeps one entry per distinct address:port (CONNECT_TO's literal
     addresses too) for 60 s and a transfer's cost grew with their number (bench_probe --spread:
     1,271 probes per CPU-second at 30,000 distinct addresses, 15,500 without the cache). A name
     is then resolved afresh for every probe, as a health check should. */
  rc |= curl_easy_setopt(e, CURLOPT_DNS_CACHE_TIMEOUT, 0L);
  rc |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  rc |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  rc |= curl_easy_setopt(e, CURLOPT_SSL_SESSIONID_CACHE, 0L);
  if (p->ca_file) rc |= curl_easy_setopt(e, CURLOPT_CAINFO, p->ca_file);
  /* libcurl reuses the CA store it built (kept in the multi handle) only when the CAs come from
     a CA file alone; with a CA directory too it reads the file again for every connection. */
  if (p->ca_cacheable) {
    rc |= curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    rc |= curl_easy_setopt(e, CURLOPT_CA_CACHE_TIMEOUT, PROBE_CA_CACHE_S);
  }
  rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
  rc |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  rc |= curl_easy_setopt(e, CURLOPT_HEADERDATA, s);
  rc |= curlhead_bound_wire(e, &s->head);
  rc |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
  s->guard.t = p->deny;
  if (targets_guard_curl_note(e, &s->guard) < 0) rc |= CURLE_FAILED_INIT;
  if (rc == CURLE_OK && p->easy_hook && p->easy_hook(e, p->easy_ud) < 0) rc = CURLE_FAILED_INIT;
  return rc == CURLE_OK ? 0 : -1;
}

/* Set the options of this probe (each of them, every time, so none leaks from the previous
 * probe on the slot); 0 or -1. */
static int slot_setup(struct probe_slot *s, const struct probe_target *t, const char *url) {
  CURL *e = s->easy;
  long timeout = t->timeout_ms > 0 ? t->timeout_ms : PROBE_DEFAULT_TIMEOUT_MS;
  long ctimeout = timeout < PROBE_CONNECT_TIMEOUT_CAP_MS ? timeout : PROBE_CONNECT_TIMEOUT_CAP_MS;
  CURLcode rc = CURLE_OK;

  rc |= curl_easy_setopt(e, CURLOPT_URL, url);
  rc |= curl_easy_setopt(e, CURLOPT_CONNECT_TO, &s->connect_to);
  if (s->check->type == HCHECK_TCP) rc |= curl_easy_setopt(e, CURLOPT_CONNECT_ONLY, 1L);
  if (s->check->method == HCHECK_HEAD)
    rc |= curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  else
    rc |= curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  rc |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, s->own_headers);
  rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout);
  rc |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, ctimeout);
  return rc == CURLE_OK ? 0 : -1;
}

/* Free what one probe held on its slot. */
static void slot_clear(struct probe *p, struct probe_slot *s) {
  if (s->own_headers != p->headers) curl_slist_free_all(s->own_headers);
  s->own_headers = NULL;
  s->busy = 0;
  free(s->body);
  s->body = NULL;
}

/* The slot's request headers: Connection: close and the check's own; a check without its own
 * shares the prober's list. 0 or -1. */
static int slot_headers(struct probe *p, struct probe_slot *s) {
  struct curl_slist *l, *n;
  char line[HCHECK_HEADER_NAME_MAX + HCHECK_HEADER_VALUE_MAX + 4];
  if (s->check->n_headers == 0) {
    s->own_headers = p->headers;
    return 0;
  }
  l = curl_slist_append(NULL, "Connection: close");
  if (!l) return -1;
  for (int i = 0; i < s->check->n_headers; i++) {
    snprintf(line, sizeof line, "%s: %s", s->check->headers[i].name, s->check->headers[i].value);
    n = curl_slist_append(l, line);
    if (!n) {
      curl_slist_free_all(l);
      return -1;
    }
    l = n;
  }
  s->own_headers = l;
  return 0;
}

static int native_start(struct probe *p, struct probe_slot *s, const struct probe_target *t,
                        const struct target_parts *tp, size_t i, struct probe_result *r);

/* Start target i on an idle slot. 1 = started (slot taken), 0 = result already final. */
static int probe_start(struct probe *p, const struct probe_target *t, size_t i,
                       struct probe_result *r) {
  char url[PROBE_URL_MAX];
  char why[64];
  struct probe_slot *s = &p->slots[p->idle[p->nidle - 1]];
  struct target_parts tp;
  int tcp;

  if (target_parts(t, &tp, why, sizeof why) != 0) {
    result_fail(r, "invalid target: %s", why);
    return 0;
  }
  if (p->engine == PROBE_ENGINE_EPOLL && !p->loop &&
      (tp.check->type == HCHECK_TCP || strcmp(tp.scheme, "http") == 0))
    switch (native_start(p, s, t, &tp, i, r)) {
    case 1:
      p->nidle--;
      return 1;
    case 0:
      return 0;
    default:
      break; /* a DNS name: libcurl resolves it */
    }
  if (target_curl(t, &tp, url, sizeof url, s->conn, sizeof s->conn, why, sizeof why) != 0) {
    result_fail(r, "invalid target: %s", why);
    return 0;
  }
  if (!s->easy) {
    s->easy = curl_easy_init();
    if (!s->easy) {
      result_internal(r, "curl_easy_init failed");
      return 0;
    }
    s->fixed_set = 0;
  }
  s->idx = i;
  s->check = t->check ? t->check : &default_check;
  tcp = s->check->type == HCHECK_TCP;
  /* CONNECT_ONLY is the one per-probe option that cannot be switched off again by setting it:
     a slot goes back to a clean handle after a tcp check (and before one, so it starts clean). */
  if (s->fixed_set && (s->connect_only || tcp)) {
    curl_easy_reset(s->easy);
    s->fixed_set = 0;
  }
  s->connect_only = tcp;
  s->body_bytes = 0;
  s->headers_done = 0;
  curlhead_init(&s->head, 0, s->check->method == HCHECK_HEAD);
  s->errbuf[0] = '\0';
  s->guard.opened = s->guard.refused = s->guard.sock_errno = 0;
  s->connect_to.data = s->conn;
  s->connect_to.next = NULL;
  s->busy = 1;
  if (slot_headers(p, s) < 0) {
    result_internal(r, "out of memory");
    goto fail;
  }
  if (!s->fixed_set) {
    if (slot_setup_fixed(p, s) != 0) {
      result_internal(r, "curl option rejected");
      goto fail;
    }
    s->fixed_set = 1;
  }
  if (slot_setup(s, t, url) != 0) {
    result_internal(r, "curl option rejected");
    goto fail;
  }
  if (curl_multi_add_handle(p->multi, s->easy) != CURLM_OK) {
    result_internal(r, "curl_multi_add_handle failed");
    goto fail;
  }
  p->nidle--;
  return 1;
fail:
  slot_clear(p, s);
  return 0;
}

/* Detach a slot from the multi handle and return it to the idle stack. */
static void slot_release(struct probe *p, struct probe_slot *s) {
  curl_multi_remove_handle(p->multi, s->easy);
  slot_clear(p, s);
  p->idle[p->nidle++] = (size_t)(s - p->slots);
}

/* Collect finished transfers into results. */
static void probe_drain(struct probe *p, const struct probe_target *targets,
                        struct probe_result *results) {
  CURLMsg *msg;
  int left = 0;
  while ((msg = curl_multi_info_read(p->multi, &left)) != NULL) {
    char *priv = NULL;
    struct probe_slot *s;
    if (msg->msg != CURLMSG_DONE) continue;
    if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv) != CURLE_OK || !priv) continue;
    s = (struct probe_slot *)(void *)priv;
    slot_finish(s, msg->data.result, &targets[s->idx], &results[s->idx]);
    slot_release(p, s);
  }
}

/* ---- probes on sockets of our own (PROBE_ENGINE_EPOLL): plain HTTP and tcp to literals ---- */

static int64_t mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The deadlines of the running native probes: a binary min-heap of slot numbers on slot.due,
 * each slot knowing its place (hpos), so that a probe that ends leaves it at once and the heap
 * never holds more than the probes in flight. */
static int heap_less(const struct probe *p, int a, int b) {
  return p->slots[p->heap[a]].due < p->slots[p->heap[b]].due;
}

static void heap_swap(struct probe *p, int a, int b) {
  int t = p->heap[a];
  p->heap[a] = p->heap[b];
  p->heap[b] = t;
  p->slots[p->heap[a]].hpos = a;
  p->slots[p->heap[b]].hpos = b;
}

static void heap_fix(struct probe *p, int i) {
  while (i > 0 && heap_less(p, i, (i - 1) / 2)) {
    heap_swap(p, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
  for (;;) {
    int l = 2 * i + 1, m = i;
    if (l < p->nheap && heap_less(p, l, m)) m = l;
    if (l + 1 < p->nheap && heap_less(p, l + 1, m)) m = l + 1;
    if (m == i) return;
    heap_swap(p, i, m);
    i = m;
  }
}

static void heap_push(struct probe *p, struct probe_slot *s) {
  s->hpos = p->nheap++;
  p->heap[s->hpos] = (int)(s - p->slots);
  heap_fix(p, s->hpos);
}

static void heap_remove(struct probe *p, struct probe_slot *s) {
  int i = s->hpos;
  if (i < 0) return;
  s->hpos = -1;
  if (--p->nheap == i) return;
  p->heap[i] = p->heap[p->nheap];
  p->slots[p->heap[i]].hpos = i;
  heap_fix(p, i);
}

/* Write the request of the connected native probe on s (target t) and go on reading with the
 * wake-up's events ev (0 when none). */
static void native_send(struct probe *p, struct probe_slot *s, const struct probe_target *t,
                        uint32_t ev) {
  const struct hcheck_opts *c = s->check;
  p->req.len = 0;
  if (pnat_request(&p->req, c->method == HCHECK_HEAD, (t->path && t->path[0]) ? t->path : "/",
                   (t->host && t->host[0]) ? t->host : t->address, c->port > 0 ? c->port : t->port,
                   p->user_agent, c) < 0) {
    pnat_close(&s->nat); /* the parts are bounded: does not happen */
    snprintf(s->nat.error, sizeof s->nat.error, "invalid target: request too long");
    return;
  }
  pnat_send(&s->nat, p->req.data, p->req.len, ev, p->rbuf, PROBE_RBUF);
}

/* Fill r from the native probe on s, judged by its options, and free the slot. */
static void native_finish(struct probe *p, struct probe_slot *s, struct probe_result *r) {
  struct pnat *c = &s->nat;
  struct hcheck_outcome out;
  int64_t us = mono_us() - s->start_us;

  if (c->state != PNAT_DONE) pnat_close(c);
  memset(&out, 0, sizeof out);
  r->latency_ms = (int)((us + 999) / 1000);
  out.connected = c->connected;
  out.timed_out = s->timed_out;
  if (!c->tcp && (c->resp.state == PRESP_BODY || c->resp.state == PRESP_DONE)) {
    out.connected = 1;
    out.timed_out = 0;
    out.status = c->resp.status;
    out.body = c->resp.kept;
    out.body_len = c->resp.kept_len;
  } else if (s->timed_out) {
    out.error = "timeout";
  } else if (c->error[0]) {
    out.error = c->error;
  } else if (c->resp.state == PRESP_BAD) {
    out.error = c->resp.error;
  }
  r->status = out.status;
  r->ok = hcheck_judge(s->check, &out, r->error, sizeof r->error);
  r->local = !r->ok && c->local;
  heap_remove(p, s);
  pnat_free(c);
  s->native = 0;
  s->busy = 0;
  p->idle[p->nidle++] = (size_t)(s - p->slots);
}

/* Start target i on slot s with a socket of our own: 1 started, 0 finished at once (r final),
 * -1 not for us (the address is a DNS name: libcurl resolves it). */
static int native_start(struct probe *p, struct probe_slot *s, const struct probe_target *t,
                        const struct target_parts *tp, size_t i, struct probe_result *r) {
  struct sockaddr_storage ss;
  socklen_t sl;
  int64_t now_ms, timeout = t->timeout_ms > 0 ? t->timeout_ms : PROBE_DEFAULT_TIMEOUT_MS;
  const char *why = NULL;
  int st;

  memset(&ss, 0, sizeof ss);
  if (inet_pton(AF_INET, t->address, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)tp->port);
    sl = sizeof *a;
  } else if (inet_pton(AF_INET6, t->address, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)tp->port);
    sl = sizeof *a;
  } else {
    return -1;
  }
  if (p->deny && targets_refused_sa(p->deny, &ss, &why)) {
    result_fail(r, "connect failed: address refused (%s)", why ? why : "denied");
    return 0;
  }
  s->idx = i;
  s->check = tp->check;
  s->native = 1;
  s->busy = 1;
  s->timed_out = 0;
  s->start_us = mono_us();
  now_ms = s->start_us / 1000;
  s->end_at = now_ms + timeout;
  s->connect_at =
      now_ms + (timeout < PROBE_CONNECT_TIMEOUT_CAP_MS ? timeout : PROBE_CONNECT_TIMEOUT_CAP_MS);
  s->due = s->connect_at;
  s->hpos = -1;
  st = pnat_start(&s->nat, p->epfd, PROBE_NATIVE_TAG | (uint64_t)(s - p->slots),
                  (struct sockaddr *)&ss, sl, tp->check->type == HCHECK_TCP,
                  tp->check->method == HCHECK_HEAD, tp->check->expected_body[0] != '\0');
  if (st == PNAT_SENDING) native_send(p, s, t, 0); /* connected at once */
  if (s->nat.state == PNAT_DONE) {
    p->nidle--; /* native_finish gives the slot back */
    native_finish(p, s, r);
    return 0;
  }
  heap_push(p, s);
  return 1;
}

/* epoll events ev for the native probe on s. */
static void native_event(struct probe *p, struct probe_slot *s, uint32_t ev,
                         const struct probe_target *targets, struct probe_result *results) {
  struct pnat *c = &s->nat;
  if (!s->busy || !s->native) return; /* ended earlier in this turn */
  if (pnat_event(c, ev, p->rbuf, PROBE_RBUF) == PNAT_SENDING && !c->pending)
    native_send(p, s, &targets[s->idx], ev); /* just connected */
  if (c->state == PNAT_DONE) native_finish(p, s, &results[s->idx]);
}

/* End the native probes whose deadline has passed. */
static void native_timers(struct probe *p, struct probe_result *results) {
  int64_t now = -1;
  while (p->nheap > 0) {
    struct probe_slot *s = &p->slots[p->heap[0]];
    if (now < 0 || s->due > now) now = mono_us() / 1000;
    if (s->due > now) return;
    if (s->nat.state != PNAT_CONNECTING && s->due < s->end_at) {
      s->due = s->end_at; /* connected in time: the whole probe's deadline is next */
      heap_fix(p, 0);
      continue;
    }
    s->timed_out = 1;
    native_finish(p, s, &results[s->idx]);
  }
}

/* ms until the first native deadline, or -1 when none. */
static int64_t native_wait(const struct probe *p) {
  int64_t left;
  if (p->nheap == 0) return -1;
  left = p->slots[p->heap[0]].due - mono_us() / 1000;
  return left < 0 ? 0 : left;
}

/* ---- the epoll engine: libcurl tells which sockets and which timeout to watch ---- */

const char *probe_engine_name(enum probe_engine e) {
  return e == PROBE_ENGINE_EPOLL_CURL ? "epoll-curl" : "epoll";
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* CURLMOPT_SOCKETFUNCTION: keep the epoll set equal to what libcurl wants watched. A socket
   already in the set carries a non-NULL socketp (curl_multi_assign), so it is modified, not
   added; libcurl forgets the mark when it stops tracking the socket. */
static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp) {
  struct probe *p = userp;
  struct epoll_event ev;
  (void)e;
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(p->epfd, EPOLL_CTL_DEL, s, NULL); /* already gone when closed: nothing to do */
    return 0;
  }
  memset(&ev, 0, sizeof ev);
  ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u);
  ev.data.u64 = (uint64_t)(unsigned)s;
  if (socketp && epoll_ctl(p->epfd, EPOLL_CTL_MOD, s, &ev) == 0) return 0;
  if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, s, &ev) == 0 ||
      (errno == EEXIST && epoll_ctl(p->epfd, EPOLL_CTL_MOD, s, &ev) == 0)) {
    curl_multi_assign(p->multi, s, p); /* the mark: any non-NULL pointer */
    return 0;
  }
  log_error("epoll_ctl on socket %d: %s", (int)s, strerror(errno));
  return -1;
}

/* CURLMOPT_TIMERFUNCTION: when libcurl wants CURL_SOCKET_TIMEOUT (-1 = no timer). */
static int on_timer(CURLM *m, long timeout_ms, void *userp) {
  struct probe *p = userp;
  (void)m;
  p->timer_at = timeout_ms < 0 ? -1 : mono_ms() + timeout_ms;
  return 0;
}

/* Wait for ready sockets, libcurl's timer or a native deadline (at most PROBE_POLL_MS, so
   cancel is seen), let libcurl act on its sockets and the native probes on theirs. 0 or -1. */
static int epoll_turn(struct probe *p, const struct probe_target *targets,
                      struct probe_result *results) {
  struct epoll_event evs[PROBE_EVENTS];
  int running = 0, nev, wait = PROBE_POLL_MS;
  int64_t nw = native_wait(p);
  CURLMcode mc;
  if (p->timer_at >= 0) {
    int64_t left = p->timer_at - mono_ms();
    wait = left <= 0 ? 0 : left < PROBE_POLL_MS ? (int)left : PROBE_POLL_MS;
  }
  if (nw >= 0 && nw < wait) wait = (int)nw;
  nev = epoll_wait(p->epfd, evs, PROBE_EVENTS, wait);
  if (nev < 0) {
    if (errno == EINTR) return 0;
    log_error("epoll_wait: %s", strerror(errno));
    return -1;
  }
  for (int i = 0; i < nev; i++) {
    int flags = 0;
    if (evs[i].data.u64 & PROBE_NATIVE_TAG) {
      native_event(p, &p->slots[evs[i].data.u64 & ~PROBE_NATIVE_TAG], evs[i].events, targets,
                   results);
      continue;
    }
    if (evs[i].events & (EPOLLIN | EPOLLHUP)) flags |= CURL_CSELECT_IN;
    if (evs[i].events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
    if (evs[i].events & EPOLLERR) flags |= CURL_CSELECT_ERR;
    mc = curl_multi_socket_action(p->multi, (curl_socket_t)evs[i].data.u64, flags, &running);
    if (mc != CURLM_OK) {
      log_error("curl_multi_socket_action: %s", curl_multi_strerror(mc));
      return -1;
    }
  }
  native_timers(p, results);
  if (p->timer_at >= 0 && mono_ms() >= p->timer_at) {
    p->timer_at = -1;
    mc = curl_multi_socket_action(p->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    if (mc != CURLM_OK) {
      log_error("curl_multi_socket_action: %s", curl_multi_strerror(mc));
      return -1;
    }
  }
  return 0;
}

/* libcurl's socket and timer callbacks: set for the epoll loop, cleared for a loop of the
   test seam, which drives the multi handle its own way. */
static int curl_callbacks(struct probe *p, int on) {
  CURLMcode mc = CURLM_OK;
  mc |= curl_multi_setopt(p->multi, CURLMOPT_SOCKETFUNCTION, on ? on_socket : NULL);
  mc |= curl_multi_setopt(p->multi, CURLMOPT_SOCKETDATA, on ? p : NULL);
  mc |= curl_multi_setopt(p->multi, CURLMOPT_TIMERFUNCTION, on ? on_timer : NULL);
  mc |= curl_multi_setopt(p->multi, CURLMOPT_TIMERDATA, on ? p : NULL);
  return mc == CURLM_OK ? 0 : -1;
}

/* ---- test seams (probe.h) ---- */

int probe_set_loop(struct probe *p, probe_loop_fn *loop) {
  if (!p) return -1;
  if (curl_callbacks(p, loop == NULL) < 0) {
    log_error("cannot switch the prober's loop (libcurl refused its callbacks)");
    return -1;
  }
  p->loop = loop;
  p->timer_at = -1;
  return 0;
}

int probe_loop_collect(struct probe *p, int *idle) {
  if (p->run_targets) probe_drain(p, p->run_targets, p->run_results);
  if (idle) *idle = (int)p->nidle;
  return p->max_conc - (int)p->nidle;
}

void probe_set_easy_hook(struct probe *p, probe_easy_fn *fn, void *ud) {
  if (!p) return;
  p->easy_hook = fn;
  p->easy_ud = fn ? ud : NULL;
  /* the handles carry what the previous hook set: they take the new one's options afresh */
  for (int i = 0; i < p->max_conc; i++)
    if (p->slots[i].easy && p->slots[i].fixed_set) {
      curl_easy_reset(p->slots[i].easy);
      p->slots[i].fixed_set = 0;
    }
}

/* 1 when the CAs can come from one CA file (ca_file, else libcurl's built-in bundle) without
 * the CA directory, so that libcurl builds the store once and caches it. Without a readable
 * built-in bundle libcurl keeps its directory (and builds a store per connection). */
static int ca_store_cacheable(const char *ca_file) {
  int ok = 0;
  if (ca_file) return 1;
#if LIBCURL_VERSION_NUM >= 0x075400 /* CURLINFO_CAINFO: 7.84.0 */
  {
    CURL *e = curl_easy_init();
    char *bundle = NULL;
    if (e && curl_easy_getinfo(e, CURLINFO_CAINFO, &bundle) == CURLE_OK && bundle && bundle[0] &&
        access(bundle, R_OK) == 0)
      ok = 1;
    if (e) curl_easy_cleanup(e);
  }
#endif
  return ok;
}

struct probe *probe_new(const struct probe_opts *opts) {
  struct probe *p = NULL;
  struct probe_opts o = {0};
  int ok = 0;

  if (opts) o = *opts;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    log_error("curl_global_init failed");
    return NULL;
  }
  p = calloc(1, sizeof *p);
  if (!p) goto out;
  p->epfd = -1;
  p->timer_at = -1;
  p->engine = o.engine == PROBE_ENGINE_EPOLL_CURL ? PROBE_ENGINE_EPOLL_CURL : PROBE_ENGINE_EPOLL;
  p->max_conc = o.max_concurrency > 0 ? o.max_concurrency : PROBE_DEFAULT_CONCURRENCY;
  p->deny = o.deny;
  p->user_agent = strdup(o.user_agent ? o.user_agent : PROBE_UA_CONTROL);
  if (!p->user_agent) goto out;
  if (o.ca_file) {
    p->ca_file = strdup(o.ca_file);
    if (!p->ca_file) goto out;
  }
  p->ca_cacheable = ca_store_cacheable(p->ca_file);
  p->headers = curl_slist_append(NULL, "Connection: close");
  if (!p->headers) goto out;
  p->slots = calloc((size_t)p->max_conc, sizeof *p->slots);
  p->idle = calloc((size_t)p->max_conc, sizeof *p->idle);
  if (!p->slots || !p->idle) goto out;
  p->multi = curl_multi_init();
  if (!p->multi) goto out;
  /* One request per connection, never multiplexed: each probe tests a fresh connection. */
  if (curl_multi_setopt(p->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING) != CURLM_OK)
    goto out;
  p->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (p->epfd < 0) goto out;
  if (p->engine == PROBE_ENGINE_EPOLL) {
    /* the longest request: line, Host, User-Agent, fixed lines, the check's headers */
    buf_init(&p->req,
             PROBE_PATH_MAX + PROBE_NAME_MAX + strlen(p->user_agent) + 128 +
                 HCHECK_MAX_HEADERS * (HCHECK_HEADER_NAME_MAX + HCHECK_HEADER_VALUE_MAX + 4));
    p->rbuf = malloc(PROBE_RBUF);
    p->heap = calloc((size_t)p->max_conc, sizeof *p->heap);
    if (!p->rbuf || !p->heap) goto out;
  }
  if (curl_callbacks(p, 1) < 0) goto out;
  ok = 1;
out:
  if (!ok) {
    log_error("cannot create prober (out of memory or libcurl failure)");
    if (p) {
      probe_free(&p);
    } else {
      curl_global_cleanup();
    }
    return NULL;
  }
  return p;
}

void probe_free(struct probe **pp) {
  struct probe *p;
  if (!pp || !*pp) return;
  p = *pp;
  if (p->slots) {
    for (int i = 0; i < p->max_conc; i++) {
      if (p->slots[i].easy) curl_easy_cleanup(p->slots[i].easy);
      slot_clear(p, &p->slots[i]);
    }
  }
  if (p->multi) curl_multi_cleanup(p->multi);
  if (p->epfd >= 0) close(p->epfd);
  curl_slist_free_all(p->headers);
  free(p->slots);
  free(p->idle);
  free(p->heap);
  free(p->rbuf);
  buf_fini(&p->req);
  free(p->user_agent);
  free(p->ca_file);
  free(p);
  *pp = NULL;
  curl_global_cleanup();
}

int probe_run(struct probe *p, const struct probe_target *targets, size_t n,
              struct probe_result *results, atomic_int *cancel) {
  size_t next = 0;
  int running = 0;
  int rc = -1;
  int cancelled = 0;

  if (!p || (n > 0 && (!targets || !results))) return -1;
  for (size_t i = 0; i < n; i++) {
    memset(&results[i], 0, sizeof results[i]);
    snprintf(results[i].error, sizeof results[i].error, "not run");
  }
  p->nidle = 0;
  for (int i = p->max_conc - 1; i >= 0; i--)
    p->idle[p->nidle++] = (size_t)i;
  p->run_targets = targets;
  p->run_results = results;

  for (;;) {
    int turn;
    while (next < n && p->nidle > 0) {
      probe_start(p, &targets[next], next, &results[next]);
      next++;
    }
    running = p->max_conc - (int)p->nidle;
    if (running == 0 && next >= n) break;
    if (cancel && *cancel) {
      cancelled = 1;
      break;
    }
    if (p->loop) {
      turn = p->loop(p, p->multi, next < n, PROBE_POLL_MS);
    } else {
      turn = epoll_turn(p, targets, results);
      probe_drain(p, targets, results);
    }
    if (turn < 0) goto out;
  }
  rc = 0;
out:
  /* Abandon whatever is still in flight (cancel or libcurl failure). */
  for (int i = 0; i < p->max_conc; i++) {
    struct probe_slot *s = &p->slots[i];
    if (!s->busy) continue;
    if (s->native) {
      native_finish(p, s, &results[s->idx]);
      results[s->idx].ok = 0;
      results[s->idx].status = 0;
    } else {
      slot_release(p, s);
    }
    snprintf(results[s->idx].error, sizeof results[s->idx].error,
             cancelled ? "cancelled" : "internal: libcurl failure");
    results[s->idx].local = !cancelled;
  }
  for (; next < n; next++) {
    snprintf(results[next].error, sizeof results[next].error,
             cancelled ? "cancelled" : "internal: libcurl failure");
    results[next].local = !cancelled;
  }
  p->run_targets = NULL;
  p->run_results = NULL;
  return rc;
}
