/* Unit tests for controld/model: validation rules and field paths, defaults, PATCH rules, JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"
#include "model.h"
#include "noderetry.h"

static cJSON *parse(const char *txt) {
  cJSON *j = json_parse(txt, strlen(txt));
  assert_non_null(j);
  return j;
}

/* model_site_create on a fresh default record; s must be site_rec_fini'd by the caller. */
static int create(const char *txt, struct site_rec *s, struct field_err *e) {
  cJSON *j = parse(txt);
  int r;
  site_rec_defaults(s);
  memset(e, 0, sizeof *e);
  r = model_site_create(j, s, e);
  cJSON_Delete(j);
  return r;
}

static int patch(const char *txt, struct site_rec *s, struct field_err *e) {
  cJSON *j = parse(txt);
  int r;
  memset(e, 0, sizeof *e);
  r = model_site_patch(j, s, e);
  cJSON_Delete(j);
  return r;
}

static void test_defaults_minimal(void **state) {
  struct site_rec s;
  struct field_err e;
  assert_int_equal(create("{\"name\":\"shop\",\"hostnames\":[\"Shop.Example.COM\"]}", &s, &e), 0);
  assert_string_equal(s.name, "shop");
  assert_int_equal(s.n_hostnames, 1);
  assert_string_equal(s.hostnames[0], "shop.example.com");
  assert_int_equal(s.failback, HEALTH_FAILBACK_AUTO);
  assert_int_equal(s.failback_hold_ms, 0);
  assert_int_equal(s.hc_enabled, 0);
  assert_string_equal(s.hc_path, "/");
  assert_int_equal(s.hc_timeout_ms, 5000);
  assert_int_equal(s.hc_unhealthy_after, 3);
  assert_int_equal(s.hc_healthy_after, 2);
  assert_int_equal(s.hc_checkpoints, 0);
  assert_int_equal(s.nr_retries, 2);
  assert_int_equal(s.nr_retry_budget_ms, 15000);
  assert_int_equal(s.nr_fail_count, 3);
  assert_int_equal(s.nr_fail_window_ms, 10000);
  assert_int_equal(s.nr_skip_ms, 30000);
  assert_int_equal(s.nr_half_open_requests, 1);
  assert_int_equal(s.n_retry_on_status, 3);
  assert_int_equal(s.retry_on_status[0], 502);
  assert_int_equal(s.retry_on_status[1], 503);
  assert_int_equal(s.retry_on_status[2], 504);
  assert_int_equal(s.n_origins, 0);
  assert_int_equal(s.current_level, 1);
  site_rec_fini(&s);
}

static void test_origin_defaults_and_hc_default(void **state) {
  struct site_rec s;
  struct field_err e;
  assert_int_equal(create("{\"name\":\"a\",\"hostnames\":[\"a.com\"],\"origins\":["
                          "{\"address\":\"10.0.0.1\"},"
                          "{\"address\":\"Origin.Example.NET\",\"scheme\":\"http\",\"level\":2}]}",
                          &s, &e),
                   0);
  assert_int_equal(s.n_origins, 2);
  assert_int_equal(s.origins[0].level, 1);
  assert_int_equal(s.origins[0].port, 443);
  assert_int_equal(s.origins[0].scheme, SCHEME_HTTPS);
  assert_int_equal(s.origins[0].weight, 1);
  assert_int_equal(s.origins[0].enabled, 1);
  assert_int_equal(s.origins[0].health, HEALTH_UNKNOWN);
  assert_string_equal(s.origins[0].host_header, "");
  assert_int_equal(s.origins[1].port, 80);
  assert_int_equal(s.origins[1].level, 2);
  assert_string_equal(s.origins[1].address, "origin.example.net");
  /* two enabled origins: health checks default to on */
  assert_int_equal(s.hc_enabled, 1);
  site_rec_fini(&s);

  /* one of two disabled: off by default, and no error */
  assert_int_equal(
      create("{\"name\":\"a\",\"hostnames\":[\"a.com\"],\"origins\":["
             "{\"address\":\"10.0.0.1\"},{\"address\":\"10.0.0.2\",\"enabled\":false}]}",
             &s, &e),
      0);
  assert_int_equal(s.hc_enabled, 0);
  assert_int_equal(model_enabled_origins(&s), 1);
  site_rec_fini(&s);

  /* explicitly off with two origins stays off */
  assert_int_equal(
      create("{\"name\":\"a\",\"hostnames\":[\"a.com\"],\"health_check\":{\"enabled\":false},"
             "\"origins\":[{\"address\":\"10.0.0.1\"},{\"address\":\"10.0.0.2\"}]}",
             &s, &e),
      0);
  assert_int_equal(s.hc_enabled, 0);
  site_rec_fini(&s);

  /* an explicit port wins over the scheme's default; IPv6 literal addresses are fine */
  assert_int_equal(create("{\"name\":\"a\",\"hostnames\":[\"a.com\"],\"origins\":["
                          "{\"address\":\"2001:db8::1\",\"scheme\":\"http\",\"port\":8443,"
                          "\"host_header\":\"Up.Example.com\",\"weight\":100}]}",
                          &s, &e),
                   0);
  assert_int_equal(s.origins[0].port, 8443);
  assert_string_equal(s.origins[0].host_header, "up.example.com");
  assert_int_equal(s.origins[0].weight, 100);
  site_rec_fini(&s);
}

