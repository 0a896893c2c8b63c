/* attempt — the per-origin attempt loop of one visitor request: pick an origin (proxy_state),
 * connect to it (upstream), record each outcome in the skip state, and retry on another origin
 * while the site's retry rules allow (docs/design.md#node-skip-and-retry), else answer 502/504. */
#ifndef CDNCA_ATTEMPT_H
#define CDNCA_ATTEMPT_H

#include "proxy_types.h"

/* Pick the next origin not yet tried and connect to it; with none left, a local 502 or 504. */
void attempt_start(struct vconn *c);

/* (Re)connect to the current pick (pooled when allow_pool); an immediate failure is recorded. */
void attempt_connect(struct vconn *c, int allow_pool);

/* Record a failed attempt (enum attempt_result kind), then retry or answer 502/504. */
void attempt_fail(struct vconn *c, int kind);

/* The origin answered something noded refuses to relay (why: its framing, an unrequested 101).
   One answer says little about the origin's health, and a visitor could otherwise eject every
   origin of a site by asking for one such URL: it is counted apart (refused_response), logged
   at most once a second, not recorded against the origin (its pick is given back), and the
   visitor gets 502 origin_response_refused without a retry. */
void attempt_refused(struct vconn *c, const char *why);

/* Record the attempt's outcome once its final head is accepted (failed: a failure status). */
void attempt_done(struct vconn *c, int failed);

#endif
