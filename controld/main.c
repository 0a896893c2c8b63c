/* controld — the cdnca control daemon: REST API on SQLite, probe rounds, publication,
 * notifications. */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "addr.h"
#include "api.h"
#include "api_op.h"
#include "clock.h"
#include "coord.h"
#include "ctx.h"
#include "engine.h"
#include "export.h"
#include "hub.h"
#include "log.h"
#include "metrics.h"
#include "names.h"
#include "notify.h"
#include "opts.h"
#include "prober.h"
#include "rcache.h"
#include "retain.h"
#include "sdlisten.h"
#include "signals.h"
#include "sitemetrics.h"
#include "store.h"
#include "store_audit.h"
#include "store_drills.h"
#include "store_events.h"
#include "store_export.h"
#include "store_incidents.h"
#include "store_pub.h"
#include "svc.h"
#include "tasks.h"
#include "token.h"

static const char *const bools[] = {"true", "false", NULL};
static const char *const probe_clients[] = {"own", "curl", NULL};
/* --test-fault's words, indexed by enum api_op_fault */
static const char *const test_faults[] = {"none", "crash_after_change", "fail_reevaluate", NULL};

/* The listening sockets passed by systemd (socket activation), matched by address to --listen
   (fds[0]) and --admin-listen (fds[1]); -1 where none was passed. 0, or -1 (said on stderr)
   when a received socket matches neither. docs/design.md, Restarts and upgrades. */
static int take_sockets(const struct cd_config *c, int fds[2]) {
  struct sdlisten_addr got[SDLISTEN_MAX], want[2];
  int rfds[SDLISTEN_MAX], idx[2], n, m = 1;
  char err[300];
  fds[0] = fds[1] = -1;
  n = sdlisten_receive(rfds, got, SDLISTEN_MAX, err, sizeof err);
  if (n <= 0) {
    if (n < 0) fprintf(stderr, "controld: %s\n", err);
    return n;
  }
  memset(want, 0, sizeof want);
  if (addr_parse_listen(c->listen, 0, &want[0].sa, &want[0].len) < 0) return -1;
  if (c->admin_listen[0] && addr_parse_listen(c->admin_listen, 0, &want[1].sa, &want[1].len) == 0)
    m = 2;
  if (sdlisten_match(got, n, want, m, idx, err, sizeof err) < 0) {
    fprintf(stderr, "controld: %s\n", err);
    return -1;
  }
  for (int i = 0; i < m; i++)
    fds[i] = idx[i] >= 0 ? rfds[idx[i]] : -1;
  return 0;
}

/* The admin listener's connection cap: monitoring needs a handful. */
#define ADMIN_MAX_CONNECTIONS 256

