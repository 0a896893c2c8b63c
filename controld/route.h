/* route — matching request paths against the route tables (pure). */
#ifndef CDNCA_ROUTE_H
#define CDNCA_ROUTE_H

#include <stdint.h>

#include "http.h"

/* 1 when path matches pattern (":id" segments take positive integers into params, a final "*"
   takes any rest; one trailing slash is tolerated); *nparams gets the count. */
int route_match(const char *pattern, const char *path, int64_t *params, int *nparams);

/* The route for method + path in the NULL-terminated tables (HEAD falls back to GET), or NULL;
   *path_known = 1 when some route has this path under another method (a 405). */
const struct route *route_find(const struct route *const *tables, const char *method,
                               const char *path, int64_t *params, int *nparams, int *path_known);

#endif
