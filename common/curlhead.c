/* curlhead — the bounds and the framing rule of a libcurl answer's head (curlhead.h). */
#include "curlhead.h"

#include <string.h>
#include <strings.h>

void curlhead_init(struct curlhead *h, size_t max, int no_body) {
  memset(h, 0, sizeof *h);
  h->max = max ? max : CURLHEAD_MAX;
  h->no_body = no_body;
}

static int refuse(struct curlhead *h, const char *why) {
  h->why = why;
  return -1;
}

/* 1 when line (n bytes) is the field name, a colon, and optional white space. */
static int field_is(const char *line, size_t n, const char *name, const char **value) {
  size_t k = strlen(name);
  if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':') return 0;
  *value = line + k + 1;
  return 1;
}

/* The value (to the end of the line, CRLF excluded) without white space around it is word. */
static int value_is(const char *v, const char *end, const char *word) {
  size_t k = strlen(word);
  while (v < end && (*v == ' ' || *v == '\t'))
    v++;
  while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
    end--;
  return (size_t)(end - v) == k && strncasecmp(v, word, k) == 0;
}

/* The value (to the end of the line) without white space around it is 1 to 18 digits. */
static int digits(const char *v, const char *end) {
  size_t k;
  while (v < end && (*v == ' ' || *v == '\t'))
    v++;
  while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
    end--;
  k = (size_t)(end - v);
  if (k == 0 || k > 18) return 0;
  for (; v < end; v++)
    if (*v < '0' || *v > '9') return 0;
  return 1;
}

/* A field line's name, up to its colon, is a token (no white space before the colon). A line
   without a colon is libcurl's to judge. */
static int name_is_token(const char *line, size_t n) {
  static const char tchars[] = "!#$%&'*+-.^_`|~";
  const char *colon = memchr(line, ':', n);
  if (!colon) return 1;
  if (colon == line) return 0;
  for (const char *p = line; p < colon; p++) {
    unsigned char c = (unsigned char)*p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          (c && memchr(tchars, c, sizeof tchars - 1))))
      return 0;
  }
  return 1;
}

int curlhead_line(struct curlhead *h, const char *line, size_t n) {
  const char *v;
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
  if (field_is(line, n, "Content-Length", &v)) {
    h->lengths++;
    if (!digits(v, line + n)) return refuse(h, "bad response framing");
  }
  if (!h->no_body && field_is(line, n, "Transfer-Encoding", &v) &&
      (++h->codings > 1 || !value_is(v, line + n, "chunked")))
    return refuse(h, "bad response framing"); /* a coding other than chunked alone */
  return 0;
}

size_t curlhead_cb(char *data, size_t size, size_t nmemb, void *h) {
  size_t n = size * nmemb;
  return curlhead_line(h, data, n) < 0 ? 0 : n;
}
