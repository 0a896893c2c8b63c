/* Unit tests for common/sitewire: everything the encoder writes the decoder reads back, row by
   row of the tables (so a new row is covered without a new test), and the decoder refuses each
   row's bad values naming the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"
#include "noderetry.h"
#include "sitewire.h"

/* ---- values from the tables ---- */

static int row_count(const struct field_def *defs) {
  int n = 0;
  while (defs[n].name)
    n++;
  return n;
}

static void put_int(void *target, const struct field_def *d, int64_t v) {
  if (d->size == sizeof(int64_t))
    memcpy((char *)target + d->offset, &v, sizeof v);
  else {
    int iv = (int)v;
    memcpy((char *)target + d->offset, &iv, sizeof iv);
  }
}

/* Values a string row may take, tried in order: the first its check accepts is its sample. A
   string row none of these fits needs one added here. */
static const char *const str_samples[] = {"w7.example.net", "192.0.2.7", "2001:db8::7", "sample",
                                          NULL};

/* Write into target, for row d, a value the decoder accepts that is not the row's default (so
   reading it back proves it travelled). */
static void sample(void *target, const struct field_def *d) {
  char *m = (char *)target + d->offset;
  switch (d->type) {
  case FIELD_INT:
    put_int(target, d, d->max != d->def ? d->max : d->min);
    return;
  case FIELD_BOOL: {
    int b = 1;
    memcpy(m, &b, sizeof b);
    return;
  }
  case FIELD_ENUM: {
    int n = 0;
    while (d->choices[n])
      n++;
    assert_true(n >= 2);
    snprintf(m, d->size, "%s", d->choices[n - 1]); /* "" would be written as the first */
    return;
  }
  case FIELD_DOUBLE: {
    double x = (double)d->max;
    memcpy(m, &x, sizeof x);
    return;
  }
  case FIELD_JSON:
    fail_msg("row %s: no sample for a JSON row; add one here", d->name);
    return;
  case FIELD_NAMED: { /* the last value with a word */
    int v = d->nchoices - 1;
    while (v > 0 && !(d->choices[v] && *d->choices[v]))
      v--;
    assert_true(v > 0);
    memcpy(m, &v, sizeof v);
    return;
  }
  case FIELD_STR:
    for (const char *const *c = str_samples; *c; c++) {
      char buf[512];
      snprintf(buf, sizeof buf, "%s", *c);
      if (strlen(buf) < d->size && (int64_t)strlen(buf) >= d->min && (!d->check || d->check(buf))) {
        snprintf(m, d->size, "%s", buf);
        return;
      }
    }
    fail_msg("row %s: no sample value passes its check; add one to str_samples", d->name);
    return;
  case FIELD_TEXT: {
    size_t at = 0;
    for (int64_t i = 0; i < d->max && at + 3 <= d->size; i++) { /* "é…" to the limit */
      m[at++] = (char)0xc3;
      m[at++] = (char)0xa9;
    }
    m[at] = '\0';
    return;
  }
  case FIELD_INT_LIST: {
    int n = (int)d->size;
    for (int i = 0; i < n; i++)
      ((int *)(void *)m)[i] = (int)(d->max - i);
    memcpy((char *)target + d->count_offset, &n, sizeof n);
    return;
  }
  }
}

/* Every row of defs at its sample value. */
static void sample_all(void *target, const struct field_def *defs) {
  for (const struct field_def *d = defs; d->name; d++)
    sample(target, d);
}

/* Row d's member holds the same value in a and b. */
static void same_member(const void *a, const void *b, const struct field_def *d) {
  const char *x = (const char *)a + d->offset, *y = (const char *)b + d->offset;
  int same;
  if (d->type == FIELD_STR || d->type == FIELD_ENUM || d->type == FIELD_TEXT)
    same = strcmp(x, y) == 0;
  else if (d->type == FIELD_INT_LIST)
    same = memcmp((const char *)a + d->count_offset, (const char *)b + d->count_offset,
                  sizeof(int)) == 0 &&
           memcmp(x, y, d->size * sizeof(int)) == 0;
  else
    same = memcmp(x, y, d->type == FIELD_INT ? d->size : sizeof(int)) == 0;
  if (!same) fail_msg("row %s does not survive the round trip", d->name);
}

