/* Unit tests for noded/proxy_state: picks across levels, probe outcomes, re-resolution, the skip
   state metrics (counts by state, untrusted origins in id order, the label cap). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "buf.h"
#include "clock.h"
#include "proxy_state.h"
#include "sitecfg.h"

/* A fake DNS for "localhost": the IPv4 address it answers, the TTL, or a failure. */
static struct {
  const char *ip;
  int have_ttl;
  int64_t ttl_s;
  int fail;
  int calls, ttl_calls;
} dns;

static int fake_resolve(const char *address, int port, int want_ttl, struct resolve_result *out,
                        char *err, size_t errlen) {
  struct sockaddr_in *s4 = (struct sockaddr_in *)&out->sa;
  if (resolve_is_literal(address)) return resolve_origin(address, port, want_ttl, out, err, errlen);
  dns.calls++;
  dns.ttl_calls += want_ttl;
  memset(out, 0, sizeof *out);
  if (dns.fail) {
    snprintf(err, errlen, "cannot resolve %s: fake failure", address);
    return -1;
  }
  s4->sin_family = AF_INET;
  s4->sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, dns.ip, &s4->sin_addr);
  out->salen = sizeof *s4;
  out->have_ttl = want_ttl && dns.have_ttl;
  out->ttl_s = dns.ttl_s;
  return 0;
}

/* The IPv4 address of a pick, as text. */
static const char *pick_ip(const struct proxy_pick *pk, char *buf, size_t cap) {
  const struct sockaddr_in *s4 = (const struct sockaddr_in *)&pk->sa;
  return inet_ntop(AF_INET, &s4->sin_addr, buf, (socklen_t)cap);
}

/* One site, current level `current`: origins 10, 11 on level 1, 20 on level 2, 30 on level 3
 * (30 is a hostname: localhost). */
static struct sitecfg_set *load_ramp(int current, const char *retry, const char *ramp) {
  char json[2048], err[256];
  struct sitecfg_set *s;
  snprintf(json, sizeof json,
           "{\"seq\": 1, \"full\": true, \"sites\": [{\"id\": 1, \"name\": \"s\","
           " \"hostnames\": [\"s.test\"], \"config_version\": 1, \"current_level\": %d,"
           " \"origins\": ["
           "{\"id\": 10, \"level\": 1, \"address\": \"127.0.0.1\", \"port\": 1001, \"scheme\": "
           "\"http\", \"host_header\": null, \"weight\": 1},"
           "{\"id\": 11, \"level\": 1, \"address\": \"127.0.0.1\", \"port\": 1002, \"scheme\": "
           "\"http\", \"host_header\": null, \"weight\": 1},"
           "{\"id\": 20, \"level\": 2, \"address\": \"127.0.0.2\", \"port\": 2001, \"scheme\": "
           "\"http\", \"host_header\": null, \"weight\": 1},"
           "{\"id\": 30, \"level\": 3, \"address\": \"localhost\", \"port\": 3001, \"scheme\": "
           "\"http\", \"host_header\": null, \"weight\": 1}],"
           " \"node_retry\": %s, \"ramp\": %s}]}",
           current, retry, ramp);
  s = sitecfg_load(json, strlen(json), err, sizeof err);
  if (!s) fail_msg("load: %s", err);
  return s;
}

static struct sitecfg_set *load(int current, const char *retry) {
  return load_ramp(current, retry, "null");
}

/* Index in site->origins of origin id. */
static int idx_of(const struct sitecfg_site *site, int64_t id) {
  for (int i = 0; i < site->n_origins; i++)
    if (site->origins[i].id == id) return i;
  fail_msg("no origin %lld", (long long)id);
  return -1;
}

static void skip_origin(struct proxy_state *t, const struct sitecfg_site *site, int64_t id,
                        int64_t now) {
  for (int i = 0; i < site->retry.fail_count; i++)
    proxy_state_record(t, site, idx_of(site, id), now, 1);
}

