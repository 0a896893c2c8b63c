/* Unit tests for common/fields: each row type, the error vocabulary and paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fields.h"
#include "json.h"

struct thing {
  int small;
  int64_t big;
  int flag;
  char name[8];
  char kind[8];
  char host[16];
  int n_codes;
  int codes[3];
  int64_t limit; /* a nullable integer: null is 0 */
};

static int lower_only(char *s) {
  for (; *s; s++)
    if (*s < 'a' || *s > 'z') return 0;
  return 1;
}

static const char *const kinds[] = {"a", "b", NULL};

#define T(m) FIELD_AT(struct thing, m)
static const struct field_def defs[] = {
    {"small", FIELD_INT, 0, T(small), -5, 5, 1, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
    {"big", FIELD_INT, FIELD_REQUIRED, T(big), 0, 5000000000LL, 7, NULL, NULL, NULL, 0, NULL, 0, 0,
     NULL, NULL},
    {"flag", FIELD_BOOL, 0, T(flag), 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
    {"name", FIELD_STR, 0, T(name), 2, 0, 0, NULL, lower_only, "lowercase letters", 0, NULL, 0, 0,
     NULL, NULL},
    {"kind", FIELD_ENUM, 0, T(kind), 0, 0, 0, kinds, NULL, "\"a\" or \"b\"", 0, NULL, 0, 0, NULL,
     NULL},
    {"host", FIELD_STR, FIELD_NULLABLE, T(host), 0, 0, 0, NULL, lower_only, "lowercase", 0, NULL, 0,
     0, NULL, NULL},
    {"codes", FIELD_INT_LIST, 0, offsetof(struct thing, codes), 3, 400, 599, 0, NULL, NULL, NULL,
     offsetof(struct thing, n_codes), NULL, 0, 0, NULL, NULL},
    {"limit", FIELD_INT, FIELD_NULLABLE, T(limit), 1, 10, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL,
     NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
};

struct row {
  const char *body;
  unsigned flags;
  unsigned status; /* 0 = accepted */
  const char *code, *field;
};

static const struct row rows[] = {
    {"{\"big\":1}", FIELDS_CREATE, 0, NULL, NULL},
    {"{}", 0, 0, NULL, NULL},
    {"{}", FIELDS_CREATE, 422, "required", "p.big"},
    {"{\"big\":1,\"x\":1}", FIELDS_CREATE, 400, "unknown_field", "p.x"},
    {"{\"big\":1,\"x\":1}", FIELDS_CREATE | FIELDS_ALLOW_UNKNOWN, 0, NULL, NULL},
    {"{\"small\":6}", 0, 422, "out_of_range", "p.small"},
    {"{\"small\":1.5}", 0, 422, "out_of_range", "p.small"},
    {"{\"small\":\"1\"}", 0, 422, "invalid_type", "p.small"},
    {"{\"big\":5000000000}", 0, 0, NULL, NULL},
    {"{\"big\":5000000001}", 0, 422, "out_of_range", "p.big"},
    {"{\"flag\":1}", 0, 422, "invalid_type", "p.flag"},
    {"{\"name\":\"abcdefg\"}", 0, 0, NULL, NULL},
    {"{\"name\":\"abcdefgh\"}", 0, 422, "too_long", "p.name"},
    {"{\"name\":\"a\"}", 0, 422, "out_of_range", "p.name"},
    {"{\"name\":\"aB\"}", 0, 422, "invalid_value", "p.name"},
    {"{\"name\":null}", 0, 422, "invalid_type", "p.name"},
    {"{\"host\":null}", 0, 0, NULL, NULL},
    {"{\"kind\":\"c\"}", 0, 422, "invalid_value", "p.kind"},
    {"{\"codes\":[400,599,404]}", 0, 0, NULL, NULL},
    {"{\"codes\":[400,599,404,500]}", 0, 422, "out_of_range", "p.codes"},
    {"{\"codes\":[400,600]}", 0, 422, "out_of_range", "p.codes[1]"},
    {"{\"codes\":[\"x\"]}", 0, 422, "invalid_type", "p.codes[0]"},
    {"{\"codes\":{}}", 0, 422, "invalid_type", "p.codes"},
    {"[]", 0, 422, "invalid_type", "p"},
    {"{\"limit\":null}", 0, 0, NULL, NULL},
    {"{\"limit\":10}", 0, 0, NULL, NULL},
    {"{\"limit\":0}", 0, 422, "out_of_range", "p.limit"},
    {"{\"small\":null}", 0, 422, "invalid_type", "p.small"},
};

static void test_rows(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct thing t;
    struct field_err err;
    cJSON *j = json_parse(rows[i].body, strlen(rows[i].body));
    int rc;
    assert_non_null(j);
    memset(&t, 0, sizeof t);
    rc = fields_apply(j, defs, NULL, "p", rows[i].flags, &t, &err);
    cJSON_Delete(j);
    if (rows[i].status == 0) {
      if (rc != 0) fail_msg("row %zu (%s): refused: %s %s", i, rows[i].body, err.code, err.field);
    } else if (rc != -1 || err.status != rows[i].status || strcmp(err.code, rows[i].code) != 0 ||
               strcmp(err.field, rows[i].field) != 0) {
      fail_msg("row %zu (%s): got %d %u %s %s", i, rows[i].body, rc, rc ? err.status : 0,
               rc ? err.code : "", rc ? err.field : "");
    }
  }
}

static void test_values_written(void **state) {
  struct thing t;
  struct field_err err;
  const char *body =
      "{\"small\":-5,\"big\":4000000000,\"flag\":true,\"name\":\"ok\",\"kind\":\"b\","
      "\"host\":\"h\",\"codes\":[502,503]}";
  cJSON *j = json_parse(body, strlen(body));
  (void)state;
  memset(&t, 0, sizeof t);
  fields_defaults(defs, &t);
  assert_int_equal(t.small, 1);
  assert_int_equal(t.big, 7);
  assert_int_equal(fields_apply(j, defs, NULL, "", 0, &t, &err), 0);
  cJSON_Delete(j);
  assert_int_equal(t.small, -5);
  assert_int_equal(t.big, 4000000000LL);
  assert_int_equal(t.flag, 1);
  assert_string_equal(t.name, "ok");
  assert_string_equal(t.kind, "b");
  assert_string_equal(t.host, "h");
  assert_int_equal(t.n_codes, 2);
  assert_int_equal(t.codes[1], 503);
  /* a nullable integer: null writes 0 over what was there */
  t.limit = 5;
  j = json_parse("{\"limit\":null}", 14);
  assert_int_equal(fields_apply(j, defs, NULL, "", 0, &t, &err), 0);
  cJSON_Delete(j);
  assert_int_equal(t.limit, 0);
}

/* FIELD_TEXT's rule, row by row: code points (not bytes) counted, no control characters, valid
   UTF-8 only. */
static void test_text_valid(void **state) {
  static const struct {
    const char *v;
    int ok;
  } texts[] = {
      {"", 1},
      {"abc", 1},
      {"\xc3\xa9\xc3\xa9\xc3\xa9", 1},         /* 3 characters, 6 bytes */
      {"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 0}, /* 4 > max 3 */
      {"abcd", 0},
      {"\xf0\x9f\x98\x80", 1}, /* one 4-byte character */
      {"a\tb", 0},
      {"a\nb", 0},
      {"a\x7f", 0},
      {"\xc2\x85", 0},     /* U+0085, a C1 control */
      {"\xc2\xa0", 1},     /* U+00A0 is no control */
      {"\xc0\xaf", 0},     /* overlong */
      {"\xed\xa0\x80", 0}, /* a surrogate */
      {"\xe2\x82", 0},     /* cut short */
      {"\xff", 0},
      {"\xf4\x90\x80\x80", 0}, /* beyond U+10FFFF */
  };
  (void)state;
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    if (fields_text_valid(texts[i].v, 0, 3) != texts[i].ok) fail_msg("row %zu", i);
  }
  assert_int_equal(fields_text_valid("ab", 3, 5), 0); /* below min */
}

/* Words from outside made text: control bytes shown as '?', what is still not text named. */
static void test_text_scrub(void **state) {
  static const struct {
    const char *in, *out;
  } scrubs[] = {
      {"clean text, caf\xc3\xa9", "clean text, caf\xc3\xa9"},
      {"line\nbreak\ttab\r", "line?break?tab?"},
      {"\x1b[31mred\x7f", "?[31mred?"},
      {"C1 \xc2\x85 control", "(not printable)"},
      {"bad \xff utf-8", "(not printable)"},
      {"", ""},
  };
  (void)state;
  for (size_t i = 0; i < sizeof scrubs / sizeof scrubs[0]; i++) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s", scrubs[i].in);
    fields_text_scrub(buf, sizeof buf, "(not printable)");
    if (strcmp(buf, scrubs[i].out) != 0) fail_msg("row %zu: %s", i, buf);
    assert_true(fields_text_valid(buf, 0, sizeof buf - 1));
  }
}

struct rec {
  int64_t id;
  int level;
  int on;
  char name[16];
  char kind[8];
  char host[16];
  char note[13]; /* 3 characters of up to 4 bytes */
};

#define R(m) .offset = offsetof(struct rec, m), .size = sizeof(((struct rec *)0)->m)
static const struct field_def recdefs[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, R(id), .max = INT64_MAX, .forms = FORM_OUT},
    {.name = "level",
     .column = "lvl",
     .type = FIELD_INT,
     R(level),
     .min = 1,
     .max = 9,
     .def = 1,
     .forms = FORM_IN | FORM_OUT | FORM_CONFIG},
    {.name = "on",
     .column = "on_",
     .type = FIELD_BOOL,
     .flags = FIELD_OPERATOR,
     R(on),
     .forms = FORM_IN | FORM_OUT},
    {.name = "name", .type = FIELD_STR, R(name), .forms = FORM_IN | FORM_OUT},
    {.name = "kind",
     .column = "kind",
     .type = FIELD_ENUM,
     R(kind),
     .choices = kinds,
     .forms = FORM_OUT | FORM_CONFIG},
    {.name = "host",
     .column = "host",
     .type = FIELD_STR,
     .flags = FIELD_NULLABLE,
     R(host),
     .forms = FORM_OUT | FORM_CONFIG},
    {.name = "note",
     .column = "note",
     .type = FIELD_TEXT,
     R(note),
     .max = 3,
     .forms = FORM_IN | FORM_OUT},
    {.name = NULL},
};
#undef R

