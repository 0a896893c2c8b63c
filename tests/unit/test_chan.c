/* Unit tests for controld/chan: the Slack, PagerDuty and email formatters against fixtures
   (tests/unit/fixtures/chan), non-ASCII site names, the summary cut at a character boundary, the
   address checks and the PagerDuty actions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chan.h"
#include "json.h"

#define FIX CDNCA_SOURCE_DIR "/tests/unit/fixtures/chan/"

/* The fixture's text (malloc'd). CHAN_FIXTURES_WRITE=1 rewrites it from got first. */
static char *fixture(const char *name, const char *got) {
  char path[512], *out;
  FILE *f;
  long n;
  snprintf(path, sizeof path, FIX "%s", name);
  if (getenv("CHAN_FIXTURES_WRITE") && got) {
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs(got, f);
    fclose(f);
  }
  f = fopen(path, "rb");
  if (!f) fail_msg("missing fixture %s", path);
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  out = calloc(1, (size_t)n + 1);
  assert_non_null(out);
  assert_int_equal(fread(out, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return out;
}

static void assert_fixture(const char *name, const char *got) {
  char *want;
  assert_non_null(got);
  want = fixture(name, got);
  if (strcmp(want, got) != 0)
    fail_msg("%s differs:\n--- got ---\n%s\n--- want ---\n%s", name, got, want);
  free(want);
}

static struct event_rec ev(int64_t id, const char *site, const char *type, const char *title,
                           const char *data) {
  struct event_rec e;
  memset(&e, 0, sizeof e);
  e.id = id;
  e.site_id = 3;
  snprintf(e.site_name, sizeof e.site_name, "%s", site);
  snprintf(e.type, sizeof e.type, "%s", type);
  snprintf(e.title, sizeof e.title, "%s", title);
  e.data = (char *)data;
  e.created_at = 1796511292000LL; /* 2026-12-05T22:54:52Z */
  return e;
}

static const char SWITCH[] =
    "{\"from_level\":1,\"to_level\":2,\"reason\":\"auto_failover\",\"incident_id\":7}";
static const char OPENED[] = "{\"state\":\"open\",\"trigger\":\"switch\",\"opened_level\":1,"
                             "\"current_level\":2,\"detect_ms\":3200,\"incident_id\":7}";
static const char RESOLVED[] = "{\"state\":\"resolved\",\"trigger\":\"switch\",\"opened_level\":1,"
                               "\"current_level\":1,\"resolve_ms\":61000,\"incident_id\":7}";

static void test_slack(void **state) {
  struct event_rec e =
      ev(41, "shop.example", "level.switched", "Origin level switched automatically", SWITCH);
  struct event_rec u = ev(42, "café-<ñ>&co", "incident.opened", "Incident opened", OPENED);
  char *a, *b, *c;
  cJSON *j;
  (void)state;
  a = chan_slack_body(&e, "https://cdnca.example.org/");
  b = chan_slack_body(&u, NULL);
  c = chan_slack_body(&e, "");
  assert_fixture("slack_switch.json", a);
  assert_fixture("slack_utf8_nolink.json", b);
  /* no public URL: no link block, no URL anywhere */
  assert_null(strstr(c, "http"));
  /* Slack's control characters escaped in the text and the fields (the header is plain text) */
  assert_non_null(strstr(b, "{\"text\":\"caf\xC3\xA9-&lt;\xC3\xB1&gt;&amp;co: "));
  assert_non_null(strstr(b, "*Site*\\ncaf\xC3\xA9-&lt;\xC3\xB1&gt;&amp;co\""));
  j = json_parse(a, strlen(a));
  assert_true(cJSON_IsString(cJSON_GetObjectItem(j, "text")));
  assert_true(cJSON_IsArray(cJSON_GetObjectItem(j, "blocks")));
  assert_non_null(strstr(a, "https://cdnca.example.org/ui/#/incidents/7"));
  cJSON_Delete(j);
  free(a);
  free(b);
  free(c);
}

static void test_pd_actions_and_keys(void **state) {
  struct event_rec e = ev(41, "shop.example", "site.recovered", "Site recovered", "{\"level\":1}");
  char key[64];
  (void)state;
  assert_int_equal(chan_pd_action("incident.opened"), EVENT_PAGE_TRIGGER);
  assert_int_equal(chan_pd_action("site.all_levels_unhealthy"), EVENT_PAGE_TRIGGER);
  assert_int_equal(chan_pd_action("incident.resolved"), EVENT_PAGE_RESOLVE);
  assert_int_equal(chan_pd_action("site.recovered"), EVENT_PAGE_RESOLVE);
  assert_int_equal(chan_pd_action("level.switched"), EVENT_PAGE_NONE);
  assert_int_equal(chan_pd_action("incident.mitigated"), EVENT_PAGE_NONE);
  assert_int_equal(chan_pd_action("webhook.test"), EVENT_PAGE_TRIGGER);
  assert_int_equal(chan_pd_action("no.such"), EVENT_PAGE_NONE);
  {
    const char *pd[EVENT_TYPES + 1];
    char words[256];
    assert_int_equal(chan_pd_types(pd), 4);
    assert_string_equal(json_words(pd, words, sizeof words),
                        "site.all_levels_unhealthy, site.recovered, incident.opened, "
                        "incident.resolved");
  }
  /* no incident (incidents off): one key per site */
  chan_pd_dedup_key(&e, key, sizeof key);
  assert_string_equal(key, "cdnca-site-3");
  e.data = (char *)RESOLVED;
  chan_pd_dedup_key(&e, key, sizeof key);
  assert_string_equal(key, "cdnca-incident-7");
  e.data = (char *)SWITCH;
  snprintf(e.type, sizeof e.type, "level.switched");
  assert_null(chan_pd_body(&e, "R0UT1NGKEY0123456789abcdefghijkl", NULL));
}

static void test_pd_bodies(void **state) {
  struct event_rec o = ev(42, "shop.example", "incident.opened", "Incident opened", OPENED);
  struct event_rec r = ev(50, "shop.example", "incident.resolved", "Incident resolved", RESOLVED);
  struct event_rec u = ev(43, "ダッシュ.example", "site.all_levels_unhealthy",
                          "Every origin level is unhealthy", "{\"current_level\":2,\"why\":\"x\"}");
  char *a = chan_pd_body(&o, "R0UT1NGKEY0123456789abcdefghijkl", "https://cdnca.example.org");
  char *b = chan_pd_body(&r, "R0UT1NGKEY0123456789abcdefghijkl", "https://cdnca.example.org");
  char *c = chan_pd_body(&u, "R0UT1NGKEY0123456789abcdefghijkl", NULL);
  (void)state;
  assert_fixture("pd_trigger.json", a);
  assert_fixture("pd_resolve.json", b);
  assert_fixture("pd_utf8_critical.json", c);
  free(a);
  free(b);
  free(c);
}

/* A 2,000-character reason (2-byte characters): the summary holds at most 1024 characters, ends
   with an ellipsis and is valid UTF-8 (cJSON would print a split sequence as it is). */
static void test_pd_summary_cut(void **state) {
  char data[8192], *body;
  size_t at = 0, chars = 0, bytes;
  struct event_rec e;
  cJSON *j;
  const char *sum;
  (void)state;
  at += (size_t)snprintf(data, sizeof data, "{\"current_level\":1,\"why\":\"");
  for (int i = 0; i < 2000; i++) {
    memcpy(data + at, "\xC3\xA9", 2);
    at += 2;
  }
  snprintf(data + at, sizeof data - at, "\"}");
  e = ev(44, "shop.example", "site.all_levels_unhealthy", "Every origin level is unhealthy", data);
  body = chan_pd_body(&e, "R0UT1NGKEY0123456789abcdefghijkl", NULL);
  j = json_parse(body, strlen(body));
  assert_non_null(j);
  sum = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "payload"), "summary")->valuestring;
  bytes = chan_utf8_prefix(sum, strlen(sum), 100000, &chars);
  assert_int_equal(bytes, strlen(sum));
  assert_int_equal(chars, CHAN_PD_SUMMARY_MAX);
  /* every multi-byte sequence whole: the last character is the ellipsis, the one before é */
  assert_string_equal(sum + strlen(sum) - 5, "\xC3\xA9\xE2\x80\xA6");
  cJSON_Delete(j);
  free(body);
  /* the cut itself: never inside a character */
  assert_int_equal(chan_utf8_prefix("a\xC3\xA9z", 4, 2, &chars), 3);
  assert_int_equal(chars, 2);
  assert_int_equal(chan_utf8_prefix("\xF0\x9F\x98\x80x", 5, 1, NULL), 4);
}

