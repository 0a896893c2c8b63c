/* Tests for common/proberesp: a health probe's reading of an origin's HTTP/1.x answer, as an
 * outcome table. Every row is fed three ways — in one piece, one byte at a time, and in two
 * pieces split at every position — and must end the same way each time: the state once all
 * bytes are in, the state after presp_eof, the status, cut, the error and the kept body. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "proberesp.h"

/* Rows whose bytes are built by build_row (too long to write out). */
enum gen {
  GEN_NONE = 0,
  GEN_HEADERS_MAX,    /* HTTP1_MAX_HEADERS fields: fine */
  GEN_HEADERS_OVER,   /* one field more */
  GEN_HEAD_MAX,       /* a head of exactly PRESP_HEAD_MAX bytes: fine */
  GEN_HEAD_OVER,      /* a head of PRESP_HEAD_MAX + 1 bytes */
  GEN_HEAD_ENDLESS,   /* more than PRESP_HEAD_MAX bytes and no end of the head */
  GEN_INTERIM_OVER,   /* an interim head and a final head, together over PRESP_HEAD_MAX */
  GEN_CL_MAX,         /* a Content-Length body of exactly PRESP_BODY_MAX bytes */
  GEN_CL_OVER,        /* a Content-Length body over PRESP_BODY_MAX */
  GEN_CHUNKED_MAX,    /* a chunked body of exactly PRESP_BODY_MAX payload bytes in 4 KiB chunks */
  GEN_CHUNKED_SMALL,  /* the same in 8-byte chunks: 40 KiB of framing */
  GEN_CHUNKED_OVER,   /* a chunked body over PRESP_BODY_MAX */
  GEN_CHUNKED_BROKEN, /* 60000 payload bytes, then malformed framing */
  GEN_CHUNKED_BROKEN_OVER, /* PRESP_BODY_MAX + 2 payload bytes, then malformed framing */
  GEN_CLOSE_OVER           /* a close-delimited body over PRESP_BODY_MAX */
};

struct row {
  const char *name;
  const char *raw; /* the answer's bytes; NULL: built for gen */
  int gen;
  int head_only, keep;
  int fed;           /* state once every byte is fed */
  int state;         /* state after presp_eof */
  int status, cut;   /* after presp_eof */
  const char *error; /* NULL: none */
  const char *kept;  /* keep: the kept bytes; NULL: built for gen */
};

#define H PRESP_HEAD
#define B PRESP_BODY
#define D PRESP_DONE
#define X PRESP_BAD
#define CHUNKED "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

