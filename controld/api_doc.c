/* api_doc — record schemas of the OpenAPI document from the field tables (see api_doc.h). */
#include "api_doc.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "drill.h"
#include "fields.h"
#include "incident.h"
#include "site.h"
#include "sitewire.h"

/* The tables a schema may name. */
static const struct {
  const char *name;
  const struct field_def *rows;
} tables[] = {
    {"site", site_fields},
    {"origin", site_origin_fields},
    {"wire-origin", sitewire_origin_fields},
    {"incident", incident_fields},
    {"drill", drill_fields},
    {"incident-entry", incident_entry_fields},
};

/* The forms a schema may name: the FORM_* bits a row needs (0: every row) and which rows are
   required: every one (an answer carries each key), those marked FIELD_REQUIRED (a create), or
   none (a change). */
enum doc_required { REQ_ALL, REQ_MARKED, REQ_NONE };
static const struct {
  const char *name;
  unsigned form;
  enum doc_required required;
} forms[] = {
    {"out", FORM_OUT, REQ_ALL},
    {"wire", 0, REQ_ALL},
    {"create", FORM_IN, REQ_MARKED},
    {"in", FORM_IN, REQ_NONE},
};

/* The keys of a hand-written property that speak to people and are kept. */
static const char *const kept_keys[] = {"description", "format", "examples", "title", "deprecated"};

/* Integers JSON carries exactly (a bound past them says nothing a reader can use). */
#define DOC_EXACT_INT (INT64_C(1) << 53)

static int add_type(cJSON *p, const char *type, int nullable) {
  if (!nullable) return cJSON_AddStringToObject(p, "type", type) ? 0 : -1;
  cJSON *t = cJSON_AddArrayToObject(p, "type");
  if (!t) return -1;
  cJSON_AddItemToArray(t, cJSON_CreateString(type));
  cJSON_AddItemToArray(t, cJSON_CreateString("null"));
  return cJSON_GetArraySize(t) == 2 ? 0 : -1;
}

/* minimum / maximum of an integer or number row: a row an API body sets is always bounded; a row
   only answered is when its bounds are not both 0. */
static void add_bounds(cJSON *p, const struct field_def *d) {
  if (!(d->forms & FORM_IN) && d->min == 0 && d->max == 0) return;
  if (d->min > -DOC_EXACT_INT) cJSON_AddNumberToObject(p, "minimum", (double)d->min);
  if (d->max < DOC_EXACT_INT) cJSON_AddNumberToObject(p, "maximum", (double)d->max);
}

/* The words of an ENUM or NAMED row as "enum" (an empty word is the stored "none": null). */
static int add_choices(cJSON *p, const struct field_def *d, int nullable) {
  cJSON *e = cJSON_AddArrayToObject(p, "enum");
  if (!e) return -1;
  int n = d->type == FIELD_NAMED ? d->nchoices : INT32_MAX;
  for (int i = 0; i < n && d->choices[i]; i++)
    if (d->choices[i][0]) cJSON_AddItemToArray(e, cJSON_CreateString(d->choices[i]));
  if (nullable) cJSON_AddItemToArray(e, cJSON_CreateNull());
  return 0;
}

/* The schema of one row; NULL on out of memory. */
static cJSON *row_schema(const struct field_def *d) {
  cJSON *p = cJSON_CreateObject();
  int nullable = (d->flags & FIELD_NULLABLE) != 0, rc = 0;
  if (!p) return NULL;
  switch (d->type) {
  case FIELD_INT:
    rc = add_type(p, "integer", nullable);
    add_bounds(p, d);
    break;
  case FIELD_DOUBLE:
    rc = add_type(p, "number", nullable);
    add_bounds(p, d);
    break;
  case FIELD_BOOL:
    rc = add_type(p, "boolean", 0);
    break;
  case FIELD_STR:
    rc = add_type(p, "string", nullable);
    if (d->min > 0) cJSON_AddNumberToObject(p, "minLength", (double)d->min);
    /* the API counts bytes of UTF-8 (the member's size, its NUL aside), a schema characters:
       never fewer */
    if (d->size > 1) cJSON_AddNumberToObject(p, "maxLength", (double)(d->size - 1));
    break;
  case FIELD_TEXT:
    rc = add_type(p, "string", nullable);
    if (d->min > 0) cJSON_AddNumberToObject(p, "minLength", (double)d->min);
    cJSON_AddNumberToObject(p, "maxLength", (double)d->max);
    break;
  case FIELD_ENUM:
  case FIELD_NAMED:
    rc = add_type(p, "string", nullable) < 0 || add_choices(p, d, nullable) < 0 ? -1 : 0;
    break;
  case FIELD_INT_LIST: {
    cJSON *items;
    rc = add_type(p, "array", 0);
    cJSON_AddNumberToObject(p, "maxItems", (double)d->size);
    if (!(items = cJSON_AddObjectToObject(p, "items"))) rc = -1;
    if (items && add_type(items, "integer", 0) == 0) add_bounds(items, d);
    break;
  }
  case FIELD_JSON:
    break; /* not reached: the caller leaves them to the document */
  }
  if (rc < 0) {
    cJSON_Delete(p);
    return NULL;
  }
  return p;
}

