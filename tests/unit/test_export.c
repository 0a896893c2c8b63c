/* Unit tests for controld/export: the cdnca-export document to records and back, and every
   refusal naming its JSON path (export_from_json is pure). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <unistd.h>

#include "export.h"
#include "json.h"
#include "store_node.h"
#include "store_pub.h"
#include "store_sites.h"

#define HASH_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HASH_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HASH_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"

/* A document with one of everything; a paused site (checks on, one enabled origin) included,
   which a POST would refuse but a stored installation may hold. */
static const char DOC[] =
    "{\"format\":\"cdnca-export\",\"version\":1,\"exported_at\":\"2026-01-01T00:00:00Z\","
    "\"controld_version\":\"0.1.0\",\"publication_seq\":41,"
    "\"sites\":[{\"id\":3,\"name\":\"shop\",\"hostnames\":[\"shop.test\",\"www.shop.test\"],"
    "\"failback\":\"manual\",\"failback_hold_ms\":60000,"
    "\"failback_ramp\":{\"steps\":[10,50,100],\"step_ms\":2000,\"min_requests\":5},"
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
static int from_text(const char *txt, struct store_export *x, struct field_err *err) {
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
  struct field_err err;
  const struct site_rec *s;
  (void)state;
  assert_int_equal(from_text(DOC, &x, &err), 0);
  assert_int_equal(x.pub_seq, 41);
  assert_int_equal(x.n_sites, 2);
  s = &x.sites[0];
  assert_int_equal(s->id, 3);
  assert_string_equal(s->name, "shop");
  assert_int_equal(s->n_hostnames, 2);
  assert_int_equal(s->failback, HEALTH_FAILBACK_MANUAL);
  assert_int_equal(s->failback_hold_ms, 60000);
  assert_int_equal(s->failback_ramp.n_steps, 3);
  assert_int_equal(s->failback_ramp.steps[1], 50);
  assert_int_equal(s->failback_ramp.min_requests, 5);
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
  struct field_err err;
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
  struct field_err err;
  assert_non_null(at);
  n = strlen(DOC) - strlen(from) + strlen(to) + 1;
  txt = malloc(n);
  assert_non_null(txt);
  snprintf(txt, n, "%.*s%s%s", (int)(at - DOC), DOC, to, at + strlen(from));
  if (from_text(txt, &x, &err) != -1 || strcmp(err.field, path) != 0)
    fail_msg("%s -> %s: wanted a refusal at %s, got '%s': %s", from, to, path, err.field,
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

/* The API's target rule: metadata and link-local origins and webhook hosts, and --deny-targets. */
static void test_targets_refused(void **state) {
  struct store_export x;
  struct field_err err;
  struct targets t;
  char e[128];
  (void)state;
  assert_int_equal(from_text(DOC, &x, &err), 0);
  assert_int_equal(targets_init(&t, NULL, e, sizeof e), 0);
  assert_int_equal(export_check_targets(&x, &t, &err), 0);
  snprintf(x.webhooks[0].url, sizeof x.webhooks[0].url, "http://169.254.169.254/latest");
  assert_int_equal(export_check_targets(&x, &t, &err), -1);
  assert_string_equal(err.field, "webhooks[0].url");
  snprintf(x.sites[1].origins[0].address, sizeof x.sites[1].origins[0].address, "169.254.1.1");
  assert_int_equal(export_check_targets(&x, &t, &err), -1);
  assert_string_equal(err.field, "sites[1].origins[0].address");
  store_export_fini(&x);
  /* an operator's list: 10.0.0.0/8 refuses sites[0]'s first origin */
  assert_int_equal(from_text(DOC, &x, &err), 0);
  assert_int_equal(targets_init(&t, "10.0.0.0/8", e, sizeof e), 0);
  assert_int_equal(export_check_targets(&x, &t, &err), -1);
  assert_string_equal(err.field, "sites[0].origins[0].address");
  store_export_fini(&x);
}

/* ---- the store side: store_export_read / store_export_write on two SQLite files ---- */

struct two {
  char dir[64], a[96], b[96];
  struct store *src, *dst;
};

static void two_open(struct two *t) {
  snprintf(t->dir, sizeof t->dir, "/tmp/cdnca-test-export-XXXXXX");
  assert_non_null(mkdtemp(t->dir));
  snprintf(t->a, sizeof t->a, "%s/a.db", t->dir);
  snprintf(t->b, sizeof t->b, "%s/b.db", t->dir);
  t->src = store_open(t->a);
  t->dst = store_open(t->b);
  assert_non_null(t->src);
  assert_non_null(t->dst);
}

static void two_close(struct two *t) {
  static const char *const sfx[] = {"", "-wal", "-shm"};
  char p[128];
  store_close(&t->src);
  store_close(&t->dst);
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s%s", t->a, sfx[i]);
    unlink(p);
    snprintf(p, sizeof p, "%s%s", t->b, sfx[i]);
    unlink(p);
  }
  rmdir(t->dir);
}

/* A site named name on hostname with two origins, through the store's API. */
static int64_t mk_site(struct store *st, const char *name, const char *hostname) {
  struct site_rec s;
  char conflict[64];
  site_rec_defaults(&s);
  snprintf(s.name, sizeof s.name, "%s", name);
  s.n_hostnames = 1;
  snprintf(s.hostnames[0], sizeof s.hostnames[0], "%s", hostname);
  s.origins = calloc(2, sizeof *s.origins);
  assert_non_null(s.origins);
  s.n_origins = 2;
  for (int i = 0; i < 2; i++) {
    s.origins[i].level = i + 1;
    s.origins[i].port = 443;
    s.origins[i].weight = 1;
    s.origins[i].enabled = 1;
    snprintf(s.origins[i].address, sizeof s.origins[i].address, "10.0.0.%d", i + 1);
    s.origins[i].scheme = SCHEME_HTTPS;
  }
  assert_int_equal(store_site_create(st, &s, conflict, sizeof conflict), STORE_OK);
  site_rec_fini(&s);
  return s.id;
}

static void fill(struct store *st) {
  struct node_rec n;
  struct token_rec t;
  struct webhook_rec w;
  int64_t gone;
  mk_site(st, "one", "one.test");
  gone = mk_site(st, "gone", "gone.test");
  mk_site(st, "three", "three.test");
  assert_int_equal(store_site_delete(st, gone), STORE_OK);
  memset(&n, 0, sizeof n);
  snprintf(n.name, sizeof n.name, "edge");
  assert_int_equal(store_node_create(st, &n, HASH_A), STORE_OK);
  memset(&t, 0, sizeof t);
  snprintf(t.name, sizeof t.name, "ci");
  snprintf(t.role, sizeof t.role, "read");
  assert_int_equal(store_token_create(st, &t, HASH_B), STORE_OK);
  memset(&w, 0, sizeof w);
  snprintf(w.url, sizeof w.url, "https://hooks.example/x");
  snprintf(w.secret, sizeof w.secret, "0123456789abcdef");
  assert_int_equal(store_webhook_create(st, &w), STORE_OK);
}

static char *doc_text(struct store *st) {
  struct store_export x;
  cJSON *j;
  char *txt;
  assert_int_equal(store_export_read(st, &x), STORE_OK);
  j = export_to_json(&x, 1, "test");
  txt = json_print(j);
  cJSON_Delete(j);
  store_export_fini(&x);
  assert_non_null(txt);
  return txt;
}

/* What is read from one store and written into another reads back the same, ids included;
   publications continue after the source's; the token hashes authenticate. */
static void test_store_round_trip(void **state) {
  struct two t;
  struct store_export x;
  struct token_auth auth;
  char what[96], *a, *b, *pa, *pb;
  int64_t seq;
  (void)state;
  two_open(&t);
  fill(t.src);
  assert_int_equal(store_export_read(t.src, &x), STORE_OK);
  assert_int_equal(x.n_sites, 2);
  assert_int_equal(x.sites[1].id, 3);
  seq = x.pub_seq;
  assert_true(seq >= 4);
  assert_int_equal(store_export_write(t.dst, &x, what, sizeof what), STORE_OK);
  store_export_fini(&x);
  assert_int_equal(store_pub_seq(t.dst), seq + 2);
  a = doc_text(t.src);
  b = doc_text(t.dst);
  /* equal but for the publication seq */
  pa = strstr(a, "\"sites\"");
  pb = strstr(b, "\"sites\"");
  assert_non_null(pa);
  assert_non_null(pb);
  assert_string_equal(pa, pb);
  assert_int_equal(store_token_auth(t.dst, HASH_A, 1, &auth), 0);
  assert_int_equal(auth.kind, STORE_TOKEN_NODE);
  assert_int_equal(store_token_auth(t.dst, HASH_B, 1, &auth), 0);
  assert_string_equal(auth.role, "read");
  free(a);
  free(b);
  two_close(&t);
}

/* A target holding a site is refused; one holding only the bootstrap token is not. */
static void test_store_refuses_non_empty(void **state) {
  struct two t;
  struct store_export x;
  char what[96];
  (void)state;
  two_open(&t);
  fill(t.src);
  assert_int_equal(store_export_read(t.src, &x), STORE_OK);
  mk_site(t.dst, "mine", "mine.test");
  assert_int_equal(store_export_write(t.dst, &x, what, sizeof what), STORE_CONFLICT);
  assert_string_equal(what, "sites");
  store_close(&t.dst);
  unlink(t.b);
  t.dst = store_open(t.b);
  assert_non_null(t.dst);
  assert_int_equal(store_admin_token_set(t.dst, HASH_C), 0);
  assert_int_equal(store_export_write(t.dst, &x, what, sizeof what), STORE_OK);
  store_export_fini(&x);
  two_close(&t);
}

/* A clash only the database sees (a document not checked by export_from_json) after earlier
   rows were written: STORE_CONFLICT naming the path, and the target stays empty. */
static void test_store_clash_rolls_back(void **state) {
  struct two t;
  struct store_export x, y;
  char what[96];
  (void)state;
  two_open(&t);
  fill(t.src);
  assert_int_equal(store_export_read(t.src, &x), STORE_OK);
  memcpy(x.sites[1].hostnames[0], "one.test", sizeof "one.test");
  assert_int_equal(store_export_write(t.dst, &x, what, sizeof what), STORE_CONFLICT);
  assert_string_equal(what, "sites[1].hostnames[0]");
  assert_int_equal(store_export_read(t.dst, &y), STORE_OK);
  assert_int_equal(y.n_sites + y.n_nodes + y.n_webhooks, 0);
  assert_int_equal(store_pub_seq(t.dst), 0);
  store_export_fini(&y);
  store_export_fini(&x);
  two_close(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reads_every_field),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_header_refusals),
      cmocka_unit_test(test_site_refusals),
      cmocka_unit_test(test_cross_document_refusals),
      cmocka_unit_test(test_node_token_webhook_refusals),
      cmocka_unit_test(test_targets_refused),
      cmocka_unit_test(test_store_round_trip),
      cmocka_unit_test(test_store_refuses_non_empty),
      cmocka_unit_test(test_store_clash_rolls_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
