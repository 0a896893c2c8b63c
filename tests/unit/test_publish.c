/* test_publish — node config snapshots (full, delta, tombstones, reset) and their JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "json.h"
#include "model.h"
#include "publish.h"
#include "sitewire.h"
#include "store_node.h"
#include "store_sites.h"

struct fx {
  char dir[64];
  char path[128];
  struct store *st;
};

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof *f);
  memcpy(f->dir, "/tmp/test_publish.XXXXXX", 25);
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->path, sizeof f->path, "%s/c.db", f->dir);
  f->st = store_open(f->path);
  if (!f->st) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  char p[160];
  store_close(&f->st);
  snprintf(p, sizeof p, "rm -rf '%s'", f->dir);
  if (system(p) != 0) return -1;
  free(f);
  return 0;
}

/* Create a site named name with one enabled origin at level 1 and one disabled at level 2. */
static int64_t make_site(struct store *st, const char *name, const char *host) {
  struct site_rec s;
  char conflict[64];
  site_rec_defaults(&s);
  memcpy(s.name, name, strlen(name) + 1);
  s.n_hostnames = 1;
  memcpy(s.hostnames[0], host, strlen(host) + 1);
  s.origins = calloc(2, sizeof *s.origins);
  s.n_origins = 2;
  for (int i = 0; i < 2; i++) {
    s.origins[i].level = i + 1;
    s.origins[i].port = 8080 + i;
    s.origins[i].weight = 1;
    s.origins[i].enabled = i == 0;
    memcpy(s.origins[i].address, "127.0.0.1", 10);
    s.origins[i].scheme = SCHEME_HTTP;
  }
  assert_int_equal(store_site_create(st, &s, conflict, sizeof conflict), STORE_OK);
  site_rec_fini(&s);
  return s.id;
}

static cJSON *blob_json(struct pub_blob *b) {
  cJSON *j = json_parse(pub_blob_data(b), pub_blob_len(b));
  assert_non_null(j);
  return j;
}

static int64_t num(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  assert_true(cJSON_IsNumber(v));
  return (int64_t)v->valuedouble;
}

static void test_full_delta_tombstone(void **state) {
  struct fx *f = *state;
  struct config_snapshot snap;
  int64_t a = make_site(f->st, "a", "a.test"), b = make_site(f->st, "b", "b.test");
  struct site_rec s;
  char conflict[64];

  /* nothing newer than the newest seq */
  assert_int_equal(store_config_snapshot(f->st, 2, &snap), STORE_OK);
  assert_int_equal(snap.seq, 2);
  assert_int_equal(snap.n_sites, 0);
  store_config_snapshot_free(&snap);

  assert_int_equal(store_config_snapshot(f->st, 0, &snap), STORE_OK);
  assert_int_equal(snap.full, 1);
  assert_int_equal(snap.n_sites, 2);
  store_config_snapshot_free(&snap);

  /* change b, delete a: a delta since 2 names b and the tombstone of a */
  assert_int_equal(store_site_get(f->st, b, &s), STORE_OK);
  memcpy(s.name, "b2", 3);
  assert_int_equal(store_site_update(f->st, &s, conflict, sizeof conflict), STORE_OK);
  site_rec_fini(&s);
  assert_int_equal(store_site_delete(f->st, a), STORE_OK);
  assert_int_equal(store_config_snapshot(f->st, 2, &snap), STORE_OK);
  assert_int_equal(snap.seq, 4);
  assert_int_equal(snap.full, 0);
  assert_int_equal(snap.n_sites, 1);
  assert_int_equal(snap.sites[0].id, b);
  assert_string_equal(snap.sites[0].name, "b2");
  assert_int_equal(snap.n_deleted, 1);
  assert_int_equal(snap.deleted[0], a);
  store_config_snapshot_free(&snap);

  /* a node ahead of the database (reset) gets the full set */
  assert_int_equal(store_config_snapshot(f->st, 99, &snap), STORE_OK);
  assert_int_equal(snap.full, 1);
  assert_int_equal(snap.seq, 4);
  assert_int_equal(snap.n_sites, 1);
  assert_int_equal(snap.n_deleted, 0);
  store_config_snapshot_free(&snap);
}