static void test_pick_goes_to_backup_levels(void **state) {
  struct sitecfg_set *s = load(1, "{}");
  struct sitecfg_site *site = s->sites[0];
  struct proxy_state *t = proxy_state_new();
  struct proxy_pick pk;
  uint64_t tried = 0;
  assert_int_equal(proxy_state_sync(t, s), 0);
  /* one request: both level-1 origins fail, then level 2, then level 3, then nothing */
  for (int k = 0; k < 2; k++) {
    assert_int_equal(proxy_state_pick(t, site, tried, 100, &pk), 0);
    assert_int_equal(pk.level, 1);
    assert_int_equal(pk.backup, 0);
    tried |= UINT64_C(1) << pk.index;
  }
  assert_int_equal(proxy_state_pick(t, site, tried, 100, &pk), 0);
  assert_int_equal(site->origins[pk.index].id, 20);
  assert_int_equal(pk.backup, 1);
  assert_int_equal(pk.fail_open, 0);
  tried |= UINT64_C(1) << pk.index;
  assert_int_equal(proxy_state_pick(t, site, tried, 100, &pk), 0);
  assert_int_equal(site->origins[pk.index].id, 30);
  assert_int_equal(pk.level, 3);
  assert_int_equal(pk.resolved, 1); /* localhost, from /etc/hosts */
  tried |= UINT64_C(1) << pk.index;
  assert_int_equal(proxy_state_pick(t, site, tried, 100, &pk), -1);
  proxy_state_free(&t);
  sitecfg_set_unref(s);
}

static void test_pick_skipped_level_and_never_earlier(void **state) {
  struct sitecfg_set *s = load(2, "{}");
  struct sitecfg_site *site = s->sites[0];
  struct proxy_state *t = proxy_state_new();
  struct proxy_pick pk;
  assert_int_equal(proxy_state_sync(t, s), 0);
  /* current level 2: never level 1 */
  for (int k = 0; k < 4; k++) {
    assert_int_equal(proxy_state_pick(t, site, 0, 100, &pk), 0);
    assert_int_equal(site->origins[pk.index].id, 20);
  }
  skip_origin(t, site, 20, 100);
  assert_int_equal(proxy_state_pick(t, site, 0, 200, &pk), 0);
  assert_int_equal(site->origins[pk.index].id, 30);
  assert_int_equal(pk.backup, 1);
  /* level 3 skipped too: fail open on the current level */
  skip_origin(t, site, 30, 200);
  assert_int_equal(proxy_state_pick(t, site, 0, 300, &pk), 0);
  assert_int_equal(site->origins[pk.index].id, 20);
  assert_int_equal(pk.fail_open, 1);
  proxy_state_free(&t);
  sitecfg_set_unref(s);
}

static void test_pick_backup_levels_off(void **state) {
  struct sitecfg_set *s = load(1, "{\"backup_levels\": false}");
  struct sitecfg_site *site = s->sites[0];
  struct proxy_state *t = proxy_state_new();
  struct proxy_pick pk;
  assert_int_equal(proxy_state_sync(t, s), 0);
  assert_int_equal(site->retry.backup_levels, 0);
  skip_origin(t, site, 10, 100);
  skip_origin(t, site, 11, 100);
  assert_int_equal(proxy_state_pick(t, site, 0, 200, &pk), 0);
  assert_int_equal(pk.level, 1);
  assert_int_equal(pk.fail_open, 1);
  proxy_state_free(&t);
  sitecfg_set_unref(s);
}

/* A ramp from level 3 back to level 1: [10, 50, 100] x 2 s from t0 = 1,000,000 ms. */
#define RAMP31                                                                                     \
  "{\"from_level\": 3, \"to_level\": 1, \"started_at\": 1000000, \"steps\": [10, 50, 100], "       \
  "\"step_ms\": 2000}"

