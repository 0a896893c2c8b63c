/* tasks_core — the probe-task board's core (tasks.h): node task polls held until tasks come or
   wait_ms passes, the timer thread that answers them, kicks, and the engine's wait for votes. The
   rounds live in one of two homes behind struct tasks_ops (tasks_core.h): tasks_mem.c or
   tasks_db.c. */
#include "tasks.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "hcheck.h"
#include "json.h"
#include "log.h"
#include "tasks_core.h"

/* One held task poll (owned by its client: freed with it, see tasks_client_ops.hold). */
struct twaiter {
  const struct tasks_client_ops *ops;
  void *client;
  int64_t node_id;
  struct dl_link link;   /* on the board's list while held (deadline: monotonic ms) */
  struct twaiter *chain; /* off the list: the next one to resume (resume_all) */
};

#define TWAITER(l) DL_ENTRY(l, struct twaiter, link)

static void waiter_unlink(struct task_board *b, struct twaiter *w) {
  dl_unlink(&b->waiting, &w->link);
  w->chain = NULL;
  if (idmap_get(&b->held, w->node_id) == w) idmap_del(&b->held, w->node_id);
}

/* Resume a list of waiters linked through chain (already off the board list, replies set). */
static void resume_all(struct twaiter *list) {
  while (list) {
    struct twaiter *next = list->chain;
    list->ops->resume(list->client); /* may free list (the client completes) */
    list = next;
  }
}

/* The probe options of a task (docs/design.md#node-protocol), defaults when none. */
void tasks_add_check(cJSON *t, const struct hcheck_opts *check) {
  struct hcheck_opts d;
  cJSON *c = cJSON_AddObjectToObject(t, "check");
  if (!check) {
    hcheck_defaults(&d);
    check = &d;
  }
  if (c) hcheck_add_json(c, check, 0);
}

cJSON *tasks_spec_json(const struct task_spec *s) {
  cJSON *t = cJSON_CreateObject();
  if (!t) return NULL;
  json_add_i64(t, "task_id", s->task_id);
  json_add_i64(t, "origin_id", s->origin_id);
  cJSON_AddStringToObject(t, "url", s->url);
  cJSON_AddStringToObject(t, "host", s->host);
  cJSON_AddNumberToObject(t, "timeout_ms", s->timeout_ms);
  tasks_add_check(t, s->check);
  return t;
}

void tasks_reply(const struct tasks_client_ops *ops, void *client, int64_t round_id,
                 int64_t deadline_ms, cJSON *tasks) {
  cJSON *j = cJSON_CreateObject();
  if (!j || !tasks) {
    cJSON_Delete(j);
    cJSON_Delete(tasks);
    ops->error(client, 500, "internal", "out of memory");
    return;
  }
  json_add_i64(j, "round_id", round_id);
  json_add_i64(j, "deadline_ms", deadline_ms);
  cJSON_AddItemToObject(j, "tasks", tasks);
  ops->reply(client, 200, j);
}

void tasks_kick(struct task_board *b) {
  b->kick = 1;
  b->wake_gen++;
  pthread_cond_signal(&b->timer_cv);
}

void tasks_votes_in(struct task_board *b) {
  b->votes_gen++;
  pthread_cond_broadcast(&b->votes_cv);
}

static int id_in(const int64_t *ids, int n, int64_t id) {
  for (int i = 0; i < n; i++)
    if (ids[i] == id) return 1;
  return 0;
}

/* The timer thread, without the lock: the waiters whose node has tasks in an open round get them.
   Waiters taken off the list meanwhile belong to this thread; those left without tasks go back
   (or get 304 when the board closed). */
static void hand_out(struct task_board *b) {
  int64_t *ids = NULL;
  int n = 0;
  struct twaiter *mine = NULL, *done = NULL, *w, *next;
  struct dl_link *l, *lnext;
  if (b->ops->pending_nodes(b, &ids, &n) < 0 || n == 0) {
    free(ids);
    return;
  }
  pthread_mutex_lock(&b->mu);
  for (l = b->waiting.head; l; l = lnext) {
    lnext = l->next;
    w = TWAITER(l);
    if (!id_in(ids, n, w->node_id)) continue;
    waiter_unlink(b, w);
    w->chain = mine;
    mine = w;
  }
  pthread_mutex_unlock(&b->mu);
  free(ids);
  for (w = mine; w; w = next) {
    next = w->chain;
    if (b->ops->take(b, w->ops, w->client, w->node_id) == 1) {
      w->chain = done;
      done = w;
      continue;
    }
    pthread_mutex_lock(&b->mu);
    if (b->closed) {
      w->ops->reply(w->client, 304, NULL);
      w->chain = done;
      done = w;
    } else {
      /* back on the list, and under its node unless a newer poll of the node came meanwhile
         (out of memory it stays unfound by its node until it expires) */
      if (w->node_id > 0 && !idmap_get(&b->held, w->node_id))
        (void)idmap_put(&b->held, w->node_id, w);
      (void)dl_insert(&b->waiting, &w->link);
    }
    pthread_mutex_unlock(&b->mu);
  }
  resume_all(done);
}