static void test_explicit_values(void **state) {
  struct site_rec s;
  struct field_err e;
  assert_int_equal(
      create("{\"name\":\"x_1.y-z\",\"hostnames\":[\"a.com\",\"b.a.com\"],\"failback\":\"manual\","
             "\"failback_hold_ms\":60000,"
             "\"health_check\":{\"enabled\":true,\"path\":\"/hc?x=1\",\"timeout_ms\":100,"
             "\"unhealthy_after\":100,\"healthy_after\":1,\"checkpoints\":true},"
             "\"node_retry\":{\"retries\":0,\"retry_budget_ms\":0,\"fail_count\":1,"
             "\"fail_window_ms\":100,\"skip_ms\":3600000,\"half_open_requests\":100,"
             "\"retry_on_status\":[400,599]},"
             "\"origins\":[{\"address\":\"10.0.0.1\"},{\"address\":\"10.0.0.2\",\"level\":16}]}",
             &s, &e),
      0);
  assert_string_equal(s.name, "x_1.y-z");
  assert_int_equal(s.n_hostnames, 2);
  assert_int_equal(s.failback, HEALTH_FAILBACK_MANUAL);
  assert_int_equal(s.failback_hold_ms, 60000);
  assert_int_equal(s.hc_enabled, 1);
  assert_string_equal(s.hc_path, "/hc?x=1");
  assert_int_equal(s.hc_timeout_ms, 100);
  assert_int_equal(s.hc_unhealthy_after, 100);
  assert_int_equal(s.hc_healthy_after, 1);
  assert_int_equal(s.hc_checkpoints, 1);
  assert_int_equal(s.nr_retries, 0);
  assert_int_equal(s.nr_retry_budget_ms, 0);
  assert_int_equal(s.nr_fail_count, 1);
  assert_int_equal(s.nr_fail_window_ms, 100);
  assert_int_equal(s.nr_skip_ms, 3600000);
  assert_int_equal(s.nr_half_open_requests, 100);
  assert_int_equal(s.n_retry_on_status, 2);
  assert_int_equal(s.retry_on_status[0], 400);
  assert_int_equal(s.retry_on_status[1], 599);
  assert_int_equal(s.origins[1].level, 16);
  site_rec_fini(&s);
}

struct bad_case {
  const char *body;
  unsigned status;
  const char *code; /* NULL = any */
  const char *field;
};

#define SITE(rest) "{\"name\":\"a\",\"hostnames\":[\"a.com\"]" rest "}"
#define ORIG(o) SITE(",\"origins\":[" o "]")

