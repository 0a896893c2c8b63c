/* api_fleet — GET /v1/summary: the fleet in counts (docs/design.md#fleet-view). */
#include "api.h"
#include "clock.h"
#include "ctx.h"
#include "json.h"
#include "store_fleet.h"

static enum http_rc get_summary(struct req *r) {
  struct fleet_summary fs;
  cJSON *j;
  if (store_fleet_summary(r->ctx->store, clock_wall_ms() - r->ctx->cfg.node_online_ms, &fs) < 0) {
    api_store_error(r, STORE_ERROR, "summary", NULL);
    return HTTP_DONE;
  }
  j = cJSON_CreateObject();
  json_add_i64(j, "sites", fs.sites);
  json_add_i64(j, "on_primary", fs.on_primary);
  json_add_i64(j, "on_backup", fs.on_backup);
  json_add_i64(j, "all_levels_unhealthy", fs.all_down);
  json_add_i64(j, "failback_available", fs.failback_available);
  json_add_i64(j, "paused", fs.paused);
  json_add_i64(j, "nodes_online", fs.nodes_online);
  json_add_i64(j, "nodes_lagging", fs.nodes_lagging);
  req_json(r, 200, j);
  return HTTP_DONE;
}

const struct route api_fleet_routes[] = {
    {"GET", "/v1/summary", AUTH_READ, get_summary, NULL, 0},
    {NULL, NULL, AUTH_NONE, NULL, NULL, 0},
};
