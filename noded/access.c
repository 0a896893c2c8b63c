/* access — the JSON object of one access line (access.h). */
#include "access.h"

#include "rewrite.h"

int access_json(struct buf *b, const struct proxy_access *a) {
  b->len = 0;
  if (buf_puts(b, "{\"type\":\"access\",\"site_id\":") || buf_put_i64(b, a->site_id) ||
      buf_puts(b, ",\"site\":\"") || rewrite_json_escape(b, a->site) ||
      buf_puts(b, "\",\"client\":\"") || rewrite_json_escape(b, a->client) ||
      buf_puts(b, "\",\"host\":\"") || rewrite_json_escape(b, a->host) ||
      buf_puts(b, "\",\"method\":\"") || rewrite_json_escape(b, a->method) ||
      buf_puts(b, "\",\"path\":\"") || rewrite_json_escape(b, a->path) ||
      buf_puts(b, "\",\"origin_id\":") || buf_put_i64(b, a->origin_id) ||
      buf_puts(b, ",\"level\":") || buf_put_i64(b, a->level) || buf_puts(b, ",\"attempts\":") ||
      buf_put_i64(b, a->attempts) || buf_puts(b, ",\"status\":") || buf_put_i64(b, a->status) ||
      buf_puts(b, ",\"duration_ms\":") || buf_put_i64(b, a->duration_ms) ||
      buf_puts(b, ",\"bytes\":") || buf_put_u64(b, a->bytes) ||
      (a->error &&
       (buf_puts(b, ",\"error\":\"") || rewrite_json_escape(b, a->error) || buf_puts(b, "\""))) ||
      buf_puts(b, "}"))
    return -1;
  return 0;
}
