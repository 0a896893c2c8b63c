/* Unit tests: health-check options (parse, validate, JSON round trip) and the success rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hcheck.h"
#include "json.h"

/* Options from a JSON text applied onto the defaults; fails the test when it does not validate. */
static struct hcheck_opts opts_of(const char *text) {
  struct hcheck_opts o;
  struct field_err err;
  cJSON *j = json_parse(text, strlen(text));
  hcheck_defaults(&o);
  assert_non_null(j);
  if (hcheck_apply_json(j, &o, &err) != 0) fail_msg("%s: %s: %s", text, err.field, err.message);
  cJSON_Delete(j);
  return o;
}

static cJSON *parse_text(const char *text) {
  return json_parse(text, strlen(text));
}

/* ---- the success rule, row by row ---- */

struct judge_row {
  const char *opts; /* JSON of the options */
  int connected, timed_out, status;
  const char *error; /* transport error */
  const char *body;  /* NULL = none kept */
  int want_ok;
  const char *want_evidence;
};

static const struct judge_row judge_rows[] = {
    /* defaults: the seed's rule, status < 500 */
    {"{}", 1, 0, 200, NULL, "", 1, ""},
    {"{}", 1, 0, 204, NULL, NULL, 1, ""},
    {"{}", 1, 0, 302, NULL, NULL, 1, ""},
    {"{}", 1, 0, 403, NULL, NULL, 1, ""},
    {"{}", 1, 0, 404, NULL, NULL, 1, ""},
    {"{}", 1, 0, 499, NULL, NULL, 1, ""},
    {"{}", 1, 0, 500, NULL, NULL, 0, "status 500"},
    {"{}", 1, 0, 503, NULL, NULL, 0, "status 503"},
    {"{}", 1, 0, 599, NULL, NULL, 0, "status 599"},
    {"{}", 0, 0, 0, "connect failed: Connection refused", NULL, 0,
     "connect failed: Connection refused"},
    {"{}", 0, 1, 0, NULL, NULL, 0, "connect timeout"},
    {"{}", 0, 1, 0, "timeout", NULL, 0, "connect timeout"},
    {"{}", 0, 0, 0, "tls: certificate verify failed", NULL, 0, "tls: certificate verify failed"},
    {"{}", 0, 0, 0, NULL, NULL, 0, "connect failed"},
    {"{}", 1, 1, 0, NULL, NULL, 0, "timeout"},
    {"{}", 1, 0, 0, "empty reply", NULL, 0, "empty reply"},
    {"{}", 1, 0, 0, NULL, NULL, 0, "no response"},
    /* expected_codes */
    {"{\"expected_codes\": [\"200-299\"]}", 1, 0, 200, NULL, NULL, 1, ""},
    {"{\"expected_codes\": [\"200-299\"]}", 1, 0, 299, NULL, NULL, 1, ""},
    {"{\"expected_codes\": [\"200-299\"]}", 1, 0, 403, NULL, NULL, 0, "unexpected status 403"},
    {"{\"expected_codes\": [\"200-299\"]}", 1, 0, 302, NULL, NULL, 0, "unexpected status 302"},
    {"{\"expected_codes\": [\"200-299\"]}", 1, 0, 503, NULL, NULL, 0, "unexpected status 503"},
    {"{\"expected_codes\": [\"200-299\", \"301\"]}", 1, 0, 301, NULL, NULL, 1, ""},
    {"{\"expected_codes\": [\"200-299\", 301]}", 1, 0, 302, NULL, NULL, 0, "unexpected status 302"},
    {"{\"expected_codes\": [503]}", 1, 0, 503, NULL, NULL, 1, ""}, /* 5xx may be expected */
    {"{\"expected_codes\": [\"200\"]}", 0, 1, 0, NULL, NULL, 0, "connect timeout"},
    /* expected_body: searched in the body kept (its first 64 KiB) */
    {"{\"expected_body\": \"OK\"}", 1, 0, 200, NULL, "status: OK\n", 1, ""},
    {"{\"expected_body\": \"OK\"}", 1, 0, 200, NULL, "status: down\n", 0, "body mismatch"},
    {"{\"expected_body\": \"OK\"}", 1, 0, 200, NULL, NULL, 0, "body mismatch"},
    {"{\"expected_body\": \"OK\"}", 1, 0, 200, NULL, "", 0, "body mismatch"},
    {"{\"expected_body\": \"OK\"}", 1, 0, 503, NULL, "OK", 0, "status 503"},    /* status first */
    {"{\"expected_body\": \"ok\"}", 1, 0, 200, NULL, "OK", 0, "body mismatch"}, /* case matters */
    {"{\"expected_codes\": [\"200\"], \"expected_body\": \"up\"}", 1, 0, 200, NULL, "all up", 1,
     ""},
    {"{\"expected_codes\": [\"200\"], \"expected_body\": \"up\"}", 1, 0, 404, NULL, "up", 0,
     "unexpected status 404"},
    {"{\"expected_codes\": [\"200\"], \"expected_body\": \"up\"}", 1, 0, 200, NULL, "down", 0,
     "body mismatch"},
    /* method, headers and port do not change the rule */
    {"{\"method\": \"HEAD\"}", 1, 0, 200, NULL, NULL, 1, ""},
    {"{\"method\": \"HEAD\", \"expected_codes\": [\"200\"]}", 1, 0, 405, NULL, NULL, 0,
     "unexpected status 405"},
    {"{\"headers\": {\"X-Probe\": \"1\"}, \"port\": 8081}", 1, 0, 204, NULL, NULL, 1, ""},
    {"{\"headers\": {\"X-Probe\": \"1\"}, \"port\": 8081}", 0, 0, 0,
     "connect failed: Connection refused", NULL, 0, "connect failed: Connection refused"},
    /* tcp: the connection completing is the success */
    {"{\"type\": \"tcp\"}", 1, 0, 0, NULL, NULL, 1, ""},
    {"{\"type\": \"tcp\"}", 1, 1, 0, NULL, NULL, 1, ""}, /* a silent listener is healthy */
    {"{\"type\": \"tcp\"}", 0, 1, 0, NULL, NULL, 0, "connect timeout"},
    {"{\"type\": \"tcp\"}", 0, 0, 0, "connect failed: Connection refused", NULL, 0,
     "connect failed: Connection refused"},
    {"{\"type\": \"tcp\", \"port\": 9}", 1, 0, 0, NULL, NULL, 1, ""},
};

