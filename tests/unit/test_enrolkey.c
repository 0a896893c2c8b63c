/* Unit tests for controld/enrolkey: a key's state at a moment, and the two bodies' tables
   (docs/design.md#enrolment-keys). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "enrolkey.h"
#include "json.h"

static void test_state(void **state) {
  struct enrolkey_rec k;
  (void)state;
  memset(&k, 0, sizeof k);
  assert_int_equal(enrolkey_state(&k, 1000), ENROLKEY_ACTIVE); /* no expiry, unlimited */
  k.uses = 1000000;
  assert_int_equal(enrolkey_state(&k, 1000), ENROLKEY_ACTIVE);
  k.max_uses = 10;
  k.uses = 9;
  assert_int_equal(enrolkey_state(&k, 1000), ENROLKEY_ACTIVE);
  k.uses = 10;
  assert_int_equal(enrolkey_state(&k, 1000), ENROLKEY_USED_UP);
  k.expires_at = 1000; /* expired at its very moment, as tokens are */
  assert_int_equal(enrolkey_state(&k, 999), ENROLKEY_USED_UP);
  assert_int_equal(enrolkey_state(&k, 1000), ENROLKEY_EXPIRED);
  k.uses = 0;
  assert_int_equal(enrolkey_state(&k, 999), ENROLKEY_ACTIVE);
  k.revoked_at = 5;
  assert_int_equal(enrolkey_state(&k, 999), ENROLKEY_REVOKED);
  assert_int_equal(enrolkey_state(&k, 2000), ENROLKEY_REVOKED);
  assert_string_equal(enrolkey_state_names[ENROLKEY_USED_UP], "used_up");
}

/* POST /v1/enrolment-keys: body, status, code, field (0 = accepted). */
static void test_create_body(void **state) {
  static const struct {
    const char *body;
    unsigned status;
    const char *code, *field;
  } rows[] = {
      {"{\"name\":\"fleet\"}", 0, NULL, NULL},
      {"{\"name\":\"fleet\",\"expires_at\":null,\"max_uses\":null}", 0, NULL, NULL},
      {"{\"name\":\"fleet\",\"expires_at\":\"2999-01-01T00:00:00Z\",\"max_uses\":10}", 0, NULL,
       NULL},
      {"{}", 422, "required", "name"},
      {"{\"name\":\"a b\"}", 422, "invalid_value", "name"},
      {"{\"name\":\"fleet\",\"role\":\"admin\"}", 400, "unknown_field", "role"},
      {"{\"name\":\"fleet\",\"max_uses\":0}", 422, "out_of_range", "max_uses"},
      {"{\"name\":\"fleet\",\"max_uses\":1000001}", 422, "out_of_range", "max_uses"},
      {"{\"name\":\"fleet\",\"max_uses\":2.5}", 422, "out_of_range", "max_uses"},
      {"{\"name\":\"fleet\",\"max_uses\":\"3\"}", 422, "invalid_type", "max_uses"},
      {"{\"name\":\"fleet\",\"expires_at\":\"tomorrow\"}", 422, "invalid_value", "expires_at"},
      {"{\"name\":\"fleet\",\"expires_at\":1}", 422, "invalid_type", "expires_at"},
      {"{\"name\":\"fleet\",\"expires_at\":\"2000-01-01T00:00:00Z\"}", 422, "invalid_value",
       "expires_at"},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct enrolkey_in in;
    struct enrolkey_rec k;
    struct field_err err;
    cJSON *j = json_parse(rows[i].body, strlen(rows[i].body));
    int rc;
    assert_non_null(j);
    memset(&in, 0, sizeof in);
    memset(&err, 0, sizeof err);
    rc = fields_apply_form(j, enrolkey_in_fields, 0, NULL, "", FIELDS_CREATE, &in, &err);
    /* now: 2020-09-13T12:26:40Z */
    if (rc == 0) rc = enrolkey_in_record(&in, 1600000000000LL, &k, &err);
    cJSON_Delete(j);
    if (rows[i].status == 0) {
      if (rc != 0) fail_msg("row %zu (%s): refused: %s %s", i, rows[i].body, err.code, err.field);
      assert_string_equal(k.name, "fleet");
    } else if (rc != -1 || err.status != rows[i].status || strcmp(err.code, rows[i].code) != 0 ||
               strcmp(err.field, rows[i].field) != 0) {
      fail_msg("row %zu (%s): got %d %u %s %s", i, rows[i].body, rc, err.status,
               err.code ? err.code : "", err.field);
    }
  }
}

static void test_create_values(void **state) {
  static const char body[] =
      "{\"name\":\"fleet\",\"expires_at\":\"2030-01-01T00:00:00Z\",\"max_uses\":10}";
  struct enrolkey_in in;
  struct enrolkey_rec k;
  struct field_err err;
  cJSON *j = json_parse(body, strlen(body));
  (void)state;
  memset(&in, 0, sizeof in);
  assert_int_equal(fields_apply_form(j, enrolkey_in_fields, 0, NULL, "", FIELDS_CREATE, &in, &err),
                   0);
  cJSON_Delete(j);
  assert_int_equal(enrolkey_in_record(&in, 1600000000000LL, &k, &err), 0);
  assert_int_equal(k.expires_at, 1893456000000LL);
  assert_int_equal(k.max_uses, 10);
  assert_int_equal(k.uses, 0);
  assert_int_equal(k.revoked_at, 0);
}

/* POST /v1/node/enrol: both members required; the name follows the names rule. */
static void test_enrol_body(void **state) {
  static const struct {
    const char *body;
    unsigned status;
    const char *code, *field;
  } rows[] = {
      {"{\"key\":\"k\",\"name\":\"edge-1\"}", 0, NULL, NULL},
      {"{\"name\":\"edge-1\"}", 422, "required", "key"},
      {"{\"key\":\"k\"}", 422, "required", "name"},
      {"{\"key\":\"\",\"name\":\"edge-1\"}", 422, "out_of_range", "key"},
      {"{\"key\":7,\"name\":\"edge-1\"}", 422, "invalid_type", "key"},
      {"{\"key\":\"k\",\"name\":\"edge 1\"}", 422, "invalid_value", "name"},
      {"{\"key\":\"k\",\"name\":\"e\",\"role\":\"admin\"}", 400, "unknown_field", "role"},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct enrol_in in;
    struct field_err err;
    cJSON *j = json_parse(rows[i].body, strlen(rows[i].body));
    int rc;
    assert_non_null(j);
    memset(&in, 0, sizeof in);
    memset(&err, 0, sizeof err);
    rc = fields_apply_form(j, enrol_in_fields, 0, NULL, "", FIELDS_CREATE, &in, &err);
    cJSON_Delete(j);
    if (rows[i].status == 0) {
      if (rc != 0) fail_msg("row %zu (%s): refused: %s %s", i, rows[i].body, err.code, err.field);
      assert_string_equal(in.key, "k");
    } else if (rc != -1 || err.status != rows[i].status || strcmp(err.code, rows[i].code) != 0 ||
               strcmp(err.field, rows[i].field) != 0) {
      fail_msg("row %zu (%s): got %d %u %s %s", i, rows[i].body, rc, err.status,
               err.code ? err.code : "", err.field);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_state),
      cmocka_unit_test(test_create_body),
      cmocka_unit_test(test_create_values),
      cmocka_unit_test(test_enrol_body),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
