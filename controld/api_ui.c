/* api_ui — the dashboard's static files at /ui/ (compiled in; no auth: the page asks for a token).
 */
#include <string.h>

#include "api.h"
#include "ui_assets.h"

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
  req_add_header(r, "Content-Security-Policy",
                 "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
  req_add_header(r, "X-Content-Type-Options", "nosniff");
  req_add_header(r, "Cache-Control", "no-cache");
  req_add_header(r, "Referrer-Policy", "no-referrer");
  req_static(r, 200, a->content_type, a->data, a->len);
  return HTTP_DONE;
}

const struct route api_ui_routes[] = {
    {"GET", "/ui*", AUTH_NONE, get_ui},
    {NULL, NULL, AUTH_NONE, NULL},
};
