/* publish — the node site-config JSON of docs/design.md#site-config-wire-format (full set or delta
   since a seq), built once and shared, zero-copy and refcounted, by every node request that needs
   the same answer. */
#ifndef CDNCA_PUBLISH_H
#define CDNCA_PUBLISH_H

#include <stddef.h>
#include <stdint.h>

#include "site.h"
#include "store_node.h"
#include "store_pub.h"

struct publish;
struct pub_blob; /* immutable JSON text of one answer, refcounted */

/* New publisher reading from st (not owned); NULL on OOM. */
struct publish *publish_new(struct store *st);

/* The operator's --deny-targets, published to nodes in every answer (copied; NULL = none). Call
   before the first publish_get. */
void publish_set_deny_targets(struct publish *p, const char *list);

/* Free the publisher and drop its cached blobs (blobs still referenced live on). NULLs *p. */
void publish_free(struct publish **p);

/* PUB_DELTA_MAX (store_pub.h): how many publications a delta spans at most. */

/* Pure: the seq an answer for a node holding `since` is built from when the newest publication
   is cur: since itself, or 0 (the full set) when since is past cur (the database was reset) or
   more than PUB_DELTA_MAX publications behind it. Honest nodes hold one of the last few seqs;
   a client cycling through old ones would otherwise have each answer built apart (as large as
   the full set, a cache slot each), and now gets the one full answer from the cache. */
int64_t publish_since(int64_t since, int64_t cur);

/* The answer for a node holding `since` (built from publish_since's seq). Returns a blob with
   one reference for the caller (pub_blob_unref), or NULL on a store error. Answers for the same
   (since, seq) come from a small cache, so a wake of many waiters builds once. */
struct pub_blob *publish_get(struct publish *p, int64_t since);

/* Pure: the JSON text {"seq","full","deny_targets","sites":[site config...],"deleted":[ids]} of
   a snapshot; malloc'd (caller frees), *len set; NULL on OOM. Only enabled origins are listed. */
char *publish_json(const struct config_snapshot *s, const char *deny_targets, size_t *len);

/* Pure: 1 when a node would be sent the same site for a as for b (config_version aside), 0 when
   they differ or either cannot be encoded. A change of a site or an origin that leaves it the same
   records no publication: nodes are sent nothing new (docs/design.md#site-config-wire-format). */
int publish_site_same(const struct site_rec *a, const struct site_rec *b);

/* Seq, full flag, text and length of a blob. */
int64_t pub_blob_seq(const struct pub_blob *b);
int pub_blob_full(const struct pub_blob *b);
const char *pub_blob_data(const struct pub_blob *b);
size_t pub_blob_len(const struct pub_blob *b);

/* Take one more reference; returns b. Thread-safe. */
struct pub_blob *pub_blob_ref(struct pub_blob *b);

/* Drop a reference; the last one frees. NULL is ignored. Thread-safe. */
void pub_blob_unref(struct pub_blob *b);

#endif
