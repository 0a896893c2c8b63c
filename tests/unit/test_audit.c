/* Unit tests for controld/audit: the summary line and the site of an audit record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "audit.h"
#include "json.h"

static void check(const char *method, const char *path, const char *body, const char *reply,
                  const char *want) {
  char out[256];
  cJSON *b = body ? json_parse(body, strlen(body)) : NULL;
  cJSON *r = reply ? json_parse(reply, strlen(reply)) : NULL;
  audit_summary(method, path, b, r, out, sizeof out);
  cJSON_Delete(b);
  cJSON_Delete(r);
  if (strcmp(out, want) != 0) fail_msg("%s %s: got '%s', want '%s'", method, path, out, want);
}

static void test_summaries(void **state) {
  (void)state;
  check("POST", "/v1/sites", "{\"name\":\"shop\",\"hostnames\":[\"a.b\"],\"failback\":\"manual\"}",
        "{\"id\":3,\"name\":\"shop\"}",
        "created site 3 (shop): name=shop, hostnames, failback=manual");
  check("PATCH", "/v1/sites/3", "{\"failback_hold_ms\":60000,\"health_check\":{\"enabled\":true}}",
        "{\"id\":3}", "changed site 3: failback_hold_ms=60000, health_check");
  check("POST", "/v1/sites/3/origins", "{\"address\":\"10.0.0.1\",\"enabled\":false}", "{\"id\":9}",
        "created origin 9 of site 3: address=10.0.0.1, enabled=false");
  check("PATCH", "/v1/sites/3/origins/9", "{\"enabled\":true,\"host_header\":null}", NULL,
        "changed origin 9 of site 3: enabled=true, host_header=null");
  check("DELETE", "/v1/sites/3/origins/9", NULL, NULL, "deleted origin 9 of site 3");
  check("DELETE", "/v1/sites/3/", NULL, NULL, "deleted site 3");
  check("POST", "/v1/sites/3/switch", "{\"level\":2}", NULL, "switch site 3: level=2");
  check("POST", "/v1/webhooks/4/test", "{}", NULL, "test webhook 4");
  /* secrets never: the webhook's secret, a token in a reply is not read either */
  check("POST", "/v1/webhooks", "{\"url\":\"http://h/x\",\"secret\":\"s3cr3t-value\"}",
        "{\"id\":5}", "created webhook 5: url=http://h/x, secret");
  check("POST", "/v1/tokens", "{\"name\":\"ci\",\"role\":\"admin\",\"token\":\"x\"}",
        "{\"id\":6,\"name\":\"ci\",\"token\":\"abcdef\"}",
        "created token 6 (ci): name=ci, role=admin, token");
  check("POST", "/v1/nodes", "{\"name\":\"edge-1\"}",
        "{\"id\":2,\"name\":\"edge-1\",\"token\":\"t\"}", "created node 2 (edge-1): name=edge-1");
  /* enrolment keys: the secret never; an enrolment names the node and the key */
  check("POST", "/v1/enrolment-keys", "{\"name\":\"fleet\",\"max_uses\":10}",
        "{\"id\":3,\"name\":\"fleet\",\"key\":\"abcdef\"}",
        "created enrolment key 3 (fleet): name=fleet, max_uses=10");
  check("DELETE", "/v1/enrolment-keys/3", NULL, NULL, "deleted enrolment key 3");
  check("POST", "/v1/node/enrol", "{\"key\":\"0123\",\"name\":\"edge-1\"}",
        "{\"id\":8,\"name\":\"edge-1\",\"token\":\"t\","
        "\"enrolment_key\":{\"id\":3,\"name\":\"fleet\"}}",
        "enrolled node 8 (edge-1) with enrolment key 3 (fleet)");
  check("POST", "/v1/node/enrol", "{\"key\":\"0123\"}", NULL, "enrolled node with enrolment key");
  /* long strings by key only; unknown paths as they are */
  check("PATCH", "/v1/sites/3",
        "{\"hc_path\":\"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", NULL,
        "changed site 3: hc_path");
  check("PUT", "/v1/things", NULL, NULL, "PUT /v1/things");
  check("POST", "/v1/sites/3/x/y", "{\"a\":1}", NULL, "POST /v1/sites/3/x/y: a=1");
  check("POST", "/v1/sites", "[1,2]", NULL, "created site");
}

static void test_truncated(void **state) {
  char out[32];
  static const char body[] = "{\"a\":1,\"bbbbbbbbbb\":2,\"cccccccccc\":3,\"dddddd\":4}";
  cJSON *b = json_parse(body, strlen(body));
  (void)state;
  assert_non_null(b);
  audit_summary("PATCH", "/v1/sites/12345", b, NULL, out, sizeof out);
  assert_int_equal(strlen(out), sizeof out - 1);
  assert_string_equal(out + sizeof out - 4, "...");
  assert_memory_equal(out, "changed site 12345: a=1, bbbbbb", 28);
  audit_summary("PATCH", "/v1/sites/1", b, NULL, out, 1);
  assert_string_equal(out, "");
  cJSON_Delete(b);
}

static void test_site_id(void **state) {
  cJSON *r = json_parse("{\"id\":42}", 9);
  (void)state;
  assert_int_equal(audit_site_id("/v1/sites/7", NULL), 7);
  assert_int_equal(audit_site_id("/v1/sites/7/origins/9", r), 7);
  assert_int_equal(audit_site_id("/v1/sites", r), 42);
  assert_int_equal(audit_site_id("/v1/sites", NULL), 0);
  assert_int_equal(audit_site_id("/v1/nodes", r), 0);
  assert_int_equal(audit_site_id("/v1/webhooks/3/test", r), 0);
  cJSON_Delete(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_summaries),
      cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_site_id),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
