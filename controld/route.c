/* route — path patterns with integer parameters. */
#include "route.h"

#include <string.h>

int route_match(const char *pattern, const char *path, int64_t *params, int *nparams) {
  const char *p = pattern, *s = path;
  int n = 0;
  while (*p && *s) {
    if (p[0] == '*' && p[1] == '\0') {
      *nparams = n;
      return 1;
    }
    if (*p == ':') {
      int64_t v = 0;
      int digits = 0;
      while (*p && *p != '/')
        p++;
      while (*s >= '0' && *s <= '9') {
        if (v > (INT64_MAX - 9) / 10) return 0;
        v = v * 10 + (*s - '0');
        s++;
        digits++;
      }
      if (!digits || v <= 0 || (*s && *s != '/') || n >= ROUTE_MAX_PARAMS) return 0;
      params[n++] = v;
      continue;
    }
    if (*p != *s) return 0;
    p++;
    s++;
  }
  if (*s == '/' && s[1] == '\0' && *p == '\0') s++; /* tolerate one trailing slash */
  if (p[0] == '*' && p[1] == '\0') p++;
  if (*p || *s) return 0;
  *nparams = n;
  return 1;
}

const struct route *route_find(const struct route *const *tables, const char *method,
                               const char *path, int64_t *params, int *nparams, int *path_known) {
  *path_known = 0;
  for (const struct route *const *t = tables; *t; t++)
    for (const struct route *rt = *t; rt->method; rt++) {
      int64_t tmp[ROUTE_MAX_PARAMS];
      int nt = 0;
      if (!route_match(rt->pattern, path, tmp, &nt)) continue;
      *path_known = 1;
      if (strcmp(rt->method, method) != 0 &&
          !(strcmp(method, "HEAD") == 0 && strcmp(rt->method, "GET") == 0))
        continue;
      memcpy(params, tmp, sizeof tmp);
      *nparams = nt;
      return rt;
    }
  return NULL;
}

/* The roles of API tokens, in increasing power (their enum values are ordered the same way). */
static const struct {
  enum http_auth role;
  const char *name;
} roles[] = {
    {AUTH_READ, "read"},
    {AUTH_OPERATOR, "operator"},
    {AUTH_ADMIN, "admin"},
};

static int is_role(enum http_auth a) {
  return a == AUTH_READ || a == AUTH_OPERATOR || a == AUTH_ADMIN;
}

enum route_verdict route_authorize(enum http_auth need, enum http_auth have) {
  if (need == AUTH_NONE) return ROUTE_ALLOW;
  if (need == AUTH_NODE || have == AUTH_NODE || !is_role(have))
    return need == have ? ROUTE_ALLOW : ROUTE_WRONG_KIND;
  if (!is_role(need)) return ROUTE_WRONG_KIND;
  return have >= need ? ROUTE_ALLOW : ROUTE_FORBIDDEN_ROLE;
}

const char *route_role_name(enum http_auth role) {
  for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
    if (roles[i].role == role) return roles[i].name;
  return NULL;
}

enum http_auth route_role_parse(const char *s) {
  for (size_t i = 0; s && i < sizeof roles / sizeof roles[0]; i++)
    if (strcmp(roles[i].name, s) == 0) return roles[i].role;
  return AUTH_NONE;
}

int route_query_index(const char *allowed, const char *name) {
  size_t n = strlen(name);
  const char *p = allowed;
  int i = 0;
  if (!allowed || strcmp(allowed, "*") == 0) return -1;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == n && n > 0 && memcmp(p, name, n) == 0) return i;
    if (!e) break;
    p = e + 1;
    i++;
  }
  return -1;
}

int route_query_allowed(const char *allowed, const char *name) {
  return (allowed && strcmp(allowed, "*") == 0) || route_query_index(allowed, name) >= 0;
}
