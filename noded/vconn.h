/* vconn — a visitor connection: reading and writing its socket, noded's own answers on it, the
 * end of each request (its status count and access line), the next request on a keep-alive
 * connection, and closing. The phases that drive it are request, relay and worker. */
#ifndef CDNCA_VCONN_H
#define CDNCA_VCONN_H

#include "proxy_types.h"

/* Close c (an active request ends, 499 unless its status was chosen); freed after the turn. */
void vconn_close(struct vconn *c);

/* Free c and its buffers (c is closed, or was never added to its worker). */
void vconn_free(struct vconn *c);

/* Give the splice pipe back to the worker's cache (empty) or close it (relay.c). */
void vconn_pipe_put(struct vconn *c);

/* Give back every buffer of an idle connection (nothing pending in any of them). */
void vconn_release_buffers(struct vconn *c);

/* Start the next request on a keep-alive connection, keeping the unconsumed bytes and buffers. */
void vconn_next_request(struct vconn *c);

/* End c's request with status (out of range: 499): count, log, release its pick and site. */
void vconn_finish(struct vconn *c, int status);

/* Queue a small JSON answer of noded's own and go to V_LOCAL; closes after it when it must. */
void vconn_local_error(struct vconn *c, int status, const char *code, const char *msg,
                       int close_after);

/* The Connection header the response head gets (RW_CONN_CLOSE, RW_CONN_KEEPALIVE or none). */
int vconn_conn_header(const struct vconn *c);

/* Read from the visitor into c->in (allocated at the first byte): 1, 0 or -1 (EOF, error). */
int vconn_read(struct vconn *c);

/* Write pending head bytes, then body's [sent, fwd) (may be NULL), to the visitor: 1, 0 or -1. */
int vconn_flush(struct vconn *c, struct sbuf *body);

/* V_LOCAL: write noded's answer, then start the next request or close: 1 progress, else 0. */
int vconn_step_local(struct vconn *c);

#endif
