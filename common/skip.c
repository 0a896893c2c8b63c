/* skip — per-origin passive health (skip, half-open, fail open) and retry rules. */
#include "skip.h"

#include <stddef.h>
#include <string.h>

/* The limits are the product's: a retry budget or a skip longer than an hour, more than ten
   retries or a thousand failures would hide an outage rather than ride it out; 100 ms is the
   shortest window or skip a node's clock can measure meaningfully. */
#define P(m) FIELD_AT(struct skip_params, m)
const struct field_def skip_fields[] = {
    {"retries", FIELD_INT, 0, P(retries), 0, 10, 2, NULL, NULL, NULL, 0},
    {"retry_budget_ms", FIELD_INT, 0, P(retry_budget_ms), 0, 600000, 15000, NULL, NULL, NULL, 0},
    {"fail_count", FIELD_INT, 0, P(fail_count), 1, 1000, 3, NULL, NULL, NULL, 0},
    {"fail_window_ms", FIELD_INT, 0, P(fail_window_ms), 100, 3600000, 10000, NULL, NULL, NULL, 0},
    {"skip_ms", FIELD_INT, 0, P(skip_ms), 100, 3600000, 30000, NULL, NULL, NULL, 0},
    {"half_open_requests", FIELD_INT, 0, P(half_open_requests), 1, 100, 1, NULL, NULL, NULL, 0},
    {"retry_on_status", FIELD_INT_LIST, 0, offsetof(struct skip_params, retry_on_status),
     SKIP_MAX_STATUS, 400, 599, 0, NULL, NULL, NULL, offsetof(struct skip_params, n_retry_on_status)},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0},
};
#undef P

void skip_params_default(struct skip_params *p) {
  memset(p, 0, sizeof *p);
  fields_defaults(skip_fields, p);
  p->n_retry_on_status = 3;
  p->retry_on_status[0] = 502;
  p->retry_on_status[1] = 503;
  p->retry_on_status[2] = 504;
}

void skip_rec_init(struct skip_rec *r) { memset(r, 0, sizeof *r); }

static void clear_history(struct skip_rec *r) {
  r->fail_n = 0;
  r->fail_head = 0;
}

static int effective_fail_count(const struct skip_params *p) {
  if (p->fail_count < 1) return 1;
  return p->fail_count > SKIP_RING ? SKIP_RING : p->fail_count;
}

static int effective_half_open(const struct skip_params *p) {
  return p->half_open_requests < 1 ? 1 : p->half_open_requests;
}

static void start_skip(struct skip_rec *r, const struct skip_params *p, int64_t now) {
  r->state = SKIP_SKIPPED;
  r->skipped_until = now + p->skip_ms;
  r->half_open_in_flight = 0;
  r->skips++;
  clear_history(r);
}

/* Failures in the ring no older than fail_window_ms at now. */
static int failures_in_window(const struct skip_rec *r, const struct skip_params *p, int64_t now) {
  int n = 0;
  for (int i = 0; i < r->fail_n; i++)
    if (now - r->fail_ts[i] <= p->fail_window_ms) n++;
  return n;
}

int skip_record(struct skip_rec *r, const struct skip_params *p, int64_t now, int failed) {
  int skipped = 0;
  r->requests++;
  if (failed) r->failures++;
  switch (r->state) {
  case SKIP_HALF_OPEN:
    if (r->half_open_in_flight > 0) r->half_open_in_flight--;
    if (failed) {
      start_skip(r, p, now);
      skipped = 1;
    } else {
      r->state = SKIP_HEALTHY;
      r->half_open_in_flight = 0;
      clear_history(r);
    }
    break;
  case SKIP_SKIPPED:
    /* late outcomes of requests started before the skip (or picked by fail open) change nothing */
    break;
  case SKIP_HEALTHY:
    if (!failed) break;
    r->fail_ts[r->fail_head] = now;
    r->fail_head = (r->fail_head + 1) % SKIP_RING;
    if (r->fail_n < SKIP_RING) r->fail_n++;
    if (failures_in_window(r, p, now) >= effective_fail_count(p)) {
      start_skip(r, p, now);
      skipped = 1;
    }
    break;
  }
  return skipped;
}

