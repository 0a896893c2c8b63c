/* sitecfg — published site config: parser, snapshots, Host lookup, serializer. */
#include "sitecfg.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostname.h"
#include "json.h"
#include "log.h"
#include "noderetry.h"

/* Largest id, seq or version accepted: cJSON prints numbers with 15 significant digits, so larger
   values would not survive the round trip through the disk cache. */
#define SITECFG_ID_MAX INT64_C(999999999999999)

static int failf(char *err, size_t errlen, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int failf(char *err, size_t errlen, const char *field, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (err && errlen) snprintf(err, errlen, "%s: %s", field, msg);
  return -1;
}

static char *dupstr(const char *s) {
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

static int valid_address(const char *a) {
  unsigned char tmp[16];
  char low[256];
  size_t n = strlen(a);
  if (inet_pton(AF_INET, a, tmp) == 1 || inet_pton(AF_INET6, a, tmp) == 1) return 1;
  if (n == 0 || n >= sizeof low) return 0;
  memcpy(low, a, n + 1);
  hostname_lower(low);
  return strcmp(low, a) == 0 && hostname_valid(low);
}

static void site_free(struct sitecfg_site *s) {
  if (!s) return;
  free(s->name);
  for (int i = 0; i < s->n_hostnames; i++)
    free(s->hostnames[i]);
  free(s->hostnames);
  for (int i = 0; i < s->n_origins; i++) {
    free(s->origins[i].address);
    free(s->origins[i].host_header);
  }
  free(s->origins);
  free(s);
}

struct sitecfg_site *sitecfg_site_ref(struct sitecfg_site *s) {
  if (s) atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
  return s;
}

void sitecfg_site_unref(struct sitecfg_site *s) {
  if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) site_free(s);
}

/* Required integer field: 0 or -1 with err. */
static int req_int(const cJSON *o, const char *key, int64_t min, int64_t max, int64_t *out,
                   const char *prefix, char *err, size_t errlen) {
  char f[160];
  int r = json_int(o, key, min, max, out);
  snprintf(f, sizeof f, "%s%s", prefix, key);
  if (r == 1) return failf(err, errlen, f, "is required");
  if (r < 0)
    return failf(err, errlen, f, "must be an integer from %lld to %lld", (long long)min,
                 (long long)max);
  return 0;
}

/* Optional integer field: keeps *out when absent. */
static int opt_int(const cJSON *o, const char *key, int64_t min, int64_t max, int64_t *out,
                   const char *prefix, char *err, size_t errlen) {
  char f[160];
  int r = json_int(o, key, min, max, out);
  snprintf(f, sizeof f, "%s%s", prefix, key);
  if (r < 0)
    return failf(err, errlen, f, "must be an integer from %lld to %lld", (long long)min,
                 (long long)max);
  return 0;
}

/* node_retry through the shared table; unknown keys are ignored (a newer controld may add some). */
static int parse_retry(const cJSON *nr, struct skip_params *p, const char *prefix, char *err,
                       size_t errlen) {
  char pre[96];
  struct noderetry_err e;
  noderetry_defaults(p);
  if (!nr || cJSON_IsNull(nr)) return 0;
  snprintf(pre, sizeof pre, "%snode_retry", prefix);
  if (noderetry_apply(nr, p, 0, pre, &e) < 0) return failf(err, errlen, e.field, "%s", e.message);
  return 0;
}

static int parse_origin(const cJSON *o, struct sitecfg_origin *out, const char *prefix, char *err,
                        size_t errlen) {
  char f[160];
  int64_t v;
  const char *s = NULL;
  int r;
  if (!cJSON_IsObject(o)) return failf(err, errlen, prefix, "an origin must be an object");
  if (req_int(o, "id", 1, SITECFG_ID_MAX, &out->id, prefix, err, errlen) < 0) return -1;
  if (req_int(o, "level", 1, SITECFG_MAX_LEVEL, &v, prefix, err, errlen) < 0) return -1;
  out->level = (int)v;
  snprintf(f, sizeof f, "%saddress", prefix);
  r = json_str(o, "address", 255, &s);
  if (r == 1) return failf(err, errlen, f, "is required");
  if (r < 0 || !valid_address(s))
    return failf(err, errlen, f, "must be an IP address or a lower-case hostname");
  if (!(out->address = dupstr(s))) return failf(err, errlen, f, "out of memory");
  if (req_int(o, "port", 1, 65535, &v, prefix, err, errlen) < 0) return -1;
  out->port = (int)v;
  snprintf(f, sizeof f, "%sscheme", prefix);
  r = json_str(o, "scheme", 8, &s);
  if (r == 1) return failf(err, errlen, f, "is required");
  if (r < 0 || (strcmp(s, "http") != 0 && strcmp(s, "https") != 0))
    return failf(err, errlen, f, "must be \"http\" or \"https\"");
  out->https = strcmp(s, "https") == 0;
  snprintf(f, sizeof f, "%shost_header", prefix);
  r = json_str(o, "host_header", 253, &s);
  if (r < 0) return failf(err, errlen, f, "must be a hostname or null");
  if (r == 0) {
    if (!(out->host_header = dupstr(s))) return failf(err, errlen, f, "out of memory");
    hostname_lower(out->host_header);
    if (!hostname_valid(out->host_header))
      return failf(err, errlen, f, "must be a valid hostname or null");
  }
  v = 1;
  if (opt_int(o, "weight", 1, 100, &v, prefix, err, errlen) < 0) return -1;
  out->weight = (int)v;
  return 0;
}

static int parse_site(const cJSON *j, struct sitecfg_site **out, int idx, char *err,
                      size_t errlen) {
  char pre[32], f[160];
  struct sitecfg_site *s;
  const cJSON *arr, *it;
  const char *str = NULL;
  int64_t v;
  int r, n, rc = -1;
  snprintf(pre, sizeof pre, "sites[%d].", idx);
  if (!cJSON_IsObject(j)) {
    snprintf(f, sizeof f, "sites[%d]", idx);
    return failf(err, errlen, f, "a site must be an object");
  }
  if (!(s = calloc(1, sizeof *s))) return failf(err, errlen, pre, "out of memory");
  atomic_init(&s->refs, 1);
  if (req_int(j, "id", 1, SITECFG_ID_MAX, &s->id, pre, err, errlen) < 0) goto out;
  snprintf(f, sizeof f, "%sname", pre);
  r = json_str(j, "name", 128, &str);
  if (r == 1) {
    failf(err, errlen, f, "is required");
    goto out;
  }
  if (r < 0 || !str[0]) {
    failf(err, errlen, f, "must be a non-empty string of at most 128 bytes");
    goto out;
  }
  if (!(s->name = dupstr(str))) goto out;
  snprintf(f, sizeof f, "%shostnames", pre);
  arr = cJSON_GetObjectItemCaseSensitive(j, "hostnames");
  if (!arr) {
    failf(err, errlen, f, "is required");
    goto out;
  }
  n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
  if (n < 1 || n > SITECFG_MAX_HOSTNAMES) {
    failf(err, errlen, f, "must be an array of 1 to %d hostnames", SITECFG_MAX_HOSTNAMES);
    goto out;
  }
  if (!(s->hostnames = calloc((size_t)n, sizeof *s->hostnames))) goto out;
  cJSON_ArrayForEach(it, arr) {
    char *h;
    snprintf(f, sizeof f, "%shostnames[%d]", pre, s->n_hostnames);
    if (!cJSON_IsString(it) || strlen(it->valuestring) > 253) {
      failf(err, errlen, f, "must be a hostname");
      goto out;
    }
    if (!(h = dupstr(it->valuestring))) goto out;
    s->hostnames[s->n_hostnames++] = h;
    hostname_lower(h);
    if (!hostname_valid(h)) {
      failf(err, errlen, f, "'%s' is not a valid hostname", it->valuestring);
      goto out;
    }
  }
  if (req_int(j, "config_version", 0, SITECFG_ID_MAX, &s->config_version, pre, err, errlen) < 0)
    goto out;
  if (req_int(j, "current_level", 1, SITECFG_MAX_LEVEL, &v, pre, err, errlen) < 0) goto out;
  s->current_level = (int)v;
  snprintf(f, sizeof f, "%sorigins", pre);
  arr = cJSON_GetObjectItemCaseSensitive(j, "origins");
  if (!arr) {
    failf(err, errlen, f, "is required");
    goto out;
  }
  n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
  if (n < 0 || n > SITECFG_MAX_ORIGINS) {
    failf(err, errlen, f, "must be an array of at most %d origins", SITECFG_MAX_ORIGINS);
    goto out;
  }
  if (n > 0 && !(s->origins = calloc((size_t)n, sizeof *s->origins))) goto out;
  cJSON_ArrayForEach(it, arr) {
    char opre[64];
    int k = s->n_origins;
    snprintf(opre, sizeof opre, "%sorigins[%d].", pre, k);
    s->n_origins++;
    if (parse_origin(it, &s->origins[k], opre, err, errlen) < 0) goto out;
    for (int m = 0; m < k; m++)
      if (s->origins[m].id == s->origins[k].id) {
        snprintf(f, sizeof f, "%sid", opre);
        failf(err, errlen, f, "origin id %lld is listed twice", (long long)s->origins[k].id);
        goto out;
      }
  }
  if (parse_retry(cJSON_GetObjectItemCaseSensitive(j, "node_retry"), &s->retry, pre, err, errlen) <
      0)
    goto out;
  *out = s;
  s = NULL;
  rc = 0;
out:
  if (rc < 0 && err && errlen && !err[0]) failf(err, errlen, pre, "out of memory");
  site_free(s);
  return rc;
}

void sitecfg_update_free(struct sitecfg_update **up) {
  struct sitecfg_update *u = up ? *up : NULL;
  if (!u) return;
  for (int i = 0; i < u->n_sites; i++)
    sitecfg_site_unref(u->sites[i]);
  free(u->sites);
  free(u->deleted);
  free(u);
  *up = NULL;
}

int sitecfg_parse(const char *json, size_t len, struct sitecfg_update **out, char *err,
                  size_t errlen) {
  cJSON *root = NULL;
  const cJSON *arr, *it;
  struct sitecfg_update *u = NULL;
  int n, rc = -1, r;
  if (err && errlen) err[0] = '\0';
  *out = NULL;
  if (!(root = json_parse(json, len))) {
    failf(err, errlen, "body", "is not valid JSON");
    goto out;
  }
  if (!cJSON_IsObject(root)) {
    failf(err, errlen, "body", "must be a JSON object");
    goto out;
  }
  if (!(u = calloc(1, sizeof *u))) goto out;
  if (req_int(root, "seq", 0, SITECFG_ID_MAX, &u->seq, "", err, errlen) < 0) goto out;
  r = json_bool(root, "full", &u->full);
  if (r != 0) {
    failf(err, errlen, "full", r == 1 ? "is required" : "must be a boolean");
    goto out;
  }
  arr = cJSON_GetObjectItemCaseSensitive(root, "sites");
  if (!arr) {
    failf(err, errlen, "sites", "is required");
    goto out;
  }
  if (!cJSON_IsArray(arr)) {
    failf(err, errlen, "sites", "must be an array");
    goto out;
  }
  n = cJSON_GetArraySize(arr);
  if (n > 0 && !(u->sites = calloc((size_t)n, sizeof *u->sites))) goto out;
  cJSON_ArrayForEach(it, arr) {
    struct sitecfg_site *s = NULL;
    if (parse_site(it, &s, u->n_sites, err, errlen) < 0) goto out;
    for (int k = 0; k < u->n_sites; k++)
      if (u->sites[k]->id == s->id) {
        char f[64];
        snprintf(f, sizeof f, "sites[%d].id", u->n_sites);
        failf(err, errlen, f, "site id %lld is listed twice", (long long)s->id);
        sitecfg_site_unref(s);
        goto out;
      }
    u->sites[u->n_sites++] = s;
  }
  arr = cJSON_GetObjectItemCaseSensitive(root, "deleted");
  if (arr && !cJSON_IsNull(arr)) {
    if (!cJSON_IsArray(arr)) {
      failf(err, errlen, "deleted", "must be an array of site ids");
      goto out;
    }
    n = cJSON_GetArraySize(arr);
    if (n > 0 && !(u->deleted = calloc((size_t)n, sizeof *u->deleted))) goto out;
    cJSON_ArrayForEach(it, arr) {
      if (!json_is_int(it, 1, SITECFG_ID_MAX)) {
        char f[64];
        snprintf(f, sizeof f, "deleted[%d]", u->n_deleted);
        failf(err, errlen, f, "must be a site id");
        goto out;
      }
      u->deleted[u->n_deleted++] = (int64_t)it->valuedouble;
    }
  }
  *out = u;
  u = NULL;
  rc = 0;
out:
  if (rc < 0 && err && errlen && !err[0]) failf(err, errlen, "body", "out of memory");
  sitecfg_update_free(&u);
  cJSON_Delete(root);
  return rc;
}

static void set_free(struct sitecfg_set *s) {
  for (int i = 0; i < s->n_sites; i++)
    sitecfg_site_unref(s->sites[i]);
  free(s->sites);
  free(s->hosts);
  free(s);
}

struct sitecfg_set *sitecfg_set_ref(struct sitecfg_set *s) {
  if (s) atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
  return s;
}

void sitecfg_set_unref(struct sitecfg_set *s) {
  if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) set_free(s);
}

