/* audit — audit record summaries (see audit.h). */
#include "audit.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fields.h"

/* Collections of the API and their singular (the word used in summaries). */
static const struct {
  const char *plural, *singular;
} nouns[] = {
    {"sites", "site"},       {"origins", "origin"}, {"nodes", "node"},
    {"webhooks", "webhook"}, {"tokens", "token"},   {"enrolment-keys", "enrolment key"},
    {"channels", "channel"},
};

/* Request keys whose values never appear in a summary. */
static const char *const secret_keys[] = {"secret", "token",       "password",
                                          "key",    "routing_key", NULL};

/* Request keys holding a URL: shown with userinfo and query masked (docs/design.md#secrets). */
static const char *const url_keys[] = {"url", NULL};

/* The longest string value shown in full. */
#define SHOWN_STRING_MAX 40

struct sbuf {
  char *p;
  size_t cap, len;
  int cut;
};

static void put(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct sbuf *b, const char *fmt, ...) {
  va_list ap;
  int n;
  if (b->cut || b->cap == 0) return;
  va_start(ap, fmt);
  n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= b->cap - b->len) {
    b->cut = 1;
    b->len = b->cap - 1;
    if (b->cap >= 4) memcpy(b->p + b->cap - 4, "...", 4);
    return;
  }
  b->len += (size_t)n;
}

static const char *singular(const char *seg, size_t n) {
  for (size_t i = 0; i < sizeof nouns / sizeof nouns[0]; i++)
    if (strlen(nouns[i].plural) == n && strncmp(nouns[i].plural, seg, n) == 0)
      return nouns[i].singular;
  return NULL;
}

static int is_id(const char *seg, size_t n) {
  if (n == 0 || n > 18) return 0;
  for (size_t i = 0; i < n; i++)
    if (seg[i] < '0' || seg[i] > '9') return 0;
  return 1;
}

static int listed(const char *const *keys, const char *key) {
  for (int i = 0; keys[i]; i++)
    if (strcmp(keys[i], key) == 0) return 1;
  return 0;
}

/* A path split into (noun, id) pairs and a trailing action, e.g. /v1/sites/3/origins/7 or
   /v1/sites/3/switch. */
struct parsed {
  int n;
  struct {
    const char *noun; /* singular, or the raw segment when unknown */
    char raw[32];
    char id[20]; /* "" when none */
  } part[4];
  char action[32]; /* "" when none */
};

static void parse_path(const char *path, struct parsed *pp) {
  const char *p = path;
  memset(pp, 0, sizeof *pp);
  if (strncmp(p, "/v1/", 4) == 0) p += 4;
  while (*p) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    const char *noun = singular(p, n);
    if (n == 0) {
      /* an empty segment (a trailing slash): nothing */
    } else if (is_id(p, n) && pp->n > 0 && !pp->part[pp->n - 1].id[0]) {
      snprintf(pp->part[pp->n - 1].id, sizeof pp->part[0].id, "%.*s", (int)n, p);
    } else if (noun && pp->n < 4) {
      pp->part[pp->n].noun = noun;
      pp->n++;
    } else if (pp->n > 0 && !pp->action[0]) {
      snprintf(pp->action, sizeof pp->action, "%.*s", (int)(n < 31 ? n : 31), p);
    } else {
      pp->n = 0; /* not a path of the API's shape: named as it is */
      break;
    }
    if (!e) break;
    p = e + 1;
  }
}

/* The object named by the path, innermost first: "origin 7 of site 3". */
static void put_object(struct sbuf *b, const struct parsed *pp, const char *new_id) {
  for (int i = pp->n - 1; i >= 0; i--) {
    const char *id = pp->part[i].id[0] ? pp->part[i].id : (i == pp->n - 1 ? new_id : "");
    put(b, "%s%s%s%s", i == pp->n - 1 ? "" : " of ", pp->part[i].noun, id && *id ? " " : "",
        id ? id : "");
  }
}

/* A channel's url may hold a token (a Slack incoming webhook): never shown (docs/design.md,
   Notification channels). */