#define O(f) offsetof(struct cd_config, f)
#define S(f) sizeof(((struct cd_config *)0)->f)
static const struct opt_def options[] = {
    {"listen", OPT_STR, O(listen), S(listen), 0, 0, NULL, "127.0.0.1:7400",
     "address:port of the REST API"},
    {"admin-listen", OPT_STR, O(admin_listen), S(admin_listen), 0, 0, NULL, NULL,
     "address:port of a listener serving only /healthz and /metrics, with its own small "
     "connection cap (empty = none)"},
    {"db", OPT_STR, O(db), S(db), 0, 0, NULL, "./controld.db", "SQLite database file"},
    {"deny-targets", OPT_STR, O(deny_targets), S(deny_targets), 0, 0, NULL, NULL,
     "CIDRs origins and webhooks may not point at, besides link-local, unspecified and metadata "
     "addresses (comma-separated)"},
    {"public-url", OPT_STR, O(public_url), S(public_url), 0, 0, NULL, NULL,
     "controld's address as people reach it (https://cdnca.example.org): Slack, PagerDuty and "
     "email notifications link to the dashboard under it"},
    {"probe-interval-ms", OPT_INT, O(probe_interval_ms), 0, 100, 86400000, NULL, "30000",
     "time between probe rounds"},
    {"probe-batch", OPT_INT, O(probe_batch), 0, 1, 1000000, NULL, "500",
     "sites probed per round at most"},
    {"node-online-ms", OPT_INT, O(node_online_ms), 0, 1000, 86400000, NULL, "60000",
     "a node is online when seen within this"},
    {"suspect-interval-ms", OPT_INT, O(suspect_interval_ms), 0, 0, 86400000, NULL, "0",
     "fast re-probe of sites with a state change pending (0 = off)"},
    {"checkpoint-url", OPT_STR, O(checkpoint_url), S(checkpoint_url), 0, 0, NULL, NULL,
     "checkpoint plugin URL (empty = none)"},
    {"probe-ca-file", OPT_STR, O(probe_ca_file), S(probe_ca_file), 0, 0, NULL, NULL,
     "CA bundle for HTTPS origin probes (empty = system)"},
    {"probe-client", OPT_ENUM, O(probe_client), S(probe_client), 0, 0, probe_clients, "own",
     "own = plain-HTTP and tcp probes of IP-literal origins on the prober's own HTTP client, the "
     "rest through libcurl; curl = every probe through libcurl"},
    {"tls-cert", OPT_STR, O(tls_cert), S(tls_cert), 0, 0, NULL, NULL,
     "serve the API over TLS with this certificate (PEM)"},
    {"tls-key", OPT_STR, O(tls_key), S(tls_key), 0, 0, NULL, NULL,
     "private key for --tls-cert (PEM)"},
    OPTS_LOG_ROWS(struct cd_config),
    {"max-connections", OPT_INT, O(max_connections), 0, 64, 1000000, NULL, "16384",
     "HTTP connection limit (long-polling nodes count)"},
    {"max-connections-per-ip", OPT_INT, O(max_connections_per_ip), 0, 0, 1000000, NULL, "64",
     "open connections from one address at most, on the API and the admin listener (0 = no "
     "cap)"},
    {"header-timeout-ms", OPT_INT, O(header_timeout_ms), 0, 100, 3600000, NULL, "10000",
     "a request head must be whole within this of the connection's start or the previous "
     "request's end (a long-poll is held only after its head)"},
    {"http-threads", OPT_INT, O(http_threads), 0, 1, 64, NULL, "2", "HTTP worker threads"},
    {"webhook-retry-ms", OPT_INT, O(webhook_retry_ms), 0, 1, 3600000, NULL, "1000",
     "first webhook retry delay (doubles per attempt)"},
    {"webhook-retry-max-ms", OPT_INT, O(webhook_retry_max_ms), 0, 1, 86400000, NULL, "600000",
     "cap of the webhook retry delay"},
    {"webhook-give-up-ms", OPT_INT, O(webhook_give_up_ms), 0, 100, 2592000000, NULL, "86400000",
     "a webhook delivery fails for good this long after its event"},
    {"metrics-max-sites", OPT_INT, O(metrics_max_sites), 0, 0, 1000000, NULL, "1000",
     "sites (first by id) with their own series in /metrics; the rest only count"},
    {"webhook-timeout-ms", OPT_INT, O(webhook_timeout_ms), 0, 100, 120000, NULL, "10000",
     "timeout of one webhook delivery attempt"},
    {"audit-retention-days", OPT_INT, O(audit_retention_days), 0, 1, 36500, NULL, "400",
     "audit log records older than this are deleted"},
    {"event-retention-days", OPT_INT, O(event_retention_days), 0, 1, 36500, NULL, "400",
     "events (site messages, notifications) older than this are deleted, hourly"},
    {"incident-quiet-ms", OPT_INT, O(incident_quiet_ms), 0, 0, 86400000, NULL, "300000",
     "an incident resolves after its site has been clear this long, and a new trigger this soon "
     "after a resolution reopens it"},
    {"incident-retention-days", OPT_INT, O(incident_retention_days), 0, 1, 36500, NULL, "400",
     "resolved incidents older than this are deleted with their timelines"},
    {"drill-retention-days", OPT_INT, O(drill_retention_days), 0, 1, 36500, NULL, "400",
     "finished failover drills older than this are deleted with their figures"},
    {"replica-name", OPT_STR, O(replica_name), S(replica_name), 0, 0, NULL, NULL,
     "cluster mode (PostgreSQL --db): this replica's name in the engine lease (empty = the host "
     "name)"},
    {"lease-ttl-ms", OPT_INT, O(lease_ttl_ms), 0, 300, 3600000, NULL, "15000",
     "cluster mode: the engine lease's lifetime; renewed every ttl/3, another replica takes over "
     "within ttl + ttl/3 of the engine's death"},
    {"engine-eligible", OPT_ENUM, O(engine_eligible), S(engine_eligible), 0, 0, bools, "true",
     "cluster mode: false = this replica never runs the engine (probe rounds, switching, "
     "webhook delivery, pruning)"},
    {"test-fault", OPT_ENUM, O(test_fault), S(test_fault), 0, 0, test_faults, "none",
     "for the test suite only: crash_after_change exits (status 70) between a write's change and "
     "its re-evaluation, fail_reevaluate makes the re-evaluation fail"},
    {"test-max-pages", OPT_INT, O(test_max_pages), 0, 0, 1000000000, NULL, "0",
     "for the test suite only: the SQLite database cannot grow past this many pages (a full "
     "disk); 0 = no limit"},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
#undef O
#undef S

/* What SIGHUP may change in a running controld; any other changed key waits for a restart. */
static const char *const reloadable[] = {
    "log-level",          "log-format",         "probe-interval-ms",
    "probe-batch",        "webhook-retry-ms",   "webhook-retry-max-ms",
    "webhook-give-up-ms", "webhook-timeout-ms", NULL,
};

/* Checks of a parsed configuration that need no file system, one per row: 0, or -1 with err
   naming the option. A start stops at the first failing one; --check-config reports each. */
static int check_targets(const struct cd_config *c, char *err, size_t errlen) {
  return targets_check_option(c->deny_targets, err, errlen);
}

static int check_tls_pair(const struct cd_config *c, char *err, size_t errlen) {
  if ((c->tls_cert[0] != '\0') != (c->tls_key[0] != '\0')) {
    snprintf(err, errlen, "option tls-cert: --tls-cert and --tls-key go together");
    return -1;
  }
  return 0;
}

static int check_listen(const struct cd_config *c, char *err, size_t errlen) {
  return addr_check_listen("listen", c->listen, err, errlen);
}

static int check_admin_listen(const struct cd_config *c, char *err, size_t errlen) {
  if (c->admin_listen[0] && addr_check_listen("admin-listen", c->admin_listen, err, errlen) < 0)
    return -1;
  if (c->admin_listen[0] && strcmp(c->admin_listen, c->listen) == 0) {
    snprintf(err, errlen, "option admin-listen: '%s' is the API's --listen", c->admin_listen);
    return -1;
  }
  return 0;
}

static int check_checkpoint_url(const struct cd_config *c, char *err, size_t errlen) {
  if (c->checkpoint_url[0] && strncasecmp(c->checkpoint_url, "http://", 7) != 0 &&
      strncasecmp(c->checkpoint_url, "https://", 8) != 0) {
    snprintf(err, errlen, "option checkpoint-url: '%s' is not an http:// or https:// URL",
             c->checkpoint_url);
    return -1;
  }
  return 0;
}

static int check_replica_name(const struct cd_config *c, char *err, size_t errlen) {
  for (const char *p = c->replica_name; *p; p++) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '.' || *p == '-' || *p == '_')) {
      snprintf(err, errlen, "option replica-name: '%s' may use only letters, digits, '.', '-', '_'",
               c->replica_name);
      return -1;
    }
  }
  return 0;
}