static void test_judge_rows(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof judge_rows / sizeof judge_rows[0]; i++) {
    const struct judge_row *r = &judge_rows[i];
    struct hcheck_opts o = opts_of(r->opts);
    struct hcheck_outcome out = {.connected = r->connected,
                                 .timed_out = r->timed_out,
                                 .status = r->status,
                                 .error = r->error,
                                 .body = r->body,
                                 .body_len = r->body ? strlen(r->body) : 0};
    char ev[HCHECK_EVIDENCE_MAX];
    int ok;
    memset(ev, 'x', sizeof ev);
    ok = hcheck_judge(&o, &out, ev, sizeof ev);
    if (ok != r->want_ok || strcmp(ev, r->want_evidence) != 0)
      fail_msg("row %zu (%s, status %d): got %d \"%s\", want %d \"%s\"", i, r->opts, r->status, ok,
               ev, r->want_ok, r->want_evidence);
  }
}

/* A checkpoint vote re-judged against the site's options: {opts, vote ok, status, error} ->
 * {ok, evidence}. */
struct rejudge_row {
  const char *opts;
  int ok, status;
  const char *error;
  int want_ok;
  const char *want_evidence;
};

static const struct rejudge_row rejudge_rows[] = {
    /* default rule: the status decides, both ways */
    {"{}", 1, 200, NULL, 1, ""},
    {"{}", 1, 404, NULL, 1, ""},
    {"{}", 1, 503, NULL, 0, "status 503"}, /* a plugin calling a 503 ok is overruled */
    {"{}", 0, 200, "slow", 1, ""},         /* the status is the whole rule */
    {"{}", 0, 503, "status 503", 0, "status 503"},
    /* expected_codes */
    {"{\"expected_codes\": [\"200-299\"]}", 1, 403, NULL, 0, "unexpected status 403"},
    {"{\"expected_codes\": [\"200-299\"]}", 1, 302, "", 0, "unexpected status 302"},
    {"{\"expected_codes\": [\"200-299\"]}", 1, 204, NULL, 1, ""},
    {"{\"expected_codes\": [\"200-299\"]}", 0, 204, "x", 1, ""},
    {"{\"expected_codes\": [503]}", 0, 503, "status 503", 1, ""}, /* 5xx may be expected */
    /* expected_body: only the voter saw the body, so its ok stands once the status passes */
    {"{\"expected_body\": \"up\"}", 1, 200, NULL, 1, ""},
    {"{\"expected_body\": \"up\"}", 0, 200, "body mismatch", 0, "body mismatch"},
    {"{\"expected_body\": \"up\"}", 0, 200, NULL, 0, "failed"},
    {"{\"expected_body\": \"up\"}", 1, 500, NULL, 0, "status 500"},
    {"{\"expected_codes\": [\"200\"], \"expected_body\": \"up\"}", 1, 201, NULL, 0,
     "unexpected status 201"},
    /* no status: nothing to re-judge, the vote stands */
    {"{}", 1, 0, NULL, 1, ""},
    {"{}", 0, 0, "connect timeout", 0, "connect timeout"},
    {"{}", 0, 0, NULL, 0, "failed"},
    {"{\"expected_codes\": [\"200\"]}", 1, 0, NULL, 1, ""},
    {"{}", 1, 99, NULL, 1, ""}, /* not an HTTP status: ignored */
    {"{}", 1, 1000, NULL, 1, ""},
    /* tcp: no request is sent, a status means nothing */
    {"{\"type\": \"tcp\"}", 1, 503, NULL, 1, ""},
    {"{\"type\": \"tcp\"}", 0, 200, "connect failed: Connection refused", 0,
     "connect failed: Connection refused"},
};

