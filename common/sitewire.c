/* sitewire — the published site config: its tables, encoder and decoder (see sitewire.h). */
#include "sitewire.h"

#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hostname.h"
#include "json.h"
#include "noderetry.h"
#include "targets.h"

/* An origin's address: an IP literal, or a hostname already in lower case (controld lowercases
   it when it is set, so the wire carries no other form). */
static int wire_address(char *a) {
  unsigned char tmp[16];
  char low[256];
  size_t n = strlen(a);
  if (inet_pton(AF_INET, a, tmp) == 1 || inet_pton(AF_INET6, a, tmp) == 1) return 1;
  if (n == 0 || n >= sizeof low) return 0;
  memcpy(low, a, n + 1);
  hostname_lower(low);
  return strcmp(low, a) == 0 && hostname_valid(low);
}

/* A Host header to send: a hostname in any case, kept in lower case. */
static int wire_hostname(char *h) {
  hostname_lower(h);
  return hostname_valid(h);
}

static const char *const schemes[] = {"http", "https", NULL};

#define O(m)                                                                                       \
  .offset = offsetof(struct sitewire_origin, m), .size = sizeof(((struct sitewire_origin *)0)->m)
const struct field_def sitewire_origin_fields[] = {
    {.name = "id",
     .type = FIELD_INT,
     .flags = FIELD_REQUIRED,
     O(id),
     .min = 1,
     .max = SITEWIRE_ID_MAX},
    {.name = "level",
     .type = FIELD_INT,
     .flags = FIELD_REQUIRED,
     O(level),
     .min = 1,
     .max = SITEWIRE_MAX_LEVEL,
     .def = 1},
    {.name = "address",
     .type = FIELD_STR,
     .flags = FIELD_REQUIRED,
     O(address),
     .min = 1,
     .check = wire_address,
     .what = "an IP address or a lower-case hostname"},
    {.name = "port", .type = FIELD_INT, .flags = FIELD_REQUIRED, O(port), .min = 1, .max = 65535},
    {.name = "scheme",
     .type = FIELD_ENUM,
     .flags = FIELD_REQUIRED,
     O(scheme),
     .choices = schemes,
     .what = "\"http\" or \"https\""},
    {.name = "host_header",
     .type = FIELD_STR,
     .flags = FIELD_NULLABLE,
     O(host_header),
     .min = 1,
     .check = wire_hostname,
     .what = "a valid hostname or null"},
    {.name = "weight", .type = FIELD_INT, O(weight), .min = 1, .max = 100, .def = 1},
    /* for people: the node never refuses a config for it, a bad value is left out */
    {.name = "description",
     .type = FIELD_TEXT,
     .flags = FIELD_LENIENT,
     O(description),
     .min = 0,
     .max = SITEWIRE_DESCRIPTION_MAX},
    {.name = NULL},
};
#undef O

#define S(m)                                                                                       \
  .offset = offsetof(struct sitewire_site, m), .size = sizeof(((struct sitewire_site *)0)->m)
const struct field_def sitewire_site_fields[] = {
    {.name = "id",
     .type = FIELD_INT,
     .flags = FIELD_REQUIRED,
     S(id),
     .min = 1,
     .max = SITEWIRE_ID_MAX},
    {.name = "name", .type = FIELD_STR, .flags = FIELD_REQUIRED, S(name), .min = 1},
    {.name = NULL},
};

const struct field_def sitewire_site_level_fields[] = {
    {.name = "config_version",
     .type = FIELD_INT,
     .flags = FIELD_REQUIRED,
     S(config_version),
     .min = 0,
     .max = SITEWIRE_ID_MAX},
    {.name = "current_level",
     .type = FIELD_INT,
     .flags = FIELD_REQUIRED,
     S(current_level),
     .min = 1,
     .max = SITEWIRE_MAX_LEVEL,
     .def = 1},
    {.name = NULL},
};
#undef S

/* controld's --deny-targets: a list targets_init reads. */
static int valid_deny_targets(char *v) {
  struct targets t;
  char err[128];
  return targets_init(&t, v, err, sizeof err) == 0;
}

#define D(m)                                                                                       \
  .offset = offsetof(struct sitewire_doc, m), .size = sizeof(((struct sitewire_doc *)0)->m)
const struct field_def sitewire_doc_fields[] = {
    {.name = "seq",
     .type = FIELD_INT,
     .flags = FIELD_REQUIRED,
     D(seq),
     .min = 0,
     .max = SITEWIRE_ID_MAX},
    {.name = "full", .type = FIELD_BOOL, .flags = FIELD_REQUIRED, D(full)},
    {.name = "deny_targets", .type = FIELD_STR, D(deny_targets), .check = valid_deny_targets},
    {.name = NULL},
};
#undef D