static int (*const config_checks[])(const struct cd_config *, char *, size_t) = {
    check_targets,      check_tls_pair,       check_listen,
    check_admin_listen, check_checkpoint_url, check_replica_name,
};

/* Every check of config_checks: 0, or -1 with err from the first that fails. */
static int config_valid(const struct cd_config *c, char *err, size_t errlen) {
  for (size_t i = 0; i < sizeof config_checks / sizeof *config_checks; i++)
    if (config_checks[i](c, err, errlen) < 0) return -1;
  return 0;
}

/* CDNCA_ADMIN_TOKEN, when set, must pass docs/operations.md#admin-token-strength. 0, or -1
 * with the reason and how to make a good one in err. */
static int admin_token_check(char *err, size_t errlen) {
  const char *tok = getenv("CDNCA_ADMIN_TOKEN"), *why;
  if (!tok || !*tok || !(why = token_admin_weakness(tok))) return 0;
  snprintf(err, errlen,
           "CDNCA_ADMIN_TOKEN is refused: %s; make one with `openssl rand -hex 32` and set it "
           "(the unit reads /etc/cdnca/controld.env)",
           why);
  return -1;
}

/* controld --check-config: every check, each error on its own line. Exit status 0 or 2. */
static int check_config(const struct cd_config *c) {
  char err[1024];
  int errors = 0;
  const struct {
    const char *option, *path;
  } files[] = {
      {"tls-cert", c->tls_cert}, {"tls-key", c->tls_key}, {"probe-ca-file", c->probe_ca_file}};

  for (size_t i = 0; i < sizeof config_checks / sizeof *config_checks; i++) {
    if (config_checks[i](c, err, sizeof err) < 0) {
      fprintf(stderr, "controld: %s\n", err);
      errors++;
    }
  }
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    if (!files[i].path[0]) continue;
    if (opts_check_readable(files[i].option, files[i].path, err, sizeof err) < 0) {
      fprintf(stderr, "controld: %s\n", err);
      errors++;
    }
  }
  if (c->log_file[0] && opts_check_appendable("log-file", c->log_file, err, sizeof err) < 0) {
    fprintf(stderr, "controld: %s\n", err);
    errors++;
  }
  if (admin_token_check(err, sizeof err) < 0) {
    fprintf(stderr, "controld: %s\n", err);
    errors++;
  }
  if (store_check(c->db, err, sizeof err) < 0) {
    fprintf(stderr, "controld: option db: %s\n", err);
    errors++;
  } else {
    printf("%s\n", err);
  }
  if (errors) return 2;
  printf("configuration OK\n");
  return 0;
}

