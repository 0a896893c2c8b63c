/* Unit tests for noded/sitecfg: parse, validation, delta apply, Host lookup, round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sitecfg.h"

static const char *FULL =
    "{\"seq\": 7, \"full\": true, \"deleted\": [], \"sites\": ["
    "{\"id\": 1, \"name\": \"shop\", \"hostnames\": [\"Shop.Example.com\", \"www.shop.test\"],"
    " \"config_version\": 3, \"current_level\": 1, \"extra\": 1,"
    " \"origins\": [{\"id\": 10, \"level\": 1, \"address\": \"127.0.0.1\", \"port\": 8080,"
    "   \"scheme\": \"http\", \"host_header\": null, \"weight\": 3},"
    "  {\"id\": 11, \"level\": 2, \"address\": \"origin.shop.test\", \"port\": 443,"
    "   \"scheme\": \"https\", \"host_header\": \"origin.shop.test\", \"weight\": 1}],"
    " \"node_retry\": {\"retries\": 1, \"retry_budget_ms\": 5000, \"fail_count\": 4,"
    "   \"fail_window_ms\": 2000, \"skip_ms\": 300, \"half_open_requests\": 2,"
    "   \"retry_on_status\": [502, 503]}},"
    "{\"id\": 2, \"name\": \"blog\", \"hostnames\": [\"blog.test\"], \"config_version\": 1,"
    " \"current_level\": 1, \"origins\": [{\"id\": 20, \"level\": 1, \"address\": \"::1\","
    " \"port\": 80, \"scheme\": \"http\"}]}]}";

static struct sitecfg_set *load(const char *json) {
  char err[256] = "";
  struct sitecfg_set *s = sitecfg_load(json, strlen(json), err, sizeof err);
  if (!s) fprintf(stderr, "load error: %s\n", err);
  return s;
}

static void test_parse_valid(void **state) {
  struct sitecfg_set *s = load(FULL);
  struct sitecfg_site *site;
  assert_non_null(s);
  assert_int_equal(s->seq, 7);
  assert_int_equal(s->n_sites, 2);
  site = sitecfg_find(s, 1);
  assert_non_null(site);
  assert_string_equal(site->name, "shop");
  assert_int_equal(site->n_hostnames, 2);
  assert_string_equal(site->hostnames[0], "shop.example.com");
  assert_int_equal(site->config_version, 3);
  assert_int_equal(site->current_level, 1);
  assert_int_equal(site->n_origins, 2);
  assert_int_equal(site->origins[0].id, 10);
  assert_int_equal(site->origins[0].weight, 3);
  assert_null(site->origins[0].host_header);
  assert_int_equal(site->origins[0].https, 0);
  assert_int_equal(site->origins[1].https, 1);
  assert_string_equal(site->origins[1].host_header, "origin.shop.test");
  assert_int_equal(site->retry.retries, 1);
  assert_int_equal(site->retry.retry_budget_ms, 5000);
  assert_int_equal(site->retry.fail_count, 4);
  assert_int_equal(site->retry.fail_window_ms, 2000);
  assert_int_equal(site->retry.skip_ms, 300);
  assert_int_equal(site->retry.half_open_requests, 2);
  assert_int_equal(site->retry.n_retry_on_status, 2);
  assert_int_equal(site->retry.retry_on_status[1], 503);
  /* defaults */
  site = sitecfg_find(s, 2);
  assert_non_null(site);
  assert_int_equal(site->origins[0].weight, 1);
  assert_int_equal(site->retry.retries, 2);
  assert_int_equal(site->retry.skip_ms, 30000);
  assert_int_equal(site->retry.n_retry_on_status, 3);
  assert_null(sitecfg_find(s, 3));
  sitecfg_set_unref(s);
}