static void test_json_and_cache(void **state) {
  struct fx *f = *state;
  struct publish *p = publish_new(f->st);
  int64_t id = make_site(f->st, "shop", "shop.test");
  struct pub_blob *b1, *b2, *b3;
  cJSON *j, *sites, *site, *origins, *o, *nr;
  assert_non_null(p);
  b1 = publish_get(p, 0);
  b2 = publish_get(p, 0);
  assert_non_null(b1);
  assert_ptr_equal(b1, b2); /* one build shared by every node asking the same */
  assert_int_equal(pub_blob_seq(b1), 1);
  assert_int_equal(pub_blob_full(b1), 1);
  j = blob_json(b1);
  assert_int_equal(num(j, "seq"), 1);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "full")));
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "deleted")), 0);
  sites = cJSON_GetObjectItemCaseSensitive(j, "sites");
  assert_int_equal(cJSON_GetArraySize(sites), 1);
  site = cJSON_GetArrayItem(sites, 0);
  assert_int_equal(num(site, "id"), id);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(site, "name")->valuestring, "shop");
  assert_int_equal(num(site, "config_version"), 1);
  assert_int_equal(num(site, "current_level"), 1);
  assert_string_equal(
      cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(site, "hostnames"), 0)->valuestring,
      "shop.test");
  origins = cJSON_GetObjectItemCaseSensitive(site, "origins");
  assert_int_equal(cJSON_GetArraySize(origins), 1); /* the disabled origin is not published */
  o = cJSON_GetArrayItem(origins, 0);
  assert_int_equal(num(o, "level"), 1);
  assert_int_equal(num(o, "port"), 8080);
  assert_int_equal(num(o, "weight"), 1);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "scheme")->valuestring, "http");
  assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "host_header")));
  assert_null(cJSON_GetObjectItemCaseSensitive(o, "enabled"));
  nr = cJSON_GetObjectItemCaseSensitive(site, "node_retry");
  assert_int_equal(num(nr, "retries"), 2);
  assert_int_equal(num(nr, "retry_budget_ms"), 15000);
  assert_int_equal(num(nr, "fail_count"), 3);
  assert_int_equal(num(nr, "fail_window_ms"), 10000);
  assert_int_equal(num(nr, "skip_ms"), 30000);
  assert_int_equal(num(nr, "half_open_requests"), 1);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(nr, "retry_on_status")), 3);
  cJSON_Delete(j);

  /* after a publication the cached answer is not reused */
  assert_int_equal(store_site_delete(f->st, id), STORE_OK);
  b3 = publish_get(p, 1);
  assert_non_null(b3);
  assert_ptr_not_equal(b3, b1);
  assert_int_equal(pub_blob_seq(b3), 2);
  j = blob_json(b3);
  assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "full")));
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "sites")), 0);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "deleted")), 1);
  assert_int_equal(
      (int64_t)cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "deleted"), 0)->valuedouble,
      id);
  cJSON_Delete(j);
  pub_blob_unref(b1);
  pub_blob_unref(b2);
  pub_blob_unref(b3);
  publish_free(&p);
  assert_null(p);
}

/* A delta spans at most PUB_DELTA_MAX publications: a node further behind (or ahead) gets the
   full set, the one answer cached for every such node, so cycling through old seqs builds
   nothing new. */
