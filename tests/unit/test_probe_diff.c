/* test_probe_diff — the probe engines side by side. A scripted origin on 127.0.0.1 answers a
 * corpus of well-formed and malformed HTTP/1.x answers (and transport failures); for every entry
 * and option set, PROBE_ENGINE_EPOLL (plain HTTP and tcp of address literals on probenat) and
 * PROBE_ENGINE_EPOLL_CURL (everything on libcurl) must reach the same verdict (ok, status,
 * error) and send the same request, except for the differences listed in diffs[] below.
 *
 * The strict reading (proberesp, on http1) is also run here on each entry's bytes (model_native):
 * where it disagrees with libcurl the difference must be in diffs[], and each row of diffs[] must
 * say what proberesp says. A row is a requirement, not an allowance: for its entry and option
 * sets each engine must say exactly what the row says (an out-of-date row fails). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "testutil.h"

#include "hcheck.h"
#include "probe.h"
#include "proberesp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TEST_UA "cdnca-test/origin-probe"
#define REQ_MAX 8192
#define MAX_RECS 64
#define MAX_LISTEN 8
#define TIMEOUT_MS 10000     /* a probe that gets an answer */
#define TIMEOUT_SHORT_MS 300 /* a probe that is never answered */
#define TIMEOUT_RETRY_MS 3000
#define MARKER "ok-marker"

/* ---- the corpus ---- */

/* How the origin behaves on a connection (besides sending raw, fill and tail). */
enum {
  F_DRIP = 1 << 0,      /* the answer's head byte by byte, 1 ms apart */
  F_PIECES = 1 << 1,    /* the answer in 5-byte writes, 2 ms apart */
  F_CLOSE = 1 << 2,     /* read the request, close without answering */
  F_RST = 1 << 3,       /* read the request, reset (SO_LINGER 0) without answering */
  F_RST_AFTER = 1 << 4, /* reset 50 ms after the answer instead of closing */
  F_SILENT = 1 << 5,    /* read the request, never answer (until the peer closes) */
  F_FIRST = 1 << 6,     /* answer on accept, before reading the request (own port) */
  F_REFUSED = 1 << 7,   /* a port where connections are refused */
  F_BACKLOG = 1 << 8,   /* a listener that never accepts (own port): never speaks */
  F_HUGE_HEAD = 1 << 9, /* raw is the status line; a 40 KiB header field and CL 9 follow */
  F_FIELDS = 1 << 10,   /* raw is the status line; 200 fields and CL 9 follow */
  F_NOREAD = 1 << 11,   /* with F_FIRST: close right after the answer, the request unread */
  F_KPIECES = 1 << 12   /* the answer in 1 KiB writes, 2 ms apart */
};
/* Flags whose outcome is not a reading of bytes: model_native does not apply. */
#define F_TRANSPORT (F_RST | F_RST_AFTER | F_SILENT | F_REFUSED | F_BACKLOG)
/* Flags that give their entry a port of its own. */
#define F_OWN_PORT (F_FIRST | F_REFUSED | F_BACKLOG)

struct entry {
  const char *name;
  const char *raw;  /* the answer's first bytes */
  size_t fill;      /* then this many 'a' */
  const char *tail; /* then these; NULL = none */
  unsigned flags;
  int want; /* the status epoll-curl must report with the default options; -1 = not checked */
};