static void test_rejudge_rows(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rejudge_rows / sizeof rejudge_rows[0]; i++) {
    const struct rejudge_row *r = &rejudge_rows[i];
    struct hcheck_opts o = opts_of(r->opts);
    char ev[HCHECK_EVIDENCE_MAX];
    int ok;
    memset(ev, 'x', sizeof ev);
    ok = hcheck_rejudge(&o, r->ok, r->status, r->error, ev, sizeof ev);
    if (ok != r->want_ok || strcmp(ev, r->want_evidence) != 0)
      fail_msg("row %zu (%s, ok %d, status %d): got %d \"%s\", want %d \"%s\"", i, r->opts, r->ok,
               r->status, ok, ev, r->want_ok, r->want_evidence);
  }
  /* evidence is bounded and optional */
  {
    struct hcheck_opts o = opts_of("{\"expected_codes\": [\"200\"]}");
    char small[8];
    assert_int_equal(hcheck_rejudge(&o, 1, 403, NULL, small, sizeof small), 0);
    assert_string_equal(small, "unexpec");
    assert_int_equal(hcheck_rejudge(&o, 1, 200, NULL, NULL, 0), 1);
  }
}

/* The default rule over every status equals the seed's: success iff 100 <= status < 500. */
static void test_judge_default_every_status(void **state) {
  struct hcheck_opts o;
  (void)state;
  hcheck_defaults(&o);
  for (int st = 100; st <= 599; st++) {
    struct hcheck_outcome out = {.connected = 1, .status = st};
    assert_int_equal(hcheck_judge(&o, &out, NULL, 0), st < 500);
  }
}

