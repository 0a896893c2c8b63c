/* tasks — the probe-task board: rounds of per-node tasks, votes back, node long-poll waiters. */
#include "tasks.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "hcheck.h"
#include "json.h"
#include "log.h"
#include "store_tasks.h"

/* One node's share of a round. */
struct assign {
  int64_t node_id;
  int n;
  struct task_spec *tasks;
  unsigned char *voted; /* one flag per task */
  int delivered;
};

struct round {
  int64_t id, deadline; /* deadline: wall ms */
  int n_assign;
  struct assign *a;
  int expected, received;
  struct task_vote *votes; /* received in time, `received` entries (capacity `expected`) */
  struct round *next;
};

/* One held task poll (owned by its client: freed with it, see tasks_client_ops.hold). */
struct twaiter {
  const struct tasks_client_ops *ops;
  void *client;
  int64_t node_id;
  int64_t deadline; /* monotonic ms */
  struct twaiter *prev, *next;
};

/* Cluster mode: a round this process opened in the table, for the engine's wait. */
struct dbround {
  int64_t id;
  int expected;
  int64_t deadline; /* monotonic ms */
  struct dbround *next;
};

struct task_board {
  pthread_mutex_t mu;
  pthread_cond_t votes_cv; /* a vote arrived */
  pthread_cond_t timer_cv; /* a waiter was added, or stop */
  pthread_cond_t idle_cv;  /* the timer thread finished a hand-out from the table */
  pthread_t thr;
  int thr_started, stop, closed;
  struct round *rounds;
  struct twaiter *head;
  /* cluster mode (st != NULL): the board is in the database */
  struct store *st;
  struct dbround *dbrounds;
  int kick;           /* a cdnca_tasks notification: the timer thread re-reads the table */
  int handing;        /* the timer thread holds waiters off the list (db_hand_out) */
  uint64_t wake_gen;  /* bumped by every cdnca_tasks notification or local round open */
  uint64_t votes_gen; /* bumped by every cdnca_votes notification */
  int64_t next_check; /* monotonic ms of the next re-read while polls wait */
  int64_t next_prune; /* monotonic ms of the next prune of old rounds (engine) */
};