static void test_old_since_gets_the_full_set(void **state) {
  struct fx *f = *state;
  struct publish *p = publish_new(f->st);
  int64_t id = make_site(f->st, "busy", "busy.test"), cur;
  struct pub_blob *full, *b;
  struct site_rec s;
  char conflict[64];
  assert_int_equal(publish_since(0, 0), 0);
  assert_int_equal(publish_since(5, 4), 0);
  assert_int_equal(publish_since(4, 4), 4);
  assert_int_equal(publish_since(1000 - PUB_DELTA_MAX, 1000), 1000 - PUB_DELTA_MAX);
  assert_int_equal(publish_since(999 - PUB_DELTA_MAX, 1000), 0);
  assert_int_equal(publish_since(1, INT64_MAX / 2), 0);
  assert_non_null(p);
  assert_int_equal(store_site_get(f->st, id, &s), STORE_OK);
  for (int i = 0; i < PUB_DELTA_MAX + 10; i++) { /* a publication each */
    snprintf(s.name, sizeof s.name, "busy-%d", i);
    assert_int_equal(store_site_update(f->st, &s, conflict, sizeof conflict), STORE_OK);
  }
  site_rec_fini(&s);
  cur = PUB_DELTA_MAX + 11;
  full = publish_get(p, 0);
  assert_non_null(full);
  assert_int_equal(pub_blob_seq(full), cur);
  for (int64_t since = 1; since < cur - PUB_DELTA_MAX; since++) {
    b = publish_get(p, since);
    assert_ptr_equal(b, full); /* the cached full answer, not a build of its own */
    pub_blob_unref(b);
  }
  b = publish_get(p, cur - PUB_DELTA_MAX);
  assert_non_null(b);
  assert_ptr_not_equal(b, full);
  assert_int_equal(pub_blob_full(b), 0); /* within reach: a delta */
  pub_blob_unref(b);
  pub_blob_unref(full);
  publish_free(&p);
}

/* Every key of the published origin (common/sitewire's table) comes from the origin record's row
   of the same name, and what publish writes the node's decoder reads back as the record holds it,
   row by row. */
static void test_published_origin_decodes(void **state) {
  static const char body[] =
      "{\"level\":2,\"address\":\"Origin.Example.NET\",\"port\":8443,\"scheme\":\"https\","
      "\"host_header\":\"h.example.org\",\"weight\":7,\"description\":\"caf\u00e9 \\\"a\\\"\"}";
  struct fx *f = *state;
  const struct field_def *plan[32];
  const char *missing = NULL;
  struct publish *p = publish_new(f->st);
  struct sitewire_site *w = malloc(sizeof *w);
  struct sitewire_origin want;
  struct sitewire_doc doc;
  struct field_err err;
  struct site_rec s, got;
  struct pub_blob *b;
  const cJSON *sites;
  char conflict[64];
  cJSON *j;
  int n = 0;
  assert_non_null(p);
  assert_non_null(w);
  while (sitewire_origin_fields[n].name)
    n++;
  assert_int_equal(fields_match(sitewire_origin_fields, site_origin_fields, plan, 32, &missing), n);

  site_rec_defaults(&s);
  memcpy(s.name, "shop", 5);
  s.n_hostnames = 1;
  memcpy(s.hostnames[0], "shop.test", 10);
  s.origins = calloc(1, sizeof *s.origins);
  s.n_origins = 1;
  j = json_parse(body, strlen(body));
  assert_non_null(j);
  assert_int_equal(model_origin_apply(j, &s.origins[0], 1, "origins[0]", &err), 0);
  cJSON_Delete(j);
  assert_int_equal(store_site_create(f->st, &s, conflict, sizeof conflict), STORE_OK);
  assert_int_equal(store_site_get(f->st, s.id, &got), STORE_OK);
  site_rec_fini(&s);
  assert_int_equal(fields_copy(sitewire_origin_fields, &want, plan, &got.origins[0]), 0);

  b = publish_get(p, 0);
  assert_non_null(b);
  j = blob_json(b);
  assert_int_equal(sitewire_doc_read(j, &doc, &sites, &err), 0);
  if (sitewire_site_read(cJSON_GetArrayItem(sites, 0), "sites[0]", w, &err) < 0)
    fail_msg("%s: %s", err.field, err.message);
  assert_int_equal(w->n_origins, 1);
  for (const struct field_def *d = sitewire_origin_fields; d->name; d++) {
    const char *x = (const char *)&want + d->offset, *y = (const char *)&w->origins[0] + d->offset;
    int same = d->type == FIELD_INT || d->type == FIELD_BOOL ? memcmp(x, y, d->size) == 0
                                                             : strcmp(x, y) == 0;
    if (!same) fail_msg("published origin key %s does not read back", d->name);
  }
  assert_string_equal(w->origins[0].address, "origin.example.net");
  assert_string_equal(w->origins[0].description, "caf\xc3\xa9 \"a\"");
  assert_int_equal(w->origins[0].id, got.origins[0].id);
  cJSON_Delete(j);
  site_rec_fini(&got);
  pub_blob_unref(b);
  publish_free(&p);
  free(w);
}

