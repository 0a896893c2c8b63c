/* export — the cdnca-export document: records to JSON, and JSON validated field by field back
   into records (see export.h). */
#include "export.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chan.h"
#include "clock.h"
#include "engine.h"
#include "fields.h"
#include "fleet.h"
#include "json.h"
#include "model.h"
#include "names.h"
#include "store_notify.h"
#include "token.h"

/* Ids and millisecond times are written as JSON numbers: json_add_i64 is exact below 10^15. */
#define EXPORT_INT_MAX 999999999999999LL
/* The largest document --import reads (a 100,000-site installation is well under this). */
#define EXPORT_FILE_MAX (1024L * 1024 * 1024)

static int fail(struct field_err *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct field_err *err, const char *path, const char *fmt, ...) {
  va_list ap;
  err->status = 422;
  err->code = "invalid_value";
  snprintf(err->field, sizeof err->field, "%s", path);
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return -1;
}

static int from_fields(struct field_err *err, const struct field_err *fe) {
  return fail(err, fe->field, "%s", fe->message);
}

/* ---- records to JSON ---- */

static cJSON *origin_json(const struct origin_rec *o) {
  cJSON *j = cJSON_CreateObject();
  if (j && fields_json_add(j, site_origin_fields, FORM_EXPORT, o) < 0) {
    cJSON_Delete(j);
    return NULL;
  }
  return j;
}

/* A site as the API's POST body takes it, plus what an import keeps (ids, level, pin, versions,
   times). */
static cJSON *site_json(const struct site_rec *s) {
  cJSON *j = cJSON_CreateObject(), *a;
  if (!j || model_site_json_add(j, s, FORM_EXPORT) < 0) {
    cJSON_Delete(j);
    return NULL;
  }
  a = cJSON_AddArrayToObject(j, "origins");
  for (int i = 0; i < s->n_origins; i++)
    cJSON_AddItemToArray(a, origin_json(&s->origins[i]));
  return j;
}

static cJSON *node_json(const struct export_node *n) {
  cJSON *j = cJSON_CreateObject();
  json_add_i64(j, "id", n->id);
  cJSON_AddStringToObject(j, "name", n->name);
  cJSON_AddStringToObject(j, "token_sha256", n->token_hash);
  json_add_i64(j, "created_at_ms", n->created_at);
  return j;
}

static cJSON *token_json(const struct export_token *t) {
  cJSON *j = cJSON_CreateObject();
  json_add_i64(j, "id", t->id);
  cJSON_AddStringToObject(j, "name", t->name);
  cJSON_AddStringToObject(j, "role", t->role);
  cJSON_AddStringToObject(j, "token_sha256", t->hash);
  json_add_i64(j, "created_at_ms", t->created_at);
  json_add_i64(j, "expires_at_ms", t->expires_at);
  return j;
}

/* A stored JSON text as a value of j under key: parsed, or null. */
static void add_json_text(cJSON *j, const char *key, const char *text) {
  cJSON *v = text ? cJSON_Parse(text) : NULL;
  cJSON_AddItemToObject(j, key, v ? v : cJSON_CreateNull());
}

/* A channel (docs/design.md, Notification channels): its secrets are in the export (0600). */
static cJSON *webhook_json(const struct webhook_rec *w) {
  cJSON *j = cJSON_CreateObject();
  json_add_i64(j, "id", w->id);
  cJSON_AddStringToObject(j, "kind", names_word(NAMES(chan_kind_names), w->kind, "webhook"));
  cJSON_AddStringToObject(j, "name", w->name);
  cJSON_AddStringToObject(j, "url", w->url);
  cJSON_AddStringToObject(j, "secret", w->secret);
  model_webhook_events_add(j, w->events);
  add_json_text(j, "site_ids", w->site_ids);
  add_json_text(j, "config", w->config);
  json_add_i64(j, "created_at_ms", w->created_at);
  return j;
}

cJSON *export_to_json(const struct store_export *x, int64_t now, const char *version) {
  cJSON *doc = cJSON_CreateObject(), *a;
  if (!doc) return NULL;
  cJSON_AddStringToObject(doc, "format", EXPORT_FORMAT);
  json_add_i64(doc, "version", EXPORT_VERSION);
  json_add_time(doc, "exported_at", now);
  cJSON_AddStringToObject(doc, "controld_version", version ? version : "");
  json_add_i64(doc, "publication_seq", x->pub_seq);
  a = cJSON_AddArrayToObject(doc, "sites");
  for (int i = 0; i < x->n_sites; i++)
    cJSON_AddItemToArray(a, site_json(&x->sites[i]));
  a = cJSON_AddArrayToObject(doc, "nodes");
  for (int i = 0; i < x->n_nodes; i++)
    cJSON_AddItemToArray(a, node_json(&x->nodes[i]));
  a = cJSON_AddArrayToObject(doc, "tokens");
  for (int i = 0; i < x->n_tokens; i++)
    cJSON_AddItemToArray(a, token_json(&x->tokens[i]));
  a = cJSON_AddArrayToObject(doc, "webhooks");
  for (int i = 0; i < x->n_webhooks; i++)
    cJSON_AddItemToArray(a, webhook_json(&x->webhooks[i]));
  return doc;
}