/* Row d's sample in s is not what the record holds by default. */
static void not_default(const void *s, const void *def, const struct field_def *d) {
  const char *x = (const char *)s + d->offset, *y = (const char *)def + d->offset;
  int differs = d->type == FIELD_STR || d->type == FIELD_ENUM || d->type == FIELD_TEXT
                    ? strcmp(x, y) != 0
                    : memcmp(x, y, d->type == FIELD_INT ? d->size : sizeof(int)) != 0;
  if (!differs) fail_msg("row %s: its sample is its default", d->name);
}

/* Text of an object, parsed back: what travels is bytes. */
static cJSON *through_text(cJSON *j) {
  char *text;
  cJSON *back;
  assert_non_null(j);
  text = json_print(j);
  assert_non_null(text);
  back = json_parse(text, strlen(text));
  assert_non_null(back);
  free(text);
  cJSON_Delete(j);
  return back;
}

/* Every node_retry field away from its default, from noderetry's own table. */
static void sample_retry(struct skip_params *p) {
  noderetry_defaults(p);
  for (const struct noderetry_field *f = noderetry_fields; f->name; f++) {
    char *m = (char *)p + f->off;
    switch (f->type) {
    case NR_INT:
    case NR_BOOL: {
      int v =
          f->type == NR_BOOL ? !(int)f->def : (int)(f->max != (int64_t)f->def ? f->max : f->min);
      memcpy(m, &v, sizeof v);
      break;
    }
    case NR_I64: {
      int64_t v = f->max != (int64_t)f->def ? f->max : f->min;
      memcpy(m, &v, sizeof v);
      break;
    }
    case NR_RATIO: {
      double v = 0.5;
      memcpy(m, &v, sizeof v);
      break;
    }
    case NR_STATUSES:
      p->n_retry_on_status = 2;
      p->retry_on_status[0] = (int)f->min;
      p->retry_on_status[1] = (int)f->max;
      break;
    }
  }
}

/* ---- round trips ---- */

/* Every origin row at a value of its own goes out and comes back; the object has one key per
   row and no other. */
static void test_origin_round_trip(void **state) {
  struct sitewire_origin o, def, back;
  struct field_err err;
  cJSON *j;
  (void)state;
  memset(&def, 0, sizeof def);
  fields_defaults(sitewire_origin_fields, &def);
  o = def;
  sample_all(&o, sitewire_origin_fields);
  for (const struct field_def *d = sitewire_origin_fields; d->name; d++)
    not_default(&o, &def, d);
  j = through_text(sitewire_origin_json(&o));
  assert_int_equal(cJSON_GetArraySize(j), row_count(sitewire_origin_fields));
  memset(&back, 0xa5, sizeof back);
  if (sitewire_origin_read(j, "o", &back, &err) < 0) fail_msg("%s: %s", err.field, err.message);
  for (const struct field_def *d = sitewire_origin_fields; d->name; d++)
    same_member(&o, &back, d);
  cJSON_Delete(j);
}

/* One row at a time: each row's value travels on its own, the others at their defaults (the
   required ones at their samples). */
static void test_origin_each_row(void **state) {
  struct sitewire_origin base, o, back;
  struct field_err err;
  (void)state;
  memset(&base, 0, sizeof base);
  fields_defaults(sitewire_origin_fields, &base);
  for (const struct field_def *d = sitewire_origin_fields; d->name; d++)
    if (d->flags & FIELD_REQUIRED) sample(&base, d);
  for (const struct field_def *d = sitewire_origin_fields; d->name; d++) {
    cJSON *j;
    o = base;
    sample(&o, d);
    j = through_text(sitewire_origin_json(&o));
    if (sitewire_origin_read(j, "o", &back, &err) < 0)
      fail_msg("row %s: %s: %s", d->name, err.field, err.message);
    for (const struct field_def *e = sitewire_origin_fields; e->name; e++)
      same_member(&o, &back, e);
    cJSON_Delete(j);
  }
}

