/* api_op — one transaction per API write (see api_op.h). */
#include "api_op.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "api_audit.h"
#include "ctx.h"
#include "engine.h"
#include "http.h"
#include "log.h"

/* Fault injection for the integration tests (CDNCA_TEST_FAULT): "crash_after_change" exits at
   once between the change and its re-evaluation (what kill -9 at that moment does);
   "fail_reevaluate" makes the re-evaluation fail. Unset in production: no effect. */
static int test_fault(const char *name) {
  const char *f = getenv("CDNCA_TEST_FAULT");
  return f && strcmp(f, name) == 0;
}

/* The store_op body: every step of def inside the one transaction. */
static enum store_rc run_locked(struct store *st, void *arg) {
  struct api_op *op = arg;
  const struct api_op_def *def = op->def;
  enum store_rc rc;
  (void)st;
  rc = def->change(op);
  if (rc != STORE_OK) return rc;
  if (test_fault("crash_after_change")) _exit(70);
  /* the re-evaluation is part of the change: a failure here undoes the change too */
  if (op->site_id > 0 &&
      (test_fault("fail_reevaluate") || engine_site_changed_locked(op->ctx, op->site_id) < 0)) {
    log_error("site %lld: level re-evaluation failed; %s change rolled back",
              (long long)op->site_id, def->what);
    return STORE_ERROR;
  }
  if (def->answer) {
    rc = def->answer(op);
    if (rc != STORE_OK) return rc;
  }
  /* the record of an accepted write commits with it, or neither does */
  if (api_audit_locked(op->r, op->status) < 0) return STORE_ERROR;
  return STORE_OK;
}

int api_op_run(struct req *r, const struct api_op_def *def, void *arg) {
  struct api_op op = {.def = def, .r = r, .ctx = r->ctx, .arg = arg, .site_id = 0, .status = 0};
  enum store_rc rc = store_op(r->ctx->store, run_locked, &op);
  if (rc == STORE_OK) return 0;
  /* a step that refused set its own error reply; otherwise (no reply, or a success reply set
     inside the transaction that then failed to commit) the answer comes from the code */
  if (!r->done || r->status < 400) api_store_error(r, rc, def->what, NULL);
  return -1;
}