/* ---- JSON to records ---- */

/* A SHA-256 as 64 lowercase hex digits (what the store keeps). */
static int valid_hash(char *s) {
  size_t n = 0;
  for (; s[n]; n++)
    if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) return 0;
  return n == 64;
}

/* An http(s) URL, or an email channel's smtp(s) one. */
static int valid_url(char *url) {
  char tmp[STORE_WEBHOOK_URL_MAX + 16];
  if (strncmp(url, "smtp://", 7) == 0 || strncmp(url, "smtps://", 8) == 0) {
    snprintf(tmp, sizeof tmp, "http://%s", strstr(url, "://") + 3);
    return model_webhook_url_valid(tmp);
  }
  return model_webhook_url_valid(url);
}

#define HASH_WHAT "a SHA-256 as 64 lowercase hex digits (never the token itself)"

#define S(m) FIELD_AT(struct site_rec, m)
static const struct field_def site_meta[] = {
    {"id", FIELD_INT, FIELD_REQUIRED, S(id), 1, EXPORT_INT_MAX, 0, NULL, NULL, NULL, 0, NULL, 0, 0,
     NULL, NULL},
    {"current_level", FIELD_INT, FIELD_REQUIRED, S(current_level), 1, 16, 1, NULL, NULL, NULL, 0,
     NULL, 0, 0, NULL, NULL},
    {"manual_pin", FIELD_BOOL, FIELD_REQUIRED, S(manual_pin), 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0,
     0, NULL, NULL},
    {"config_version", FIELD_INT, FIELD_REQUIRED, S(config_version), 1, EXPORT_INT_MAX, 1, NULL,
     NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
    {"revision", FIELD_INT, FIELD_REQUIRED, S(revision), 1, EXPORT_INT_MAX, 1, NULL, NULL, NULL, 0,
     NULL, 0, 0, NULL, NULL},
    {"created_at_ms", FIELD_INT, FIELD_REQUIRED, S(created_at), 0, EXPORT_INT_MAX, 0, NULL, NULL,
     NULL, 0, NULL, 0, 0, NULL, NULL},
    {"updated_at_ms", FIELD_INT, FIELD_REQUIRED, S(updated_at), 0, EXPORT_INT_MAX, 0, NULL, NULL,
     NULL, 0, NULL, 0, 0, NULL, NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
};
#undef S

#define O(m) FIELD_AT(struct origin_rec, m)
static const struct field_def origin_meta[] = {
    {"id", FIELD_INT, FIELD_REQUIRED, O(id), 1, EXPORT_INT_MAX, 0, NULL, NULL, NULL, 0, NULL, 0, 0,
     NULL, NULL},
    {"created_at_ms", FIELD_INT, FIELD_REQUIRED, O(created_at), 0, EXPORT_INT_MAX, 0, NULL, NULL,
     NULL, 0, NULL, 0, 0, NULL, NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
};
#undef O

#define N(m) FIELD_AT(struct export_node, m)
static const struct field_def node_doc_fields[] = {
    {"id", FIELD_INT, FIELD_REQUIRED, N(id), 1, EXPORT_INT_MAX, 0, NULL, NULL, NULL, 0, NULL, 0, 0,
     NULL, NULL},
    {"name", FIELD_STR, FIELD_REQUIRED, N(name), 1, 0, 0, NULL, fields_name_valid, FIELDS_NAME_WHAT,
     0, NULL, 0, 0, NULL, NULL},
    {"token_sha256", FIELD_STR, FIELD_REQUIRED, N(token_hash), 64, 0, 0, NULL, valid_hash,
     HASH_WHAT, 0, NULL, 0, 0, NULL, NULL},
    {"created_at_ms", FIELD_INT, FIELD_REQUIRED, N(created_at), 0, EXPORT_INT_MAX, 0, NULL, NULL,
     NULL, 0, NULL, 0, 0, NULL, NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
};
#undef N

static const char *const roles[] = {"admin", "operator", "read", NULL};

#define T(m) FIELD_AT(struct export_token, m)
static const struct field_def token_fields[] = {
    {"id", FIELD_INT, FIELD_REQUIRED, T(id), 1, EXPORT_INT_MAX, 0, NULL, NULL, NULL, 0, NULL, 0, 0,
     NULL, NULL},
    {"name", FIELD_STR, FIELD_REQUIRED, T(name), 1, 0, 0, NULL, fields_name_valid, FIELDS_NAME_WHAT,
     0, NULL, 0, 0, NULL, NULL},
    {"role", FIELD_ENUM, FIELD_REQUIRED, T(role), 0, 0, 0, roles, NULL,
     "\"admin\", \"operator\" or \"read\"", 0, NULL, 0, 0, NULL, NULL},
    {"token_sha256", FIELD_STR, FIELD_REQUIRED, T(hash), 64, 0, 0, NULL, valid_hash, HASH_WHAT, 0,
     NULL, 0, 0, NULL, NULL},
    {"created_at_ms", FIELD_INT, FIELD_REQUIRED, T(created_at), 0, EXPORT_INT_MAX, 0, NULL, NULL,
     NULL, 0, NULL, 0, 0, NULL, NULL},
    /* 0 = never */
    {"expires_at_ms", FIELD_INT, FIELD_REQUIRED, T(expires_at), 0, EXPORT_INT_MAX, 0, NULL, NULL,
     NULL, 0, NULL, 0, 0, NULL, NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
};
#undef T

#define W(m) FIELD_AT(struct webhook_rec, m)
static const struct field_def webhook_fields[] = {
    {"id", FIELD_INT, FIELD_REQUIRED, W(id), 1, EXPORT_INT_MAX, 0, NULL, NULL, NULL, 0, NULL, 0, 0,
     NULL, NULL},
    {"kind", FIELD_NAMED, 0, W(kind), 0, 0, 0, chan_kind_names, NULL, NULL, 0, NULL, 0, CHAN_KINDS,
     NULL, NULL},
    {"name", FIELD_STR, 0, W(name), 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
    {"url", FIELD_STR, FIELD_REQUIRED, W(url), 1, 0, 0, NULL, valid_url,
     "an http://, https://, smtp:// or smtps:// URL with a host", 0, NULL, 0, 0, NULL, NULL},
    {"secret", FIELD_STR, FIELD_REQUIRED, W(secret), 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL,
     NULL},
    {"created_at_ms", FIELD_INT, FIELD_REQUIRED, W(created_at), 0, EXPORT_INT_MAX, 0, NULL, NULL,
     NULL, 0, NULL, 0, 0, NULL, NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
};
#undef W

/* Every key of the API's POST /v1/sites body (model.c validates them): site_fields' rows and the
   model's nested keys, into out (NULL-terminated). 0, or -1 when cap is too small. */
static int site_api_keys(const char **out, int cap) {
  int n = fields_names(site_fields, FORM_IN, out, cap);
  if (n < 0) return -1;
  for (const char *const *k = model_site_nested_keys; *k; k++) {
    if (n + 1 >= cap) return -1;
    out[n++] = *k;
  }
  out[n] = NULL;
  return 0;
}

/* The model's error as a path under prefix. */
static int from_model(struct field_err *err, const char *prefix, const struct field_err *me) {
  char path[sizeof err->field + 192];
  if (me->field[0])
    snprintf(path, sizeof path, "%s.%s", prefix, me->field);
  else
    snprintf(path, sizeof path, "%s", prefix);
  return fail(err, path, "%s", me->message);
}

/* The origins' ids and times (read by origin_meta) are taken out of body's origins, leaving the
   API's keys; meta gets one entry per origin. */
static int take_origin_meta(cJSON *body, const char *prefix, struct origin_rec *meta,
                            struct field_err *err) {
  cJSON *origins = cJSON_GetObjectItemCaseSensitive(body, "origins"), *o;
  struct field_err fe;
  const char *api_keys[32]; /* an origin's keys of the API's POST body (model.c validates them) */
  char path[64];
  int j = 0;
  if (fields_names(site_origin_fields, FORM_IN, api_keys, 32) < 0)
    return fail(err, prefix, "internal: too many origin fields");
  if (!cJSON_IsArray(origins)) {
    snprintf(path, sizeof path, "%s.origins", prefix);
    return fail(err, path, "origins is required: an array");
  }
  if (cJSON_GetArraySize(origins) > SITE_MAX_ORIGINS) {
    snprintf(path, sizeof path, "%s.origins", prefix);
    return fail(err, path, "a site has at most %d origins", SITE_MAX_ORIGINS);
  }
  cJSON_ArrayForEach(o, origins) {
    snprintf(path, sizeof path, "%s.origins[%d]", prefix, j);
    if (!cJSON_IsObject(o)) return fail(err, path, "an origin must be a JSON object");
    memset(&meta[j], 0, sizeof meta[j]);
    if (fields_apply(o, origin_meta, api_keys, path, FIELDS_CREATE, &meta[j], &fe) < 0)
      return from_fields(err, &fe);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "id");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "created_at_ms");
    j++;
  }
  return 0;
}

/* One site: what an import keeps is checked by site_meta, the rest is the API's POST body and
   goes through model_site_create. health_check.enabled is read here (a stored site may have
   checks on and paused, which a POST refuses). */
static int read_site(const cJSON *obj, int i, struct site_rec *s, struct field_err *err) {
  struct site_rec meta;
  struct origin_rec ometa[SITE_MAX_ORIGINS];
  struct field_err fe;
  struct field_err me;
  cJSON *body = NULL, *hc, *en;
  const char *api_keys[48];
  char prefix[32], path[64];
  int enabled, ret = -1;

  snprintf(prefix, sizeof prefix, "sites[%d]", i);
  site_rec_defaults(s);
  if (!cJSON_IsObject(obj)) return fail(err, prefix, "a site must be a JSON object");
  memset(&meta, 0, sizeof meta);
  if (site_api_keys(api_keys, 48) < 0) return fail(err, prefix, "internal: too many site fields");
  if (fields_apply(obj, site_meta, api_keys, prefix, FIELDS_CREATE, &meta, &fe) < 0)
    return from_fields(err, &fe);
  body = cJSON_Duplicate(obj, 1);
  if (!body) return fail(err, prefix, "out of memory");
  for (const struct field_def *d = site_meta; d->name; d++)
    cJSON_DeleteItemFromObjectCaseSensitive(body, d->name);
  hc = cJSON_GetObjectItemCaseSensitive(body, "health_check");
  en = cJSON_IsObject(hc) ? cJSON_GetObjectItemCaseSensitive(hc, "enabled") : NULL;
  if (!cJSON_IsBool(en)) {
    snprintf(path, sizeof path, "%s.health_check.enabled", prefix);
    fail(err, path, "health_check.enabled is required: true or false");
    goto out;
  }
  enabled = cJSON_IsTrue(en);
  cJSON_DeleteItemFromObjectCaseSensitive(hc, "enabled");
  if (take_origin_meta(body, prefix, ometa, err) < 0) goto out;
  if (model_site_create(body, s, &me) < 0) {
    from_model(err, prefix, &me);
    goto out;
  }
  s->hc_enabled = enabled;
  s->id = meta.id;
  s->current_level = meta.current_level;
  s->manual_pin = meta.manual_pin;
  s->config_version = meta.config_version;
  s->revision = meta.revision;
  s->created_at = meta.created_at;
  s->updated_at = meta.updated_at;
  for (int j = 0; j < s->n_origins; j++) {
    s->origins[j].id = ometa[j].id;
    s->origins[j].created_at = ometa[j].created_at;
    s->origins[j].site_id = s->id;
  }
  ret = 0;
out:
  cJSON_Delete(body);
  return ret;
}

/* A channel's kind-dependent keys: site_ids (null or an array of ids), config (null or an object;
   an email channel's from and to), and a webhook's secret length. */
static int read_channel(const cJSON *obj, const char *prefix, struct webhook_rec *w,
                        struct field_err *err) {
  const cJSON *si = cJSON_GetObjectItemCaseSensitive(obj, "site_ids"), *it;
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(obj, "config");
  char path[64];
  if (w->kind == CHAN_WEBHOOK && strlen(w->secret) < MODEL_WEBHOOK_SECRET_MIN) {
    snprintf(path, sizeof path, "%s.secret", prefix);
    return fail(err, path, "a webhook's secret has at least %d characters",
                MODEL_WEBHOOK_SECRET_MIN);
  }
  if (si && !cJSON_IsNull(si)) {
    snprintf(path, sizeof path, "%s.site_ids", prefix);
    if (!cJSON_IsArray(si) || cJSON_GetArraySize(si) > CHAN_MAX_SITES)
      return fail(err, path, "site_ids must be null or an array of site ids");
    cJSON_ArrayForEach(it, si) if (!json_is_int(it, 1, EXPORT_INT_MAX)) return fail(
        err, path, "site_ids must be null or an array of site ids");
    if (!(w->site_ids = json_print(si))) return fail(err, path, "out of memory");
  }
  if (cfg && !cJSON_IsNull(cfg)) {
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(cfg, "to");
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(cfg, "from");
    snprintf(path, sizeof path, "%s.config", prefix);
    if (!cJSON_IsObject(cfg) || !cJSON_IsString(from) || !chan_email_addr_ok(from->valuestring) ||
        !cJSON_IsArray(to) || cJSON_GetArraySize(to) < 1 ||
        cJSON_GetArraySize(to) > CHAN_EMAIL_MAX_TO)
      return fail(err, path, "config must be null or {\"from\", \"to\": [1 to %d addresses]}",
                  CHAN_EMAIL_MAX_TO);
    cJSON_ArrayForEach(
        it, to) if (!cJSON_IsString(it) ||
                    !chan_email_addr_ok(
                        it->valuestring)) return fail(err, path, "an address in to does not parse");
    if (!(w->config = json_print(cfg))) return fail(err, path, "out of memory");
  }
  if (w->kind == CHAN_EMAIL && !w->config) {
    snprintf(path, sizeof path, "%s.config", prefix);
    return fail(err, path, "an email channel needs config {\"from\", \"to\"}");
  }
  return 0;
}

/* The "events" filter: null (every type) or a non-empty array of known types, kept as JSON text
   (NULL for every type). */
static int read_events(const cJSON *obj, const char *prefix, struct webhook_rec *w,
                       struct field_err *err) {
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(obj, "events"), *it;
  cJSON *clean;
  char path[64];
  int i = 0;
  snprintf(path, sizeof path, "%s.events", prefix);
  if (!ev) return fail(err, path, "events is required: null (every type) or an array of types");
  if (cJSON_IsNull(ev)) return 0;
  if (!cJSON_IsArray(ev) || cJSON_GetArraySize(ev) == 0)
    return fail(err, path, "events must be null or a non-empty array of event types");
  clean = cJSON_CreateArray();
  if (!clean) return fail(err, path, "out of memory");
  cJSON_ArrayForEach(it, ev) {
    const cJSON *seen;
    int dup = 0;
    if (!cJSON_IsString(it) || event_type_value(it->valuestring) < 0) {
      snprintf(path, sizeof path, "%s.events[%d]", prefix, i);
      cJSON_Delete(clean);
      return fail(err, path, "unknown event type");
    }
    cJSON_ArrayForEach(seen, clean) if (strcmp(seen->valuestring, it->valuestring) == 0) dup = 1;
    if (!dup) cJSON_AddItemToArray(clean, cJSON_CreateString(it->valuestring));
    i++;
  }
  w->events = json_print(clean);
  cJSON_Delete(clean);
  return w->events ? 0 : fail(err, path, "out of memory");
}

/* A top-level array of objects each read by a field table into n elements of size elem. */
static int read_table(const cJSON *doc, const char *key, const struct field_def *defs,
                      const char *const *extra, size_t elem, int max, void **out, int *n,
                      struct field_err *err) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, key), *it;
  struct field_err fe;
  char path[48];
  if (!cJSON_IsArray(arr)) return fail(err, key, "%s is required: an array", key);
  if (cJSON_GetArraySize(arr) > max) return fail(err, key, "%s holds at most %d entries", key, max);
  *out = calloc((size_t)cJSON_GetArraySize(arr) + 1, elem);
  if (!*out) return fail(err, key, "out of memory");
  cJSON_ArrayForEach(it, arr) {
    snprintf(path, sizeof path, "%s[%d]", key, *n);
    if (!cJSON_IsObject(it)) return fail(err, path, "an entry must be a JSON object");
    /* counted before it is read: a refused entry is freed (and wiped) with the rest */
    (*n)++;
    if (fields_apply(it, defs, extra, path, FIELDS_CREATE, (char *)*out + (size_t)(*n - 1) * elem,
                     &fe) < 0)
      return from_fields(err, &fe);
  }
  return 0;
}

/* ---- uniqueness across the document ---- */

struct ukey {
  const char *s; /* NULL: compare v */
  int64_t v;
  int order; /* insertion order: of two equal keys the later one is named */
  char path[64];
};

struct ukeys {
  struct ukey *k;
  int n, cap;
};

static int ukey_cmp(const void *a, const void *b) {
  const struct ukey *x = a, *y = b;
  int c;
  if (x->s && y->s && (c = strcmp(x->s, y->s)) != 0) return c;
  if (!x->s && !y->s && x->v != y->v) return x->v < y->v ? -1 : 1;
  return x->order - y->order; /* equal keys: the earlier first */
}

static int ukeys_add(struct ukeys *u, const char *s, int64_t v, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int ukeys_add(struct ukeys *u, const char *s, int64_t v, const char *fmt, ...) {
  va_list ap;
  if (u->n == u->cap) {
    int ncap = u->cap ? u->cap * 2 : 64;
    struct ukey *nk = realloc(u->k, (size_t)ncap * sizeof *nk);
    if (!nk) return -1;
    u->k = nk;
    u->cap = ncap;
  }
  u->k[u->n].s = s;
  u->k[u->n].v = v;
  u->k[u->n].order = u->n;
  va_start(ap, fmt);
  vsnprintf(u->k[u->n].path, sizeof u->k[u->n].path, fmt, ap);
  va_end(ap);
  u->n++;
  return 0;
}

/* -1 with err naming the later of two equal keys; the set is emptied either way. */
static int ukeys_check(struct ukeys *u, const char *what, struct field_err *err) {
  int ret = 0;
  if (u->n > 1) qsort(u->k, (size_t)u->n, sizeof *u->k, ukey_cmp);
  for (int i = 1; i < u->n && ret == 0; i++) {
    const struct ukey *a = &u->k[i - 1], *b = &u->k[i];
    if (a->s ? strcmp(a->s, b->s) == 0 : a->v == b->v)
      ret = fail(err, b->path, "%s is also used by %s", what, a->path);
  }
  u->n = 0;
  return ret;
}

/* One check per kind of key, run in turn on one scratch set. */
static int check_unique(const struct store_export *x, struct field_err *err) {
  struct ukeys u = {NULL, 0, 0};
  int ret = -1, oom = 0;
  for (int i = 0; i < x->n_sites; i++)
    oom |= ukeys_add(&u, NULL, x->sites[i].id, "sites[%d].id", i);
  if (oom || ukeys_check(&u, "the site id", err) < 0) goto out;
  for (int i = 0; i < x->n_sites; i++)
    oom |= ukeys_add(&u, x->sites[i].name, 0, "sites[%d].name", i);
  if (oom || ukeys_check(&u, "the site name", err) < 0) goto out;
  for (int i = 0; i < x->n_sites; i++)
    for (int h = 0; h < x->sites[i].n_hostnames; h++)
      oom |= ukeys_add(&u, x->sites[i].hostnames[h], 0, "sites[%d].hostnames[%d]", i, h);
  if (oom || ukeys_check(&u, "the hostname", err) < 0) goto out;
  for (int i = 0; i < x->n_sites; i++)
    for (int o = 0; o < x->sites[i].n_origins; o++)
      oom |= ukeys_add(&u, NULL, x->sites[i].origins[o].id, "sites[%d].origins[%d].id", i, o);
  if (oom || ukeys_check(&u, "the origin id", err) < 0) goto out;
  for (int i = 0; i < x->n_nodes; i++)
    oom |= ukeys_add(&u, NULL, x->nodes[i].id, "nodes[%d].id", i);
  if (oom || ukeys_check(&u, "the node id", err) < 0) goto out;
  for (int i = 0; i < x->n_nodes; i++)
    oom |= ukeys_add(&u, x->nodes[i].name, 0, "nodes[%d].name", i);
  if (oom || ukeys_check(&u, "the node name", err) < 0) goto out;
  for (int i = 0; i < x->n_tokens; i++)
    oom |= ukeys_add(&u, NULL, x->tokens[i].id, "tokens[%d].id", i);
  if (oom || ukeys_check(&u, "the token id", err) < 0) goto out;
  for (int i = 0; i < x->n_tokens; i++)
    oom |= ukeys_add(&u, x->tokens[i].name, 0, "tokens[%d].name", i);
  if (oom || ukeys_check(&u, "the token name", err) < 0) goto out;
  for (int i = 0; i < x->n_nodes; i++)
    oom |= ukeys_add(&u, x->nodes[i].token_hash, 0, "nodes[%d].token_sha256", i);
  for (int i = 0; i < x->n_tokens; i++)
    oom |= ukeys_add(&u, x->tokens[i].hash, 0, "tokens[%d].token_sha256", i);
  if (oom || ukeys_check(&u, "the token hash", err) < 0) goto out;
  for (int i = 0; i < x->n_webhooks; i++)
    oom |= ukeys_add(&u, NULL, x->webhooks[i].id, "webhooks[%d].id", i);
  if (oom || ukeys_check(&u, "the webhook id", err) < 0) goto out;
  ret = 0;
out:
  if (oom) ret = fail(err, "", "out of memory");
  free(u.k);
  return ret;
}

static int read_header(const cJSON *doc, struct store_export *out, struct field_err *err) {
  static const char *const keys[] = {
      "format", "version", "exported_at", "controld_version", "publication_seq",
      "sites",  "nodes",   "tokens",      "webhooks",         NULL};
  const char *bad = NULL, *s;
  int64_t v;
  if (!cJSON_IsObject(doc)) return fail(err, "", "the document must be a JSON object");
  if (json_only_keys(doc, keys, &bad) < 0) return fail(err, bad, "unknown field '%s'", bad);
  if (json_str(doc, "format", 64, &s) != 0 || strcmp(s, EXPORT_FORMAT) != 0)
    return fail(err, "format", "format must be \"%s\": this is not a cdnca export", EXPORT_FORMAT);
  if (json_int(doc, "version", 1, INT32_MAX, &v) != 0)
    return fail(err, "version", "version is required: a positive integer");
  if (v != EXPORT_VERSION)
    return fail(err, "version", "version %lld is not one this controld reads (%d)", (long long)v,
                EXPORT_VERSION);
  if (json_int(doc, "publication_seq", 0, EXPORT_INT_MAX, &out->pub_seq) != 0)
    return fail(err, "publication_seq", "publication_seq is required: an integer >= 0");
  if (json_str(doc, "exported_at", 64, &s) < 0)
    return fail(err, "exported_at", "exported_at must be a string");
  if (json_str(doc, "controld_version", 64, &s) < 0)
    return fail(err, "controld_version", "controld_version must be a string");
  return 0;
}

int export_from_json(const cJSON *doc, struct store_export *out, struct field_err *err) {
  static const char *const events_key[] = {"events", "site_ids", "config", NULL};
  const cJSON *arr, *it;
  void *p;
  int rc;
  memset(out, 0, sizeof *out);
  if (read_header(doc, out, err) < 0) return -1;
  arr = cJSON_GetObjectItemCaseSensitive(doc, "sites");
  if (!cJSON_IsArray(arr)) return fail(err, "sites", "sites is required: an array");
  out->sites = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *out->sites);
  if (!out->sites) return fail(err, "sites", "out of memory");
  cJSON_ArrayForEach(it, arr) {
    /* counted first: the record owns its origins even when it is refused */
    int i = out->n_sites++;
    if (read_site(it, i, &out->sites[i], err) < 0) return -1;
  }
  p = NULL;
  rc = read_table(doc, "nodes", node_doc_fields, NULL, sizeof *out->nodes, 1000000, &p,
                  &out->n_nodes, err);
  out->nodes = p;
  if (rc < 0) return -1;
  p = NULL;
  rc = read_table(doc, "tokens", token_fields, NULL, sizeof *out->tokens, 1000000, &p,
                  &out->n_tokens, err);
  out->tokens = p;
  if (rc < 0) return -1;
  p = NULL;
  rc = read_table(doc, "webhooks", webhook_fields, events_key, sizeof *out->webhooks,
                  STORE_MAX_WEBHOOKS, &p, &out->n_webhooks, err);
  out->webhooks = p;
  if (rc < 0) return -1;
  arr = cJSON_GetObjectItemCaseSensitive(doc, "webhooks");
  for (int i = 0; i < out->n_webhooks; i++) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "webhooks[%d]", i);
    if (read_events(cJSON_GetArrayItem(arr, i), prefix, &out->webhooks[i], err) < 0 ||
        read_channel(cJSON_GetArrayItem(arr, i), prefix, &out->webhooks[i], err) < 0)
      return -1;
  }
  return check_unique(out, err);
}

/* ---- targets ---- */

/* The host of an http(s) URL (curl frees it), or NULL. */
static char *url_host(const char *url) {
  CURLU *u = curl_url();
  char *host = NULL;
  if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK)
    (void)curl_url_get(u, CURLUPART_HOST, &host, 0);
  curl_url_cleanup(u);
  return host;
}