/* A whole publication at the limits: every site and origin row, 32 hostnames, 64 origins, every
   node_retry field, deleted ids. */
static void test_doc_round_trip(void **state) {
  struct sitewire_site *s = calloc(1, sizeof *s), *back = calloc(1, sizeof *back);
  struct sitewire_doc d = {0}, dback;
  const int64_t deleted[] = {5, SITEWIRE_ID_MAX};
  const cJSON *sites, *del, *it;
  struct field_err err;
  cJSON *doc, *a, *b;
  char *ta, *tb;
  int k = 0;
  (void)state;
  assert_non_null(s);
  assert_non_null(back);
  sample_all(&d, sitewire_doc_fields);
  sample_all(s, sitewire_site_fields);
  sample_all(s, sitewire_site_level_fields);
  s->n_hostnames = SITEWIRE_MAX_HOSTNAMES;
  for (int i = 0; i < s->n_hostnames; i++)
    snprintf(s->hostnames[i], sizeof s->hostnames[i], "h%d.example.com", i);
  s->n_origins = SITEWIRE_MAX_ORIGINS;
  for (int i = 0; i < s->n_origins; i++) {
    memset(&s->origins[i], 0, sizeof s->origins[i]);
    sample_all(&s->origins[i], sitewire_origin_fields);
    s->origins[i].id = i + 1; /* unique */
  }
  sample_retry(&s->retry);

  doc = sitewire_doc_json(&d, deleted, 2);
  assert_non_null(doc);
  assert_int_equal(sitewire_doc_add_site(doc, sitewire_site_json(s)), 0);
  doc = through_text(doc);

  if (sitewire_doc_read(doc, &dback, &sites, &err) < 0) fail_msg("%s: %s", err.field, err.message);
  for (const struct field_def *r = sitewire_doc_fields; r->name; r++)
    same_member(&d, &dback, r);
  assert_int_equal(cJSON_GetArraySize(sites), 1);
  if (sitewire_site_read(cJSON_GetArrayItem(sites, 0), "sites[0]", back, &err) < 0)
    fail_msg("%s: %s", err.field, err.message);
  for (const struct field_def *r = sitewire_site_fields; r->name; r++)
    same_member(s, back, r);
  for (const struct field_def *r = sitewire_site_level_fields; r->name; r++)
    same_member(s, back, r);
  assert_int_equal(back->n_hostnames, s->n_hostnames);
  for (int i = 0; i < s->n_hostnames; i++)
    assert_string_equal(back->hostnames[i], s->hostnames[i]);
  assert_int_equal(back->n_origins, s->n_origins);
  for (int i = 0; i < s->n_origins; i++)
    for (const struct field_def *r = sitewire_origin_fields; r->name; r++)
      same_member(&s->origins[i], &back->origins[i], r);
  a = noderetry_json(&s->retry);
  b = noderetry_json(&back->retry);
  ta = json_print(a);
  tb = json_print(b);
  assert_string_equal(ta, tb);
  free(ta);
  free(tb);
  cJSON_Delete(a);
  cJSON_Delete(b);

  assert_int_equal(sitewire_doc_deleted(doc, &del, &err), 0);
  assert_non_null(del);
  cJSON_ArrayForEach(it, del) {
    int64_t id;
    assert_int_equal(sitewire_deleted_read(it, k, &id, &err), 0);
    assert_true(id == deleted[k]);
    k++;
  }
  assert_int_equal(k, 2);
  cJSON_Delete(doc);
  free(s);
  free(back);
}

/* The forms a value takes on the wire: "" host_header is null, absent optional keys take their
   defaults, unknown keys are ignored, hostnames are read in lower case. */