static const struct bad_case bad_creates[] = {
    /* unknown fields: 400 with the full path */
    {SITE(",\"foo\":1"), 400, "unknown_field", "foo"},
    {ORIG("{\"address\":\"10.0.0.1\",\"foo\":1}"), 400, "unknown_field", "origins[0].foo"},
    {ORIG("{\"address\":\"10.0.0.1\"},{\"address\":\"10.0.0.2\",\"x\":1}"), 400, "unknown_field",
     "origins[1].x"},
    {SITE(",\"health_check\":{\"bogus\":1}"), 400, "unknown_field", "health_check.bogus"},
    {SITE(",\"node_retry\":{\"bogus\":1}"), 400, "unknown_field", "node_retry.bogus"},
    /* required */
    {"{\"hostnames\":[\"a.com\"]}", 422, "required", "name"},
    {"{\"name\":\"a\"}", 422, "required", "hostnames"},
    {ORIG("{\"port\":80}"), 422, "required", "origins[0].address"},
    /* name */
    {"{\"name\":\"\",\"hostnames\":[\"a.com\"]}", 422, NULL, "name"},
    {"{\"name\":\"a b\",\"hostnames\":[\"a.com\"]}", 422, NULL, "name"},
    {"{\"name\":\"a/b\",\"hostnames\":[\"a.com\"]}", 422, NULL, "name"},
    {"{\"name\":7,\"hostnames\":[\"a.com\"]}", 422, "invalid_type", "name"},
    {"{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\","
     "\"hostnames\":[\"a.com\"]}",
     422, NULL, "name"}, /* 65 characters */
    /* hostnames */
    {"{\"name\":\"a\",\"hostnames\":[]}", 422, NULL, "hostnames"},
    {"{\"name\":\"a\",\"hostnames\":\"a.com\"}", 422, NULL, "hostnames"},
    {"{\"name\":\"a\",\"hostnames\":[\"bad_host.com\"]}", 422, NULL, "hostnames[0]"},
    {"{\"name\":\"a\",\"hostnames\":[\"a.com\",\"-a.com\"]}", 422, NULL, "hostnames[1]"},
    {"{\"name\":\"a\",\"hostnames\":[\"a.com\",\"a-.com\"]}", 422, NULL, "hostnames[1]"},
    {"{\"name\":\"a\",\"hostnames\":[\"a..com\"]}", 422, NULL, "hostnames[0]"},
    {"{\"name\":\"a\",\"hostnames\":[\"\"]}", 422, NULL, "hostnames[0]"},
    {"{\"name\":\"a\",\"hostnames\":[null]}", 422, NULL, "hostnames[0]"},
    {"{\"name\":\"a\",\"hostnames\":[\"a.com\",\"b.com\",\"A.COM\"]}", 422, "duplicate",
     "hostnames[2]"},
    /* failback */
    {SITE(",\"failback\":\"never\""), 422, NULL, "failback"},
    {SITE(",\"failback\":true"), 422, NULL, "failback"},
    {SITE(",\"failback_hold_ms\":-1"), 422, "out_of_range", "failback_hold_ms"},
    {SITE(",\"failback_hold_ms\":86400001"), 422, "out_of_range", "failback_hold_ms"},
    /* origins */
    {SITE(",\"origins\":{}"), 422, NULL, "origins"},
    {ORIG("\"10.0.0.1\""), 422, NULL, "origins[0]"},
    {ORIG("{\"address\":\"10.0.0.1\",\"port\":0}"), 422, "out_of_range", "origins[0].port"},
    {ORIG("{\"address\":\"10.0.0.1\",\"port\":65536}"), 422, "out_of_range", "origins[0].port"},
    {ORIG("{\"address\":\"10.0.0.1\",\"port\":1.5}"), 422, NULL, "origins[0].port"},
    {ORIG("{\"address\":\"10.0.0.1\",\"port\":\"80\"}"), 422, "invalid_type", "origins[0].port"},
    {ORIG("{\"address\":\"10.0.0.1\",\"scheme\":\"ftp\"}"), 422, NULL, "origins[0].scheme"},
    {ORIG("{\"address\":\"10.0.0.1\",\"scheme\":\"httpss\"}"), 422, NULL, "origins[0].scheme"},
    {ORIG("{\"address\":\"10.0.0.1\",\"level\":0}"), 422, "out_of_range", "origins[0].level"},
    {ORIG("{\"address\":\"10.0.0.1\",\"level\":17}"), 422, "out_of_range", "origins[0].level"},
    {ORIG("{\"address\":\"10.0.0.1\",\"weight\":0}"), 422, NULL, "origins[0].weight"},
    {ORIG("{\"address\":\"10.0.0.1\",\"weight\":101}"), 422, NULL, "origins[0].weight"},
    {ORIG("{\"address\":\"10.0.0.1\",\"enabled\":1}"), 422, "invalid_type", "origins[0].enabled"},
    {ORIG("{\"address\":\"not an address\"}"), 422, NULL, "origins[0].address"},
    {ORIG("{\"address\":\"\"}"), 422, NULL, "origins[0].address"},
    {ORIG("{\"address\":5}"), 422, "invalid_type", "origins[0].address"},
    {ORIG("{\"address\":\"10.0.0.1\",\"host_header\":\"a b\"}"), 422, NULL,
     "origins[0].host_header"},
    /* health checks */
    {SITE(",\"health_check\":[]"), 422, NULL, "health_check"},
    {SITE(",\"health_check\":{\"enabled\":true}"), 422, "health_check_needs_two_origins",
     "health_check.enabled"},
    {ORIG("{\"address\":\"10.0.0.1\"}") /* one origin */, 0, NULL, NULL},
    {SITE(",\"health_check\":{\"enabled\":true},\"origins\":[{\"address\":\"10.0.0.1\"},"
          "{\"address\":\"10.0.0.2\",\"enabled\":false}]"),
     422, "health_check_needs_two_origins", "health_check.enabled"},
    {SITE(",\"health_check\":{\"enabled\":\"yes\"}"), 422, "invalid_type", "health_check.enabled"},
    {SITE(",\"health_check\":{\"path\":\"healthz\"}"), 422, NULL, "health_check.path"},
    {SITE(",\"health_check\":{\"path\":\"/a b\"}"), 422, NULL, "health_check.path"},
    {SITE(",\"health_check\":{\"timeout_ms\":99}"), 422, NULL, "health_check.timeout_ms"},
    {SITE(",\"health_check\":{\"timeout_ms\":60001}"), 422, NULL, "health_check.timeout_ms"},
    {SITE(",\"health_check\":{\"unhealthy_after\":0}"), 422, NULL, "health_check.unhealthy_after"},
    {SITE(",\"health_check\":{\"healthy_after\":101}"), 422, NULL, "health_check.healthy_after"},
    {SITE(",\"health_check\":{\"checkpoints\":null}"), 422, NULL, "health_check.checkpoints"},
    /* node retry */
    {SITE(",\"node_retry\":1"), 422, NULL, "node_retry"},
    {SITE(",\"node_retry\":{\"retries\":11}"), 422, NULL, "node_retry.retries"},
    {SITE(",\"node_retry\":{\"retry_budget_ms\":-1}"), 422, NULL, "node_retry.retry_budget_ms"},
    {SITE(",\"node_retry\":{\"fail_count\":0}"), 422, NULL, "node_retry.fail_count"},
    {SITE(",\"node_retry\":{\"fail_window_ms\":99}"), 422, NULL, "node_retry.fail_window_ms"},
    {SITE(",\"node_retry\":{\"skip_ms\":3600001}"), 422, NULL, "node_retry.skip_ms"},
    {SITE(",\"node_retry\":{\"half_open_requests\":0}"), 422, NULL,
     "node_retry.half_open_requests"},
    {SITE(",\"node_retry\":{\"retry_on_status\":[399]}"), 422, "out_of_range",
     "node_retry.retry_on_status[0]"},
    {SITE(",\"node_retry\":{\"retry_on_status\":[502,600]}"), 422, "out_of_range",
     "node_retry.retry_on_status[1]"},
    {SITE(",\"node_retry\":{\"retry_on_status\":[502,\"503\"]}"), 422, NULL,
     "node_retry.retry_on_status[1]"},
    {SITE(",\"node_retry\":{\"retry_on_status\":502}"), 422, NULL, "node_retry.retry_on_status"},
    {SITE(",\"node_retry\":{\"retry_on_status\":[500,501,502,503,504,505,506,507,508,509,510,"
          "511,512,513,514,515,516]}"),
     422, NULL, "node_retry.retry_on_status"},
};

