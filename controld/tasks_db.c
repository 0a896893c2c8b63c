/* tasks_db — the task board's rounds, tasks and votes in the database (cluster mode,
   store_tasks.h): the home behind struct tasks_ops (tasks_core.h) when the board has a store. Any
   replica hands out tasks and takes votes; deadlines are the database's clock. The board is
   kicked by cdnca_tasks notifications (tasks_signal) and by this process's round opens, and held
   polls re-read the table at least every TASKS_DB_RECHECK_MS. */
#include <pthread.h>
#include <stdlib.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "store_tasks.h"
#include "tasks_core.h"

/* A round this process opened in the table, for the engine's wait. */
struct dbround {
  int64_t id;
  int expected;
  int64_t deadline; /* monotonic ms */
  struct dbround *next;
};

struct db_home {
  struct task_board base;
  struct store *st;
  struct dbround *rounds; /* under base.mu */
  int64_t next_prune;     /* monotonic ms of the next prune of old rounds (engine; under base.mu) */
};

static struct db_home *home_of(struct task_board *b) {
  return (struct db_home *)b;
}

static struct dbround *dbround_find(struct db_home *home, int64_t id) {
  for (struct dbround *r = home->rounds; r; r = r->next)
    if (r->id == id) return r;
  return NULL;
}

/* The tasks taken from the table as the answer's "tasks" array; NULL on OOM. */
static cJSON *tasks_array(const struct store_task *t, int n) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; arr && i < n; i++) {
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
      tasks_add_check(o, NULL);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

static int db_take(struct task_board *b, const struct tasks_client_ops *ops, void *client,
                   int64_t node_id) {
  struct store_task *t = NULL;
  int64_t round_id = 0, left = 0;
  int n = 0, rc = store_tasks_take(home_of(b)->st, node_id, &round_id, &left, &t, &n);
  if (rc == 1) tasks_reply(ops, client, round_id, left, tasks_array(t, n));
  store_tasks_free(t, n);
  return rc;
}

static int db_pending_nodes(struct task_board *b, int64_t **ids, int *n) {
  return store_tasks_pending_nodes(home_of(b)->st, ids, n);
}

/* The round is stored with deadline = the database's now + (deadline_wall_ms - this host's now). */
static int db_round_open(struct task_board *b, int64_t round_id, int64_t deadline_wall_ms,
                         int n_nodes, const int64_t *node_ids, const struct task_spec *const *tasks,
                         const int *n_tasks) {
  struct db_home *home = home_of(b);
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
  src = store_tasks_round_open(home->st, round_id, in_ms, json);
  if (src != STORE_OK) {
    log_error("probe round %lld: %s", (long long)round_id,
              src == STORE_CONFLICT ? "the round id is taken in the task table"
                                    : "the tasks could not be stored");
    goto out;
  }
  pthread_mutex_lock(&b->mu);
  d->next = home->rounds;
  home->rounds = d;
  d = NULL;
  tasks_kick(b); /* this replica's waiters need not wait for the notification to come back */
  pthread_mutex_unlock(&b->mu);
  rc = 0;
out:
  free(d);
  free(json);
  cJSON_Delete(arr);
  return rc;
}

/* Counts the round's votes in the table (cdnca_votes notifications wake the wait). */
static int64_t db_wait_left(struct task_board *b, int64_t round_id) {
  struct db_home *home = home_of(b);
  struct dbround *d;
  int64_t expected, deadline;
  pthread_mutex_lock(&b->mu);
  d = dbround_find(home, round_id);
  if (!d) {
    pthread_mutex_unlock(&b->mu);
    return 0;
  }
  expected = d->expected;
  deadline = d->deadline;
  pthread_mutex_unlock(&b->mu);
  if (store_tasks_vote_count(home->st, round_id) >= expected) return 0;
  return deadline - clock_mono_ms();
}

/* Closes the round in the table, then (at most every TASKS_PRUNE_EVERY_MS) the rounds older than
   the keep time go. */
static int db_round_close(struct task_board *b, int64_t round_id, struct task_vote **votes,
                          int *n) {
  struct db_home *home = home_of(b);
  struct dbround **pp, *d = NULL;
  int prune = 0, rc;
  int64_t now = clock_mono_ms();
  pthread_mutex_lock(&b->mu);
  for (pp = &home->rounds; *pp; pp = &(*pp)->next)
    if ((*pp)->id == round_id) {
      d = *pp;
      *pp = d->next;
      break;
    }
  if (now >= home->next_prune) {
    prune = 1;
    home->next_prune = now + TASKS_PRUNE_EVERY_MS;
  }
  pthread_mutex_unlock(&b->mu);
  free(d);
  rc = store_tasks_round_close(home->st, round_id, votes, n);
  if (prune && store_tasks_prune(home->st, STORE_TASKS_KEEP_MS) < 0)
    log_warn("could not prune old probe rounds; retrying later");
  return rc;
}

/* Votes are timed by the database's clock, not now; the engine hears of them through
   cdnca_votes. */
static enum tasks_vote_rc db_vote(struct task_board *b, int64_t node_id, int64_t round_id,
                                  const struct task_vote *v, int n, int64_t now, int *bad) {
  (void)now;
  return store_tasks_vote(home_of(b)->st, node_id, round_id, v, n, bad);
}

static int db_abort_older(struct task_board *b, int64_t epoch) {
  int n = store_tasks_abort_older(home_of(b)->st, epoch);
  if (n > 0)
    log_info("engine epoch %lld: %d probe round(s) of older epochs aborted", (long long)epoch, n);
  return n;
}

static int64_t db_next_round_id(struct task_board *b) {
  return store_tasks_next_round_id(home_of(b)->st);
}

static void db_clear(struct task_board *b) {
  struct db_home *home = home_of(b);
  while (home->rounds) {
    struct dbround *d = home->rounds;
    home->rounds = d->next;
    free(d);
  }
}

static const struct tasks_ops db_ops = {
    .recheck_ms = TASKS_DB_RECHECK_MS,
    .round_open = db_round_open,
    .wait_left = db_wait_left,
    .round_close = db_round_close,
    .vote = db_vote,
    .pending_nodes = db_pending_nodes,
    .take = db_take,
    .abort_older = db_abort_older,
    .next_round_id = db_next_round_id,
    .clear = db_clear,
};

struct task_board *tasks_db_alloc(struct store *st) {
  struct db_home *home = calloc(1, sizeof *home);
  if (!home) return NULL;
  home->base.ops = &db_ops;
  home->st = st;
  return &home->base;
}