static cJSON *parse(const char *s) {
  return json_parse(s, strlen(s));
}

/* One table, every form: the columns, the names, what a body may set, the JSON written. */
static void test_record_forms(void **state) {
  char cols[128];
  const char *names[8];
  struct rec r;
  struct field_err err;
  cJSON *j, *out;
  char *text;
  (void)state;
  assert_int_equal(fields_columns(recdefs, 0, "", cols, sizeof cols), 6);
  assert_string_equal(cols, "id, lvl, on_, kind, host, note");
  assert_int_equal(fields_columns(recdefs, FORM_CONFIG, "t.", cols, sizeof cols), 3);
  assert_string_equal(cols, "t.lvl, t.kind, t.host");
  assert_int_equal(fields_columns(recdefs, 0, "", cols, 10), -1); /* never cut */
  assert_int_equal(fields_sql_list(recdefs, FORM_CONFIG, FIELDS_SQL_MARKS, cols, sizeof cols), 3);
  assert_string_equal(cols, "?, ?, ?");
  assert_int_equal(fields_sql_list(recdefs, FORM_CONFIG, FIELDS_SQL_SETS, cols, sizeof cols), 3);
  assert_string_equal(cols, "lvl = ?, kind = ?, host = ?");
  assert_int_equal(
      fields_sql_list(recdefs, FORM_CONFIG, FIELDS_SQL_SETS_NUMBERED, cols, sizeof cols), 3);
  assert_string_equal(cols, "lvl = ?1, kind = ?2, host = ?3");
  assert_int_equal(fields_sql_list(recdefs, 0, FIELDS_SQL_SETS, cols, 20), -1); /* never cut */
  assert_int_equal(fields_names(recdefs, FORM_IN, names, 8), 4);
  assert_string_equal(names[3], "note");
  assert_null(names[4]);
  assert_int_equal(fields_names(recdefs, FORM_IN, names, 4), -1);
  /* who may change a row: the operator's rows, of those a body may set */
  assert_int_equal(fields_names_flagged(recdefs, FORM_IN, FIELD_OPERATOR, names, 8), 1);
  assert_string_equal(names[0], "on");
  assert_null(names[1]);
  assert_int_equal(fields_names_flagged(recdefs, FORM_CONFIG, FIELD_OPERATOR, names, 8), 0);
  assert_null(names[0]);
  assert_int_equal(fields_names_flagged(recdefs, FORM_IN, FIELD_OPERATOR, names, 1), -1);

  memset(&r, 0, sizeof r);
  fields_defaults(recdefs, &r);
  assert_int_equal(r.level, 1);
  /* FORM_IN: the rows without it are unknown keys */
  j = parse("{\"kind\":\"a\"}");
  assert_int_equal(fields_apply_form(j, recdefs, FORM_IN, NULL, "o", 0, &r, &err), -1);
  assert_string_equal(err.code, "unknown_field");
  assert_string_equal(err.field, "o.kind");
  cJSON_Delete(j);
  j = parse("{\"note\":\"\\u00e9\\u00e9\\u00e9\\u00e9\"}");
  assert_non_null(j);
  assert_int_equal(fields_apply_form(j, recdefs, FORM_IN, NULL, "o", 0, &r, &err), -1);
  assert_int_equal(err.status, 422);
  assert_string_equal(err.code, "invalid_value");
  assert_string_equal(err.field, "o.note");
  cJSON_Delete(j);
  j = parse("{\"level\":3,\"on\":true,\"name\":\"x\",\"note\":\"\\u00e9!\"}");
  assert_non_null(j);
  assert_int_equal(fields_apply_form(j, recdefs, FORM_IN, NULL, "o", 0, &r, &err), 0);
  cJSON_Delete(j);
  assert_int_equal(r.level, 3);
  assert_string_equal(r.note, "\xc3\xa9!");

  /* FORM_OUT: "" is null for a nullable string and the first choice for an enum */
  r.id = 5000000000LL;
  out = cJSON_CreateObject();
  assert_int_equal(fields_json_add(out, recdefs, FORM_OUT, &r), 0);
  text = cJSON_PrintUnformatted(out);
  assert_string_equal(text, "{\"id\":5000000000,\"level\":3,\"on\":true,\"name\":\"x\","
                            "\"kind\":\"a\",\"host\":null,\"note\":\"\xc3\xa9!\"}");
  free(text);
  cJSON_Delete(out);
}

