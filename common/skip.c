/* skip — per-origin passive health (skip, half-open, fail open) and retry rules. */
#include "skip.h"

#include <string.h>

void skip_rec_init(struct skip_rec *r) {
  memset(r, 0, sizeof *r);
}

static void clear_history(struct skip_rec *r) {
  r->fail_n = 0;
  r->fail_head = 0;
  memset(r->slice_id, 0, sizeof r->slice_id);
  memset(r->slice_total, 0, sizeof r->slice_total);
  memset(r->slice_failed, 0, sizeof r->slice_failed);
}

static int64_t slice_width(const struct skip_params *p) {
  int64_t w = p->fail_window_ms / SKIP_SLICES;
  return w < 1 ? 1 : w;
}

/* Count one outcome in the slice of now, recycling a slice that fell out of the window. */
static void slice_add(struct skip_rec *r, const struct skip_params *p, int64_t now, int failed) {
  int64_t id = (now < 0 ? 0 : now) / slice_width(p);
  int k = (int)(id % SKIP_SLICES);
  if (r->slice_id[k] != id) {
    r->slice_id[k] = id;
    r->slice_total[k] = 0;
    r->slice_failed[k] = 0;
  }
  if (r->slice_total[k] < UINT32_MAX) r->slice_total[k]++;
  if (failed && r->slice_failed[k] < UINT32_MAX) r->slice_failed[k]++;
}

/* 1 when failure_ratio is on and the window's failure share reached it over enough volume. */
static int ratio_reached(const struct skip_rec *r, const struct skip_params *p, int64_t now) {
  int64_t id = (now < 0 ? 0 : now) / slice_width(p);
  uint64_t total = 0, failed = 0;
  int min_volume = p->failure_min_volume < 1 ? 1 : p->failure_min_volume;
  if (!(p->failure_ratio > 0)) return 0;
  for (int k = 0; k < SKIP_SLICES; k++) {
    if (r->slice_id[k] > id || id - r->slice_id[k] >= SKIP_SLICES) continue;
    total += r->slice_total[k];
    failed += r->slice_failed[k];
  }
  if (total < (uint64_t)min_volume) return 0;
  return (double)failed >= p->failure_ratio * (double)total;
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

/* An outcome on a healthy origin: into the ratio window, a failure into the ring; 1 = skip now. */
static int healthy_outcome(struct skip_rec *r, const struct skip_params *p, int64_t now,
                           int failed) {
  slice_add(r, p, now, failed);
  if (!failed) return 0;
  r->fail_ts[r->fail_head] = now;
  r->fail_head = (r->fail_head + 1) % SKIP_RING;
  if (r->fail_n < SKIP_RING) r->fail_n++;
  if (failures_in_window(r, p, now) >= effective_fail_count(p) || ratio_reached(r, p, now)) {
    start_skip(r, p, now);
    return 1;
  }
  return 0;
}

static void restore(struct skip_rec *r) {
  r->state = SKIP_HEALTHY;
  r->half_open_in_flight = 0;
  clear_history(r);
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
      restore(r);
    }
    break;
  case SKIP_SKIPPED:
    /* late outcomes of requests started before the skip (or picked by fail open) change nothing */
    break;
  case SKIP_HEALTHY:
    skipped = healthy_outcome(r, p, now, failed);
    break;
  }
  return skipped;
}

int skip_probe(struct skip_rec *r, const struct skip_params *p, int64_t now, int ok) {
  r->probes++;
  switch (r->state) {
  case SKIP_HEALTHY:
    /* only a failed probe is an outcome: probes do not dilute the visitors' failure ratio */
    return ok ? 0 : healthy_outcome(r, p, now, 1);
  case SKIP_SKIPPED:
    if (now < r->skipped_until) return 0;
    /* past its skip time the probe is the half-open trial */
    __attribute__((fallthrough));
  case SKIP_HALF_OPEN:
    if (ok) {
      restore(r);
      return 0;
    }
    start_skip(r, p, now);
    return 1;
  }
  return 0;
}

