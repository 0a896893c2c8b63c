/* exchange — one attempt's traffic with its origin: the connection's connect and TLS progress,
 * the request head and body out, the response bytes in, and the response head: 1xx interim heads
 * forwarded or dropped, a 101 turned into a tunnel, a final head judged (a failure status retried
 * while the rules allow) and rewritten for the visitor (docs/design.md#the-edge-http-path). */
#ifndef CDNCA_EXCHANGE_H
#define CDNCA_EXCHANGE_H

#include "proxy_types.h"

/* Drive c's origin connection one step (needs c->r.up): 1 progress, else 0. */
int exchange_step(struct vconn *c);

/* The origin closed or failed before c's response was whole: logged, the origin connection
   dropped (not reused) and the visitor closed, as nothing sensible is left to tell it. */
void exchange_truncated(struct vconn *c);

#endif