static void test_create_errors(void **state) {
  for (size_t i = 0; i < sizeof bad_creates / sizeof bad_creates[0]; i++) {
    const struct bad_case *c = &bad_creates[i];
    struct site_rec s;
    struct field_err e;
    int r = create(c->body, &s, &e);
    char ctx[512];
    snprintf(ctx, sizeof ctx, "case %zu: %s -> %u %s %s (%s)", i, c->body, e.status,
             e.code ? e.code : "-", e.field, e.message);
    if (c->status == 0) {
      if (r != 0) fail_msg("%s: expected success", ctx);
    } else {
      if (r != -1) fail_msg("%s: expected %u", ctx, c->status);
      if (e.status != c->status) fail_msg("%s: status", ctx);
      if (strcmp(e.field, c->field) != 0) fail_msg("%s: field, want %s", ctx, c->field);
      if (c->code && (!e.code || strcmp(e.code, c->code) != 0))
        fail_msg("%s: code, want %s", ctx, c->code);
      if (!e.message[0]) fail_msg("%s: empty message", ctx);
    }
    site_rec_fini(&s);
  }
}

static void test_too_many(void **state) {
  char body[8192], *p = body;
  size_t left = sizeof body;
  struct site_rec s;
  struct field_err e;
  int n;
  /* 33 hostnames */
  n = snprintf(p, left, "{\"name\":\"a\",\"hostnames\":[");
  p += n, left -= (size_t)n;
  for (int i = 0; i < 33; i++) {
    n = snprintf(p, left, "%s\"h%d.com\"", i ? "," : "", i);
    p += n, left -= (size_t)n;
  }
  snprintf(p, left, "]}");
  assert_int_equal(create(body, &s, &e), -1);
  assert_int_equal(e.status, 422);
  assert_string_equal(e.field, "hostnames");
  site_rec_fini(&s);
  /* 32 is fine */
  p = strstr(body, ",\"h32.com\"");
  assert_non_null(p);
  snprintf(p, 4, "]}");
  assert_int_equal(create(body, &s, &e), 0);
  assert_int_equal(s.n_hostnames, 32);
  site_rec_fini(&s);
  /* 65 origins */
  p = body, left = sizeof body;
  n = snprintf(p, left, "{\"name\":\"a\",\"hostnames\":[\"a.com\"],\"origins\":[");
  p += n, left -= (size_t)n;
  for (int i = 0; i < 65; i++) {
    n = snprintf(p, left, "%s{\"address\":\"10.0.0.%d\"}", i ? "," : "", i);
    p += n, left -= (size_t)n;
  }
  snprintf(p, left, "]}");
  assert_int_equal(create(body, &s, &e), -1);
  assert_int_equal(e.status, 422);
  assert_string_equal(e.field, "origins");
  site_rec_fini(&s);
}

