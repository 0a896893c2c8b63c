/* Unit tests for controld/export: the cdnca-export document to records and back, and every
   refusal naming its JSON path (export_from_json is pure). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "export.h"
#include "json.h"

#define HASH_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HASH_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* A document with one of everything; a paused site (checks on, one enabled origin) included,
   which a POST would refuse but a stored installation may hold. */
static const char DOC[] =
    "{\"format\":\"cdnca-export\",\"version\":1,\"exported_at\":\"2026-01-01T00:00:00Z\","
    "\"controld_version\":\"0.1.0\",\"publication_seq\":41,"
    "\"sites\":[{\"id\":3,\"name\":\"shop\",\"hostnames\":[\"shop.test\",\"www.shop.test\"],"
    "\"failback\":\"manual\",\"failback_hold_ms\":60000,"
    "\"health_check\":{\"enabled\":true,\"path\":\"/h\",\"timeout_ms\":2000,\"unhealthy_after\":4,"
    "\"healthy_after\":3,\"checkpoints\":false,\"method\":\"HEAD\",\"headers\":{\"X-A\":\"1\"},"
    "\"expected_codes\":[\"200-299\"],\"interval_ms\":5000},"
    "\"node_retry\":{\"retries\":1,\"retry_on_status\":[502]},"
    "\"current_level\":2,\"manual_pin\":true,\"config_version\":7,\"revision\":5,"
    "\"created_at_ms\":1000,\"updated_at_ms\":2000,"
    "\"origins\":[{\"id\":10,\"level\":1,\"address\":\"10.0.0.1\",\"port\":80,\"scheme\":\"http\","
    "\"host_header\":null,\"weight\":1,\"enabled\":true,\"created_at_ms\":1000},"
    "{\"id\":12,\"level\":2,\"address\":\"b.example\",\"port\":443,\"scheme\":\"https\","
    "\"host_header\":\"o.shop.test\",\"weight\":5,\"enabled\":true,\"created_at_ms\":1500}]},"
    "{\"id\":9,\"name\":\"paused\",\"hostnames\":[\"p.test\"],\"health_check\":{\"enabled\":true},"
    "\"current_level\":1,\"manual_pin\":false,\"config_version\":1,\"revision\":1,"
    "\"created_at_ms\":1,\"updated_at_ms\":1,"
    "\"origins\":[{\"id\":20,\"address\":\"10.0.0.2\",\"created_at_ms\":1}]}],"
    "\"nodes\":[{\"id\":4,\"name\":\"edge-1\",\"token_sha256\":\"" HASH_A
    "\",\"created_at_ms\":5}],"
    "\"tokens\":[{\"id\":2,\"name\":\"ci\",\"role\":\"operator\",\"token_sha256\":\"" HASH_B "\","
    "\"created_at_ms\":6,\"expires_at_ms\":0}],"
    "\"webhooks\":[{\"id\":8,\"url\":\"https://hooks.example/x\",\"secret\":\"0123456789abcdef\","
    "\"events\":[\"level.switched\",\"level.switched\"],\"created_at_ms\":7}]}";

/* export_from_json on text; *x must be store_export_fini'd by the caller. */
static int from_text(const char *txt, struct store_export *x, struct export_err *err) {
  cJSON *j = json_parse(txt, strlen(txt));
  int r;
  assert_non_null(j);
  memset(err, 0, sizeof *err);
  r = export_from_json(j, x, err);
  cJSON_Delete(j);
  return r;
}

static void test_reads_every_field(void **state) {
  struct store_export x;
  struct export_err err;
  const struct site_rec *s;
  (void)state;
  assert_int_equal(from_text(DOC, &x, &err), 0);
  assert_int_equal(x.pub_seq, 41);
  assert_int_equal(x.n_sites, 2);
  s = &x.sites[0];
  assert_int_equal(s->id, 3);
  assert_string_equal(s->name, "shop");
  assert_int_equal(s->n_hostnames, 2);
  assert_string_equal(s->failback, "manual");
  assert_int_equal(s->failback_hold_ms, 60000);
  assert_int_equal(s->hc_enabled, 1);
  assert_string_equal(s->hc_path, "/h");
  assert_int_equal(s->hc_unhealthy_after, 4);
  assert_int_equal(s->hc.interval_ms, 5000);
  assert_int_equal(s->nr_retries, 1);
  assert_int_equal(s->n_retry_on_status, 1);
  assert_int_equal(s->current_level, 2);
  assert_int_equal(s->manual_pin, 1);
  assert_int_equal(s->config_version, 7);
  assert_int_equal(s->revision, 5);
  assert_int_equal(s->created_at, 1000);
  assert_int_equal(s->updated_at, 2000);
  assert_int_equal(s->n_origins, 2);
  assert_int_equal(s->origins[1].id, 12);
  assert_int_equal(s->origins[1].site_id, 3);
  assert_int_equal(s->origins[1].created_at, 1500);
  assert_string_equal(s->origins[1].host_header, "o.shop.test");
  /* checks on with one enabled origin: kept as stored (paused), not refused as a POST would be */
  assert_int_equal(x.sites[1].hc_enabled, 1);
  assert_int_equal(x.sites[1].n_origins, 1);
  assert_int_equal(x.n_nodes, 1);
  assert_string_equal(x.nodes[0].token_hash, HASH_A);
  assert_int_equal(x.n_tokens, 1);
  assert_string_equal(x.tokens[0].role, "operator");
  assert_int_equal(x.n_webhooks, 1);
  assert_string_equal(x.webhooks[0].secret, "0123456789abcdef");
  assert_string_equal(x.webhooks[0].events, "[\"level.switched\"]"); /* duplicates dropped */
  store_export_fini(&x);
}