/* Another struct with some of rec's rows, in another order and other sizes. */
struct part {
  char host[8];
  int id;
  char kind[8];
  int64_t level;
};

#define P(m) .offset = offsetof(struct part, m), .size = sizeof(((struct part *)0)->m)
static const struct field_def partdefs[] = {
    {.name = "host", .type = FIELD_STR, .flags = FIELD_NULLABLE, P(host)},
    {.name = "id", .type = FIELD_INT, P(id), .max = INT32_MAX},
    {.name = "kind", .type = FIELD_STR, P(kind)}, /* an enum's value into a plain string */
    {.name = "level", .type = FIELD_INT, P(level), .max = 9},
    {.name = NULL},
};
static const struct field_def baddefs[] = {
    {.name = "id", .type = FIELD_INT, P(id)},
    {.name = "on", .type = FIELD_STR, P(host)}, /* a boolean is no string */
    {.name = NULL},
};
#undef P

/* FIELD_NAMED: the record carries the value; every string form is the word of the name table. */
enum shade { SHADE_NONE = 0, SHADE_DARK = 1, SHADE_LIGHT = 2 };
static const char *const shade_names[] = {
    [SHADE_NONE] = "", [SHADE_DARK] = "dark", [SHADE_LIGHT] = "light"};
struct painted {
  enum shade shade, last;
};
#define P(m) .offset = offsetof(struct painted, m), .size = sizeof(((struct painted *)0)->m)
static const struct field_def painted_defs[] = {
    {.name = "shade", .type = FIELD_NAMED, P(shade), FIELD_NAMES(shade_names), .what = "a shade"},
    {.name = "last",
     .type = FIELD_NAMED,
     .flags = FIELD_NULLABLE,
     P(last),
     FIELD_NAMES(shade_names)},
    {.name = NULL},
};
#undef P

