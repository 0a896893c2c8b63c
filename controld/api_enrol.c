/* api_enrol — enrolment keys (docs/design.md#enrolment-keys): /v1/enrolment-keys (admin: create
   with the secret shown once, list, revoke) and POST /v1/node/enrol, where a key is the
   credential that makes a node and its token. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_op.h"
#include "clock.h"
#include "ctx.h"
#include "enrolkey.h"
#include "fields.h"
#include "json.h"
#include "store_enrol.h"
#include "store_node.h"
#include "token.h"

/* A key as the API shows it (never its secret). */
static cJSON *key_json(const struct enrolkey_rec *k, int64_t now) {
  cJSON *j = cJSON_CreateObject();
  json_add_i64(j, "id", k->id);
  cJSON_AddStringToObject(j, "name", k->name);
  json_add_time(j, "created_at", k->created_at);
  json_add_time(j, "expires_at", k->expires_at);
  if (k->max_uses > 0)
    json_add_i64(j, "max_uses", k->max_uses);
  else
    cJSON_AddNullToObject(j, "max_uses");
  json_add_i64(j, "uses", k->uses);
  json_add_time(j, "revoked_at", k->revoked_at);
  cJSON_AddStringToObject(j, "state", enrolkey_state_names[enrolkey_state(k, now)]);
  return j;
}

/* ---- /v1/enrolment-keys ---- */

/* The state of a key creation. */
struct key_op {
  struct enrolkey_rec *k;
  const char *hash, *secret;
  int64_t now;
};

static enum store_rc create_change(struct api_op *op) {
  struct key_op *ko = op->arg;
  enum store_rc rc = store_enrolkey_create_locked(op->tx, ko->k, ko->hash, ko->now);
  cJSON *j;
  if (rc == STORE_LIMIT) {
    api_limit_error(op->r, STORE_MAX_ENROLKEYS, "unrevoked enrolment keys");
    return rc;
  }
  if (rc != STORE_OK) {
    api_store_error(op->r, rc, "enrolment key", rc == STORE_CONFLICT ? "name" : NULL);
    return rc;
  }
  j = key_json(ko->k, ko->now);
  cJSON_AddStringToObject(j, "key", ko->secret); /* shown here only, stored hashed */
  req_json(op->r, 201, j);
  return STORE_OK;
}

/* the secret is shown once: an Idempotency-Key replay answers "key": null */
static const struct api_op_def create_op = {"enrolment key", create_change, NULL, "key"};

static enum http_rc post_key(struct req *r) {
  cJSON *body = req_body_object(r);
  struct field_err fe;
  struct enrolkey_in in;
  struct enrolkey_rec k;
  struct key_op ko;
  char secret[TOKEN_HEX_LEN + 8], hash[65];
  int64_t now = clock_wall_ms();
  if (!body) return HTTP_DONE;
  memset(&in, 0, sizeof in);
  if (fields_apply_form(body, enrolkey_in_fields, 0, NULL, "", FIELDS_CREATE, &in, &fe) < 0 ||
      enrolkey_in_record(&in, now, &k, &fe) < 0) {
    api_field_error(r, &fe);
    goto out;
  }
  if (token_random(secret, sizeof secret) < 0) {
    req_error(r, 500, "internal", NULL, "no randomness for a key");
    goto out;
  }
  token_sha256_hex(secret, strlen(secret), hash);
  ko.k = &k;
  ko.hash = hash;
  ko.secret = secret;
  ko.now = now;
  (void)api_op_run(r, &create_op, &ko);
  token_wipe(secret, sizeof secret);
out:
  cJSON_Delete(body);
  return HTTP_DONE;
}

static enum http_rc list_keys(struct req *r) {
  struct enrolkey_rec *arr = NULL;
  int n = 0;
  int64_t now = clock_wall_ms();
  cJSON *j, *a;
  enum store_rc rc = store_enrolkey_list(r->ctx->store, &arr, &n);
  if (rc != STORE_OK) {
    api_store_error(r, rc, "enrolment keys", NULL);
    return HTTP_DONE;
  }
  j = cJSON_CreateObject();
  a = cJSON_AddArrayToObject(j, "enrolment_keys");
  for (int i = 0; i < n; i++)
    cJSON_AddItemToArray(a, key_json(&arr[i], now));
  free(arr);
  req_json(r, 200, j);
  return HTTP_DONE;
}

static enum store_rc revoke_change(struct api_op *op) {
  enum store_rc rc = store_enrolkey_revoke_locked(op->tx, op->r->params[0], clock_wall_ms());
  if (rc == STORE_OK) req_json(op->r, 204, NULL);
  return rc;
}

static const struct api_op_def revoke_op = {"enrolment key", revoke_change, NULL, NULL};

static enum http_rc revoke_key(struct req *r) {
  (void)api_op_run(r, &revoke_op, NULL);
  return HTTP_DONE;
}

/* ---- POST /v1/node/enrol ---- */