static void notify_policy_from(const struct cd_config *c, struct notify_policy *np) {
  notify_policy_defaults(np);
  np->retry_min_ms = c->webhook_retry_ms;
  np->retry_max_ms = c->webhook_retry_max_ms;
  np->give_up_ms = c->webhook_give_up_ms;
  np->timeout_ms = c->webhook_timeout_ms;
  snprintf(np->public_url, sizeof np->public_url, "%s", c->public_url);
}

/* SIGHUP: reopen the log file, then re-read flags and --config and apply the reloadable keys.
   A bad file leaves everything as it runs. *loaded is the configuration last applied (main's
   own copy: the prober thread owns ctx->cfg's schedule fields while it runs). */
static void reload(struct ctx *ctx, struct cd_config *loaded, int argc, char **argv) {
  struct cd_config next;
  char err[512];
  const char *path = opts_config_path(argc, argv), *fixed;
  struct notify_policy np;

  if (loaded->log_file[0]) {
    if (log_open_file(loaded->log_file, err, sizeof err) < 0)
      log_error("SIGHUP: %s; logging goes on where it went", err);
    else
      log_info("SIGHUP: log file %s reopened", loaded->log_file);
  }
  if (!path) {
    log_info("SIGHUP: no --config file; nothing else to reload");
    return;
  }
  memset(&next, 0, sizeof next);
  if (opts_defaults(options, &next) < 0 ||
      opts_parse(options, &next, argc, argv, err, sizeof err) != OPTS_OK ||
      config_valid(&next, err, sizeof err) < 0) {
    log_error("SIGHUP: %s; the running configuration is kept", err);
    return;
  }
  while ((fixed = opts_changed(options, loaded, &next, reloadable))) {
    log_warn("SIGHUP: option %s changed in %s; it takes effect at the next restart", fixed, path);
    /* keep the running value so the next comparison moves on to the following option */
    opts_copy(options, &next, loaded, fixed);
  }
  log_set_names(next.log_format, next.log_level);
  notify_policy_from(&next, &np);
  np.deny = &ctx->targets; /* deny-targets is not reloadable: the list stays */
  notify_set_policy(ctx->notify, &np);
  prober_set_schedule(ctx->prober, next.probe_interval_ms, next.probe_batch);
  *loaded = next;
  log_info("SIGHUP: configuration reloaded from %s (log %s/%s, probe interval %lld ms, batch %lld, "
           "webhook retry %lld..%lld ms, give up %lld ms, timeout %lld ms)",
           path, next.log_format, next.log_level, (long long)next.probe_interval_ms,
           (long long)next.probe_batch, (long long)next.webhook_retry_ms,
           (long long)next.webhook_retry_max_ms, (long long)next.webhook_give_up_ms,
           (long long)next.webhook_timeout_ms);
}

