/* proberesp — what a health probe reads of an origin's HTTP/1.x answer: the final status, the
 * end of the body and, when the check looks for a marker, the body's first bytes. Pure: it is
 * fed the bytes as they arrive, in pieces of any size.
 *
 * The head is read by http1 (the parser noded's edge path reads origins with), so an answer the
 * edge could not pass on to a visitor is not a healthy answer either:
 * - 1xx interim heads are skipped (their bytes count towards PRESP_HEAD_MAX); a 101 is
 *   PRESP_BAD "unrequested protocol switch (101)": a probe never asks to upgrade;
 * - a head that http1 rejects, more than HTTP1_MAX_HEADERS fields or a head longer than
 *   PRESP_HEAD_MAX bytes: PRESP_BAD, no status;
 * - the body's framing is http1_response_framing's, the edge's rule: a framing the edge
 *   answers 502 (a repeated or invalid Content-Length, a Transfer-Encoding other than exactly
 *   "chunked" or with a Content-Length where a body follows) is PRESP_BAD, no status;
 * - once the status is known nothing read later changes it: malformed chunked framing, or more
 *   than PRESP_BODY_MAX body bytes, only ends the reading (PRESP_DONE, cut = 1).
 */
#ifndef CDNCA_PROBERESP_H
#define CDNCA_PROBERESP_H

#include <stddef.h>

#include "buf.h"
#include "http1.h"

/* The longest head block (interim heads included) a probe reads: noded's edge limit. */
#define PRESP_HEAD_MAX 32768
/* Body bytes read before the transfer is cut (the same as PROBE_BODY_MAX). */
#define PRESP_BODY_MAX (64 * 1024)
/* Body bytes kept for expected_body (the same as HCHECK_BODY_MAX). */
#define PRESP_KEEP_MAX (64 * 1024)

enum presp_state {
  PRESP_HEAD = 0, /* waiting for the final head */
  PRESP_BODY = 1, /* status known, reading the body */
  PRESP_DONE = 2, /* status known, nothing more to read */
  PRESP_BAD = 3   /* no usable answer: error says why */
};

struct presp {
  int head_only;     /* the request was HEAD: no body follows a final head */
  int keep;          /* keep the body's first PRESP_KEEP_MAX bytes (after dechunking) */
  int state;         /* enum presp_state */
  int status;        /* the final status once state is BODY or DONE, else 0 */
  int cut;           /* DONE before the body's end (too long, malformed chunks) */
  const char *error; /* PRESP_BAD: "bad response head", "response head too large",
                        "bad response framing", "incomplete response head", "empty reply",
                        "unrequested protocol switch (101)" (static) */
  struct buf head;   /* a head split across pieces (at most PRESP_HEAD_MAX bytes) */
  size_t scan;       /* http1_head_end's place in head */
  size_t head_total; /* head bytes taken so far, interim heads included */
  struct http1_body body;
  size_t body_bytes; /* body bytes seen (payload bytes when chunked) */
  char *kept;        /* keep: the body's first bytes (malloc, PRESP_KEEP_MAX) */
  size_t kept_len;
};

/* Start reading the answer to one request. */
void presp_init(struct presp *r, int head_only, int keep);

/* Feed the next n bytes at p (p may be rewritten in place). Returns the state. Bytes fed after
 * DONE or BAD are ignored. Out of memory reads as PRESP_BAD "out of memory". */
int presp_feed(struct presp *r, char *p, size_t n);

/* The origin closed the connection: ends a body read to the close; an answer still in its head
 * becomes PRESP_BAD ("empty reply" when no byte came, else "incomplete response head").
 * Returns the state. */
int presp_eof(struct presp *r);

/* Free what r holds (the kept body too); r can be initialised again. */
void presp_free(struct presp *r);

#endif
