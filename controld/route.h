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

/* Whether a token of kind `have` (a role or AUTH_NODE) may call a route marked `need`. */
enum route_verdict {
  ROUTE_ALLOW = 0,
  ROUTE_WRONG_KIND = 1,     /* a node token on an API route or the reverse: 403 forbidden */
  ROUTE_FORBIDDEN_ROLE = 2, /* an API token whose role is below the route's: 403 forbidden_role */
};

/* The verdict for need/have (AUTH_NONE needs nothing). Pure. */
enum route_verdict route_authorize(enum http_auth need, enum http_auth have);

/* "read" | "operator" | "admin" for the roles, else NULL. Static. */
const char *route_role_name(enum http_auth role);

/* The role named s ("read", "operator", "admin"; exact), or AUTH_NONE. */
enum http_auth route_role_parse(const char *s);

#endif