static void test_patch_rules(void **state) {
  struct site_rec s, before;
  struct field_err e;
  assert_int_equal(create("{\"name\":\"a\",\"hostnames\":[\"a.com\",\"b.com\"],\"origins\":["
                          "{\"address\":\"10.0.0.1\"},{\"address\":\"10.0.0.2\"}]}",
                          &s, &e),
                   0);
  assert_int_equal(site_rec_copy(&before, &s), 0);
  /* origins are not patchable through the site: 400 */
  assert_int_equal(patch("{\"origins\":[]}", &s, &e), -1);
  assert_int_equal(e.status, 400);
  assert_string_equal(e.field, "origins");
  assert_int_equal(patch("{\"failback\":\"manual\",\"origins\":[]}", &s, &e), -1);
  assert_int_equal(e.status, 400);
  assert_string_equal(e.field, "origins");
  assert_int_equal(patch("{\"zzz\":1}", &s, &e), -1);
  assert_int_equal(e.status, 400);
  assert_string_equal(e.field, "zzz");
  assert_int_equal(patch("{\"health_check\":{\"zzz\":1}}", &s, &e), -1);
  assert_string_equal(e.field, "health_check.zzz");
  site_rec_fini(&s);
  assert_int_equal(site_rec_copy(&s, &before), 0);

  /* a partial patch keeps everything else */
  assert_int_equal(
      patch("{\"health_check\":{\"path\":\"/x\"},\"node_retry\":{\"skip_ms\":500}}", &s, &e), 0);
  assert_string_equal(s.hc_path, "/x");
  assert_int_equal(s.hc_enabled, 1);
  assert_int_equal(s.hc_timeout_ms, 5000);
  assert_int_equal(s.nr_skip_ms, 500);
  assert_int_equal(s.nr_retries, 2);
  assert_int_equal(s.n_retry_on_status, 3);
  assert_int_equal(s.n_hostnames, 2);
  assert_string_equal(s.name, "a");
  assert_int_equal(s.n_origins, 2);
  /* hostnames are replaced as a whole */
  assert_int_equal(patch("{\"hostnames\":[\"C.com\"]}", &s, &e), 0);
  assert_int_equal(s.n_hostnames, 1);
  assert_string_equal(s.hostnames[0], "c.com");
  /* retry statuses replaced as a whole */
  assert_int_equal(patch("{\"node_retry\":{\"retry_on_status\":[500]}}", &s, &e), 0);
  assert_int_equal(s.n_retry_on_status, 1);
  assert_int_equal(s.retry_on_status[0], 500);
  /* turning checks off and on again with two enabled origins */
  assert_int_equal(patch("{\"health_check\":{\"enabled\":false}}", &s, &e), 0);
  assert_int_equal(s.hc_enabled, 0);
  assert_int_equal(patch("{\"health_check\":{\"enabled\":true}}", &s, &e), 0);
  assert_int_equal(s.hc_enabled, 1);
  /* with one enabled origin left: other patches pass (checks stay on, paused) ... */
  s.origins[1].enabled = 0;
  assert_int_equal(patch("{\"failback\":\"manual\"}", &s, &e), 0);
  assert_int_equal(s.hc_enabled, 1);
  assert_int_equal(s.failback, HEALTH_FAILBACK_MANUAL);
  /* ... but asking for them is a 422 */
  assert_int_equal(patch("{\"health_check\":{\"enabled\":true}}", &s, &e), -1);
  assert_int_equal(e.status, 422);
  assert_string_equal(e.field, "health_check.enabled");
  assert_int_equal(patch("{\"health_check\":{\"enabled\":false}}", &s, &e), 0);
  assert_int_equal(s.hc_enabled, 0);
  /* values are validated as on create */
  assert_int_equal(patch("{\"name\":\"bad name\"}", &s, &e), -1);
  assert_int_equal(e.status, 422);
  assert_string_equal(e.field, "name");
  assert_int_equal(patch("{\"hostnames\":[\"ok.com\",\"Ok.com\"]}", &s, &e), -1);
  assert_string_equal(e.field, "hostnames[1]");
  assert_int_equal(patch("{\"node_retry\":{\"retry_on_status\":[0]}}", &s, &e), -1);
  assert_string_equal(e.field, "node_retry.retry_on_status[0]");
  assert_int_equal(patch("{}", &s, &e), 0);
  site_rec_fini(&s);
  site_rec_fini(&before);
}