/* The marker is looked for in the first 64 KiB only. */
static void test_judge_body_window(void **state) {
  struct hcheck_opts o = opts_of("{\"expected_body\": \"MARK\"}");
  size_t n = HCHECK_BODY_MAX + 16;
  char *body = malloc(n);
  char ev[64];
  struct hcheck_outcome out = {.connected = 1, .status = 200, .body = body};
  (void)state;
  assert_non_null(body);
  memset(body, 'a', n);
  memcpy(body + HCHECK_BODY_MAX - 4, "MARK", 4); /* ends exactly at the limit: found */
  out.body_len = n;
  assert_int_equal(hcheck_judge(&o, &out, ev, sizeof ev), 1);
  memset(body, 'a', n);
  memcpy(body + HCHECK_BODY_MAX - 2, "MARK", 4); /* straddles the limit: not found */
  assert_int_equal(hcheck_judge(&o, &out, ev, sizeof ev), 0);
  assert_string_equal(ev, "body mismatch");
  free(body);
}

static void test_judge_small_evidence_buffer(void **state) {
  struct hcheck_opts o = opts_of("{\"expected_codes\": [\"200\"]}");
  struct hcheck_outcome out = {.connected = 1, .status = 403};
  char ev[8];
  (void)state;
  assert_int_equal(hcheck_judge(&o, &out, ev, sizeof ev), 0);
  assert_string_equal(ev, "unexpec"); /* truncated, NUL-terminated */
}

/* ---- validation: every bad value is refused with its field, nothing applied ---- */

struct bad_row {
  const char *json;
  unsigned status;
  const char *field;
};

