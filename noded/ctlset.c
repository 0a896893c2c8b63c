/* ctlset — replica list, rotation and the shared retry backoff (pure). */
#include "ctlset.h"

#include <stdio.h>
#include <string.h>

/* Copy the item [b, e) of the list (trimmed, trailing '/' removed) into out. 0, or -1 with err. */
static int take_url(const char *b, const char *e, int pos, char *out, char *err, size_t errlen) {
  size_t n;
  while (b < e && (*b == ' ' || *b == '\t'))
    b++;
  while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
    e--;
  while (e > b && e[-1] == '/')
    e--;
  n = (size_t)(e - b);
  if (n == 0) {
    snprintf(err, errlen, "option controld: URL %d of the list is empty", pos);
    return -1;
  }
  if (!((n > 7 && strncmp(b, "http://", 7) == 0) || (n > 8 && strncmp(b, "https://", 8) == 0))) {
    snprintf(err, errlen, "option controld: '%.*s' (URL %d) is not an http:// or https:// URL",
             (int)(n > 200 ? 200 : n), b, pos);
    return -1;
  }
  if (n >= CTLSET_URL_MAX) {
    snprintf(err, errlen, "option controld: URL %d is too long (max %d)", pos, CTLSET_URL_MAX - 1);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)b[i];
    if (ch <= ' ' || ch >= 0x7f) {
      snprintf(err, errlen, "option controld: URL %d contains a space or a control character", pos);
      return -1;
    }
  }
  memcpy(out, b, n);
  out[n] = '\0';
  return 0;
}

int ctlset_parse(struct ctlset *s, const char *list, char *err, size_t errlen) {
  const char *p = list;
  memset(s, 0, sizeof *s);
  if (!list || !*list) {
    snprintf(err, errlen, "option controld: --controld URL is required");
    return -1;
  }
  for (;;) {
    const char *e = strchr(p, ',');
    if (!e) e = p + strlen(p);
    if (s->n == CTLSET_MAX) {
      snprintf(err, errlen, "option controld: more than %d URLs", CTLSET_MAX);
      goto bad;
    }
    if (take_url(p, e, s->n + 1, s->url[s->n], err, errlen) < 0) goto bad;
    for (int i = 0; i < s->n; i++) {
      if (strcmp(s->url[i], s->url[s->n]) == 0) {
        snprintf(err, errlen, "option controld: '%s' is listed twice (URLs %d and %d)", s->url[i],
                 i + 1, s->n + 1);
        goto bad;
      }
    }
    s->n++;
    if (!*e) break;
    p = e + 1;
  }
  return 0;
bad:
  s->n = 0;
  return -1;
}

enum ctlset_outcome ctlset_classify(int answered, long status) {
  if (!answered || status < 100) return CTLSET_DOWN;
  if (status == 502 || status == 503 || status == 504) return CTLSET_AWAY;
  return CTLSET_ANSWERED;
}

const char *ctlset_current(const struct ctlset *s, int *idx, uint64_t *gen) {
  if (idx) *idx = s->cur;
  if (gen) *gen = s->gen;
  return s->url[s->cur];
}

int64_t ctlset_backoff_ms(int failures, uint32_t rnd) {
  int64_t d = CTLSET_BACKOFF_FIRST_MS;
  for (int i = 1; i < failures && d < CTLSET_BACKOFF_CAP_MS; i++)
    d *= 2;
  if (d > CTLSET_BACKOFF_CAP_MS) d = CTLSET_BACKOFF_CAP_MS;
  return d / 2 + (int64_t)(rnd % (uint32_t)(d / 2 + 1));
}

int ctlset_report(struct ctlset *s, uint64_t gen, enum ctlset_outcome o, int64_t now,
                  uint32_t rnd) {
  int prev = s->cur;
  if (o == CTLSET_ANSWERED) {
    /* any answer, even from a call begun before the latest failure, proves the link works */
    if (s->failures || s->retry_at) {
      s->failures = 0;
      s->last_down = 0;
      s->retry_at = 0;
      s->gen++;
    }
    return 0;
  }
  if (gen != s->gen) return 0;
  if (s->failures < 1000) s->failures++;
  s->last_down = o == CTLSET_DOWN;
  s->retry_at = now + ctlset_backoff_ms(s->failures, rnd);
  s->probe_at = now + CTLSET_PROBE_EVERY_MS;
  if (s->n > 1) {
    s->cur = (s->cur + 1) % s->n;
    s->switches++;
  }
  s->gen++;
  return s->cur != prev;
}

int64_t ctlset_wait_ms(const struct ctlset *s, int64_t now) {
  return s->retry_at > now ? s->retry_at - now : 0;
}

int ctlset_probe_claim(struct ctlset *s, int64_t now, uint32_t rnd) {
  if (!s->last_down || s->failures == 0) return 0;
  if (ctlset_wait_ms(s, now) <= CTLSET_PROBE_MIN_WAIT_MS) return 0;
  if (now < s->probe_at) return 0;
  s->probe_at = now + CTLSET_PROBE_EVERY_MS + (int64_t)(rnd % (CTLSET_PROBE_EVERY_MS + 1));
  return 1;
}

void ctlset_reachable(struct ctlset *s, uint64_t gen, int64_t now) {
  if (gen != s->gen || s->retry_at <= now) return;
  s->retry_at = now;
  s->gen++;
}