static int cmp_site(const void *a, const void *b) {
  const struct sitecfg_site *x = *(struct sitecfg_site *const *)a;
  const struct sitecfg_site *y = *(struct sitecfg_site *const *)b;
  return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_host(const void *a, const void *b) {
  const struct sitecfg_host *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c) return c;
  return x->site->id < y->site->id ? -1 : x->site->id > y->site->id;
}

/* Sort sites, build the host index. 0 or -1 (OOM). */
static int set_index(struct sitecfg_set *s) {
  int total = 0, k = 0;
  if (s->n_sites > 1) qsort(s->sites, (size_t)s->n_sites, sizeof *s->sites, cmp_site);
  for (int i = 0; i < s->n_sites; i++)
    total += s->sites[i]->n_hostnames;
  if (total > 0 && !(s->hosts = calloc((size_t)total, sizeof *s->hosts))) return -1;
  for (int i = 0; i < s->n_sites; i++)
    for (int h = 0; h < s->sites[i]->n_hostnames; h++)
      s->hosts[k++] = (struct sitecfg_host){s->sites[i]->hostnames[h], s->sites[i]};
  if (k > 1) qsort(s->hosts, (size_t)k, sizeof *s->hosts, cmp_host);
  /* a hostname claimed by two sites: keep the lower site id (first after sorting) */
  s->n_hosts = 0;
  for (int i = 0; i < k; i++) {
    if (s->n_hosts > 0 && strcmp(s->hosts[s->n_hosts - 1].name, s->hosts[i].name) == 0) {
      log_warn("hostname %s claimed by sites %lld and %lld; serving it from %lld", s->hosts[i].name,
               (long long)s->hosts[s->n_hosts - 1].site->id, (long long)s->hosts[i].site->id,
               (long long)s->hosts[s->n_hosts - 1].site->id);
      continue;
    }
    s->hosts[s->n_hosts++] = s->hosts[i];
  }
  return 0;
}

