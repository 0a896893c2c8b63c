/* Unit tests for controld/notify and store_notify: backoff schedule, verdicts, signature, event
   shape, webhook filters and the per-(webhook, site) outbox queues. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "chan.h"
#include "clock.h"
#include "json.h"
#include "log.h"
#include "notify.h"
#include "store.h"
#include "store_core.h"
#include "store_events.h"
#include "store_notify.h"

/* ---- pure logic ---- */

static void test_backoff_doubles_to_cap(void **state) {
  struct notify_policy p;
  int64_t expect = 1000;
  (void)state;
  notify_policy_defaults(&p);
  for (int a = 1; a <= 40; a++) {
    assert_int_equal(notify_backoff_ms(&p, a, 0), expect);
    expect = expect * 2 > 600000 ? 600000 : expect * 2;
  }
  /* 1 s, 2 s, 4 s ... 512 s, then the 10 min cap from the 11th failure on */
  assert_int_equal(notify_backoff_ms(&p, 10, 0), 512000);
  assert_int_equal(notify_backoff_ms(&p, 11, 0), 600000);
  assert_int_equal(notify_backoff_ms(&p, 1000, 0), 600000);
}

static void test_backoff_jitter_bounds(void **state) {
  struct notify_policy p;
  int lower_seen = 0;
  (void)state;
  notify_policy_defaults(&p);
  for (uint32_t rnd = 0; rnd < 5000; rnd += 7) {
    for (int a = 1; a <= 14; a++) {
      int64_t base = notify_backoff_ms(&p, a, 0), d = notify_backoff_ms(&p, a, rnd);
      assert_true(d <= base);
      assert_true(d >= base - base / 4);
      if (d < base) lower_seen = 1;
    }
  }
  assert_true(lower_seen);
  /* a tiny scale for tests keeps the same shape */
  p.retry_min_ms = 10;
  p.retry_max_ms = 50;
  assert_int_equal(notify_backoff_ms(&p, 1, 0), 10);
  assert_int_equal(notify_backoff_ms(&p, 2, 0), 20);
  assert_int_equal(notify_backoff_ms(&p, 3, 0), 40);
  assert_int_equal(notify_backoff_ms(&p, 4, 0), 50);
}

static void test_decide(void **state) {
  struct notify_policy p;
  int64_t created = 1000000, next = -1;
  (void)state;
  notify_policy_defaults(&p);
  assert_int_equal(notify_decide(&p, 200, 1, created, created + 5, 0, &next), NOTIFY_DELIVERED);
  assert_int_equal(notify_decide(&p, 204, 3, created, created + 5, 0, &next), NOTIFY_DELIVERED);
  assert_int_equal(notify_decide(&p, 299, 1, created, created + 5, 0, &next), NOTIFY_DELIVERED);
  /* anything else is retried on the schedule */
  assert_int_equal(notify_decide(&p, 500, 1, created, created + 5, 0, &next), NOTIFY_RETRY);
  assert_int_equal(next, created + 5 + 1000);
  assert_int_equal(notify_decide(&p, 0, 2, created, created + 5, 0, &next), NOTIFY_RETRY);
  assert_int_equal(next, created + 5 + 2000);
  assert_int_equal(notify_decide(&p, 301, 1, created, created + 5, 0, &next), NOTIFY_RETRY);
  assert_int_equal(notify_decide(&p, 199, 1, created, created + 5, 0, &next), NOTIFY_RETRY);
  assert_int_equal(notify_decide(&p, 404, 1, created, created + 5, 0, &next), NOTIFY_RETRY);
  /* the last retry is clamped to the give-up time, an attempt at or after it is final */
  assert_int_equal(notify_decide(&p, 503, 30, created, created + p.give_up_ms - 1000, 0, &next),
                   NOTIFY_RETRY);
  assert_int_equal(next, created + p.give_up_ms);
  assert_int_equal(notify_decide(&p, 503, 31, created, created + p.give_up_ms, 0, &next),
                   NOTIFY_FAILED);
  assert_int_equal(notify_decide(&p, 0, 31, created, created + p.give_up_ms + 99, 0, &next),
                   NOTIFY_FAILED);
  /* a success is delivered even late */
  assert_int_equal(notify_decide(&p, 200, 31, created, created + p.give_up_ms + 99, 0, &next),
                   NOTIFY_DELIVERED);
}

