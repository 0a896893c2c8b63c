/* curlhead — what controld's libcurl clients (probes, webhook and channel deliveries, the
   checkpoint plugin) take of an answer's head and trailers: at most a bound of bytes in all
   (libcurl bounds a head, not the trailer lines after a chunked body, which it keeps), and a
   head read one way, by the edge's rules: one Content-Length of digits, or Transfer-Encoding:
   chunked alone, never both ("bad response framing"); field names that are tokens, no white
   space before the colon ("bad response head"); "response head too large" past the bound
   (docs/design.md, One message, one reading). Used as CURLOPT_HEADERFUNCTION; the line rule is
   pure. It also bounds the body as it comes off the wire (curlhead_bound_wire): libcurl reads
   and drops a chunked body's size lines and extensions itself, so a body callback never sees
   an endless extension, and without this bound reading one lasted until the timeout. */
#ifndef CDNCA_CURLHEAD_H
#define CDNCA_CURLHEAD_H

#include <stddef.h>

#include <curl/curl.h>

/* The most bytes of head and trailer lines one transfer may bring: a head within the edge's
   32 KiB and its trailers within 32 KiB more. */
#define CURLHEAD_MAX (64 * 1024)

/* The most bytes of body, chunk framing included, one transfer reads off the wire: four times
   the 64 KiB that every user keeps or needs of a body (probes, plugin answers; deliveries
   need none), so only framing that outweighs its data three to one meets it first. */
#define CURLHEAD_WIRE_MAX (256 * 1024)

struct curlhead {
  size_t bytes, max;
  size_t wire;          /* body bytes as read, before libcurl removes the chunked framing
                           (at most CURLHEAD_WIRE_MAX) */
  int wire_cut;         /* the transfer was ended at CURLHEAD_WIRE_MAX: the head is whole */
  int lengths, codings; /* Content-Length and Transfer-Encoding lines of the current head */
  int in_head;          /* 1 from a status line to its blank line */
  int final;            /* the current head is not a 1xx one */
  int no_body;          /* the answer to a HEAD: its Transfer-Encoding frames nothing */
  int final_done;       /* a final (non-1xx) head has ended: what follows are trailers */
  const char *why;      /* set when the answer is refused: one of the three texts above */
};

/* Start h for one transfer, allowing max bytes (0 = CURLHEAD_MAX); no_body for the answer to a
   HEAD request, whose Transfer-Encoding is not checked (its Content-Length still is: it would be
   passed on). */
void curlhead_init(struct curlhead *h, size_t max, int no_body);

/* One header line as libcurl hands it (status line, field, blank line or trailer; CRLF
   included): 0 to go on, -1 when the answer is refused (h->why says why). Pure. */
int curlhead_line(struct curlhead *h, const char *line, size_t n);

/* What refuses an answer whose transfer libcurl ended without an error: NULL when a final head
   was read to its blank line, else "response head cut short" (libcurl 7.88 ends a transfer whose
   connection closed inside the head with CURLE_OK and the status line's code, so a status counts
   only with its whole head). Pure. */
const char *curlhead_unfinished(const struct curlhead *h);

/* CURLOPT_HEADERFUNCTION with CURLOPT_HEADERDATA a struct curlhead: a refused line stops the
   transfer (CURLE_WRITE_ERROR). */
size_t curlhead_cb(char *data, size_t size, size_t nmemb, void *h);

/* Count n more body bytes as read off the wire: 0 while within CURLHEAD_WIRE_MAX, else 1 with
   h->wire_cut set (it sticks). Pure. */
int curlhead_wire(struct curlhead *h, size_t n);

/* Make easy count its body bytes as read into h (CURLOPT_VERBOSE with a debug function that
   counts CURLINFO_DATA_IN, libcurl's view before it removes the chunked framing, and prints
   nothing) and end the transfer once they pass CURLHEAD_WIRE_MAX (a progress function:
   CURLE_ABORTED_BY_CALLBACK, within libcurl's 100 reads of a call past the bound). The head was
   whole by then: the caller judges the answer by it, as for a body it cut itself. h must
   outlive the transfers of easy; curlhead_init resets the count. CURLE_OK or libcurl's error. */
CURLcode curlhead_bound_wire(CURL *easy, struct curlhead *h);

#endif
