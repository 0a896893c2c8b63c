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
      while (*p && *p != '/') p++;
      while (*s >= '0' && *s <= '9') {
        if (v > (INT64_MAX - 9) / 10) return 0;
        v = v * 10 + (*s - '0');
        s++;
        digits++;
      }
      if (!digits || v <= 0 || (*s && *s != '/') || n >= HTTP_MAX_PARAMS) return 0;
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
      int64_t tmp[HTTP_MAX_PARAMS];
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