static void test_ramp_start_level(void **state) {
  struct sitecfg_set *s = load_ramp(3, "{}", RAMP31), *other = load_ramp(2, "{}", RAMP31);
  const struct sitecfg_site *site = s->sites[0];
  (void)state;
  assert_int_equal(site->ramp.to_level, 1);
  /* share 10 %: draws 0..9 go to the ramp level */
  assert_int_equal(proxy_state_start_level(site, 1000000, 0, 0), 1);
  assert_int_equal(proxy_state_start_level(site, 1000000, 0, 9), 1);
  assert_int_equal(proxy_state_start_level(site, 1000000, 0, 10), 3);
  assert_int_equal(proxy_state_start_level(site, 1000000, 0, 99), 3);
  /* 50 %, and a clock 2 s behind controld's sees it 2 s early */
  assert_int_equal(proxy_state_start_level(site, 1002000, 0, 49), 1);
  assert_int_equal(proxy_state_start_level(site, 1002000, 0, 50), 3);
  assert_int_equal(proxy_state_start_level(site, 1000000, 2000, 49), 1);
  assert_int_equal(proxy_state_start_level(site, 1000000, 2000, 50), 3);
  /* the last step and past it: everything */
  assert_int_equal(proxy_state_start_level(site, 1004000, 0, 99), 1);
  assert_int_equal(proxy_state_start_level(site, 9000000, 0, 99), 1);
  /* a ramp whose from_level is not the current level is not followed */
  assert_int_equal(proxy_state_start_level(other->sites[0], 1004000, 0, 0), 2);
  sitecfg_set_unref(s);
  sitecfg_set_unref(other);
}

static void test_ramp_pick_falls_back_to_current(void **state) {
  const char *retries[] = {"{}", "{\"backup_levels\": false}"};
  (void)state;
  for (int v = 0; v < 2; v++) {
    struct sitecfg_set *s = load_ramp(3, retries[v], RAMP31);
    struct sitecfg_site *site = s->sites[0];
    struct proxy_state *t = proxy_state_new();
    struct proxy_pick pk;
    uint64_t tried = 0;
    assert_int_equal(proxy_state_sync(t, s), 0);
    /* a request sent to the ramp level: its two origins, then the current level (3), never the
       level in between, and the current level is no backup pick */
    for (int k = 0; k < 2; k++) {
      assert_int_equal(proxy_state_pick_from(t, site, 1, tried, 100, &pk), 0);
      assert_int_equal(pk.level, 1);
      assert_int_equal(pk.backup, 0);
      tried |= UINT64_C(1) << pk.index;
    }
    assert_int_equal(proxy_state_pick_from(t, site, 1, tried, 100, &pk), 0);
    assert_int_equal(site->origins[pk.index].id, 30);
    assert_int_equal(pk.backup, 0);
    assert_int_equal(pk.fail_open, 0);
    tried |= UINT64_C(1) << pk.index;
    assert_int_equal(proxy_state_pick_from(t, site, 1, tried, 100, &pk), -1);
    /* the ramp level skipped: its requests go to the current level at once */
    skip_origin(t, site, 10, 200);
    skip_origin(t, site, 11, 200);
    assert_int_equal(proxy_state_pick_from(t, site, 1, 0, 300, &pk), 0);
    assert_int_equal(site->origins[pk.index].id, 30);
    assert_int_equal(pk.fail_open, 0);
    proxy_state_free(&t);
    sitecfg_set_unref(s);
  }
}

/* docs/design.md, Failback ramp: the node's skip of a level controld switches back to (or ramps
   to) ends when the config says so, so visitors go where the config says. */