static void test_wire_forms(void **state) {
  static const char later[] =
      "{\"id\":3,\"level\":2,\"address\":\"10.0.0.1\",\"port\":80,\"scheme\":\"https\","
      "\"host_header\":\"Origin.Example.COM\",\"later\":{\"x\":1}}";
  struct sitewire_origin o;
  struct field_err err;
  cJSON *j;
  const cJSON *v;
  (void)state;
  memset(&o, 0, sizeof o);
  fields_defaults(sitewire_origin_fields, &o);
  o.id = 3;
  o.port = 80;
  memcpy(o.address, "10.0.0.1", 9);
  memcpy(o.scheme, "http", 5);
  j = sitewire_origin_json(&o);
  v = cJSON_GetObjectItemCaseSensitive(j, "host_header");
  assert_true(cJSON_IsNull(v));
  cJSON_Delete(j);

  j = json_parse(later, strlen(later));
  assert_non_null(j);
  memset(&o, 0x5a, sizeof o);
  if (sitewire_origin_read(j, "o", &o, &err) < 0) fail_msg("%s: %s", err.field, err.message);
  assert_string_equal(o.host_header, "origin.example.com");
  assert_int_equal(o.weight, 1);
  assert_string_equal(o.description, "");
  assert_string_equal(o.scheme, "https");
  cJSON_Delete(j);
}

/* ---- refusals ---- */

/* Values row d must refuse, as JSON texts (NULL-terminated into out). */
static int bad_values(const struct field_def *d, char out[][320], int cap) {
  int n = 0;
  switch (d->type) {
  case FIELD_INT:
    snprintf(out[n++], 320, "%lld", (long long)d->min - 1);
    if (d->max < INT64_C(9007199254740992)) snprintf(out[n++], 320, "%lld", (long long)d->max + 1);
    snprintf(out[n++], 320, "1.5");
    snprintf(out[n++], 320, "\"1\"");
    snprintf(out[n++], 320, "null");
    break;
  case FIELD_BOOL:
    snprintf(out[n++], 320, "1");
    break;
  case FIELD_NAMED:
    snprintf(out[n++], 320, "\"nope\"");
    snprintf(out[n++], 320, "1");
    break;
  case FIELD_DOUBLE:
    snprintf(out[n++], 320, "\"1\"");
    snprintf(out[n++], 320, "%lld", (long long)d->max + 1);
    break;
  case FIELD_JSON:
    fail_msg("row %s: no bad values for a JSON row; add them here", d->name);
    break;
  case FIELD_ENUM:
    snprintf(out[n++], 320, "\"nope\"");
    snprintf(out[n++], 320, "\"%s\"", d->choices[0]);
    for (char *p = out[n - 1]; *p; p++) /* the same word in capitals */
      if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
    snprintf(out[n++], 320, "1");
    break;
  case FIELD_STR:
    snprintf(out[n++], 320, "12");
    snprintf(out[n++], 320, "\"%0*d\"", (int)(d->size < 300 ? d->size : 300), 0);
    if (d->min > 0) snprintf(out[n++], 320, "\"\"");
    if (d->check) snprintf(out[n++], 320, "\"no spaces allowed\"");
    if (!(d->flags & FIELD_NULLABLE)) snprintf(out[n++], 320, "null");
    break;
  case FIELD_TEXT:
    snprintf(out[n++], 320, "12");
    snprintf(out[n++], 320, "\"a\\u0001b\"");
    break;
  case FIELD_INT_LIST:
    snprintf(out[n++], 320, "[\"x\"]");
    break;
  }
  assert_true(n <= cap);
  return n;
}

/* Each origin row's bad values are refused with the row's path, and a missing required row too;
   a FIELD_LENIENT row's bad value is left out and the origin read. */