static void test_signature(void **state) {
  char sig[NOTIFY_SIGNATURE_LEN];
  const char body[] = "{\"a\":1}";
  (void)state;
  /* reference value: HMAC-SHA256("0123456789abcdef", "1700000000.{\"a\":1}") */
  assert_int_equal(notify_sign("0123456789abcdef", 1700000000, body, strlen(body), sig), 0);
  assert_string_equal(sig,
                      "sha256=9eb18f493f8ec135d9eb2dad817c369bb4e9cbfa818657897a7437c1cd8c3a23");
  /* timestamp and body are both covered */
  assert_int_equal(notify_sign("0123456789abcdef", 1700000001, body, strlen(body), sig), 0);
  assert_string_not_equal(
      sig, "sha256=9eb18f493f8ec135d9eb2dad817c369bb4e9cbfa818657897a7437c1cd8c3a23");
  assert_int_equal(notify_sign("0123456789abcdef", 1700000000, "{\"a\":2}", 7, sig), 0);
  assert_string_not_equal(
      sig, "sha256=9eb18f493f8ec135d9eb2dad817c369bb4e9cbfa818657897a7437c1cd8c3a23");
}

/* The event types' one table: a word for every value, each word read back as its value, no other
   word (nor the test event's) a type, and the rules of docs/design.md#events. */
static void test_known_types(void **state) {
  (void)state;
  for (int t = 0; t < EVENT_TYPES; t++) {
    assert_non_null(event_type_names[t]);
    assert_int_equal(event_type_value(event_type_names[t]), t);
    assert_true(event_type_rules[t].level == LOG_INFO || event_type_rules[t].level == LOG_WARN);
  }
  assert_null(event_type_names[EVENT_TYPES]);
  assert_int_equal(event_type_value("level.switched"), EVENT_LEVEL_SWITCHED);
  assert_int_equal(event_type_value("drill.finished"), EVENT_DRILL_FINISHED);
  assert_int_equal(event_type_value("webhook.test"), -1);
  assert_int_equal(event_type_value("level.Switched"), -1);
  assert_int_equal(event_type_value(""), -1);
  assert_int_equal(event_type_value(NULL), -1);
  /* every level down is a warning, the rest information */
  for (int t = 0; t < EVENT_TYPES; t++)
    assert_int_equal(event_type_rules[t].level,
                     t == EVENT_SITE_ALL_LEVELS_UNHEALTHY ? LOG_WARN : LOG_INFO);
}

static void test_event_json(void **state) {
  struct event_rec e;
  cJSON *j;
  char *txt;
  (void)state;
  memset(&e, 0, sizeof e);
  e.id = 42;
  e.site_id = 7;
  memcpy(e.site_name, "shop", 5);
  memcpy(e.type, "level.switched", 15);
  memcpy(e.title, "Origin level switched automatically", 36);
  e.data = "{\"from_level\":1,\"to_level\":2,\"reason\":\"auto_failover\"}";
  e.created_at = 1764669600000; /* 2025-12-02T10:00:00Z */
  j = notify_event_json(&e);
  txt = json_print(j);
  assert_string_equal(txt,
                      "{\"id\":42,\"type\":\"level.switched\",\"title\":\"Origin level switched "
                      "automatically\",\"site\":{\"id\":7,\"name\":\"shop\"},\"created_at\":"
                      "\"2025-12-02T10:00:00Z\",\"data\":{\"from_level\":1,\"to_level\":2,"
                      "\"reason\":\"auto_failover\"}}");
  free(txt);
  cJSON_Delete(j);
  /* no site, and data that is not an object, render as null and {} */
  e.site_id = 0;
  e.data = "[1,2]";
  j = notify_event_json(&e);
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "site")));
  assert_true(cJSON_IsObject(cJSON_GetObjectItem(j, "data")));
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "data")), 0);
  cJSON_Delete(j);
}

/* ---- store: filters and queues ---- */

