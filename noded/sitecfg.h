/* sitecfg — the node's model of the published site config: strict parser, immutable refcounted
 * snapshots built by applying full sets or deltas, Host lookup, and the config.json serializer. */
#ifndef CDNCA_SITECFG_H
#define CDNCA_SITECFG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "sitewire.h"
#include "skip.h"

#define SITECFG_MAX_ORIGINS SITEWIRE_MAX_ORIGINS
#define SITECFG_MAX_HOSTNAMES SITEWIRE_MAX_HOSTNAMES
#define SITECFG_MAX_LEVEL SITEWIRE_MAX_LEVEL

struct sitecfg_origin {
  int64_t id;
  int level;
  char *address; /* IP literal or hostname */
  int port;
  int https;         /* scheme: 0 = "http", 1 = "https" */
  char *host_header; /* NULL: send the visitor's Host */
  int weight;        /* 1..100 */
};

/* One site, immutable once built; shared by the snapshots that hold it (refcounted). */
struct sitecfg_site {
  int64_t id;
  char *name;
  int n_hostnames;
  char **hostnames; /* lower case, no trailing dot */
  int64_t config_version;
  int current_level;
  int n_origins;
  struct sitecfg_origin *origins; /* enabled origins only, in published order */
  struct skip_params retry;       /* node_retry */
  struct ramp_run ramp;           /* a running failback ramp; from_level 0 = none */
  atomic_int refs;
};

/* A parsed publication (GET /v1/node/config body). */
struct sitecfg_update {
  int64_t seq;
  int full;
  char deny_targets[1024]; /* controld's --deny-targets as published ("" when none) */
  int n_sites;
  struct sitecfg_site **sites;
  int n_deleted;
  int64_t *deleted;
};

struct sitecfg_host {
  const char *name; /* borrowed from the site */
  struct sitecfg_site *site;
};

/* An immutable snapshot; readers keep it alive with sitecfg_set_ref/unref while in use. */
struct sitecfg_set {
  int64_t seq;
  char deny_targets[1024]; /* controld's --deny-targets, from the latest publication applied */
  int n_sites;
  struct sitecfg_site **sites; /* sorted by id; each holds one ref */
  int n_hosts;
  struct sitecfg_host *hosts; /* sorted by name; a hostname claimed twice goes to the lower id */
  atomic_int refs;
};

/* Parse and validate a publication with common/sitewire's decoder. 0 and *out (free with
 * sitecfg_update_free), or -1 with "path: message" naming the offending field in err. Unknown keys
 * are ignored; known ones are strict. */
int sitecfg_parse(const char *json, size_t len, struct sitecfg_update **out, char *err,
                  size_t errlen);

/* Free an update (and its site references); sets *u to NULL. */
void sitecfg_update_free(struct sitecfg_update **u);

/* A NEW snapshot: cur (may be NULL) with u applied (full: exactly u's sites; delta: u's sites
 * replace or add by id, u's deleted ids are removed). Unchanged sites are shared, not copied.
 * Returns a snapshot with one reference (caller unrefs), or NULL on OOM. cur is not changed. */
struct sitecfg_set *sitecfg_apply(const struct sitecfg_set *cur, const struct sitecfg_update *u);

/* Parse a full JSON document and apply it onto an empty set (for config.json at start).
 * Returns a snapshot (caller unrefs) or NULL with a message in err. */
struct sitecfg_set *sitecfg_load(const char *json, size_t len, char *err, size_t errlen);

/* An empty snapshot with seq 0 (caller unrefs), or NULL on OOM. */
struct sitecfg_set *sitecfg_empty(void);

/* Take one more reference; returns s. Thread-safe. */
struct sitecfg_set *sitecfg_set_ref(struct sitecfg_set *s);

/* Drop one reference; the last one frees the snapshot. NULL is ignored. Thread-safe. */
void sitecfg_set_unref(struct sitecfg_set *s);

/* Site reference counting (a request may hold its site across a snapshot swap). */
struct sitecfg_site *sitecfg_site_ref(struct sitecfg_site *s);
void sitecfg_site_unref(struct sitecfg_site *s);

/* The site serving a Host header value (case-insensitive, ":port" and a trailing dot ignored),
 * or NULL. Borrowed: valid while the snapshot (or a site ref) is held. */
struct sitecfg_site *sitecfg_lookup(const struct sitecfg_set *s, const char *host, size_t len);

/* The site with this id, or NULL (borrowed). */
struct sitecfg_site *sitecfg_find(const struct sitecfg_set *s, int64_t site_id);

/* 1 when two origins have the same identity for skip state: (id, address, port, scheme). */
int sitecfg_origin_same(const struct sitecfg_origin *a, const struct sitecfg_origin *b);

/* Append the snapshot as a full publication {"seq","full":true,"sites",[...],"deleted":[]}
 * (the format sitecfg_parse reads) to out, written by common/sitewire's encoder; the origin keys
 * the node does not keep (description) take their defaults. 0 or -1. */
int sitecfg_serialize(const struct sitecfg_set *s, struct buf *out);

#endif
