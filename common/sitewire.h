/* sitewire — the site config controld publishes to nodes (docs/design.md#site-config-wire-format):
   its keys, types and limits described once, with the one encoder (controld's answer and the
   node's config.json are written with it) and the one decoder (the node reads both with it). A
   new published origin field is a row of sitewire_origin_fields and its member of struct
   sitewire_origin. */
#ifndef CDNCA_SITEWIRE_H
#define CDNCA_SITEWIRE_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "fields.h"
#include "ramp.h"
#include "skip.h"

/* Largest id, seq or version: cJSON prints numbers with 15 significant digits, so larger values
   would not survive the round trip through the node's disk cache. */
#define SITEWIRE_ID_MAX INT64_C(999999999999999)
#define SITEWIRE_MAX_LEVEL 16
#define SITEWIRE_MAX_ORIGINS 64   /* per site (the controld limit) */
#define SITEWIRE_MAX_HOSTNAMES 32 /* per site */
#define SITEWIRE_NAME_MAX 128     /* bytes of a site's name */
#define SITEWIRE_HOSTNAME_MAX 253 /* bytes of a hostname */
#define SITEWIRE_DESCRIPTION_MAX 200

/* A published origin: one member per row of sitewire_origin_fields. */
struct sitewire_origin {
  int64_t id;
  int level, port, weight;
  char address[256];     /* an IP literal or a lower-case hostname */
  char scheme[8];        /* "http" | "https" */
  char host_header[256]; /* "" = none (null on the wire): the node sends the visitor's Host */
  char description[4 * SITEWIRE_DESCRIPTION_MAX + 1]; /* free text, 0 to 200 characters */
};

/* An origin's keys, in published order: name, type, bounds, required or not, and the check the
   decoder applies (the values controld publishes are already in this form). The encoder writes
   every row; the decoder reads every row and ignores keys that are no row (a newer controld may
   send more). */
extern const struct field_def sitewire_origin_fields[];

/* A published site. */
struct sitewire_site {
  int64_t id;
  char name[SITEWIRE_NAME_MAX + 1];
  int n_hostnames;
  char hostnames[SITEWIRE_MAX_HOSTNAMES][SITEWIRE_HOSTNAME_MAX + 1]; /* lower case */
  int64_t config_version;
  int current_level;
  int n_origins;
  struct sitewire_origin origins[SITEWIRE_MAX_ORIGINS]; /* the enabled origins, ids unique */
  struct skip_params retry;                             /* node_retry (common/noderetry) */
  struct ramp_run ramp; /* a running failback ramp (common/ramp); from_level 0 = none */
};

/* A site's keys are, in published order: the rows of sitewire_site_fields (id, name),
   "hostnames" (1 to 32 hostnames), the rows of sitewire_site_level_fields (config_version,
   current_level), "origins" (0 to 64 objects of sitewire_origin_fields, ids unique) and
   "node_retry" (the table of common/noderetry; null or absent: the defaults) and "ramp" (a
   running failback ramp, common/ramp; null or absent: none). */
extern const struct field_def sitewire_site_fields[];
extern const struct field_def sitewire_site_level_fields[];

/* A publication's own values: {"seq", "full", "deny_targets", "sites": [site...], "deleted":
   [site ids]}. deny_targets is controld's --deny-targets (comma-separated CIDRs; absent from an
   older controld: ""). */
struct sitewire_doc {
  int64_t seq;
  int full;
  char deny_targets[1024];
};
extern const struct field_def sitewire_doc_fields[]; /* seq, full, deny_targets */

/* ---- encoding ---- */

/* The JSON object of a site; NULL on out of memory. */
cJSON *sitewire_site_json(const struct sitewire_site *s);

/* The JSON object of one origin (every row of sitewire_origin_fields); NULL on out of memory. */
cJSON *sitewire_origin_json(const struct sitewire_origin *o);

/* A publication with no site yet and the n deleted site ids; add each site object with
   sitewire_doc_add_site. NULL on out of memory. */
cJSON *sitewire_doc_json(const struct sitewire_doc *d, const int64_t *deleted, int n_deleted);

/* Append site (owned from then on, freed on failure) to doc's "sites". 0, or -1 on out of
   memory. */
int sitewire_doc_add_site(cJSON *doc, cJSON *site);

/* ---- decoding ---- */

/* Every decoder fills *err with the path of the offending key ("sites[0].origins[1].port") and a
   message on -1. */

/* Read a site object into *s (every member written); path is its own ("sites[0]"). */
int sitewire_site_read(const cJSON *j, const char *path, struct sitewire_site *s,
                       struct field_err *err);

/* Read one origin object into *o (every member written; absent optional keys take their
   default). */
int sitewire_origin_read(const cJSON *j, const char *path, struct sitewire_origin *o,
                         struct field_err *err);

/* Read a publication's seq and full, and hand back its "sites" array: each site is read with
   sitewire_site_read (path "sites[i]"). */
int sitewire_doc_read(const cJSON *root, struct sitewire_doc *d, const cJSON **sites,
                      struct field_err *err);

/* Hand back a publication's "deleted" array, NULL when absent or null: each entry is read with
   sitewire_deleted_read. */
int sitewire_doc_deleted(const cJSON *root, const cJSON **deleted, struct field_err *err);

/* Read entry idx of the "deleted" array: a site id. */
int sitewire_deleted_read(const cJSON *item, int idx, int64_t *id, struct field_err *err);

#endif
