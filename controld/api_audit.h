/* api_audit — the audit log of the API (docs/design.md#audit): the record of each accepted /v1
   write, appended inside that write's transaction, and GET /v1/audit. */
#ifndef CDNCA_API_AUDIT_H
#define CDNCA_API_AUDIT_H

struct req;
struct store_tx;

/* Inside the write transaction of r (api_op_run): append its audit record — the presented token,
   method, path, site, status (the reply already set, else `status`, else 200/201/204 by method)
   and a one-line summary of what changed (audit.h). 0 or -1 (the write must roll back). */
int api_audit_locked(struct store_tx *tx, struct req *r, int status);

#endif