int export_check_targets(const struct store_export *x, const struct targets *t,
                         struct field_err *err) {
  const char *why = NULL;
  char path[64];
  for (int i = 0; i < x->n_sites; i++)
    for (int o = 0; o < x->sites[i].n_origins; o++)
      if (targets_refused(t, x->sites[i].origins[o].address, &why)) {
        snprintf(path, sizeof path, "sites[%d].origins[%d].address", i, o);
        return fail(err, path, "%s is %s: origins may not point there (see --deny-targets)",
                    x->sites[i].origins[o].address, why);
      }
  for (int i = 0; i < x->n_webhooks; i++) {
    char *host = url_host(x->webhooks[i].url);
    int refused = host && targets_refused(t, host, &why);
    snprintf(path, sizeof path, "webhooks[%d].url", i);
    if (refused)
      fail(err, path, "%s is %s: webhooks may not point there (see --deny-targets)", host, why);
    curl_free(host);
    if (refused) return -1;
  }
  return 0;
}

/* ---- files ---- */

/* Write len bytes of text to path through path.tmp (mode 0600: the document holds secrets),
   synced before the rename. 0, or -1 with msg. */
static int write_whole(const char *path, const char *text, size_t len, char *msg, size_t msglen) {
  char tmp[4096];
  int fd, ret = -1;
  size_t off = 0;
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
    snprintf(msg, msglen, "%s: path too long", path);
    return -1;
  }
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(msg, msglen, "%s: %s", tmp, strerror(errno));
    return -1;
  }
  if (fchmod(fd, 0600) < 0) goto io;
  while (off < len) {
    ssize_t w = write(fd, text + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) goto io;
    off += (size_t)w;
  }
  if (fsync(fd) < 0) goto io;
  if (close(fd) < 0) {
    fd = -1;
    goto io;
  }
  fd = -1;
  if (rename(tmp, path) < 0) goto io;
  return 0;