static const struct row rows[] = {
    /* bodies: the framing decides when the answer ends */
    {"200 with Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 0, 0, 1, D, D,
     200, 0, NULL, "hello"},
    {"200 with Content-Length, not kept", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 0, 0,
     0, D, D, 200, 0, NULL, ""},
    {"Content-Length: 0", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, 0, 1, D, D, 200, 0,
     NULL, ""},
    {"close-delimited body", "HTTP/1.1 200 OK\r\nServer: t\r\n\r\nhello world", 0, 0, 1, B, D, 200,
     0, NULL, "hello world"},
    {"close-delimited, HTTP/1.0", "HTTP/1.0 200 OK\r\n\r\nold", 0, 0, 1, B, D, 200, 0, NULL, "old"},
    {"close-delimited, empty", "HTTP/1.1 200 OK\r\n\r\n", 0, 0, 1, B, D, 200, 0, NULL, ""},
    {"chunked, kept dechunked", CHUNKED "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", 0, 0, 1, D, D,
     200, 0, NULL, "hello world"},
    {"chunked, not kept", CHUNKED "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", 0, 0, 0, D, D, 200, 0,
     NULL, ""},
    {"chunked with extensions and trailers",
     CHUNKED "5;name=val\r\nhello\r\n6 ; a = \"q\\\"x\" ; b\r\n world\r\nA\r\n0123456789\r\n"
             "0;last\r\nX-Trailer: 1\r\nX-Other: two words\r\n\r\n",
     0, 0, 1, D, D, 200, 0, NULL, "hello world0123456789"},
    {"chunked, last chunk missing at eof", CHUNKED "5\r\nhello\r\n", 0, 0, 1, B, D, 200, 1, NULL,
     "hello"},
    {"chunked, Transfer-Encoding in capitals",
     "HTTP/1.1 200 OK\r\ntransfer-encoding: CHUNKED\r\n\r\n2\r\nok\r\n0\r\n\r\n", 0, 0, 1, D, D,
     200, 0, NULL, "ok"},

    /* answers without a body */
    {"HEAD with Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", 0, 1, 1, D, D,
     200, 0, NULL, ""},
    {"HEAD with chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 1, 1, D, D,
     200, 0, NULL, ""},
    {"HEAD, framing not looked at", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, 1, 0,
     D, D, 200, 0, NULL, ""},
    {"204 no body", "HTTP/1.1 204 No Content\r\n\r\n", 0, 0, 1, D, D, 204, 0, NULL, ""},
    {"204 with Content-Length", "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", 0, 0, 1, D,
     D, 204, 0, NULL, ""},
    {"304 with Content-Length", "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n", 0, 0, 1,
     D, D, 304, 0, NULL, ""},

    /* interim heads */
    {"100 Continue then 200",
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, 0, 1, D, D,
     200, 0, NULL, "ok"},
    {"103 then 404",
     "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
     "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found",
     0, 0, 1, D, D, 404, 0, NULL, "not found"},
    {"100, 102 then close-delimited 200",
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 200 OK\r\n\r\nx", 0, 0,
     1, B, D, 200, 0, NULL, "x"},
    {"interim head with bad framing is skipped",
     "HTTP/1.1 100 Continue\r\nContent-Length: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: "
     "1\r\n\r\n!",
     0, 0, 1, D, D, 200, 0, NULL, "!"},
    {"101 to a probe (that asked for no upgrade) is refused",
     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x05hello", 0, 0, 1, X, X,
     0, 0, "unrequested protocol switch (101)", ""},
    {"503", "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 4\r\n\r\nbusy",
     0, 0, 1, D, D, 503, 0, NULL, "busy"},
    {"status without reason", "HTTP/1.1 500\r\nContent-Length: 0\r\n\r\n", 0, 0, 1, D, D, 500, 0,
     NULL, ""},

    /* line endings */
    {"LF-only line endings", "HTTP/1.1 200 OK\nContent-Length: 3\n\nabc", 0, 0, 1, D, D, 200, 0,
     NULL, "abc"},
    {"LF-only interim then final", "HTTP/1.1 100 Continue\n\nHTTP/1.1 201 Created\n\nmade", 0, 0, 1,
     B, D, 201, 0, NULL, "made"},
    {"mixed line endings", "HTTP/1.1 200 OK\r\nContent-Length: 2\n\r\nhi", 0, 0, 1, D, D, 200, 0,
     NULL, "hi"},

    /* heads http1 refuses */
    {"bad status line", "HTTP/1.1 2x0 OK\r\n\r\n", 0, 0, 1, X, X, 0, 0, "bad response head", ""},
    {"not HTTP", "ICY 200 OK\r\n\r\n", 0, 0, 1, X, X, 0, 0, "bad response head", ""},
    {"HTTP/2 status line", "HTTP/2 200\r\ncontent-length: 0\r\n\r\n", 0, 0, 1, X, X, 0, 0,
     "bad response head", ""},
    {"status below 100", "HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n", 0, 0, 1, X, X, 0, 0,
     "bad response head", ""},
    {"status of four digits", "HTTP/1.1 2000 OK\r\n\r\n", 0, 0, 1, X, X, 0, 0, "bad response head",
     ""},
    {"obs-fold header", "HTTP/1.1 200 OK\r\nX-A: 1\r\n  continued\r\nContent-Length: 0\r\n\r\n", 0,
     0, 1, X, X, 0, 0, "bad response head", ""},
    {"bad final head after an interim one",
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nBad Name: v\r\n\r\n", 0, 0, 1, X, X, 0, 0,
     "bad response head", ""},
    {"empty line first", "\r\nHTTP/1.1 200 OK\r\n\r\n", 0, 0, 1, X, X, 0, 0, "bad response head",
     ""},
    {"HTTP1_MAX_HEADERS fields", NULL, GEN_HEADERS_MAX, 0, 1, D, D, 200, 0, NULL, "ok"},
    {"more than HTTP1_MAX_HEADERS fields", NULL, GEN_HEADERS_OVER, 0, 1, X, X, 0, 0,
     "bad response head", ""},

    /* the head's size */
    {"head of PRESP_HEAD_MAX bytes", NULL, GEN_HEAD_MAX, 0, 1, D, D, 200, 0, NULL, "ok"},
    {"head over PRESP_HEAD_MAX", NULL, GEN_HEAD_OVER, 0, 1, X, X, 0, 0, "response head too large",
     ""},
    {"endless head", NULL, GEN_HEAD_ENDLESS, 0, 1, X, X, 0, 0, "response head too large", ""},
    {"interim and final heads over PRESP_HEAD_MAX", NULL, GEN_INTERIM_OVER, 0, 1, X, X, 0, 0,
     "response head too large", ""},

    /* framing the edge refuses */
    {"two different Content-Length",
     "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 0, 0, 1, X, X, 0, 0,
     "bad response framing", ""},
    {"two equal Content-Length (the edge refuses any repeat)",
     "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 0, 0, 1, X, X, 0, 0,
     "bad response framing", ""},
    {"HEAD with an invalid Content-Length (it would be passed on)",
     "HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n", 0, 1, 1, X, X, 0, 0, "bad response framing",
     ""},
    {"204 with Transfer-Encoding gzip (no body: ignored)",
     "HTTP/1.1 204 No Content\r\nTransfer-Encoding: gzip\r\n\r\n", 0, 0, 1, D, D, 204, 0, NULL, ""},
    {"Transfer-Encoding gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx", 0, 0, 1, X,
     X, 0, 0, "bad response framing", ""},
    {"Transfer-Encoding gzip, chunked",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 0, 0, 1, X, X, 0, 0,
     "bad response framing", ""},
    {"two Transfer-Encoding chunked",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     0, 0, 1, X, X, 0, 0, "bad response framing", ""},
    {"Transfer-Encoding and Content-Length",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 0, 0, 1,
     X, X, 0, 0, "bad response framing", ""},
    {"Content-Length and Transfer-Encoding",
     "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 0, 0, 1,
     X, X, 0, 0, "bad response framing", ""},
    {"invalid Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\nhello", 0, 0, 1, X, X,
     0, 0, "bad response framing", ""},
    {"negative Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, 0, 1, X, X, 0,
     0, "bad response framing", ""},
    {"empty Content-Length", "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", 0, 0, 1, X, X, 0, 0,
     "bad response framing", ""},
    {"Content-Length list", "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello", 0, 0, 1, X, X,
     0, 0, "bad response framing", ""},

    /* after the status nothing changes it */
    {"malformed chunk size", CHUNKED "5\r\nhello\r\nzz\r\n\r\n", 0, 0, 1, D, D, 200, 1, NULL,
     "hello"},
    {"chunk data without its CRLF", CHUNKED "5\r\nhelloX\r\n0\r\n\r\n", 0, 0, 1, D, D, 200, 1, NULL,
     "hello"},
    {"LF-only chunk line", CHUNKED "5\nhello\n0\n\n", 0, 0, 1, D, D, 200, 1, NULL, ""},
    {"bad trailer", CHUNKED "2\r\nok\r\n0\r\nBad Trailer\r\n\r\n", 0, 0, 1, D, D, 200, 1, NULL,
     "ok"},
    {"malformed chunk after an interim head",
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: "
     "chunked\r\n\r\n3\r\nabc\r\n-1\r\n",
     0, 0, 1, D, D, 502, 1, NULL, "abc"},
    {"Content-Length body of PRESP_BODY_MAX", NULL, GEN_CL_MAX, 0, 1, D, D, 200, 0, NULL, NULL},
    {"Content-Length body over PRESP_BODY_MAX", NULL, GEN_CL_OVER, 0, 1, D, D, 200, 1, NULL, NULL},
    {"Content-Length body over PRESP_BODY_MAX, not kept", NULL, GEN_CL_OVER, 0, 0, D, D, 200, 1,
     NULL, ""},
    {"chunked body of PRESP_BODY_MAX", NULL, GEN_CHUNKED_MAX, 0, 1, D, D, 200, 0, NULL, NULL},
    {"chunked body of PRESP_BODY_MAX, not kept", NULL, GEN_CHUNKED_MAX, 0, 0, D, D, 200, 0, NULL,
     ""},
    {"chunked body of PRESP_BODY_MAX in 8-byte chunks, not kept", NULL, GEN_CHUNKED_SMALL, 0, 0, D,
     D, 200, 0, NULL, ""},
    {"chunked body over PRESP_BODY_MAX", NULL, GEN_CHUNKED_OVER, 0, 1, D, D, 200, 1, NULL, NULL},
    {"chunked body over PRESP_BODY_MAX, not kept", NULL, GEN_CHUNKED_OVER, 0, 0, D, D, 200, 1, NULL,
     ""},
    {"long chunked body with malformed framing", NULL, GEN_CHUNKED_BROKEN, 0, 1, D, D, 200, 1, NULL,
     NULL},
    {"chunked body over PRESP_BODY_MAX with malformed framing", NULL, GEN_CHUNKED_BROKEN_OVER, 0, 1,
     D, D, 200, 1, NULL, NULL},
    {"close-delimited body over PRESP_BODY_MAX", NULL, GEN_CLOSE_OVER, 0, 1, D, D, 200, 1, NULL,
     NULL},

    /* the end of the connection */
    {"eof with no bytes", "", 0, 0, 1, H, X, 0, 0, "empty reply", ""},
    {"eof mid-head", "HTTP/1.1 200 OK\r\nContent-Le", 0, 0, 1, H, X, 0, 0,
     "incomplete response head", ""},
    {"eof after one byte", "H", 0, 0, 1, H, X, 0, 0, "incomplete response head", ""},
    {"eof after an interim head", "HTTP/1.1 100 Continue\r\n\r\n", 0, 0, 1, H, X, 0, 0,
     "incomplete response head", ""},
    {"eof mid Content-Length body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", 0, 0, 1,
     B, D, 200, 1, NULL, "hello"},
    {"eof mid chunk", CHUNKED "5\r\nhel", 0, 0, 1, B, D, 200, 1, NULL, "hel"},

    /* bytes after the end */
    {"bytes after DONE ignored",
     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 500 Oops\r\n\r\nmore", 0, 0, 1, D, D,
     200, 0, NULL, "ok"},
    {"bytes after the last chunk ignored", CHUNKED "2\r\nok\r\n0\r\n\r\n\r\ngarbage", 0, 0, 1, D, D,
     200, 0, NULL, "ok"},
    {"bytes after HEAD's head ignored", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", 0, 1, 1,
     D, D, 200, 0, NULL, ""},
    {"bytes after BAD ignored", "HTTP/1.1 2x0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n", 0, 0, 1, X, X, 0, 0,
     "bad response head", ""},
};

