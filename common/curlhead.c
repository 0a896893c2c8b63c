/* curlhead — the bounds and the framing rule of a libcurl answer's head (curlhead.h). */
#include "curlhead.h"

#include <stdint.h>
#include <string.h>

#include "http1.h"

void curlhead_init(struct curlhead *h, size_t max, int no_body) {
  memset(h, 0, sizeof *h);
  h->max = max ? max : CURLHEAD_MAX;
  h->no_body = no_body;
}

static int refuse(struct curlhead *h, const char *why) {
  h->why = why;
  return -1;
}

/* 1 when line (n bytes) is the field name and a colon; *v, *vn its value without the white
   space and line end around it. */
static int field_is(const char *line, size_t n, const char *name, const char **v, size_t *vn) {
  size_t k = strlen(name);
  const char *a, *e = line + n;
  if (n <= k || line[k] != ':' || !http1_ieq(line, k, name)) return 0;
  a = line + k + 1;
  while (a < e && (*a == ' ' || *a == '\t'))
    a++;
  while (e > a && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t'))
    e--;
  *v = a;
  *vn = (size_t)(e - a);
  return 1;
}

/* A field line's name, up to its colon, is a token (no white space before the colon). A line
   without a colon is libcurl's to judge. */
static int name_is_token(const char *line, size_t n) {
  const char *colon = memchr(line, ':', n);
  return !colon || http1_token(line, (size_t)(colon - line));
}

int curlhead_line(struct curlhead *h, const char *line, size_t n) {
  const char *v;
  size_t vn;
  uint64_t bytes;
  if (h->why) return -1;
  h->bytes += n;
  if (h->bytes > h->max) return refuse(h, "response head too large");
  if (h->final_done) return 0; /* a trailer line: counted only */
  if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
    const char *sp = memchr(line, ' ', n);
    h->in_head = 1;
    h->lengths = h->codings = 0;
    /* a 1xx head is followed by another; any other one is the answer's own */
    h->final = !(sp && (size_t)(sp - line) + 1 < n && sp[1] == '1');
    return 0;
  }
  if ((n == 2 && line[0] == '\r' && line[1] == '\n') || (n == 1 && line[0] == '\n')) {
    if (!h->in_head) return 0;
    h->in_head = 0;
    h->final_done = h->final;
    /* two lengths, or a length and a coding: which one frames the body? */
    if (h->lengths > 1 || (h->lengths && h->codings)) return refuse(h, "bad response framing");
    return 0;
  }
  if (!h->in_head) return 0;
  if (!name_is_token(line, n)) return refuse(h, "bad response head");
  if (field_is(line, n, "Content-Length", &v, &vn)) {
    h->lengths++;
    if (vn > 18 || http1_parse_length(v, (unsigned)vn, &bytes) < 0)
      return refuse(h, "bad response framing");
  }
  if (!h->no_body && field_is(line, n, "Transfer-Encoding", &v, &vn) &&
      (++h->codings > 1 || !http1_ieq(v, vn, "chunked")))
    return refuse(h, "bad response framing"); /* a coding other than chunked alone */
  return 0;
}

const char *curlhead_unfinished(const struct curlhead *h) {
  return h->final_done ? NULL : "response head cut short";
}

size_t curlhead_cb(char *data, size_t size, size_t nmemb, void *h) {
  size_t n = size * nmemb;
  return curlhead_line(h, data, n) < 0 ? 0 : n;
}

int curlhead_wire(struct curlhead *h, size_t n) {
  /* h->wire stays within the bound, so the subtraction cannot wrap */
  if (!h->wire_cut && n > CURLHEAD_WIRE_MAX - h->wire) h->wire_cut = 1;
  if (!h->wire_cut) h->wire += n;
  return h->wire_cut;
}

static int on_debug(CURL *easy, curl_infotype type, char *data, size_t n, void *h) {
  (void)easy;
  (void)data;
  if (type == CURLINFO_DATA_IN) (void)curlhead_wire(h, n);
  return 0;
}

static int on_progress(void *h, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
  (void)dltotal;
  (void)dlnow;
  (void)ultotal;
  (void)ulnow;
  return ((struct curlhead *)h)->wire_cut; /* non-zero ends the transfer */
}

CURLcode curlhead_bound_wire(CURL *easy, struct curlhead *h) {
  CURLcode rc = curl_easy_setopt(easy, CURLOPT_DEBUGFUNCTION, on_debug);
  if (rc == CURLE_OK) rc = curl_easy_setopt(easy, CURLOPT_DEBUGDATA, h);
  if (rc == CURLE_OK) rc = curl_easy_setopt(easy, CURLOPT_VERBOSE, 1L);
  if (rc == CURLE_OK) rc = curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, on_progress);
  if (rc == CURLE_OK) rc = curl_easy_setopt(easy, CURLOPT_XFERINFODATA, h);
  if (rc == CURLE_OK) rc = curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
  return rc;
}
