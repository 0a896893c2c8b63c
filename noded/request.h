/* request — a visitor request head: read it within HEAD_MAX, parse and check it (rewrite), route
 * it by Host to a site of the worker's config snapshot, answer 100 Continue, and start the first
 * origin attempt; a head that fails any of that gets noded's own answer. Before the first head on
 * a proxy-protocol listener: the PROXY header, which gives the client's address. */
#ifndef CDNCA_REQUEST_H
#define CDNCA_REQUEST_H

#include "proxy_types.h"

/* V_HEAD: read c's next request head and start it once complete: 1 progress, else 0. */
int request_step(struct vconn *c);

/* V_PROXY: read the PROXY header that starts c (proxyproto); once complete, its source becomes
 * c->ip and c goes on to V_HEAD with the bytes after it. A missing, malformed or cut header
 * closes c (request_proxy_refused). 1 progress, else 0. */
int request_proxy_step(struct vconn *c);

/* Count a connection closed for its PROXY header (why) and log it at most once a second. */
void request_proxy_refused(struct vconn *c, enum pp_error why, const char *detail);

#endif
