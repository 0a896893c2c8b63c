/* fuzz_site_body — libFuzzer target: REST bodies for sites and origins through json_parse and the
 * model validators (create on defaults, patch on a valid record, origin create and patch). Any
 * return is fine; a crash, a leak, undefined behaviour or a record that passed validation while
 * breaking the model's own limits is a bug. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "hostname.h"
#include "json.h"
#include "model.h"

/* A valid existing site the PATCH bodies are applied to. */
static const char BASE_SITE[] =
    "{\"name\":\"shop\",\"hostnames\":[\"shop.example.com\",\"www.shop.example.com\"],"
    "\"failback\":\"manual\",\"health_check\":{\"enabled\":true,\"path\":\"/healthz\"},"
    "\"origins\":[{\"level\":1,\"address\":\"10.0.0.1\",\"port\":443,\"scheme\":\"https\","
    "\"host_header\":\"origin.shop.example.com\"},"
    "{\"level\":2,\"address\":\"origin2.example.net\",\"scheme\":\"http\",\"weight\":5}]}";

static void check_origin(const struct origin_rec *o) {
  FUZZ_CHECK(FUZZ_TERMINATED(o->address));
  FUZZ_CHECK(FUZZ_TERMINATED(o->host_header));
  FUZZ_CHECK(o->level >= 1 && o->level <= 16);
  FUZZ_CHECK(o->port >= 1 && o->port <= 65535);
  FUZZ_CHECK(o->weight >= 1 && o->weight <= 100);
  FUZZ_CHECK(o->enabled == 0 || o->enabled == 1);
  FUZZ_CHECK(o->scheme == SCHEME_HTTP || o->scheme == SCHEME_HTTPS);
  FUZZ_CHECK(o->address[0] != '\0');
  FUZZ_CHECK(!o->host_header[0] || hostname_valid(o->host_header));
}

/* A record accepted by the validators keeps every limit the model promises. */
static void check_site(const struct site_rec *s) {
  cJSON *j;
  char *txt;
  const char *reason = NULL;
  FUZZ_CHECK(FUZZ_TERMINATED(s->name));
  FUZZ_CHECK(FUZZ_TERMINATED(s->hc_path));
  FUZZ_CHECK(s->name[0] != '\0');
  FUZZ_CHECK(s->n_hostnames >= 1 && s->n_hostnames <= SITE_MAX_HOSTNAMES);
  for (int i = 0; i < s->n_hostnames; i++) {
    FUZZ_CHECK(FUZZ_TERMINATED(s->hostnames[i]));
    FUZZ_CHECK(hostname_valid(s->hostnames[i]));
    for (int k = 0; k < i; k++)
      FUZZ_CHECK(strcmp(s->hostnames[i], s->hostnames[k]) != 0);
  }
  FUZZ_CHECK(s->failback == HEALTH_FAILBACK_AUTO || s->failback == HEALTH_FAILBACK_MANUAL);
  FUZZ_CHECK(s->hc_path[0] == '/');
  FUZZ_CHECK(s->n_retry_on_status >= 0 && s->n_retry_on_status <= SITE_MAX_RETRY_STATUS);
  FUZZ_CHECK(s->n_origins >= 0 && s->n_origins <= SITE_MAX_ORIGINS);
  for (int i = 0; i < s->n_origins; i++)
    check_origin(&s->origins[i]);
  /* create enforces the rule, and PATCH cannot remove the base record's two origins */
  FUZZ_CHECK(!s->hc_enabled || model_enabled_origins(s) >= 2);
  FUZZ_CHECK(model_hc_state(s, &reason) != NULL);
  j = model_site_json(s);
  FUZZ_CHECK(j != NULL);
  txt = json_print(j);
  FUZZ_CHECK(txt != NULL);
  free(txt);
  cJSON_Delete(j);
}

static void check_err(const struct field_err *e) {
  FUZZ_CHECK(e->status == 400 || e->status == 422);
  FUZZ_CHECK(e->code != NULL && e->code[0] != '\0');
  FUZZ_CHECK(FUZZ_TERMINATED(e->field));
  FUZZ_CHECK(FUZZ_TERMINATED(e->message));
  FUZZ_CHECK(e->message[0] != '\0');
}

static void run_create(const cJSON *body) {
  struct site_rec s;
  struct field_err e;
  memset(&e, 0, sizeof e);
  site_rec_defaults(&s);
  if (model_site_create(body, &s, &e) == 0)
    check_site(&s);
  else
    check_err(&e);
  site_rec_fini(&s);
}

static void run_patch(const cJSON *body, const struct site_rec *base) {
  struct site_rec s;
  struct field_err e;
  memset(&e, 0, sizeof e);
  FUZZ_CHECK(site_rec_copy(&s, base) == 0);
  if (model_site_patch(body, &s, &e) == 0)
    check_site(&s);
  else
    check_err(&e);
  site_rec_fini(&s);
}

static void run_origin(const cJSON *body, const struct origin_rec *existing) {
  struct origin_rec o;
  struct field_err e;
  memset(&e, 0, sizeof e);
  memset(&o, 0, sizeof o);
  if (model_origin_apply(body, &o, 1, "", &e) == 0)
    check_origin(&o);
  else
    check_err(&e);
  memset(&e, 0, sizeof e);
  o = *existing;
  if (model_origin_apply(body, &o, 0, "origins[1]", &e) == 0)
    check_origin(&o);
  else
    check_err(&e);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  struct site_rec base;
  struct field_err e;
  cJSON *body, *b = NULL;
  memset(&e, 0, sizeof e);
  site_rec_defaults(&base);
  b = json_parse(BASE_SITE, sizeof BASE_SITE - 1);
  FUZZ_CHECK(b != NULL);
  FUZZ_CHECK(model_site_create(b, &base, &e) == 0);
  cJSON_Delete(b);
  body = json_parse((const char *)data, size);
  if (body) {
    /* the HTTP layer hands the model JSON objects only; origins take any value */
    if (cJSON_IsObject(body)) {
      run_create(body);
      run_patch(body, &base);
    }
    run_origin(body, &base.origins[1]);
    cJSON_Delete(body);
  }
  site_rec_fini(&base);
  return 0;
}
