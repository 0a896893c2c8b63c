/* retain — the engine's pruning of what is kept for a time: one thread that, while this
   process holds the engine role, runs each job when the role is gained and then every
   RETAIN_EVERY_MS (docs/design.md#what-is-kept-and-for-how-long). A job is a store prune
   function and its retention. */
#ifndef CDNCA_RETAIN_H
#define CDNCA_RETAIN_H

#include <stdint.h>

struct store;
struct retain;

/* How often the jobs run while active (wall ms). */
#define RETAIN_EVERY_MS (3600 * 1000)

/* One job: delete what prune(st, before_ms) deletes, with before_ms = now - keep_ms; what names
   it in the log. */
struct retain_job {
  int64_t keep_ms;
  int64_t (*prune)(struct store *st, int64_t before_ms);
  const char *what;
};

#define RETAIN_JOBS_MAX 8

/* A pruner over st (not owned) with n jobs (copied, at most RETAIN_JOBS_MAX), its thread
   started and idle; NULL on failure. */
struct retain *retain_new(struct store *st, const struct retain_job *jobs, int n);

/* Start (1: the jobs run now, then every RETAIN_EVERY_MS) or stop (0) pruning: the engine role
   gained or lost. A job running when the role is lost finishes its batch (each is fenced by the
   lease in cluster mode). */
void retain_set_active(struct retain *r, int active);

/* Jobs run so far (each run of every job counts one), for tests. */
int64_t retain_runs(struct retain *r);

/* Stop the thread and free; NULLs *r. */
void retain_free(struct retain **r);

#endif