static void put_fields(struct sbuf *b, const cJSON *body, int url_secret) {
  const cJSON *it;
  int first = 1;
  if (!cJSON_IsObject(body)) return;
  cJSON_ArrayForEach(it, body) {
    if (!it->string) continue;
    put(b, "%s%s", first ? ": " : ", ", it->string);
    first = 0;
    if (listed(secret_keys, it->string) || (url_secret && strcmp(it->string, "url") == 0)) continue;
    if (cJSON_IsString(it) && listed(url_keys, it->string)) {
      char shown[SHOWN_STRING_MAX + 2];
      fields_url_mask(it->valuestring, shown, sizeof shown);
      if (strlen(shown) <= SHOWN_STRING_MAX) put(b, "=%s", shown);
    } else if (cJSON_IsBool(it))
      put(b, "=%s", cJSON_IsTrue(it) ? "true" : "false");
    else if (cJSON_IsNull(it))
      put(b, "=null");
    else if (cJSON_IsNumber(it))
      put(b, "=%.15g", it->valuedouble);
    else if (cJSON_IsString(it) && strlen(it->valuestring) <= SHOWN_STRING_MAX)
      put(b, "=%s", it->valuestring);
  }
}

void audit_summary(const char *method, const char *path, const cJSON *body, const cJSON *reply,
                   char *out, size_t cap) {
  struct sbuf b = {out, cap, 0, 0};
  struct parsed pp;
  char new_id[24] = "";
  const cJSON *rid = cJSON_IsObject(reply) ? cJSON_GetObjectItemCaseSensitive(reply, "id") : NULL;
  const cJSON *rname =
      cJSON_IsObject(reply) ? cJSON_GetObjectItemCaseSensitive(reply, "name") : NULL;
  if (cap) out[0] = '\0';
  if (strcmp(path, "/v1/node/enrol") == 0 && strcmp(method, "POST") == 0) {
    /* docs/design.md#enrolment-keys: a node made with a key names the key (the reply's
       "enrolment_key"; the key itself is in no summary) */
    const cJSON *k =
        cJSON_IsObject(reply) ? cJSON_GetObjectItemCaseSensitive(reply, "enrolment_key") : NULL;
    const cJSON *kid = cJSON_IsObject(k) ? cJSON_GetObjectItemCaseSensitive(k, "id") : NULL;
    const cJSON *kname = cJSON_IsObject(k) ? cJSON_GetObjectItemCaseSensitive(k, "name") : NULL;
    put(&b, "enrolled node");
    if (cJSON_IsNumber(rid)) put(&b, " %.0f", rid->valuedouble);
    if (cJSON_IsString(rname) && strlen(rname->valuestring) <= SHOWN_STRING_MAX)
      put(&b, " (%s)", rname->valuestring);
    put(&b, " with enrolment key");
    if (cJSON_IsNumber(kid)) put(&b, " %.0f", kid->valuedouble);
    if (cJSON_IsString(kname) && strlen(kname->valuestring) <= SHOWN_STRING_MAX)
      put(&b, " (%s)", kname->valuestring);
    return;
  }
  parse_path(path, &pp);
  if (pp.n == 0) {
    put(&b, "%s %s", method, path);
    put_fields(&b, body, 0);
    return;
  }
  if (pp.action[0])
    put(&b, "%s ", pp.action);
  else if (strcmp(method, "POST") == 0)
    put(&b, "created ");
  else if (strcmp(method, "PATCH") == 0)
    put(&b, "changed ");
  else if (strcmp(method, "DELETE") == 0)
    put(&b, "deleted ");
  else
    put(&b, "%s ", method);
  if (!pp.action[0] && strcmp(method, "POST") == 0 && cJSON_IsNumber(rid))
    snprintf(new_id, sizeof new_id, "%.0f", rid->valuedouble);
  put_object(&b, &pp, new_id);
  if (!pp.action[0] && strcmp(method, "POST") == 0 && cJSON_IsString(rname) &&
      strlen(rname->valuestring) <= SHOWN_STRING_MAX)
    put(&b, " (%s)", rname->valuestring);
  put_fields(&b, body, strncmp(path, "/v1/channels", 12) == 0);
}

int64_t audit_site_id(const char *path, const cJSON *reply) {
  const char *p;
  const cJSON *rid;
  if (strncmp(path, "/v1/sites/", 10) == 0) {
    p = path + 10;
    if (*p >= '0' && *p <= '9') return strtoll(p, NULL, 10);
    return 0;
  }
  if (strcmp(path, "/v1/sites") == 0 || strcmp(path, "/v1/sites/") == 0) {
    rid = cJSON_IsObject(reply) ? cJSON_GetObjectItemCaseSensitive(reply, "id") : NULL;
    if (cJSON_IsNumber(rid) && rid->valuedouble > 0) return (int64_t)rid->valuedouble;
  }
  return 0;
}
