/* skip — per-origin passive health (skip, half-open, fail open) and retry rules; pure, time as argument. */
#ifndef CDNCA_SKIP_H
#define CDNCA_SKIP_H

#include <stdint.h>

#include "fields.h"

/* Failure timestamps kept per origin; a fail_count above this behaves as this value. */
#define SKIP_RING 64
/* Most statuses in retry_on_status. */
#define SKIP_MAX_STATUS 16
/* Most origins one pick can choose among (the site limit). */
#define SKIP_MAX_PICK 64

/* A site's node_retry settings (DESIGN §2); defaults from skip_params_default. */
struct skip_params {
  int retries;            /* [2] extra attempts after the first */
  int64_t retry_budget_ms; /* [15000] no retry once this much time has passed */
  int fail_count;         /* [3] failures within the window that skip an origin */
  int64_t fail_window_ms; /* [10000] */
  int64_t skip_ms;        /* [30000] */
  int half_open_requests; /* [1] trial requests when a skip ends */
  int n_retry_on_status;
  int retry_on_status[SKIP_MAX_STATUS]; /* [502, 503, 504] */
};

enum skip_state { SKIP_HEALTHY = 0, SKIP_SKIPPED = 1, SKIP_HALF_OPEN = 2 };

/* One origin's record; plain data owned by the caller (zeroed or skip_rec_init'ed). */
struct skip_rec {
  enum skip_state state;
  int fail_n;            /* failures held in the ring (<= SKIP_RING) */
  int fail_head;         /* index of the next slot to write */
  int half_open_in_flight;
  int64_t skipped_until; /* end of the current skip (SKIPPED) */
  int64_t half_open_since; /* when the record went half-open */
  int64_t rr_current;    /* smooth weighted round-robin state */
  uint64_t requests, failures, skips, fail_open;
  int64_t fail_ts[SKIP_RING];
};

/* One candidate of a pick: the caller's record, its weight (>= 1) and whether it was tried. */
struct skip_cand {
  struct skip_rec *rec;
  int weight;
  int tried;
};

/* The node_retry object of the controld<->noded contract, one row per field with its bounds and
   default (DESIGN §2): controld's API validator and noded's config reader both read it. */
extern const struct field_def skip_fields[];

/* Fill p with the defaults of DESIGN §2 (skip_fields' defaults, retry_on_status 502, 503, 504). */
void skip_params_default(struct skip_params *p);

/* Reset a record to healthy with empty history and zero counters. */
void skip_rec_init(struct skip_rec *r);

/* Record one request outcome at now (failed = 1 for a failure). Returns 1 when this outcome
 * put the origin into skip (a new skip), else 0. A half-open trial slot is released. */
int skip_record(struct skip_rec *r, const struct skip_params *p, int64_t now, int failed);

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