static void test_email(void **state) {
  struct event_rec o = ev(42, "shop.example", "incident.opened", "Incident opened", OPENED);
  struct event_rec u = ev(43, "Ünïcødé-café.example", "site.recovered", "Site recovered",
                          "{\"level\":1,\"current_level\":1}");
  const char *to[] = {"oncall@example.org", "ops+cdn@example.net"};
  char *a =
      chan_email_message(&o, "cdnca@example.com", to, 2, "d-0001", "https://cdnca.example.org");
  char *b = chan_email_message(&u, "cdnca@example.com", to, 1, "d-0002", NULL);
  char *s = chan_email_subject(&u);
  (void)state;
  assert_fixture("email_opened.eml", a);
  assert_fixture("email_utf8.eml", b);
  assert_string_equal(s, "[cdnca] \xC3\x9Cn\xC3\xAF"
                         "c\xC3\xB8"
                         "d\xC3\xA9-caf\xC3\xA9.example: Site recovered (level 1)");
  /* headers end at the first empty line; every line ends with CRLF and is short */
  for (const char *p = a; *p;) {
    const char *nl = strstr(p, "\r\n");
    assert_non_null(nl);
    assert_true(nl - p <= 78);
    p = nl + 2;
  }
  free(a);
  free(b);
  free(s);
}