static int apply(const char *txt, struct origin_rec *o, int creating, const char *prefix,
                 struct field_err *e) {
  cJSON *j = parse(txt);
  int r;
  memset(e, 0, sizeof *e);
  r = model_origin_apply(j, o, creating, prefix, e);
  cJSON_Delete(j);
  return r;
}

static void test_origin_apply(void **state) {
  struct origin_rec o;
  struct field_err e;
  assert_int_equal(apply("{\"address\":\"Up.Example.com\",\"scheme\":\"http\"}", &o, 1, "", &e), 0);
  assert_string_equal(o.address, "up.example.com");
  assert_int_equal(o.port, 80);
  assert_int_equal(o.level, 1);
  assert_int_equal(o.weight, 1);
  assert_int_equal(o.enabled, 1);
  o.id = 5;
  o.health = HEALTH_HEALTHY;
  /* PATCH: only what is given changes; paths have no prefix */
  assert_int_equal(apply("{\"port\":8080,\"enabled\":false}", &o, 0, "", &e), 0);
  assert_int_equal(o.port, 8080);
  assert_int_equal(o.enabled, 0);
  assert_int_equal(o.scheme, SCHEME_HTTP);
  assert_string_equal(o.address, "up.example.com");
  assert_int_equal(o.id, 5);
  assert_int_equal(o.health, HEALTH_HEALTHY);
  /* changing the scheme keeps an explicit port */
  assert_int_equal(apply("{\"scheme\":\"https\"}", &o, 0, "", &e), 0);
  assert_int_equal(o.port, 8080);
  /* host_header null clears it */
  assert_int_equal(apply("{\"host_header\":\"h.example.com\"}", &o, 0, "", &e), 0);
  assert_string_equal(o.host_header, "h.example.com");
  assert_int_equal(apply("{\"host_header\":null}", &o, 0, "", &e), 0);
  assert_string_equal(o.host_header, "");
  /* errors name the bare field, or prefix.field */
  assert_int_equal(apply("{\"port\":0}", &o, 0, "", &e), -1);
  assert_int_equal(e.status, 422);
  assert_string_equal(e.field, "port");
  assert_int_equal(o.port, 8080);
  assert_int_equal(apply("{\"level\":17}", &o, 0, "origins[3]", &e), -1);
  assert_string_equal(e.field, "origins[3].level");
  assert_int_equal(apply("{\"nope\":1}", &o, 0, "", &e), -1);
  assert_int_equal(e.status, 400);
  assert_string_equal(e.field, "nope");
  assert_int_equal(apply("[]", &o, 0, "", &e), -1);
  assert_int_equal(e.status, 422);
  assert_string_equal(e.field, "origin");
  assert_int_equal(apply("{}", &o, 1, "", &e), -1);
  assert_string_equal(e.field, "address");
  assert_string_equal(e.code, "required");
}

