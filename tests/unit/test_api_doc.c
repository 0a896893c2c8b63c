/* Unit tests for controld/api_doc: a marked schema gets one property per row of its table and
   form (so a new row is in the document without an edit of it), with the row's type, bounds and
   choices; what the document says for people and the keys that are no row are kept; a bad marker
   is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "api_doc.h"
#include "site.h"
#include "sitewire.h"

static cJSON *doc_with(const char *schema_json) {
  char text[2048];
  snprintf(text, sizeof text, "{\"components\": {\"schemas\": {\"X\": %s}}}", schema_json);
  cJSON *d = cJSON_Parse(text);
  assert_non_null(d);
  return d;
}

static cJSON *schema(cJSON *doc) {
  return cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "components"),
                                       "schemas"),
      "X");
}

static cJSON *prop(cJSON *doc, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(schema(doc), "properties"), key);
}

/* The rows of rows in object (NULL: the top level) with form (0: all), and those marked
   FIELD_REQUIRED among them. */
static int rows_with(const struct field_def *rows, const char *object, unsigned form, int *marked) {
  int n = 0;
  *marked = 0;
  for (const struct field_def *d = rows; d->name; d++) {
    int same = object ? d->object && strcmp(d->object, object) == 0 : !d->object;
    if (!same || d->type == FIELD_JSON || (form && !(d->forms & form))) continue;
    n++;
    if (d->flags & FIELD_REQUIRED) (*marked)++;
  }
  return n;
}

static double num(cJSON *p, const char *key) {
  cJSON *v = cJSON_GetObjectItemCaseSensitive(p, key);
  assert_true(cJSON_IsNumber(v));
  return v->valuedouble;
}

static void every_row_of_the_form_is_a_property(void **state) {
  (void)state;
  enum { ALL, MARKED, NONE };
  static const struct {
    const char *mark;
    const struct field_def *rows;
    const char *object;
    unsigned form;
    int required;
  } cases[] = {
      {"\"origin out\"", site_origin_fields, NULL, FORM_OUT, ALL},
      {"\"origin in\"", site_origin_fields, NULL, FORM_IN, NONE},
      {"\"wire-origin wire\"", sitewire_origin_fields, NULL, 0, ALL},
      {"\"site out\"", site_fields, NULL, FORM_OUT, ALL},
      {"\"site create\"", site_fields, NULL, FORM_IN, MARKED},
      {"\"site.health_check out\"", site_fields, "health_check", FORM_OUT, ALL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char js[256];
    char err[128];
    snprintf(js, sizeof js, "{\"type\": \"object\", \"x-cdnca-fields\": %s}", cases[i].mark);
    cJSON *d = doc_with(js);
    assert_int_equal(api_doc_fill(d, err, sizeof err), 0);
    int marked, n = rows_with(cases[i].rows, cases[i].object, cases[i].form, &marked);
    assert_true(n > 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(schema(d), "properties")), n);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(schema(d), "required")),
                     cases[i].required == ALL      ? n
                     : cases[i].required == MARKED ? marked
                                                   : 0);
    cJSON_Delete(d);
  }
}

static void a_property_takes_the_rows_type_bounds_and_choices(void **state) {
  (void)state;
  char err[128];
  cJSON *d = doc_with("{\"x-cdnca-fields\": \"origin out\", \"properties\": {"
                      "\"weight\": {\"type\": \"string\", \"maximum\": 7, \"description\": \"d\"},"
                      "\"extra\": {\"type\": \"integer\"}}, \"required\": [\"extra\"]}");
  assert_int_equal(api_doc_fill(d, err, sizeof err), 0);
  cJSON *w = prop(d, "weight");
  assert_string_equal(cJSON_GetObjectItem(w, "type")->valuestring, "integer"); /* the row's */
  assert_true(num(w, "minimum") == 1 && num(w, "maximum") == 100);
  assert_string_equal(cJSON_GetObjectItem(w, "description")->valuestring, "d"); /* kept */
  cJSON *t = cJSON_GetObjectItem(prop(d, "host_header"), "type");               /* nullable */
  assert_true(cJSON_IsArray(t) && cJSON_GetArraySize(t) == 2);
  cJSON *e = cJSON_GetObjectItem(prop(d, "scheme"), "enum");
  assert_int_equal(cJSON_GetArraySize(e), ORIGIN_SCHEMES);
  assert_true(num(prop(d, "description"), "maxLength") == SITE_DESCRIPTION_MAX);
  /* a string row's maxLength is its member's room, the NUL aside (the API's bound, in bytes) */
  assert_true(num(prop(d, "address"), "maxLength") ==
              (double)(sizeof(((struct origin_rec *)0)->address) - 1));
  /* a key that is no row stays, last, still required */
  assert_non_null(prop(d, "extra"));
  cJSON *props = cJSON_GetObjectItem(schema(d), "properties");
  assert_string_equal(cJSON_GetArrayItem(props, cJSON_GetArraySize(props) - 1)->string, "extra");
  cJSON *req = cJSON_GetObjectItem(schema(d), "required");
  assert_string_equal(cJSON_GetArrayItem(req, cJSON_GetArraySize(req) - 1)->valuestring, "extra");
  cJSON_Delete(d);
}

/* An input schema marks the rows an operator may change (FIELD_OPERATOR), the API's own list:
   api_origins.c refuses the rest to an operator; an answer's schema marks none. */
static void operator_rows_are_marked_in_inputs(void **state) {
  char err[128] = "";
  const char *names[8];
  (void)state;
  int n = fields_names_flagged(site_origin_fields, FORM_IN, FIELD_OPERATOR, names, 8);
  assert_true(n >= 1);
  for (int form = 0; form < 2; form++) {
    cJSON *d = doc_with(form ? "{\"x-cdnca-fields\": \"origin in\"}"
                             : "{\"x-cdnca-fields\": \"origin out\"}");
    int marked = 0;
    const cJSON *p;
    assert_int_equal(api_doc_fill(d, err, sizeof err), 0);
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(schema(d), "properties")) {
      const cJSON *a = cJSON_GetObjectItem(p, "x-cdnca-auth");
      int listed = 0;
      for (int i = 0; i < n; i++)
        listed |= strcmp(names[i], p->string) == 0;
      if (a) {
        assert_string_equal(a->valuestring, "operator");
        marked++;
      }
      assert_int_equal(a != NULL, form && listed);
    }
    assert_int_equal(marked, form ? n : 0);
    cJSON_Delete(d);
  }
  assert_string_equal(names[0], "enabled"); /* docs/api.md's "API for teams" names it */
}

static void a_bad_marker_is_refused(void **state) {
  (void)state;
  static const char *const bad[] = {
      "\"origin\"", "\"nosuch out\"", "\"origin sideways\"", "\"origin out x\"",
      "7",          "\" origin\""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char js[128], err[128] = "";
    snprintf(js, sizeof js, "{\"x-cdnca-fields\": %s}", bad[i]);
    cJSON *d = doc_with(js);
    assert_int_equal(api_doc_fill(d, err, sizeof err), -1);
    assert_non_null(strstr(err, "schema X"));
    cJSON_Delete(d);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_row_of_the_form_is_a_property),
      cmocka_unit_test(a_property_takes_the_rows_type_bounds_and_choices),
      cmocka_unit_test(operator_rows_are_marked_in_inputs),
      cmocka_unit_test(a_bad_marker_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
