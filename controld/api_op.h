/* api_op — every /v1 write is one store transaction (docs/design.md#one-transaction-per-write): the
   change, the level re-evaluation of the site it touched, the publication, the events and the
   answer commit together or not at all. Also the preconditions of
   docs/design.md#safe-concurrent-edits: If-Match against a site's revision (412) and
   Idempotency-Key on POST (the first answer replayed for 24 h). */
#ifndef CDNCA_API_OP_H
#define CDNCA_API_OP_H

#include <stdint.h>

#include "store.h"

struct req;
struct ctx;
struct api_op_def;

/* Longest Idempotency-Key accepted (printable ASCII, no spaces). */
#define API_OP_IDEM_KEY_MAX 128

/* One API write in progress. */
struct store_tx;

struct api_op {
  const struct api_op_def *def;
  struct req *r; /* the request: steps set its reply with req_json / req_error */
  struct ctx *ctx;
  struct store_tx *tx; /* the write transaction the steps run in */
  void *arg;           /* the route's own state */
  int64_t site_id;     /* set by the change step: this site's levels are re-evaluated in the same
                          transaction before the answer step (0 = no site to re-evaluate) */
  int status;          /* a step of a route that answers after the commit sets its success status
                          here, for the audit record written in the transaction (0: the reply set
                          inside, else 201/204/200 by method) */
  /* the site as stored after the re-evaluation, when it could be kept (api_op_site_after) */
  struct site_rec after;
  int has_after;
  /* private to api_op.c */
  char idem_key[API_OP_IDEM_KEY_MAX + 32]; /* "<token id>:<key>": keys are per token ("" = none) */
  char idem_hash[65];
  int if_match_checked; /* the change step compared If-Match (api_op_if_match) */
};

/* A step inside the write transaction. STORE_OK goes on; anything else rolls the whole operation
   back (the step sets the error reply; when it set none, api_op_run answers from the code). */
typedef enum store_rc (*api_op_step)(struct api_op *op);

/* What one route does, as steps. */
struct api_op_def {
  const char *what;   /* the resource named in generic error replies ("site", "origin") */
  api_op_step change; /* the write (required) */
  api_op_step answer; /* after the re-evaluation: sets the success reply from the writer's view
                         (NULL: change set it) */
  const char *secret; /* a top-level answer member never stored for an Idempotency-Key replay
                         (it is replayed as null), e.g. a node's token; NULL = none */
};

/* For an answer step: move the site re-evaluated in this operation into *out (the caller releases
   it) when it is known to be what is stored now; 0 when it is not (read it: store_site_get_locked),
   1 when *out is set. */
int api_op_site_after(struct api_op *op, struct site_rec *out);

/* Run def for r as one transaction: [Idempotency-Key lookup], change, re-evaluation of
   op->site_id, answer, the audit record (api_audit.h), [the answer stored under the key], commit.
   0 when committed, 1 when the answer is a replay of the first one for the same Idempotency-Key
   (nothing done, nothing audited), -1 when nothing was written (an error reply is set on r). */
int api_op_run(struct req *r, const struct api_op_def *def, void *arg);

/* For a change step: compare the request's If-Match header with revision (a site's; origin
   routes use their site's). STORE_OK when absent, "*" or a listed "<revision>"; otherwise a 412
   precondition_failed reply and STORE_CONFLICT. A write whose change step never calls this cannot
   honour If-Match: when the request carries one, api_op_run answers 400 if_match_not_supported and
   rolls the write back (docs/design.md#safe-concurrent-edits). */
enum store_rc api_op_if_match(struct api_op *op, int64_t revision);

/* Pure: the hash an Idempotency-Key stands for: hex SHA-256 of method, path, the query
   parameters in order as "name=value&" and the body, into out[65]. */
void api_op_request_hash(const char *method, const char *path, const char *query, const void *body,
                         size_t body_len, char out[65]);

/* Pure: 1 when the If-Match header value matches revision ("*", or a comma list of strong
   entity tags one of which is "<revision>"), else 0. */
int api_op_etag_matches(const char *if_match, int64_t revision);

/* A test seam (controld --test-fault; like proxy_state_set_resolver in noded): a fault every
   later write operation meets. CRASH_AFTER_CHANGE exits the process (status 70) between the change
   and its re-evaluation, as kill -9 at that moment would; FAIL_REEVALUATE makes the re-evaluation
   fail. NONE, the default, has no effect. */
enum api_op_fault {
  API_OP_FAULT_NONE = 0,
  API_OP_FAULT_CRASH_AFTER_CHANGE = 1,
  API_OP_FAULT_FAIL_REEVALUATE = 2,
};
void api_op_set_fault(enum api_op_fault f);

#endif