static void test_hc_state(void **state) {
  struct site_rec s;
  struct field_err e;
  const char *reason = NULL;
  assert_int_equal(create("{\"name\":\"a\",\"hostnames\":[\"a.com\"],\"origins\":["
                          "{\"address\":\"10.0.0.1\"},{\"address\":\"10.0.0.2\"}]}",
                          &s, &e),
                   0);
  assert_string_equal(model_hc_state(&s, &reason), "active");
  assert_non_null(reason);
  assert_int_equal(model_check_health_rule(&s, &e), 0);
  s.origins[0].enabled = 0;
  reason = NULL;
  assert_string_equal(model_hc_state(&s, &reason), "paused");
  assert_non_null(reason);
  assert_non_null(strstr(reason, "two"));
  assert_int_equal(model_check_health_rule(&s, &e), -1);
  assert_int_equal(e.status, 422);
  assert_string_equal(e.field, "health_check.enabled");
  s.hc_enabled = 0;
  reason = NULL;
  assert_string_equal(model_hc_state(&s, &reason), "disabled");
  assert_non_null(reason);
  assert_int_equal(model_check_health_rule(&s, &e), 0);
  site_rec_fini(&s);
}

static void test_site_json(void **state) {
  struct site_rec s;
  struct field_err e;
  cJSON *j, *hc, *o;
  assert_int_equal(create("{\"name\":\"a\",\"hostnames\":[\"A.com\"],\"origins\":["
                          "{\"address\":\"10.0.0.1\",\"host_header\":\"h.com\"},"
                          "{\"address\":\"10.0.0.2\",\"enabled\":false}]}",
                          &s, &e),
                   0);
  s.id = 9;
  s.origins[0].id = 1;
  s.origins[1].id = 2;
  j = model_site_json(&s);
  assert_non_null(j);
  assert_int_equal(cJSON_GetObjectItem(j, "id")->valuedouble, 9);
  assert_string_equal(cJSON_GetObjectItem(j, "name")->valuestring, "a");
  assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "hostnames"), 0)->valuestring,
                      "a.com");
  hc = cJSON_GetObjectItem(j, "health_check");
  assert_true(cJSON_IsFalse(cJSON_GetObjectItem(hc, "enabled")));
  assert_string_equal(cJSON_GetObjectItem(hc, "state")->valuestring, "disabled");
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "node_retry"),
                                                          "retry_on_status")),
                   3);
  o = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "origins"), 0);
  assert_string_equal(cJSON_GetObjectItem(o, "host_header")->valuestring, "h.com");
  assert_string_equal(cJSON_GetObjectItem(o, "health")->valuestring, "unknown");
  o = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "origins"), 1);
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "host_header")));
  assert_true(cJSON_IsFalse(cJSON_GetObjectItem(o, "enabled")));
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "created_at"))); /* never stored */
  cJSON_Delete(j);
  site_rec_fini(&s);
}

/* The keys of object j, comma-separated, into out. */
static void keys_of(const cJSON *j, char *out, size_t cap) {
  size_t at = 0;
  const cJSON *it;
  out[0] = '\0';
  cJSON_ArrayForEach(it, j) at +=
      (size_t)snprintf(out + at, cap - at, "%s%s", at ? "," : "", it->string);
}

