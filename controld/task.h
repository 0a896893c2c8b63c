/* task — the records of the probe task board: one probe handed to one node, and one node's vote
   on it. No SQL, no JSON. */
#ifndef CDNCA_TASK_H
#define CDNCA_TASK_H

#include <stdint.h>

struct hcheck_opts;

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

/* What became of a node's votes. */
enum tasks_vote_rc {
  TASKS_VOTE_OK = 0,        /* recorded (repeats of a vote already counted are ignored) */
  TASKS_VOTE_LATE = 1,      /* unknown or closed round, or past its deadline: 409, nothing kept */
  TASKS_VOTE_NOT_YOURS = 2, /* a task_id not handed to this node in the round: nothing kept */
  TASKS_VOTE_ERROR = 3,     /* cluster mode: the database failed; nothing kept (503) */
};

#endif