static struct sitecfg_set *set_alloc(int cap) {
  struct sitecfg_set *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  atomic_init(&s->refs, 1);
  if (cap > 0 && !(s->sites = calloc((size_t)cap, sizeof *s->sites))) {
    free(s);
    return NULL;
  }
  return s;
}

struct sitecfg_set *sitecfg_empty(void) {
  return set_alloc(0);
}

static int in_update(const struct sitecfg_update *u, int64_t id) {
  for (int i = 0; i < u->n_sites; i++)
    if (u->sites[i]->id == id) return 1;
  for (int i = 0; i < u->n_deleted; i++)
    if (u->deleted[i] == id) return 1;
  return 0;
}

struct sitecfg_set *sitecfg_apply(const struct sitecfg_set *cur, const struct sitecfg_update *u) {
  int cap = u->n_sites + ((cur && !u->full) ? cur->n_sites : 0);
  struct sitecfg_set *s = set_alloc(cap);
  if (!s) return NULL;
  s->seq = u->seq;
  if (cur && !u->full)
    for (int i = 0; i < cur->n_sites; i++)
      if (!in_update(u, cur->sites[i]->id))
        s->sites[s->n_sites++] = sitecfg_site_ref(cur->sites[i]);
  for (int i = 0; i < u->n_sites; i++) {
    int deleted = 0;
    for (int k = 0; k < u->n_deleted; k++)
      if (u->deleted[k] == u->sites[i]->id) deleted = 1;
    if (!deleted) s->sites[s->n_sites++] = sitecfg_site_ref(u->sites[i]);
  }
  if (set_index(s) < 0) {
    set_free(s);
    return NULL;
  }
  return s;
}

