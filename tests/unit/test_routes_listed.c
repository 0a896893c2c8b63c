/* Unit tests for the route tables: every {"METHOD", "/pattern", AUTH_...} row written in
 * controld/api*.c is reachable through api_tables with the same auth, and the auth kinds follow
 * docs/design.md#rest-api (node tokens for /v1/node/, the roles read / operator / admin for the
 * rest of /v1, none elsewhere), and the role checks themselves. */
#include <glob.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api.h"
#include "route.h"

#define ROW_RE                                                                                     \
  "\\{[[:space:]]*\"(GET|POST|PUT|PATCH|DELETE)\"[[:space:]]*,[[:space:]]*\"(/[^\"]*)\""           \
  "[[:space:]]*,[[:space:]]*(AUTH_[A-Z]+)[[:space:]]*,"

struct row {
  char method[8];
  char pattern[128];
  char auth[16];
  char file[64];
};

/* Read a whole file; caller frees. NULL on error. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  char *data = NULL;
  long n;
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    data = malloc((size_t)n + 1);
    if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
      free(data);
      data = NULL;
    }
    if (data) data[n] = '\0';
  }
  fclose(f);
  return data;
}

static void copy_match(char *dst, size_t cap, const char *src, const regmatch_t *m) {
  size_t n = (size_t)(m->rm_eo - m->rm_so);
  assert_true(n < cap);
  memcpy(dst, src + m->rm_so, n);
  dst[n] = '\0';
}

/* Every route row of controld/api*.c; *n gets the count. Caller frees. */
static struct row *source_rows(int *n) {
  glob_t g;
  regex_t re;
  struct row *rows = NULL;
  int cap = 0;
  *n = 0;
  assert_int_equal(regcomp(&re, ROW_RE, REG_EXTENDED), 0);
  assert_int_equal(glob(CDNCA_SOURCE_DIR "/controld/api*.c", 0, NULL, &g), 0);
  for (size_t i = 0; i < g.gl_pathc; i++) {
    char *text = slurp(g.gl_pathv[i]);
    const char *p;
    const char *base = strrchr(g.gl_pathv[i], '/');
    regmatch_t m[4];
    assert_non_null(text);
    for (p = text; regexec(&re, p, 4, m, 0) == 0; p += m[0].rm_eo) {
      struct row *r;
      if (*n == cap) {
        cap = cap ? cap * 2 : 32;
        rows = realloc(rows, (size_t)cap * sizeof *rows);
        assert_non_null(rows);
      }
      r = &rows[(*n)++];
      copy_match(r->method, sizeof r->method, p, &m[1]);
      copy_match(r->pattern, sizeof r->pattern, p, &m[2]);
      copy_match(r->auth, sizeof r->auth, p, &m[3]);
      snprintf(r->file, sizeof r->file, "%s", base ? base + 1 : g.gl_pathv[i]);
    }
    free(text);
  }
  globfree(&g);
  regfree(&re);
  return rows;
}

static enum http_auth auth_of(const char *name) {
  if (strcmp(name, "AUTH_READ") == 0) return AUTH_READ;
  if (strcmp(name, "AUTH_OPERATOR") == 0) return AUTH_OPERATOR;
  if (strcmp(name, "AUTH_ADMIN") == 0) return AUTH_ADMIN;
  if (strcmp(name, "AUTH_NODE") == 0) return AUTH_NODE;
  assert_string_equal(name, "AUTH_NONE");
  return AUTH_NONE;
}

/* The pattern as a request path: ":id" -> "7", a final "*" -> "/x". */
static void concrete(const char *pattern, char *out, size_t cap) {
  size_t o = 0;
  for (const char *p = pattern; *p; p++) {
    const char *piece = NULL;
    char one[2] = {*p, '\0'};
    if (p[0] == ':' && strncmp(p, ":id", 3) == 0) {
      piece = "7";
      p += 2;
    } else if (p[0] == '*' && p[1] == '\0') {
      piece = "/x";
    } else {
      piece = one;
    }
    assert_true(o + strlen(piece) < cap);
    memcpy(out + o, piece, strlen(piece));
    o += strlen(piece);
  }
  out[o] = '\0';
}

static void test_every_written_route_is_served(void **state) {
  int n = 0;
  struct row *rows = source_rows(&n);
  assert_true(n >= 10);
  for (int i = 0; i < n; i++) {
    char path[256];
    int64_t params[HTTP_MAX_PARAMS];
    int np = 0, known = 0;
    const struct route *rt;
    concrete(rows[i].pattern, path, sizeof path);
    rt = route_find(api_tables, rows[i].method, path, params, &np, &known);
    if (!rt || strcmp(rt->pattern, rows[i].pattern) != 0 || rt->auth != auth_of(rows[i].auth))
      fail_msg("%s %s (%s in %s): served as %s %s (%d); is its table in api_tables?",
               rows[i].method, rows[i].pattern, rows[i].auth, rows[i].file,
               rt ? rt->pattern : "(no route)", path, rt ? (int)rt->auth : -1);
  }
  free(rows);
}

