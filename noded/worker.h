/* worker — one proxy worker thread: its epoll loop over its listener, visitor and origin
 * sockets; accepting under the connection cap; pumping each connection through its phases;
 * the timeouts sweep; and the graceful stop. */
#ifndef CDNCA_WORKER_H
#define CDNCA_WORKER_H

#include "proxy_types.h"

/* The thread of worker arg (a struct worker *, set up by proxy_new): runs until stopped. */
void *worker_main(void *arg);

/* Follow the descriptor limit into p->max_conns; log when it lowers the cap. */
void worker_update_cap(struct proxy *p);

#endif
