/* hub — config long-poll waiters and batched node presence, driven by one timer thread. */
#include "hub.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "nodewatch.h"
#include "publish.h"
#include "store_node.h"
#include "store_pub.h"

#define HUB_FLUSH_MS 1000

static void blob_release(void *cls) {
  pub_blob_unref(cls);
}

/* Set r's reply: 200 application/json over the blob's memory (no copy; the response holds its own
   reference) plus an X-Cdnca-Node-Id header with r->node_id. 0, or -1 with a 500 reply set. */
static int publish_reply(struct req *r, struct pub_blob *b) {
  struct MHD_Response *resp;
  char id[32];
  pub_blob_ref(b);
  resp = MHD_create_response_from_buffer_with_free_callback_cls(
      pub_blob_len(b), (void *)pub_blob_data(b), blob_release, b);
  if (!resp) {
    pub_blob_unref(b);
    req_error(r, 500, "internal", NULL, "out of memory");
    return -1;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  snprintf(id, sizeof id, "%lld", (long long)r->node_id);
  MHD_add_response_header(resp, "X-Cdnca-Node-Id", id);
  req_response(r, 200, resp);
  return 0;
}
/* One suspended GET /v1/node/config. Owned by its request (r->user); on the list while suspended.
 */
struct waiter {
  struct req *r;
  int64_t since;
  int64_t deadline; /* monotonic ms */
  struct waiter *prev, *next;
};

struct hub {
  struct store *st;
  struct publish *pub;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thr;
  int thr_started;
  int stop;      /* the thread must end */
  int closed;    /* hub_shutdown ran: no more suspending */
  int64_t seq;   /* newest publication known */
  int64_t woken; /* waiters behind this seq were answered */
  struct waiter *head;
  int n_waiters;
  int64_t *seen_id, *seen_at; /* presence not yet written, one entry per node */
  int n_seen, cap_seen;
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
  if (w->prev)
    w->prev->next = w->next;
  else
    h->head = w->next;
  if (w->next) w->next->prev = w->prev;
  w->prev = w->next = NULL;
  h->n_waiters--;
}

/* Move the waiters for which pick(w, arg) holds into a malloc'd array (caller frees). */
static struct waiter **take_waiters(struct hub *h, int (*pick)(const struct waiter *, int64_t),
                                    int64_t arg, int *n) {
  struct waiter **out = NULL, *w, *next;
  int cnt = 0;
  *n = 0;
  if (!h->n_waiters) return NULL;
  out = malloc((size_t)h->n_waiters * sizeof *out);
  if (!out) return NULL;
  for (w = h->head; w; w = next) {
    next = w->next;
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
static int pick_expired(const struct waiter *w, int64_t now) {
  return w->deadline <= now;
}
static int pick_all(const struct waiter *w, int64_t unused) {
  return 1;
}
static int pick_node(const struct waiter *w, int64_t node_id) {
  return w->r->node_id == node_id;
}

/* The answer when publish_get built nothing: the database is unreachable (a failover, a
   restart: the node retries, or moves to another replica) or something else failed. */
static void answer_unbuilt(struct hub *h, struct req *r) {
  if (!store_db_up(h->st))
    req_error(r, 503, "db_unavailable", NULL, "the database cannot be reached (retry shortly)");
  else
    req_error(r, 500, "internal", NULL, "cannot build the node config");
}

/* Answer waiters (off the list, so owned by the caller now) and resume them. */
static void answer_new(struct hub *h, struct waiter **ws, int n) {
  struct pub_blob *b = NULL;
  int64_t since = -1;
  for (int i = 0; i < n; i++) {
    struct req *r = ws[i]->r;
    if (!b || ws[i]->since != since) {
      pub_blob_unref(b);
      since = ws[i]->since;
      b = publish_get(h->pub, since);
    }
    if (b)
      publish_reply(r, b);
    else
      answer_unbuilt(h, r);
    req_resume(r);
  }
  pub_blob_unref(b);
}

static void answer_304(struct waiter **ws, int n) {
  for (int i = 0; i < n; i++) {
    req_json(ws[i]->r, 304, NULL);
    req_resume(ws[i]->r);
  }
}

/* Write pending presence (called with mu held; drops it while writing). */
static void flush_seen_locked(struct hub *h) {
  int64_t *ids, *at;
  int n = h->n_seen;
  if (!n) return;
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
    ws = take_waiters(h, pick_expired, now, &n);
    if (n) {
      pthread_mutex_unlock(&h->mu);
      answer_304(ws, n);
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
    for (struct waiter *w = h->head; w; w = w->next)
      if (w->deadline < wake) wake = w->deadline;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    {
      int64_t d = wake - now;
      if (d < 1) d = 1;
      if (d > HUB_FLUSH_MS) d = HUB_FLUSH_MS;
      ts.tv_sec += (time_t)(d / 1000);
      ts.tv_nsec += (long)(d % 1000) * 1000000L;
      if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
      }
    }
    pthread_cond_timedwait(&h->cv, &h->mu, &ts);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

struct hub *hub_new(struct store *st) {
  struct hub *h = calloc(1, sizeof *h);
  pthread_condattr_t ca;
  int64_t seq;
  if (!h) return NULL;
  h->st = st;
  seq = store_pub_seq(st);
  h->seq = h->woken = seq > 0 ? seq : 0;
  h->pub = publish_new(st);
  pthread_mutex_init(&h->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (!h->pub || pthread_create(&h->thr, NULL, hub_thread, h) != 0) {
    log_error("cannot start the node hub");
    hub_free(&h);
    return NULL;
  }
  h->thr_started = 1;
  return h;
}

void hub_free(struct hub **hp) {
  struct hub *h = *hp;
  if (!h) return;
  if (h->thr_started) {
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->thr, NULL);
  }
  pthread_mutex_lock(&h->mu);
  flush_seen_locked(h);
  pthread_mutex_unlock(&h->mu);
  publish_free(&h->pub);
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
  free(h->seen_id);
  free(h->seen_at);
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

static void answer_now(struct hub *h, struct req *r, int64_t since) {
  struct pub_blob *b = publish_get(h->pub, since);
  if (!b) {
    answer_unbuilt(h, r);
    return;
  }
  publish_reply(r, b);
  pub_blob_unref(b);
}

enum http_rc hub_config_poll(struct hub *h, struct req *r, int64_t since, int64_t wait_ms) {
  struct waiter *w = calloc(1, sizeof *w);
  int64_t cur;
  if (!w) {
    req_error(r, 500, "internal", NULL, "out of memory");
    return HTTP_DONE;
  }
  pthread_mutex_lock(&h->mu);
  if (since > h->seq) {
    /* ahead of what the hub knows: a commit whose hook has not run yet, or a reset database */
    pthread_mutex_unlock(&h->mu);
    cur = store_pub_seq(h->st);
    pthread_mutex_lock(&h->mu);
    if (cur > h->seq) {
      h->seq = cur;
      pthread_cond_signal(&h->cv);
    }
  }
  if (since != h->seq) {
    pthread_mutex_unlock(&h->mu);
    free(w);
    answer_now(h, r, since);
    return HTTP_DONE;
  }
  if (h->closed || wait_ms <= 0) {
    pthread_mutex_unlock(&h->mu);
    free(w);
    req_json(r, 304, NULL);
    return HTTP_DONE;
  }
  w->r = r;
  w->since = since;
  w->deadline = clock_mono_ms() + wait_ms;
  r->user = w;
  r->user_free = free;
  /* suspend before the waiter becomes visible, so nobody resumes a running connection */
  req_suspend(r);
  w->next = h->head;
  if (h->head) h->head->prev = w;
  h->head = w;
  h->n_waiters++;
  pthread_cond_signal(&h->cv);
  pthread_mutex_unlock(&h->mu);
  return HTTP_SUSPENDED;
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

void hub_shutdown(struct hub *h) {
  struct waiter **ws;
  int n;
  /* the thread first: waiters it has taken off the list are resumed only after it has built
     their answer (database reads, slower on PostgreSQL), and the daemon must not stop with one
     of them still suspended */
  if (h->thr_started) {
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->thr, NULL);
    h->thr_started = 0;
  }
  pthread_mutex_lock(&h->mu);
  h->closed = 1;
  ws = take_waiters(h, pick_all, 0, &n);
  pthread_mutex_unlock(&h->mu);
  answer_304(ws, n);
  free(ws);
  if (n) log_info("answered %d waiting config polls before stopping", n);
}

void hub_node_revoked(struct hub *h, int64_t node_id) {
  struct waiter **ws;
  int n;
  pthread_mutex_lock(&h->mu);
  ws = take_waiters(h, pick_node, node_id, &n);
  if (h->watch) nodewatch_forget(h->watch, node_id);
  pthread_mutex_unlock(&h->mu);
  for (int i = 0; i < n; i++) {
    req_error(ws[i]->r, 401, "unauthorized", NULL, "unknown or revoked token");
    req_resume(ws[i]->r);
  }
  free(ws);
}

int hub_waiters(struct hub *h) {
  int n;
  pthread_mutex_lock(&h->mu);
  n = h->n_waiters;
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
