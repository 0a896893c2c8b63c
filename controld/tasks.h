/* tasks — the board of probe tasks handed to nodes each round and the votes they send back
 * (thread-safe). */
#ifndef CDNCA_TASKS_H
#define CDNCA_TASKS_H

#include <stdatomic.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct ctx;
struct hcheck_opts;
struct task_board;

/* One probe for one node: GET url with Host/SNI = host, within timeout_ms. */
struct task_spec {
  int64_t task_id; /* unique within the round */
  int64_t origin_id;
  char url[600];  /* scheme://address:port/path (IPv6 in brackets) */
  char host[256]; /* Host header, SNI and certificate name */
  int timeout_ms;
  const struct hcheck_opts *check; /* the site's options, sent as "check"; NULL = defaults.
                                      Borrowed: must live until tasks_round_close */
};

/* One node's answer to one task. */
struct task_vote {
  int64_t node_id;
  int64_t task_id;
  int ok;
  int status;      /* 0 when no response */
  char error[128]; /* "" when ok */
  int latency_ms;
};

/* One task as GET /v1/node/tasks lists it: {"task_id", "origin_id", "url", "host", "timeout_ms",
   "check": the probe options}. Caller cJSON_Delete's it; NULL on OOM. */
cJSON *tasks_spec_json(const struct task_spec *t);

/* New empty board; NULL on OOM. */
struct task_board *tasks_new(void);

/* Free the board (after every waiter was resumed). NULLs *b. */
void tasks_free(struct task_board **b);

/* Open a round: node node_ids[i] gets the n_tasks[i] tasks in tasks[i] (copied), to answer by
   deadline_wall_ms. Nodes long-polling GET /v1/node/tasks are woken at once. 0 or -1. */
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

struct req;

enum tasks_vote_rc {
  TASKS_VOTE_OK = 0,        /* recorded (repeats of a vote already counted are ignored) */
  TASKS_VOTE_LATE = 1,      /* unknown or closed round, or past its deadline: 409, nothing kept */
  TASKS_VOTE_NOT_YOURS = 2, /* a task_id not handed to this node in the round: nothing kept */
};

/* GET /v1/node/tasks for node r->node_id: hands out at once the node's tasks of an open round it
   has not received yet, else suspends r until a round for it opens or wait_ms passes (then 304).
   The reply's deadline_ms is relative: milliseconds left until the round's deadline.
   Returns an enum http_rc (HTTP_DONE or HTTP_SUSPENDED). */
int tasks_poll(struct task_board *b, struct req *r, int64_t wait_ms);

/* Record node_id's votes v[0..n) for round_id at wall ms now, all or nothing (v[i].node_id is
   set from node_id). On TASKS_VOTE_NOT_YOURS *bad (may be NULL) is the offending index. */
enum tasks_vote_rc tasks_vote(struct task_board *b, int64_t node_id, int64_t round_id,
                              const struct task_vote *v, int n, int64_t now, int *bad);

/* Answer node_id's suspended task polls with 401 at once (its token was revoked). */
void tasks_node_revoked(struct task_board *b, int64_t node_id);

/* Answer every suspended task poll with 304 and answer later polls at once (before http_stop). */
void tasks_shutdown(struct task_board *b);

#endif
