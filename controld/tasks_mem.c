/* tasks_mem — the task board's rounds, tasks and votes in this process's memory (one controld on
   SQLite): the home behind struct tasks_ops (tasks_core.h) when the board has no store. Deadlines
   are this host's wall clock. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "tasks_core.h"

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

struct mem_home {
  struct task_board base;
  struct round *rounds; /* under base.mu */
};

static struct round **rounds_of(struct task_board *b) {
  return &((struct mem_home *)b)->rounds;
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
  for (struct round *rd = *rounds_of(b); rd; rd = rd->next)
    if (rd->id == id) return rd;
  return NULL;
}

static struct assign *assign_find(struct round *rd, int64_t node_id) {
  for (int i = 0; i < rd->n_assign; i++)
    if (rd->a[i].node_id == node_id) return &rd->a[i];
  return NULL;
}

/* Index of task_id in a, or -1. */
static int task_index(const struct assign *a, int64_t task_id) {
  for (int i = 0; i < a->n; i++)
    if (a->tasks[i].task_id == task_id) return i;
  return -1;
}

/* An open round with undelivered tasks for node_id, or NULL (lock held). */
static struct assign *pending_for(struct task_board *b, int64_t node_id, int64_t now,
                                  struct round **rd_out) {
  for (struct round *rd = *rounds_of(b); rd; rd = rd->next) {
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

static int mem_round_open(struct task_board *b, int64_t round_id, int64_t deadline_wall_ms,
                          int n_nodes, const int64_t *node_ids,
                          const struct task_spec *const *tasks, const int *n_tasks) {
  struct round *rd = calloc(1, sizeof *rd);
  if (!rd) return -1;
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
  rd->next = *rounds_of(b);
  *rounds_of(b) = rd;
  tasks_kick(b); /* the nodes waiting for their tasks get them */
  pthread_mutex_unlock(&b->mu);
  return 0;
fail:
  round_free(rd);
  return -1;
}

static int64_t mem_wait_left(struct task_board *b, int64_t round_id) {
  struct round *rd;
  int64_t left = 0;
  pthread_mutex_lock(&b->mu);
  rd = round_find(b, round_id);
  if (rd && rd->received < rd->expected) left = rd->deadline - clock_wall_ms();
  pthread_mutex_unlock(&b->mu);
  return left;
}

static int mem_round_close(struct task_board *b, int64_t round_id, struct task_vote **votes,
                           int *n) {
  struct round **pp, *rd = NULL;
  pthread_mutex_lock(&b->mu);
  for (pp = rounds_of(b); *pp; pp = &(*pp)->next)
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

static enum tasks_vote_rc mem_vote(struct task_board *b, int64_t node_id, int64_t round_id,
                                   const struct task_vote *v, int n, int64_t now, int *bad) {
  enum tasks_vote_rc rc = TASKS_VOTE_OK;
  struct round *rd;
  struct assign *a;
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
  tasks_votes_in(b);
out:
  pthread_mutex_unlock(&b->mu);
  return rc;
}

static int mem_pending_nodes(struct task_board *b, int64_t **ids, int *n) {
  int64_t now = clock_wall_ms(), *out = NULL;
  int cnt = 0, cap = 0, rc = 0;
  pthread_mutex_lock(&b->mu);
  for (struct round *rd = *rounds_of(b); rd && rc == 0; rd = rd->next) {
    if (rd->deadline <= now) continue;
    for (int i = 0; i < rd->n_assign; i++) {
      const struct assign *a = &rd->a[i];
      if (a->delivered || a->n <= 0) continue;
      if (cnt == cap) {
        int64_t *g = realloc(out, (size_t)(cap ? cap * 2 : 8) * sizeof *out);
        if (!g) {
          rc = -1;
          break;
        }
        out = g;
        cap = cap ? cap * 2 : 8;
      }
      out[cnt++] = a->node_id;
    }
  }
  pthread_mutex_unlock(&b->mu);
  if (rc < 0) {
    free(out);
    out = NULL;
    cnt = 0;
  }
  *ids = out;
  *n = cnt;
  return rc;
}

static int mem_take(struct task_board *b, const struct tasks_client_ops *ops, void *client,
                    int64_t node_id) {
  struct round *rd = NULL;
  struct assign *a;
  int64_t now = clock_wall_ms();
  pthread_mutex_lock(&b->mu);
  a = pending_for(b, node_id, now, &rd);
  if (a) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < a->n; i++)
      cJSON_AddItemToArray(arr, tasks_spec_json(&a->tasks[i]));
    a->delivered = 1;
    tasks_reply(ops, client, rd->id, rd->deadline - now, arr);
  }
  pthread_mutex_unlock(&b->mu);
  return a != NULL;
}

static int mem_abort_older(struct task_board *b, int64_t epoch) {
  (void)b;
  (void)epoch;
  return 0; /* one process: no other engine left rounds open */
}

static int64_t mem_next_round_id(struct task_board *b) {
  (void)b;
  return 1; /* rounds start afresh with the process */
}

static void mem_clear(struct task_board *b) {
  struct round **head = rounds_of(b);
  while (*head) {
    struct round *rd = *head;
    *head = rd->next;
    round_free(rd);
  }
}

static const struct tasks_ops mem_ops = {
    .recheck_ms = 0,
    .round_open = mem_round_open,
    .wait_left = mem_wait_left,
    .round_close = mem_round_close,
    .vote = mem_vote,
    .pending_nodes = mem_pending_nodes,
    .take = mem_take,
    .abort_older = mem_abort_older,
    .next_round_id = mem_next_round_id,
    .clear = mem_clear,
};

struct task_board *tasks_mem_alloc(void) {
  struct mem_home *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->base.ops = &mem_ops;
  return &m->base;
}
