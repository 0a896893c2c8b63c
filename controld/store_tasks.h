/* store_tasks — the probe task board in tables (cluster mode; docs/design.md#probe-tasks-and-votes,
   schema 0009): probe_round_open, probe_tasks, probe_votes.

   Every time is decided by the DATABASE clock (PostgreSQL clock_timestamp(), SQLite's 'now'), in
   ms since the epoch: a round's deadline_at is stored as the database's now + a duration, a node
   is told the milliseconds left against the database's now, and a vote is taken only while
   `state = 'open' AND deadline_at > now` holds for the round row, read FOR SHARE (PostgreSQL) in
   the vote's transaction. The leader's close (`UPDATE … SET state = 'closed'`) therefore
   serializes with vote inserts: a vote either committed before the close (and is tallied) or
   finds the round closed (409).

   The engine's writes (open, close, abort, prune) are fenced engine transactions (store_lease.h):
   a replica that lost the lease writes nothing. Votes and task hand-outs are unordered writes of
   any replica. Each write that others wait for sends its notification inside its transaction:
   cdnca_tasks '<round>' when a round opens, cdnca_votes '<round>' when votes are recorded. */
#ifndef CDNCA_STORE_TASKS_H
#define CDNCA_STORE_TASKS_H

#include <stdint.h>

#include "store.h"
#include "task.h"

/* How long closed, aborted or forgotten rounds are kept (past their deadline). */
#define STORE_TASKS_KEEP_MS 3600000

/* One task as handed out (store_tasks_take). */
struct store_task {
  int64_t task_id, origin_id;
  char url[600];
  char host[256];
  int timeout_ms;
  char *check; /* the JSON object of the probe options (malloc'd) */
};

void store_tasks_free(struct store_task *t, int n);

/* Open round_id for deadline_in_ms from the database's now, with the tasks in tasks_json: a JSON
   array of {"node_id", "task_id", "origin_id", "url", "host", "timeout_ms", "check": {…}} (one
   INSERT for all of them), stamped with the fence's epoch (0 without one); NOTIFY cdnca_tasks.
   A fenced engine transaction. STORE_OK, STORE_CONFLICT (round_id exists), STORE_ERROR (also
   fenced). */
enum store_rc store_tasks_round_open(struct store *st, int64_t round_id, int64_t deadline_in_ms,
                                     const char *tasks_json);

/* The lowest round id that is free in probe_round_open (MAX + 1, 1 when empty); -1 on error. */
int64_t store_tasks_next_round_id(struct store *st);

/* Node ids with tasks not yet handed out in an open round before its deadline: *ids malloc'd
   (caller frees; NULL when none), *n set. 0 or -1. */
int store_tasks_pending_nodes(struct store *st, int64_t **ids, int *n);

/* Hand node_id its undelivered tasks of the oldest open round before its deadline, marking them
   delivered: 1 with *round_id, *deadline_ms (left by the database clock, > 0) and *tasks (n of
   them, by task_id; free with store_tasks_free) set, 0 when there are none, -1 on error. */
int store_tasks_take(struct store *st, int64_t node_id, int64_t *round_id, int64_t *deadline_ms,
                     struct store_task **tasks, int *n);

/* Record node_id's votes v[0..n) for round_id, all or nothing, under the open round's row lock:
   TASKS_VOTE_LATE when the round is not open (unknown, closed, aborted) or its deadline passed
   by the database clock; TASKS_VOTE_NOT_YOURS (*bad = index) for a task_id not given to node_id
   in the round; TASKS_VOTE_OK (repeats of a recorded vote are ignored; NOTIFY cdnca_votes);
   TASKS_VOTE_ERROR on a database failure. */
enum tasks_vote_rc store_tasks_vote(struct store *st, int64_t node_id, int64_t round_id,
                                    const struct task_vote *v, int n, int *bad);

/* Votes recorded for round_id; -1 on error. */
int64_t store_tasks_vote_count(struct store *st, int64_t round_id);

/* Close round_id (state 'closed', only from 'open') and read every vote recorded for it into
   *votes (malloc'd, caller frees; by node, task). A fenced engine transaction. 0, or -1 (the
   round is not open: aborted by a newer epoch; fenced; database error). */
int store_tasks_round_close(struct store *st, int64_t round_id, struct task_vote **votes, int *n);

/* On gaining the lease with epoch: every round still open from an older epoch is aborted (votes
   to it are 409 from now on). A fenced engine transaction. The number aborted, or -1. */
int store_tasks_abort_older(struct store *st, int64_t epoch);

/* The state of round_id ("open", "closed", "aborted") into out (cap bytes): 1, 0 when there is
   no such round, -1 on error. */
int store_tasks_round_state(struct store *st, int64_t round_id, char *out, int cap);

/* Remove rounds (with their tasks and votes) whose deadline is more than keep_ms ago by the
   database clock. A fenced engine transaction. Rounds removed, or -1. */
int store_tasks_prune(struct store *st, int64_t keep_ms);

#endif