/* Register the metric families of docs/design.md#metrics so they render from the start. */
static void declare_metrics(struct metrics *m) {
  metrics_declare(m, "cdnca_http_requests_total", "counter",
                  "REST API requests by route and status");
  metrics_declare(m, "cdnca_http_refused_total", "counter",
                  "connections refused or closed by listener and reason (per_ip: the address had "
                  "--max-connections-per-ip open; head_timeout: no whole request head in time)");
  metrics_declare(m, "cdnca_http_idle_closed_total", "counter",
                  "connections shut down at the request-head deadline that were no refusal, by "
                  "listener and kind (idle: no byte since its last answer; gone: its client had "
                  "closed)");
  metrics_declare(m, "cdnca_probe_rounds_total", "counter", "probe rounds run");
  metrics_declare(m, "cdnca_probe_round_seconds", "histogram", "probe round duration");
  metrics_declare(m, "cdnca_probes_total", "counter", "probe verdicts by source and result");
  metrics_declare(m, "cdnca_probes_not_made_total", "counter",
                  "own probes not made for want of controld's own resources (no descriptor, no "
                  "memory): no verdict from them");
  metrics_declare(m, "cdnca_level_switches_total", "counter",
                  "level switches by reason (a drill's are not counted)");
  metrics_declare(m, "cdnca_drills_total", "counter", "failover drills finished, by result");
  metrics_declare(m, "cdnca_incident_detect_seconds", "histogram",
                  "incidents: first failed verdict to the incident's opening");
  metrics_declare(m, "cdnca_incident_mitigate_seconds", "histogram",
                  "incidents: opening to mitigation (served from a healthy other level)");
  metrics_declare(m, "cdnca_incident_resolve_seconds", "histogram",
                  "incidents: opening to resolution");
  metrics_declare(m, "cdnca_nodes_online", "gauge", "nodes seen within node_online_ms");
  metrics_declare(m, "cdnca_webhook_deliveries_total", "counter",
                  "webhook delivery attempts by result");
  metrics_declare(m, "cdnca_signals_listening", "gauge",
                  "1 while this replica hears the others' changes (always 1 on SQLite)");
  metrics_declare(m, "cdnca_signals_received_total", "counter",
                  "notifications from the database handled (cluster mode)");
  metrics_declare(m, "cdnca_engine_leader", "gauge",
                  "1 while this replica holds the engine lease (always 1 with SQLite)");
  metrics_declare(m, "cdnca_db_up", "gauge", "1 while the database answers");
  metrics_declare(m, "cdnca_lease_epoch", "gauge",
                  "the engine lease's fencing epoch held by this replica (0 = none, SQLite)");
}

/* Make the token from the environment the admin token (hashed; earlier ones are revoked; in
 * cluster mode it is only made sure to exist: replicas must not revoke each other's), then wipe
 * it from the environment. Without it, the stored admin token stays. */
static int enrol_admin_token(struct ctx *ctx) {
  char *tok = getenv("CDNCA_ADMIN_TOKEN");
  char hash[65];
  if (!tok || !*tok) {
    log_info("CDNCA_ADMIN_TOKEN is not set: keeping the stored admin token");
    return 0;
  }
  token_sha256_hex(tok, strlen(tok), hash);
  token_wipe(tok, strlen(tok));
  unsetenv("CDNCA_ADMIN_TOKEN");
  return store_cluster(ctx->store) ? store_admin_token_ensure(ctx->store, hash)
                                   : store_admin_token_set(ctx->store, hash);
}

/* What is kept for a time, each with its option's days
   (docs/design.md#what-is-kept-and-for-how-long): pruned by the engine when it gains the role
   and then hourly. Publications back the incidents' and drills' propagation figures and the
   events' story: they are kept as long as the longest of the three. */
static struct retain *retain_setup(const struct cd_config *c, struct store *st) {
  int64_t pub_days = c->event_retention_days;
  if (c->incident_retention_days > pub_days) pub_days = c->incident_retention_days;
  if (c->drill_retention_days > pub_days) pub_days = c->drill_retention_days;
  const struct retain_job jobs[] = {
      {c->audit_retention_days * 86400000LL, store_audit_prune, "audit records"},
      {c->incident_retention_days * 86400000LL, store_incident_prune, "resolved incidents"},
      {c->drill_retention_days * 86400000LL, store_drill_prune, "finished drills"},
      {c->event_retention_days * 86400000LL, store_event_prune_all, "events"},
      {pub_days * 86400000LL, store_pub_prune, "publications"},
  };
  return retain_new(st, jobs, (int)(sizeof jobs / sizeof jobs[0]));
}

static void revoke_node_polls(void *hub, int64_t node_id);

/* The engine role's changes (coord.h: at start with SQLite; on the lease's role thread in cluster
   mode): only the engine runs probe rounds, switching, webhook delivery and pruning. The API and
   the hub never stop. */
static void on_role(void *arg, int engine, int64_t epoch) {
  struct ctx *ctx = arg;
  if (!engine) {
    prober_stop(ctx->prober); /* cancels a round in flight */
    notify_set_active(ctx->notify, 0);
    retain_set_active(ctx->retain, 0);
    return;
  }
  /* a site left on a level with no enabled origin is switched first, then the work starts */
  if (engine_reevaluate_all(ctx->engine) < 0)
    log_warn("engine epoch %lld: some sites could not be re-evaluated", (long long)epoch);
  retain_set_active(ctx->retain, 1);
  notify_set_active(ctx->notify, 1);
  /* rounds a former engine left open take no more votes (docs/design.md#probe-tasks-and-votes),
   * then rounds start */
  if (tasks_abort_older(ctx->tasks, epoch) < 0)
    log_warn("engine epoch %lld: open probe rounds of older epochs could not be aborted",
             (long long)epoch);
  if (prober_start(ctx->prober) < 0)
    log_error("engine epoch %lld: no probe rounds", (long long)epoch);
}

