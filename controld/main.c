/* controld — the cdnca control daemon: REST API on SQLite, probe rounds, publication, notifications. */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "clock.h"
#include "hub.h"
#include "ctx.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "opts.h"
#include "engine.h"
#include "prober.h"
#include "rcache.h"
#include "store.h"
#include "tasks.h"
#include "token.h"

static const char *const log_formats[] = {"text", "json", NULL};
static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};

#define O(f) offsetof(struct cd_config, f)
#define S(f) sizeof(((struct cd_config *)0)->f)
static const struct opt_def options[] = {
    {"listen", OPT_STR, O(listen), S(listen), 0, 0, NULL, "127.0.0.1:7400", "address:port of the REST API"},
    {"db", OPT_STR, O(db), S(db), 0, 0, NULL, "./controld.db", "SQLite database file"},
    {"probe-interval-ms", OPT_INT, O(probe_interval_ms), 0, 100, 86400000, NULL, "30000", "time between probe rounds"},
    {"probe-batch", OPT_INT, O(probe_batch), 0, 1, 1000000, NULL, "500", "sites probed per round at most"},
    {"node-online-ms", OPT_INT, O(node_online_ms), 0, 1000, 86400000, NULL, "60000", "a node is online when seen within this"},
    {"suspect-interval-ms", OPT_INT, O(suspect_interval_ms), 0, 0, 86400000, NULL, "0", "fast re-probe of sites with a state change pending (0 = off)"},
    {"checkpoint-url", OPT_STR, O(checkpoint_url), S(checkpoint_url), 0, 0, NULL, NULL, "checkpoint plugin URL (empty = none)"},
    {"probe-ca-file", OPT_STR, O(probe_ca_file), S(probe_ca_file), 0, 0, NULL, NULL, "CA bundle for HTTPS origin probes (empty = system)"},
    {"tls-cert", OPT_STR, O(tls_cert), S(tls_cert), 0, 0, NULL, NULL, "serve the API over TLS with this certificate (PEM)"},
    {"tls-key", OPT_STR, O(tls_key), S(tls_key), 0, 0, NULL, NULL, "private key for --tls-cert (PEM)"},
    {"log-format", OPT_ENUM, O(log_format), S(log_format), 0, 0, log_formats, "text", "text or json"},
    {"log-level", OPT_ENUM, O(log_level), S(log_level), 0, 0, log_levels, "info", "error, warn, info or debug"},
    {"max-connections", OPT_INT, O(max_connections), 0, 64, 1000000, NULL, "16384", "HTTP connection limit (long-polling nodes count)"},
    {"http-threads", OPT_INT, O(http_threads), 0, 1, 64, NULL, "2", "HTTP worker threads"},
    {"webhook-retry-ms", OPT_INT, O(webhook_retry_ms), 0, 1, 3600000, NULL, "1000", "first webhook retry delay (doubles per attempt)"},
    {"webhook-retry-max-ms", OPT_INT, O(webhook_retry_max_ms), 0, 1, 86400000, NULL, "600000", "cap of the webhook retry delay"},
    {"webhook-give-up-ms", OPT_INT, O(webhook_give_up_ms), 0, 100, 2592000000, NULL, "86400000", "a webhook delivery fails for good this long after its event"},
    {"webhook-timeout-ms", OPT_INT, O(webhook_timeout_ms), 0, 100, 120000, NULL, "10000", "timeout of one webhook delivery attempt"},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
#undef O
#undef S

/* Register the metric families of DESIGN §8 so they render from the start. */
static void declare_metrics(struct metrics *m) {
  metrics_declare(m, "cdnca_http_requests_total", "counter", "REST API requests by route and status");
  metrics_declare(m, "cdnca_probe_rounds_total", "counter", "probe rounds run");
  metrics_declare(m, "cdnca_probe_round_seconds", "histogram", "probe round duration");
  metrics_declare(m, "cdnca_probes_total", "counter", "probe verdicts by source and result");
  metrics_declare(m, "cdnca_level_switches_total", "counter", "level switches by reason");
  metrics_declare(m, "cdnca_nodes_online", "gauge", "nodes seen within node_online_ms");
  metrics_declare(m, "cdnca_webhook_deliveries_total", "counter", "webhook delivery attempts by result");
}

/* Make the token from the environment the admin token (hashed; earlier ones are revoked), then wipe it from the environment. Without it, the stored admin token stays. */
static int enrol_admin_token(struct ctx *ctx) {
  char *tok = getenv("CDNCA_ADMIN_TOKEN");
  char hash[65];
  if (!tok || !*tok) {
    log_info("CDNCA_ADMIN_TOKEN is not set: keeping the stored admin token");
    return 0;
  }
  if (strlen(tok) < 16) {
    log_error("CDNCA_ADMIN_TOKEN must be at least 16 characters");
    return -1;
  }
  token_sha256_hex(tok, strlen(tok), hash);
  token_wipe(tok, strlen(tok));
  unsetenv("CDNCA_ADMIN_TOKEN");
  return store_admin_token_set(ctx->store, hash);
}

int main(int argc, char **argv) {
  struct ctx ctx;
  char err[512];
  sigset_t sigs;
  int sig = 0, ret = 1;
  enum log_level lvl = LOG_INFO;

  memset(&ctx, 0, sizeof ctx);
  if (opts_defaults(options, &ctx.cfg) < 0) return 2;
  switch (opts_parse(options, &ctx.cfg, argc, argv, err, sizeof err)) {
  case OPTS_HELP:
    opts_usage(options, "controld", "[options]");
    return 0;
  case OPTS_VERSION:
    printf("controld %s\n", CDNCA_VERSION);
    return 0;
  case OPTS_ERROR:
    fprintf(stderr, "controld: %s (see --help)\n", err);
    return 2;
  case OPTS_OK:
    break;
  }
  if ((ctx.cfg.tls_cert[0] != '\0') != (ctx.cfg.tls_key[0] != '\0')) {
    fprintf(stderr, "controld: option tls-cert: --tls-cert and --tls-key go together\n");
    return 2;
  }
  for (int i = 0; log_levels[i]; i++)
    if (strcmp(log_levels[i], ctx.cfg.log_level) == 0) lvl = (enum log_level)i;
  log_init("controld", strcmp(ctx.cfg.log_format, "json") == 0 ? LOG_JSON : LOG_TEXT, lvl);

  /* signals are taken synchronously by main; every thread started later inherits the mask */
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  ctx.started_ms = clock_mono_ms();
  ctx.metrics = metrics_new();
  if (!ctx.metrics) goto out;
  declare_metrics(ctx.metrics);
  ctx.store = store_open(ctx.cfg.db);
  if (!ctx.store) goto out;
  if (enrol_admin_token(&ctx) < 0) goto out;
  ctx.site_cache = rcache_new(4096);
  if (!ctx.site_cache) goto out;
  ctx.hub = hub_new(ctx.store);
  ctx.tasks = tasks_new();
  if (!ctx.hub || !ctx.tasks) goto out;
  store_set_pub_hook(ctx.store, hub_on_publication, ctx.hub);
  {
    struct notify_policy np;
    notify_policy_defaults(&np);
    np.retry_min_ms = ctx.cfg.webhook_retry_ms;
    np.retry_max_ms = ctx.cfg.webhook_retry_max_ms;
    np.give_up_ms = ctx.cfg.webhook_give_up_ms;
    np.timeout_ms = ctx.cfg.webhook_timeout_ms;
    ctx.notify = notify_new(ctx.store, ctx.metrics, &np);
    if (!ctx.notify) goto out;
    store_set_event_hook(ctx.store, notify_wake, ctx.notify);
  }
  /* a site left on a level with no enabled origin (a database from an older controld) is
     switched before anything is served */
  if (engine_reevaluate_all(&ctx) < 0) log_warn("some sites could not be re-evaluated at start");
  if (http_start(&ctx, api_tables) < 0) goto out;
  ctx.prober = prober_new(&ctx);
  if (!ctx.prober || prober_start(ctx.prober) < 0) goto out;
  log_info("controld %s started (db %s, schema %d)", CDNCA_VERSION, ctx.cfg.db,
           store_schema_version(ctx.store));

  sigwait(&sigs, &sig);
  log_info("signal %d: shutting down", sig);
  http_quiesce(&ctx);
  ret = 0;
out:
  prober_free(&ctx.prober); /* cancels a round in flight; before the task board and store go */
  /* suspended long-polls must be answered before the daemon stops */
  if (ctx.hub) hub_shutdown(ctx.hub);
  if (ctx.tasks) tasks_shutdown(ctx.tasks);
  http_stop(&ctx);
  tasks_free(&ctx.tasks);
  hub_free(&ctx.hub);
  /* last writer of events gone: the delivery worker stops (in-flight attempts bounded) */
  if (ctx.store) store_set_event_hook(ctx.store, NULL, NULL);
  notify_free(&ctx.notify);
  store_close(&ctx.store);
  rcache_free(&ctx.site_cache);
  metrics_free(&ctx.metrics);
  return ret;
}