/* The site's JSON from its field table keeps the API's and the export's keys in their order, and
   the node_retry object is the one common/noderetry writes. */
static void test_site_json_keys(void **state) {
  struct site_rec s;
  struct field_err e;
  struct skip_params p;
  cJSON *j, *nr;
  char keys[1024], *a, *b;
  (void)state;
  assert_int_equal(create("{\"name\":\"a\",\"hostnames\":[\"a.com\"],\"health_check\":"
                          "{\"type\":\"tcp\",\"interval_ms\":5000},"
                          "\"node_retry\":{\"failure_ratio\":0.25}}",
                          &s, &e),
                   0);
  j = model_site_json(&s);
  keys_of(j, keys, sizeof keys);
  assert_string_equal(keys, "id,name,hostnames,failback,failback_hold_ms,failback_ramp,"
                            "health_check,health_check_shadow,node_retry,current_level,"
                            "config_version,revision,origins,created_at,updated_at");
  keys_of(cJSON_GetObjectItem(j, "health_check"), keys, sizeof keys);
  assert_string_equal(keys, "enabled,state,path,timeout_ms,unhealthy_after,healthy_after,"
                            "checkpoints,type,method,headers,expected_codes,expected_body,port,"
                            "interval_ms,level_min_healthy");
  assert_string_equal(
      cJSON_GetObjectItem(cJSON_GetObjectItem(j, "health_check"), "type")->valuestring, "tcp");
  site_rec_retry(&s, &p);
  nr = noderetry_json(&p);
  a = cJSON_PrintUnformatted(nr);
  b = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "node_retry"));
  assert_string_equal(b, a);
  free(a);
  free(b);
  cJSON_Delete(nr);
  cJSON_Delete(j);
  j = cJSON_CreateObject();
  assert_int_equal(model_site_json_add(j, &s, FORM_EXPORT), 0);
  keys_of(j, keys, sizeof keys);
  assert_string_equal(keys, "id,name,hostnames,failback,failback_hold_ms,failback_ramp,"
                            "health_check,health_check_shadow,node_retry,current_level,manual_pin,"
                            "config_version,revision,created_at_ms,updated_at_ms");
  assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "health_check"), "state"));
  cJSON_Delete(j);
  site_rec_fini(&s);
}

/* The origin's field table covers the whole record: between two members there is no more room
   than the next one's alignment needs (a member without a row would leave a hole), so reading a
   row writes every member. */
static int align_of(const struct field_def *d) {
  if (d->type == FIELD_INT) return d->size == 8 ? 8 : 4;
  if (d->type == FIELD_BOOL || d->type == FIELD_NAMED) return 4;
  return 1;
}

static void test_origin_table_covers_record(void **state) {
  const struct field_def *rows[64];
  int n = 0;
  size_t at = 0;
  (void)state;
  for (const struct field_def *d = site_origin_fields; d->name; d++) {
    assert_non_null(d->column);
    assert_true(n < 64);
    rows[n++] = d;
  }
  for (int i = 0; i < n; i++) /* by offset */
    for (int j = i + 1; j < n; j++)
      if (rows[j]->offset < rows[i]->offset) {
        const struct field_def *x = rows[i];
        rows[i] = rows[j];
        rows[j] = x;
      }
  for (int i = 0; i < n; i++) {
    size_t gap = rows[i]->offset - at;
    if (rows[i]->offset < at || gap >= (size_t)align_of(rows[i]))
      fail_msg("origin_rec: %zu bytes before %s have no row", gap, rows[i]->name);
    at = rows[i]->offset + rows[i]->size;
  }
  assert_true(sizeof(struct origin_rec) - at < 8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_origin_table_covers_record),
      cmocka_unit_test(test_defaults_minimal),
      cmocka_unit_test(test_origin_defaults_and_hc_default),
      cmocka_unit_test(test_explicit_values),
      cmocka_unit_test(test_create_errors),
      cmocka_unit_test(test_too_many),
      cmocka_unit_test(test_patch_rules),
      cmocka_unit_test(test_origin_apply),
      cmocka_unit_test(test_hc_state),
      cmocka_unit_test(test_site_json),
      cmocka_unit_test(test_site_json_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
