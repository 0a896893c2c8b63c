/* skip — per-origin passive health (skip, half-open, fail open) and retry rules; pure, time as
 * argument. */
#ifndef CDNCA_SKIP_H
#define CDNCA_SKIP_H

#include <stdint.h>

/* Failure timestamps kept per origin; a fail_count above this behaves as this value. */
#define SKIP_RING 64
/* Most statuses in retry_on_status. */
#define SKIP_MAX_STATUS 16
/* Most origins one pick can choose among (the site limit). */
#define SKIP_MAX_PICK 64
/* The failure-ratio window is kept as this many slices of fail_window_ms / SKIP_SLICES each:
 * enough that an outcome leaves the window within a tenth of it, small enough to keep per origin.
 */
#define SKIP_SLICES 10

/* A site's node_retry settings (docs/design.md#node-skip-and-retry); defaults from
 * noderetry_defaults (noderetry.h). */
struct skip_params {
  int retries;             /* [2] extra attempts after the first */
  int64_t retry_budget_ms; /* [15000] no retry once this much time has passed */
  int fail_count;          /* [3] failures within the window that skip an origin */
  int64_t fail_window_ms;  /* [10000] */
  int64_t skip_ms;         /* [30000] */
  int half_open_requests;  /* [1] trial requests when a skip ends */
  int n_retry_on_status;
  int retry_on_status[SKIP_MAX_STATUS]; /* [502, 503, 504] */
  int backup_levels;      /* [1] go on to the following levels when the current one is spent */
  double failure_ratio;   /* [0 = off] skip at this failure share within fail_window_ms, (0, 1] */
  int failure_min_volume; /* [20] outcomes in the window before failure_ratio applies */
};

enum skip_state { SKIP_HEALTHY = 0, SKIP_SKIPPED = 1, SKIP_HALF_OPEN = 2 };

/* One origin's record; plain data owned by the caller (zeroed or skip_rec_init'ed). */
struct skip_rec {
  enum skip_state state;
  int fail_n;    /* failures held in the ring (<= SKIP_RING) */
  int fail_head; /* index of the next slot to write */
  int half_open_in_flight;
  int64_t skipped_until;   /* end of the current skip (SKIPPED) */
  int64_t half_open_since; /* when the record went half-open */
  int64_t rr_current;      /* smooth weighted round-robin state */
  uint64_t requests, failures, skips, fail_open;
  uint64_t probes, backup_picks; /* probe outcomes fed in; picks made as a backup level */
  int64_t fail_ts[SKIP_RING];
  /* outcomes (all, failed) per slice of the window, for failure_ratio; slice_id = now / width */
  int64_t slice_id[SKIP_SLICES];
  uint32_t slice_total[SKIP_SLICES], slice_failed[SKIP_SLICES];
};

/* One candidate of a pick: the caller's record, its weight (>= 1), whether it was tried (failed
 * earlier in this request) and its level (used by skip_pick_levels only). */
struct skip_cand {
  struct skip_rec *rec;
  int weight;
  int tried;
  int level;
};

/* What skip_pick_levels chose besides the index. */
struct skip_choice {
  int level;     /* the chosen candidate's level */
  int backup;    /* 1 when that level follows the current one */
  int fail_open; /* 1 when every untried origin of the current and following levels was skipped */
};

/* Reset a record to healthy with empty history and zero counters. */
void skip_rec_init(struct skip_rec *r);

/* Record one request outcome at now (failed = 1 for a failure). Returns 1 when this outcome
 * put the origin into skip (a new skip: fail_count failures within fail_window_ms, or with
 * failure_ratio on, a failure share >= failure_ratio over >= failure_min_volume outcomes in the
 * window), else 0. A half-open trial slot is released. */
int skip_record(struct skip_rec *r, const struct skip_params *p, int64_t now, int failed);

/* Record the node's own probe of the origin at now (ok = 1 for a success). Healthy: a failure
 * counts as a failed request outcome would (fail_count and the ratio); a success changes
 * nothing. Skipped past its skip time, or half-open: the probe is the half-open trial (success
 * restores and clears the history, failure skips again). Skipped before its skip time: changes
 * nothing. Returns 1 when it started a skip, else 0. Counted in probes, not requests/failures. */
int skip_probe(struct skip_rec *r, const struct skip_params *p, int64_t now, int ok);

/* Give back a half-open trial slot reserved by skip_usable/skip_pick without an outcome
 * (the request was abandoned). */
void skip_release(struct skip_rec *r);

/* 1 when the origin may take a request at now, else 0. A skip that has ended turns
 * half-open; in half-open, this reserves one of the half_open_requests trial slots. */
int skip_usable(struct skip_rec *r, const struct skip_params *p, int64_t now);

/* 1 when skip_usable would say yes, without changing anything. */
int skip_peek_usable(const struct skip_rec *r, const struct skip_params *p, int64_t now);

/* 1 when the record counts as skipped for reports (skipped, or half-open still on trial). */
int skip_is_skipped(const struct skip_rec *r, int64_t now);

/* Pick one of n candidates (n <= SKIP_MAX_PICK): smooth weighted round-robin over the usable,
 * untried ones. When none is usable, fail open: pick among the untried ones anyway, set
 * *fail_open = 1 and count it on the chosen record. Returns the index, or -1 when every
 * candidate was tried (or n == 0). A half-open trial slot is reserved on the chosen record. */
int skip_pick(struct skip_cand *c, int n, const struct skip_params *p, int64_t now, int *fail_open);

/* Pick across levels: among the untried, usable candidates of current_level (smooth weighted
 * round-robin); when there is none and backup_levels is on, the same on each following level in
 * ascending order; never a level before current_level. When every untried candidate of the
 * current and following levels is skipped, fail open: pick among the current level's untried ones
 * anyway, else (backup_levels on) those of the first following level that has one; count it on
 * the chosen record. Returns the index and fills *ch (may be NULL), or -1 when nothing untried is
 * left. Reserves a half-open trial slot on a usable pick; counts backup picks on the record. */
int skip_pick_levels(struct skip_cand *c, int n, const struct skip_params *p, int current_level,
                     int64_t now, struct skip_choice *ch);

/* Re-resolution interval of a hostname origin: the DNS TTL (seconds; have_ttl = 0 when the
 * answer carried none, e.g. from /etc/hosts) bounded to [SKIP_DNS_MIN_MS, SKIP_DNS_MAX_MS];
 * no TTL or a failed lookup gives SKIP_DNS_MIN_MS (retry soon). */
#define SKIP_DNS_MIN_MS 30000
#define SKIP_DNS_MAX_MS 300000
int64_t skip_dns_refresh_ms(int have_ttl, int64_t ttl_s);

/* 1 when an attempt outcome is a failure: transport_error (connect error, timeout, TLS failure,
 * connection lost before a response) or a status listed in retry_on_status. */
int skip_is_failure(const struct skip_params *p, int transport_error, int status);

/* 1 for the idempotent methods GET, HEAD, PUT, DELETE, OPTIONS, TRACE (exact, case-sensitive). */
int skip_method_idempotent(const char *method, unsigned len);

/* 1 when a failed request may be tried again on another origin: attempts_so_far + 1 <= retries
 * + 1 and elapsed_ms <= retry_budget_ms, never when request body bytes were already sent
 * (body_sent), never for a non-idempotent method once the request was sent (request_sent). */
int skip_may_retry(int attempts_so_far, int64_t elapsed_ms, const struct skip_params *p,
                   int idempotent_method, int request_sent, int body_sent);

#endif