/* A row's nested object (NULL: the record's top level) is the one a schema describes. */
static int same_object(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

static int in_list(const cJSON *arr, const char *s) {
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) if (cJSON_IsString(it) && strcmp(it->valuestring, s) == 0) return 1;
  return 0;
}

/* Rewrite one schema's properties and required from the rows in object (NULL: the top level) that
   take part in form (0: every row, the published config's encoder writes each). */
static int fill_schema(cJSON *schema, const struct field_def *rows, const char *object,
                       unsigned form, enum doc_required required) {
  cJSON *old = cJSON_DetachItemFromObjectCaseSensitive(schema, "properties");
  cJSON *old_req = cJSON_DetachItemFromObjectCaseSensitive(schema, "required");
  cJSON *props = cJSON_AddObjectToObject(schema, "properties");
  cJSON *req = cJSON_AddArrayToObject(schema, "required");
  int rc = props && req ? 0 : -1;
  for (const struct field_def *d = rows; rc == 0 && d->name; d++) {
    if (!same_object(d->object, object) || d->type == FIELD_JSON || (form && !(d->forms & form)))
      continue;
    cJSON *p = row_schema(d);
    cJSON *was = old ? cJSON_DetachItemFromObjectCaseSensitive(old, d->name) : NULL;
    if (!p) rc = -1;
    for (size_t k = 0; p && was && k < sizeof kept_keys / sizeof kept_keys[0]; k++) {
      cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(was, kept_keys[k]);
      if (v) cJSON_AddItemToObject(p, kept_keys[k], v);
    }
    cJSON_Delete(was);
    /* who may change it: docs/design.md#tokens-and-roles (a route's own x-cdnca-auth is the
       role a change of the rest needs) */
    if (p && (form & FORM_IN) && (d->flags & FIELD_OPERATOR) &&
        !cJSON_AddStringToObject(p, "x-cdnca-auth", "operator"))
      rc = -1;
    if (p) cJSON_AddItemToObject(props, d->name, p);
    if (required == REQ_ALL || (required == REQ_MARKED && (d->flags & FIELD_REQUIRED)) ||
        in_list(old_req, d->name))
      cJSON_AddItemToArray(req, cJSON_CreateString(d->name));
  }
  /* the keys that are no row, as written */
  while (rc == 0 && old && old->child) {
    cJSON *p = cJSON_DetachItemViaPointer(old, old->child);
    if (in_list(old_req, p->string)) cJSON_AddItemToArray(req, cJSON_CreateString(p->string));
    cJSON_AddItemToArray(props, p); /* keeps its key */
  }
  cJSON_Delete(old);
  cJSON_Delete(old_req);
  return rc;
}

/* "TABLE FORM" into its two words. 0, or -1. */
static int split_mark(const char *m, char *table, size_t tn, char *form, size_t fn) {
  const char *sp = strchr(m, ' ');
  size_t a = sp ? (size_t)(sp - m) : 0, b = sp ? strlen(sp + 1) : 0;
  if (!sp || a == 0 || a >= tn || b == 0 || b >= fn || strchr(sp + 1, ' ')) return -1;
  memcpy(table, m, a);
  table[a] = '\0';
  memcpy(form, sp + 1, b + 1);
  return 0;
}

int api_doc_fill(cJSON *doc, char *err, size_t errlen) {
  cJSON *schemas = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(doc, "components"), "schemas");
  cJSON *s;
  cJSON_ArrayForEach(s, schemas) {
    const cJSON *mark = cJSON_GetObjectItemCaseSensitive(s, "x-cdnca-fields");
    char table[64], form[16], *object;
    const struct field_def *rows = NULL;
    int fi = -1, has_object = 0;
    if (!mark) continue;
    if (!cJSON_IsString(mark) ||
        split_mark(mark->valuestring, table, sizeof table, form, sizeof form) < 0) {
      snprintf(err, errlen, "schema %s: x-cdnca-fields must be \"TABLE FORM\"", s->string);
      return -1;
    }
    if ((object = strchr(table, '.'))) *object++ = '\0';
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
      if (strcmp(tables[i].name, table) == 0) rows = tables[i].rows;
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
      if (strcmp(forms[i].name, form) == 0) fi = (int)i;
    for (const struct field_def *d = rows; object && rows && d->name && !has_object; d++)
      has_object = same_object(d->object, object);
    if (!rows || fi < 0 || (object && !has_object)) {
      snprintf(err, errlen, "schema %s: no field table \"%s\" or form \"%s\"", s->string, table,
               form);
      return -1;
    }
    if (fill_schema(s, rows, object, forms[fi].form, forms[fi].required) < 0) {
      snprintf(err, errlen, "schema %s: out of memory", s->string);
      return -1;
    }
  }
  return 0;
}