/* How this controld works with other replicas (coord.h): the one choice between the two modes.
   Made before the HTTP threads start, which read the role for /healthz and /metrics; started
   (coord_start) once the prober exists. 0 or -1. */
static int coord_setup(struct ctx *ctx) {
  if (store_cluster(ctx->store)) {
    struct coord_pg_cfg pc = {
        .replica_name = ctx->cfg.replica_name,
        .lease_ttl_ms = ctx->cfg.lease_ttl_ms,
        .eligible = strcmp(ctx->cfg.engine_eligible, "true") == 0,
        .signals = {hub_on_publication, revoke_node_polls, ctx->hub},
    };
    ctx->coord = coord_pg_new(ctx->store, &pc);
  } else {
    ctx->coord = coord_local_new();
  }
  if (!ctx->coord || coord_on_role(ctx->coord, on_role, ctx) < 0) return -1;
  /* the board in the database is woken by cdnca_tasks and cdnca_votes (never, in memory) */
  if (coord_subscribe(ctx->coord, SIGNAL_TASKS, tasks_signal, ctx->tasks) < 0 ||
      coord_subscribe(ctx->coord, SIGNAL_VOTES, tasks_signal, ctx->tasks) < 0 ||
      coord_subscribe(ctx->coord, SIGNAL_INVAL, tasks_signal, ctx->tasks) < 0)
    return -1;
  return 0;
}

/* controld --export FILE / --import FILE: move the configuration between databases (export.h),
   then exit: 0 done, 1 refused or failed (nothing imported), 2 usage. */
static int transfer(const struct cd_config *c, const char *export_path, const char *import_path) {
  struct store *st;
  struct targets deny;
  char msg[512];
  int rc;
  /* an import refuses the origins and webhooks the API would (link-local, --deny-targets) */
  if (targets_init(&deny, c->deny_targets, msg, sizeof msg) < 0) {
    fprintf(stderr, "controld: option deny-targets: %s\n", msg);
    return 2;
  }
  /* an export of a SQLite path must not create an empty database where a typo points */
  if (export_path && store_export_source_missing(c->db)) {
    fprintf(stderr, "controld: option db: no database at %s\n", c->db);
    return 1;
  }
  st = store_open(c->db);
  if (!st) {
    fprintf(stderr, "controld: %s: cannot open the database (see the log above)\n",
            export_path ? "export failed" : "import refused");
    return 1;
  }
  if (export_path)
    rc = export_write_file(st, export_path, CDNCA_VERSION, msg, sizeof msg);
  else
    rc = export_read_file(st, import_path, &deny, msg, sizeof msg);
  store_close(&st);
  if (rc < 0) {
    fprintf(stderr, "controld: %s %s\n", export_path ? "export failed:" : "import refused:", msg);
    return 1;
  }
  printf("%s\n", msg);
  return 0;
}

/* controld --migrate: open the database, apply the schema migrations a start would apply (under
   the migration lock), then exit: 0 with the schema version printed, 1 when it cannot. */
static int migrate_only(const struct cd_config *c) {
  struct store *st = store_open(c->db);
  if (!st) {
    fprintf(stderr, "controld: migration failed: cannot open the database (see the log above)\n");
    return 1;
  }
  printf("database %s at schema %d\n", store_db_label(st), store_schema_version(st));
  store_close(&st);
  return 0;
}

struct reload_arg {
  struct ctx *ctx;
  struct cd_config *loaded;
  int argc;
  char **argv;
};

static void on_sighup(void *arg) {
  struct reload_arg *ra = arg;
  reload(ra->ctx, ra->loaded, ra->argc, ra->argv);
}

/* signals' node_revoked hook: a node deleted on another replica loses its held config poll. */
static void revoke_node_polls(void *hub, int64_t node_id) {
  hub_node_revoked(hub, node_id);
}