/* fields_match pairs rows by name and type; fields_copy copies through the pairs and refuses
   what does not fit. */
static void test_copy(void **state) {
  const struct field_def *plan[8];
  const char *missing = "x";
  struct rec r;
  struct part p;
  (void)state;
  assert_int_equal(fields_match(partdefs, recdefs, plan, 8, &missing), 4);
  assert_null(missing);
  assert_int_equal(fields_match(partdefs, recdefs, plan, 3, NULL), -1);
  assert_int_equal(fields_match(baddefs, recdefs, plan, 8, &missing), -1);
  assert_string_equal(missing, "on");
  assert_int_equal(fields_match(partdefs, recdefs, plan, 8, NULL), 4);

  memset(&r, 0, sizeof r);
  r.id = 77;
  r.level = 4;
  memcpy(r.kind, "b", 2);
  memcpy(r.host, "h.test", 7);
  memset(&p, 0xff, sizeof p);
  assert_int_equal(fields_copy(partdefs, &p, plan, &r), 0);
  assert_int_equal(p.id, 77);
  assert_int_equal(p.level, 4);
  assert_string_equal(p.kind, "b");
  assert_string_equal(p.host, "h.test");

  r.id = INT64_C(1) << 40; /* beyond the int member */
  assert_int_equal(fields_copy(partdefs, &p, plan, &r), -1);
  r.id = 1;
  memcpy(r.host, "longer.test", 12); /* beyond host[8] */
  assert_int_equal(fields_copy(partdefs, &p, plan, &r), -1);
}

