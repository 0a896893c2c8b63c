/* lease — the engine lease: decision logic (pure) and the lease thread (see lease.h). */
#include "lease.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "store_lease.h"

#define LEASE_MAX_CALLBACKS 4

/* ---- decision logic ---- */

void lease_policy_init(struct lease_policy *p, int64_t ttl_ms) {
  p->ttl_ms = ttl_ms;
  p->renew_ms = ttl_ms / 3 > 0 ? ttl_ms / 3 : 1;
  p->margin_ms = ttl_ms / 5 > 50 ? ttl_ms / 5 : 50;
  p->retry_ms = ttl_ms / 12 > 20 ? ttl_ms / 12 : 20;
}

void lease_state_init(struct lease_state *s, int64_t now) {
  memset(s, 0, sizeof *s);
  s->role = LEASE_REPLICA;
  s->next_try = now;
}

static enum lease_change demote(struct lease_state *s) {
  if (s->role != LEASE_ENGINE) return LEASE_SAME;
  s->role = LEASE_REPLICA;
  s->epoch = 0;
  s->valid_until = 0;
  return LEASE_LOST;
}

enum lease_change lease_after_attempt(struct lease_state *s, const struct lease_policy *p,
                                      int64_t sent, int64_t now, enum lease_outcome o,
                                      int64_t epoch) {
  int64_t until;
  switch (o) {
  case LEASE_HELD:
    until = sent + p->ttl_ms - p->margin_ms;
    s->next_try = sent + p->renew_ms > now ? sent + p->renew_ms : now;
    if (until <= now) { /* the answer came too late to rely on: no engine work on it */
      s->next_try = now;
      return demote(s);
    }
    if (s->role == LEASE_ENGINE && s->epoch == epoch) {
      s->valid_until = until;
      return LEASE_SAME;
    }
    s->role = LEASE_ENGINE;
    s->epoch = epoch;
    s->valid_until = until;
    return LEASE_GAINED;
  case LEASE_TAKEN:
    s->next_try = sent + p->renew_ms > now ? sent + p->renew_ms : now;
    return demote(s);
  case LEASE_ERROR:
  default:
    s->next_try = now + (s->role == LEASE_ENGINE ? p->retry_ms : p->renew_ms);
    return LEASE_SAME;
  }
}

enum lease_change lease_tick(struct lease_state *s, int64_t now) {
  if (s->role == LEASE_ENGINE && now >= s->valid_until) return demote(s);
  return LEASE_SAME;
}

enum lease_change lease_fenced(struct lease_state *s, int64_t now) {
  if (s->role != LEASE_ENGINE) return LEASE_SAME;
  s->next_try = now;
  return demote(s);
}

int lease_attempt_due(const struct lease_state *s, int64_t now) {
  return now >= s->next_try;
}

int64_t lease_wake_at(const struct lease_state *s) {
  if (s->role == LEASE_ENGINE && s->valid_until < s->next_try) return s->valid_until;
  return s->next_try;
}

/* ---- the lease thread ---- */

struct lease {
  struct store *st;
  char holder[STORE_LEASE_HOLDER_MAX];
  struct lease_policy p;
  int eligible;
  pthread_t thr;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;             /* under mu */
  int fenced_pending;   /* under mu */
  struct lease_state s; /* the lease thread's */
  atomic_int engine;
  _Atomic int64_t epoch;
  struct {
    lease_change_fn fn;
    void *arg;
  } cbs[LEASE_MAX_CALLBACKS];
  int ncbs;
  /* the role thread runs the callbacks (a long start of the engine work never delays a renewal):
     it moves the applied role to the wanted one */
  pthread_t rthr;
  int rstarted;
  pthread_cond_t rcv;
  int rstop;             /* under mu */
  int want_engine;       /* under mu */
  int64_t want_epoch;    /* under mu */
  int applied_engine;    /* the role thread's */
  int64_t applied_epoch; /* the role thread's */
};

/* Tell the store at once, and the callbacks through the role thread (mu not held: the store's
   fence lock is taken before mu by a fenced transaction's hook). */