static void test_switch_back_ends_skip(void **state) {
  const char *back[] = {"null", "{\"from_level\": 2, \"to_level\": 1, \"started_at\": 1, "
                                "\"steps\": [10, 100], \"step_ms\": 1000}"};
  (void)state;
  for (int v = 0; v < 2; v++) {
    struct sitecfg_set *s2 = load(2, "{}"), *s1 = load_ramp(v ? 2 : 1, "{}", back[v]);
    struct proxy_state *t = proxy_state_new();
    struct proxy_pick pk;
    int64_t now = clock_mono_ms();
    assert_int_equal(proxy_state_sync(t, s2), 0);
    /* level 1 was skipped by the node before it left it */
    skip_origin(t, s2->sites[0], 10, now);
    skip_origin(t, s2->sites[0], 11, now);
    assert_int_equal(proxy_state_pick_from(t, s2->sites[0], 1, 0, now, &pk), 0);
    assert_int_equal(pk.level, 2); /* still skipped: the ramp level's requests go on */
    assert_int_equal(proxy_state_sync(t, s1), 0);
    now = clock_mono_ms();
    assert_int_equal(proxy_state_pick_from(t, s1->sites[0], 1, 0, now, &pk), 0);
    assert_int_equal(pk.level, 1);
    assert_int_equal(pk.fail_open, 0);
    /* its half-open trial fails: skipped again, and the same config again does not end that */
    {
      int trial = pk.index, other = idx_of(s1->sites[0], 10) == trial ? idx_of(s1->sites[0], 11)
                                                                      : idx_of(s1->sites[0], 10);
      proxy_state_record(t, s1->sites[0], trial, now, 1);
      assert_int_equal(proxy_state_sync(t, s1), 0);
      assert_int_equal(
          proxy_state_pick_from(t, s1->sites[0], 1, UINT64_C(1) << other, now + 1, &pk), 0);
      assert_int_equal(pk.level, 2);
    }
    proxy_state_free(&t);
    sitecfg_set_unref(s1);
    sitecfg_set_unref(s2);
  }
}

static void test_probe_feeds_skip(void **state) {
  struct sitecfg_set *s = load(1, "{\"skip_ms\": 1000}");
  struct sitecfg_site *site = s->sites[0];
  struct proxy_state *t = proxy_state_new();
  struct proxy_pick pk;
  cJSON *j, *o;
  assert_int_equal(proxy_state_sync(t, s), 0);
  /* three failed probes of origin 10 skip it */
  assert_int_equal(proxy_state_probe(t, 10, 100, 0), 0);
  assert_int_equal(proxy_state_probe(t, 10, 200, 0), 0);
  assert_int_equal(proxy_state_probe(t, 10, 300, 0), 1);
  for (int k = 0; k < 3; k++) {
    assert_int_equal(proxy_state_pick(t, site, 0, 400, &pk), 0);
    assert_int_equal(site->origins[pk.index].id, 11);
    proxy_state_record(t, site, pk.index, 400, 0);
  }
  /* a good probe past the skip time restores it without a visitor trial */
  assert_int_equal(proxy_state_probe(t, 10, 1300, 1), 0);
  j = proxy_state_site_json(t, site, 1300);
  o = cJSON_GetArrayItem(j, idx_of(site, 10));
  assert_string_equal(cJSON_GetObjectItem(o, "state")->valuestring, "healthy");
  assert_int_equal((int)cJSON_GetObjectItem(o, "probes")->valuedouble, 4);
  assert_int_equal((int)cJSON_GetObjectItem(o, "requests")->valuedouble, 0);
  cJSON_Delete(j);
  proxy_state_free(&t);
  sitecfg_set_unref(s);
}

