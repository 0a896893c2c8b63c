/* tasks — the board of probe tasks handed to nodes each round and the votes they send back
   (thread-safe).

   Two homes for the board, one contract, picked when the board is made (tasks_new; the homes sit
   behind an ops table, tasks_core.h). With SQLite (one process) rounds, tasks and votes live in
   this process's memory. In cluster mode they live in the database (store_tasks.h), so a node
   may poll tasks and post votes on any replica: the engine's
   tasks_round_open inserts the round and NOTIFYs cdnca_tasks; every replica's suspended task polls
   re-read the table when a cdnca_tasks notification arrives (tasks_signal) and at least every
   TASKS_DB_RECHECK_MS; votes are inserted under the open round's row lock and 409 once the round
   is closed, aborted or past its deadline by the DATABASE clock; the engine waits for votes on
   cdnca_votes notifications or TASKS_TICK_MS polls of the vote count. */
#ifndef CDNCA_TASKS_H
#define CDNCA_TASKS_H

#include <stdatomic.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "sigmsg.h"
#include "task.h"

struct ctx;
struct hcheck_opts;
struct task_board;
struct store;

/* The engine's vote wait looks again at least this often (ms). */
#define TASKS_TICK_MS 100
/* Cluster mode: suspended task polls re-read the table at least this often (ms), so a missed
   notification delays tasks by at most this much. */
#define TASKS_DB_RECHECK_MS 1000
/* Cluster mode: old rounds are pruned at most this often (ms) by the engine. */
#define TASKS_PRUNE_EVERY_MS 60000

/* One task as GET /v1/node/tasks lists it: {"task_id", "origin_id", "url", "host", "timeout_ms",
   "check": the probe options}. Caller cJSON_Delete's it; NULL on OOM. */
cJSON *tasks_spec_json(const struct task_spec *t);

/* New empty board: in memory when st is NULL, else (cluster mode) in st's tables (st must
   outlive the board). NULL on OOM. */
struct task_board *tasks_new(struct store *st);

/* A signal_fn (signals.h) for SIGNAL_TASKS, SIGNAL_VOTES and SIGNAL_INVAL, arg = the board: a
   cdnca_tasks notification makes suspended polls re-read the table, a cdnca_votes one wakes the
   engine's vote wait, payload NULL (a resync) does both; a cdnca_inval "node:<id>" answers that
   node's suspended polls 401 (tasks_node_revoked). Returns at once. */
void tasks_signal(void *arg, enum signal_kind kind, const char *payload);

/* Cluster mode, on gaining the lease with epoch: rounds still open from older epochs are aborted
   (votes to them are 409). The number aborted, or -1; 0 in memory. */
int tasks_abort_older(struct task_board *b, int64_t epoch);

/* The lowest round id the board has not used (cluster mode: MAX(round_id) + 1 of the table, so a
   new engine does not reuse an aborted round's id); 1 in memory, -1 on error. */
int64_t tasks_next_round_id(struct task_board *b);

/* Free the board (after every waiter was resumed). NULLs *b. */
void tasks_free(struct task_board **b);

/* Open a round: node node_ids[i] gets the n_tasks[i] tasks in tasks[i] (copied), to answer by
   deadline_wall_ms. Nodes long-polling GET /v1/node/tasks are woken at once. Cluster mode: the
   round is stored with deadline = the database's now + (deadline_wall_ms - this host's now), in
   one fenced engine transaction. 0 or -1 (cluster mode: also when fenced or the id is taken). */
int tasks_round_open(struct task_board *b, int64_t round_id, int64_t deadline_wall_ms, int n_nodes,
                     const int64_t *node_ids, const struct task_spec *const *tasks,
                     const int *n_tasks);

/* Block until every expected vote of the round arrived or deadline_wall_ms passed (or stop is set).
 */
void tasks_round_wait(struct task_board *b, int64_t round_id, atomic_int *stop);

/* Close the round: *votes (malloc'd, caller frees) gets every vote received in time; later votes
 * are refused (409). 0 or -1. */
int tasks_round_close(struct task_board *b, int64_t round_id, struct task_vote **votes, int *n);

/* ---- the node side of the board (GET /v1/node/tasks, POST /v1/node/votes) ---- */

/* How the board answers a node's task poll: the API layer's, over its request (the client). */
struct tasks_client_ops {
  /* Answer with status and body (taken; NULL = no body). */
  void (*reply)(void *client, unsigned status, cJSON *body);
  /* Answer with an error {"error": {code, message}}. */
  void (*error)(void *client, unsigned status, const char *code, const char *message);
  /* Hold the client unanswered; waiter is the board's, freed with free_waiter when the client
     completes. */
  void (*hold)(void *client, void *waiter, void (*free_waiter)(void *));
  /* A held client was answered (from any thread): send it. */
  void (*resume)(void *client);
};

/* GET /v1/node/tasks for node_id: hands out at once the node's tasks of an open round it has
   not received yet, else holds the client until a round for it opens or wait_ms passes (then
   304). The answer's deadline_ms is relative: milliseconds left until the round's deadline.
   0 when the client was answered, 1 when it is held. */
int tasks_poll(struct task_board *b, const struct tasks_client_ops *ops, void *client,
               int64_t node_id, int64_t wait_ms);

/* Record node_id's votes v[0..n) for round_id at wall ms now (cluster mode: the database's now),
   all or nothing (v[i].node_id is
   set from node_id). On TASKS_VOTE_NOT_YOURS *bad (may be NULL) is the offending index. */
enum tasks_vote_rc tasks_vote(struct task_board *b, int64_t node_id, int64_t round_id,
                              const struct task_vote *v, int n, int64_t now, int *bad);

/* Answer node_id's suspended task polls with 401 at once (its token was revoked). */
void tasks_node_revoked(struct task_board *b, int64_t node_id);

/* Answer every suspended task poll with 304 and answer later polls at once (before http_stop). */
void tasks_shutdown(struct task_board *b);

#endif
