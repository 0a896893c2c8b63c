/* hub — config long-poll waiters and batched node presence, driven by one timer thread. */
#include "hub.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "dlist.h"
#include "idmap.h"
#include "json.h"
#include "log.h"
#include "nodewatch.h"
#include "publish.h"
#include "store_incidents.h"
#include "store_node.h"
#include "store_pub.h"

#define HUB_FLUSH_MS 1000

/* One held config poll. Owned by the hub: on the list while held (the list in deadline order,
   so the next to expire is the head), freed once answered. */
struct waiter {
  int64_t node_id;
  int64_t since;
  void (*done)(void *arg, enum hub_outcome outcome, struct pub_blob *blob);
  void *arg;
  struct dl_link link; /* deadline: monotonic ms */
};

#define WAITER(l) DL_ENTRY(l, struct waiter, link)

struct hub {
  struct store *st;
  struct publish *pub;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thr;
  int thr_started;
  int stop;                   /* the thread must end */
  int closed;                 /* hub_shutdown ran: no more holding */
  int64_t seq;                /* newest publication known */
  int64_t woken;              /* waiters behind this seq were answered */
  struct dl_list waiting;     /* held polls, the earliest deadline first */
  struct idmap held;          /* node id -> its held poll (one per node) */
  int64_t *seen_id, *seen_at; /* presence not yet written, one entry per node */
  int n_seen, cap_seen;
  struct incident_ask *applied; /* (node, seq, first time) not yet written: incident propagation */
  int n_applied, cap_applied;
  struct nodewatch *watch; /* online/offline transitions for the log (NULL: not watched) */
};

/* A node's online/offline change as one structured log line. */
static void log_node_event(const char *event, int64_t node_id) {
  cJSON *f = cJSON_CreateObject();
  if (!f) return;
  json_add_i64(f, "node_id", node_id);
  log_event(LOG_INFO, event, f);
  cJSON_Delete(f);
}

static void list_unlink(struct hub *h, struct waiter *w) {
  dl_unlink(&h->waiting, &w->link);
  if (idmap_get(&h->held, w->node_id) == w) idmap_del(&h->held, w->node_id);
}

/* Take the waiters whose deadline has come (the head of the list) into a malloc'd array. */
static struct waiter **take_expired(struct hub *h, int64_t now, int *n) {
  struct waiter **out, *w;
  struct dl_link *l;
  int cnt = 0;
  *n = 0;
  for (l = h->waiting.head; l && l->deadline <= now; l = l->next)
    cnt++;
  if (!cnt || !(out = malloc((size_t)cnt * sizeof *out))) return NULL;
  while (*n < cnt) {
    w = WAITER(h->waiting.head);
    list_unlink(h, w);
    out[(*n)++] = w;
  }
  return out;
}

/* Move the waiters for which pick(w, arg) holds into a malloc'd array (caller frees). */
static struct waiter **take_waiters(struct hub *h, int (*pick)(const struct waiter *, int64_t),
                                    int64_t arg, int *n) {
  struct waiter **out = NULL, *w;
  struct dl_link *l, *next;
  int cnt = 0;
  *n = 0;
  if (!h->waiting.n) return NULL;
  out = malloc(h->waiting.n * sizeof *out);
  if (!out) return NULL;
  for (l = h->waiting.head; l; l = next) {
    next = l->next;
    w = WAITER(l);
    if (!pick(w, arg)) continue;
    list_unlink(h, w);
    out[cnt++] = w;
  }
  *n = cnt;
  return out;
}

static int pick_behind(const struct waiter *w, int64_t seq) {
  return w->since < seq;
}
static int pick_all(const struct waiter *w, int64_t unused) {
  return 1;
}

/* The outcome when publish_get built nothing: the database is unreachable (a failover, a
   restart: the node retries, or moves to another replica) or something else failed. */
static enum hub_outcome unbuilt(struct hub *h) {
  return store_db_up(h->st) ? HUB_FAILED : HUB_DB_DOWN;
}

/* Give a waiter (off the list, so the caller's now) its outcome and free it. */
static void answer(struct waiter *w, enum hub_outcome outcome, struct pub_blob *b) {
  w->done(w->arg, outcome, b);
  free(w);
}

/* Answer waiters (off the list) with what is newer than their since. */
static void answer_new(struct hub *h, struct waiter **ws, int n) {
  struct pub_blob *b = NULL;
  int64_t since = -1;
  for (int i = 0; i < n; i++) {
    if (!b || ws[i]->since != since) {
      pub_blob_unref(b);
      since = ws[i]->since;
      b = publish_get(h->pub, since);
    }
    if (b)
      answer(ws[i], HUB_CONFIG, b);
    else
      answer(ws[i], unbuilt(h), NULL);
  }
  pub_blob_unref(b);
}

