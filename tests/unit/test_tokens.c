/* Unit tests for controld/store_tokens (API tokens, expiry, the lookup cache, the bootstrap
   token) and common/clock's RFC 3339 parser used for expires_at. */
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "log.h"
#include "store.h"
#include "store_core.h"
#include "store_tokens.h"

#define T0 1800000000000LL

static void test_parse_iso(void **state) {
  int64_t v = 0;
  char back[40];
  (void)state;
  assert_int_equal(clock_parse_iso("1970-01-01T00:00:00Z", &v), 0);
  assert_int_equal(v, 0);
  assert_int_equal(clock_parse_iso("2027-01-31T12:34:56Z", &v), 0);
  clock_format_iso(v, back, sizeof back);
  assert_string_equal(back, "2027-01-31T12:34:56Z");
  assert_int_equal(clock_parse_iso("2024-02-29T00:00:00.5z", &v), 0); /* leap day, fraction */
  assert_int_equal(v % 1000, 500);
  assert_int_equal(clock_parse_iso("2027-01-31t12:34:56.123456789+02:30", &v), 0);
  clock_format_iso(v, back, sizeof back);
  assert_string_equal(back, "2027-01-31T10:04:56Z");
  assert_int_equal(v % 1000, 123);
  assert_int_equal(clock_parse_iso("2027-01-31T12:34:56-01:00", &v), 0);
  clock_format_iso(v, back, sizeof back);
  assert_string_equal(back, "2027-01-31T13:34:56Z");
  v = 42;
  static const char *const bad[] = {"",
                                    "2027-01-31",
                                    "2027-01-31T12:34:56",
                                    "2027-01-31 12:34:56Z",
                                    "2027-13-01T00:00:00Z",
                                    "2023-02-29T00:00:00Z",
                                    "2027-04-31T00:00:00Z",
                                    "2027-01-31T24:00:00Z",
                                    "2027-01-31T23:60:00Z",
                                    "2027-01-31T23:59:60Z",
                                    "1969-12-31T23:59:59Z",
                                    "2027-01-31T12:34:56.Z",
                                    "2027-01-31T12:34:56Zx",
                                    "2027-01-31T12:34:56+0100",
                                    "2027-01-31T12:34:56+24:00",
                                    "27-01-31T12:34:56Z",
                                    "2027-1-31T12:34:56Z",
                                    "1970-01-01T00:00:00+00:01",
                                    "2027-01-31T12:34:56.1234567890Z",
                                    "+027-01-31T12:34:56Z"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (clock_parse_iso(bad[i], &v) == 0) fail_msg("accepted '%s'", bad[i]);
    assert_int_equal(v, 42);
  }
  assert_int_equal(clock_parse_iso(NULL, &v), -1);
}

struct fx {
  char dir[64];
  char path[128];
  struct store *st;
};

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof *f);
  if (!f) return -1;
  log_init("test_tokens", LOG_TEXT, LOG_ERROR);
  snprintf(f->dir, sizeof f->dir, "/tmp/cdnca-test-tokens-XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->path, sizeof f->path, "%s/t.db", f->dir);
  f->st = store_open(f->path);
  if (!f->st) return -1;
  clock_set_fake_ms(T0);
  *state = f;
  return 0;
}

/* Remove a SQLite database file and its WAL and shared-memory files. */
static void unlink_db(const char *path) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s-wal", path);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", path);
  unlink(p);
  unlink(path);
}

static int teardown(void **state) {
  struct fx *f = *state;
  clock_set_fake_ms(-1);
  store_close(&f->st);
  unlink_db(f->path);
  rmdir(f->dir);
  free(f);
  return 0;
}

static const char H_BOOT[] = "1111111111111111111111111111111111111111111111111111111111111111";
static const char H_BOOT2[] = "2222222222222222222222222222222222222222222222222222222222222222";
static const char H_OPS[] = "3333333333333333333333333333333333333333333333333333333333333333";
static const char H_TMP[] = "4444444444444444444444444444444444444444444444444444444444444444";