static void test_refresh_keeps_skip_state(void **state) {
  struct sitecfg_set *s = load(3, "{}");
  struct sitecfg_site *site = s->sites[0];
  struct proxy_state *t = proxy_state_new();
  struct proxy_pick pk;
  cJSON *j, *o;
  int64_t now = 1000000;
  assert_int_equal(proxy_state_sync(t, s), 0);
  skip_origin(t, site, 30, now);
  /* nothing is due before the 30 s floor */
  assert_int_equal(proxy_state_refresh(t, 0), 0);
  /* far later: the name (only it) is re-resolved, its skip record stays */
  assert_int_equal(proxy_state_refresh(t, INT64_MAX / 2), 1);
  j = proxy_state_site_json(t, site, now + 1);
  o = cJSON_GetArrayItem(j, idx_of(site, 30));
  assert_string_equal(cJSON_GetObjectItem(o, "state")->valuestring, "skipped");
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(o, "resolved")));
  assert_true(cJSON_GetObjectItem(o, "dns_refresh_in_ms")->valuedouble >= 30000 - 1);
  assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(j, idx_of(site, 20)), "dns_refresh_in_ms"));
  cJSON_Delete(j);
  assert_int_equal(proxy_state_pick(t, site, 0, now + 1, &pk), 0);
  assert_int_equal(pk.fail_open, 1);
  /* a config update with the same identity keeps it too */
  assert_int_equal(proxy_state_sync(t, s), 0);
  assert_int_equal(proxy_state_pick(t, site, 0, now + 2, &pk), 0);
  assert_int_equal(pk.fail_open, 1);
  proxy_state_free(&t);
  sitecfg_set_unref(s);
}

/* The JSON number key of origin id in the site's /status view. */
static int64_t status_num(struct proxy_state *t, const struct sitecfg_site *site, int64_t id,
                          const char *key, int64_t now) {
  cJSON *j = proxy_state_site_json(t, site, now);
  const cJSON *v = cJSON_GetObjectItem(cJSON_GetArrayItem(j, idx_of(site, id)), key);
  int64_t r = v ? (int64_t)v->valuedouble : -1;
  cJSON_Delete(j);
  return r;
}

/* The next refresh is due at `now` plus the real time the lookups took plus the interval, so a
 * slow run (sanitizers, a busy machine) sees a few milliseconds more than the interval. */
#define LOOKUP_SLACK_MS 5000

static void test_dns_follows_ttl_and_moves(void **state) {
  struct sitecfg_set *s = load(3, "{}");
  struct sitecfg_site *site = s->sites[0];
  struct proxy_state *t = proxy_state_new();
  struct proxy_pick pk;
  char ip[64];
  int64_t now = 1000000, base;
  memset(&dns, 0, sizeof dns);
  dns.ip = "127.0.0.5";
  dns.have_ttl = 1;
  dns.ttl_s = 120;
  proxy_state_set_resolver(t, fake_resolve);
  assert_int_equal(proxy_state_sync(t, s), 0);
  assert_int_equal(dns.calls, 1); /* the first resolution, without a TTL */
  assert_int_equal(proxy_state_pick(t, site, 0, now, &pk), 0);
  assert_string_equal(pick_ip(&pk, ip, sizeof ip), "127.0.0.5");
  skip_origin(t, site, 30, now);
  /* the first refresh comes at the 30 s floor; it learns the TTL: next one in 120 s */
  base = clock_mono_ms();
  assert_int_equal(proxy_state_refresh(t, base + 29000), 0);
  assert_int_equal(proxy_state_refresh(t, base + 31000), 1);
  assert_int_equal(dns.ttl_calls, 1);
  assert_in_range(status_num(t, site, 30, "dns_refresh_in_ms", base + 31000), 119000,
                  120000 + LOOKUP_SLACK_MS);
  assert_int_equal(proxy_state_refresh(t, base + 31000 + 119000 - 1000), 0);
  /* the name moves: followed at the next refresh, the skip record stays */
  dns.ip = "127.0.0.6";
  assert_int_equal(proxy_state_refresh(t, base + 31000 + 121000), 1);
  assert_int_equal(status_num(t, site, 30, "dns_readdressed", now), 1);
  assert_int_equal(status_num(t, site, 30, "skips", now), 1);
  assert_int_equal(proxy_state_pick(t, site, 0, now + 1, &pk), 0);
  assert_int_equal(pk.fail_open, 1); /* still skipped */
  assert_string_equal(pick_ip(&pk, ip, sizeof ip), "127.0.0.6");
  /* a huge TTL is capped at 5 min, a tiny one raised to 30 s */
  dns.ttl_s = 86400;
  assert_int_equal(proxy_state_refresh(t, base + 1000000), 1);
  assert_in_range(status_num(t, site, 30, "dns_refresh_in_ms", base + 1000000), 299000,
                  300000 + LOOKUP_SLACK_MS);
  dns.ttl_s = 1;
  assert_int_equal(proxy_state_refresh(t, base + 2000000), 1);
  assert_in_range(status_num(t, site, 30, "dns_refresh_in_ms", base + 2000000), 29000,
                  30000 + LOOKUP_SLACK_MS);
  /* a failed lookup keeps the last address and retries after 30 s */
  dns.fail = 1;
  assert_int_equal(proxy_state_refresh(t, base + 3000000), 1);
  assert_in_range(status_num(t, site, 30, "dns_refresh_in_ms", base + 3000000), 29000,
                  30000 + LOOKUP_SLACK_MS);
  assert_int_equal(proxy_state_pick(t, site, 0, now + 2, &pk), 0);
  assert_int_equal(pk.resolved, 1);
  assert_string_equal(pick_ip(&pk, ip, sizeof ip), "127.0.0.6");
  /* literals are never looked up again */
  assert_int_equal(dns.calls, 6);
  proxy_state_free(&t);
  sitecfg_set_unref(s);
}