/* A FIELD_LENIENT row's bad value is left out; the object is still read. */
static void test_lenient(void **state) {
  static const struct field_def ldefs[] = {
      {.name = "level",
       .type = FIELD_INT,
       .offset = offsetof(struct rec, level),
       .size = sizeof(int),
       .min = 1,
       .max = 9},
      {.name = "note",
       .type = FIELD_TEXT,
       .flags = FIELD_LENIENT,
       .offset = offsetof(struct rec, note),
       .size = sizeof(((struct rec *)0)->note),
       .max = 3},
      {.name = NULL},
  };
  static const char *const bad[] = {"1", "\"four\"", "null", "[\"a\"]", "\"a\\u0001\""};
  struct rec r;
  struct field_err err;
  char text[64];
  cJSON *j;
  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&r, 0, sizeof r);
    memcpy(r.note, "old", 4);
    snprintf(text, sizeof text, "{\"level\":2,\"note\":%s}", bad[i]);
    j = parse(text);
    assert_non_null(j);
    assert_int_equal(fields_apply(j, ldefs, NULL, "o", 0, &r, &err), 0);
    assert_int_equal(r.level, 2);
    assert_string_equal(r.note, "old");
    cJSON_Delete(j);
  }
  j = parse("{\"level\":0,\"note\":\"ok\"}"); /* the other rows stay strict */
  assert_int_equal(fields_apply(j, ldefs, NULL, "o", 0, &r, &err), -1);
  assert_string_equal(err.field, "o.level");
  cJSON_Delete(j);
  j = parse("{\"level\":2,\"note\":\"ok\"}");
  assert_int_equal(fields_apply(j, ldefs, NULL, "o", 0, &r, &err), 0);
  assert_string_equal(r.note, "ok");
  cJSON_Delete(j);
}

