/* export — the cdnca-export document: an installation's configuration as versioned JSON
   (format "cdnca-export", version 1) for moving it to another database (controld --export FILE,
   controld --import FILE). The document holds secrets: webhook secrets and token hashes. */
#ifndef CDNCA_EXPORT_H
#define CDNCA_EXPORT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "fields.h"
#include "store.h"
#include "store_export.h"
#include "targets.h"

#define EXPORT_FORMAT "cdnca-export"
#define EXPORT_VERSION 1

/* A refused document is a struct field_err (fields.h): 422 invalid_value, the JSON path of the
   offending value in field ("" = the document) and a message. */

/* The document for x, stamped with now (wall ms) and the version string. Caller cJSON_Delete's it;
   NULL on out of memory. */
cJSON *export_to_json(const struct store_export *x, int64_t now, const char *version);

/* Validate a whole document field by field (the API's rules for every site, origin, node, token
   and webhook, plus ids, names, hostnames and hashes unique across it) into *out. 0, or -1 with
   *err filled. The caller store_export_fini's *out either way. Pure. */
int export_from_json(const cJSON *doc, struct store_export *out, struct field_err *err);

/* The API's target rule on a read document: no origin address and no webhook URL host that t
   refuses (link-local, metadata, --deny-targets). 0, or -1 with *err naming the path. Pure. */
int export_check_targets(const struct store_export *x, const struct targets *t,
                         struct field_err *err);

/* controld --export: read one snapshot of st and write the document to path (mode 0600, written
   to a temporary file and renamed). 0, or -1 with msg saying why; on success msg counts what was
   written. */
int export_write_file(struct store *st, const char *path, const char *version, char *msg,
                      size_t msglen);

/* controld --import: read and validate the document at path (export_from_json, then
   export_check_targets with deny), then store it in one transaction into st, which must be
   empty (store_export_write). 0, or -1 with msg saying why (nothing was stored); on success msg
   counts what was stored. */
int export_read_file(struct store *st, const char *path, const struct targets *deny, char *msg,
                     size_t msglen);

#endif
