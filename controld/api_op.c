/* api_op — one transaction per API write (see api_op.h). */
#include "api_op.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "api_audit.h"
#include "clock.h"
#include "ctx.h"
#include "engine.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "store_idem.h"
#include "token.h"

static _Atomic int fault = API_OP_FAULT_NONE; /* the test seam (api_op_set_fault) */

void api_op_set_fault(enum api_op_fault f) {
  atomic_store(&fault, (int)f);
}

static int test_fault(enum api_op_fault f) {
  return atomic_load(&fault) == (int)f;
}

int api_op_etag_matches(const char *if_match, int64_t revision) {
  char want[32];
  size_t wl;
  const char *p = if_match;
  snprintf(want, sizeof want, "\"%lld\"", (long long)revision);
  wl = strlen(want);
  while (*p) {
    const char *end;
    while (*p == ' ' || *p == '\t' || *p == ',')
      p++;
    if (!*p) break;
    end = p;
    while (*end && *end != ',')
      end++;
    {
      const char *e = end;
      while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
      if ((size_t)(e - p) == 1 && *p == '*') return 1;
      /* strong comparison (RFC 9110 §13.1.1): a weak tag W/"n" never matches */
      if ((size_t)(e - p) == wl && memcmp(p, want, wl) == 0) return 1;
    }
    p = end;
  }
  return 0;
}

enum store_rc api_op_if_match(struct api_op *op, int64_t revision) {
  const char *h = req_header(op->r, "If-Match");
  op->if_match_checked = 1;
  if (!h || api_op_etag_matches(h, revision)) return STORE_OK;
  req_error(op->r, 412, "precondition_failed", NULL,
            "If-Match %s does not match the current revision \"%lld\": reload and retry", h,
            (long long)revision);
  req_set_etag(op->r, revision);
  return STORE_CONFLICT;
}

/* Replay the stored answer, or refuse a key reused for another request. STORE_OK with
 *replayed = 1 when replayed, STORE_OK with 0 when the key is new. */
static enum store_rc idem_lookup(struct api_op *op, int *replayed) {
  struct idem_rec rec;
  enum store_rc rc =
      store_idem_get_locked(op->tx, op->idem_key, clock_wall_ms() - STORE_IDEM_KEEP_MS, &rec);
  *replayed = 0;
  if (rc == STORE_NOT_FOUND) return STORE_OK;
  if (rc != STORE_OK) return rc;
  if (strcmp(rec.request_hash, op->idem_hash) != 0) {
    free(rec.body);
    req_error(op->r, 422, "idempotency_key_reused", NULL,
              "this Idempotency-Key was used within 24 h for a different request (method, "
              "path or body): use a new key");
    return STORE_CONFLICT;
  }
  req_raw(op->r, (unsigned)rec.status, rec.body ? "application/json" : NULL, rec.body,
          rec.body ? strlen(rec.body) : 0);
  if (rec.etag[0]) {
    memcpy(op->r->resp_etag, rec.etag, sizeof op->r->resp_etag);
    op->r->resp_etag[sizeof op->r->resp_etag - 1] = '\0';
  }
  req_add_header(op->r, "Idempotent-Replayed", "true");
  *replayed = 1;
  return STORE_OK;
}

/* Store the answer just set under the request's key (the secret member replaced by null). */
static enum store_rc idem_store(struct api_op *op) {
  struct req *r = op->r;
  char *text = NULL;
  enum store_rc rc;
  if (op->def->secret && r->resp_body) {
    cJSON *j = json_parse(r->resp_body, r->resp_len);
    if (!j) return STORE_ERROR;
    if (cJSON_GetObjectItemCaseSensitive(j, op->def->secret))
      cJSON_ReplaceItemInObjectCaseSensitive(j, op->def->secret, cJSON_CreateNull());
    text = json_print(j);
    cJSON_Delete(j);
    if (!text) return STORE_ERROR;
  }
  rc = store_idem_put_locked(op->tx, op->idem_key, op->idem_hash, (int)r->status,
                             text ? text : r->resp_body, r->resp_etag, clock_wall_ms());
  free(text);
  return rc;
}

int api_op_site_after(struct api_op *op, struct site_rec *out) {
  if (!op->has_after) return 0;
  *out = op->after;
  op->has_after = 0;
  return 1;
}

struct run {
  struct api_op op;
  int replayed;
};