void skip_release(struct skip_rec *r) {
  if (r->state == SKIP_HALF_OPEN && r->half_open_in_flight > 0) r->half_open_in_flight--;
}

/* Shared by peek and usable: 1 usable, 0 not; *to_half_open / *reset_trials say what usable
 * changes. */
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

/* Smooth weighted round-robin over the untried candidates of level (any level when ANY_LEVEL),
 * usable ones only when need_usable. Returns the index or -1; only a pick moves rr_current. */
#define ANY_LEVEL (-1)
static int wrr(struct skip_cand *c, int n, int level, int need_usable, const struct skip_params *p,
               int64_t now) {
  int best = -1;
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    if (c[i].tried || (level != ANY_LEVEL && c[i].level != level)) continue;
    if (need_usable && !skip_peek_usable(c[i].rec, p, now)) continue;
    total += c[i].weight < 1 ? 1 : c[i].weight;
  }
  if (total == 0) return -1;
  for (int i = 0; i < n; i++) {
    if (c[i].tried || (level != ANY_LEVEL && c[i].level != level)) continue;
    if (need_usable && !skip_peek_usable(c[i].rec, p, now)) continue;
    c[i].rec->rr_current += c[i].weight < 1 ? 1 : c[i].weight;
    if (best < 0 || c[i].rec->rr_current > c[best].rec->rr_current) best = i;
  }
  c[best].rec->rr_current -= total;
  return best;
}

/* The smallest candidate level above level: 1 and *next, or 0 when there is none. */
static int next_level(const struct skip_cand *c, int n, int level, int *next) {
  int found = 0;
  for (int i = 0; i < n; i++)
    if (c[i].level > level && (!found || c[i].level < *next)) {
      *next = c[i].level;
      found = 1;
    }
  return found;
}

int skip_pick(struct skip_cand *c, int n, const struct skip_params *p, int64_t now,
              int *fail_open) {
  int best;
  if (fail_open) *fail_open = 0;
  if (n > SKIP_MAX_PICK) n = SKIP_MAX_PICK;
  best = wrr(c, n, ANY_LEVEL, 1, p, now);
  if (best >= 0) {
    (void)skip_usable(c[best].rec, p, now);
    return best;
  }
  best = wrr(c, n, ANY_LEVEL, 0, p, now);
  if (best < 0) return -1;
  c[best].rec->fail_open++;
  if (fail_open) *fail_open = 1;
  return best;
}

/* The first of current_level and (backup_levels on) the following levels, in order, where wrr
 * finds a candidate. */
static int pick_in_order(struct skip_cand *c, int n, const struct skip_params *p, int current_level,
                         int need_usable, int64_t now) {
  int level = current_level, best;
  for (;;) {
    best = wrr(c, n, level, need_usable, p, now);
    if (best >= 0 || !p->backup_levels || !next_level(c, n, level, &level)) return best;
  }
}

int skip_pick_levels(struct skip_cand *c, int n, const struct skip_params *p, int current_level,
                     int64_t now, struct skip_choice *ch) {
  int best, open = 0;
  if (n > SKIP_MAX_PICK) n = SKIP_MAX_PICK;
  best = pick_in_order(c, n, p, current_level, 1, now);
  if (best < 0) {
    best = pick_in_order(c, n, p, current_level, 0, now);
    if (best < 0) return -1;
    open = 1;
    c[best].rec->fail_open++;
  } else {
    (void)skip_usable(c[best].rec, p, now);
  }
  if (c[best].level != current_level) c[best].rec->backup_picks++;
  if (ch) {
    ch->level = c[best].level;
    ch->backup = c[best].level != current_level;
    ch->fail_open = open;
  }
  return best;
}

int64_t skip_dns_refresh_ms(int have_ttl, int64_t ttl_s) {
  int64_t ms;
  if (!have_ttl || ttl_s <= 0) return SKIP_DNS_MIN_MS;
  ms = ttl_s > SKIP_DNS_MAX_MS / 1000 ? SKIP_DNS_MAX_MS : ttl_s * 1000;
  return ms < SKIP_DNS_MIN_MS ? SKIP_DNS_MIN_MS : ms;
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
