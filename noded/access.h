/* access — the JSON object of one access line, as noded's default access log writes it
 * (docs/operations.md): site, visitor, request, the origin and level that answered, status,
 * duration and bytes, and noded's own error code when it answered itself. */
#ifndef CDNCA_ACCESS_H
#define CDNCA_ACCESS_H

#include "buf.h"
#include "proxy_opts.h"

/* a's line into b (emptied first, its data NUL-terminated): 0, or -1 when b cannot hold it. */
int access_json(struct buf *b, const struct proxy_access *a);

#endif