/* The store_op body: every step of def inside the one transaction. */
static enum store_rc run_locked(struct store_tx *tx, void *arg) {
  struct run *run = arg;
  struct api_op *op = &run->op;
  const struct api_op_def *def = op->def;
  enum store_rc rc;
  op->tx = tx;
  if (op->idem_key[0]) {
    rc = idem_lookup(op, &run->replayed);
    if (rc != STORE_OK || run->replayed) return rc;
  }
  rc = def->change(op);
  if (rc != STORE_OK) return rc;
  /* docs/design.md#safe-concurrent-edits: If-Match is honoured or refused, never ignored */
  if (!op->if_match_checked && req_header(op->r, "If-Match")) {
    req_error(op->r, 400, "if_match_not_supported", "If-Match",
              "%s %s does not take If-Match (it is honoured on PATCH and DELETE of sites and "
              "origins and on the level switch): send the request without it",
              op->r->method, op->r->route ? op->r->route->pattern : op->r->url);
    return STORE_ERROR;
  }
  if (test_fault(API_OP_FAULT_CRASH_AFTER_CHANGE)) _exit(70);
  /* the re-evaluation is part of the change: a failure here undoes the change too */
  if (op->site_id > 0) {
    int kept =
        test_fault(API_OP_FAULT_FAIL_REEVALUATE)
            ? -1
            : engine_site_changed_keep_locked(op->ctx->engine, op->tx, op->site_id, &op->after);
    if (kept < 0) {
      log_error("site %lld: level re-evaluation failed; %s change rolled back",
                (long long)op->site_id, def->what);
      return STORE_ERROR;
    }
    op->has_after = kept;
  }
  if (def->answer) {
    rc = def->answer(op);
    if (op->has_after) {
      site_rec_fini(&op->after);
      op->has_after = 0;
    }
    if (rc != STORE_OK) return rc;
  } else if (op->has_after) {
    site_rec_fini(&op->after);
    op->has_after = 0;
  }
  /* the record of an accepted write commits with it, or neither does */
  if (api_audit_locked(op->tx, op->r, op->status) < 0) return STORE_ERROR;
  if (op->idem_key[0] && op->r->done && op->r->status < 300) return idem_store(op);
  return STORE_OK;
}

void api_op_request_hash(const char *method, const char *path, const char *query, const void *body,
                         size_t body_len, char out[65]) {
  size_t ml = strlen(method), pl = strlen(path), ql = strlen(query);
  char *buf = malloc(ml + pl + ql + body_len + 3);
  if (!buf) {
    memset(out, '0', 64);
    out[64] = '\0';
    return;
  }
  memcpy(buf, method, ml);
  buf[ml] = '\n';
  memcpy(buf + ml + 1, path, pl);
  memcpy(buf + ml + 1 + pl, query, ql);
  buf[ml + 1 + pl + ql] = '\n';
  if (body_len) memcpy(buf + ml + pl + ql + 2, body, body_len);
  token_sha256_hex(buf, ml + pl + ql + 2 + body_len, out);
  free(buf);
}

/* Read and check the Idempotency-Key of a POST; 0 (op->idem_key set or "") or -1 with a 400.
   docs/design.md#safe-concurrent-edits: a key is the presenting token's (another token's same key
   is another key) and stands for method, path, query and body. */
static int idem_prepare(struct req *r, struct api_op *op) {
  const char *k = req_header(r, "Idempotency-Key");
  char *query;
  size_t n;
  if (!k || strcmp(r->method, "POST") != 0) return 0;
  n = strlen(k);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)k[i] <= 0x20 || (unsigned char)k[i] >= 0x7f) n = 0;
  if (n == 0 || n > API_OP_IDEM_KEY_MAX) {
    req_error(r, 400, "invalid_header", "Idempotency-Key",
              "Idempotency-Key must be 1 to %d printable ASCII characters without spaces",
              API_OP_IDEM_KEY_MAX);
    return -1;
  }
  query = req_query_text(r);
  if (!query) {
    req_error(r, 500, "internal", NULL, "out of memory");
    return -1;
  }
  api_op_request_hash(r->method, r->url, query, r->body.data, r->body.len, op->idem_hash);
  free(query);
  snprintf(op->idem_key, sizeof op->idem_key, "%lld:%s", (long long)r->token_id, k);
  return 0;
}

int api_op_run(struct req *r, const struct api_op_def *def, void *arg) {
  struct run run;
  enum store_rc rc;
  memset(&run, 0, sizeof run);
  run.op.def = def;
  run.op.r = r;
  run.op.ctx = r->ctx;
  run.op.arg = arg;
  if (idem_prepare(r, &run.op) < 0) return -1;
  rc = store_op(r->ctx->store, run_locked, &run);
  if (rc == STORE_OK) return run.replayed ? 1 : 0;
  /* a step that refused set its own 4xx reply; otherwise (no reply, a success reply set inside
     the transaction that then failed to commit, a storage failure) the answer comes from the
     code: a full disk is 507 wherever it struck */
  if (rc == STORE_FULL || rc == STORE_UNAVAILABLE || !r->done || r->status < 400 ||
      r->status >= 500)
    api_store_error(r, rc, def->what, NULL);
  return -1;
}