static void test_named(void **state) {
  struct painted p = {SHADE_NONE, SHADE_NONE};
  struct field_err err;
  cJSON *in, *out;
  char *text;
  (void)state;
  in = json_parse("{\"shade\":\"light\"}", 17);
  assert_int_equal(fields_apply(in, painted_defs, NULL, "", 0, &p, &err), 0);
  assert_int_equal(p.shade, SHADE_LIGHT);
  cJSON_Delete(in);
  in = json_parse("{\"shade\":\"grey\"}", 16);
  assert_int_equal(fields_apply(in, painted_defs, NULL, "", 0, &p, &err), -1);
  assert_int_equal(err.status, 422);
  assert_string_equal(err.code, "invalid_value");
  assert_string_equal(err.field, "shade");
  assert_string_equal(err.message, "shade must be a shade");
  cJSON_Delete(in);
  in = json_parse("{\"shade\":1}", 11);
  assert_int_equal(fields_apply(in, painted_defs, NULL, "", 0, &p, &err), -1);
  assert_string_equal(err.code, "invalid_type");
  cJSON_Delete(in);
  assert_int_equal(p.shade, SHADE_LIGHT); /* unchanged by the refusals */
  /* out: the word; the "" word of a nullable row as null */
  out = cJSON_CreateObject();
  assert_int_equal(fields_json_add(out, painted_defs, 0, &p), 0);
  text = cJSON_PrintUnformatted(out);
  assert_string_equal(text, "{\"shade\":\"light\",\"last\":null}");
  free(text);
  cJSON_Delete(out);
  p.last = SHADE_DARK;
  p.shade = (enum shade)7; /* no word: null */
  out = cJSON_CreateObject();
  assert_int_equal(fields_json_add(out, painted_defs, 0, &p), 0);
  text = cJSON_PrintUnformatted(out);
  assert_string_equal(text, "{\"shade\":null,\"last\":\"dark\"}");
  free(text);
  cJSON_Delete(out);
}

/* fields_copy of NAMED rows: the value into a row of the same name table, the word into a
   string; a row of another name table does not match. */
struct painted_copy {
  char shade[8];
  enum shade last;
};
static const char *const other_names[] = {"x", "y", "z"};
#define P(m)                                                                                       \
  .offset = offsetof(struct painted_copy, m), .size = sizeof(((struct painted_copy *)0)->m)
static const struct field_def painted_copy_defs[] = {
    {.name = "shade", .type = FIELD_STR, P(shade)},
    {.name = "last", .type = FIELD_NAMED, P(last), FIELD_NAMES(shade_names)},
    {.name = NULL},
};
static const struct field_def painted_other_defs[] = {
    {.name = "last", .type = FIELD_NAMED, P(last), FIELD_NAMES(other_names)},
    {.name = NULL},
};
#undef P

static void test_named_copy(void **state) {
  const struct field_def *plan[4];
  const char *missing;
  struct painted p = {SHADE_LIGHT, SHADE_DARK};
  struct painted_copy c;
  (void)state;
  assert_int_equal(fields_match(painted_copy_defs, painted_defs, plan, 4, &missing), 2);
  memset(&c, 0xff, sizeof c);
  assert_int_equal(fields_copy(painted_copy_defs, &c, plan, &p), 0);
  assert_string_equal(c.shade, "light");
  assert_int_equal(c.last, SHADE_DARK);
  p.shade = SHADE_NONE;
  assert_int_equal(fields_copy(painted_copy_defs, &c, plan, &p), 0);
  assert_string_equal(c.shade, "");
  assert_int_equal(fields_match(painted_other_defs, painted_defs, plan, 4, &missing), -1);
  assert_string_equal(missing, "last");
}

/* A record with a nested object, a double and a codec row (its keys spread in its object). */
struct inner {
  int level;
};
struct nested_rec {
  int a;
  int b;
  double ratio;
  struct inner in;
};
static const char *const inner_keys[] = {"level", NULL};
static int inner_apply(const cJSON *obj, void *m, struct field_err *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "level");
  if (!v) return 0;
  if (!cJSON_IsNumber(v) || v->valuedouble < 1)
    return fields_fail(err, 422, "out_of_range", NULL, "level", "level must be at least 1");
  ((struct inner *)m)->level = (int)v->valuedouble;
  return 0;
}
static int inner_add(cJSON *obj, const void *m) {
  return cJSON_AddNumberToObject(obj, "level", ((const struct inner *)m)->level) ? 0 : -1;
}
static const struct field_codec inner_codec = {
    .keys = inner_keys, .apply = inner_apply, .add_json = inner_add};