io:
  snprintf(msg, msglen, "%s: %s", fd >= 0 ? tmp : path, strerror(errno));
  if (fd >= 0) close(fd);
  unlink(tmp);
  return ret;
}

static int count_origins(const struct store_export *x) {
  int n = 0;
  for (int i = 0; i < x->n_sites; i++)
    n += x->sites[i].n_origins;
  return n;
}

static void summary(const struct store_export *x, const char *verb, const char *path, char *msg,
                    size_t msglen) {
  snprintf(msg, msglen, "%s %s: %d sites, %d origins, %d nodes, %d API tokens, %d webhooks", verb,
           path, x->n_sites, count_origins(x), x->n_nodes, x->n_tokens, x->n_webhooks);
}

int export_write_file(struct store *st, const char *path, const char *version, char *msg,
                      size_t msglen) {
  struct store_export x;
  cJSON *doc = NULL;
  char *text = NULL, done[512];
  int ret = -1;
  if (store_export_read(st, &x) != STORE_OK) {
    snprintf(msg, msglen, "could not read the database (see the log)");
    goto out;
  }
  doc = export_to_json(&x, clock_wall_ms(), version);
  summary(&x, "exported to", path, done, sizeof done);
  /* the records are in the tree now: free them before the text doubles the footprint */
  store_export_fini(&x);
  text = doc ? cJSON_Print(doc) : NULL;
  cJSON_Delete(doc);
  doc = NULL;
  if (!text) {
    snprintf(msg, msglen, "out of memory");
    goto out;
  }
  {
    size_t n = strlen(text);
    char *t = realloc(text, n + 2); /* the file ends with a newline */
    if (!t) {
      snprintf(msg, msglen, "out of memory");
      goto out;
    }
    text = t;
    memcpy(text + n, "\n", 2);
  }
  if (write_whole(path, text, strlen(text), msg, msglen) < 0) goto out;
  {
    /* the outbox is runtime state: say what a move would leave behind */
    int64_t pending = 0;
    if (store_delivery_backlog(st, &pending) == 0 && pending > 0)
      snprintf(msg, msglen,
               "%s (%lld webhook deliveries still pending in the outbox are not exported)", done,
               (long long)pending);
    else
      snprintf(msg, msglen, "%s", done);
  }
  ret = 0;
out:
  if (text) token_wipe(text, strlen(text));
  free(text);
  cJSON_Delete(doc);
  store_export_fini(&x);
  return ret;
}