/* The n-th byte of a generated body: a pattern with no short period. */
static char body_byte(size_t i) {
  static const char set[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  return set[(i + i / 37 + i / 1009) % 36];
}

static void put(struct buf *b, const void *p, size_t n) {
  assert_int_equal(buf_append(b, p, n), 0);
}

static void puts_(struct buf *b, const char *s) {
  put(b, s, strlen(s));
}

/* A header line "X-Pad: ppp...\r\n" of exactly n bytes (n >= 10). */
static void pad_line(struct buf *b, size_t n) {
  puts_(b, "X-Pad: ");
  for (size_t i = 0; i < n - 9; i++)
    put(b, "p", 1);
  puts_(b, "\r\n");
}

/* A chunked body of total payload bytes in chunks of at most chunk bytes; kept gets the payload. */
static void chunked_body(struct buf *raw, struct buf *kept, size_t total, size_t chunk) {
  size_t i = 0;
  while (i < total) {
    size_t n = total - i < chunk ? total - i : chunk;
    char line[32];
    snprintf(line, sizeof line, "%zx\r\n", n);
    puts_(raw, line);
    for (size_t k = 0; k < n; k++, i++) {
      char c = body_byte(i);
      put(raw, &c, 1);
      put(kept, &c, 1);
    }
    puts_(raw, "\r\n");
  }
}

/* Build the bytes of a generated row and the body bytes it keeps (before the PRESP_KEEP_MAX
 * cap). */
static void build_row(int gen, struct buf *raw, struct buf *kept) {
  size_t n;
  switch (gen) {
  case GEN_HEADERS_MAX:
  case GEN_HEADERS_OVER:
    puts_(raw, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n");
    n = gen == GEN_HEADERS_MAX ? HTTP1_MAX_HEADERS - 1 : HTTP1_MAX_HEADERS;
    for (size_t i = 0; i < n; i++) {
      char line[64];
      snprintf(line, sizeof line, "X-Field-%zu: %zu\r\n", i, i);
      puts_(raw, line);
    }
    puts_(raw, "\r\nok");
    puts_(kept, "ok");
    break;
  case GEN_HEAD_MAX:
  case GEN_HEAD_OVER: {
    static const char start[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n";
    size_t want = PRESP_HEAD_MAX + (gen == GEN_HEAD_OVER);
    puts_(raw, start);
    pad_line(raw, want - strlen(start) - 2);
    puts_(raw, "\r\n");
    assert_int_equal(raw->len, want);
    puts_(raw, "ok");
    puts_(kept, "ok");
    break;
  }
  case GEN_HEAD_ENDLESS:
    puts_(raw, "HTTP/1.1 200 OK\r\n");
    pad_line(raw, PRESP_HEAD_MAX + 5000);
    puts_(raw, "X-More: 1\r\n");
    break;
  case GEN_INTERIM_OVER:
    /* the interim head 20000 bytes, the final one 12769: one byte more than allowed */
    puts_(raw, "HTTP/1.1 100 Continue\r\n");
    pad_line(raw, 20000 - 23 - 2);
    puts_(raw, "\r\n");
    assert_int_equal(raw->len, 20000);
    puts_(raw, "HTTP/1.1 200 OK\r\n");
    pad_line(raw, PRESP_HEAD_MAX + 1 - 20000 - 17 - 2);
    puts_(raw, "\r\n");
    assert_int_equal(raw->len, PRESP_HEAD_MAX + 1);
    break;
  case GEN_CL_MAX:
  case GEN_CL_OVER:
  case GEN_CLOSE_OVER: {
    char line[64];
    n = gen == GEN_CL_MAX ? PRESP_BODY_MAX : PRESP_BODY_MAX + 4000;
    if (gen == GEN_CLOSE_OVER)
      puts_(raw, "HTTP/1.1 200 OK\r\n\r\n");
    else {
      snprintf(line, sizeof line, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", n);
      puts_(raw, line);
    }
    for (size_t i = 0; i < n; i++) {
      char c = body_byte(i);
      put(raw, &c, 1);
      put(kept, &c, 1);
    }
    break;
  }
  case GEN_CHUNKED_MAX:
    puts_(raw, CHUNKED);
    chunked_body(raw, kept, PRESP_BODY_MAX, 4096);
    puts_(raw, "0\r\n\r\n");
    break;
  case GEN_CHUNKED_SMALL:
    puts_(raw, CHUNKED);
    chunked_body(raw, kept, PRESP_BODY_MAX, 8);
    puts_(raw, "0\r\n\r\n");
    break;
  case GEN_CHUNKED_OVER:
    puts_(raw, CHUNKED);
    chunked_body(raw, kept, PRESP_BODY_MAX + 3000, 1000);
    puts_(raw, "0\r\n\r\n");
    break;
  case GEN_CHUNKED_BROKEN:
  case GEN_CHUNKED_BROKEN_OVER:
    puts_(raw, CHUNKED);
    chunked_body(raw, kept, gen == GEN_CHUNKED_BROKEN ? 60000 : PRESP_BODY_MAX - 3, 5000);
    puts_(raw, "5\r\nabcde\r\nq\r\n\r\n"); /* "abcde" is read, "q" is not a size */
    put(kept, "abcde", 5);
    break;
  default:
    fail_msg("no generator %d", gen);
  }
}

/* What reading one answer came to. */
struct outcome {
  int fed, state, status, cut;
  const char *error;
  char *kept;
  size_t kept_len;
};

/* Feed raw[0..len) to a new reader: first [0, split), then the rest in pieces of at most step
 * bytes, each piece in a heap block of its own (so a read past a piece, or a pointer kept into
 * one, shows under ASan); then presp_eof. */
static void read_answer(const struct row *rw, const char *raw, size_t len, size_t split,
                        size_t step, struct outcome *o) {
  struct presp r;
  size_t pos = 0;
  presp_init(&r, rw->head_only, rw->keep);
  do { /* the empty answer is fed as one empty piece */
    size_t n = pos < split ? split - pos : (len - pos < step ? len - pos : step);
    char *piece = malloc(n ? n : 1);
    int st;
    assert_non_null(piece);
    memcpy(piece, raw + pos, n);
    st = presp_feed(&r, piece, n);
    free(piece);
    assert_int_equal(st, r.state);
    pos += n;
  } while (pos < len);
  o->fed = r.state;
  o->state = presp_eof(&r);
  assert_int_equal(o->state, r.state);
  o->status = r.status;
  o->cut = r.cut;
  o->error = r.error;
  o->kept_len = r.kept_len;
  o->kept = malloc(r.kept_len + 1);
  assert_non_null(o->kept);
  if (r.kept_len) memcpy(o->kept, r.kept, r.kept_len);

  /* the answer is over: more bytes and another eof change nothing */
  {
    char more[] = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
    size_t kl = r.kept_len;
    int st = presp_feed(&r, more, sizeof more - 1);
    assert_int_equal(st, o->state);
    st = presp_eof(&r);
    assert_int_equal(st, o->state);
    assert_int_equal(r.status, o->status);
    assert_int_equal(r.cut, o->cut);
    assert_ptr_equal(r.error, o->error);
    assert_int_equal(r.kept_len, kl);
  }
  presp_free(&r);
  assert_null(r.head.data);
  assert_null(r.kept);
  assert_int_equal(r.kept_len, 0);
}

static const char *state_name(int s) {
  static const char *names[] = {"HEAD", "BODY", "DONE", "BAD"};
  return s >= 0 && s <= 3 ? names[s] : "?";
}

/* Outcomes that differ from their row, and the rows they came from: every row is run to the end
 * and each difference printed (the first few per row), then the test fails. */
static int wrong, wrong_in_row;

#define MISMATCH(...)                                                                              \
  do {                                                                                             \
    wrong++;                                                                                       \
    if (wrong_in_row++ < 3) print_error(__VA_ARGS__);                                              \
    return;                                                                                        \
  } while (0)

/* Check one outcome against the row; how says how the bytes were fed. */
static void check(const struct row *rw, const char *how, const struct outcome *o, const char *kept,
                  size_t kept_len) {
  const char *err = rw->error;
  if (!kept) kept = "";
  if (o->fed != rw->fed)
    MISMATCH("%s (%s): state after the bytes %s, want %s\n", rw->name, how, state_name(o->fed),
             state_name(rw->fed));
  if (o->state != rw->state)
    MISMATCH("%s (%s): state after eof %s, want %s\n", rw->name, how, state_name(o->state),
             state_name(rw->state));
  if (o->status != rw->status)
    MISMATCH("%s (%s): status %d, want %d\n", rw->name, how, o->status, rw->status);
  if (o->cut != rw->cut) MISMATCH("%s (%s): cut %d, want %d\n", rw->name, how, o->cut, rw->cut);
  if ((o->error == NULL) != (err == NULL) || (err && strcmp(o->error, err) != 0))
    MISMATCH("%s (%s): error \"%s\", want \"%s\"\n", rw->name, how, o->error ? o->error : "(none)",
             err ? err : "(none)");
  if (o->kept_len != kept_len || (kept_len && memcmp(o->kept, kept, kept_len) != 0))
    MISMATCH("%s (%s): kept %zu bytes \"%.*s\", want %zu \"%.*s\"\n", rw->name, how, o->kept_len,
             (int)(o->kept_len < 80 ? o->kept_len : 80), o->kept, kept_len,
             (int)(kept_len < 80 ? kept_len : 80), kept);
}

/* 1 when position k is within d of mark. */
static int near(size_t k, size_t mark, size_t d) {
  return k + d >= mark && k <= mark + d;
}

/* Where a long answer is split in two: every position near its start and end, near the end of
 * the first head, the head limit and the body limit, and every 401st position between. */
static int split_here(size_t k, size_t len, size_t head_end) {
  if (len <= 4096) return 1;
  return k < 300 || len - k < 300 || k % 401 == 0 || near(k, head_end, 12) ||
         near(k, PRESP_HEAD_MAX, 12) || near(k, head_end + PRESP_BODY_MAX, 12) ||
         near(k, head_end + PRESP_KEEP_MAX, 12);
}

static void test_outcomes(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const struct row *rw = &rows[i];
    struct buf raw, kept;
    struct outcome o;
    const char *p, *end;
    size_t len, want_len, head_end = 0;
    char how[64];
    buf_init(&raw, 0);
    buf_init(&kept, 0);
    wrong_in_row = 0;
    if (rw->gen) {
      build_row(rw->gen, &raw, &kept);
    } else {
      puts_(&raw, rw->raw);
      puts_(&kept, rw->kept);
    }
    if (rw->kept && rw->gen) {
      kept.len = 0;
      puts_(&kept, rw->kept);
    }
    if (!rw->keep) kept.len = 0;
    want_len = kept.len < PRESP_KEEP_MAX ? kept.len : PRESP_KEEP_MAX;
    p = raw.data ? raw.data : "";
    len = raw.len;
    end = strstr(p, "\r\n\r\n");
    if (end) head_end = (size_t)(end - p) + 4;

    read_answer(rw, p, len, 0, len ? len : 1, &o);
    check(rw, "one piece", &o, kept.data, want_len);
    free(o.kept);

    read_answer(rw, p, len, 0, 1, &o);
    check(rw, "byte by byte", &o, kept.data, want_len);
    free(o.kept);

    for (size_t k = 0; k <= len; k++) {
      if (!split_here(k, len, head_end)) continue;
      read_answer(rw, p, len, k, len ? len : 1, &o);
      snprintf(how, sizeof how, "split at %zu", k);
      check(rw, how, &o, kept.data, want_len);
      free(o.kept);
    }
    if (wrong_in_row > 3) print_error("%s: %d more\n", rw->name, wrong_in_row - 3);
    buf_fini(&raw);
    buf_fini(&kept);
  }
  if (wrong) fail_msg("%d outcomes differ from their rows", wrong);
}

/* A reader can be used again after presp_free, and presp_free on a fresh reader is harmless. */
static void test_reuse(void **state) {
  struct presp r;
  char a[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
  char b[] = "HTTP/1.1 404 Not Found\r\nContent-";
  (void)state;
  presp_init(&r, 0, 1);
  presp_free(&r);
  presp_init(&r, 0, 1);
  assert_int_equal(presp_feed(&r, b, sizeof b - 1), PRESP_HEAD);
  assert_non_null(r.head.data); /* the split head is held */
  presp_free(&r);
  presp_init(&r, 0, 1);
  assert_int_equal(presp_feed(&r, a, sizeof a - 1), PRESP_DONE);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.kept_len, 3);
  assert_memory_equal(r.kept, "abc", 3);
  presp_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_outcomes),
      cmocka_unit_test(test_reuse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
