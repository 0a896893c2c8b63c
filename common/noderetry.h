/* noderetry — the node_retry fields as one table (name, type, default, bounds): the API's
 * validation, the node's config parser and both JSON writers read it. */
#ifndef CDNCA_NODERETRY_H
#define CDNCA_NODERETRY_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "fields.h"
#include "skip.h"

enum noderetry_type {
  NR_INT,      /* an integer in [min, max] (int field) */
  NR_I64,      /* an integer in [min, max] (int64_t field) */
  NR_BOOL,     /* true or false (int field) */
  NR_RATIO,    /* null (off, stored as 0) or a number in (0, 1] (double field) */
  NR_STATUSES, /* an array of at most SKIP_MAX_STATUS integers in [min, max] */
};

/* One field of node_retry: where it lives in struct skip_params and what it accepts. */
struct noderetry_field {
  const char *name;
  enum noderetry_type type;
  size_t off; /* offset in struct skip_params */
  double def; /* default (NR_STATUSES: see noderetry_default_statuses) */
  int64_t min, max;
};

/* The table, in the order the JSON writers use; ends with a row whose name is NULL. */
extern const struct noderetry_field noderetry_fields[];

/* The default retry_on_status list, and its length. */
extern const int noderetry_default_statuses[];
extern const int noderetry_n_default_statuses;

/* Fill p with every field's default (docs/design.md#node-skip-and-retry). */
void noderetry_defaults(struct skip_params *p);

/* Apply the node_retry object obj onto *p: fields present replace p's values, absent ones keep
 * them. prefix is the object's field path ("node_retry", "sites[0].node_retry"). strict: an
 * unknown key is an error (the API); otherwise unknown keys are ignored (a node reading a newer
 * controld's config). 0, or -1 with *err filled (400 unknown_field, 422 for a bad value; the
 * field's full path, e.g. "node_retry.retry_on_status[1]") and *p unchanged. */
int noderetry_apply(const cJSON *obj, struct skip_params *p, int strict, const char *prefix,
                    struct field_err *err);

/* The node_retry object with every field of p; caller frees. NULL on OOM. */
cJSON *noderetry_json(const struct skip_params *p);

#endif