/* A site with origins a copy of s's (t's own array; its other members s's). */
static void site_clone(struct site_rec *t, const struct site_rec *s) {
  *t = *s;
  t->origins = malloc((size_t)s->n_origins * sizeof *t->origins);
  assert_non_null(t->origins);
  memcpy(t->origins, s->origins, (size_t)s->n_origins * sizeof *t->origins);
}

/* What nodes are sent decides whether a change is a publication (docs/design.md, Site-config wire
   format): the same site for a change nodes never receive, another for each published key. */
static void test_site_same_as_published(void **state) {
  struct site_rec s, t;
  (void)state;
  site_rec_defaults(&s);
  s.id = 7;
  memcpy(s.name, "shop", 5);
  s.n_hostnames = 1;
  memcpy(s.hostnames[0], "shop.test", 10);
  s.current_level = 1;
  s.origins = calloc(2, sizeof *s.origins);
  s.n_origins = 2;
  for (int i = 0; i < 2; i++) {
    s.origins[i].id = i + 1;
    s.origins[i].level = i + 1;
    s.origins[i].port = 8080 + i;
    s.origins[i].weight = 1;
    s.origins[i].enabled = i == 0; /* the second is disabled: never sent */
    memcpy(s.origins[i].address, "127.0.0.1", 10);
    s.origins[i].scheme = SCHEME_HTTP;
  }
#define SAME(change, want)                                                                         \
  do {                                                                                             \
    site_clone(&t, &s);                                                                            \
    change;                                                                                        \
    if (publish_site_same(&s, &t) != (want)) fail_msg("%s: want same %d", #change, (want));        \
    free(t.origins);                                                                               \
  } while (0)
  SAME((void)0, 1);
  /* not sent to nodes */
  SAME(t.config_version = s.config_version + 5, 1);
  SAME(t.failback = HEALTH_FAILBACK_MANUAL, 1);
  SAME(t.failback_hold_ms = 99, 1);
  SAME(memcpy(t.hc_path, "/other", 7), 1);
  SAME(t.hc_timeout_ms = 1234, 1);
  SAME(t.hc_enabled = !s.hc_enabled, 1);
  SAME(t.revision = s.revision + 1, 1);
  SAME(t.origins[1].port = 9999, 1); /* a disabled origin's */
  SAME(memcpy(t.origins[1].description, "note", 5), 1);
  SAME(t.origins[0].health = HEALTH_UNHEALTHY, 1);
  /* sent */
  SAME(memcpy(t.name, "shop2", 6), 0);
  SAME(memcpy(t.hostnames[0], "shop.example", 13), 0);
  SAME(t.n_hostnames = 0, 0);
  SAME(t.current_level = 2, 0);
  SAME(t.nr_retries = s.nr_retries + 1, 0);
  SAME(t.nr_backup_levels = !s.nr_backup_levels, 0);
  SAME(t.origins[0].port = 9999, 0);
  SAME(t.origins[0].weight = 3, 0);
  SAME(t.origins[0].scheme = SCHEME_HTTPS, 0);
  SAME(memcpy(t.origins[0].host_header, "h.test", 7), 0);
  SAME(memcpy(t.origins[0].description, "note", 5), 0);
  SAME(memcpy(t.origins[0].address, "127.0.0.2", 10), 0);
  SAME(t.origins[0].level = 2, 0);
  SAME(t.origins[1].enabled = 1, 0);
  SAME(t.origins[0].enabled = 0, 0);
  SAME(t.n_origins = 1, 1); /* the disabled one gone: nothing sent changes */
#undef SAME
  site_rec_fini(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_full_delta_tombstone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_json_and_cache, setup, teardown),
      cmocka_unit_test_setup_teardown(test_old_since_gets_the_full_set, setup, teardown),
      cmocka_unit_test_setup_teardown(test_published_origin_decodes, setup, teardown),
      cmocka_unit_test(test_site_same_as_published),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