static const struct bad_row bad_rows[] = {
    {"{\"type\": \"udp\"}", 422, "type"},
    {"{\"type\": 1}", 422, "type"},
    {"{\"type\": null}", 422, "type"},
    {"{\"method\": \"POST\"}", 422, "method"},
    {"{\"method\": \"get\"}", 422, "method"},
    {"{\"headers\": []}", 422, "headers"},
    {"{\"headers\": \"X-A: 1\"}", 422, "headers"},
    {"{\"headers\": {\"X-A\": 1}}", 422, "headers.X-A"},
    {"{\"headers\": {\"X-A\": \"\"}}", 422, "headers.X-A"},
    {"{\"headers\": {\"X-A\": \"a\\r\\nX-B: 2\"}}", 422, "headers.X-A"},
    {"{\"headers\": {\"X-A\": \" padded\"}}", 422, "headers.X-A"},
    {"{\"headers\": {\"X-A\": \"caf\\u00e9\"}}", 422, "headers.X-A"},
    {"{\"headers\": {\"X A\": \"1\"}}", 422, "headers.X A"},
    {"{\"headers\": {\"X:A\": \"1\"}}", 422, "headers.X:A"},
    {"{\"headers\": {\"\": \"1\"}}", 422, "headers."},
    {"{\"headers\": {\"Host\": \"evil\"}}", 422, "headers.Host"},
    {"{\"headers\": {\"content-length\": \"5\"}}", 422, "headers.content-length"},
    {"{\"headers\": {\"Transfer-Encoding\": \"chunked\"}}", 422, "headers.Transfer-Encoding"},
    {"{\"headers\": {\"Connection\": \"keep-alive\"}}", 422, "headers.Connection"},
    {"{\"headers\": {\"Upgrade\": \"h2c\"}}", 422, "headers.Upgrade"},
    {"{\"headers\": {\"TE\": \"trailers\"}}", 422, "headers.TE"},
    {"{\"headers\": {\"User-Agent\": \"x\"}}", 422, "headers.User-Agent"},
    {"{\"headers\": {\"X-A\": \"1\", \"x-a\": \"2\"}}", 422, "headers.x-a"},
    {"{\"headers\": {\"A1\": \"1\", \"A2\": \"1\", \"A3\": \"1\", \"A4\": \"1\", \"A5\": \"1\", "
     "\"A6\": \"1\", \"A7\": \"1\", \"A8\": \"1\", \"A9\": \"1\"}}",
     422, "headers"},
    {"{\"expected_codes\": []}", 422, "expected_codes"},
    {"{\"expected_codes\": \"200\"}", 422, "expected_codes"},
    {"{\"expected_codes\": [99]}", 422, "expected_codes[0]"},
    {"{\"expected_codes\": [200, 600]}", 422, "expected_codes[1]"},
    {"{\"expected_codes\": [200.5]}", 422, "expected_codes[0]"},
    {"{\"expected_codes\": [\"2xx\"]}", 422, "expected_codes[0]"},
    {"{\"expected_codes\": [\"299-200\"]}", 422, "expected_codes[0]"},
    {"{\"expected_codes\": [\"200-\"]}", 422, "expected_codes[0]"},
    {"{\"expected_codes\": [\"-200\"]}", 422, "expected_codes[0]"},
    {"{\"expected_codes\": [\"200-299-300\"]}", 422, "expected_codes[0]"},
    {"{\"expected_codes\": [\" 200\"]}", 422, "expected_codes[0]"},
    {"{\"expected_codes\": [null]}", 422, "expected_codes[0]"},
    {"{\"expected_codes\": [200,201,202,203,204,205,206,207,208,209,210,211,212,213,214,215,216]}",
     422, "expected_codes"},
    {"{\"expected_body\": \"\"}", 422, "expected_body"},
    {"{\"expected_body\": 5}", 422, "expected_body"},
    {"{\"port\": 0}", 422, "port"},
    {"{\"port\": 65536}", 422, "port"},
    {"{\"port\": \"80\"}", 422, "port"},
    {"{\"interval_ms\": 999}", 422, "interval_ms"},
    {"{\"interval_ms\": 86400001}", 422, "interval_ms"},
    {"{\"level_min_healthy\": 0}", 422, "level_min_healthy"},
    {"{\"level_min_healthy\": null}", 422, "level_min_healthy"},
    {"{\"level_min_healthy\": 65}", 422, "level_min_healthy"},
    {"{\"type\": \"tcp\", \"expected_codes\": [200]}", 422, "type"},
    {"{\"type\": \"tcp\", \"method\": \"HEAD\"}", 422, "type"},
    {"{\"type\": \"tcp\", \"headers\": {\"X-A\": \"1\"}}", 422, "type"},
    {"{\"type\": \"tcp\", \"expected_body\": \"x\"}", 422, "type"},
    {"{\"method\": \"HEAD\", \"expected_body\": \"x\"}", 422, "expected_body"},
};

static void test_bad_values_refused(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++) {
    struct hcheck_opts o, before;
    struct field_err err;
    cJSON *j = json_parse(bad_rows[i].json, strlen(bad_rows[i].json));
    if (!j) fail_msg("row %zu: test JSON does not parse", i);
    hcheck_defaults(&o);
    o.port = 8080; /* something to see unchanged */
    before = o;
    memset(&err, 0, sizeof err);
    if (hcheck_apply_json(j, &o, &err) != -1) fail_msg("row %zu accepted: %s", i, bad_rows[i].json);
    if (err.status != bad_rows[i].status || strcmp(err.field, bad_rows[i].field) != 0)
      fail_msg("row %zu: got %u %s, want %u %s", i, err.status, err.field, bad_rows[i].status,
               bad_rows[i].field);
    assert_non_null(err.code);
    assert_true(err.message[0] != '\0');
    assert_memory_equal(&o, &before, sizeof o);
    cJSON_Delete(j);
  }
}

