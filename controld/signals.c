/* signals — the listener thread of a replica and the pure rules it follows (see signals.h). */
#include "signals.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "store.h"
#include "store_events.h"
#include "store_signal.h"

/* ---- decisions ---- */

unsigned signal_pub_decide(struct signal_view *v, int64_t seq, int64_t gen) {
  unsigned act = 0;
  if (seq > v->seq) {
    v->seq = seq;
    act |= SIGNAL_ACT_WAKE;
  }
  if (gen > v->gen) {
    v->gen = gen;
    act |= SIGNAL_ACT_GEN;
  }
  return act;
}

unsigned signal_poll_decide(struct signal_view *v, int64_t seq, int64_t gen) {
  unsigned act = 0;
  if (seq > v->seq) {
    v->seq = seq;
    act |= SIGNAL_ACT_WAKE;
  }
  /* gen of the previous poll still ahead: a notification that should have come did not */
  if (v->polled_gen >= 0 && v->polled_gen > v->gen) {
    if (gen > v->gen) v->gen = gen;
    act |= SIGNAL_ACT_GEN | SIGNAL_ACT_CLEAR | SIGNAL_ACT_NOTIFY;
  }
  v->polled_gen = gen;
  return act;
}

unsigned signal_resync_decide(struct signal_view *v, int64_t seq, int64_t gen) {
  if (seq > v->seq) v->seq = seq;
  v->gen = gen;
  v->polled_gen = gen;
  return SIGNAL_ACT_WAKE | SIGNAL_ACT_GEN | SIGNAL_ACT_CLEAR | SIGNAL_ACT_NOTIFY;
}

int64_t signal_backoff_ms(int attempt) {
  int64_t d = SIGNAL_BACKOFF_MIN_MS;
  for (int i = 0; i < attempt && d < SIGNAL_BACKOFF_MAX_MS; i++)
    d *= 2;
  return d > SIGNAL_BACKOFF_MAX_MS ? SIGNAL_BACKOFF_MAX_MS : d;
}

/* ---- the listener ---- */

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

#define SIGNAL_SUBS 8
/* The thread checks for stop at least this often. */
#define SIGNAL_TICK_MS 100

struct sub {
  signal_fn fn;
  void *arg;
};

struct signals {
  struct store *st;
  struct signals_hooks hooks; /* publications and revoked nodes, told to the config long-polls */
  struct sub subs[SIGNAL_KINDS][SIGNAL_SUBS];
  int nsubs[SIGNAL_KINDS];
  pthread_t thr;
  int started;
  atomic_int stop;
  atomic_int connected;
  atomic_uint_fast64_t received;
  struct signal_view view;
};

struct signals *signals_new(struct store *st, const struct signals_hooks *hooks) {
  struct signals *s = calloc(1, sizeof *s);
  if (!s) {
    log_error("out of memory");
    return NULL;
  }
  s->st = st;
  if (hooks) s->hooks = *hooks;
  s->view.polled_gen = -1;
  return s;
}

int signal_on(struct signals *s, enum signal_kind kind, signal_fn fn, void *arg) {
  if ((int)kind < 0 || kind >= SIGNAL_KINDS || !fn || s->started || s->nsubs[kind] == SIGNAL_SUBS)
    return -1;
  s->subs[kind][s->nsubs[kind]++] = (struct sub){fn, arg};
  return 0;
}

static void tell(struct signals *s, enum signal_kind kind, const char *payload) {
  for (int i = 0; i < s->nsubs[kind]; i++)
    s->subs[kind][i].fn(s->subs[kind][i].arg, kind, payload);
}

static void act(struct signals *s, unsigned a) {
  if (a & SIGNAL_ACT_GEN) store_gen_observe(s->st, s->view.gen);
  if (a & SIGNAL_ACT_CLEAR) store_caches_clear_tokens(s->st);
  if ((a & SIGNAL_ACT_WAKE) && s->hooks.publication)
    s->hooks.publication(s->hooks.arg, s->view.seq);
  if (a & SIGNAL_ACT_NOTIFY)
    for (int k = 0; k < SIGNAL_KINDS; k++)
      tell(s, (enum signal_kind)k, NULL);
}