int main(int argc, char **argv) {
  struct ctx ctx;
  struct engine_env engine;
  struct cd_config loaded;
  char err[512];
  sigset_t sigs;
  int sig = 0, ret = 1, check, xr, ir, mig, cluster = 0, listen_fds[2] = {-1, -1};
  const char *export_path = NULL, *import_path = NULL;

  memset(&ctx, 0, sizeof ctx);
  memset(&engine, 0, sizeof engine);
  check = opts_take_flag(&argc, argv, "--check-config");
  mig = opts_take_flag(&argc, argv, "--migrate");
  xr = opts_take_value(&argc, argv, "--export", &export_path);
  ir = opts_take_value(&argc, argv, "--import", &import_path);
  if (xr < 0 || ir < 0) {
    fprintf(stderr, "controld: --%s needs a FILE (see --help)\n", xr < 0 ? "export" : "import");
    return 2;
  }
  if (xr + ir + check + mig > 1) {
    fprintf(stderr,
            "controld: --check-config, --migrate, --export and --import go one at a time\n");
    return 2;
  }
  ret = opts_start(options, &ctx.cfg, argc, argv, "controld",
                   "[--check-config | --migrate | --export FILE | --import FILE] "
                   "[--deny-targets CIDR[,CIDR...]] [options]");
  if (ret >= 0) return ret;
  ret = 1;
  if (check) return check_config(&ctx.cfg);
  if (export_path || import_path || mig) {
    log_init("controld", LOG_TEXT, LOG_INFO);
    log_set_names(ctx.cfg.log_format, ctx.cfg.log_level);
    return mig ? migrate_only(&ctx.cfg) : transfer(&ctx.cfg, export_path, import_path);
  }
  if (config_valid(&ctx.cfg, err, sizeof err) < 0 || admin_token_check(err, sizeof err) < 0) {
    fprintf(stderr, "controld: %s\n", err);
    return 2;
  }
  if (targets_init(&ctx.targets, ctx.cfg.deny_targets, err, sizeof err) < 0) return 2;
  if (take_sockets(&ctx.cfg, listen_fds) < 0) return 1;
  log_init("controld", LOG_TEXT, LOG_INFO);
  log_set_names(ctx.cfg.log_format, ctx.cfg.log_level);
  if (ctx.cfg.log_file[0] && log_open_file(ctx.cfg.log_file, err, sizeof err) < 0) {
    fprintf(stderr, "controld: option log-file: %s\n", err);
    return 1;
  }
  loaded = ctx.cfg;

  /* signals are taken synchronously by main; every thread started later inherits the mask */
  svc_block_signals(&sigs);

  ctx.started_ms = clock_mono_ms();
  ctx.metrics = metrics_new();
  if (!ctx.metrics) goto out;
  declare_metrics(ctx.metrics);
  ctx.store = store_open(ctx.cfg.db);
  if (!ctx.store) goto out;
  cluster = store_cluster(ctx.store);
  /* the test suite's seams: off unless asked for */
  {
    int f = names_value(test_faults, 3, ctx.cfg.test_fault);
    api_op_set_fault(f > 0 ? (enum api_op_fault)f : API_OP_FAULT_NONE);
  }
  if (ctx.cfg.test_max_pages > 0 && store_set_max_pages(ctx.store, ctx.cfg.test_max_pages) < 0)
    log_warn("--test-max-pages: not an SQLite database; no limit");
  if (enrol_admin_token(&ctx) < 0) goto out;
  /* the audit log keeps its retention: what is older goes when this process becomes the engine
     (on_role), the rest as writes come */
  store_audit_set_retention(ctx.store, ctx.cfg.audit_retention_days * 86400000LL);
  ctx.sitemetrics =
      sitemetrics_new(ctx.store, (int)ctx.cfg.metrics_max_sites, ctx.cfg.node_online_ms);
  if (!ctx.sitemetrics) goto out;
  ctx.site_cache = rcache_new(4096);
  if (!ctx.site_cache) goto out;
  ctx.hub = hub_new(ctx.store);
  if (ctx.hub) hub_watch_nodes(ctx.hub, ctx.cfg.node_online_ms);
  if (ctx.hub) hub_set_deny_targets(ctx.hub, ctx.cfg.deny_targets);
  /* the task board in the database in cluster mode: any replica takes task polls and votes */
  ctx.tasks = tasks_new(cluster ? ctx.store : NULL);
  if (!ctx.hub || !ctx.tasks) goto out;
  store_set_pub_hook(ctx.store, hub_on_publication, ctx.hub);
  if (coord_setup(&ctx) < 0) goto out;
  {
    struct notify_policy np;
    notify_policy_from(&ctx.cfg, &np);
    np.deny = &ctx.targets;
    np.start_inactive = 1; /* until this process has the engine role (on_role) */
    ctx.notify = notify_new(ctx.store, ctx.metrics, &np);
    if (!ctx.notify) goto out;
    store_set_event_hook(ctx.store, notify_wake, ctx.notify);
  }
  if (!(ctx.retain = retain_setup(&ctx.cfg, ctx.store))) goto out;
  engine.store = ctx.store;
  engine.metrics = ctx.metrics;
  engine.probe_interval_ms = ctx.cfg.probe_interval_ms;
  engine.suspect_interval_ms = ctx.cfg.suspect_interval_ms;
  engine.incident_quiet_ms = ctx.cfg.incident_quiet_ms;
  ctx.engine = &engine;
  {
    struct prober_env pe = {
        .store = ctx.store,
        .tasks = ctx.tasks,
        .metrics = ctx.metrics,
        .engine = ctx.engine,
        .deny = &ctx.targets,
        .probe_interval_ms = ctx.cfg.probe_interval_ms,
        .suspect_interval_ms = ctx.cfg.suspect_interval_ms,
        .probe_batch = ctx.cfg.probe_batch,
        .node_online_ms = ctx.cfg.node_online_ms,
        .probe_ca_file = ctx.cfg.probe_ca_file,
        .probe_curl = strcmp(ctx.cfg.probe_client, "curl") == 0,
        .checkpoint_url = ctx.cfg.checkpoint_url,
    };
    ctx.prober = prober_new(&pe);
  }
  if (!ctx.prober) goto out;
  /* the engine work starts when this process has the engine role: at once with SQLite (a site
     left on a level with no enabled origin is switched before anything is served), when the
     lease is won in cluster mode */
  if (coord_start(ctx.coord) < 0) goto out;
  {
    struct http_cfg hc = {.listen = ctx.cfg.listen,
                          .listen_fd = listen_fds[0],
                          .name = "api",
                          .max_connections = ctx.cfg.max_connections,
                          .cap_option = "--max-connections",
                          .max_per_ip = ctx.cfg.max_connections_per_ip,
                          .head_timeout_ms = ctx.cfg.header_timeout_ms,
                          .http_threads = ctx.cfg.http_threads,
                          .tls_cert = ctx.cfg.tls_cert,
                          .tls_key = ctx.cfg.tls_key,
                          .metrics = ctx.metrics,
                          .app = &ctx,
                          .authenticate = api_authenticate};
    if (!(ctx.http = http_start(&hc, api_tables))) goto out;
    if (ctx.cfg.admin_listen[0]) {
      /* health checks and Prometheus are never starved by API clients (docs/design.md,
         Restarts and upgrades): their own daemon, cap and threads */
      static const struct route *const admin_tables[] = {api_misc_routes, NULL};
      hc.listen = ctx.cfg.admin_listen;
      hc.listen_fd = listen_fds[1];
      hc.name = "admin";
      hc.max_connections = ADMIN_MAX_CONNECTIONS;
      hc.cap_option = NULL;
      hc.http_threads = 1;
      hc.tls_cert = hc.tls_key = NULL;
      if (!(ctx.admin_http = http_start(&hc, admin_tables))) goto out;
    }
  }
  log_info("controld %s started (db %s, schema %d)", CDNCA_VERSION, store_db_label(ctx.store),
           store_schema_version(ctx.store));
  /* the listener answers and the database is open and migrated: ready */
  svc_ready("serving the API");
  {
    struct reload_arg ra = {&ctx, &loaded, argc, argv};
    sig = svc_loop(&sigs, "serving the API", on_sighup, &ra);
  }
  log_info("signal %d: shutting down", sig);
  ret = 0;
out:
  /* a prune in progress (retain, the delivery worker) ends after its batch: a first prune of a
     large old database would otherwise hold the exit for minutes */
  if (ctx.store) store_prune_stop(ctx.store);
  coord_stop(ctx.coord);    /* stops the engine work (role lost), then releases the lease row */
  prober_free(&ctx.prober); /* cancels a round in flight; before the task board and store go */
  /* suspended long-polls must be answered before the daemon stops */
  if (ctx.hub) hub_shutdown(ctx.hub);
  if (ctx.tasks) tasks_shutdown(ctx.tasks);
  /* received sockets: what was accepted is answered, the rest waits for the next process */
  http_drain(ctx.http, HTTP_DRAIN_MS);
  http_drain(ctx.admin_http, HTTP_DRAIN_MS);
  http_stop(&ctx.admin_http);
  http_stop(&ctx.http);
  /* after the last reader of its role (/healthz, /metrics), before what its threads call (hub,
     task board) */
  coord_free(&ctx.coord);
  tasks_free(&ctx.tasks);
  hub_free(&ctx.hub);
  /* last writer of events gone: the delivery worker stops (in-flight attempts bounded) */
  if (ctx.store) store_set_event_hook(ctx.store, NULL, NULL);
  notify_free(&ctx.notify);
  retain_free(&ctx.retain);
  store_close(&ctx.store);
  rcache_free(&ctx.site_cache);
  sitemetrics_free(&ctx.sitemetrics);
  metrics_free(&ctx.metrics);
  return ret;
}