static void test_origin_refusals(void **state) {
  struct sitewire_origin good, o;
  struct field_err err;
  char bad[8][320], text[4096], want[64];
  (void)state;
  memset(&good, 0, sizeof good);
  fields_defaults(sitewire_origin_fields, &good);
  sample_all(&good, sitewire_origin_fields);
  for (const struct field_def *d = sitewire_origin_fields; d->name; d++) {
    int n = bad_values(d, bad, 8);
    snprintf(want, sizeof want, "sites[0].origins[1].%s", d->name);
    for (int i = -1; i < n; i++) {
      cJSON *j = sitewire_origin_json(&good);
      int rc;
      assert_non_null(j);
      cJSON_DeleteItemFromObjectCaseSensitive(j, d->name);
      if (i >= 0) {
        snprintf(text, sizeof text, "%s", bad[i]);
        cJSON_AddItemToObject(j, d->name, json_parse(text, strlen(text)));
      } else if (!(d->flags & FIELD_REQUIRED)) {
        cJSON_Delete(j);
        continue;
      }
      rc = sitewire_origin_read(j, "sites[0].origins[1]", &o, &err);
      if (d->flags & FIELD_LENIENT) {
        if (rc != 0) fail_msg("row %s: %s refused", d->name, i >= 0 ? bad[i] : "(absent)");
      } else if (rc != -1 || strcmp(err.field, want) != 0) {
        fail_msg("row %s: %s %s", d->name, i >= 0 ? bad[i] : "(absent)",
                 rc == 0 ? "accepted" : err.field);
      }
      cJSON_Delete(j);
    }
  }
}

static void expect_site_error(const char *text, const char *field) {
  struct sitewire_site *s = malloc(sizeof *s);
  struct field_err err;
  cJSON *j = json_parse(text, strlen(text));
  assert_non_null(s);
  assert_non_null(j);
  assert_int_equal(sitewire_site_read(j, "sites[2]", s, &err), -1);
  if (strcmp(err.field, field) != 0) fail_msg("%s: got %s (%s)", text, err.field, err.message);
  cJSON_Delete(j);
  free(s);
}

/* The site's keys: each refused naming it. */
static void test_site_refusals(void **state) {
  (void)state;
  expect_site_error("[]", "sites[2]");
  expect_site_error("{\"name\":\"a\",\"hostnames\":[\"a.test\"],\"config_version\":1,"
                    "\"current_level\":1,\"origins\":[]}",
                    "sites[2].id");
  expect_site_error("{\"id\":1,\"name\":\"a\",\"hostnames\":[],\"config_version\":1,"
                    "\"current_level\":1,\"origins\":[]}",
                    "sites[2].hostnames");
  expect_site_error("{\"id\":1,\"name\":\"a\",\"hostnames\":[\"a.test\",\"b c\"],"
                    "\"config_version\":1,\"current_level\":1,\"origins\":[]}",
                    "sites[2].hostnames[1]");
  expect_site_error("{\"id\":1,\"name\":\"a\",\"hostnames\":[\"a.test\"],\"config_version\":1,"
                    "\"current_level\":17,\"origins\":[]}",
                    "sites[2].current_level");
  expect_site_error("{\"id\":1,\"name\":\"a\",\"hostnames\":[\"a.test\"],\"config_version\":1,"
                    "\"current_level\":1}",
                    "sites[2].origins");
  expect_site_error(
      "{\"id\":1,\"name\":\"a\",\"hostnames\":[\"a.test\"],\"config_version\":1,"
      "\"current_level\":1,\"origins\":[{\"id\":4,\"level\":1,\"address\":\"10.0.0.1\","
      "\"port\":80,\"scheme\":\"http\"},{\"id\":4,\"level\":1,\"address\":\"10.0.0.2\","
      "\"port\":80,\"scheme\":\"http\"}]}",
      "sites[2].origins[1].id");
  expect_site_error("{\"id\":1,\"name\":\"a\",\"hostnames\":[\"a.test\"],\"config_version\":1,"
                    "\"current_level\":1,\"origins\":[],\"node_retry\":{\"retries\":99}}",
                    "sites[2].node_retry.retries");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_origin_round_trip), cmocka_unit_test(test_origin_each_row),
      cmocka_unit_test(test_doc_round_trip),    cmocka_unit_test(test_wire_forms),
      cmocka_unit_test(test_origin_refusals),   cmocka_unit_test(test_site_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