struct fx {
  char dir[64];
  char path[128];
  struct store *st;
  int event_calls;
};

static void on_event(void *arg) {
  ((struct fx *)arg)->event_calls++;
}

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof *f);
  if (!f) return -1;
  snprintf(f->dir, sizeof f->dir, "/tmp/cdnca-test-notify-XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->path, sizeof f->path, "%s/t.db", f->dir);
  f->st = store_open(f->path);
  if (!f->st) return -1;
  store_set_event_hook(f->st, on_event, f);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  char p[160];
  store_close(&f->st);
  snprintf(p, sizeof p, "%s-wal", f->path);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", f->path);
  unlink(p);
  unlink(f->path);
  rmdir(f->dir);
  free(f);
  return 0;
}

static int64_t add_hook(struct store *st, const char *url, const char *filter) {
  struct webhook_rec w;
  memset(&w, 0, sizeof w);
  snprintf(w.url, sizeof w.url, "%s", url);
  snprintf(w.secret, sizeof w.secret, "0123456789abcdef");
  w.events = filter ? strdup(filter) : NULL;
  assert_int_equal(store_webhook_create(st, &w), STORE_OK);
  assert_true(w.id > 0);
  webhook_rec_fini(&w);
  return w.id;
}

/* Number of deliveries of a webhook; *types gets their event types oldest first, comma-joined. */
static int deliveries_of(struct store *st, int64_t hook, char *types, size_t cap) {
  struct delivery_rec *arr = NULL;
  int n = 0;
  size_t off = 0;
  assert_int_equal(store_delivery_list(st, hook, 0, 100, &arr, &n), STORE_OK);
  types[0] = '\0';
  for (int i = 0; i < n; i++)
    off += (size_t)snprintf(types + off, cap - off, "%s%s", i ? "," : "", arr[i].event_type);
  free(arr);
  return n;
}

static void test_filter_fanout(void **state) {
  struct fx *f = *state;
  char types[512];
  int64_t all = add_hook(f->st, "http://127.0.0.1:9/all", NULL);
  int64_t sw = add_hook(f->st, "http://127.0.0.1:9/sw", "[\"level.switched\"]");
  int64_t two =
      add_hook(f->st, "http://127.0.0.1:9/two", "[\"site.recovered\",\"origin.health_changed\"]");
  assert_true(store_event_add(f->st, 1, "a", "level.switched", "t", "{}") > 0);
  assert_true(store_event_add(f->st, 1, "a", "origin.health_changed", "t", "{}") > 0);
  assert_true(store_event_add(f->st, 2, "b", "site.all_levels_unhealthy", "t", "{}") > 0);
  assert_true(store_event_add(f->st, 2, "b", "site.recovered", "t", "{}") > 0);
  assert_int_equal(f->event_calls, 4);

  assert_int_equal(deliveries_of(f->st, all, types, sizeof types), 4);
  assert_string_equal(
      types, "level.switched,origin.health_changed,site.all_levels_unhealthy,site.recovered");
  assert_int_equal(deliveries_of(f->st, sw, types, sizeof types), 1);
  assert_string_equal(types, "level.switched");
  assert_int_equal(deliveries_of(f->st, two, types, sizeof types), 2);
  assert_string_equal(types, "origin.health_changed,site.recovered");

  /* deleting a webhook drops its outbox; the others keep theirs */
  assert_int_equal(store_webhook_delete(f->st, sw), STORE_OK);
  assert_int_equal(store_webhook_delete(f->st, sw), STORE_NOT_FOUND);
  assert_int_equal(deliveries_of(f->st, sw, types, sizeof types), 0);
  assert_int_equal(deliveries_of(f->st, all, types, sizeof types), 4);
}

/* A channel's site filter (docs/design.md#notification-channels): events of other sites queue
   nothing for it; events without a site pass every filter; an update takes effect for the next
   event, and the channel's kind, name and config come back as stored. */
