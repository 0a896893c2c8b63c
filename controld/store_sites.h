/* store_sites — the sites and origins SQL: reads (one or many sites from one snapshot) and the
   writes behind the API, each republishing the site. */
#ifndef CDNCA_STORE_SITES_H
#define CDNCA_STORE_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "site.h"
#include "store.h"

/* Insert the site with its hostnames and origins; sets s->id, origin ids, versions. On
 * STORE_CONFLICT conflict names what is taken ("name" or "hostnames[i]"). */
enum store_rc store_site_create(struct store *st, struct site_rec *s, char *conflict, size_t clen);

/* Load one site into *out (caller site_rec_fini's it). */
enum store_rc store_site_get(struct store *st, int64_t id, struct site_rec *out);

/* Load the n distinct sites ids[0..n) into out[0..n), in the caller's order, from one snapshot
 * and with a few statements in all (not a few per site). A site that is not there leaves
 * out[i].id == 0. The caller site_rec_fini's every entry. */
enum store_rc store_sites_get(struct store *st, const int64_t *ids, int n, struct site_rec *out);

/* List up to limit sites with id > after, ascending; *out is a malloc'd array of *n records (caller
 * frees each with site_rec_fini and the array with free). */
enum store_rc store_site_list(struct store *st, int64_t after, int limit, struct site_rec **out,
                              int *n);

/* Replace the site's top-level fields and hostnames (not origins) from s; republishes. Conflicts as
 * in create. */
enum store_rc store_site_update(struct store *st, struct site_rec *s, char *conflict, size_t clen);

/* Delete a site; records a tombstone publication. */
enum store_rc store_site_delete(struct store *st, int64_t id);

/* Add an origin to a site (o->site_id set); sets o->id; republishes. */
enum store_rc store_origin_add(struct store *st, struct origin_rec *o);

/* Replace an origin's config fields; re-enabling resets its health to unknown; republishes. */
enum store_rc store_origin_update(struct store *st, const struct origin_rec *o);

/* Delete an origin of a site; republishes. */
enum store_rc store_origin_delete(struct store *st, int64_t site_id, int64_t origin_id);

/* The same, inside a store_op (the writer connection; the caller's transaction). */
enum store_rc store_site_get_locked(struct store_tx *tx, int64_t id, struct site_rec *out);
enum store_rc store_site_create_locked(struct store_tx *tx, struct site_rec *s, char *conflict,
                                       size_t clen);
/* publish 0: record no publication (the caller found that nodes are sent the same site:
   publish_site_same); the revision goes up all the same. */
enum store_rc store_site_update_locked(struct store_tx *tx, struct site_rec *s, int publish,
                                       char *conflict, size_t clen);
enum store_rc store_site_delete_locked(struct store_tx *tx, int64_t id);
/* STORE_LIMIT when the site already has SITE_MAX_ORIGINS origins (counted in the transaction). */
enum store_rc store_origin_add_locked(struct store_tx *tx, struct origin_rec *o);
enum store_rc store_origin_update_locked(struct store_tx *tx, const struct origin_rec *o,
                                         int publish);
enum store_rc store_origin_delete_locked(struct store_tx *tx, int64_t site_id, int64_t origin_id);

/* The site's revision (inside a store_op). */
enum store_rc store_site_revision_locked(struct store_tx *tx, int64_t site_id, int64_t *revision);

/* revision + 1 and updated_at now inside tx: every change of the site (a write of its fields or
   origins, published or not, and the operator's switch, docs/design.md#safe-concurrent-edits).
   0 or -1. */
int store_site_bump_revision_locked(struct store_tx *tx, int64_t site_id);

/* Up to limit site ids > after, ascending, into ids[]; *n of them. */
enum store_rc store_site_ids(struct store *st, int64_t after, int limit, int64_t *ids, int *n);

/* ---- for the store's own files (a connection of theirs, inside a read or write transaction) ----
 */

struct db_conn;

/* Inside any connection: load a site with hostnames and origins. */
enum store_rc store_site_load(struct db_conn *c, int64_t id, struct site_rec *out);

/* Inside any connection: load the n distinct sites ids[0..n) into out[0..n) (the caller's order)
   in a few statements per table, not per site: id ranges when the ids are dense, else lists of
   32. A site that is not there leaves out[i].id == 0. On error every out[i] is released. */
enum store_rc store_sites_load(struct db_conn *c, const int64_t *ids, int n, struct site_rec *out);

/* Do ids first..last (n of them) fill that range densely enough to read it as one range? */
int store_bulk_dense(int64_t first, int64_t last, int n);

/* Inside a write transaction: the INSERT of origin o of site site_id with its own id and
   created_at (an import), prepared and bound; the caller steps it. NULL on error. */
struct db_stmt *store_origin_insert_with_id(struct store *st, int64_t site_id,
                                            const struct origin_rec *o);

#endif