/* Answer waiters (off the list) with one outcome that carries no blob. */
static void answer_all(struct waiter **ws, int n, enum hub_outcome outcome) {
  for (int i = 0; i < n; i++)
    answer(ws[i], outcome, NULL);
}

/* Write the pending (node, seq) firsts for incidents' propagation (mu held; dropped while
   writing). */
static void flush_applied_locked(struct hub *h) {
  struct incident_ask *a = h->applied;
  int n = h->n_applied;
  if (!n) return;
  h->applied = NULL;
  h->n_applied = h->cap_applied = 0;
  pthread_mutex_unlock(&h->mu);
  if (store_incident_applied_batch(h->st, a, n) < 0)
    log_warn("could not record the config %d nodes applied", n);
  free(a);
  pthread_mutex_lock(&h->mu);
}

/* Write pending presence (called with mu held; drops it while writing). */
static void flush_seen_locked(struct hub *h) {
  int64_t *ids, *at;
  int n = h->n_seen;
  if (!n) {
    flush_applied_locked(h);
    return;
  }
  ids = h->seen_id;
  at = h->seen_at;
  h->seen_id = h->seen_at = NULL;
  h->n_seen = h->cap_seen = 0;
  pthread_mutex_unlock(&h->mu);
  if (store_node_seen_batch(h->st, ids, at, n) < 0)
    log_warn("could not record %d nodes as seen", n);
  free(ids);
  free(at);
  pthread_mutex_lock(&h->mu);
  flush_applied_locked(h);
}