static void test_addresses(void **state) {
  (void)state;
  assert_true(chan_email_addr_ok("oncall@example.org"));
  assert_true(chan_email_addr_ok("ops+cdn.team@Example.NET"));
  assert_true(chan_email_addr_ok("root@localhost"));
  assert_false(chan_email_addr_ok(""));
  assert_false(chan_email_addr_ok("no-at.example.org"));
  assert_false(chan_email_addr_ok("a@b@c"));
  assert_false(chan_email_addr_ok(".a@example.org"));
  assert_false(chan_email_addr_ok("a..b@example.org"));
  assert_false(chan_email_addr_ok("Ops <ops@example.org>"));
  assert_false(chan_email_addr_ok("a@exa mple.org"));
  assert_false(chan_email_addr_ok("a@example.org\r\nBcc: x@y.z"));
  assert_int_equal(chan_kind_parse("pagerduty"), CHAN_PAGERDUTY);
  assert_true(chan_host_loopback("127.0.0.1"));
  assert_true(chan_host_loopback("127.3.2.1"));
  assert_true(chan_host_loopback("[::1]"));
  assert_true(chan_host_loopback("localhost"));
  assert_false(chan_host_loopback("127.0.0.1.example.com"));
  assert_false(chan_host_loopback("::ffff:127.0.0.1"));
  assert_false(chan_host_loopback("10.0.0.1"));
  assert_true(chan_pd_key_ok("R0UT1NGKEY0123456789abcdefghijkl"));
  assert_false(chan_pd_key_ok("R0UT1NGKEY0123456789abcdefghijk"));
  assert_false(chan_pd_key_ok("R0UT1NGKEY0123456789abcdefghij-l"));
  assert_int_equal(chan_kind_parse("sms"), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slack),     cmocka_unit_test(test_pd_actions_and_keys),
      cmocka_unit_test(test_pd_bodies), cmocka_unit_test(test_pd_summary_cut),
      cmocka_unit_test(test_email),     cmocka_unit_test(test_addresses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