static void test_parse_all_options(void **state) {
  struct hcheck_opts o = opts_of(
      "{\"type\": \"http\", \"method\": \"HEAD\", \"headers\": {\"X-Probe\": \"cdnca\", "
      "\"Authorization\": \"Bearer abc\"}, \"expected_codes\": [\"200-299\", 301, \"404\"], "
      "\"port\": 8081, \"interval_ms\": 1000, \"level_min_healthy\": 2, \"enabled\": true}");
  (void)state;
  assert_int_equal(o.type, HCHECK_HTTP);
  assert_int_equal(o.method, HCHECK_HEAD);
  assert_int_equal(o.n_headers, 2);
  assert_string_equal(o.headers[0].name, "X-Probe");
  assert_string_equal(o.headers[1].value, "Bearer abc");
  assert_int_equal(o.n_codes, 3);
  assert_int_equal(o.codes[0].lo, 200);
  assert_int_equal(o.codes[0].hi, 299);
  assert_int_equal(o.codes[1].lo, 301);
  assert_int_equal(o.codes[1].hi, 301);
  assert_int_equal(o.codes[2].lo, 404);
  assert_int_equal(o.port, 8081);
  assert_int_equal(o.interval_ms, 1000);
  assert_int_equal(o.level_min_healthy, 2);
  assert_false(hcheck_is_default(&o));
}

/* PATCH semantics: absent keys are kept, null resets a nullable option. */
static void test_apply_patch_and_null(void **state) {
  struct hcheck_opts o =
      opts_of("{\"expected_codes\": [\"200\"], \"expected_body\": \"up\", "
              "\"port\": 81, \"interval_ms\": 2000, \"headers\": {\"A\": \"b\"}}");
  struct field_err err;
  cJSON *j = parse_text("{\"port\": null}");
  (void)state;
  assert_int_equal(hcheck_apply_json(j, &o, &err), 0);
  cJSON_Delete(j);
  assert_int_equal(o.port, 0);
  assert_int_equal(o.n_codes, 1);
  assert_string_equal(o.expected_body, "up");
  j = parse_text("{\"expected_codes\": null, \"expected_body\": null, \"interval_ms\": null, "
                 "\"headers\": null}");
  assert_non_null(j);
  assert_int_equal(hcheck_apply_json(j, &o, &err), 0);
  cJSON_Delete(j);
  assert_true(hcheck_is_default(&o));
  /* switching to tcp needs the HTTP expectations cleared in the same request */
  o = opts_of("{\"expected_codes\": [\"200\"]}");
  j = parse_text("{\"type\": \"tcp\", \"expected_codes\": null}");
  assert_non_null(j);
  assert_int_equal(hcheck_apply_json(j, &o, &err), 0);
  cJSON_Delete(j);
  assert_int_equal(o.type, HCHECK_TCP);
}

static void test_json_round_trip(void **state) {
  const char *in = "{\"type\":\"http\",\"method\":\"GET\",\"headers\":{\"X-A\":\"1\"},"
                   "\"expected_codes\":[\"200-299\",\"301\"],\"expected_body\":\"ready\","
                   "\"port\":9000,\"interval_ms\":1500,\"level_min_healthy\":3}";
  struct hcheck_opts o = opts_of(in), back;
  char *text = hcheck_to_text(&o);
  cJSON *j;
  char *probe_only;
  (void)state;
  assert_non_null(text);
  assert_string_equal(text, in);
  assert_int_equal(hcheck_from_text(text, &back), 0);
  free(text);
  text = hcheck_to_text(&back);
  assert_string_equal(text, in);
  free(text);
  /* the probe options alone (node tasks, checkpoint requests) */
  j = cJSON_CreateObject();
  assert_int_equal(hcheck_add_json(j, &o, 0), 0);
  probe_only = json_print(j);
  assert_string_equal(probe_only,
                      "{\"type\":\"http\",\"method\":\"GET\",\"headers\":{\"X-A\":\"1\"},"
                      "\"expected_codes\":[\"200-299\",\"301\"],\"expected_body\":\"ready\","
                      "\"port\":9000}");
  free(probe_only);
  cJSON_Delete(j);
}