void skip_release(struct skip_rec *r) {
  if (r->state == SKIP_HALF_OPEN && r->half_open_in_flight > 0) r->half_open_in_flight--;
}

/* Shared by peek and usable: 1 usable, 0 not; *to_half_open / *reset_trials say what usable changes. */
static int evaluate(const struct skip_rec *r, const struct skip_params *p, int64_t now,
                    int *to_half_open, int *reset_trials) {
  *to_half_open = 0;
  *reset_trials = 0;
  switch (r->state) {
  case SKIP_HEALTHY:
    return 1;
  case SKIP_SKIPPED:
    if (now < r->skipped_until) return 0;
    *to_half_open = 1;
    return 1;
  case SKIP_HALF_OPEN:
    if (r->half_open_in_flight < effective_half_open(p)) return 1;
    /* trials that never reported for a whole skip period are presumed lost */
    if (now - r->half_open_since >= p->skip_ms) {
      *reset_trials = 1;
      return 1;
    }
    return 0;
  }
  return 0;
}

int skip_peek_usable(const struct skip_rec *r, const struct skip_params *p, int64_t now) {
  int a, b;
  return evaluate(r, p, now, &a, &b);
}

int skip_usable(struct skip_rec *r, const struct skip_params *p, int64_t now) {
  int to_half_open, reset_trials;
  if (!evaluate(r, p, now, &to_half_open, &reset_trials)) return 0;
  if (to_half_open || reset_trials) {
    r->state = SKIP_HALF_OPEN;
    r->half_open_since = now;
    r->half_open_in_flight = 0;
  }
  if (r->state == SKIP_HALF_OPEN) r->half_open_in_flight++;
  return 1;
}

int skip_is_skipped(const struct skip_rec *r, int64_t now) {
  (void)now;
  return r->state != SKIP_HEALTHY;
}

int skip_pick(struct skip_cand *c, int n, const struct skip_params *p, int64_t now, int *fail_open) {
  int best = -1, open = 0;
  int64_t total = 0;
  if (fail_open) *fail_open = 0;
  if (n > SKIP_MAX_PICK) n = SKIP_MAX_PICK;
  for (int pass = 0; pass < 2 && best < 0; pass++) {
    total = 0;
    for (int i = 0; i < n; i++) {
      int w = c[i].weight < 1 ? 1 : c[i].weight;
      if (c[i].tried) continue;
      if (pass == 0 && !skip_peek_usable(c[i].rec, p, now)) continue;
      c[i].rec->rr_current += w;
      total += w;
      if (best < 0 || c[i].rec->rr_current > c[best].rec->rr_current) best = i;
    }
    if (best < 0) open = 1;
  }
  if (best < 0) return -1;
  c[best].rec->rr_current -= total;
  if (open) {
    c[best].rec->fail_open++;
    if (fail_open) *fail_open = 1;
  } else {
    (void)skip_usable(c[best].rec, p, now);
  }
  return best;
}

int skip_is_failure(const struct skip_params *p, int transport_error, int status) {
  if (transport_error) return 1;
  for (int i = 0; i < p->n_retry_on_status && i < SKIP_MAX_STATUS; i++)
    if (p->retry_on_status[i] == status) return 1;
  return 0;
}

int skip_method_idempotent(const char *method, unsigned len) {
  static const char *const ok[] = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE", NULL};
  for (const char *const *m = ok; *m; m++)
    if (strlen(*m) == len && memcmp(*m, method, len) == 0) return 1;
  return 0;
}

int skip_may_retry(int attempts_so_far, int64_t elapsed_ms, const struct skip_params *p,
                   int idempotent_method, int request_sent, int body_sent) {
  if (body_sent) return 0;
  if (request_sent && !idempotent_method) return 0;
  if (attempts_so_far + 1 > p->retries + 1) return 0;
  if (elapsed_ms > p->retry_budget_ms) return 0;
  return 1;
}