static void test_channel_site_filter(void **state) {
  struct fx *f = *state;
  struct webhook_rec w, got;
  char types[512];
  memset(&w, 0, sizeof w);
  w.kind = CHAN_SLACK;
  snprintf(w.name, sizeof w.name, "ops");
  snprintf(w.url, sizeof w.url, "https://hooks.example/services/x");
  w.site_ids = strdup("[2,7]");
  assert_int_equal(store_webhook_create(f->st, &w), STORE_OK);
  assert_true(store_event_add(f->st, 1, "a", "level.switched", "t", "{}") > 0);
  assert_true(store_event_add(f->st, 2, "b", "site.recovered", "t", "{}") > 0);
  assert_true(store_event_add(f->st, 0, NULL, "level.switched", "t", "{}") > 0);
  assert_int_equal(deliveries_of(f->st, w.id, types, sizeof types), 2);
  assert_string_equal(types, "site.recovered,level.switched");
  assert_int_equal(store_webhook_get(f->st, w.id, &got), STORE_OK);
  assert_int_equal(got.kind, CHAN_SLACK);
  assert_string_equal(got.name, "ops");
  assert_string_equal(got.site_ids, "[2,7]");
  assert_null(got.config);
  webhook_rec_fini(&got);
  /* every site again */
  free(w.site_ids);
  w.site_ids = NULL;
  {
    struct store_tx *tx = store_tx_begin(f->st);
    assert_non_null(tx);
    assert_int_equal(store_tx_end(tx, store_webhook_update_locked(tx, &w)), STORE_OK);
  }
  assert_true(store_event_add(f->st, 1, "a", "origin.health_changed", "t", "{}") > 0);
  assert_int_equal(deliveries_of(f->st, w.id, types, sizeof types), 3);
  webhook_rec_fini(&w);
}

static int find_head(const struct delivery_head *h, int n, int64_t hook, int64_t site) {
  for (int i = 0; i < n; i++)
    if (h[i].webhook_id == hook && h[i].site_id == site) return i;
  return -1;
}

static void record(struct store *st, int64_t id, enum delivery_state state, int status,
                   int64_t next) {
  struct delivery_result r = {.id = id,
                              .state = state,
                              .status = status,
                              .error = status == 200 ? NULL : "HTTP 500",
                              .next_attempt_at = next,
                              .at = 5};
  assert_int_equal(store_delivery_record(st, &r, 1), 0);
}

static void test_outbox_prune(void **state) {
  struct fx *f = *state;
  char types[256];
  int64_t hook = add_hook(f->st, "http://127.0.0.1:9/p", NULL);
  struct delivery_rec *arr = NULL;
  int n = 0;
  assert_true(store_event_add(f->st, 1, "a", "level.switched", "one", "{}") > 0);
  assert_true(store_event_add(f->st, 1, "a", "site.recovered", "two", "{}") > 0);
  assert_true(store_event_add(f->st, 2, "b", "site.recovered", "three", "{}") > 0);
  assert_int_equal(store_delivery_list(f->st, hook, 0, 100, &arr, &n), STORE_OK);
  assert_int_equal(n, 3);
  /* oldest first: [0] failed, [1] delivered, [2] site 2 pending */
  record(f->st, arr[1].id, DELIVERY_DELIVERED, 200, 0);
  record(f->st, arr[0].id, DELIVERY_FAILED, 500, 0);
  free(arr);
  assert_int_equal(store_delivery_prune(f->st, 0), 0); /* nothing is that old */
  assert_int_equal(store_delivery_prune(f->st, INT64_MAX), 2);
  assert_int_equal(deliveries_of(f->st, hook, types, sizeof types), 1); /* the pending one stays */
  assert_string_equal(types, "site.recovered");
}