static void timespec_in(struct timespec *ts, int64_t ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += (time_t)(ms / 1000);
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

static void round_free(struct round *rd) {
  for (int i = 0; i < rd->n_assign; i++) {
    free(rd->a[i].tasks);
    free(rd->a[i].voted);
  }
  free(rd->a);
  free(rd->votes);
  free(rd);
}

static struct round *round_find(struct task_board *b, int64_t id) {
  for (struct round *rd = b->rounds; rd; rd = rd->next)
    if (rd->id == id) return rd;
  return NULL;
}

static struct assign *assign_find(struct round *rd, int64_t node_id) {
  for (int i = 0; i < rd->n_assign; i++)
    if (rd->a[i].node_id == node_id) return &rd->a[i];
  return NULL;
}

static void waiter_unlink(struct task_board *b, struct twaiter *w) {
  if (w->prev)
    w->prev->next = w->next;
  else
    b->head = w->next;
  if (w->next) w->next->prev = w->prev;
  w->prev = w->next = NULL;
}

/* Add a task's "check": the probe options (docs/design.md#node-protocol), defaults when none. */
static void add_check(cJSON *t, const struct hcheck_opts *check) {
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
  add_check(t, s->check);
  return t;
}

/* Answer the client with the tasks of a (marks them delivered). */
static void reply_tasks(const struct tasks_client_ops *ops, void *client, const struct round *rd,
                        struct assign *a, int64_t now) {
  cJSON *j = cJSON_CreateObject(), *arr;
  json_add_i64(j, "round_id", rd->id);
  json_add_i64(j, "deadline_ms", rd->deadline - now);
  arr = cJSON_AddArrayToObject(j, "tasks");
  for (int i = 0; i < a->n; i++)
    cJSON_AddItemToArray(arr, tasks_spec_json(&a->tasks[i]));
  a->delivered = 1;
  ops->reply(client, 200, j);
}

/* An open round with undelivered tasks for node_id, or NULL. */
static struct assign *pending_for(struct task_board *b, int64_t node_id, int64_t now,
                                  struct round **rd_out) {
  for (struct round *rd = b->rounds; rd; rd = rd->next) {
    struct assign *a;
    if (rd->deadline <= now) continue;
    a = assign_find(rd, node_id);
    if (a && !a->delivered && a->n > 0) {
      *rd_out = rd;
      return a;
    }
  }
  return NULL;
}

/* Resume a list of waiters linked through next (already off the board list, replies set). */
static void resume_all(struct twaiter *list) {
  while (list) {
    struct twaiter *next = list->next;
    list->ops->resume(list->client); /* may free list (the client completes) */
    list = next;
  }
}

/* ---- cluster mode: the board in the database ---- */

/* Answer the client with the tasks taken from the table. */
static void reply_db_tasks(const struct tasks_client_ops *ops, void *client, int64_t round_id,
                           int64_t deadline_ms, const struct store_task *t, int n) {
  cJSON *j = cJSON_CreateObject(), *arr;
  json_add_i64(j, "round_id", round_id);
  json_add_i64(j, "deadline_ms", deadline_ms);
  arr = cJSON_AddArrayToObject(j, "tasks");
  for (int i = 0; i < n; i++) {
    cJSON *o = cJSON_CreateObject(), *chk = cJSON_Parse(t[i].check);
    if (!o) {
      cJSON_Delete(chk);
      continue;
    }
    json_add_i64(o, "task_id", t[i].task_id);
    json_add_i64(o, "origin_id", t[i].origin_id);
    cJSON_AddStringToObject(o, "url", t[i].url);
    cJSON_AddStringToObject(o, "host", t[i].host);
    cJSON_AddNumberToObject(o, "timeout_ms", t[i].timeout_ms);
    if (chk)
      cJSON_AddItemToObject(o, "check", chk);
    else
      add_check(o, NULL);
    cJSON_AddItemToArray(arr, o);
  }
  ops->reply(client, 200, j);
}

/* Try to hand node_id's tasks from the table to the client: 1 answered (tasks), 0 none, -1
   error. */
static int db_take(struct task_board *b, const struct tasks_client_ops *ops, void *client,
                   int64_t node_id) {
  struct store_task *t = NULL;
  int64_t round_id = 0, left = 0;
  int n = 0, rc = store_tasks_take(b->st, node_id, &round_id, &left, &t, &n);
  if (rc == 1) reply_db_tasks(ops, client, round_id, left, t, n);
  store_tasks_free(t, n);
  return rc;
}

static int id_in(const int64_t *ids, int n, int64_t id) {
  for (int i = 0; i < n; i++)
    if (ids[i] == id) return 1;
  return 0;
}

/* The timer thread, without the lock: the waiters whose node has tasks in an open round get them.
   Waiters taken off the list meanwhile belong to this thread; those left without tasks go back
   (or get 304 when the board closed). */
static void db_hand_out(struct task_board *b) {
  int64_t *ids = NULL;
  int n = 0;
  struct twaiter *mine = NULL, *done = NULL, *w, *next;
  if (store_tasks_pending_nodes(b->st, &ids, &n) < 0 || n == 0) {
    free(ids);
    return;
  }
  pthread_mutex_lock(&b->mu);
  for (w = b->head; w; w = next) {
    next = w->next;
    if (!id_in(ids, n, w->node_id)) continue;
    waiter_unlink(b, w);
    w->next = mine;
    mine = w;
  }
  pthread_mutex_unlock(&b->mu);
  free(ids);
  for (w = mine; w; w = next) {
    next = w->next;
    if (db_take(b, w->ops, w->client, w->node_id) == 1) {
      w->next = done;
      done = w;
      continue;
    }
    pthread_mutex_lock(&b->mu);
    if (b->closed) {
      w->ops->reply(w->client, 304, NULL);
      w->next = done;
      done = w;
    } else {
      w->prev = NULL;
      w->next = b->head;
      if (b->head) b->head->prev = w;
      b->head = w;
    }
    pthread_mutex_unlock(&b->mu);
  }
  resume_all(done);
}

static void *timer_thread(void *arg) {
  struct task_board *b = arg;
  pthread_mutex_lock(&b->mu);
  while (!b->stop) {
    int64_t now = clock_mono_ms(), wake = now + 1000;
    struct twaiter *done = NULL, *w, *next;
    struct timespec ts;
    for (w = b->head; w; w = next) {
      next = w->next;
      if (w->deadline <= now) {
        waiter_unlink(b, w);
        w->ops->reply(w->client, 304, NULL);
        w->next = done;
        done = w;
      } else if (w->deadline < wake) {
        wake = w->deadline;
      }
    }
    if (done) {
      pthread_mutex_unlock(&b->mu);
      resume_all(done);
      pthread_mutex_lock(&b->mu);
      continue;
    }
    if (b->st && !b->head) b->kick = 0; /* nobody waits: the next poll reads the table itself */
    if (b->st && b->head && !b->closed && (b->kick || now >= b->next_check)) {
      b->kick = 0;
      b->next_check = now + TASKS_DB_RECHECK_MS;
      b->handing = 1;
      pthread_mutex_unlock(&b->mu);
      db_hand_out(b);
      pthread_mutex_lock(&b->mu);
      b->handing = 0;
      pthread_cond_broadcast(&b->idle_cv);
      continue;
    }
    if (b->st && b->head && b->next_check < wake) wake = b->next_check;
    timespec_in(&ts, wake - now > 0 ? wake - now : 1);
    pthread_cond_timedwait(&b->timer_cv, &b->mu, &ts);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

struct task_board *tasks_new(void) {
  struct task_board *b = calloc(1, sizeof *b);
  pthread_condattr_t ca;
  if (!b) return NULL;
  pthread_mutex_init(&b->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&b->votes_cv, &ca);
  pthread_cond_init(&b->timer_cv, &ca);
  pthread_cond_init(&b->idle_cv, &ca);
  pthread_condattr_destroy(&ca);
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
  while (b->rounds) {
    struct round *rd = b->rounds;
    b->rounds = rd->next;
    round_free(rd);
  }
  while (b->dbrounds) {
    struct dbround *d = b->dbrounds;
    b->dbrounds = d->next;
    free(d);
  }
  pthread_cond_destroy(&b->votes_cv);
  pthread_cond_destroy(&b->timer_cv);
  pthread_cond_destroy(&b->idle_cv);
  pthread_mutex_destroy(&b->mu);
  free(b);
  *bp = NULL;
}

int tasks_use_store(struct task_board *b, struct store *st) {
  pthread_mutex_lock(&b->mu);
  b->st = st;
  b->next_check = clock_mono_ms();
  pthread_mutex_unlock(&b->mu);
  return 0;
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
  if (kind == SIGNAL_TASKS || !payload) {
    b->kick = 1;
    b->wake_gen++;
    pthread_cond_signal(&b->timer_cv);
  }
  if (kind == SIGNAL_VOTES || !payload) {
    b->votes_gen++;
    pthread_cond_broadcast(&b->votes_cv);
  }
  pthread_mutex_unlock(&b->mu);
}

int tasks_abort_older(struct task_board *b, int64_t epoch) {
  int n;
  if (!b->st) return 0;
  n = store_tasks_abort_older(b->st, epoch);
  if (n > 0)
    log_info("engine epoch %lld: %d probe round(s) of older epochs aborted", (long long)epoch, n);
  return n;
}

int64_t tasks_next_round_id(struct task_board *b) {
  return b->st ? store_tasks_next_round_id(b->st) : 1;
}

/* Cluster mode: tasks_round_open into the table. */
static int db_round_open(struct task_board *b, int64_t round_id, int64_t deadline_wall_ms,
                         int n_nodes, const int64_t *node_ids, const struct task_spec *const *tasks,
                         const int *n_tasks) {
  cJSON *arr = cJSON_CreateArray();
  struct dbround *d = calloc(1, sizeof *d);
  char *json = NULL;
  int64_t in_ms = deadline_wall_ms - clock_wall_ms();
  int expected = 0, rc = -1;
  enum store_rc src;
  if (!arr || !d) goto out;
  for (int i = 0; i < n_nodes; i++)
    for (int k = 0; k < n_tasks[i]; k++) {
      cJSON *o = tasks_spec_json(&tasks[i][k]);
      if (!o) goto out;
      json_add_i64(o, "node_id", node_ids[i]);
      cJSON_AddItemToArray(arr, o);
      expected++;
    }
  json = cJSON_PrintUnformatted(arr);
  if (!json) goto out;
  if (in_ms < 1) in_ms = 1;
  d->id = round_id;
  d->expected = expected;
  d->deadline = clock_mono_ms() + in_ms;
  src = store_tasks_round_open(b->st, round_id, in_ms, json);
  if (src != STORE_OK) {
    log_error("probe round %lld: %s", (long long)round_id,
              src == STORE_CONFLICT ? "the round id is taken in the task table"
                                    : "the tasks could not be stored");
    goto out;
  }
  pthread_mutex_lock(&b->mu);
  d->next = b->dbrounds;
  b->dbrounds = d;
  d = NULL;
  b->kick = 1; /* this replica's waiters need not wait for the notification to come back */
  b->wake_gen++;
  pthread_cond_signal(&b->timer_cv);
  pthread_mutex_unlock(&b->mu);
  rc = 0;
out:
  free(d);
  free(json);
  cJSON_Delete(arr);
  return rc;
}

int tasks_round_open(struct task_board *b, int64_t round_id, int64_t deadline_wall_ms, int n_nodes,
                     const int64_t *node_ids, const struct task_spec *const *tasks,
                     const int *n_tasks) {
  struct round *rd;
  struct twaiter *done = NULL, *w, *next;
  int64_t now = clock_wall_ms();
  if (n_nodes < 0) return -1;
  if (b->st) return db_round_open(b, round_id, deadline_wall_ms, n_nodes, node_ids, tasks, n_tasks);
  rd = calloc(1, sizeof *rd);
  if (!rd) goto fail;
  rd->id = round_id;
  rd->deadline = deadline_wall_ms;
  rd->a = calloc((size_t)(n_nodes ? n_nodes : 1), sizeof *rd->a);
  if (!rd->a) goto fail;
  for (int i = 0; i < n_nodes; i++) {
    struct assign *a = &rd->a[rd->n_assign];
    if (n_tasks[i] <= 0) continue;
    a->node_id = node_ids[i];
    a->tasks = malloc((size_t)n_tasks[i] * sizeof *a->tasks);
    a->voted = calloc((size_t)n_tasks[i], 1);
    rd->n_assign++;
    if (!a->tasks || !a->voted) goto fail;
    memcpy(a->tasks, tasks[i], (size_t)n_tasks[i] * sizeof *a->tasks);
    a->n = n_tasks[i];
    rd->expected += n_tasks[i];
  }
  rd->votes = calloc((size_t)(rd->expected ? rd->expected : 1), sizeof *rd->votes);
  if (!rd->votes) goto fail;

  pthread_mutex_lock(&b->mu);
  if (round_find(b, round_id)) {
    pthread_mutex_unlock(&b->mu);
    log_error("probe round %lld is already open", (long long)round_id);
    goto fail;
  }
  rd->next = b->rounds;
  b->rounds = rd;
  /* hand the tasks to the nodes that are waiting for them */
  for (w = b->head; w; w = next) {
    struct assign *a;
    next = w->next;
    if (deadline_wall_ms <= now) break;
    a = assign_find(rd, w->node_id);
    if (!a || a->delivered) continue;
    waiter_unlink(b, w);
    reply_tasks(w->ops, w->client, rd, a, now);
    w->next = done;
    done = w;
  }
  pthread_mutex_unlock(&b->mu);
  resume_all(done);
  return 0;
fail:
  if (rd) round_free(rd);
  return -1;
}

static struct dbround *dbround_find(struct task_board *b, int64_t id) {
  for (struct dbround *d = b->dbrounds; d; d = d->next)
    if (d->id == id) return d;
  return NULL;
}

/* Cluster mode: tasks_round_wait on the vote count, woken by cdnca_votes or every tick. */
static void db_round_wait(struct task_board *b, int64_t round_id, atomic_int *stop) {
  pthread_mutex_lock(&b->mu);
  for (;;) {
    struct dbround *d = dbround_find(b, round_id);
    int64_t left, got, expected, deadline;
    uint64_t seen = b->votes_gen;
    struct timespec ts;
    if (!d || (stop && *stop)) break;
    expected = d->expected;
    deadline = d->deadline;
    pthread_mutex_unlock(&b->mu);
    got = store_tasks_vote_count(b->st, round_id);
    pthread_mutex_lock(&b->mu);
    if (got >= expected) break;
    left = deadline - clock_mono_ms();
    if (left <= 0) break;
    if (b->votes_gen != seen) continue; /* votes came while counting */
    timespec_in(&ts, left < TASKS_TICK_MS ? left : TASKS_TICK_MS);
    pthread_cond_timedwait(&b->votes_cv, &b->mu, &ts);
  }
  pthread_mutex_unlock(&b->mu);
}

void tasks_round_wait(struct task_board *b, int64_t round_id, atomic_int *stop) {
  if (b->st) {
    db_round_wait(b, round_id, stop);
    return;
  }
  pthread_mutex_lock(&b->mu);
  for (;;) {
    struct round *rd = round_find(b, round_id);
    int64_t left;
    struct timespec ts;
    if (!rd || rd->received >= rd->expected || (stop && *stop)) break;
    left = rd->deadline - clock_wall_ms();
    if (left <= 0) break;
    timespec_in(&ts, left < TASKS_TICK_MS ? left : TASKS_TICK_MS);
    pthread_cond_timedwait(&b->votes_cv, &b->mu, &ts);
  }
  pthread_mutex_unlock(&b->mu);
}

/* Cluster mode: tasks_round_close in the table, then (at most every TASKS_PRUNE_EVERY_MS) the
   rounds older than the keep time go. */
static int db_round_close(struct task_board *b, int64_t round_id, struct task_vote **votes,
                          int *n) {
  struct dbround **pp, *d = NULL;
  int prune = 0, rc;
  int64_t now = clock_mono_ms();
  pthread_mutex_lock(&b->mu);
  for (pp = &b->dbrounds; *pp; pp = &(*pp)->next)
    if ((*pp)->id == round_id) {
      d = *pp;
      *pp = d->next;
      break;
    }
  if (now >= b->next_prune) {
    prune = 1;
    b->next_prune = now + TASKS_PRUNE_EVERY_MS;
  }
  pthread_mutex_unlock(&b->mu);
  free(d);
  rc = store_tasks_round_close(b->st, round_id, votes, n);
  if (prune && store_tasks_prune(b->st, STORE_TASKS_KEEP_MS) < 0)
    log_warn("could not prune old probe rounds; retrying later");
  return rc;
}

int tasks_round_close(struct task_board *b, int64_t round_id, struct task_vote **votes, int *n) {
  struct round **pp, *rd = NULL;
  *votes = NULL;
  *n = 0;
  if (b->st) return db_round_close(b, round_id, votes, n);
  pthread_mutex_lock(&b->mu);
  for (pp = &b->rounds; *pp; pp = &(*pp)->next)
    if ((*pp)->id == round_id) {
      rd = *pp;
      *pp = rd->next;
      break;
    }
  pthread_mutex_unlock(&b->mu);
  if (!rd) return -1;
  *votes = rd->votes;
  *n = rd->received;
  rd->votes = NULL;
  round_free(rd);
  return 0;
}

/* Index of task_id in a, or -1. */
static int task_index(const struct assign *a, int64_t task_id) {
  for (int i = 0; i < a->n; i++)
    if (a->tasks[i].task_id == task_id) return i;
  return -1;
}

enum tasks_vote_rc tasks_vote(struct task_board *b, int64_t node_id, int64_t round_id,
                              const struct task_vote *v, int n, int64_t now, int *bad) {
  enum tasks_vote_rc rc = TASKS_VOTE_OK;
  struct round *rd;
  struct assign *a;
  if (b->st) return store_tasks_vote(b->st, node_id, round_id, v, n, bad);
  pthread_mutex_lock(&b->mu);
  rd = round_find(b, round_id);
  if (!rd || now > rd->deadline) {
    rc = TASKS_VOTE_LATE;
    goto out;
  }
  a = assign_find(rd, node_id);
  for (int i = 0; i < n; i++)
    if (!a || task_index(a, v[i].task_id) < 0) {
      if (bad) *bad = i;
      rc = TASKS_VOTE_NOT_YOURS;
      goto out;
    }
  for (int i = 0; i < n; i++) {
    int k = task_index(a, v[i].task_id);
    if (a->voted[k] || rd->received >= rd->expected) continue;
    a->voted[k] = 1;
    rd->votes[rd->received] = v[i];
    rd->votes[rd->received].node_id = node_id;
    rd->received++;
  }
  pthread_cond_broadcast(&b->votes_cv);
out:
  pthread_mutex_unlock(&b->mu);
  return rc;
}

int tasks_poll(struct task_board *b, const struct tasks_client_ops *ops, void *client,
               int64_t node_id, int64_t wait_ms) {
  struct twaiter *w = calloc(1, sizeof *w);
  struct round *rd = NULL;
  struct assign *a = NULL;
  uint64_t gen = 0;
  if (!w) {
    ops->error(client, 500, "internal", "out of memory");
    return 0;
  }
  if (b->st) { /* cluster mode: the table first, then wait for a notification */
    int got;
    pthread_mutex_lock(&b->mu);
    gen = b->wake_gen;
    pthread_mutex_unlock(&b->mu);
    got = db_take(b, ops, client, node_id);
    if (got != 0) {
      if (got < 0)
        ops->error(client, 503, "db_unavailable", "the database cannot be reached (retry shortly)");
      free(w);
      return 0;
    }
  }
  pthread_mutex_lock(&b->mu);
  if (!b->st) a = pending_for(b, node_id, clock_wall_ms(), &rd);
  if (a) {
    reply_tasks(ops, client, rd, a, clock_wall_ms());
    pthread_mutex_unlock(&b->mu);
    free(w);
    return 0;
  }
  if (b->closed || wait_ms <= 0) {
    pthread_mutex_unlock(&b->mu);
    free(w);
    ops->reply(client, 304, NULL);
    return 0;
  }
  w->ops = ops;
  w->client = client;
  w->node_id = node_id;
  w->deadline = clock_mono_ms() + wait_ms;
  ops->hold(client, w, free); /* before the waiter is visible to anyone who could resume it */
  w->next = b->head;
  if (b->head) b->head->prev = w;
  b->head = w;
  if (b->st && b->wake_gen != gen) b->kick = 1; /* a round opened while the table was read */
  pthread_cond_signal(&b->timer_cv);
  pthread_mutex_unlock(&b->mu);
  return 1;
}

void tasks_shutdown(struct task_board *b) {
  struct twaiter *done = NULL, *w;
  pthread_mutex_lock(&b->mu);
  b->closed = 1;
  while ((w = b->head) != NULL) {
    waiter_unlink(b, w);
    w->ops->reply(w->client, 304, NULL);
    w->next = done;
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
  struct twaiter *done = NULL, *w, *next;
  pthread_mutex_lock(&b->mu);
  for (w = b->head; w; w = next) {
    next = w->next;
    if (w->node_id != node_id) continue;
    waiter_unlink(b, w);
    w->ops->error(w->client, 401, "unauthorized", "unknown or revoked token");
    w->next = done;
    done = w;
  }
  pthread_mutex_unlock(&b->mu);
  resume_all(done);
}
