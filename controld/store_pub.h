/* store_pub — publications: every change of a site's config records one (its seq orders what
   nodes apply); a hook runs after each commit that recorded one. */
#ifndef CDNCA_STORE_PUB_H
#define CDNCA_STORE_PUB_H

#include "store.h"
#include <stdint.h>

/* Highest publication seq (0 when none). */
int64_t store_pub_seq(struct store *st);

/* Call fn(arg, seq) after every commit that recorded a publication (outside the writer lock). Set
 * once at start. */
void store_set_pub_hook(struct store *st, void (*fn)(void *arg, int64_t seq), void *arg);

/* Inside a write transaction: bump the site's config_version (unless deleted) and record a
   publication. Returns 0 or -1. Its seq reaches the hook once the transaction commits (on
   PostgreSQL the INSERT is sent ahead with db_prefetch and its seq read at the commit). */
int store_publish_locked(struct store_tx *tx, int64_t site_id, const char *reason, int deleted);

/* Inside a write transaction: the newest publication seq it recorded (0 = none; read at the
   commit on PostgreSQL), and the same set by a writer that numbers publications itself (an
   import). */
int64_t store_pub_pending_locked(struct store_tx *tx);
void store_pub_pending_set_locked(struct store_tx *tx, int64_t seq);

/* Publications deleted per prune transaction. */
#define STORE_PUB_PRUNE_BATCH 1000

/* How many publications a config delta spans at most: a node further behind gets the full set
   (publish_since). So a deleted site's last publication (its tombstone) that far behind the
   newest is one no delta needs: the prune may take it. */
#define PUB_DELTA_MAX 256

/* Delete the publications recorded before before_ms, oldest first, in transactions of
   STORE_PUB_PRUNE_BATCH, but each site's newest (what the site's nodes must have applied; the
   newest of all among them, so seqs keep growing) and those recorded while an incident or a
   drill of their site that is still kept was running (its propagation figures read them). A
   deleted site's newest goes too once it is more than PUB_DELTA_MAX behind the newest of all:
   else every deleted site kept a row for good. Rows deleted or -1. An engine write. */
int64_t store_pub_prune(struct store *st, int64_t before_ms);

/* Add the participant that reads the transaction's publication seq before COMMIT and runs the
   publication hook after it (store_open does it). 0 or -1. */
int store_pub_attach(struct store *st);

#endif