static void test_queue_heads_in_order(void **state) {
  struct fx *f = *state;
  struct delivery_head *h = NULL;
  struct delivery_job job;
  struct delivery_rec d;
  int n = 0, i;
  int64_t hook = add_hook(f->st, "http://127.0.0.1:9/q", NULL);
  int64_t e1 = store_event_add(f->st, 1, "a", "level.switched", "one", "{\"n\":1}");
  int64_t e2 = store_event_add(f->st, 1, "a", "level.switched", "two", "{\"n\":2}");
  int64_t e3 = store_event_add(f->st, 2, "b", "level.switched", "three", "{\"n\":3}");
  int64_t head1, head2;
  assert_true(e1 > 0 && e2 > e1 && e3 > e2);

  /* one head per (webhook, site): the oldest event of site 1 and the only one of site 2 */
  assert_int_equal(store_delivery_heads(f->st, &h, &n), STORE_OK);
  assert_int_equal(n, 2);
  i = find_head(h, n, hook, 1);
  assert_true(i >= 0);
  head1 = h[i].id;
  assert_true(find_head(h, n, hook, 2) >= 0);
  head2 = h[find_head(h, n, hook, 2)].id;
  free(h);

  assert_int_equal(store_delivery_load(f->st, head1, &job), STORE_OK);
  assert_int_equal(job.event.id, e1);
  assert_string_equal(job.event.title, "one");
  assert_string_equal(job.event.data, "{\"n\":1}");
  assert_string_equal(job.url, "http://127.0.0.1:9/q");
  assert_string_equal(job.secret, "0123456789abcdef");
  assert_int_equal(job.attempts, 0);
  assert_int_equal(strlen(job.uuid), 32);
  delivery_job_fini(&job);

  /* a failed head keeps blocking its queue (with its retry time), not the other queue */
  record(f->st, head1, DELIVERY_PENDING, 500, 123456);
  assert_int_equal(store_delivery_heads(f->st, &h, &n), STORE_OK);
  assert_int_equal(n, 2);
  i = find_head(h, n, hook, 1);
  assert_int_equal(h[i].id, head1);
  assert_int_equal(h[i].next_attempt_at, 123456);
  free(h);
  assert_int_equal(store_delivery_get(f->st, head1, &d), STORE_OK);
  assert_int_equal(d.state, DELIVERY_PENDING);
  assert_int_equal(d.attempts, 1);
  assert_int_equal(d.last_status, 500);
  assert_string_equal(d.last_error, "HTTP 500");

  /* delivered: the next event of site 1 becomes the head */
  record(f->st, head1, DELIVERY_DELIVERED, 200, 0);
  assert_int_equal(store_delivery_get(f->st, head1, &d), STORE_OK);
  assert_int_equal(d.state, DELIVERY_DELIVERED);
  assert_int_equal(d.attempts, 2);
  assert_int_equal(d.delivered_at, 5);
  assert_int_equal(store_delivery_load(f->st, head1, &job), STORE_NOT_FOUND);
  assert_int_equal(store_delivery_heads(f->st, &h, &n), STORE_OK);
  i = find_head(h, n, hook, 1);
  assert_true(i >= 0 && h[i].id != head1);
  assert_int_equal(store_delivery_load(f->st, h[i].id, &job), STORE_OK);
  assert_int_equal(job.event.id, e2);
  delivery_job_fini(&job);
  /* failed for good also unblocks the queue */
  record(f->st, h[i].id, DELIVERY_FAILED, 500, 0);
  free(h);
  record(f->st, head2, DELIVERY_DELIVERED, 200, 0);
  assert_int_equal(store_delivery_heads(f->st, &h, &n), STORE_OK);
  assert_int_equal(n, 0);
  free(h);
  /* a result for a row that is no longer pending changes nothing */
  record(f->st, head1, DELIVERY_FAILED, 500, 0);
  assert_int_equal(store_delivery_get(f->st, head1, &d), STORE_OK);
  assert_int_equal(d.state, DELIVERY_DELIVERED);
}

static void test_webhook_test_event(void **state) {
  struct fx *f = *state;
  char types[512];
  struct delivery_rec d;
  int64_t a = add_hook(f->st, "http://127.0.0.1:9/a", NULL);
  int64_t b = add_hook(f->st, "http://127.0.0.1:9/b", NULL);
  int64_t did = 0;
  int calls = f->event_calls;
  assert_int_equal(store_webhook_test(f->st, b, 0, NULL, "Webhook test", "{}", &did), STORE_OK);
  assert_true(did > 0);
  assert_int_equal(f->event_calls, calls + 1);
  /* only the tested webhook gets it */
  assert_int_equal(deliveries_of(f->st, a, types, sizeof types), 0);
  assert_int_equal(deliveries_of(f->st, b, types, sizeof types), 1);
  assert_string_equal(types, "webhook.test");
  assert_int_equal(store_delivery_get(f->st, did, &d), STORE_OK);
  assert_int_equal(d.webhook_id, b);
  assert_int_equal(d.site_id, 0);
  assert_int_equal(d.state, DELIVERY_PENDING);
  assert_int_equal(store_webhook_test(f->st, 999, 0, NULL, "Webhook test", "{}", &did),
                   STORE_NOT_FOUND);
}