/* Replace the first occurrence of from in FULL with to and expect a parse error naming field. */
static void expect_reject(const char *from, const char *to, const char *field) {
  char doc[4096], err[256] = "";
  const char *p = strstr(FULL, from);
  struct sitecfg_update *u = NULL;
  size_t pre;
  assert_non_null(p);
  pre = (size_t)(p - FULL);
  snprintf(doc, sizeof doc, "%.*s%s%s", (int)pre, FULL, to, p + strlen(from));
  assert_int_equal(sitecfg_parse(doc, strlen(doc), &u, err, sizeof err), -1);
  assert_null(u);
  if (!strstr(err, field)) fprintf(stderr, "error '%s' does not name '%s'\n", err, field);
  assert_non_null(strstr(err, field));
}

static void test_reject_each_field(void **state) {
  char err[256];
  struct sitecfg_update *u = NULL;
  assert_int_equal(sitecfg_parse("nope", 4, &u, err, sizeof err), -1);
  assert_int_equal(sitecfg_parse("[]", 2, &u, err, sizeof err), -1);
  expect_reject("\"seq\": 7", "\"seq\": -1", "seq");
  expect_reject("\"seq\": 7", "\"seq\": \"7\"", "seq");
  expect_reject("\"full\": true", "\"full\": 1", "full");
  expect_reject("\"deleted\": []", "\"deleted\": [0]", "deleted[0]");
  expect_reject("\"deleted\": []", "\"deleted\": {}", "deleted");
  expect_reject("\"id\": 1,", "\"id\": 0,", "sites[0].id");
  expect_reject("\"name\": \"shop\"", "\"name\": \"\"", "sites[0].name");
  expect_reject("\"name\": \"shop\"", "\"name\": 5", "sites[0].name");
  expect_reject("[\"Shop.Example.com\",", "[\"bad host\",", "sites[0].hostnames[0]");
  expect_reject("[\"Shop.Example.com\", \"www.shop.test\"]", "[]", "sites[0].hostnames");
  expect_reject("\"config_version\": 3", "\"config_version\": 1.5", "sites[0].config_version");
  expect_reject("\"current_level\": 1, \"extra\"", "\"current_level\": 0, \"extra\"",
                "sites[0].current_level");
  expect_reject("\"id\": 10", "\"id\": \"10\"", "sites[0].origins[0].id");
  expect_reject("\"level\": 1, \"address\": \"127", "\"level\": 17, \"address\": \"127",
                "sites[0].origins[0].level");
  expect_reject("\"127.0.0.1\"", "\"no spaces\"", "sites[0].origins[0].address");
  expect_reject("\"port\": 8080", "\"port\": 70000", "sites[0].origins[0].port");
  expect_reject("\"scheme\": \"http\", \"host_header\": null",
                "\"scheme\": \"ftp\", \"host_header\": null", "sites[0].origins[0].scheme");
  expect_reject("\"host_header\": null", "\"host_header\": 3", "sites[0].origins[0].host_header");
  expect_reject("\"weight\": 3", "\"weight\": 0", "sites[0].origins[0].weight");
  expect_reject("\"id\": 11", "\"id\": 10", "sites[0].origins[1].id");
  expect_reject("\"retries\": 1", "\"retries\": 11", "sites[0].node_retry.retries");
  expect_reject("\"retry_budget_ms\": 5000", "\"retry_budget_ms\": -5",
                "sites[0].node_retry.retry_budget_ms");
  expect_reject("\"fail_count\": 4", "\"fail_count\": 0", "sites[0].node_retry.fail_count");
  expect_reject("\"fail_window_ms\": 2000", "\"fail_window_ms\": null",
                "sites[0].node_retry.fail_window_ms");
  expect_reject("\"skip_ms\": 300", "\"skip_ms\": 0", "sites[0].node_retry.skip_ms");
  expect_reject("\"half_open_requests\": 2", "\"half_open_requests\": 0",
                "sites[0].node_retry.half_open_requests");
  expect_reject("[502, 503]", "[502, 99]", "sites[0].node_retry.retry_on_status[1]");
  expect_reject("\"node_retry\": {", "\"node_retry\": 5, \"x\": {", "sites[0].node_retry");
  expect_reject("{\"id\": 2,", "{\"id\": 1,", "sites[1].id");
  expect_reject("\"origins\": [{\"id\": 20", "\"origins\": 5, \"o\": [{\"id\": 20",
                "sites[1].origins");
}