/* Records -> document -> records -> document: the two documents are the same text. */
static void test_round_trip(void **state) {
  struct store_export x, y;
  struct export_err err;
  cJSON *a, *b;
  char *ta, *tb;
  (void)state;
  assert_int_equal(from_text(DOC, &x, &err), 0);
  a = export_to_json(&x, 1000, "test");
  assert_non_null(a);
  memset(&y, 0, sizeof y);
  assert_int_equal(export_from_json(a, &y, &err), 0);
  b = export_to_json(&y, 1000, "test");
  ta = json_print(a);
  tb = json_print(b);
  assert_string_equal(ta, tb);
  assert_non_null(strstr(ta, "\"manual_pin\":true"));
  free(ta);
  free(tb);
  cJSON_Delete(a);
  cJSON_Delete(b);
  store_export_fini(&x);
  store_export_fini(&y);
}

/* Replace the first occurrence of from in DOC by to, import, and expect a refusal at path. */
static void refused(const char *from, const char *to, const char *path) {
  const char *at = strstr(DOC, from);
  size_t n;
  char *txt;
  struct store_export x;
  struct export_err err;
  assert_non_null(at);
  n = strlen(DOC) - strlen(from) + strlen(to) + 1;
  txt = malloc(n);
  assert_non_null(txt);
  snprintf(txt, n, "%.*s%s%s", (int)(at - DOC), DOC, to, at + strlen(from));
  if (from_text(txt, &x, &err) != -1 || strcmp(err.path, path) != 0)
    fail_msg("%s -> %s: wanted a refusal at %s, got '%s': %s", from, to, path, err.path,
             err.message);
  assert_true(err.message[0] != '\0');
  store_export_fini(&x);
  free(txt);
}

static void test_header_refusals(void **state) {
  (void)state;
  refused("\"cdnca-export\"", "\"other\"", "format");
  refused("\"version\":1", "\"version\":2", "version");
  refused("\"version\":1", "\"version\":\"1\"", "version");
  refused("\"publication_seq\":41", "\"publication_seq\":-1", "publication_seq");
  refused("\"publication_seq\":41,", "", "publication_seq");
  refused("\"format\"", "\"extra\":1,\"format\"", "extra");
  refused("\"nodes\":[{\"id\":4,\"name\":\"edge-1\",\"token_sha256\":\"" HASH_A
          "\",\"created_at_ms\":5}]",
          "\"nodes\":null", "nodes");
}

static void test_site_refusals(void **state) {
  (void)state;
  refused("\"id\":3,", "", "sites[0].id");
  refused("\"id\":3,", "\"id\":0,", "sites[0].id");
  refused("\"current_level\":2", "\"current_level\":17", "sites[0].current_level");
  refused("\"manual_pin\":true", "\"manual_pin\":1", "sites[0].manual_pin");
  refused("\"revision\":5", "\"revision\":0", "sites[0].revision");
  refused("\"name\":\"shop\"", "\"name\":\"sh op\"", "sites[0].name");
  refused("\"health_check\":{\"enabled\":true,\"path\":\"/h\"", "\"health_check\":{\"path\":\"/h\"",
          "sites[0].health_check.enabled");
  refused("\"method\":\"HEAD\"", "\"method\":\"PUT\"", "sites[0].health_check.method");
  refused("\"port\":80", "\"port\":0", "sites[0].origins[0].port");
  refused("\"id\":12", "\"id\":\"12\"", "sites[0].origins[1].id");
  refused("\"created_at_ms\":1500", "\"colour\":1", "sites[0].origins[1].colour");
  refused("\"retries\":1", "\"retries\":1,\"x\":2", "sites[0].node_retry.x");
}

static void test_cross_document_refusals(void **state) {
  (void)state;
  refused("\"id\":9,", "\"id\":3,", "sites[1].id");
  refused("\"name\":\"paused\"", "\"name\":\"shop\"", "sites[1].name");
  refused("\"hostnames\":[\"p.test\"]", "\"hostnames\":[\"WWW.shop.test\"]",
          "sites[1].hostnames[0]");
  refused("\"id\":20,", "\"id\":10,", "sites[1].origins[0].id");
  refused("\"token_sha256\":\"" HASH_B "\"", "\"token_sha256\":\"" HASH_A "\"",
          "tokens[0].token_sha256");
}

static void test_node_token_webhook_refusals(void **state) {
  (void)state;
  refused("\"token_sha256\":\"" HASH_A "\"", "\"token_sha256\":\"the-plaintext-token\"",
          "nodes[0].token_sha256");
  refused(HASH_A, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
          "nodes[0].token_sha256");
  refused("\"name\":\"edge-1\"", "\"name\":\"\"", "nodes[0].name");
  refused("\"role\":\"operator\"", "\"role\":\"root\"", "tokens[0].role");
  refused("\"expires_at_ms\":0", "\"expires_at_ms\":null", "tokens[0].expires_at_ms");
  refused("\"https://hooks.example/x\"", "\"file:///etc/passwd\"", "webhooks[0].url");
  refused("\"0123456789abcdef\"", "\"short\"", "webhooks[0].secret");
  refused("[\"level.switched\",\"level.switched\"]", "[\"level.switched\",\"nope\"]",
          "webhooks[0].events[1]");
  refused("[\"level.switched\",\"level.switched\"]", "[]", "webhooks[0].events");
  refused("\"events\":[\"level.switched\",\"level.switched\"],", "", "webhooks[0].events");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reads_every_field),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_header_refusals),
      cmocka_unit_test(test_site_refusals),
      cmocka_unit_test(test_cross_document_refusals),
      cmocka_unit_test(test_node_token_webhook_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