/* Events go by age (store_event_prune): the oldest first, with their finished outbox rows; never
   one whose delivery is pending, nor one in a kept incident's timeline, nor the newest (ids are
   the last + 1: they keep growing). Test events alone go with their deliveries. */
static void test_event_prune(void **state) {
  struct fx *f = *state;
  char types[256];
  struct delivery_rec *arr = NULL;
  struct event_rec *ev = NULL;
  int n = 0;
  int64_t hook = add_hook(f->st, "http://127.0.0.1:9/p", NULL), did = 0, e1, e2, e4, e5, e6;
  clock_set_fake_ms(1000);
  e1 = store_event_add(f->st, 1, "a", "level.switched", "old, delivered", "{}");
  e2 = store_event_add(f->st, 1, "a", "site.recovered", "old, pending", "{}");
  clock_set_fake_ms(2000);
  assert_int_equal(store_webhook_test(f->st, hook, 0, NULL, "Webhook test", "{}", &did), STORE_OK);
  clock_set_fake_ms(3000);
  e4 = store_event_add(f->st, 2, "b", "level.switched", "old, the newest", "{}");
  clock_set_fake_ms(-1);
  assert_true(e1 > 0 && e2 > e1 && e4 > e2);
  assert_int_equal(store_delivery_list(f->st, hook, 0, 100, &arr, &n), STORE_OK);
  assert_int_equal(n, 4);
  for (int i = 0; i < n; i++)
    if (arr[i].event_id != e2) record(f->st, arr[i].id, DELIVERY_DELIVERED, 200, 0);
  free(arr);
  assert_int_equal(store_event_prune(f->st, 500, 0), 0);   /* nothing that old */
  assert_int_equal(store_event_prune(f->st, 10000, 1), 1); /* the test event */
  /* e1 is in a kept incident's timeline: its deliveries are that incident's evidence */
  assert_int_equal(store_exec(f->st->w, "entry",
                              "INSERT INTO incident_entries (incident_id, at, kind, event_id, "
                              "type, title) VALUES (7, 1000, 'event', ?, 'level.switched', 'x')",
                              "I", e1),
                   0);
  assert_int_equal(store_event_prune(f->st, 10000, 0), 0);
  /* the incident pruned (its entries with it), e1 goes */
  assert_int_equal(store_exec(f->st->w, "entry", "DELETE FROM incident_entries", ""), 0);
  assert_int_equal(store_event_prune(f->st, 10000, 0), 1); /* e1: e2 is pending, e4 the newest */
  assert_int_equal(store_event_list(f->st, 0, 0, 100, &ev, &n), STORE_OK);
  assert_int_equal(n, 2);
  assert_true(ev[0].id == e2 && ev[1].id == e4);
  store_events_free(ev, n);
  assert_int_equal(deliveries_of(f->st, hook, types, sizeof types), 2); /* e1's went with it */
  assert_string_equal(types, "site.recovered,level.switched");
  /* a newer event: e4 is old like the others now, and the ids go on growing */
  e5 = store_event_add(f->st, 2, "b", "site.recovered", "new", "{}");
  assert_true(e5 > e4);
  assert_int_equal(store_event_prune(f->st, 10000, 0), 1);
  e6 = store_event_add(f->st, 2, "b", "site.recovered", "newer", "{}");
  assert_true(e6 == e5 + 1);
}

/* After store_prune_stop a prune ends with the batch it is in: shutdown is not held by a first
   prune of a large old database. */