static void test_defaults_text_and_json(void **state) {
  struct hcheck_opts o;
  cJSON *j = cJSON_CreateObject();
  char *t;
  (void)state;
  hcheck_defaults(&o);
  assert_true(hcheck_is_default(&o));
  assert_null(hcheck_to_text(&o));
  assert_int_equal(hcheck_from_text(NULL, &o), 0);
  assert_true(hcheck_is_default(&o));
  assert_int_equal(hcheck_from_text("", &o), 0);
  assert_int_equal(hcheck_from_text("{\"port\": 0}", &o), -1); /* garbage stored: defaults */
  assert_true(hcheck_is_default(&o));
  assert_int_equal(hcheck_from_text("not json", &o), -1);
  assert_int_equal(hcheck_add_json(j, &o, 1), 0);
  t = json_print(j);
  assert_string_equal(t, "{\"type\":\"http\",\"method\":\"GET\",\"headers\":{},"
                         "\"expected_codes\":null,\"expected_body\":null,\"port\":null,"
                         "\"interval_ms\":null,\"level_min_healthy\":1}");
  free(t);
  cJSON_Delete(j);
}

static void test_status_ok(void **state) {
  struct hcheck_opts o = opts_of("{\"expected_codes\": [\"200-204\", 418]}");
  (void)state;
  assert_true(hcheck_status_ok(&o, 200));
  assert_true(hcheck_status_ok(&o, 204));
  assert_false(hcheck_status_ok(&o, 205));
  assert_true(hcheck_status_ok(&o, 418));
  assert_false(hcheck_status_ok(&o, 199));
  hcheck_defaults(&o);
  assert_true(hcheck_status_ok(&o, 499));
  assert_false(hcheck_status_ok(&o, 500));
  assert_false(hcheck_status_ok(&o, 0));
}

/* docs/design.md#secrets: header values masked, names kept; a masked value sent back keeps the
   stored one, a new value replaces it, a header left out is gone. */
static void test_redact_keep(void **state) {
  struct hcheck_opts stored =
      opts_of("{\"headers\": {\"X-Health-Token\": \"s3cret\", \"X-B\": \"b\"}}");
  struct hcheck_opts shown = stored, w;
  (void)state;
  assert_int_equal(hcheck_redact(&shown), 2);
  assert_string_equal(shown.headers[0].name, "X-Health-Token");
  assert_string_equal(shown.headers[0].value, FIELDS_MASK);
  assert_string_equal(shown.headers[1].value, FIELDS_MASK);
  w = opts_of("{\"headers\": {\"x-health-token\": \"***\", \"X-C\": \"***\"}}");
  hcheck_keep_secrets(&w, &stored);
  assert_int_equal(w.n_headers, 2);
  assert_string_equal(w.headers[0].value, "s3cret");    /* same name, any case */
  assert_string_equal(w.headers[1].value, FIELDS_MASK); /* nothing stored under X-C */
  w = opts_of("{\"headers\": {\"X-Health-Token\": \"new\"}}");
  hcheck_keep_secrets(&w, &stored);
  assert_string_equal(w.headers[0].value, "new");
  hcheck_defaults(&w);
  assert_int_equal(hcheck_redact(&w), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_judge_rows),
      cmocka_unit_test(test_rejudge_rows),
      cmocka_unit_test(test_judge_default_every_status),
      cmocka_unit_test(test_judge_body_window),
      cmocka_unit_test(test_judge_small_evidence_buffer),
      cmocka_unit_test(test_bad_values_refused),
      cmocka_unit_test(test_parse_all_options),
      cmocka_unit_test(test_apply_patch_and_null),
      cmocka_unit_test(test_json_round_trip),
      cmocka_unit_test(test_defaults_text_and_json),
      cmocka_unit_test(test_status_ok),
      cmocka_unit_test(test_redact_keep),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