static const char *DELTA =
    "{\"seq\": 8, \"full\": false, \"deleted\": [2], \"sites\": ["
    "{\"id\": 1, \"name\": \"shop\", \"hostnames\": [\"shop.example.com\"], \"config_version\": 4,"
    " \"current_level\": 2, \"origins\": []},"
    "{\"id\": 3, \"name\": \"new\", \"hostnames\": [\"new.test\"], \"config_version\": 1,"
    " \"current_level\": 1, \"origins\": []}]}";

static void test_delta_apply(void **state) {
  struct sitecfg_set *a = load(FULL), *b;
  struct sitecfg_update *u = NULL;
  char err[256];
  assert_non_null(a);
  assert_int_equal(sitecfg_parse(DELTA, strlen(DELTA), &u, err, sizeof err), 0);
  b = sitecfg_apply(a, u);
  sitecfg_update_free(&u);
  assert_null(u);
  assert_non_null(b);
  assert_int_equal(b->seq, 8);
  assert_int_equal(b->n_sites, 2);
  assert_int_equal(sitecfg_find(b, 1)->config_version, 4);
  assert_int_equal(sitecfg_find(b, 1)->current_level, 2);
  assert_null(sitecfg_find(b, 2));
  assert_non_null(sitecfg_find(b, 3));
  assert_null(sitecfg_lookup(b, "www.shop.test", 13)); /* dropped by the update */
  /* the old snapshot is untouched */
  assert_int_equal(a->n_sites, 2);
  assert_int_equal(sitecfg_find(a, 1)->config_version, 3);
  assert_non_null(sitecfg_find(a, 2));
  sitecfg_set_unref(a);
  /* b still works after a is gone */
  assert_string_equal(sitecfg_lookup(b, "new.test", 8)->name, "new");
  /* a full update replaces everything */
  {
    const char *full2 = "{\"seq\": 9, \"full\": true, \"sites\": []}";
    struct sitecfg_set *c;
    assert_int_equal(sitecfg_parse(full2, strlen(full2), &u, err, sizeof err), 0);
    c = sitecfg_apply(b, u);
    sitecfg_update_free(&u);
    assert_non_null(c);
    assert_int_equal(c->n_sites, 0);
    assert_null(sitecfg_lookup(c, "new.test", 8));
    sitecfg_set_unref(c);
  }
  sitecfg_set_unref(b);
}

static void test_host_lookup(void **state) {
  struct sitecfg_set *s = load(FULL);
  struct sitecfg_site *site;
  assert_non_null(s);
  site = sitecfg_lookup(s, "shop.example.com", 16);
  assert_non_null(site);
  assert_int_equal(site->id, 1);
  assert_ptr_equal(sitecfg_lookup(s, "SHOP.example.COM", 16), site);
  assert_ptr_equal(sitecfg_lookup(s, "shop.example.com:8080", 21), site);
  assert_ptr_equal(sitecfg_lookup(s, "shop.example.com.", 17), site);
  assert_ptr_equal(sitecfg_lookup(s, "www.shop.test", 13), site);
  /* length is honoured: no NUL needed */
  assert_ptr_equal(sitecfg_lookup(s, "blog.testXYZ", 9)->id == 2 ? site : NULL, site);
  assert_null(sitecfg_lookup(s, "example.com", 11));
  assert_null(sitecfg_lookup(s, "", 0));
  assert_null(sitecfg_lookup(s, ":80", 3));
  assert_null(sitecfg_lookup(s, "[::1]:80", 8));
  sitecfg_set_unref(s);
}

