/* retain — the engine's pruning by age (see retain.h). */
#include "retain.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"

struct retain {
  struct store *st;
  struct retain_job jobs[RETAIN_JOBS_MAX];
  int n;
  pthread_t thr;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  int active, stop;
  int64_t next_ms; /* monotonic ms of the next run while active; 0 = at once */
  int64_t runs;
};

static void run_jobs(struct retain *r) {
  int64_t now = clock_wall_ms();
  for (int i = 0; i < r->n; i++) {
    int64_t n = r->jobs[i].prune(r->st, now - r->jobs[i].keep_ms);
    if (n < 0)
      log_warn("could not prune %s", r->jobs[i].what);
    else if (n > 0)
      log_info("pruned %lld %s past their retention", (long long)n, r->jobs[i].what);
  }
}

static void *loop(void *arg) {
  struct retain *r = arg;
  pthread_mutex_lock(&r->mu);
  while (!r->stop) {
    int64_t now = clock_mono_ms();
    if (!r->active) {
      pthread_cond_wait(&r->cv, &r->mu);
      continue;
    }
    if (now < r->next_ms) {
      struct timespec ts;
      clock_mono_timespec(&ts, r->next_ms - now);
      pthread_cond_timedwait(&r->cv, &r->mu, &ts);
      continue;
    }
    r->next_ms = now + RETAIN_EVERY_MS;
    pthread_mutex_unlock(&r->mu);
    run_jobs(r);
    pthread_mutex_lock(&r->mu);
    r->runs++;
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

struct retain *retain_new(struct store *st, const struct retain_job *jobs, int n) {
  struct retain *r;
  if (n < 0 || n > RETAIN_JOBS_MAX || !(r = calloc(1, sizeof *r))) return NULL;
  r->st = st;
  memcpy(r->jobs, jobs, (size_t)n * sizeof *jobs);
  r->n = n;
  pthread_mutex_init(&r->mu, NULL);
  clock_cond_init(&r->cv);
  if (pthread_create(&r->thr, NULL, loop, r) != 0) {
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
    return NULL;
  }
  return r;
}

void retain_set_active(struct retain *r, int active) {
  pthread_mutex_lock(&r->mu);
  if (active && !r->active) r->next_ms = 0; /* the role gained: at once */
  r->active = active;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

int64_t retain_runs(struct retain *r) {
  int64_t n;
  pthread_mutex_lock(&r->mu);
  n = r->runs;
  pthread_mutex_unlock(&r->mu);
  return n;
}

void retain_free(struct retain **p) {
  struct retain *r = *p;
  if (!r) return;
  pthread_mutex_lock(&r->mu);
  r->stop = 1;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
  pthread_join(r->thr, NULL);
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
  free(r);
  *p = NULL;
}