#define P(m) .offset = offsetof(struct nested_rec, m), .size = sizeof(((struct nested_rec *)0)->m)
static const struct field_def nested_defs[] = {
    {.name = "a", .type = FIELD_INT, P(a), .max = 9, .forms = FORM_IN | FORM_OUT},
    {.name = "b", .type = FIELD_INT, P(b), .max = 9, .object = "sub", .forms = FORM_IN | FORM_OUT},
    {.name = "ratio",
     .type = FIELD_DOUBLE,
     .flags = FIELD_NULLABLE,
     P(ratio),
     .min = 0,
     .max = 1,
     .object = "sub",
     .forms = FORM_IN | FORM_OUT},
    {.name = "inner",
     .type = FIELD_JSON,
     P(in),
     .codec = &inner_codec,
     .object = "sub",
     .forms = FORM_IN | FORM_OUT},
    {.name = NULL},
};
#undef P

/* docs/design.md#secrets: what a URL reads as below admin. */
static void test_url_mask(void **state) {
  static const struct {
    const char *in, *out;
    int masked;
  } cases[] = {
      {"https://hooks.example.com/x", "https://hooks.example.com/x", 0},
      {"https://user:pass@hooks.example.com/x", "https://***@hooks.example.com/x", 1},
      {"https://tok@hooks.example.com:8443/x/y", "https://***@hooks.example.com:8443/x/y", 1},
      {"http://h.example/p?apikey=s3cret", "http://h.example/p?***", 1},
      {"http://h.example?apikey=s3cret", "http://h.example?***", 1},
      {"http://u:p@h.example/p?a=1&b=2#frag", "http://***@h.example/p?***#***", 1},
      {"http://h.example/p#frag", "http://h.example/p#***", 1},
      {"http://h.example/a@b", "http://h.example/a@b", 0}, /* an @ in the path is no userinfo */
      {"http://a@b@h.example/", "http://***@h.example/", 1},
      {"http://[::1]:8080/p", "http://[::1]:8080/p", 0},
      {"", "", 0},
  };
  char out[256];
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_int_equal(fields_url_mask(cases[i].in, out, sizeof out), cases[i].masked);
    assert_string_equal(out, cases[i].out);
  }
  /* a short buffer is cut, never overrun */
  assert_int_equal(fields_url_mask("https://u:p@host/p", out, 10), 1);
  assert_string_equal(out, "https://*");
}

struct secret_rec {
  char name[16];
  char url[128];
  char token[32];
};

#define SR(m) FIELD_AT(struct secret_rec, m)
static const struct field_def secret_defs[] = {
    {.name = "name", .type = FIELD_STR, SR(name)},
    {.name = "url", .type = FIELD_STR, .flags = FIELD_SECRET_URL, SR(url)},
    {.name = "token", .type = FIELD_STR, .flags = FIELD_SECRET, SR(token)},
    {.name = NULL},
};
#undef SR

/* fields_redact masks the secret rows only; fields_keep_secrets puts back what came back masked
   and keeps what was changed. */
static void test_redact_keep(void **state) {
  struct secret_rec stored = {"hook", "https://u:p@h.example/p?k=v", "s3cret"}, shown, w;
  (void)state;
  shown = stored;
  assert_int_equal(fields_redact(secret_defs, &shown), 2);
  assert_string_equal(shown.name, "hook");
  assert_string_equal(shown.url, "https://***@h.example/p?***");
  assert_string_equal(shown.token, FIELDS_MASK);
  /* the masked form echoed back: the stored secrets stay */
  w = shown;
  fields_keep_secrets(secret_defs, &w, &stored);
  assert_string_equal(w.url, stored.url);
  assert_string_equal(w.token, stored.token);
  /* new values are taken as sent */
  w = shown;
  snprintf(w.url, sizeof w.url, "https://h.example/new");
  snprintf(w.token, sizeof w.token, "other");
  fields_keep_secrets(secret_defs, &w, &stored);
  assert_string_equal(w.url, "https://h.example/new");
  assert_string_equal(w.token, "other");
  /* nothing secret: nothing masked, nothing kept */
  {
    struct secret_rec plain = {"n", "https://h.example/p", ""}, p2;
    p2 = plain;
    assert_int_equal(fields_redact(secret_defs, &p2), 0);
    assert_memory_equal(&p2, &plain, sizeof plain);
    snprintf(p2.token, sizeof p2.token, FIELDS_MASK);
    fields_keep_secrets(secret_defs, &p2, &plain); /* no stored secret: the mask is a value */
    assert_string_equal(p2.token, FIELDS_MASK);
  }
}

