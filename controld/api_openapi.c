/* api_openapi — GET /v1/openapi.json: the OpenAPI 3.1 document of this API (controld/openapi.json,
   compiled in), open like /healthz. */
#include <stddef.h>

#include "api.h"

extern const unsigned char openapi_json[]; /* openapi_doc.c, generated */
extern const size_t openapi_json_len;

static enum http_rc get_openapi(struct req *r) {
  req_add_header(r, "Cache-Control", "no-cache");
  req_static(r, 200, "application/json", openapi_json, openapi_json_len);
  return HTTP_DONE;
}

const struct route api_openapi_routes[] = {
    {"GET", "/v1/openapi.json", AUTH_NONE, get_openapi, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