struct sitecfg_set *sitecfg_load(const char *json, size_t len, char *err, size_t errlen) {
  struct sitecfg_update *u = NULL;
  struct sitecfg_set *s;
  if (sitecfg_parse(json, len, &u, err, errlen) < 0) return NULL;
  s = sitecfg_apply(NULL, u);
  if (!s && err && errlen) snprintf(err, errlen, "out of memory");
  sitecfg_update_free(&u);
  return s;
}

struct sitecfg_site *sitecfg_lookup(const struct sitecfg_set *s, const char *host, size_t len) {
  char name[256];
  size_t n = 0;
  int lo = 0, hi;
  if (!s || !host) return NULL;
  if (len > 0 && host[0] == '[') {
    /* IPv6 literal: keep up to the closing bracket */
    const char *e = memchr(host, ']', len);
    if (!e) return NULL;
    len = (size_t)(e - host) + 1;
  } else {
    const char *c = memchr(host, ':', len);
    if (c) len = (size_t)(c - host);
  }
  if (len > 0 && host[len - 1] == '.') len--;
  if (len == 0 || len >= sizeof name) return NULL;
  for (n = 0; n < len; n++)
    name[n] = (char)tolower((unsigned char)host[n]);
  name[n] = '\0';
  hi = s->n_hosts - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    int c = strcmp(s->hosts[mid].name, name);
    if (c == 0) return s->hosts[mid].site;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return NULL;
}