static void *hub_thread(void *arg) {
  struct hub *h = arg;
  int64_t next_flush = clock_mono_ms() + HUB_FLUSH_MS;
  pthread_mutex_lock(&h->mu);
  while (!h->stop) {
    int64_t now = clock_mono_ms(), wake = next_flush;
    struct waiter **ws;
    int n;
    struct timespec ts;
    if (h->seq > h->woken) {
      int64_t target = h->seq;
      h->woken = target;
      ws = take_waiters(h, pick_behind, target, &n);
      pthread_mutex_unlock(&h->mu);
      answer_new(h, ws, n);
      if (n) log_debug("publication %lld sent to %d waiting nodes", (long long)target, n);
      free(ws);
      pthread_mutex_lock(&h->mu);
      continue;
    }
    ws = take_expired(h, now, &n);
    if (n) {
      pthread_mutex_unlock(&h->mu);
      answer_all(ws, n, HUB_UNCHANGED);
      free(ws);
      pthread_mutex_lock(&h->mu);
      continue;
    }
    free(ws);
    if (now >= next_flush) {
      flush_seen_locked(h);
      if (h->watch) {
        int64_t gone[64];
        int k = nodewatch_sweep(h->watch, clock_wall_ms(), gone, 64);
        for (int i = 0; i < k; i++)
          log_node_event("node.offline", gone[i]);
      }
      next_flush = now + HUB_FLUSH_MS;
      continue;
    }
    if (h->waiting.head && h->waiting.head->deadline < wake) wake = h->waiting.head->deadline;
    {
      int64_t d = wake - now;
      if (d < 1) d = 1;
      if (d > HUB_FLUSH_MS) d = HUB_FLUSH_MS;
      clock_mono_timespec(&ts, d);
    }
    pthread_cond_timedwait(&h->cv, &h->mu, &ts);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

void hub_set_deny_targets(struct hub *h, const char *list) {
  publish_set_deny_targets(h->pub, list);
}

struct hub *hub_new(struct store *st) {
  struct hub *h = calloc(1, sizeof *h);
  int64_t seq;
  if (!h) return NULL;
  idmap_init(&h->held);
  h->st = st;
  seq = store_pub_seq(st);
  h->seq = h->woken = seq > 0 ? seq : 0;
  h->pub = publish_new(st);
  pthread_mutex_init(&h->mu, NULL);
  clock_cond_init(&h->cv);
  if (!h->pub || pthread_create(&h->thr, NULL, hub_thread, h) != 0) {
    log_error("cannot start the node hub");
    hub_free(&h);
    return NULL;
  }
  h->thr_started = 1;
  return h;
}

/* Stop the timer thread and wait for it (a no-op when it is not running). */
static void stop_thread(struct hub *h) {
  if (!h->thr_started) return;
  pthread_mutex_lock(&h->mu);
  h->stop = 1;
  pthread_cond_signal(&h->cv);
  pthread_mutex_unlock(&h->mu);
  pthread_join(h->thr, NULL);
  h->thr_started = 0;
}

void hub_free(struct hub **hp) {
  struct hub *h = *hp;
  if (!h) return;
  stop_thread(h);
  pthread_mutex_lock(&h->mu);
  flush_seen_locked(h);
  pthread_mutex_unlock(&h->mu);
  /* none is left after hub_shutdown; without it (a failed start) nobody waits for an answer */
  while (h->waiting.head) {
    struct waiter *w = WAITER(h->waiting.head);
    list_unlink(h, w);
    free(w);
  }
  idmap_fini(&h->held);
  publish_free(&h->pub);
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
  free(h->seen_id);
  free(h->seen_at);
  free(h->applied);
  nodewatch_free(&h->watch);
  free(h);
  *hp = NULL;
}

void hub_on_publication(void *arg, int64_t seq) {
  struct hub *h = arg;
  pthread_mutex_lock(&h->mu);
  if (seq > h->seq) {
    h->seq = seq;
    pthread_cond_signal(&h->cv);
  }
  pthread_mutex_unlock(&h->mu);
}

/* Answer p at once: what is newer than since, or outcome when it is not HUB_CONFIG. */
static void answer_now(struct hub *h, const struct hub_poll *p, int64_t since,
                       enum hub_outcome outcome) {
  struct pub_blob *b;
  if (outcome != HUB_CONFIG) {
    p->done(p->arg, outcome, NULL);
    return;
  }
  b = publish_get(h->pub, since);
  if (!b) {
    p->done(p->arg, unbuilt(h), NULL);
    return;
  }
  p->done(p->arg, HUB_CONFIG, b);
  pub_blob_unref(b);
}

/* With h->mu held: when seq is ahead of what the hub knows (a commit whose hook has not run yet,
   a reset database, or a node's claim), read the newest seq from the store; the lock is dropped
   around the read. */
static void catch_up_locked(struct hub *h, int64_t seq) {
  int64_t cur;
  if (seq <= h->seq) return;
  pthread_mutex_unlock(&h->mu);
  cur = store_pub_seq(h->st);
  pthread_mutex_lock(&h->mu);
  if (cur > h->seq) {
    h->seq = cur;
    pthread_cond_signal(&h->cv);
  }
}

int64_t hub_seq_for(struct hub *h, int64_t seq) {
  int64_t cur;
  pthread_mutex_lock(&h->mu);
  catch_up_locked(h, seq);
  cur = h->seq;
  pthread_mutex_unlock(&h->mu);
  return cur;
}

/* With h->mu held: take node_id's held poll off the list (at most one is held), or NULL. */
static struct waiter *older_poll_locked(struct hub *h, int64_t node_id) {
  struct waiter *o = idmap_get(&h->held, node_id);
  if (o) list_unlink(h, o);
  return o;
}

int hub_config_poll(struct hub *h, int64_t since, int64_t wait_ms, const struct hub_poll *p) {
  struct waiter *w = calloc(1, sizeof *w), *older;
  if (!w) {
    answer_now(h, p, since, HUB_NO_MEMORY);
    return 0;
  }
  pthread_mutex_lock(&h->mu);
  catch_up_locked(h, since);
  if (since != h->seq) {
    pthread_mutex_unlock(&h->mu);
    free(w);
    answer_now(h, p, since, HUB_CONFIG);
    return 0;
  }
  if (h->closed || wait_ms <= 0) {
    pthread_mutex_unlock(&h->mu);
    free(w);
    answer_now(h, p, since, HUB_UNCHANGED);
    return 0;
  }
  w->node_id = p->node_id;
  w->since = since;
  w->link.deadline = dl_hold_deadline(clock_mono_ms(), wait_ms);
  w->done = p->done;
  w->arg = p->arg;
  /* one held poll per node: an older one (a node that went away without closing, or one that
     opens poll after poll) is answered 304 now, so one token cannot hold connection after
     connection (docs/design.md#node-protocol) */
  older = older_poll_locked(h, p->node_id);
  if (p->node_id > 0 && idmap_put(&h->held, p->node_id, w) < 0) {
    pthread_mutex_unlock(&h->mu);
    free(w);
    if (older) answer(older, HUB_UNCHANGED, NULL);
    answer_now(h, p, since, HUB_NO_MEMORY);
    return 0;
  }
  /* the caller suspends before the waiter becomes visible, so nobody answers a poll whose
     handler is still running */
  p->suspend(p->arg);
  /* the thread sleeps until the head's deadline at most: only a new head changes that */
  if (dl_insert(&h->waiting, &w->link)) pthread_cond_signal(&h->cv);
  pthread_mutex_unlock(&h->mu);
  if (older) answer(older, HUB_UNCHANGED, NULL);
  return 1;
}

void hub_watch_nodes(struct hub *h, int64_t online_ms) {
  struct nodewatch *w = nodewatch_new(online_ms);
  if (!w) {
    log_warn("node online/offline lines are off: out of memory");
    return;
  }
  pthread_mutex_lock(&h->mu);
  nodewatch_free(&h->watch);
  h->watch = w;
  pthread_mutex_unlock(&h->mu);
}

void hub_node_seen(struct hub *h, int64_t node_id, int64_t now) {
  pthread_mutex_lock(&h->mu);
  if (h->watch && nodewatch_seen(h->watch, node_id, now) == 1)
    log_node_event("node.online", node_id);
  for (int i = 0; i < h->n_seen; i++)
    if (h->seen_id[i] == node_id) {
      if (now > h->seen_at[i]) h->seen_at[i] = now;
      goto out;
    }
  if (h->n_seen == h->cap_seen) {
    int ncap = h->cap_seen ? h->cap_seen * 2 : 64;
    int64_t *ni = realloc(h->seen_id, (size_t)ncap * sizeof *ni), *na;
    if (!ni) goto out;
    h->seen_id = ni;
    na = realloc(h->seen_at, (size_t)ncap * sizeof *na);
    if (!na) goto out;
    h->seen_at = na;
    h->cap_seen = ncap;
  }
  h->seen_id[h->n_seen] = node_id;
  h->seen_at[h->n_seen] = now;
  h->n_seen++;
out:
  pthread_mutex_unlock(&h->mu);
}

void hub_node_applied(struct hub *h, int64_t node_id, int64_t seq, int64_t now) {
  if (seq <= 0) return;
  pthread_mutex_lock(&h->mu);
  catch_up_locked(h, seq);
  if (seq > h->seq) goto out; /* no such publication: nothing was applied */
  /* the first time this batch saw the node at this seq is the one kept */
  for (int i = h->n_applied - 1; i >= 0; i--)
    if (h->applied[i].node_id == node_id) {
      if (h->applied[i].seq >= seq) goto out;
      break;
    }
  if (h->n_applied == h->cap_applied) {
    int ncap = h->cap_applied ? h->cap_applied * 2 : 64;
    struct incident_ask *na;
    if (ncap > HUB_APPLIED_MAX) goto out; /* bounded: the next batch records the rest */
    na = realloc(h->applied, (size_t)ncap * sizeof *na);
    if (!na) goto out;
    h->applied = na;
    h->cap_applied = ncap;
  }
  h->applied[h->n_applied++] = (struct incident_ask){node_id, seq, now};
out:
  pthread_mutex_unlock(&h->mu);
}

void hub_shutdown(struct hub *h) {
  struct waiter **ws;
  int n;
  /* the thread first: waiters it has taken off the list are answered only after it has built
     their answer (database reads, slower on PostgreSQL), and the daemon must not stop with one
     of them still held */
  stop_thread(h);
  pthread_mutex_lock(&h->mu);
  h->closed = 1;
  ws = take_waiters(h, pick_all, 0, &n);
  pthread_mutex_unlock(&h->mu);
  answer_all(ws, n, HUB_UNCHANGED);
  free(ws);
  if (n) log_info("answered %d waiting config polls before stopping", n);
}

void hub_node_revoked(struct hub *h, int64_t node_id) {
  struct waiter *w;
  pthread_mutex_lock(&h->mu);
  w = older_poll_locked(h, node_id);
  if (h->watch) nodewatch_forget(h->watch, node_id);
  pthread_mutex_unlock(&h->mu);
  if (w) answer(w, HUB_REVOKED, NULL);
}

int hub_waiters(struct hub *h) {
  int n;
  pthread_mutex_lock(&h->mu);
  n = (int)h->waiting.n;
  pthread_mutex_unlock(&h->mu);
  return n;
}

int64_t hub_seq(struct hub *h) {
  int64_t s;
  pthread_mutex_lock(&h->mu);
  s = h->seq;
  pthread_mutex_unlock(&h->mu);
  return s;
}