static struct token_rec tok(const char *name, const char *role, int64_t expires_at) {
  struct token_rec t;
  memset(&t, 0, sizeof t);
  snprintf(t.name, sizeof t.name, "%s", name);
  snprintf(t.role, sizeof t.role, "%s", role);
  t.expires_at = expires_at;
  return t;
}

static void test_create_lookup_expire_delete(void **state) {
  struct fx *f = *state;
  struct token_auth a;
  struct token_rec t = tok("ops", "operator", 0), t2 = tok("tmp", "read", T0 + 5000),
                   dup = tok("ops", "read", 0), *arr = NULL;
  int n = 0;
  assert_int_equal(store_admin_token_set(f->st, H_BOOT), 0);
  assert_int_equal(store_token_auth(f->st, H_BOOT, T0, &a), 0);
  assert_int_equal(a.kind, STORE_TOKEN_ADMIN);
  assert_string_equal(a.role, "admin");
  assert_string_equal(a.name, "bootstrap");
  assert_int_equal(store_token_create(f->st, &t, H_OPS), STORE_OK);
  assert_true(t.id > 0 && t.created_at == T0);
  assert_int_equal(store_token_create(f->st, &t2, H_TMP), STORE_OK);
  assert_int_equal(store_token_create(f->st, &dup, H_TMP), STORE_CONFLICT); /* name taken */
  assert_int_equal(store_token_auth(f->st, H_OPS, T0, &a), 0);
  assert_string_equal(a.role, "operator");
  assert_string_equal(a.name, "ops");
  assert_int_equal(a.token_id, t.id);
  assert_int_equal(a.expires_at, 0);
  /* expiry: live before, gone at and after (cached or not) */
  assert_int_equal(store_token_auth(f->st, H_TMP, T0 + 4999, &a), 0);
  assert_int_equal(store_token_auth(f->st, H_TMP, T0 + 5000, &a), 1);
  store_token_cache_clear(f->st);
  assert_int_equal(store_token_auth(f->st, H_TMP, T0 + 6000, &a), 1);
  assert_int_equal(store_token_list(f->st, T0, &arr, &n), STORE_OK);
  assert_int_equal(n, 3);
  assert_string_equal(arr[0].name, "bootstrap");
  assert_string_equal(arr[2].name, "tmp");
  assert_int_equal(arr[2].expires_at, T0 + 5000);
  free(arr);
  assert_int_equal(store_token_list(f->st, T0 + 5000, &arr, &n), STORE_OK);
  assert_int_equal(n, 2); /* the expired one is not listed */
  free(arr);
  /* delete: the cached entry goes with it */
  assert_int_equal(store_token_auth(f->st, H_OPS, T0, &a), 0);
  assert_int_equal(store_token_delete(f->st, t.id), STORE_OK);
  assert_int_equal(store_token_auth(f->st, H_OPS, T0, &a), 1);
  assert_int_equal(store_token_delete(f->st, t.id), STORE_NOT_FOUND);
  /* unknown */
  assert_int_equal(store_token_auth(f->st, H_BOOT2, T0, &a), 1);
}

static void test_cache_is_bounded_in_time(void **state) {
  struct fx *f = *state;
  struct token_auth a;
  struct token_rec t = tok("ops", "admin", 0);
  struct store *other;
  assert_int_equal(store_token_create(f->st, &t, H_OPS), STORE_OK);
  assert_int_equal(store_token_auth(f->st, H_OPS, T0, &a), 0); /* now cached */
  /* revoked through another connection (another controld on the same database): this cache
     still trusts it briefly, never longer than STORE_TOKEN_CACHE_MS */
  other = store_open(f->path);
  assert_non_null(other);
  assert_int_equal(store_token_delete(other, t.id), STORE_OK);
  store_close(&other);
  assert_int_equal(store_token_auth(f->st, H_OPS, T0, &a), 0);
  clock_set_fake_ms(T0 + STORE_TOKEN_CACHE_MS);
  assert_int_equal(store_token_auth(f->st, H_OPS, T0 + STORE_TOKEN_CACHE_MS, &a), 1);
}