static void test_duplicate_hostname_lower_id(void **state) {
  const char *doc =
      "{\"seq\": 1, \"full\": true, \"sites\": ["
      "{\"id\": 5, \"name\": \"b\", \"hostnames\": [\"x.test\"], \"config_version\": 1,"
      " \"current_level\": 1, \"origins\": []},"
      "{\"id\": 4, \"name\": \"a\", \"hostnames\": [\"x.test\"], \"config_version\": 1,"
      " \"current_level\": 1, \"origins\": []}]}";
  struct sitecfg_set *s = load(doc);
  assert_non_null(s);
  assert_int_equal(sitecfg_lookup(s, "x.test", 6)->id, 4);
  sitecfg_set_unref(s);
}

static void test_round_trip(void **state) {
  struct sitecfg_set *a = load(FULL), *b;
  struct buf o1, o2;
  buf_init(&o1, 0);
  buf_init(&o2, 0);
  assert_non_null(a);
  assert_int_equal(sitecfg_serialize(a, &o1), 0);
  b = load(o1.data);
  assert_non_null(b);
  assert_int_equal(sitecfg_serialize(b, &o2), 0);
  assert_string_equal(o1.data, o2.data);
  assert_int_equal(b->seq, 7);
  assert_int_equal(b->n_sites, 2);
  assert_int_equal(sitecfg_find(b, 1)->retry.half_open_requests, 2);
  assert_string_equal(sitecfg_find(b, 1)->origins[1].host_header, "origin.shop.test");
  assert_null(sitecfg_find(b, 1)->origins[0].host_header);
  assert_non_null(strstr(o1.data, "\"full\":true"));
  sitecfg_set_unref(a);
  sitecfg_set_unref(b);
  buf_fini(&o1);
  buf_fini(&o2);
  /* the empty snapshot serialises too */
  a = sitecfg_empty();
  buf_init(&o1, 0);
  assert_int_equal(sitecfg_serialize(a, &o1), 0);
  b = load(o1.data);
  assert_non_null(b);
  assert_int_equal(b->n_sites, 0);
  sitecfg_set_unref(a);
  sitecfg_set_unref(b);
  buf_fini(&o1);
}

static void test_origin_identity(void **state) {
  struct sitecfg_origin a = {10, 1, "10.0.0.1", 80, 0, NULL, 1};
  struct sitecfg_origin b = a;
  assert_int_equal(sitecfg_origin_same(&a, &b), 1);
  b.weight = 5;
  b.level = 2;
  b.host_header = "h.test";
  assert_int_equal(sitecfg_origin_same(&a, &b), 1); /* routing changes keep skip state */
  b.port = 81;
  assert_int_equal(sitecfg_origin_same(&a, &b), 0);
  b = a;
  b.https = 1;
  assert_int_equal(sitecfg_origin_same(&a, &b), 0);
  b = a;
  b.address = "10.0.0.2";
  assert_int_equal(sitecfg_origin_same(&a, &b), 0);
}

/* An origin's description is for people: the node never refuses a config for it (it did not
   read the key before the decoder was shared with controld), and config.json writes it empty. */
static void test_description_never_refuses(void **state) {
  static const char *const values[] = {"\"shop origin\"", "5", "null", "\"a\\u0001\"", "{}"};
  char doc[4096];
  struct buf out;
  (void)state;
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    const char *at = strstr(FULL, "\"weight\": 3}");
    struct sitecfg_set *s;
    assert_non_null(at);
    snprintf(doc, sizeof doc, "%.*s\"weight\": 3, \"description\": %s}%s", (int)(at - FULL), FULL,
             values[i], at + strlen("\"weight\": 3}"));
    s = load(doc);
    assert_non_null(s);
    buf_init(&out, 0);
    assert_int_equal(sitecfg_serialize(s, &out), 0);
    assert_non_null(strstr(out.data, "\"weight\":3,\"description\":\"\"}"));
    buf_fini(&out);
    sitecfg_set_unref(s);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_description_never_refuses),
      cmocka_unit_test(test_parse_valid),
      cmocka_unit_test(test_reject_each_field),
      cmocka_unit_test(test_delta_apply),
      cmocka_unit_test(test_host_lookup),
      cmocka_unit_test(test_duplicate_hostname_lower_id),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_origin_identity),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
