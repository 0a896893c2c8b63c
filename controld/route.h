/* route — the route tables' types (who may call a route, what handles it) and matching request
   paths against them (pure). */
#ifndef CDNCA_ROUTE_H
#define CDNCA_ROUTE_H

#include <stddef.h>
#include <stdint.h>

/* The most ":id" parameters a pattern may have. */
#define ROUTE_MAX_PARAMS 4

/* Who may call a route (the route table's third column) and what a presented token is.
   AUTH_READ < AUTH_OPERATOR < AUTH_ADMIN are the roles of API tokens, in increasing power: a
   route names the least role it takes (docs/design.md#tokens-and-roles). AUTH_NODE is a node
   token, for the /v1/node/ routes only. */
enum http_auth { AUTH_NONE = 0, AUTH_READ, AUTH_OPERATOR, AUTH_ADMIN, AUTH_NODE };

/* What a route handler returns. */
enum http_rc {
  HTTP_DONE = 0,      /* a reply was set with req_json/req_error/... */
  HTTP_SUSPENDED = 1, /* req_suspend was called; someone will req_resume later */
};

struct req;
typedef enum http_rc (*route_fn)(struct req *r);

/* A route: method, a pattern like "/v1/sites/:id/origins/:id" (":id" = positive integer; a final
   "*" matches any rest of the path), who may call it, and the query parameters it takes
   (docs/design.md#query-parameters-and-lists): a comma list of names ("after,limit"), NULL for
   none, "*" for any (static files). A parameter it does not take is a 400 unknown_query_parameter.
 */
struct route {
  const char *method;
  const char *pattern;
  enum http_auth auth;
  route_fn fn;
  const char *query;
  size_t body_max; /* the most bytes of body the route takes; 0: HTTP_BODY_MAX (http.h) */
};

/* 1 when a route whose query list is allowed (struct route.query) takes the parameter name. Pure.
 */
int route_query_allowed(const char *allowed, const char *name);

/* The 0-based place of name in a comma list of names (struct route.query), or -1 when it is not
   there or the list is NULL or "*". Pure. */
int route_query_index(const char *allowed, const char *name);

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