struct sitecfg_site *sitecfg_find(const struct sitecfg_set *s, int64_t site_id) {
  int lo = 0, hi;
  if (!s) return NULL;
  hi = s->n_sites - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (s->sites[mid]->id == site_id) return s->sites[mid];
    if (s->sites[mid]->id < site_id)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return NULL;
}

int sitecfg_origin_same(const struct sitecfg_origin *a, const struct sitecfg_origin *b) {
  return a->id == b->id && a->port == b->port && a->https == b->https &&
         strcmp(a->address, b->address) == 0;
}

static cJSON *site_json(const struct sitecfg_site *s) {
  cJSON *j = cJSON_CreateObject(), *a, *nr;
  if (!j) return NULL;
  json_add_i64(j, "id", s->id);
  cJSON_AddStringToObject(j, "name", s->name);
  a = cJSON_AddArrayToObject(j, "hostnames");
  for (int i = 0; i < s->n_hostnames; i++)
    cJSON_AddItemToArray(a, cJSON_CreateString(s->hostnames[i]));
  json_add_i64(j, "config_version", s->config_version);
  json_add_i64(j, "current_level", s->current_level);
  a = cJSON_AddArrayToObject(j, "origins");
  for (int i = 0; i < s->n_origins; i++) {
    const struct sitecfg_origin *o = &s->origins[i];
    cJSON *oj = cJSON_CreateObject();
    json_add_i64(oj, "id", o->id);
    json_add_i64(oj, "level", o->level);
    cJSON_AddStringToObject(oj, "address", o->address);
    json_add_i64(oj, "port", o->port);
    cJSON_AddStringToObject(oj, "scheme", o->https ? "https" : "http");
    json_add_str_or_null(oj, "host_header", o->host_header);
    json_add_i64(oj, "weight", o->weight);
    cJSON_AddItemToArray(a, oj);
  }
  if (!(nr = noderetry_json(&s->retry))) {
    cJSON_Delete(j);
    return NULL;
  }
  cJSON_AddItemToObject(j, "node_retry", nr);
  return j;
}

int sitecfg_serialize(const struct sitecfg_set *s, struct buf *out) {
  cJSON *root = cJSON_CreateObject(), *arr;
  char *txt = NULL;
  int rc = -1;
  if (!root) goto out;
  json_add_i64(root, "seq", s ? s->seq : 0);
  cJSON_AddBoolToObject(root, "full", 1);
  arr = cJSON_AddArrayToObject(root, "sites");
  if (!arr) goto out;
  for (int i = 0; s && i < s->n_sites; i++) {
    cJSON *sj = site_json(s->sites[i]);
    if (!sj) goto out;
    cJSON_AddItemToArray(arr, sj);
  }
  if (!cJSON_AddArrayToObject(root, "deleted")) goto out;
  if (!(txt = json_print(root))) goto out;
  if (buf_puts(out, txt) < 0) goto out;
  rc = 0;
out:
  free(txt);
  cJSON_Delete(root);
  return rc;
}
