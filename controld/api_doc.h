/* api_doc — the OpenAPI document's record schemas written from the records' field tables, so the
   document states the types, bounds and choices the API validates and answers with, and a new
   field of a record needs no edit of controld/openapi.json (docs/architecture.md, "The
   OpenAPI document").

   A schema of controld/openapi.json's components that carries "x-cdnca-fields": "TABLE FORM"
   gets one property per row of TABLE at the record's top level that takes part in FORM
   (FORM_OUT: "out"; FORM_IN: "create" and "in"; every row: "wire"), in the table's order; the
   row gives the type, the bounds and the choices. "TABLE.OBJECT FORM" takes the rows of the
   record's nested object OBJECT instead (.object), e.g. "site.health_check out". FIELD_JSON rows
   (their keys are a codec's) are left to the document.
   What the hand-written property says for people ("description", "format", "examples",
   "title", "deprecated") is kept; properties that are no row (keys a record's JSON adds beside
   its rows) stay as written, after the rows. "required" keeps what the document lists and adds:
   for "out" and "wire" every row (the JSON carries each key, null when empty), for "create" the
   rows marked FIELD_REQUIRED, for "in" (a change) none. */
#ifndef CDNCA_API_DOC_H
#define CDNCA_API_DOC_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Fill every marked schema of doc in place. 0, or -1 with err set (an unknown table or form, a
   marker that is not a string, out of memory). */
int api_doc_fill(cJSON *doc, char *err, size_t errlen);

#endif