/* ---- skip state metrics ---- */

/* fail_count 2 within 10 s skips an origin for 300 ms */
static const char *METRICS_CFG =
    "{\"seq\": 3, \"full\": true, \"deleted\": [], \"sites\": ["
    "{\"id\": 2, \"name\": \"blog\", \"hostnames\": [\"blog.test\"], \"config_version\": 1,"
    " \"current_level\": 1, \"origins\": [{\"id\": 20, \"level\": 1, \"address\": \"127.0.0.1\","
    " \"port\": 80, \"scheme\": \"http\"}],"
    " \"node_retry\": {\"fail_count\": 2, \"fail_window_ms\": 10000, \"skip_ms\": 300}},"
    "{\"id\": 1, \"name\": \"shop\", \"hostnames\": [\"shop.test\"], \"config_version\": 1,"
    " \"current_level\": 1, \"origins\": ["
    "  {\"id\": 10, \"level\": 1, \"address\": \"127.0.0.1\", \"port\": 8080, \"scheme\": "
    "\"http\"},"
    "  {\"id\": 11, \"level\": 2, \"address\": \"127.0.0.2\", \"port\": 8080, \"scheme\": "
    "\"http\"}],"
    " \"node_retry\": {\"fail_count\": 2, \"fail_window_ms\": 10000, \"skip_ms\": 300}}]}";

static char *render(struct proxy_state *t, int64_t now, int max) {
  struct buf b;
  buf_init(&b, 0);
  assert_int_equal(proxy_state_skip_metrics(t, now, max, &b), 0);
  assert_int_equal(buf_puts(&b, ""), 0);
  return buf_take(&b);
}

static void fail_twice(struct proxy_state *t, struct sitecfg_site *s, int idx, int64_t now) {
  proxy_state_record(t, s, idx, now, 1);
  proxy_state_record(t, s, idx, now + 1, 1);
}

