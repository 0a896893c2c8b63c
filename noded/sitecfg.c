/* sitecfg — published site config: parser, snapshots, Host lookup, serializer. */
#include "sitecfg.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "sitewire.h"

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

/* A decoding error of common/sitewire as "path: message". */
static int fail_wire(char *err, size_t errlen, const struct field_err *fe) {
  if (err && errlen)
    snprintf(err, errlen, "%s: %s", fe->field[0] ? fe->field : "body", fe->message);
  return -1;
}

static char *dupstr(const char *s) {
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
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

/* The node's origin from a published one: what the proxy uses (keys it does not use, such as
   description, are not kept). 0, or -1 on out of memory. */
static int origin_from_wire(const struct sitewire_origin *w, struct sitecfg_origin *o) {
  o->id = w->id;
  o->level = w->level;
  o->port = w->port;
  o->https = strcmp(w->scheme, "https") == 0;
  o->weight = w->weight;
  if (!(o->address = dupstr(w->address))) return -1;
  if (w->host_header[0] && !(o->host_header = dupstr(w->host_header))) return -1;
  return 0;
}

/* The node's site from a published one (one reference); NULL on out of memory. */
static struct sitecfg_site *site_from_wire(const struct sitewire_site *w) {
  struct sitecfg_site *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  atomic_init(&s->refs, 1);
  s->id = w->id;
  s->config_version = w->config_version;
  s->current_level = w->current_level;
  s->retry = w->retry;
  s->ramp = w->ramp;
  if (!(s->name = dupstr(w->name))) goto fail;
  if (!(s->hostnames = calloc((size_t)w->n_hostnames, sizeof *s->hostnames))) goto fail;
  for (; s->n_hostnames < w->n_hostnames; s->n_hostnames++)
    if (!(s->hostnames[s->n_hostnames] = dupstr(w->hostnames[s->n_hostnames]))) goto fail;
  if (w->n_origins > 0 && !(s->origins = calloc((size_t)w->n_origins, sizeof *s->origins)))
    goto fail;
  s->n_origins = w->n_origins; /* every pointer NULL until filled: site_free copes */
  for (int i = 0; i < w->n_origins; i++)
    if (origin_from_wire(&w->origins[i], &s->origins[i]) < 0) goto fail;
  return s;
fail:
  site_free(s);
  return NULL;
}

/* Read sites[idx] (into the scratch w) and build the node's site. 0 or -1 with err. */
static int parse_site(const cJSON *j, int idx, struct sitewire_site *w, struct sitecfg_site **out,
                      char *err, size_t errlen) {
  char path[32];
  struct field_err fe;
  snprintf(path, sizeof path, "sites[%d]", idx);
  if (sitewire_site_read(j, path, w, &fe) < 0) return fail_wire(err, errlen, &fe);
  if (!(*out = site_from_wire(w))) return failf(err, errlen, path, "out of memory");
  return 0;
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
  struct sitewire_site *w = NULL; /* one site as read, before the node keeps it */
  struct sitewire_doc doc;
  struct field_err fe;
  int n, rc = -1;
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
  if (!(u = calloc(1, sizeof *u)) || !(w = malloc(sizeof *w))) goto out;
  if (sitewire_doc_read(root, &doc, &arr, &fe) < 0) {
    fail_wire(err, errlen, &fe);
    goto out;
  }
  u->seq = doc.seq;
  u->full = doc.full;
  memcpy(u->deny_targets, doc.deny_targets, sizeof u->deny_targets);
  n = cJSON_GetArraySize(arr);
  if (n > 0 && !(u->sites = calloc((size_t)n, sizeof *u->sites))) goto out;
  cJSON_ArrayForEach(it, arr) {
    struct sitecfg_site *s = NULL;
    if (parse_site(it, u->n_sites, w, &s, err, errlen) < 0) goto out;
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
  if (sitewire_doc_deleted(root, &arr, &fe) < 0) {
    fail_wire(err, errlen, &fe);
    goto out;
  }
  if (arr) {
    n = cJSON_GetArraySize(arr);
    if (n > 0 && !(u->deleted = calloc((size_t)n, sizeof *u->deleted))) goto out;
    cJSON_ArrayForEach(it, arr) {
      if (sitewire_deleted_read(it, u->n_deleted, &u->deleted[u->n_deleted], &fe) < 0) {
        fail_wire(err, errlen, &fe);
        goto out;
      }
      u->n_deleted++;
    }
  }
  *out = u;
  u = NULL;
  rc = 0;
out:
  if (rc < 0 && err && errlen && !err[0]) failf(err, errlen, "body", "out of memory");
  free(w);
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
  memcpy(s->deny_targets, u->deny_targets, sizeof s->deny_targets);
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

/* A kept origin as published again: the keys the node does not keep take their defaults. */
static void origin_to_wire(const struct sitecfg_origin *o, struct sitewire_origin *w) {
  memset(w, 0, sizeof *w);
  fields_defaults(sitewire_origin_fields, w);
  w->id = o->id;
  w->level = o->level;
  w->port = o->port;
  w->weight = o->weight;
  snprintf(w->scheme, sizeof w->scheme, "%s", o->https ? "https" : "http");
  snprintf(w->address, sizeof w->address, "%s", o->address);
  snprintf(w->host_header, sizeof w->host_header, "%s", o->host_header ? o->host_header : "");
}

static void site_to_wire(const struct sitecfg_site *s, struct sitewire_site *w) {
  w->id = s->id;
  snprintf(w->name, sizeof w->name, "%s", s->name);
  w->n_hostnames = s->n_hostnames;
  for (int i = 0; i < s->n_hostnames; i++)
    snprintf(w->hostnames[i], sizeof w->hostnames[i], "%s", s->hostnames[i]);
  w->config_version = s->config_version;
  w->current_level = s->current_level;
  w->n_origins = s->n_origins;
  for (int i = 0; i < s->n_origins; i++)
    origin_to_wire(&s->origins[i], &w->origins[i]);
  w->retry = s->retry;
  w->ramp = s->ramp;
}

int sitecfg_serialize(const struct sitecfg_set *s, struct buf *out) {
  struct sitewire_doc doc = {.seq = s ? s->seq : 0, .full = 1};
  if (s) memcpy(doc.deny_targets, s->deny_targets, sizeof doc.deny_targets);
  struct sitewire_site *w = malloc(sizeof *w);
  cJSON *root = w ? sitewire_doc_json(&doc, NULL, 0) : NULL;
  char *txt = NULL;
  int rc = -1;
  if (!root) goto out;
  for (int i = 0; s && i < s->n_sites; i++) {
    site_to_wire(s->sites[i], w);
    if (sitewire_doc_add_site(root, sitewire_site_json(w)) < 0) goto out;
  }
  if (!(txt = json_print(root))) goto out;
  if (buf_puts(out, txt) < 0) goto out;
  rc = 0;
out:
  free(txt);
  free(w);
  cJSON_Delete(root);
  return rc;
}