static void on_notification(struct signals *s, const char *channel, const char *payload) {
  int kind = sigmsg_kind(channel);
  int64_t seq, gen, node;
  atomic_fetch_add(&s->received, 1);
  switch (kind) {
  case SIGNAL_PUB:
    if (sigmsg_pub_parse(payload, &seq, &gen) < 0) {
      log_warn("ignoring a malformed %s notification: \"%.64s\"", channel, payload);
      return;
    }
    act(s, signal_pub_decide(&s->view, seq, gen));
    break;
  case SIGNAL_INVAL:
    switch (sigmsg_inval_parse(payload, &node)) {
    case SIGMSG_INVAL_NODE:
      store_caches_clear_tokens(s->st);
      if (s->hooks.node_revoked) s->hooks.node_revoked(s->hooks.arg, node);
      break;
    case SIGMSG_INVAL_TOKENS:
      store_caches_clear_tokens(s->st);
      break;
    case SIGMSG_INVAL_EVENTS:
      store_events_arrived(s->st);
      break;
    case SIGMSG_INVAL_WEBHOOKS:
      break;
    default:
      log_warn("ignoring a malformed %s notification: \"%.64s\"", channel, payload);
      return;
    }
    break;
  case SIGNAL_TASKS:
  case SIGNAL_VOTES:
    break;
  default:
    return; /* a channel this replica did not LISTEN on */
  }
  tell(s, (enum signal_kind)kind, payload);
}

/* Connect, LISTEN on every channel, then resync. NULL on failure (the caller backs off). */
static struct store_listener *connect_and_resync(struct signals *s) {
  struct store_listener *l = store_listener_open(s->st);
  int64_t seq, gen;
  if (!l) return NULL;
  for (int k = 0; k < SIGNAL_KINDS; k++)
    if (store_listener_listen(l, sigmsg_channel((enum signal_kind)k)) < 0) goto fail;
  /* read after LISTEN: whatever commits later is notified, whatever committed before is read */
  if (store_listener_state(l, &seq, &gen) < 0) goto fail;
  act(s, signal_resync_decide(&s->view, seq, gen));
  store_caches_set(s->st, 1);
  atomic_store(&s->connected, 1);
  return l;
fail:
  log_debug("signals: %s", store_listener_errmsg(l));
  store_listener_close(&l);
  return NULL;
}

static void *signals_thread(void *arg) {
  struct signals *s = arg;
  struct store_listener *l = NULL;
  int attempt = 0, logged_down = 0;
  int64_t retry_at = 0, next_poll = 0;
  char channel[64], payload[SIGNAL_PAYLOAD_MAX];
  while (!atomic_load(&s->stop)) {
    int64_t now = clock_mono_ms();
    if (!l) {
      if (now < retry_at) {
        int64_t d = retry_at - now;
        sleep_ms(d < SIGNAL_TICK_MS ? d : SIGNAL_TICK_MS);
        continue;
      }
      l = connect_and_resync(s);
      if (!l) {
        retry_at = clock_mono_ms() + signal_backoff_ms(attempt++);
        if (!logged_down) {
          log_warn("signals: cannot listen for other replicas' changes (retrying with backoff); "
                   "token and reply caches are off meanwhile");
          logged_down = 1;
        }
        continue;
      }
      if (logged_down)
        log_info("signals: listening again (%d failed attempts); caches resynced", attempt);
      else
        log_info("signals: listening for other replicas' changes");
      attempt = 0;
      logged_down = 0;
      next_poll = clock_mono_ms() + SIGNAL_POLL_MS;
      continue;
    }
    int64_t wait = next_poll - now;
    if (wait > SIGNAL_TICK_MS) wait = SIGNAL_TICK_MS;
    int rc = wait > 0 ? store_listener_wait(l, (int)wait, channel, sizeof channel, payload,
                                            sizeof payload)
                      : 0;
    if (rc > 0) {
      on_notification(s, channel, payload);
      continue;
    }
    if (rc == 0 && clock_mono_ms() >= next_poll) {
      int64_t seq, gen;
      next_poll = clock_mono_ms() + SIGNAL_POLL_MS;
      if (store_listener_state(l, &seq, &gen) == 0) {
        unsigned a = signal_poll_decide(&s->view, seq, gen);
        if (a & SIGNAL_ACT_CLEAR)
          log_warn("signals: a change arrived without its notification; caches resynced");
        act(s, a);
        continue;
      }
      rc = -1;
    }
    if (rc < 0) {
      /* off first: from now on every lookup reads the database */
      atomic_store(&s->connected, 0);
      store_caches_set(s->st, 0);
      log_warn("signals: listening connection lost (%s); caches off until it is back",
               store_listener_errmsg(l));
      store_listener_close(&l);
      logged_down = 1;
      retry_at = clock_mono_ms();
      attempt = 0;
    }
  }
  store_listener_close(&l);
  return NULL;
}

int signals_start(struct signals *s) {
  if (s->started) return 0;
  if (pthread_create(&s->thr, NULL, signals_thread, s) != 0) {
    log_error("cannot start the signals thread: %s", strerror(errno));
    return -1;
  }
  s->started = 1;
  return 0;
}

int signals_connected(struct signals *s) {
  return atomic_load(&s->connected);
}

uint64_t signals_received(struct signals *s) {
  return atomic_load(&s->received);
}

void signals_free(struct signals **sp) {
  struct signals *s = *sp;
  if (!s) return;
  if (s->started) {
    atomic_store(&s->stop, 1);
    pthread_join(s->thr, NULL);
  }
  free(s);
  *sp = NULL;
}