/* ---- encoding ---- */

/* Append v to arr; v is freed when it cannot be. 0 or -1. */
static int append(cJSON *arr, cJSON *v) {
  if (!v || !cJSON_AddItemToArray(arr, v)) {
    cJSON_Delete(v);
    return -1;
  }
  return 0;
}

cJSON *sitewire_origin_json(const struct sitewire_origin *o) {
  cJSON *j = cJSON_CreateObject();
  if (j && fields_json_add(j, sitewire_origin_fields, 0, o) < 0) {
    cJSON_Delete(j);
    return NULL;
  }
  return j;
}

cJSON *sitewire_site_json(const struct sitewire_site *s) {
  cJSON *j = cJSON_CreateObject(), *a, *nr;
  if (!j || fields_json_add(j, sitewire_site_fields, 0, s) < 0) goto fail;
  if (!(a = cJSON_AddArrayToObject(j, "hostnames"))) goto fail;
  for (int i = 0; i < s->n_hostnames; i++)
    if (append(a, cJSON_CreateString(s->hostnames[i])) < 0) goto fail;
  if (fields_json_add(j, sitewire_site_level_fields, 0, s) < 0) goto fail;
  if (!(a = cJSON_AddArrayToObject(j, "origins"))) goto fail;
  for (int i = 0; i < s->n_origins; i++)
    if (append(a, sitewire_origin_json(&s->origins[i])) < 0) goto fail;
  nr = noderetry_json(&s->retry);
  if (!nr || !cJSON_AddItemToObject(j, "node_retry", nr)) {
    cJSON_Delete(nr);
    goto fail;
  }
  nr = s->ramp.from_level ? ramp_run_json(&s->ramp) : cJSON_CreateNull();
  if (!nr || !cJSON_AddItemToObject(j, "ramp", nr)) {
    cJSON_Delete(nr);
    goto fail;
  }
  return j;
fail:
  cJSON_Delete(j);
  return NULL;
}

cJSON *sitewire_doc_json(const struct sitewire_doc *d, const int64_t *deleted, int n_deleted) {
  cJSON *j = cJSON_CreateObject(), *a;
  if (!j || fields_json_add(j, sitewire_doc_fields, 0, d) < 0) goto fail;
  if (!cJSON_AddArrayToObject(j, "sites") || !(a = cJSON_AddArrayToObject(j, "deleted"))) goto fail;
  for (int i = 0; i < n_deleted; i++)
    if (append(a, cJSON_CreateNumber((double)deleted[i])) < 0) goto fail;
  return j;
fail:
  cJSON_Delete(j);
  return NULL;
}

int sitewire_doc_add_site(cJSON *doc, cJSON *site) {
  cJSON *sites = cJSON_GetObjectItemCaseSensitive(doc, "sites");
  if (!sites) {
    cJSON_Delete(site);
    return -1;
  }
  return append(sites, site);
}

/* ---- decoding ---- */

/* The rows of defs from object j into target: required rows must be there, keys that are no row
   are left to the other readers (or ignored). */
static int read_rows(const cJSON *j, const struct field_def *defs, const char *path, void *target,
                     struct field_err *err) {
  return fields_apply_form(j, defs, 0, NULL, path, FIELDS_CREATE | FIELDS_ALLOW_UNKNOWN, target,
                           err);
}

int sitewire_origin_read(const cJSON *j, const char *path, struct sitewire_origin *o,
                         struct field_err *err) {
  memset(o, 0, sizeof *o);
  fields_defaults(sitewire_origin_fields, o);
  return read_rows(j, sitewire_origin_fields, path, o, err);
}

static int read_hostnames(const cJSON *j, const char *path, struct sitewire_site *s,
                          struct field_err *err) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "hostnames"), *it;
  int n;
  s->n_hostnames = 0;
  if (!arr) return fields_fail(err, 422, "required", path, "hostnames", "hostnames is required");
  n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
  if (n < 1 || n > SITEWIRE_MAX_HOSTNAMES)
    return fields_fail(err, 422, n < 0 ? "invalid_type" : "out_of_range", path, "hostnames",
                       "hostnames must be an array of 1 to %d hostnames", SITEWIRE_MAX_HOSTNAMES);
  cJSON_ArrayForEach(it, arr) {
    char key[32], *h = s->hostnames[s->n_hostnames];
    size_t len = cJSON_IsString(it) && it->valuestring ? strlen(it->valuestring) : SIZE_MAX;
    snprintf(key, sizeof key, "hostnames[%d]", s->n_hostnames);
    if (len > SITEWIRE_HOSTNAME_MAX)
      return fields_fail(err, 422, "invalid_type", path, key, "%s must be a hostname", key);
    memcpy(h, it->valuestring, len + 1);
    hostname_lower(h);
    if (!hostname_valid(h))
      return fields_fail(err, 422, "invalid_value", path, key, "'%s' is not a valid hostname",
                         it->valuestring);
    s->n_hostnames++;
  }
  return 0;
}

