/* ctx — controld's one context struct, passed down to every module. */
#ifndef CDNCA_CTX_H
#define CDNCA_CTX_H

#include <stdint.h>

#include "targets.h"

struct store;
struct metrics;
struct http_srv;
struct rcache;
struct hub;
struct task_board;
struct notify;
struct prober;
struct sitemetrics;
struct coord;
struct engine_env;

/* Options of the command line and the --config file (see options table in main.c). */
struct cd_config {
  char listen[128];
  char admin_listen[128]; /* "" = no admin listener */
  char db[512];
  char deny_targets[1024]; /* comma-separated CIDRs refused besides the built-in ones */
  char public_url[512];    /* the dashboard's address for links in notifications ("" = none) */
  int64_t probe_interval_ms;
  int64_t probe_batch;
  int64_t node_online_ms;
  int64_t suspect_interval_ms;
  char checkpoint_url[512];
  char probe_ca_file[512];
  char probe_client[8]; /* "own" | "curl" */
  char tls_cert[512];
  char tls_key[512];
  char log_format[8];
  char log_level[8];
  char log_file[512];
  int64_t max_connections;
  int64_t max_connections_per_ip;
  int64_t header_timeout_ms;
  int64_t http_threads;
  int64_t webhook_retry_ms, webhook_retry_max_ms, webhook_give_up_ms, webhook_timeout_ms;
  int64_t audit_retention_days;
  int64_t event_retention_days;
  int64_t incident_quiet_ms, incident_retention_days, drill_retention_days;
  int64_t metrics_max_sites;
  char replica_name[64];   /* cluster mode: this replica's name in the lease ("" = hostname) */
  int64_t lease_ttl_ms;    /* cluster mode: the engine lease's ttl */
  char engine_eligible[8]; /* cluster mode: "true" | "false" */
  char test_fault[24];     /* the test suite's seams: api_op_set_fault, store_set_max_pages */
  int64_t test_max_pages;
};

struct ctx {
  struct cd_config cfg;
  struct store *store;
  struct metrics *metrics;
  struct http_srv *http;
  struct http_srv *admin_http;     /* --admin-listen: /healthz and /metrics only */
  struct rcache *site_cache;       /* rendered GET /v1/sites/{id} bodies (rcache.h) */
  struct hub *hub;                 /* node config long-polls and presence (hub.h) */
  struct task_board *tasks;        /* probe tasks handed to nodes, votes back (tasks.h) */
  struct notify *notify;           /* webhook delivery worker (notify.h) */
  struct retain *retain;           /* the engine's pruning by age (retain.h) */
  struct prober *prober;           /* the probe round thread (prober.h) */
  struct sitemetrics *sitemetrics; /* fleet and per-site gauges of GET /metrics (sitemetrics.h) */
  struct coord *coord;             /* the engine role and other replicas' notifications (coord.h) */
  struct engine_env *engine;       /* what the engine works with (engine.h) */
  int64_t started_ms;
  struct targets targets; /* destinations origins and webhooks may not name (targets.h) */
};

#endif