/* clang-format off */
static const struct entry corpus[] = {
    {"200 CL", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok-marker", 0, NULL, 0, 200},
    {"404 CL", "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot-found", 0, NULL, 0, 404},
    {"503 CL", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 9\r\n\r\nok-marker", 0, NULL,
     0, 503},
    {"301 not followed", "HTTP/1.1 301 Moved\r\nLocation: http://127.0.0.1:1/x\r\n"
     "Content-Length: 0\r\n\r\n", 0, NULL, 0, 301},
    {"200 close-delimited", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nsome ok-marker text",
     0, NULL, 0, 200},
    {"200 chunked ext+trailers", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     "5;ext=1\r\nok-ma\r\n4 ; name=\"q v\"\r\nrker\r\n0\r\nX-Trailer: t\r\n\r\n", 0, NULL, 0,
     200},
    {"200 chunked marker split", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     "2\r\nok\r\n1\r\n-\r\n3\r\nmar\r\n3\r\nker\r\n0\r\n\r\n", 0, NULL, 0, 200},
    {"503 chunked", "HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nok-marker\r\n"
     "0\r\n\r\n", 0, NULL, 0, 503},
    {"200 chunked bad size after marker", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     "9\r\nok-marker\r\nzz\r\nxx\r\n0\r\n\r\n", 0, NULL, 0, 200},
    {"marker after 64 KiB", "HTTP/1.1 200 OK\r\nContent-Length: 70009\r\n\r\n", 70000, MARKER, 0,
     200},
    {"body over 64 KiB", "HTTP/1.1 200 OK\r\nContent-Length: 200009\r\n\r\nok-marker", 200000,
     NULL, 0, 200},
    {"200 close-delimited over 64 KiB", "HTTP/1.1 200 OK\r\n\r\nok-marker", 100000, NULL, 0, 200},
    {"gzip CE not decoded", "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 9\r\n"
     "\r\nok-marker", 0, NULL, 0, 200},
    {"100 then 200", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"
     "ok-marker", 0, NULL, 0, 200},
    {"103 then 503", "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
     "HTTP/1.1 503 Unavailable\r\nContent-Length: 0\r\n\r\n", 0, NULL, 0, 503},
    {"100 then EOF", "HTTP/1.1 100 Continue\r\n\r\n", 0, NULL, 0, 0},
    {"101", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "\r\n", 0, NULL, 0, 0},
    {"204", "HTTP/1.1 204 No Content\r\n\r\n", 0, NULL, 0, 204},
    {"304", "HTTP/1.1 304 Not Modified\r\n\r\n", 0, NULL, 0, 304},
    {"HTTP/1.0 close-delimited", "HTTP/1.0 200 OK\r\n\r\nok-marker", 0, NULL, 0, 200},
    {"LF-only lines", "HTTP/1.1 200 OK\nContent-Length: 9\n\nok-marker", 0, NULL, 0, 200},
    {"bare CR in a field", "HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 9\r\n\r\nok-marker",
     0, NULL, 0, 200},
    {"field without colon", "HTTP/1.1 200 OK\r\nNoColonHere\r\nContent-Length: 9\r\n\r\n"
     "ok-marker", 0, NULL, 0, 0},
    {"obs-fold", "HTTP/1.1 200 OK\r\nX-A: a\r\n  folded\r\nContent-Length: 9\r\n\r\nok-marker",
     0, NULL, 0, 200},
    {"head then EOF, CL 100", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", 0, NULL, 0, 200},
    {"partial head then EOF", "HTTP/1.1 200 OK\r\nContent-Le", 0, NULL, 0, 0},
    {"EOF with nothing", "", 0, NULL, F_CLOSE, 0},
    {"RST before the answer", "", 0, NULL, F_RST, 0},
    {"RST after the head", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", 0, NULL,
     F_RST_AFTER, 200},
    {"status line without reason", "HTTP/1.1 200\r\nContent-Length: 9\r\n\r\nok-marker", 0, NULL,
     0, 200},
    {"HTTP/2 200", "HTTP/2 200\r\nContent-Length: 9\r\n\r\nok-marker", 0, NULL, 0, 200},
    {"status 99", "HTTP/1.1 099 Low\r\nContent-Length: 9\r\n\r\nok-marker", 0, NULL, 0, 0},
    {"status 600", "HTTP/1.1 600 High\r\nContent-Length: 9\r\n\r\nok-marker", 0, NULL, 0, 600},
    {"status 2x0", "HTTP/1.1 2x0 OK\r\nContent-Length: 9\r\n\r\nok-marker", 0, NULL, 0, 0},
    {"not HTTP", "hello there\r\n\r\n", 0, NULL, 0, 0},
    {"40 KiB field", "HTTP/1.1 200 OK\r\n", 0, NULL, F_HUGE_HEAD, 200},
    {"200 fields", "HTTP/1.1 200 OK\r\n", 0, NULL, F_FIELDS, 200},
    {"20 KiB head", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nX-Mid: ", 20000, "\r\n\r\nok-marker",
     0, 200},
    {"32768-byte head in 1 KiB writes", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nX-Pad: ",
     32721, "\r\n\r\nok-marker", F_KPIECES, 200},
    {"32769-byte head in 1 KiB writes", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nX-Pad: ",
     32722, "\r\n\r\nok-marker", F_KPIECES, 200},
    {"CL twice, equal", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nContent-Length: 9\r\n\r\n"
     "ok-marker", 0, NULL, 0, 0},
    {"CL conflicting", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nContent-Length: 12\r\n\r\n"
     "ok-marker", 0, NULL, 0, 0},
    {"TE gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok-marker", 0, NULL, 0, 0},
    {"TE chunked + CL", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 30\r\n"
     "\r\n9\r\nok-marker\r\n0\r\n\r\n", 0, NULL, 0, 0},
    {"CL abc", "HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nok-marker", 0, NULL, 0, 0},
    {"body longer than CL", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok-markerEXTRA-BYTES",
     0, NULL, 0, 200},
    {"CL 0, no marker", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, NULL, 0, 200},
    {"head byte by byte", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok-marker", 0, NULL,
     F_DRIP, 200},
    {"small writes, chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     "4\r\nok-m\r\n5\r\narker\r\n0\r\n\r\n", 0, NULL, F_PIECES, 200},
    {"100 then 200, small writes", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
     "Content-Length: 9\r\n\r\nok-marker", 0, NULL, F_PIECES, 200},
    {"5 interim heads then 200", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
     "HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 199 Misc\r\n\r\n"
     "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok-marker", 0, NULL, 0, 200},
    {"chunked over 64 KiB", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n30d40\r\n",
     200000, "\r\n0\r\n\r\n", 0, 200},
    {"marker ends at 64 KiB", "HTTP/1.1 200 OK\r\nContent-Length: 65536\r\n\r\n", 65527,
     MARKER, 0, 200},
    {"marker across 64 KiB", "HTTP/1.1 200 OK\r\nContent-Length: 65539\r\n\r\n", 65530,
     MARKER, 0, 200},
    {"empty reason", "HTTP/1.1 200 \r\nContent-Length: 9\r\n\r\nok-marker", 0, NULL, 0, 200},
    {"lowercase version", "http/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok-marker", 0, NULL,
     0, 200},
    {"CL +9", "HTTP/1.1 200 OK\r\nContent-Length: +9\r\n\r\nok-marker", 0, NULL, 0, 0},
    {"space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 9\r\n\r\nok-marker", 0,
     NULL, 0, 0},
    {"answer before the request", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok-marker", 0,
     NULL, F_FIRST, 200},
    {"answer, close, request unread", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok-marker",
     0, NULL, F_FIRST | F_NOREAD, 200},
    {"never answers", "", 0, NULL, F_SILENT, 0},
    {"refused port", "", 0, NULL, F_REFUSED, 0},
    {"listener that never speaks", "", 0, NULL, F_BACKLOG, 0},
};
/* clang-format on */

#define N_ENTRIES (sizeof corpus / sizeof corpus[0])

/* ---- the option sets ---- */

enum { O_DEFAULT = 0, O_CODES, O_BODY, O_HEAD, O_HEADERS, O_TCP, N_OPTS };
static const char *const opt_names[N_OPTS] = {"default", "codes 200-299", "body ok-marker",
                                              "HEAD",    "2 headers",     "tcp"};
static struct hcheck_opts opts[N_OPTS];

#define M_DEFAULT (1u << O_DEFAULT)
#define M_CODES (1u << O_CODES)
#define M_BODY (1u << O_BODY)
#define M_HEAD (1u << O_HEAD)
#define M_HEADERS (1u << O_HEADERS)
#define M_GET (M_DEFAULT | M_CODES | M_BODY | M_HEADERS) /* the http sets sending GET */
#define M_HTTP (M_GET | M_HEAD)

static void opts_init(void) {
  for (int i = 0; i < N_OPTS; i++)
    hcheck_defaults(&opts[i]);
  opts[O_CODES].n_codes = 1;
  opts[O_CODES].codes[0].lo = 200;
  opts[O_CODES].codes[0].hi = 299;
  snprintf(opts[O_BODY].expected_body, sizeof opts[O_BODY].expected_body, "%s", MARKER);
  opts[O_HEAD].method = HCHECK_HEAD;
  opts[O_HEADERS].n_headers = 2;
  snprintf(opts[O_HEADERS].headers[0].name, sizeof opts[O_HEADERS].headers[0].name, "X-Probe-A");
  snprintf(opts[O_HEADERS].headers[0].value, sizeof opts[O_HEADERS].headers[0].value, "1");
  snprintf(opts[O_HEADERS].headers[1].name, sizeof opts[O_HEADERS].headers[1].name, "X-Probe-B");
  snprintf(opts[O_HEADERS].headers[1].value, sizeof opts[O_HEADERS].headers[1].value, "two words");
  opts[O_TCP].type = HCHECK_TCP;
}

/* ---- the documented differences ---- */

/* Where the epoll engine (probenat + proberesp) and epoll-curl (libcurl 7.88) say different
 * things for one entry under some option sets. A result reads "ok=<0|1> status=<n> error=<e>". */
struct diff {
  const char *entry; /* corpus entry name */
  unsigned opts;     /* the option sets (M_*) */
  const char *epoll; /* what PROBE_ENGINE_EPOLL says */
  const char *curl;  /* what PROBE_ENGINE_EPOLL_CURL says */
  const char *why;
};

#define ERR(e) "ok=0 status=0 error=" e
#define OK_200 "ok=1 status=200 error="
#define BODY_200 "ok=0 status=200 error=body mismatch"
#define BAD_HEAD ERR("bad response head")
#define BAD_FRAMING ERR("bad response framing")

/* clang-format off */
static const struct diff diffs[] = {
    {"100 then EOF", M_HTTP, ERR("incomplete response head"), ERR("empty reply"),
     "proberesp counts the interim head as bytes of an unfinished answer; libcurl as nothing"},
    {"101", M_HTTP, ERR("unrequested protocol switch (101)"), ERR("empty reply"),
     "both fail a 101 to a request that asked for no upgrade, in their own words (libcurl 7.88 "
     "reads it as interim and then sees the close)"},
    {"bare CR in a field", M_HTTP, BAD_HEAD, OK_200,
     "http1 refuses control bytes in a field value (RFC 9112 §5.5); libcurl passes them"},
    {"field without colon", M_HTTP, BAD_HEAD, ERR("Header without colon"),
     "both refuse the head, in their own words"},
    {"obs-fold", M_HTTP, BAD_HEAD, OK_200,
     "http1 refuses obs-fold like the edge does (RFC 9112 §5.2 allows that); libcurl unfolds"},
    {"HTTP/2 200", M_HTTP, BAD_HEAD, OK_200,
     "http1 reads HTTP/1.x only; libcurl accepts an HTTP/2 status line on an HTTP/1.1 "
     "connection"},
    {"status 99", M_HTTP, BAD_HEAD, ERR("Unsupported response code in HTTP response"),
     "both refuse a status below 100, in their own words"},
    {"status 2x0", M_HTTP, BAD_HEAD, ERR("Unsupported response code in HTTP response"),
     "both refuse a status that is not 3 digits, in their own words"},
    {"not HTTP", M_HTTP, BAD_HEAD, ERR("Received HTTP/0.9 when not allowed"),
     "both refuse an answer without a status line, in their own words"},
    {"40 KiB field", M_HTTP, ERR("response head too large"), OK_200,
     "proberesp stops at the edge's 32 KiB head limit (PRESP_HEAD_MAX); libcurl allows 100 KiB "
     "per field"},
    {"32769-byte head in 1 KiB writes", M_HTTP, ERR("response head too large"), OK_200,
     "one byte over PRESP_HEAD_MAX, gathered across reads; libcurl allows 100 KiB per field"},
    {"200 fields", M_HTTP, BAD_HEAD, OK_200,
     "http1 holds at most HTTP1_MAX_HEADERS (128) fields, as the edge; libcurl has no count "
     "limit"},
    {"CL abc", M_GET, BAD_FRAMING, ERR("Invalid Content-Length: value"),
     "both refuse the answer, in their own words (libcurl reads the length before curlhead)"},
    {"CL abc", M_HEAD, BAD_FRAMING, ERR("Invalid Content-Length: value"),
     "both refuse the answer, in their own words (the edge would pass the field on)"},
    {"lowercase version", M_HTTP, BAD_HEAD, OK_200,
     "the HTTP-version is case-sensitive (RFC 9112 §2.3); libcurl ignores case"},
    {NULL, 0, NULL, NULL, NULL} /* end */
};
/* clang-format on */

/* ---- the scripted origin ---- */

/* One accepted connection's request, as the origin read it. */
struct rec {
  int entry; /* the entry it was answered with; -1 = none */
  size_t len;
  char req[REQ_MAX];
};

struct origin {
  pthread_mutex_t mu;
  int lfd[MAX_LISTEN];    /* accepted from */
  int lentry[MAX_LISTEN]; /* the entry of a port of its own, -1 = chosen by the path */
  int n_listen;
  int backlog_fd;         /* F_BACKLOG: listening, never accepted */
  int refused_fd;         /* F_REFUSED: bound, not listening */
  int port6;              /* the listener on ::1 (chosen by the path); 0 = no IPv6 here */
  int port[N_ENTRIES];    /* where each entry is served */
  char *built[N_ENTRIES]; /* F_HUGE_HEAD, F_FIELDS: the whole answer */
  atomic_int stop;
  atomic_int accepted, finished;
  pthread_t acceptor;
  int acceptor_started;
  struct rec recs[MAX_RECS];
  int n_recs;
};

static struct origin g_origin;

struct conn {
  int fd;
  int entry; /* the listener's entry, -1 = by path */
};

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Send all of p[0..n) in pieces of piece bytes (0 = at once), pause_ms apart; -1 on error. */
static int send_paced(int fd, const char *p, size_t n, size_t piece, int pause_ms) {
  size_t off = 0;
  while (off < n) {
    size_t len = piece && n - off > piece ? piece : n - off;
    ssize_t k = send(fd, p + off, len, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1; /* the peer is gone, or SO_SNDTIMEO passed */
    off += (size_t)k;
    if (piece && pause_ms > 0 && off < n) sleep_ms(pause_ms);
  }
  return 0;
}

/* Entry e's whole answer: raw (or its built form), fill and tail (malloc, NUL-terminated); NULL
 * when out of memory. */
static char *answer_of(size_t e, size_t *len) {
  const struct entry *c = &corpus[e];
  const char *raw = g_origin.built[e] ? g_origin.built[e] : c->raw;
  size_t rl = strlen(raw), tl = c->tail ? strlen(c->tail) : 0;
  char *b = malloc(rl + c->fill + tl + 1);
  if (!b) return NULL;
  memcpy(b, raw, rl);
  memset(b + rl, 'a', c->fill);
  if (tl) memcpy(b + rl + c->fill, c->tail, tl);
  *len = rl + c->fill + tl;
  b[*len] = '\0';
  return b;
}

/* Send entry e's answer, paced as its flags say. */
static void send_answer(int fd, int e) {
  unsigned fl = corpus[e].flags;
  size_t n = 0, head;
  char *b = answer_of((size_t)e, &n), *end;
  if (!b) return;
  end = strstr(b, "\r\n\r\n");
  head = end ? (size_t)(end - b) + 4 : n;
  if (fl & F_DRIP) {
    if (send_paced(fd, b, head, 1, 1) == 0) send_paced(fd, b + head, n - head, 0, 0);
  } else {
    send_paced(fd, b, n, (fl & F_PIECES) ? 5 : (fl & F_KPIECES) ? 1024 : 0, 2);
  }
  free(b);
}

/* Wait (at most max_ms, or until the origin stops) for the peer to close; data is dropped. */
static void wait_eof(int fd, int max_ms) {
  char buf[4096];
  int64_t end = mono_ms() + max_ms;
  while (!atomic_load(&g_origin.stop) && mono_ms() < end) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    ssize_t k;
    if (poll(&pf, 1, 50) <= 0) continue;
    k = recv(fd, buf, sizeof buf, 0);
    if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) return;
  }
}

/* Read a request head (through the empty line) into buf; its length (what came when the peer
 * closed or 3 s passed first). */
static size_t read_head(int fd, char *buf, size_t cap) {
  size_t n = 0;
  int64_t end = mono_ms() + 3000;
  while (n < cap - 1 && mono_ms() < end && !atomic_load(&g_origin.stop)) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    ssize_t k;
    if (poll(&pf, 1, 50) <= 0) continue;
    k = recv(fd, buf + n, cap - 1 - n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    n += (size_t)k;
    buf[n] = '\0';
    if (strstr(buf, "\r\n\r\n")) break;
  }
  buf[n] = '\0';
  return n;
}

/* The entry a request names ("GET /case/17 HTTP/1.1"); -1 when none. */
static int entry_of(const char *req) {
  const char *p = strstr(req, " /case/");
  char *end;
  long v;
  if (!p || p > strchr(req, '\n')) return -1;
  v = strtol(p + 7, &end, 10);
  if (end == p + 7 || (*end != ' ' && *end != '?') || v < 0 || v >= (long)N_ENTRIES) return -1;
  return (int)v;
}

static void reset_close(int fd) {
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close(fd);
}

static void *conn_main(void *arg) {
  struct conn *c = arg;
  int fd = c->fd, e = c->entry;
  struct timeval tv = {3, 0};
  char *req = malloc(REQ_MAX);
  size_t n = 0;
  unsigned fl = e >= 0 ? corpus[e].flags : 0;

  free(c);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (!req) goto out;
  if (fl & F_FIRST) {
    send_answer(fd, e);
    if (fl & F_NOREAD) goto out;
  }
  n = read_head(fd, req, REQ_MAX);
  if (e < 0) e = entry_of(req);
  pthread_mutex_lock(&g_origin.mu);
  if (g_origin.n_recs < MAX_RECS) {
    struct rec *r = &g_origin.recs[g_origin.n_recs++];
    r->entry = e;
    r->len = n;
    memcpy(r->req, req, n + 1);
  }
  pthread_mutex_unlock(&g_origin.mu);
  if (n == 0 || !strstr(req, "\r\n\r\n")) goto out; /* a tcp check, or a client that left */
  if (e < 0) {
    static const char nf[] = "HTTP/1.1 400 No Such Case\r\nContent-Length: 0\r\n\r\n";
    send_paced(fd, nf, sizeof nf - 1, 0, 0);
    goto out;
  }
  fl = corpus[e].flags;
  if (fl & F_CLOSE) goto out;
  if (fl & F_RST) {
    reset_close(fd);
    fd = -1;
    goto out;
  }
  if (fl & F_SILENT) {
    wait_eof(fd, 10000);
    goto out;
  }
  if (!(fl & F_FIRST)) send_answer(fd, e);
  if (fl & F_RST_AFTER) {
    sleep_ms(50);
    reset_close(fd);
    fd = -1;
    goto out;
  }
  shutdown(fd, SHUT_WR);
  wait_eof(fd, 3000);
out:
  if (fd >= 0) close(fd);
  free(req);
  atomic_fetch_add(&g_origin.finished, 1);
  return NULL;
}

static void *acceptor_main(void *arg) {
  (void)arg;
  while (!atomic_load(&g_origin.stop)) {
    struct pollfd pf[MAX_LISTEN];
    for (int i = 0; i < g_origin.n_listen; i++) {
      pf[i].fd = g_origin.lfd[i];
      pf[i].events = POLLIN;
      pf[i].revents = 0;
    }
    if (poll(pf, (nfds_t)g_origin.n_listen, 50) <= 0) continue;
    for (int i = 0; i < g_origin.n_listen; i++) {
      struct conn *c;
      pthread_t th;
      int fd;
      if (!(pf[i].revents & POLLIN)) continue;
      fd = accept(g_origin.lfd[i], NULL, NULL);
      if (fd < 0) continue;
      c = malloc(sizeof *c);
      if (!c) {
        close(fd);
        continue;
      }
      c->fd = fd;
      c->entry = g_origin.lentry[i];
      atomic_fetch_add(&g_origin.accepted, 1);
      if (pthread_create(&th, NULL, conn_main, c) != 0) {
        close(fd);
        free(c);
        atomic_fetch_add(&g_origin.finished, 1);
        continue;
      }
      pthread_detach(th);
    }
  }
  return NULL;
}

/* The whole answer of an F_HUGE_HEAD or F_FIELDS entry (malloc). */
static char *build_answer(const struct entry *c) {
  size_t cap = 64 * 1024, n = 0;
  char *b = malloc(cap);
  if (!b) return NULL;
  n = (size_t)snprintf(b, cap, "%s", c->raw);
  if (c->flags & F_HUGE_HEAD) {
    n += (size_t)snprintf(b + n, cap - n, "X-Big: ");
    memset(b + n, 'b', 40 * 1024);
    n += 40 * 1024;
    n += (size_t)snprintf(b + n, cap - n, "\r\n");
  } else {
    for (int i = 0; i < 200; i++)
      n += (size_t)snprintf(b + n, cap - n, "X-Field-%d: v%d\r\n", i, i);
  }
  snprintf(b + n, cap - n, "Content-Length: 9\r\n\r\n%s", MARKER);
  return b;
}

static int group_setup(void **state) {
  struct origin *o = &g_origin;
  int main_port = 0;
  (void)state;
  opts_init();
  memset(o, 0, sizeof *o);
  pthread_mutex_init(&o->mu, NULL);
  o->backlog_fd = o->refused_fd = -1;
  o->lfd[0] = loopback_socket(1, &main_port);
  o->lentry[0] = -1;
  o->n_listen = 1;
  if (o->lfd[0] < 0) return -1;
  for (size_t e = 0; e < N_ENTRIES; e++) {
    const struct entry *c = &corpus[e];
    int fd, port = main_port;
    if (c->flags & (F_HUGE_HEAD | F_FIELDS)) {
      o->built[e] = build_answer(c);
      if (!o->built[e]) return -1;
    }
    if (c->flags & F_REFUSED) {
      fd = o->refused_fd = loopback_socket(0, &port);
    } else if (c->flags & F_BACKLOG) {
      fd = o->backlog_fd = loopback_socket(1, &port);
    } else if (c->flags & F_FIRST) {
      if (o->n_listen >= MAX_LISTEN) return -1;
      fd = o->lfd[o->n_listen] = loopback_socket(1, &port);
      o->lentry[o->n_listen++] = (int)e;
    } else {
      fd = 0;
    }
    if (fd < 0) return -1;
    o->port[e] = port;
  }
  {
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd >= 0 && o->n_listen < MAX_LISTEN && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0 && listen(fd, 256) == 0) {
      o->port6 = ntohs(sa.sin6_port);
      o->lfd[o->n_listen] = fd;
      o->lentry[o->n_listen++] = -1;
    } else if (fd >= 0) {
      close(fd);
    }
  }
  if (pthread_create(&o->acceptor, NULL, acceptor_main, NULL) != 0) return -1;
  o->acceptor_started = 1;
  return 0;
}

static int group_teardown(void **state) {
  struct origin *o = &g_origin;
  (void)state;
  atomic_store(&o->stop, 1);
  if (o->acceptor_started) pthread_join(o->acceptor, NULL);
  /* connection threads see stop within 50 ms */
  for (int i = 0; i < 400 && atomic_load(&o->finished) < atomic_load(&o->accepted); i++)
    sleep_ms(25);
  for (int i = 0; i < o->n_listen; i++)
    close(o->lfd[i]);
  if (o->backlog_fd >= 0) close(o->backlog_fd);
  if (o->refused_fd >= 0) close(o->refused_fd);
  for (size_t e = 0; e < N_ENTRIES; e++)
    free(o->built[e]);
  return 0;
}

/* ---- running the probes ---- */

static char g_path[N_ENTRIES][32];

static struct probe_target target_of(size_t e, int o, int timeout_ms) {
  struct probe_target t = {.scheme = "http",
                           .address = "127.0.0.1",
                           .port = g_origin.port[e],
                           .path = g_path[e],
                           .check = &opts[o],
                           .timeout_ms = timeout_ms};
  snprintf(g_path[e], sizeof g_path[e], "/case/%zu", e);
  return t;
}

static int timeout_of(size_t e) {
  return (corpus[e].flags & (F_SILENT | F_BACKLOG)) ? TIMEOUT_SHORT_MS : TIMEOUT_MS;
}

static void fmt_result(const struct probe_result *r, char *out, size_t cap) {
  snprintf(out, cap, "ok=%d status=%d error=%s", r->ok, r->status, r->error);
}

/* Connections the origin should see for one probe of entry e. */
static int conns_of(size_t e) {
  return (corpus[e].flags & (F_REFUSED | F_BACKLOG)) ? 0 : 1;
}

/* Forget the requests seen so far. Call with no connection in flight. */
static void recs_reset(void) {
  pthread_mutex_lock(&g_origin.mu);
  g_origin.n_recs = 0;
  pthread_mutex_unlock(&g_origin.mu);
}

/* Wait (bounded) until at least want connections since the last recs_reset were accepted and
 * every accepted connection is finished; -1 when that did not happen within 10 s. */
static int recs_settle(int base, int want) {
  int64_t end = mono_ms() + 10000;
  while (mono_ms() < end) {
    int acc = atomic_load(&g_origin.accepted), fin = atomic_load(&g_origin.finished);
    if (acc - base >= want && fin == acc) return 0;
    sleep_ms(5);
  }
  return -1;
}

static struct probe *g_probe[2]; /* [0] = PROBE_ENGINE_EPOLL, [1] = PROBE_ENGINE_EPOLL_CURL */
static const char *const eng_names[2] = {"epoll", "epoll-curl"};

static void probers_new(void) {
  for (int i = 0; i < 2; i++) {
    struct probe_opts po = {.user_agent = TEST_UA,
                            .engine = i == 0 ? PROBE_ENGINE_EPOLL : PROBE_ENGINE_EPOLL_CURL};
    g_probe[i] = probe_new(&po);
    assert_non_null(g_probe[i]);
  }
}

static void probers_free(void) {
  for (int i = 0; i < 2; i++)
    probe_free(&g_probe[i]);
}

/* Probe t on engine i, expecting conns connections at the origin: the result and the request the
 * origin read (req_len -1 when no connection reached its reading). label names the case. */
static void probe_once(int i, const struct probe_target *t, int conns, const char *label,
                       struct probe_result *r, char *req, long *req_len) {
  int base, n_recs;
  recs_reset();
  base = atomic_load(&g_origin.accepted);
  assert_int_equal(probe_run(g_probe[i], t, 1, r, NULL), 0);
  if (recs_settle(base, conns) != 0)
    fail_msg("%s, %s: the origin saw %d connections, wanted %d", label, eng_names[i],
             atomic_load(&g_origin.accepted) - base, conns);
  pthread_mutex_lock(&g_origin.mu);
  *req_len = -1;
  req[0] = '\0';
  if (g_origin.n_recs > 0) {
    *req_len = (long)g_origin.recs[0].len;
    memcpy(req, g_origin.recs[0].req, g_origin.recs[0].len + 1);
  }
  n_recs = g_origin.n_recs;
  pthread_mutex_unlock(&g_origin.mu);
  if (n_recs > 1) fail_msg("%s, %s: %d connections for one probe", label, eng_names[i], n_recs);
}

/* One probe of (e, o) on engine i (probe_once). */
static void probe_single(int i, size_t e, int o, int timeout_ms, struct probe_result *r, char *req,
                         long *req_len) {
  struct probe_target t = target_of(e, o, timeout_ms);
  char label[160];
  snprintf(label, sizeof label, "entry %zu (%s), %s", e, corpus[e].name, opt_names[o]);
  probe_once(i, &t, conns_of(e), label, r, req, req_len);
}

/* ---- requests ---- */

#define MAX_LINES 32

/* Split a request head into its lines (CRLF-terminated, up to the empty line), sorted after the
 * first (the request line); the count, or -1 when it is not CRLF-framed. */
static int req_lines(char *req, char **lines) {
  int n = 0;
  char *p = req;
  for (;;) {
    char *eol = strstr(p, "\r\n");
    if (!eol) return -1;
    *eol = '\0';
    if (*p == '\0') break;
    if (n >= MAX_LINES) return -1;
    lines[n++] = p;
    p = eol + 2;
  }
  for (int i = 1; i < n; i++) /* insertion sort of the header lines */
    for (int j = i; j > 1 && strcmp(lines[j - 1], lines[j]) > 0; j--) {
      char *t = lines[j];
      lines[j] = lines[j - 1];
      lines[j - 1] = t;
    }
  return n;
}

/* Escape req for a message. */
static void esc(const char *req, long len, char *out, size_t cap) {
  size_t o = 0;
  if (len < 0) {
    snprintf(out, cap, "(no request read)");
    return;
  }
  for (long i = 0; i < len && o + 5 < cap; i++) {
    unsigned char c = (unsigned char)req[i];
    if (c == '\r') {
      out[o++] = '\\';
      out[o++] = 'r';
    } else if (c == '\n') {
      out[o++] = '\\';
      out[o++] = 'n';
    } else if (c < 0x20 || c >= 0x7f) {
      o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
    } else {
      out[o++] = (char)c;
    }
  }
  out[o] = '\0';
}

static int has_line(char **lines, int n, const char *want) {
  for (int i = 0; i < n; i++)
    if (strcmp(lines[i], want) == 0) return 1;
  return 0;
}

/* The two engines' requests for one probe with check c: the same request line and the same set
 * of header lines; epoll-curl's request also carries what probe.h promises (line1, the Host line
 * host, the User-Agent, Connection: close, c's headers). A tcp check sends nothing. */
static void same_requests(const char *label, const struct hcheck_opts *c, const char *line1,
                          const char *host, const char *req_n, long len_n, const char *req_c,
                          long len_c) {
  static char a[REQ_MAX], b[REQ_MAX], ea[REQ_MAX * 2], eb[REQ_MAX * 2];
  char *la[MAX_LINES], *lb[MAX_LINES];
  char want[HCHECK_HEADER_NAME_MAX + HCHECK_HEADER_VALUE_MAX + 4];
  int na, nb, same;
  esc(req_n, len_n, ea, sizeof ea);
  esc(req_c, len_c, eb, sizeof eb);
  if (len_n != len_c && (len_n <= 0 || len_c <= 0))
    fail_msg("%s: the requests differ:\n  epoll:      %s\n  epoll-curl: %s", label, ea, eb);
  if (len_c < 0) return; /* no connection reached the origin's reading */
  if (c->type == HCHECK_TCP) {
    if (len_c != 0 || len_n != 0)
      fail_msg("%s: a tcp check sent a request:\n  epoll:      %s\n  epoll-curl: %s", label, ea,
               eb);
    return;
  }
  memcpy(a, req_n, (size_t)len_n + 1);
  memcpy(b, req_c, (size_t)len_c + 1);
  na = req_lines(a, la);
  nb = req_lines(b, lb);
  same = na == nb && na > 0;
  for (int i = 0; same && i < na; i++)
    same = strcmp(la[i], lb[i]) == 0;
  if (!same)
    fail_msg("%s: the requests differ:\n  epoll:      %s\n  epoll-curl: %s", label, ea, eb);
  if (strcmp(lb[0], line1) != 0) fail_msg("%s: request line %s, wanted %s", label, lb[0], line1);
  if (!has_line(lb, nb, host) || !has_line(lb, nb, "User-Agent: " TEST_UA) ||
      !has_line(lb, nb, "Connection: close"))
    fail_msg("%s: request lacks %s, the User-Agent or Connection: close: %s", label, host, eb);
  for (int i = 0; i < c->n_headers; i++) {
    snprintf(want, sizeof want, "%s: %s", c->headers[i].name, c->headers[i].value);
    if (!has_line(lb, nb, want)) fail_msg("%s: request lacks %s: %s", label, want, eb);
  }
}

/* The two engines' requests for (e, o) (same_requests). */
static void check_requests(size_t e, int o, const char *req_n, long len_n, const char *req_c,
                           long len_c) {
  char label[160], line1[64], host[64];
  snprintf(label, sizeof label, "entry %zu (%s), %s", e, corpus[e].name, opt_names[o]);
  snprintf(line1, sizeof line1, "%s /case/%zu HTTP/1.1", o == O_HEAD ? "HEAD" : "GET", e);
  snprintf(host, sizeof host, "Host: 127.0.0.1:%d", g_origin.port[e]);
  same_requests(label, &opts[o], line1, host, req_n, len_n, req_c, len_c);
}

/* ---- the strict reading, on the entry's bytes ---- */

/* What proberesp makes of entry e's answer under option set o, judged as probe.c judges: 1 with
 * the result in out, 0 when the outcome is not a reading of bytes (transport flags). */
static int model_native(size_t e, int o, char *out, size_t cap) {
  const struct entry *c = &corpus[e];
  size_t n = 0;
  struct hcheck_outcome oc = {.connected = 1};
  struct presp r;
  struct probe_result res = {0};
  char *buf;
  if (c->flags & F_TRANSPORT) return 0;
  if (o == O_TCP) {
    snprintf(out, cap, "ok=1 status=0 error=");
    return 1;
  }
  buf = answer_of(e, &n);
  assert_non_null(buf);
  presp_init(&r, opts[o].method == HCHECK_HEAD, opts[o].expected_body[0] != '\0');
  if (n > 0) presp_feed(&r, buf, n);
  presp_eof(&r);
  if (r.state == PRESP_BAD) {
    oc.error = r.error;
  } else {
    oc.status = r.status;
    oc.body = r.kept;
    oc.body_len = r.kept_len;
  }
  res.status = oc.status;
  res.ok = hcheck_judge(&opts[o], &oc, res.error, sizeof res.error);
  fmt_result(&res, out, cap);
  presp_free(&r);
  free(buf);
  return 1;
}

static const struct diff *diff_of(size_t e, int o) {
  for (const struct diff *d = diffs; d->entry; d++)
    if (strcmp(d->entry, corpus[e].name) == 0 && (d->opts & (1u << o))) return d;
  return NULL;
}

/* ---- the tests ---- */

/* The single results, kept for the batch test: [engine][option set][entry]. */
static char g_single[2][N_OPTS][N_ENTRIES][PROBE_ERROR_MAX + 64];
static int g_single_done;

/* Each table row names an entry of the corpus and says what libcurl and the epoll engine say. */
static void test_diff_table_valid(void **state) {
  (void)state;
  for (const struct diff *d = diffs; d->entry; d++) {
    int found = 0;
    for (size_t e = 0; e < N_ENTRIES; e++)
      found |= strcmp(d->entry, corpus[e].name) == 0;
    if (!found) fail_msg("diffs[]: no corpus entry \"%s\"", d->entry);
    assert_true(d->opts != 0);
    assert_string_not_equal(d->epoll, d->curl);
    assert_non_null(d->why);
    for (const struct diff *d2 = d + 1; d2->entry; d2++)
      if (strcmp(d->entry, d2->entry) == 0 && (d->opts & d2->opts))
        fail_msg("diffs[]: \"%s\" listed twice for one option set", d->entry);
  }
  assert_true(N_ENTRIES >= 40);
}

/* Every entry under every option set, one probe at a time, on both engines. */
static void test_single(void **state) {
  static char req_n[REQ_MAX], req_c[REQ_MAX];
  int rows = 0;
  (void)state;
  probers_new();
  for (int o = 0; o < N_OPTS; o++) {
    for (size_t e = 0; e < N_ENTRIES; e++) {
      struct probe_result rn, rc;
      long len_n, len_c;
      char sn[PROBE_ERROR_MAX + 64], sc[PROBE_ERROR_MAX + 64], sm[PROBE_ERROR_MAX + 64];
      const struct diff *d = diff_of(e, o);
      int tmo = timeout_of(e);
      probe_single(1, e, o, tmo, &rc, req_c, &len_c);
      probe_single(0, e, o, tmo, &rn, req_n, &len_n);
      if (tmo == TIMEOUT_SHORT_MS &&
          (strcmp(rc.error, "connect timeout") == 0 || strcmp(rn.error, "connect timeout") == 0)) {
        /* a loaded machine did not even connect on loopback within 300 ms: once more, longer */
        probe_single(1, e, o, TIMEOUT_RETRY_MS, &rc, req_c, &len_c);
        probe_single(0, e, o, TIMEOUT_RETRY_MS, &rn, req_n, &len_n);
      }
      fmt_result(&rn, sn, sizeof sn);
      fmt_result(&rc, sc, sizeof sc);
      snprintf(g_single[0][o][e], sizeof g_single[0][o][e], "%s", sn);
      snprintf(g_single[1][o][e], sizeof g_single[1][o][e], "%s", sc);
      if (o == O_DEFAULT && corpus[e].want >= 0 && rc.status != corpus[e].want)
        fail_msg("entry %zu (%s): epoll-curl says %s, wanted status %d", e, corpus[e].name, sc,
                 corpus[e].want);
      if (d) {
        rows++;
        if (strcmp(sc, d->curl) != 0)
          fail_msg("entry %zu (%s), %s: epoll-curl says %s, diffs[] says %s", e, corpus[e].name,
                   opt_names[o], sc, d->curl);
        if (strcmp(sn, d->epoll) != 0)
          fail_msg("entry %zu (%s), %s: epoll says %s, diffs[] says %s (epoll-curl: %s)", e,
                   corpus[e].name, opt_names[o], sn, d->epoll, sc);
      } else if (strcmp(sn, sc) != 0) {
        fail_msg("entry %zu (%s), %s: the engines differ and diffs[] has no row:\n"
                 "  epoll:      %s\n  epoll-curl: %s",
                 e, corpus[e].name, opt_names[o], sn, sc);
      }
      if (model_native(e, o, sm, sizeof sm)) {
        const char *want = d ? d->epoll : sc;
        if (strcmp(sm, want) != 0)
          fail_msg("entry %zu (%s), %s: proberesp reads it as %s but %s says %s", e, corpus[e].name,
                   opt_names[o], sm, d ? "diffs[]" : "epoll-curl", want);
      }
      check_requests(e, o, req_n, len_n, req_c, len_c);
    }
  }
  g_single_done = 1;
  probers_free();
  print_message("%zu entries x %d option sets: the engines agree but in the %d pairs diffs[] "
                "lists\n",
                N_ENTRIES, N_OPTS, rows);
}

/* Each option set against one target per entry in one batch: every result lands on its own
 * index (the single results, engine for engine). */
static void test_batch(void **state) {
  static struct probe_target t[N_ENTRIES];
  static struct probe_result r[2][N_ENTRIES];
  (void)state;
  probers_new();
  for (int o = 0; o < N_OPTS; o++) {
    for (int i = 0; i < 2; i++) {
      int base = atomic_load(&g_origin.accepted), want = 0;
      for (size_t e = 0; e < N_ENTRIES; e++) {
        t[e] = target_of(e, o, timeout_of(e));
        want += conns_of(e);
      }
      recs_reset();
      assert_int_equal(probe_run(g_probe[i], t, N_ENTRIES, r[i], NULL), 0);
      assert_int_equal(recs_settle(base, want), 0);
    }
    for (size_t e = 0; e < N_ENTRIES; e++) {
      char sn[PROBE_ERROR_MAX + 64], sc[PROBE_ERROR_MAX + 64];
      const struct diff *d = diff_of(e, o);
      fmt_result(&r[0][e], sn, sizeof sn);
      fmt_result(&r[1][e], sc, sizeof sc);
      if (strcmp(sc, "ok=0 status=0 error=connect timeout") == 0 ||
          strcmp(sn, "ok=0 status=0 error=connect timeout") == 0)
        continue; /* loopback did not connect within 300 ms on a loaded machine: no verdict */
      if (g_single_done) {
        if (strcmp(sn, g_single[0][o][e]) != 0 || strcmp(sc, g_single[1][o][e]) != 0)
          fail_msg("entry %zu (%s), %s, batch:\n  epoll:      %s (alone: %s)\n"
                   "  epoll-curl: %s (alone: %s)",
                   e, corpus[e].name, opt_names[o], sn, g_single[0][o][e], sc, g_single[1][o][e]);
      }
      if (!d && strcmp(sn, sc) != 0)
        fail_msg("entry %zu (%s), %s, batch: the engines differ:\n  epoll:      %s\n"
                 "  epoll-curl: %s",
                 e, corpus[e].name, opt_names[o], sn, sc);
      if (d && strcmp(sc, d->curl) != 0)
        fail_msg("entry %zu (%s), %s, batch: epoll-curl says %s, diffs[] says %s", e,
                 corpus[e].name, opt_names[o], sc, d->curl);
      if (d && strcmp(sn, d->epoll) != 0)
        fail_msg("entry %zu (%s), %s, batch: epoll says %s, diffs[] says %s", e, corpus[e].name,
                 opt_names[o], sn, d->epoll);
    }
  }
  probers_free();
}

/* Targets beyond the corpus's plain one, against entry 0 ("200 CL"): a Host name with a query, an
 * IPv6 literal as Host and as address, the check's port over the target's, a DNS name (libcurl
 * on both engines). Same result, same request, and the Host line probe.h promises. */
static void test_request_variants(void **state) {
  struct variant {
    const char *name;
    const char *address; /* "::1" = the IPv6 listener */
    const char *host;
    const char *path;
    int opt;              /* option set (copied; its port set below) */
    int port_swap;        /* 1 = target port refused, check port the origin's; 2 = the reverse */
    const char *host_hdr; /* the Host line's name (":<port>" follows); NULL = no request */
    const char *want;     /* the result */
  };
  static const struct variant vs[] = {
      {"host name, query", "127.0.0.1", "origin.test", "/case/0?a=1&b=%2F", O_DEFAULT, 0,
       "origin.test", "ok=1 status=200 error="},
      {"host mixed case, HEAD", "127.0.0.1", "Origin.Test-1", "/case/0", O_HEAD, 0, "Origin.Test-1",
       "ok=1 status=200 error="},
      {"host IPv6 literal", "127.0.0.1", "::1", "/case/0", O_HEADERS, 0, "[::1]",
       "ok=1 status=200 error="},
      {"check port over target port", "127.0.0.1", NULL, "/case/0", O_HEADERS, 1, "127.0.0.1",
       "ok=1 status=200 error="},
      {"check port over target port, tcp", "127.0.0.1", NULL, "/case/0", O_TCP, 1, NULL,
       "ok=1 status=0 error="},
      {"check port refused", "127.0.0.1", NULL, "/case/0", O_DEFAULT, 2, NULL,
       "ok=0 status=0 error=connect failed: Connection refused"},
      {"IPv6 address", "::1", NULL, "/case/0", O_BODY, 0, "[::1]", "ok=1 status=200 error="},
      {"IPv6 address, tcp", "::1", NULL, "/case/0", O_TCP, 0, NULL, "ok=1 status=0 error="},
      {"DNS name", "localhost", NULL, "/case/0", O_CODES, 0, "localhost", "ok=1 status=200 error="},
  };
  static char req_n[REQ_MAX], req_c[REQ_MAX];
  int ran = 0;
  (void)state;
  probers_new();
  for (size_t k = 0; k < sizeof vs / sizeof vs[0]; k++) {
    const struct variant *v = &vs[k];
    int v6 = strcmp(v->address, "::1") == 0;
    int port = v6 ? g_origin.port6 : g_origin.port[0];
    int refused = g_origin.port[N_ENTRIES - 2]; /* "refused port" */
    struct hcheck_opts c = opts[v->opt];
    struct probe_target t = {.scheme = "http",
                             .address = v->address,
                             .host = v->host,
                             .path = v->path,
                             .port = port,
                             .check = &c,
                             .timeout_ms = TIMEOUT_MS};
    struct probe_result rn, rc;
    long len_n, len_c;
    char sn[PROBE_ERROR_MAX + 64], sc[PROBE_ERROR_MAX + 64], label[128], line1[128], host[128];
    int conns = v->port_swap == 2 ? 0 : 1;
    if (v6 && port == 0) {
      print_message("no IPv6 loopback here: \"%s\" not run\n", v->name);
      continue;
    }
    if (v->port_swap == 1) {
      t.port = refused;
      c.port = port;
    } else if (v->port_swap == 2) {
      c.port = refused;
    }
    snprintf(label, sizeof label, "variant \"%s\"", v->name);
    probe_once(1, &t, conns, label, &rc, req_c, &len_c);
    probe_once(0, &t, conns, label, &rn, req_n, &len_n);
    fmt_result(&rn, sn, sizeof sn);
    fmt_result(&rc, sc, sizeof sc);
    if (strcmp(sc, v->want) != 0) fail_msg("%s: epoll-curl says %s, wanted %s", label, sc, v->want);
    if (strcmp(sn, sc) != 0)
      fail_msg("%s: the engines differ:\n  epoll:      %s\n  epoll-curl: %s", label, sn, sc);
    snprintf(line1, sizeof line1, "%s %s HTTP/1.1", c.method == HCHECK_HEAD ? "HEAD" : "GET",
             v->path);
    host[0] = '\0';
    if (v->host_hdr) snprintf(host, sizeof host, "Host: %s:%d", v->host_hdr, port);
    same_requests(label, &c, line1, host, req_n, len_n, req_c, len_c);
    ran++;
  }
  probers_free();
  assert_true(ran >= 7);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_diff_table_valid),
      cmocka_unit_test(test_single),
      cmocka_unit_test(test_batch),
      cmocka_unit_test(test_request_variants),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