/* The one answer for a key that cannot enrol: unknown, expired, used up or revoked alike, so the
   answer says nothing about which keys exist. */
static void key_invalid(struct req *r) {
  req_error(r, 401, "enrolment_key_invalid", NULL,
            "the enrolment key is unknown, expired, used up or revoked");
}

/* The state of an enrolment. */
struct enrol_op {
  struct node_rec n;
  const char *key_hash, *token_hash, *token;
  int64_t now;
};

static enum store_rc enrol_change(struct api_op *op) {
  struct enrol_op *eo = op->arg;
  struct enrolkey_rec k;
  enum store_rc rc = store_enrolkey_use_locked(op->tx, eo->key_hash, eo->now, &k);
  cJSON *j, *ko;
  if (rc == STORE_NOT_FOUND) {
    key_invalid(op->r);
    return rc;
  }
  if (rc != STORE_OK) return rc;
  /* a taken name rolls the use back with everything else */
  rc = store_node_create_locked(op->tx, &eo->n, eo->token_hash);
  if (rc == STORE_LIMIT) {
    api_limit_error(op->r, STORE_MAX_NODES, "nodes");
    return rc;
  }
  if (rc != STORE_OK) {
    api_store_error(op->r, rc, "node", rc == STORE_CONFLICT ? "name" : NULL);
    return rc;
  }
  j = cJSON_CreateObject();
  json_add_i64(j, "id", eo->n.id);
  cJSON_AddStringToObject(j, "name", eo->n.name);
  cJSON_AddStringToObject(j, "token", eo->token);
  /* the key's id and name: what the audit record names (audit.c) */
  ko = cJSON_AddObjectToObject(j, "enrolment_key");
  json_add_i64(ko, "id", k.id);
  cJSON_AddStringToObject(ko, "name", k.name);
  req_json(op->r, 201, j);
  return STORE_OK;
}

/* the node token is shown once: an Idempotency-Key replay answers "token": null */
static const struct api_op_def enrol_op = {"node", enrol_change, NULL, "token"};

static enum http_rc post_enrol(struct req *r) {
  cJSON *body = req_body_object(r);
  struct field_err fe;
  struct enrol_in in;
  struct enrolkey_rec k;
  struct enrol_op eo;
  char token[TOKEN_HEX_LEN + 8], key_hash[65], token_hash[65];
  enum store_rc rc;
  if (!body) return HTTP_DONE;
  memset(&in, 0, sizeof in);
  memset(&eo, 0, sizeof eo);
  memset(token, 0, sizeof token);
  if (fields_apply_form(body, enrol_in_fields, 0, NULL, "", FIELDS_CREATE, &in, &fe) < 0) {
    api_field_error(r, &fe);
    goto out;
  }
  /* the key is looked up by its SHA-256, as tokens are: the database compares digests, never
     the secret, so the time taken says nothing about how much of a guess was right */
  token_sha256_hex(in.key, strlen(in.key), key_hash);
  eo.now = clock_wall_ms();
  /* a key that cannot enrol is refused on a reader, before any write transaction: guesses cost
     a read, and write nothing */
  rc = store_enrolkey_find(r->ctx->store, key_hash, &k);
  if (rc == STORE_NOT_FOUND || (rc == STORE_OK && enrolkey_state(&k, eo.now) != ENROLKEY_ACTIVE)) {
    key_invalid(r);
    goto out;
  }
  if (rc != STORE_OK) {
    api_store_error(r, rc, "enrolment key", NULL);
    goto out;
  }
  if (token_random(token, sizeof token) < 0) {
    req_error(r, 500, "internal", NULL, "no randomness for a token");
    goto out;
  }
  token_sha256_hex(token, strlen(token), token_hash);
  memcpy(eo.n.name, in.name, sizeof eo.n.name);
  eo.key_hash = key_hash;
  eo.token_hash = token_hash;
  eo.token = token;
  /* the use is counted again, atomically, inside the transaction: the check above may race */
  (void)api_op_run(r, &enrol_op, &eo);
out:
  token_wipe(token, sizeof token);
  token_wipe(&in, sizeof in);
  {
    cJSON *kv = cJSON_GetObjectItemCaseSensitive(body, "key");
    if (cJSON_IsString(kv)) token_wipe(kv->valuestring, strlen(kv->valuestring));
  }
  cJSON_Delete(body);
  return HTTP_DONE;
}

const struct route api_enrol_routes[] = {
    {"POST", "/v1/enrolment-keys", AUTH_ADMIN, post_key, NULL, 0},
    {"GET", "/v1/enrolment-keys", AUTH_ADMIN, list_keys, NULL, 0},
    {"DELETE", "/v1/enrolment-keys/:id", AUTH_ADMIN, revoke_key, NULL, 0},
    /* anyone may call it: a body of a key and a name, 4 KiB at most, holds one that sends
       slowly to a few KiB instead of the 1 MiB of other routes */
    {"POST", "/v1/node/enrol", AUTH_NONE, post_enrol, NULL, 4096},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
