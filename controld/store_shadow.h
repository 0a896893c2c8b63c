/* store_shadow — the SQL of shadow health policies (docs/design.md, Shadow health policies): a
   site's shadow level machine and counters, its origins' shadow machines, its would-have
   switches, and the real switches beside them. */
#ifndef CDNCA_STORE_SHADOW_H
#define CDNCA_STORE_SHADOW_H

#include <stdint.h>

#include "shadow.h"
#include "store.h"

/* Inside a write transaction: the shadow state of site_id: STORE_OK with *ss filled and *so
   (malloc'd, caller frees; NULL when none) its *n origin rows, or STORE_NOT_FOUND (no round yet:
   *ss zeroed, *so NULL, *n 0), or STORE_ERROR. */
enum store_rc store_shadow_load_locked(struct store_tx *tx, int64_t site_id, struct shadow_site *ss,
                                       struct shadow_origin **so, int *n);

/* Inside a write transaction: store the site's shadow state and its n origins' rows (insert or
   update), and with sw (may be NULL) a would-have switch, keeping the newest
   SHADOW_SWITCHES_KEPT. 0 or -1. */
int store_shadow_save_locked(struct store_tx *tx, const struct shadow_site *ss,
                             const struct shadow_origin *so, int n, const struct shadow_switch *sw);

/* Inside a write transaction: one more round of site_id whose shadow probes were skipped
   (--probe-batch), its state started at level (when it has none) at now. 0 or -1. */
int store_shadow_skipped_locked(struct store_tx *tx, int64_t site_id, int level, int64_t now);

/* Inside a write transaction: forget site_id's shadow state and switches (its policy was set,
   changed or removed: the comparison starts again). 0 or -1. */
int store_shadow_reset_locked(struct store_tx *tx, int64_t site_id);

/* The shadow state of site_id alone, inside tx (NULL: on the reader): STORE_OK, STORE_NOT_FOUND
   (*ss zeroed) or STORE_ERROR. */
enum store_rc store_shadow_site_get(struct store *st, struct store_tx *tx, int64_t site_id,
                                    struct shadow_site *ss);

/* What GET /v1/sites/{id}/shadow shows, on the reader: the state (STORE_NOT_FOUND: no round
   yet; *ss zeroed), the origins' rows (*so malloc'd, *n), the newest would-have switches (*sw
   malloc'd, *nsw, at most SHADOW_SWITCHES_SHOWN) and the site's newest real switches
   (level.switched events, *real malloc'd, *nreal, at most SHADOW_SWITCHES_SHOWN). The caller
   frees the arrays on STORE_OK and STORE_NOT_FOUND. */
enum store_rc store_shadow_report(struct store *st, int64_t site_id, struct shadow_site *ss,
                                  struct shadow_origin **so, int *n, struct shadow_switch **sw,
                                  int *nsw, struct shadow_switch **real, int *nreal);

#endif
