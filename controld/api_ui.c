/* api_ui — the dashboard's static files at /ui/ and the API reference page at /docs/api (compiled
   in; no auth: the dashboard asks for a token, the reference needs none). */
#include <string.h>

#include "api.h"
#include "ui_assets.h"

/* Answer a compiled-in file with the dashboard's headers: a strict Content-Security-Policy
   (nothing loaded from outside controld), no sniffing, no caching without revalidation. */
static enum http_rc send_asset(struct req *r, const struct ui_asset *a) {
  req_add_header(r, "Content-Security-Policy",
                 "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
  req_add_header(r, "X-Content-Type-Options", "nosniff");
  req_add_header(r, "Cache-Control", "no-cache");
  req_add_header(r, "Referrer-Policy", "no-referrer");
  req_static(r, 200, a->content_type, a->data, a->len);
  return HTTP_DONE;
}

static enum http_rc get_ui(struct req *r) {
  char path[256];
  const char *q = strchr(r->url, '?');
  size_t n = q ? (size_t)(q - r->url) : strlen(r->url);
  const struct ui_asset *a;
  if (n >= sizeof path) n = sizeof path - 1;
  memcpy(path, r->url, n);
  path[n] = '\0';
  a = ui_asset_find(path);
  if (!a) {
    req_error(r, 404, "not_found", NULL, "no such dashboard file");
    return HTTP_DONE;
  }
  return send_asset(r, a);
}

/* GET /docs/api: the readable API reference, a page of the dashboard's files that renders
   /v1/openapi.json in the browser (ui/apidoc.html, ui/apidoc.js). */
static enum http_rc get_api_docs(struct req *r) {
  const struct ui_asset *a = ui_asset_find("/ui/apidoc.html");
  if (!a) {
    req_error(r, 404, "not_found", NULL, "no API reference compiled in");
    return HTTP_DONE;
  }
  return send_asset(r, a);
}

const struct route api_ui_routes[] = {
    {"GET", "/ui*", AUTH_NONE, get_ui, "*", 0},
    {"GET", "/docs/api", AUTH_NONE, get_api_docs, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