/* docs/design.md#rest-api: the routes an operator may call beyond GET, the GETs kept for admins,
   the open /v1 document, and the node route that takes no token. Every other /v1 GET takes a read
   token and every other /v1 write an admin. */
static const struct {
  const char *method, *pattern;
  enum http_auth auth;
} exceptions[] = {
    {"POST", "/v1/sites/:id/switch", AUTH_OPERATOR},
    {"PATCH", "/v1/sites/:id/origins/:id", AUTH_OPERATOR}, /* only "enabled" (api_origins.c) */
    {"POST", "/v1/webhooks/:id/test", AUTH_OPERATOR},
    {"POST", "/v1/incidents/:id/notes", AUTH_OPERATOR},
    {"POST", "/v1/incidents/:id/resolve", AUTH_OPERATOR},
    /* a failover drill is a switch the operator asks for (docs/design.md, Drills) */
    {"POST", "/v1/sites/:id/drills", AUTH_OPERATOR},
    {"POST", "/v1/drills/:id/cancel", AUTH_OPERATOR},
    {"GET", "/v1/tokens", AUTH_ADMIN},
    {"GET", "/v1/enrolment-keys", AUTH_ADMIN},
    /* who is paged, where mail goes: channels are admin's alone
       (docs/design.md#notification-channels) */
    {"GET", "/v1/channels", AUTH_ADMIN},
    {"GET", "/v1/channels/:id", AUTH_ADMIN},
    {"GET", "/v1/channels/:id/deliveries", AUTH_ADMIN},
    {"GET", "/v1/openapi.json", AUTH_NONE},
    /* the enrolment key in the body is the credential (docs/design.md#enrolment-keys) */
    {"POST", "/v1/node/enrol", AUTH_NONE},
};

static enum http_auth expected_auth(const struct route *r) {
  for (size_t i = 0; i < sizeof exceptions / sizeof exceptions[0]; i++)
    if (strcmp(exceptions[i].method, r->method) == 0 &&
        strcmp(exceptions[i].pattern, r->pattern) == 0)
      return exceptions[i].auth;
  if (strncmp(r->pattern, "/v1/node/", 9) == 0) return AUTH_NODE;
  if (strncmp(r->pattern, "/v1/", 4) != 0) return AUTH_NONE;
  return strcmp(r->method, "GET") == 0 ? AUTH_READ : AUTH_ADMIN;
}

static void test_auth_kinds_follow_the_prefix(void **state) {
  int total = 0;
  for (const struct route *const *t = api_tables; *t; t++)
    for (const struct route *r = *t; r->method; r++) {
      enum http_auth want = expected_auth(r);
      if (r->auth != want)
        fail_msg("%s %s has auth %d, want %d", r->method, r->pattern, (int)r->auth, (int)want);
      assert_non_null(r->fn);
      total++;
    }
  assert_true(total >= 10);
}

/* The role order of docs/design.md#rest-api and the kinds of token. */
static void test_authorize(void **state) {
  static const enum http_auth roles[] = {AUTH_READ, AUTH_OPERATOR, AUTH_ADMIN};
  (void)state;
  for (int need = 0; need < 3; need++)
    for (int have = 0; have < 3; have++)
      assert_int_equal(route_authorize(roles[need], roles[have]),
                       have >= need ? ROUTE_ALLOW : ROUTE_FORBIDDEN_ROLE);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(route_authorize(roles[i], AUTH_NODE), ROUTE_WRONG_KIND);
    assert_int_equal(route_authorize(AUTH_NODE, roles[i]), ROUTE_WRONG_KIND);
    assert_int_equal(route_authorize(AUTH_NONE, roles[i]), ROUTE_ALLOW);
    assert_int_equal(route_authorize(roles[i], AUTH_NONE), ROUTE_WRONG_KIND);
  }
  assert_int_equal(route_authorize(AUTH_NODE, AUTH_NODE), ROUTE_ALLOW);
  assert_int_equal(route_authorize(AUTH_NONE, AUTH_NODE), ROUTE_ALLOW);
  assert_string_equal(route_role_name(AUTH_READ), "read");
  assert_string_equal(route_role_name(AUTH_OPERATOR), "operator");
  assert_string_equal(route_role_name(AUTH_ADMIN), "admin");
  assert_null(route_role_name(AUTH_NODE));
  assert_int_equal(route_role_parse("operator"), AUTH_OPERATOR);
  assert_int_equal(route_role_parse("read"), AUTH_READ);
  assert_int_equal(route_role_parse("admin"), AUTH_ADMIN);
  assert_int_equal(route_role_parse("Admin"), AUTH_NONE);
  assert_int_equal(route_role_parse("node"), AUTH_NONE);
  assert_int_equal(route_role_parse(NULL), AUTH_NONE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_written_route_is_served),
      cmocka_unit_test(test_auth_kinds_follow_the_prefix),
      cmocka_unit_test(test_authorize),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