/* The whole file at path, NUL-terminated, into *buf (caller wipes and frees). 0 or -1 with msg. */
static int read_whole(const char *path, char **buf, size_t *len, char *msg, size_t msglen) {
  FILE *f = fopen(path, "rb");
  size_t cap = 65536, n = 0;
  char *b = NULL;
  *buf = NULL;
  if (!f) {
    snprintf(msg, msglen, "%s: %s", path, strerror(errno));
    return -1;
  }
  for (;;) {
    size_t r;
    if (!b || n + 1 >= cap) {
      char *nb;
      if (b) cap *= 2;
      if (cap > (size_t)EXPORT_FILE_MAX + 1) {
        snprintf(msg, msglen, "%s: larger than %ld bytes", path, EXPORT_FILE_MAX);
        goto fail;
      }
      nb = realloc(b, cap);
      if (!nb) {
        snprintf(msg, msglen, "%s: out of memory", path);
        goto fail;
      }
      b = nb;
    }
    r = fread(b + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
  }
  if (ferror(f)) {
    snprintf(msg, msglen, "%s: read error", path);
    goto fail;
  }
  fclose(f);
  b[n] = '\0';
  *buf = b;
  *len = n;
  return 0;
fail:
  fclose(f);
  if (b) token_wipe(b, n);
  free(b);
  return -1;
}

/* Each imported site's fleet view flags as the engine would store them now: its kept level with
   every origin's health unknown (runtime state is not moved), so GET /v1/summary counts a site
   the source had on a backup level as on_backup from the first answer on
   (docs/operations.md#what-moves-and-what-does-not). 0, or -1 when out of memory. */
static int fleet_of_import(struct store_export *x, int64_t now) {
  x->site_fleet = calloc(x->n_sites > 0 ? (size_t)x->n_sites : 1, sizeof *x->site_fleet);
  if (!x->site_fleet) return -1;
  for (int i = 0; i < x->n_sites; i++) {
    struct outlook ol;
    engine_outlook(&x->sites[i], now, &ol);
    x->site_fleet[i] = fleet_state_of(&x->sites[i], &ol);
  }
  return 0;
}

int export_read_file(struct store *st, const char *path, const struct targets *deny, char *msg,
                     size_t msglen) {
  struct store_export x;
  struct field_err err;
  struct jsonstrict_err jerr;
  cJSON *doc = NULL;
  char *text = NULL, what[96];
  size_t len = 0;
  enum store_rc rc;
  int ret = -1;
  memset(&x, 0, sizeof x);
  if (read_whole(path, &text, &len, msg, msglen) < 0) return -1;
  doc = json_parse_strict(text, len, &jerr);
  if (!doc) {
    snprintf(msg, msglen, "%s: not valid JSON at byte %zu%s%s: %s", path, jerr.offset,
             jerr.path[0] ? " in " : "", jerr.path, jsonstrict_message(jerr.rc));
    goto out;
  }
  if (export_from_json(doc, &x, &err) < 0 || export_check_targets(&x, deny, &err) < 0) {
    snprintf(msg, msglen, "%s: refused at %s: %s (nothing was imported)", path,
             err.field[0] ? err.field : "the top level", err.message);
    goto out;
  }
  if (fleet_of_import(&x, clock_wall_ms()) < 0) {
    snprintf(msg, msglen, "out of memory (nothing was imported)");
    goto out;
  }
  rc = store_export_write(st, &x, what, sizeof what);
  if (rc == STORE_CONFLICT && !strchr(what, '['))
    snprintf(msg, msglen,
             "the database already holds %s: an import needs an empty database (nothing was "
             "imported)",
             what);
  else if (rc == STORE_CONFLICT)
    snprintf(msg, msglen, "%s: refused at %s: already taken (nothing was imported)", path, what);
  else if (rc == STORE_FULL)
    snprintf(msg, msglen, "the disk is full (nothing was imported)");
  else if (rc == STORE_UNAVAILABLE)
    snprintf(msg, msglen, "the database cannot be reached (nothing was imported)");
  else if (rc != STORE_OK)
    snprintf(msg, msglen, "storage error, see the log (nothing was imported)");
  else {
    summary(&x, "imported from", path, msg, msglen);
    ret = 0;
  }
out:
  cJSON_Delete(doc);
  store_export_fini(&x);
  token_wipe(text, len);
  free(text);
  return ret;
}
