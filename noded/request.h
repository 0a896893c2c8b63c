/* request — a visitor request head: read it within HEAD_MAX, parse and check it (rewrite), route
 * it by Host to a site of the worker's config snapshot, answer 100 Continue, and start the first
 * origin attempt; a head that fails any of that gets noded's own answer. */
#ifndef CDNCA_REQUEST_H
#define CDNCA_REQUEST_H

#include "proxy_types.h"

/* V_HEAD: read c's next request head and start it once complete: 1 progress, else 0. */
int request_step(struct vconn *c);

#endif