static void test_skip_metrics(void **state) {
  char err[256] = "", *m;
  struct sitecfg_set *set = sitecfg_load(METRICS_CFG, strlen(METRICS_CFG), err, sizeof err);
  struct proxy_state *t = proxy_state_new();
  struct sitecfg_site *shop, *blog;
  assert_non_null(set);
  assert_non_null(t);
  assert_int_equal(proxy_state_sync(t, set), 0);
  shop = sitecfg_find(set, 1);
  blog = sitecfg_find(set, 2);

  m = render(t, 1000, 1000);
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"healthy\"} 3\n"));
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"skipped\"} 0\n"));
  assert_non_null(strstr(m, "# TYPE cdnca_node_origin_skipped gauge\n"));
  assert_null(strstr(m, "cdnca_node_origin_skipped{"));
  free(m);

  /* blog's origin 20 and shop's origin 11 fail twice: both skipped, listed by (site, origin) */
  fail_twice(t, blog, 0, 1000);
  fail_twice(t, shop, 1, 1000);
  m = render(t, 1100, 1000);
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"healthy\"} 1\n"));
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"skipped\"} 2\n"));
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"half_open\"} 0\n"));
  assert_non_null(strstr(m, "cdnca_node_origin_skipped{site=\"1\",origin=\"11\"} 1\n"));
  assert_non_null(strstr(m, "cdnca_node_origin_skipped{site=\"2\",origin=\"20\"} 1\n"));
  assert_true(strstr(m, "site=\"1\"") < strstr(m, "site=\"2\""));
  assert_null(strstr(m, "origin=\"10\""));
  free(m);

  /* the label cap: only the lowest ids carry labels, the counts still cover all */
  m = render(t, 1100, 1);
  assert_non_null(strstr(m, "cdnca_node_origin_skipped{site=\"1\",origin=\"11\"} 1\n"));
  assert_null(strstr(m, "site=\"2\""));
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"skipped\"} 2\n"));
  free(m);
  m = render(t, 1100, 0);
  assert_null(strstr(m, "cdnca_node_origin_skipped{"));
  free(m);

  /* past skip_ms: half-open (still untrusted, still labelled) */
  m = render(t, 1000 + 400, 1000);
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"half_open\"} 2\n"));
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"skipped\"} 0\n"));
  assert_non_null(strstr(m, "cdnca_node_origin_skipped{site=\"2\",origin=\"20\"} 1\n"));
  free(m);

  /* a successful trial (picked, then a success) restores the origin: its series goes away */
  {
    struct proxy_pick pk;
    assert_int_equal(proxy_state_pick(t, blog, 0, 1500, &pk), 0);
    assert_int_equal(pk.index, 0);
    assert_int_equal(pk.fail_open, 0);
  }
  proxy_state_record(t, blog, 0, 1500, 0);
  m = render(t, 1500, 1000);
  assert_null(strstr(m, "origin=\"20\""));
  assert_non_null(strstr(m, "cdnca_node_origins{state=\"healthy\"} 2\n"));
  free(m);

  proxy_state_free(&t);
  sitecfg_set_unref(set);
}

/* Refused targets (docs/design.md#errors-and-limits): controld's published list, the node's own
 * and the built-in ones mark a pick refused, literal or resolved name alike; /status says so. */