static int read_origins(const cJSON *j, const char *path, struct sitewire_site *s,
                        struct field_err *err) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "origins"), *it;
  int n;
  s->n_origins = 0;
  if (!arr) return fields_fail(err, 422, "required", path, "origins", "origins is required");
  n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
  if (n < 0 || n > SITEWIRE_MAX_ORIGINS)
    return fields_fail(err, 422, n < 0 ? "invalid_type" : "out_of_range", path, "origins",
                       "origins must be an array of at most %d origins", SITEWIRE_MAX_ORIGINS);
  cJSON_ArrayForEach(it, arr) {
    char opath[128];
    int k = s->n_origins;
    struct sitewire_origin *o = &s->origins[k];
    snprintf(opath, sizeof opath, "%s%sorigins[%d]", path, *path ? "." : "", k);
    if (sitewire_origin_read(it, opath, o, err) < 0) return -1;
    for (int m = 0; m < k; m++)
      if (s->origins[m].id == o->id)
        return fields_fail(err, 422, "invalid_value", opath, "id", "origin id %lld is listed twice",
                           (long long)o->id);
    s->n_origins++;
  }
  return 0;
}

/* node_retry through its own table; unknown keys are ignored (a newer controld may add some). */
static int read_retry(const cJSON *j, const char *path, struct skip_params *p,
                      struct field_err *err) {
  const cJSON *nr = cJSON_GetObjectItemCaseSensitive(j, "node_retry");
  char pre[96];
  noderetry_defaults(p);
  if (!nr || cJSON_IsNull(nr)) return 0;
  snprintf(pre, sizeof pre, "%s%snode_retry", path, *path ? "." : "");
  return noderetry_apply(nr, p, 0, pre, err);
}

int sitewire_site_read(const cJSON *j, const char *path, struct sitewire_site *s,
                       struct field_err *err) {
  if (read_rows(j, sitewire_site_fields, path, s, err) < 0 || read_hostnames(j, path, s, err) < 0 ||
      read_rows(j, sitewire_site_level_fields, path, s, err) < 0 ||
      read_origins(j, path, s, err) < 0)
    return -1;
  if (read_retry(j, path, &s->retry, err) < 0) return -1;
  {
    char pre[96];
    snprintf(pre, sizeof pre, "%s%sramp", path, *path ? "." : "");
    return ramp_run_read(cJSON_GetObjectItemCaseSensitive(j, "ramp"), pre, &s->ramp, err);
  }
}

int sitewire_doc_read(const cJSON *root, struct sitewire_doc *d, const cJSON **sites,
                      struct field_err *err) {
  const cJSON *arr;
  memset(d, 0, sizeof *d);
  *sites = NULL;
  if (read_rows(root, sitewire_doc_fields, "", d, err) < 0) return -1;
  arr = cJSON_GetObjectItemCaseSensitive(root, "sites");
  if (!arr) return fields_fail(err, 422, "required", "", "sites", "sites is required");
  if (!cJSON_IsArray(arr))
    return fields_fail(err, 422, "invalid_type", "", "sites", "sites must be an array");
  *sites = arr;
  return 0;
}

int sitewire_doc_deleted(const cJSON *root, const cJSON **deleted, struct field_err *err) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "deleted");
  *deleted = NULL;
  if (!arr || cJSON_IsNull(arr)) return 0;
  if (!cJSON_IsArray(arr))
    return fields_fail(err, 422, "invalid_type", "", "deleted",
                       "deleted must be an array of site ids");
  *deleted = arr;
  return 0;
}

int sitewire_deleted_read(const cJSON *item, int idx, int64_t *id, struct field_err *err) {
  char key[32];
  if (!json_is_int(item, 1, SITEWIRE_ID_MAX)) {
    snprintf(key, sizeof key, "deleted[%d]", idx);
    return fields_fail(err, 422, "invalid_value", "", key, "%s must be a site id", key);
  }
  *id = (int64_t)item->valuedouble;
  return 0;
}
