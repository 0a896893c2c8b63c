/* checkpoint — client of the checkpoint plugin (docs/design.md#checkpoint-plugin): batches of POSTs
 * on one libcurl multi handle. */
#ifndef CDNCA_CHECKPOINT_H
#define CDNCA_CHECKPOINT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct hcheck_opts;

/* Votes accepted in one answer; an answer with more is garbage. */
#define CHECKPOINT_MAX_VOTES 64
/* Plugin requests in flight at once. */
#define CHECKPOINT_CONCURRENCY 32
/* Largest answer body read. */
#define CHECKPOINT_BODY_MAX (64 * 1024)

/* What to ask the plugin for one origin (strings borrowed for the call). */
struct checkpoint_query {
  const char *url;  /* scheme://address:port/path */
  const char *host; /* Host header, SNI and certificate name */
  int timeout_ms;   /* the probe's timeout; the plugin must answer within timeout_ms + 1 s */
  const struct hcheck_opts *check; /* the site's probe options, sent as "check"; NULL = defaults */
};

/* One checkpoint's vote. */
struct checkpoint_vote {
  char name[64];
  int ok;
  int status;      /* 0 when none */
  int latency_ms;  /* -1 when not given (optional "latency_ms" field) */
  char error[128]; /* "" when none */
};

/* The plugin's answer for one query. */
struct checkpoint_answer {
  int valid;                     /* 1 = a well-formed answer (maybe with no votes) */
  int n;                         /* votes when valid */
  struct checkpoint_vote *votes; /* owned (checkpoint_answers_free) */
  char error[128];               /* why it is not valid */
};

struct checkpoint;

/* New client for the plugin at url (http or https, system CAs); NULL on failure (logged). */
struct checkpoint *checkpoint_new(const char *url);

/* Free the client; NULLs *c. NULL is a no-op. */
void checkpoint_free(struct checkpoint **c);

/* Ask the plugin about q[0..n) concurrently and fill out[i] for q[i] (every entry is filled, an
   invalid one with its error). Reads *cancel (may be NULL) at least every 100 ms: once non-zero,
   unfinished queries end with error "cancelled". At deadline_mono_ms (clock_mono_ms; 0 = none)
   the phase ends: queries still running or not yet asked end with error CHECKPOINT_LATE, so a
   slow plugin costs a round one deadline, not one timeout per CHECKPOINT_CONCURRENCY origins.
   0, or -1 on a libcurl failure. Free the answers with checkpoint_answers_free. */
int checkpoint_run(struct checkpoint *c, const struct checkpoint_query *q, size_t n,
                   struct checkpoint_answer *out, atomic_int *cancel, int64_t deadline_mono_ms);

/* The time a round's checkpoint phase may take, from its start: the longest query's own time
   (max_timeout_ms plus the grace every query gets), once, whatever the number of queries. Pure. */
int64_t checkpoint_phase_ms(int64_t max_timeout_ms);

/* The error of a query the phase's deadline left unanswered. */
#define CHECKPOINT_LATE "the round's checkpoint phase ran out of time"

/* Free what the n answers own (not the array). */
void checkpoint_answers_free(struct checkpoint_answer *a, size_t n);

/* Parse and validate an answer body {"votes":[{"checkpoint","ok","status","error"}]} (a vote may
   also carry "latency_ms"; other vote fields are garbage; other top-level fields are ignored) into
   *out (fields validated one by one; any bad vote makes the whole answer invalid). 0 valid, -1 not
   (out->error says why). Free with checkpoint_answers_free(out, 1). */
int checkpoint_parse(const char *body, size_t len, struct checkpoint_answer *out);

#endif