static void test_nested(void **state) {
  struct nested_rec r = {0, 0, 0, {0}};
  struct field_err err;
  cJSON *in, *out;
  char *text;
  (void)state;
  /* the top's rows only; the nested object's key is the caller's */
  in = parse("{\"a\":1,\"sub\":{}}");
  assert_int_equal(fields_apply_form(in, nested_defs, FORM_IN, NULL, "", 0, &r, &err), -1);
  assert_string_equal(err.code, "unknown_field");
  assert_int_equal(fields_apply_form(in, nested_defs, FORM_IN, (const char *const[]){"sub", NULL},
                                     "", 0, &r, &err),
                   0);
  assert_int_equal(r.a, 1);
  cJSON_Delete(in);
  in = parse("{\"b\":2,\"ratio\":0.5,\"level\":3}");
  assert_int_equal(fields_apply_in(in, nested_defs, "sub", FORM_IN, NULL, "sub", 0, &r, &err), 0);
  assert_int_equal(r.b, 2);
  assert_true(r.ratio == 0.5);
  assert_int_equal(r.in.level, 3);
  cJSON_Delete(in);
  in = parse("{\"ratio\":2}");
  assert_int_equal(fields_apply_in(in, nested_defs, "sub", FORM_IN, NULL, "sub", 0, &r, &err), -1);
  assert_string_equal(err.field, "sub.ratio");
  cJSON_Delete(in);
  in = parse("{\"level\":0}"); /* the codec's error, under the object's path */
  assert_int_equal(fields_apply_in(in, nested_defs, "sub", FORM_IN, NULL, "sub", 0, &r, &err), -1);
  assert_string_equal(err.field, "sub.level");
  cJSON_Delete(in);
  in = parse("{\"a\":1}"); /* a top-level row is no key of the object */
  assert_int_equal(fields_apply_in(in, nested_defs, "sub", FORM_IN, NULL, "sub", 0, &r, &err), -1);
  assert_string_equal(err.code, "unknown_field");
  cJSON_Delete(in);
  out = cJSON_CreateObject();
  assert_int_equal(fields_json_add(out, nested_defs, FORM_OUT, &r), 0);
  text = cJSON_PrintUnformatted(out);
  assert_string_equal(text, "{\"a\":1,\"sub\":{\"b\":2,\"ratio\":0.5,\"level\":3}}");
  free(text);
  cJSON_Delete(out);
  r.ratio = 0; /* a nullable double's 0 is null */
  out = cJSON_CreateObject();
  assert_int_equal(fields_json_add(out, nested_defs, FORM_OUT, &r), 0);
  text = cJSON_PrintUnformatted(out);
  assert_string_equal(text, "{\"a\":1,\"sub\":{\"b\":2,\"ratio\":null,\"level\":3}}");
  free(text);
  cJSON_Delete(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rows),         cmocka_unit_test(test_values_written),
      cmocka_unit_test(test_text_valid),   cmocka_unit_test(test_text_scrub),
      cmocka_unit_test(test_record_forms), cmocka_unit_test(test_copy),
      cmocka_unit_test(test_lenient),      cmocka_unit_test(test_named),
      cmocka_unit_test(test_named_copy),   cmocka_unit_test(test_nested),
      cmocka_unit_test(test_url_mask),     cmocka_unit_test(test_redact_keep),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