/* When held polls next re-read the home without a kick (monotonic ms). */
static int64_t next_recheck(const struct task_board *b, int64_t now) {
  return b->ops->recheck_ms > 0 ? now + b->ops->recheck_ms : INT64_MAX;
}

static void *timer_thread(void *arg) {
  struct task_board *b = arg;
  pthread_mutex_lock(&b->mu);
  while (!b->stop) {
    int64_t now = clock_mono_ms(), wake = now + 1000;
    struct twaiter *done = NULL, *w;
    struct dl_link *l;
    struct timespec ts;
    /* the list is in deadline order: the expired ones are its head */
    while ((l = dl_expired(&b->waiting, now)) != NULL) {
      w = TWAITER(l);
      waiter_unlink(b, w);
      w->ops->reply(w->client, 304, NULL);
      w->chain = done;
      done = w;
    }
    if (b->waiting.head && b->waiting.head->deadline < wake) wake = b->waiting.head->deadline;
    if (done) {
      pthread_mutex_unlock(&b->mu);
      resume_all(done);
      pthread_mutex_lock(&b->mu);
      continue;
    }
    if (!b->waiting.head) b->kick = 0; /* nobody waits: the next poll reads the home itself */
    if (b->waiting.head && !b->closed && (b->kick || now >= b->next_check)) {
      b->kick = 0;
      b->next_check = next_recheck(b, now);
      b->handing = 1;
      pthread_mutex_unlock(&b->mu);
      hand_out(b);
      pthread_mutex_lock(&b->mu);
      b->handing = 0;
      pthread_cond_broadcast(&b->idle_cv);
      continue;
    }
    if (b->waiting.head && b->next_check < wake) wake = b->next_check;
    clock_mono_timespec(&ts, wake - now > 0 ? wake - now : 1);
    pthread_cond_timedwait(&b->timer_cv, &b->mu, &ts);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

struct task_board *tasks_new(struct store *st) {
  struct task_board *b = st ? tasks_db_alloc(st) : tasks_mem_alloc();
  if (!b) return NULL;
  pthread_mutex_init(&b->mu, NULL);
  clock_cond_init(&b->votes_cv);
  clock_cond_init(&b->timer_cv);
  clock_cond_init(&b->idle_cv);
  b->next_check = next_recheck(b, clock_mono_ms());
  if (pthread_create(&b->thr, NULL, timer_thread, b) != 0) {
    log_error("cannot start the task board timer");
    tasks_free(&b);
    return NULL;
  }
  b->thr_started = 1;
  return b;
}

void tasks_free(struct task_board **bp) {
  struct task_board *b = *bp;
  if (!b) return;
  if (b->thr_started) {
    pthread_mutex_lock(&b->mu);
    b->stop = 1;
    pthread_cond_signal(&b->timer_cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thr, NULL);
  }
  b->ops->clear(b);
  idmap_fini(&b->held);
  pthread_cond_destroy(&b->votes_cv);
  pthread_cond_destroy(&b->timer_cv);
  pthread_cond_destroy(&b->idle_cv);
  pthread_mutex_destroy(&b->mu);
  free(b);
  *bp = NULL;
}

void tasks_signal(void *arg, enum signal_kind kind, const char *payload) {
  struct task_board *b = arg;
  int64_t node;
  if (kind == SIGNAL_INVAL) { /* a node deleted on another replica: its polls here end too */
    if (payload && sigmsg_inval_parse(payload, &node) == SIGMSG_INVAL_NODE)
      tasks_node_revoked(b, node);
    return;
  }
  pthread_mutex_lock(&b->mu);
  if (kind == SIGNAL_TASKS || !payload) tasks_kick(b);
  if (kind == SIGNAL_VOTES || !payload) tasks_votes_in(b);
  pthread_mutex_unlock(&b->mu);
}

int tasks_abort_older(struct task_board *b, int64_t epoch) {
  return b->ops->abort_older(b, epoch);
}

int64_t tasks_next_round_id(struct task_board *b) {
  return b->ops->next_round_id(b);
}

int tasks_round_open(struct task_board *b, int64_t round_id, int64_t deadline_wall_ms, int n_nodes,
                     const int64_t *node_ids, const struct task_spec *const *tasks,
                     const int *n_tasks) {
  if (n_nodes < 0) return -1;
  return b->ops->round_open(b, round_id, deadline_wall_ms, n_nodes, node_ids, tasks, n_tasks);
}

/* Woken by every vote arrival (tasks_votes_in), and looks again at least every TASKS_TICK_MS. */
void tasks_round_wait(struct task_board *b, int64_t round_id, atomic_int *stop) {
  pthread_mutex_lock(&b->mu);
  while (!(stop && *stop)) {
    uint64_t seen = b->votes_gen;
    int64_t left;
    struct timespec ts;
    pthread_mutex_unlock(&b->mu);
    left = b->ops->wait_left(b, round_id);
    pthread_mutex_lock(&b->mu);
    if (left <= 0) break;
    if (b->votes_gen != seen) continue; /* votes came while the home was asked */
    clock_mono_timespec(&ts, left < TASKS_TICK_MS ? left : TASKS_TICK_MS);
    pthread_cond_timedwait(&b->votes_cv, &b->mu, &ts);
  }
  pthread_mutex_unlock(&b->mu);
}

int tasks_round_close(struct task_board *b, int64_t round_id, struct task_vote **votes, int *n) {
  *votes = NULL;
  *n = 0;
  return b->ops->round_close(b, round_id, votes, n);
}

enum tasks_vote_rc tasks_vote(struct task_board *b, int64_t node_id, int64_t round_id,
                              const struct task_vote *v, int n, int64_t now, int *bad) {
  return b->ops->vote(b, node_id, round_id, v, n, now, bad);
}

int tasks_poll(struct task_board *b, const struct tasks_client_ops *ops, void *client,
               int64_t node_id, int64_t wait_ms) {
  struct twaiter *w = calloc(1, sizeof *w), *older = NULL;
  uint64_t gen;
  int got, head;
  if (!w) {
    ops->error(client, 500, "internal", "out of memory");
    return 0;
  }
  /* the home first, then wait for a kick */
  pthread_mutex_lock(&b->mu);
  gen = b->wake_gen;
  pthread_mutex_unlock(&b->mu);
  got = b->ops->take(b, ops, client, node_id);
  if (got != 0) {
    if (got < 0) /* only the database's home fails to read */
      ops->error(client, 503, "db_unavailable", "the database cannot be reached (retry shortly)");
    free(w);
    return 0;
  }
  pthread_mutex_lock(&b->mu);
  if (b->closed || wait_ms <= 0) {
    pthread_mutex_unlock(&b->mu);
    free(w);
    ops->reply(client, 304, NULL);
    return 0;
  }
  w->ops = ops;
  w->client = client;
  w->node_id = node_id;
  w->link.deadline = dl_hold_deadline(clock_mono_ms(), wait_ms);
  /* one held poll per node: an older one is answered 304 now (as the config poll's, so one
     token cannot hold connection after connection) */
  if ((older = idmap_get(&b->held, node_id)) != NULL) {
    waiter_unlink(b, older);
    older->ops->reply(older->client, 304, NULL);
  }
  if (node_id > 0 && idmap_put(&b->held, node_id, w) < 0) {
    pthread_mutex_unlock(&b->mu);
    free(w);
    resume_all(older);
    ops->error(client, 500, "internal", "out of memory");
    return 0;
  }
  ops->hold(client, w, free); /* before the waiter is visible to anyone who could resume it */
  head = dl_insert(&b->waiting, &w->link);
  if (b->wake_gen != gen) b->kick = 1; /* a round opened while the home was read */
  /* the thread sleeps until the head's deadline at most: only a new head or a kick changes it */
  if (head || b->kick) pthread_cond_signal(&b->timer_cv);
  pthread_mutex_unlock(&b->mu);
  resume_all(older);
  return 1;
}

void tasks_shutdown(struct task_board *b) {
  struct twaiter *done = NULL, *w;
  pthread_mutex_lock(&b->mu);
  b->closed = 1;
  while (b->waiting.head) {
    w = TWAITER(b->waiting.head);
    waiter_unlink(b, w);
    w->ops->reply(w->client, 304, NULL);
    w->chain = done;
    done = w;
  }
  /* waiters the timer thread took off the list are answered by it (304 once closed): wait, so
     no suspended request outlives this call */
  while (b->handing)
    pthread_cond_wait(&b->idle_cv, &b->mu);
  pthread_mutex_unlock(&b->mu);
  resume_all(done);
}

void tasks_node_revoked(struct task_board *b, int64_t node_id) {
  struct twaiter *done = NULL, *w;
  pthread_mutex_lock(&b->mu);
  if ((w = idmap_get(&b->held, node_id)) != NULL) {
    waiter_unlink(b, w);
    w->ops->error(w->client, 401, "unauthorized", "unknown or revoked token");
    w->chain = done;
    done = w;
  }
  pthread_mutex_unlock(&b->mu);
  resume_all(done);
}
