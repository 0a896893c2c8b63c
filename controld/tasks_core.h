/* tasks_core — the task board's core (tasks_core.c) and the two homes of its rounds behind one ops
   table, the way db_driver.h puts the database drivers behind db.h: tasks_mem.c keeps rounds, tasks
   and votes in this process's memory; tasks_db.c keeps them in the database (store_tasks.h, cluster
   mode). tasks_new picks the home once; no function of the board asks which one it has.

   The core owns everything about waiting: the node polls held unanswered (the waiter list), the
   timer thread that answers them at their wait_ms, the kick that makes it hand out tasks, the
   engine's wait for votes and its deadline. A home only stores and answers. A home's board
   struct begins with `struct task_board`, so the core reaches the ops and the home casts back:

     struct mem_home { struct task_board base; struct round *rounds; };

   Lock rules: b->mu guards the core's fields and whatever state a home keeps in its board struct.
   Ops are called without b->mu (a home takes it for its own fields); a home calls tasks_kick and
   tasks_votes_in with b->mu held. */
#ifndef CDNCA_TASKS_CORE_H
#define CDNCA_TASKS_CORE_H

#include <pthread.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "dlist.h"
#include "idmap.h"
#include "tasks.h"

struct hcheck_opts;
struct store;
struct twaiter;

/* One home of the board's rounds. Every entry is set. */
struct tasks_ops {
  /* Held polls re-read the home at least this often (ms) besides every kick; 0: only on a kick
     (every new round is a tasks_round_open of this process, which kicks). */
  int64_t recheck_ms;
  /* tasks_round_open after its argument check; the home kicks (tasks_kick) once the round is
     stored, so the timer thread hands its tasks to the held polls. 0 or -1. */
  int (*round_open)(struct task_board *b, int64_t round_id, int64_t deadline_wall_ms, int n_nodes,
                    const int64_t *node_ids, const struct task_spec *const *tasks,
                    const int *n_tasks);
  /* Milliseconds the engine's wait for round_id still has (> 0), or <= 0 when the wait is over:
     every expected vote is in, the round is unknown, or its deadline passed. */
  int64_t (*wait_left)(struct task_board *b, int64_t round_id);
  /* tasks_round_close (*votes and *n are NULL and 0 when called). 0 or -1. */
  int (*round_close)(struct task_board *b, int64_t round_id, struct task_vote **votes, int *n);
  /* tasks_vote; a home whose votes arrive here (not through a notification) calls
     tasks_votes_in. */
  enum tasks_vote_rc (*vote)(struct task_board *b, int64_t node_id, int64_t round_id,
                             const struct task_vote *v, int n, int64_t now, int *bad);
  /* Node ids with tasks not yet handed out in an open round: *ids malloc'd (caller frees; NULL
     when none). 0 or -1. */
  int (*pending_nodes)(struct task_board *b, int64_t **ids, int *n);
  /* Hand node_id's undelivered tasks of an open round to the client (ops->reply, marking them
     delivered): 1 answered, 0 none, -1 error (the client was not answered). */
  int (*take)(struct task_board *b, const struct tasks_client_ops *ops, void *client,
              int64_t node_id);
  /* tasks_abort_older and tasks_next_round_id. */
  int (*abort_older)(struct task_board *b, int64_t epoch);
  int64_t (*next_round_id)(struct task_board *b);
  /* Free what the home keeps in its board struct (not the struct: tasks_free frees it). */
  void (*clear)(struct task_board *b);
};

struct task_board {
  const struct tasks_ops *ops;
  pthread_mutex_t mu;
  pthread_cond_t votes_cv; /* a vote arrived */
  pthread_cond_t timer_cv; /* a waiter was added, a kick, or stop */
  pthread_cond_t idle_cv;  /* the timer thread finished a hand-out */
  pthread_t thr;
  int thr_started, stop, closed;
  struct dl_list waiting; /* the held polls (struct twaiter), the earliest deadline first */
  struct idmap held;      /* node id -> its held poll (one per node) */
  int kick;               /* the timer thread hands out tasks to the held polls */
  int handing;            /* the timer thread holds waiters off the list (hand_out) */
  uint64_t wake_gen;      /* bumped by every kick */
  uint64_t votes_gen;     /* bumped by every vote arrival */
  int64_t next_check;     /* monotonic ms of the next re-read while polls wait */
};

/* The homes: a zeroed board struct with base.ops set (calloc'd; NULL on OOM). tasks_new starts
   it. */
struct task_board *tasks_mem_alloc(void);
struct task_board *tasks_db_alloc(struct store *st);

/* With b->mu held: new tasks may be waiting for the held polls (a round opened here or on another
   replica); the timer thread hands them out. */
void tasks_kick(struct task_board *b);

/* With b->mu held: votes arrived; the engine's wait looks again. */
void tasks_votes_in(struct task_board *b);

/* Add a task's "check" to the task object t: the probe options, the defaults when NULL. */
void tasks_add_check(cJSON *t, const struct hcheck_opts *check);

/* Answer the client 200 {"round_id", "deadline_ms", "tasks": tasks} (tasks taken; NULL, out of
   memory: 500). */
void tasks_reply(const struct tasks_client_ops *ops, void *client, int64_t round_id,
                 int64_t deadline_ms, cJSON *tasks);

#endif
