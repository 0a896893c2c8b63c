/* relay — streaming one proxied request both ways: the visitor's body to the origin and the
 * origin's response to the visitor, each re-framed (sbuf), the end of the response (the origin
 * connection pooled or closed, the visitor's kept alive or closed), and the tunnel after a 101. */
#ifndef CDNCA_RELAY_H
#define CDNCA_RELAY_H

#include "proxy_types.h"

/* V_AWAIT_ORIGIN and V_RESPONSE: move c's bodies and response one step: 1 progress, else 0. */
int relay_step(struct vconn *c);

/* V_TUNNEL: relay bytes both ways one step, close when one side is done: 1 progress, else 0. */
int relay_tunnel(struct vconn *c);

#endif
