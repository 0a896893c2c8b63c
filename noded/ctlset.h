/* ctlset — the controld replicas a node talks to (`--controld URL1,URL2,…`), which one is
   current, and the retry backoff every loop (config long-poll, probe tasks, votes, heartbeats)
   shares: a replica that is away (transport error, 502, 503, 504) makes the node move to the next
   one after a capped, jittered backoff; any call that succeeds ends the backoff at once. Pure:
   no I/O, no clock, no locks (ctl.c holds one under its mutex and passes `now`). */
#ifndef CDNCA_CTLSET_H
#define CDNCA_CTLSET_H

#include <stddef.h>
#include <stdint.h>

/* At most this many replicas: a node lists the replicas of one control plane, not a fleet. */
#define CTLSET_MAX 8
/* One URL without its trailing '/', as ctl's former single base. */
#define CTLSET_URL_MAX 512
/* The backoff: 500 ms doubling per consecutive failure, capped at 30 s, jittered to [d/2, d]. */
#define CTLSET_BACKOFF_FIRST_MS 500
#define CTLSET_BACKOFF_CAP_MS 30000
/* While nothing answered at all (transport errors) and the backoff has more than this left, one
   loop checks GET /healthz on the current replica every 0.5–1 s, so a controld that comes back
   is used within about a second instead of after the rest of a backoff step of up to 30 s. */
#define CTLSET_PROBE_MIN_WAIT_MS 1000
#define CTLSET_PROBE_EVERY_MS 500

/* What one call to controld says about the replica it went to. */
enum ctlset_outcome {
  CTLSET_ANSWERED, /* an HTTP answer other than 502/503/504 (2xx, 304, 401, 409, …) */
  CTLSET_AWAY,     /* 502, 503 or 504: the replica (or what is in front of it) cannot serve */
  CTLSET_DOWN,     /* no answer at all: connection refused or reset, timeout, TLS failure */
};

struct ctlset {
  int n;   /* URLs listed, 1..CTLSET_MAX */
  int cur; /* index of the current replica */
  char url[CTLSET_MAX][CTLSET_URL_MAX];
  int failures;     /* consecutive AWAY/DOWN outcomes since the last answer (shared) */
  int last_down;    /* the last failure was DOWN (nothing answered): probing is worth it */
  int64_t retry_at; /* no loop calls before this (monotonic ms; 0 = at once) */
  int64_t probe_at; /* the next /healthz probe is due at this (monotonic ms) */
  uint64_t gen;     /* bumped on every change: a failure seen by a call begun earlier is stale */
  int64_t switches; /* moves to another replica since start */
};

/* Parse a comma-separated list of http:// or https:// URLs (spaces around items ignored,
   trailing '/' removed) into s (state reset: first URL current). 0, or -1 with err naming the
   option and the offending item; s is then unusable. */
int ctlset_parse(struct ctlset *s, const char *list, char *err, size_t errlen);

/* What a call's result says about its replica: answered = 0 when no HTTP answer came (status
   ignored), else the HTTP status. */
enum ctlset_outcome ctlset_classify(int answered, long status);

/* The current replica's URL (points into s), with its index and the state generation a call
   begun now must hand back to ctlset_report. */
const char *ctlset_current(const struct ctlset *s, int *idx, uint64_t *gen);

/* Record a call's outcome; gen as ctlset_current gave it when the call began, now monotonic ms,
   rnd a random number for the jitter. ANSWERED ends any backoff (failures 0, retry at once).
   AWAY/DOWN from a call begun at the current gen count a failure, move to the next replica (when
   there is more than one) and set the next retry after ctlset_backoff_ms(failures); from an
   older gen they are ignored (another loop already acted on that replica). Returns 1 when the
   current replica changed, else 0. */
int ctlset_report(struct ctlset *s, uint64_t gen, enum ctlset_outcome o, int64_t now, uint32_t rnd);

/* Milliseconds a loop must still wait before its next call (0 = call now). */
int64_t ctlset_wait_ms(const struct ctlset *s, int64_t now);

/* 1 when the caller should probe the current replica's /healthz now (the last failure was DOWN,
   more than CTLSET_PROBE_MIN_WAIT_MS of backoff left, the probe slot due): the slot is then
   taken until now + 500..1000 ms (from rnd), so only one loop probes. Else 0. */
int ctlset_probe_claim(struct ctlset *s, int64_t now, uint32_t rnd);

/* A /healthz probe begun at gen answered 200: the replica is back, the backoff ends (retry at
   once). Ignored when gen is stale. The failure count stays, so a replica that answers /healthz
   but then fails the real call backs off further; if that failure is AWAY (503) it is no longer
   probed at all. */
void ctlset_reachable(struct ctlset *s, uint64_t gen, int64_t now);

/* Pure: delay before retry number `failures` (>= 1): 500 ms doubling, capped at 30 s, with
   jitter from rnd so that it lies in [d/2, d]. */
int64_t ctlset_backoff_ms(int failures, uint32_t rnd);

#endif