static void report(struct lease *l, int engine, int64_t epoch) {
  if (!engine) {
    /* the fence goes first: no engine write commits from here on */
    store_lease_fence_set(l->st, l->holder, 0);
    atomic_store(&l->engine, 0);
    atomic_store(&l->epoch, 0);
    log_warn("engine lease lost: this replica stops probe rounds, webhook delivery and pruning");
  } else {
    store_lease_fence_set(l->st, l->holder, epoch);
    atomic_store(&l->epoch, epoch);
    atomic_store(&l->engine, 1);
    log_info("engine lease gained (epoch %lld): this replica is the engine", (long long)epoch);
  }
  pthread_mutex_lock(&l->mu);
  l->want_engine = engine;
  l->want_epoch = engine ? epoch : 0;
  pthread_cond_signal(&l->rcv);
  pthread_mutex_unlock(&l->mu);
}

static void call_all(struct lease *l, int engine, int64_t epoch) {
  for (int i = 0; i < l->ncbs; i++)
    l->cbs[i].fn(l->cbs[i].arg, engine, epoch);
}

/* The role thread: one change at a time, in order; a loss and a gain in between collapse (the
   work is stopped for a new epoch before it starts again). */
static void *role_run(void *arg) {
  struct lease *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    int we = l->want_engine;
    int64_t ep = l->want_epoch;
    if (l->applied_engine == we && l->applied_epoch == ep) {
      if (l->rstop) break;
      pthread_cond_wait(&l->rcv, &l->mu);
      continue;
    }
    pthread_mutex_unlock(&l->mu);
    if (l->applied_engine) {
      call_all(l, 0, 0);
      l->applied_engine = 0;
      l->applied_epoch = 0;
    } else {
      call_all(l, 1, ep);
      l->applied_engine = 1;
      l->applied_epoch = ep;
    }
    pthread_mutex_lock(&l->mu);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

/* Apply a change decided under mu; returns with mu held again. */
static void apply(struct lease *l, enum lease_change ch) {
  int was = atomic_load(&l->engine);
  int64_t epoch = l->s.epoch;
  if (ch == LEASE_SAME) return;
  pthread_mutex_unlock(&l->mu);
  if (ch == LEASE_GAINED) {
    if (was) report(l, 0, 0); /* a new epoch: the old one's work stops first */
    report(l, 1, epoch);
  } else if (was) {
    report(l, 0, 0);
  }
  pthread_mutex_lock(&l->mu);
}

static void timespec_at_mono(struct timespec *ts, int64_t at) {
  int64_t ms = at < 0 ? 0 : at;
  ts->tv_sec = (time_t)(ms / 1000);
  ts->tv_nsec = (long)(ms % 1000) * 1000000L;
}

static void *run(void *arg) {
  struct lease *l = arg;
  pthread_mutex_lock(&l->mu);
  while (!l->stop) {
    int64_t now = clock_mono_ms(), wake;
    struct timespec ts;
    if (l->fenced_pending) {
      l->fenced_pending = 0;
      apply(l, lease_fenced(&l->s, now));
      continue;
    }
    if (lease_tick(&l->s, now) != LEASE_SAME) {
      log_warn("engine lease not renewed within %lld ms: stepping down",
               (long long)(l->p.ttl_ms - l->p.margin_ms));
      apply(l, LEASE_LOST);
      continue;
    }
    if (l->eligible && lease_attempt_due(&l->s, now)) {
      int64_t sent = now, epoch = 0;
      int rc;
      enum lease_outcome o;
      pthread_mutex_unlock(&l->mu);
      rc = store_lease_acquire(l->st, l->holder, l->p.ttl_ms, &epoch);
      pthread_mutex_lock(&l->mu);
      o = rc == 1 ? LEASE_HELD : rc == 0 ? LEASE_TAKEN : LEASE_ERROR;
      apply(l, lease_after_attempt(&l->s, &l->p, sent, clock_mono_ms(), o, epoch));
      continue;
    }
    wake = l->eligible ? lease_wake_at(&l->s) : now + 1000;
    if (wake <= now) continue;
    timespec_at_mono(&ts, wake);
    pthread_cond_timedwait(&l->cv, &l->mu, &ts);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

struct lease *lease_new(struct store *st, const char *name, int64_t ttl_ms, int eligible) {
  struct lease *l = calloc(1, sizeof *l);
  uint32_t inst = 0;
  if (!l) return NULL;
  if (getrandom(&inst, sizeof inst, 0) != (ssize_t)sizeof inst)
    inst = (uint32_t)getpid() ^ (uint32_t)clock_mono_ms();
  if (!name || !*name || strlen(name) > STORE_LEASE_HOLDER_MAX - 10) {
    log_error("replica name must be 1..%d characters", STORE_LEASE_HOLDER_MAX - 10);
    free(l);
    return NULL;
  }
  snprintf(l->holder, sizeof l->holder, "%s#%08x", name, inst);
  l->st = st;
  l->eligible = eligible;
  lease_policy_init(&l->p, ttl_ms);
  lease_state_init(&l->s, clock_mono_ms());
  pthread_mutex_init(&l->mu, NULL);
  clock_cond_init(&l->cv);
  pthread_cond_init(&l->rcv, NULL);
  atomic_init(&l->engine, 0);
  atomic_init(&l->epoch, 0);
  store_lease_fence_set(st, l->holder, 0);
  store_lease_fence_enable(st);
  store_lease_set_fenced_hook(st, lease_fenced_hook, l);
  return l;
}

int lease_on_change(struct lease *l, lease_change_fn fn, void *arg) {
  if (l->started || l->ncbs == LEASE_MAX_CALLBACKS) return -1;
  l->cbs[l->ncbs].fn = fn;
  l->cbs[l->ncbs].arg = arg;
  l->ncbs++;
  return 0;
}

int lease_start(struct lease *l) {
  if (pthread_create(&l->rthr, NULL, role_run, l) != 0) {
    log_error("cannot start the engine role thread");
    return -1;
  }
  l->rstarted = 1;
  if (pthread_create(&l->thr, NULL, run, l) != 0) {
    log_error("cannot start the engine lease thread");
    return -1;
  }
  l->started = 1;
  log_info("engine lease: replica %s, ttl %lld ms, %s", l->holder, (long long)l->p.ttl_ms,
           l->eligible ? "engine-eligible" : "never the engine (--engine-eligible false)");
  return 0;
}

int lease_is_engine(struct lease *l) {
  return l ? atomic_load(&l->engine) : 1;
}

int64_t lease_epoch(struct lease *l) {
  return l ? atomic_load(&l->epoch) : 0;
}

const char *lease_holder(const struct lease *l) {
  return l ? l->holder : "";
}

void lease_fenced_hook(void *arg) {
  struct lease *l = arg;
  if (!l) return;
  pthread_mutex_lock(&l->mu);
  l->fenced_pending = 1;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

void lease_stop(struct lease *l) {
  int64_t epoch;
  if (!l) return;
  store_lease_set_fenced_hook(l->st, NULL, NULL); /* engine writes fail from here on, quietly */
  if (l->started) {
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thr, NULL);
    l->started = 0;
  }
  epoch = atomic_load(&l->epoch);
  if (atomic_load(&l->engine)) report(l, 0, 0);
  if (l->rstarted) { /* the engine work stops (the callbacks of the loss) before the row goes */
    pthread_mutex_lock(&l->mu);
    l->rstop = 1;
    pthread_cond_signal(&l->rcv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->rthr, NULL);
    l->rstarted = 0;
  }
  if (epoch > 0 && store_lease_release(l->st, l->holder, epoch) == 0)
    log_info("engine lease (epoch %lld) released", (long long)epoch);
}

void lease_free(struct lease **lp) {
  struct lease *l = *lp;
  if (!l) return;
  lease_stop(l);
  pthread_cond_destroy(&l->cv);
  pthread_cond_destroy(&l->rcv);
  pthread_mutex_destroy(&l->mu);
  free(l);
  *lp = NULL;
}
