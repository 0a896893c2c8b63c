/* model — the REST API's JSON shapes for sites and origins: strict validation into records, and
 * records back to JSON (pure, no I/O). */
#ifndef CDNCA_MODEL_H
#define CDNCA_MODEL_H

#include <cjson/cJSON.h>

#include "fields.h"
#include "site.h"

/* A site body's keys that are no row of site_fields (FORM_IN): each has a reader of its own here.
   With the rows' names they are every key of a POST /v1/sites body. */
extern const char *const model_site_nested_keys[];

/* Apply a POST /v1/sites body onto s (which holds defaults). 0, or -1 with err filled. s->origins
 * is allocated (caller site_rec_fini's s either way). */
int model_site_create(const cJSON *body, struct site_rec *s, struct field_err *err);

/* Apply a PATCH /v1/sites/{id} body onto an existing s. 0, or -1 with err filled. */
int model_site_patch(const cJSON *body, struct site_rec *s, struct field_err *err);

/* Validate one origin object (POST: defaults first; PATCH: onto the existing o). prefix is the
 * field path prefix, e.g. "origins[1]" or "". 0 or -1. */
int model_origin_apply(const cJSON *obj, struct origin_rec *o, int creating, const char *prefix,
                       struct field_err *err);

/* Health-check rule: 422 when enabled with fewer than two enabled origins. 0 or -1 with err. */
int model_check_health_rule(const struct site_rec *s, struct field_err *err);

/* Number of enabled origins of s. */
int model_enabled_origins(const struct site_rec *s);

/* "active" | "paused" | "disabled" for the site's health checks, and a reason in words. */
const char *model_hc_state(const struct site_rec *s, const char **reason);

/* Add to j the site's own values in form (FORM_OUT: the API's, FORM_EXPORT: the export's), from
   the site field table (site_fields), with the hostnames after "name" and, in the API's form,
   health_check's "state" after "enabled". 0, or -1 on out of memory. */
int model_site_json_add(cJSON *j, const struct site_rec *s, unsigned form);

/* A webhook's "events", added to j: its stored JSON array, or null (every event). */
void model_webhook_events_add(cJSON *j, const char *events);

/* JSON of a site as the API returns it (caller cJSON_Delete's it). */
cJSON *model_site_json(const struct site_rec *s);

/* JSON of an origin as the API returns it. */
cJSON *model_origin_json(const struct origin_rec *o);

/* The least length of a webhook's secret (a shorter one is refused, so none is stored). */
#define MODEL_WEBHOOK_SECRET_MIN 16

/* 1 when url is an http:// or https:// URL with a host (no control characters or spaces), else
   0. */
int model_webhook_url_valid(const char *url);

#endif
