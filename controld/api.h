/* api — the REST route tables of controld, one per resource file, and shared reply helpers. */
#ifndef CDNCA_API_H
#define CDNCA_API_H

#include "http.h"
#include "model.h"
#include "store.h"

extern const struct route api_sites_routes[];   /* api_sites.c */
extern const struct route api_origins_routes[]; /* api_origins.c */
extern const struct route api_nodes_routes[];   /* api_nodes.c */
extern const struct route api_node_routes[];    /* api_node.c: the node protocol */
extern const struct route api_misc_routes[];    /* api.c: /healthz, /metrics */
extern const struct route api_ui_routes[];      /* api_ui.c: /ui/ dashboard files */

/* Every table, NULL-terminated, in match order. */
extern const struct route *const api_tables[];

/* http's authenticate hook: who the bearer token is, from the store's tokens (an enum
   http_id_rc; a role this build does not know gives AUTH_NONE, which http refuses). */
int api_authenticate(struct ctx *ctx, const char *token, struct http_identity *out);

/* Reply with a model validation error. */
void api_field_error(struct req *r, const struct field_err *err);

/* Reply for a failed store call (404 for NOT_FOUND, 409 for CONFLICT with field, 422 for LIMIT,
   507 storage_full for FULL or while the disk is full, else 500). */
void api_store_error(struct req *r, enum store_rc rc, const char *what, const char *conflict);

/* The answer to a create refused by a count cap (STORE_LIMIT from a store_room_locked check,
   docs/design.md#errors-and-limits): 409 limit, "at most <cap> <plural> can exist". */
void api_limit_error(struct req *r, int64_t cap, const char *plural);

/* 1 with a 422 target_refused reply (naming field) when host is an address origins and webhooks
   may not name (link-local, unspecified, metadata, --deny-targets); else 0. */
int api_target_refused(struct req *r, const char *host, const char *field);

/* 1 when r's token may see secrets (webhook URL userinfo and query, health-check header values):
   admin tokens only; everyone else gets them masked (docs/design.md#secrets). */
int api_reveals_secrets(const struct req *r);

/* Answer a page of a list read with one record more than limit (n records of elem bytes at recs,
   each with an int64_t id at id_offset): 200 {key: [the first limit, each by to_json], "next":
   the id of the last one listed when there are more, else null}. */
void api_page_reply(struct req *r, const char *key, const void *recs, size_t elem, int n,
                    int64_t limit, size_t id_offset, cJSON *(*to_json)(const void *rec));

/* Read a page's query: limit (1-1000, default 100) and after (an id, default 0). 0, or -1 with
   a 400 reply. */
int api_page_query(struct req *r, int64_t *limit, int64_t *after);

/* Answer a list read whose store call returned rc: api_store_error (what) when it failed, else
   api_page_reply. recs stay the caller's. */
void api_page_answer(struct req *r, enum store_rc rc, const char *what, const char *key,
                     const void *recs, size_t elem, int n, int64_t limit, size_t id_offset,
                     cJSON *(*to_json)(const void *rec));

/* The same, to_json also given arg. */
void api_page_reply_arg(struct req *r, const char *key, const void *recs, size_t elem, int n,
                        int64_t limit, size_t id_offset,
                        cJSON *(*to_json)(const void *rec, const void *arg), const void *arg);

#endif
