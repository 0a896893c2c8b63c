/* api_doc — the OpenAPI document's record schemas written from the records' field tables, so the
   document states the types, bounds and choices the API validates and answers with, and a new
   field of a record needs no edit of controld/openapi.json (docs/architecture.md, "The
   OpenAPI document").

   A schema of controld/openapi.json's components that carries "x-cdnca-fields": "TABLE FORM"
   gets one property per row of TABLE that takes part in FORM (FORM_IN: "in", FORM_OUT: "out",
   every row: "wire"), in the table's order; the row gives the type, the bounds and the choices.
   What the hand-written property says for people ("description", "format", "examples", "title",
   "deprecated") is kept; properties that are no row (keys a record's JSON adds beside its rows)
   stay as written, after the rows. "required" lists, besides the hand-written keys that are no
   row: for "out" and "wire" every row (the JSON carries each key, null when empty), for "in"
   none. Rows in a nested object (.object) and FIELD_JSON rows
   (their keys are a codec's) are left to the document. */
#ifndef CDNCA_API_DOC_H
#define CDNCA_API_DOC_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Fill every marked schema of doc in place. 0, or -1 with err set (an unknown table or form, a
   marker that is not a string, out of memory). */
int api_doc_fill(cJSON *doc, char *err, size_t errlen);

#endif