static void test_bootstrap_rotation_keeps_api_tokens(void **state) {
  struct fx *f = *state;
  struct token_auth a;
  struct token_rec t = tok("ops", "read", 0), b = tok("bootstrap", "admin", 0);
  assert_int_equal(store_admin_token_set(f->st, H_BOOT), 0);
  assert_int_equal(store_token_create(f->st, &t, H_OPS), STORE_OK);
  assert_int_equal(store_token_create(f->st, &b, H_TMP), STORE_CONFLICT); /* name reserved */
  assert_int_equal(store_admin_token_set(f->st, H_BOOT), 0);              /* same: kept */
  assert_int_equal(store_token_auth(f->st, H_BOOT, T0, &a), 0);
  assert_int_equal(store_admin_token_set(f->st, H_BOOT2), 0);
  assert_int_equal(store_token_auth(f->st, H_BOOT, T0, &a), 1);
  assert_int_equal(store_token_auth(f->st, H_BOOT2, T0, &a), 0);
  assert_string_equal(a.name, "bootstrap");
  assert_int_equal(store_token_auth(f->st, H_OPS, T0, &a), 0);
  assert_string_equal(a.role, "read");
}

/* A lookup on a thread that has no reader yet, while the database cannot be opened. */
struct fresh_lookup {
  struct fx *f;
  struct store *other; /* a second store the thread also reads, or NULL */
  int auth, up;
  int other_auth, other_up; /* the same on the other store, after the first */
};

static void *fresh_thread(void *arg) {
  struct fresh_lookup *l = arg;
  struct token_auth a;
  l->auth = store_token_auth(l->f->st, H_TMP, T0, &a);
  l->up = store_db_up(l->f->st);
  if (l->other) {
    l->other_auth = store_token_auth(l->other, H_TMP, T0, &a);
    l->other_up = store_db_up(l->other);
    l->up = store_db_up(l->f->st); /* the other store's open does not clear this one's */
  }
  return NULL;
}

static void lookup_on_new_thread(struct fx *f, struct fresh_lookup *l) {
  pthread_t th;
  l->f = f;
  assert_int_equal(pthread_create(&th, NULL, fresh_thread, l), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
}

/* A thread whose reader cannot be opened (the server refuses new connections) sees the database
   as unavailable, so a request it serves gets 503 db_unavailable, not 500, even before a write
   has noticed; the threads with a reader, and the thread once it can open one, see it up. */
static void test_reader_that_cannot_open_is_db_down(void **state) {
  struct fx *f = *state;
  struct fresh_lookup l = {0};
  char away[160], other_path[160];
  snprintf(away, sizeof away, "%s.away", f->path);
  snprintf(other_path, sizeof other_path, "%s/other.db", f->dir);
  lookup_on_new_thread(f, &l);
  assert_int_equal(l.auth, 1); /* unknown token, database up */
  assert_int_equal(l.up, 1);
  assert_int_equal(rename(f->path, away), 0);
  assert_int_equal(mkdir(f->path, 0700), 0); /* a new connection cannot open a directory */
  /* the mark is this store's: a second store on the same thread opens its reader and is up */
  l.other = store_open(other_path);
  assert_non_null(l.other);
  lookup_on_new_thread(f, &l);
  assert_int_equal(l.auth, -1);
  assert_int_equal(l.up, 0);
  assert_int_equal(l.other_auth, 1);
  assert_int_equal(l.other_up, 1);
  store_close(&l.other);
  unlink_db(other_path);
  assert_int_equal(store_db_up(f->st), 1); /* this thread has no failed open */
  assert_int_equal(rmdir(f->path), 0);
  assert_int_equal(rename(away, f->path), 0);
  lookup_on_new_thread(f, &l);
  assert_int_equal(l.auth, 1);
  assert_int_equal(l.up, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_iso),
      cmocka_unit_test_setup_teardown(test_create_lookup_expire_delete, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cache_is_bounded_in_time, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bootstrap_rotation_keeps_api_tokens, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reader_that_cannot_open_is_db_down, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