static void test_prune_stops(void **state) {
  struct fx *f = *state;
  struct store_tx *tx;
  clock_set_fake_ms(1000);
  tx = store_tx_begin(f->st);
  assert_non_null(tx);
  for (int i = 0; i < 2 * STORE_EVENTS_PRUNE_BATCH + 500; i++)
    assert_true(store_event_insert_locked(tx, 1, "a", "level.switched", "old", "{}", 1000) > 0);
  assert_int_equal(store_tx_commit(tx), 0);
  clock_set_fake_ms(-1);
  store_prune_stop(f->st);
  assert_int_equal(store_event_prune(f->st, 5000, 0), STORE_EVENTS_PRUNE_BATCH);
  assert_int_equal(store_event_prune(f->st, 5000, 0), STORE_EVENTS_PRUNE_BATCH);
}

/* Tests of all webhooks and channels: at most STORE_TESTS_PER_MINUTE in a minute. */
static void test_tests_per_minute(void **state) {
  struct fx *f = *state;
  int64_t a = add_hook(f->st, "http://127.0.0.1:9/a", NULL);
  int64_t b = add_hook(f->st, "http://127.0.0.1:9/b", NULL), did = 0;
  clock_set_fake_ms(1800000000000LL);
  for (int i = 0; i < STORE_TESTS_PER_MINUTE; i++)
    assert_int_equal(store_webhook_test(f->st, i % 2 ? a : b, 0, NULL, "t", "{}", &did), STORE_OK);
  assert_int_equal(store_webhook_test(f->st, a, 0, NULL, "t", "{}", &did), STORE_LIMIT);
  clock_set_fake_ms(1800000000000LL + 59999);
  assert_int_equal(store_webhook_test(f->st, b, 0, NULL, "t", "{}", &did), STORE_LIMIT);
  clock_set_fake_ms(1800000000000LL + 60000); /* the first minute's tests are past */
  assert_int_equal(store_webhook_test(f->st, b, 0, NULL, "t", "{}", &did), STORE_OK);
  clock_set_fake_ms(-1);
}

static void test_webhook_crud_and_limit(void **state) {
  struct fx *f = *state;
  struct webhook_rec w, *arr = NULL;
  int n = 0;
  int64_t id = add_hook(f->st, "https://hooks.example.com/x", "[\"site.recovered\"]");
  assert_int_equal(store_webhook_get(f->st, id, &w), STORE_OK);
  assert_string_equal(w.url, "https://hooks.example.com/x");
  assert_string_equal(w.events, "[\"site.recovered\"]");
  webhook_rec_fini(&w);
  assert_int_equal(store_webhook_get(f->st, id + 1, &w), STORE_NOT_FOUND);
  webhook_rec_fini(&w);
  for (int i = 1; i < STORE_MAX_WEBHOOKS; i++)
    add_hook(f->st, "http://127.0.0.1:9/", NULL);
  memset(&w, 0, sizeof w);
  snprintf(w.url, sizeof w.url, "http://127.0.0.1:9/");
  snprintf(w.secret, sizeof w.secret, "0123456789abcdef");
  assert_int_equal(store_webhook_create(f->st, &w), STORE_LIMIT);
  assert_int_equal(store_webhook_list(f->st, &arr, &n), STORE_OK);
  assert_int_equal(n, STORE_MAX_WEBHOOKS);
  assert_true(arr[0].id == id && arr[0].events != NULL && arr[1].events == NULL);
  for (int i = 0; i < n; i++)
    webhook_rec_fini(&arr[i]);
  free(arr);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backoff_doubles_to_cap),
      cmocka_unit_test(test_backoff_jitter_bounds),
      cmocka_unit_test(test_decide),
      cmocka_unit_test(test_signature),
      cmocka_unit_test(test_known_types),
      cmocka_unit_test(test_event_json),
      cmocka_unit_test_setup_teardown(test_filter_fanout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_channel_site_filter, setup, teardown),
      cmocka_unit_test_setup_teardown(test_outbox_prune, setup, teardown),
      cmocka_unit_test_setup_teardown(test_queue_heads_in_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_webhook_test_event, setup, teardown),
      cmocka_unit_test_setup_teardown(test_webhook_crud_and_limit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_event_prune, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tests_per_minute, setup, teardown),
      cmocka_unit_test_setup_teardown(test_prune_stops, setup, teardown),
  };
  log_init("test_notify", LOG_TEXT, LOG_WARN);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