static void test_pick_refused_targets(void **state) {
  const char *json =
      "{\"seq\": 1, \"full\": true, \"deny_targets\": \"127.0.0.2/32\", \"sites\": [{\"id\": 1,"
      " \"name\": \"s\", \"hostnames\": [\"s.test\"], \"config_version\": 1,"
      " \"current_level\": 1, \"origins\": ["
      "{\"id\": 10, \"level\": 1, \"address\": \"127.0.0.1\", \"port\": 1001, \"scheme\": "
      "\"http\"},"
      "{\"id\": 20, \"level\": 2, \"address\": \"::ffff:127.0.0.2\", \"port\": 2001, "
      "\"scheme\": \"http\"},"
      "{\"id\": 30, \"level\": 3, \"address\": \"localhost\", \"port\": 3001, \"scheme\": "
      "\"http\"}], \"node_retry\": {\"backup_levels\": true}}]}";
  char err[256];
  struct sitecfg_set *s = sitecfg_load(json, strlen(json), err, sizeof err);
  struct proxy_state *t = proxy_state_new();
  struct proxy_pick pk;
  struct targets copy;
  cJSON *st;
  const char *why = NULL;
  (void)state;
  if (!s) fail_msg("load: %s", err);
  assert_string_equal(s->deny_targets, "127.0.0.2/32");
  assert_int_equal(proxy_state_set_deny(t, "127.0.0.0/8, ::1", err, sizeof err), 0);
  assert_int_equal(proxy_state_set_deny(t, "127.0.0.1/32", err, sizeof err), 0);
  assert_int_equal(proxy_state_set_deny(t, "nonsense", err, sizeof err), -1);
  assert_non_null(strstr(err, "nonsense"));
  memset(&dns, 0, sizeof dns);
  dns.ip = "169.254.169.254";
  proxy_state_set_resolver(t, fake_resolve);
  assert_int_equal(proxy_state_sync(t, s), 0);
  /* the node's own list (127.0.0.1 stays from the last good call) */
  assert_int_equal(proxy_state_pick(t, s->sites[0], 0, 1000, &pk), 0);
  assert_int_equal(pk.index, 0);
  assert_non_null(pk.refused);
  assert_string_equal(pk.refused, "denied by --deny-targets");
  /* the published list, through an IPv4-mapped literal */
  assert_int_equal(proxy_state_pick(t, s->sites[0], 1, 1000, &pk), 0);
  assert_int_equal(pk.index, 1);
  assert_non_null(pk.refused);
  /* a name resolving to the metadata address */
  assert_int_equal(proxy_state_pick(t, s->sites[0], 3, 1000, &pk), 0);
  assert_int_equal(pk.index, 2);
  assert_non_null(pk.refused);
  assert_string_equal(pk.refused, "link-local");
  st = proxy_state_site_json(t, s->sites[0], 1000);
  assert_non_null(
      strstr(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(st, 2), "refused_target")),
             "link-local"));
  cJSON_Delete(st);
  /* the probes get the same list */
  proxy_state_deny_copy(t, &copy);
  assert_int_equal(targets_refused(&copy, "::ffff:127.0.0.2", &why), 1);
  assert_int_equal(targets_refused(&copy, "127.0.0.1", &why), 1);
  assert_int_equal(targets_refused(&copy, "127.0.0.3", &why), 0);
  proxy_state_free(&t);
  sitecfg_set_unref(s);
}

/* A publication with a bad deny_targets is refused naming the key; without one, none. */
static void test_published_deny_targets_read(void **state) {
  const char *bad = "{\"seq\": 1, \"full\": true, \"deny_targets\": \"10.0.0.0/99\", "
                    "\"sites\": []}";
  const char *none = "{\"seq\": 1, \"full\": true, \"sites\": []}";
  char err[256];
  struct sitecfg_set *s;
  (void)state;
  assert_null(sitecfg_load(bad, strlen(bad), err, sizeof err));
  assert_non_null(strstr(err, "deny_targets"));
  s = sitecfg_load(none, strlen(none), err, sizeof err);
  assert_non_null(s);
  assert_string_equal(s->deny_targets, "");
  sitecfg_set_unref(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pick_goes_to_backup_levels),
      cmocka_unit_test(test_pick_skipped_level_and_never_earlier),
      cmocka_unit_test(test_pick_backup_levels_off),
      cmocka_unit_test(test_ramp_start_level),
      cmocka_unit_test(test_ramp_pick_falls_back_to_current),
      cmocka_unit_test(test_switch_back_ends_skip),
      cmocka_unit_test(test_probe_feeds_skip),
      cmocka_unit_test(test_refresh_keeps_skip_state),
      cmocka_unit_test(test_dns_follows_ttl_and_moves),
      cmocka_unit_test(test_skip_metrics),
      cmocka_unit_test(test_pick_refused_targets),
      cmocka_unit_test(test_published_deny_targets_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
