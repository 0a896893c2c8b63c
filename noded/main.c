/* noded — the cdnca edge node agent: config sync with a disk cache, probe tasks and votes,
   heartbeats, the visitor reverse proxy and the admin listener. */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "addr.h"
#include "admin.h"
#include "clock.h"
#include "ctl.h"
#include "ctlset.h"
#include "drain.h"
#include "enrol.h"
#include "heartbeat.h"
#include "json.h"
#include "listen.h"
#include "log.h"
#include "opts.h"
#include "proxy.h"
#include "sdlisten.h"
#include "sitecfg.h"
#include "svc.h"
#include "sync.h"
#include "targets.h"
#include "tasks.h"
#include "token.h"
#include "trust.h"
#include "upgrade.h"

/* Options of the command line and the --config file. */
struct node_cfg {
  char controld[CTLSET_MAX * CTLSET_URL_MAX]; /* one URL or URL1,URL2,… */
  char listen[LISTEN_MAX * 256];              /* --listen values joined by '\n' (OPT_LIST) */
  char trusted_proxies[2048];
  char admin_listen[128];
  char state_dir[512];
  char name[65];
  char enrol_key_file[512];
  char origin_ca_file[512];
  char deny_targets[1024]; /* CIDRs refused besides the built-in ones and controld's */
  char probe_client[8];    /* "own" | "curl" */
  char controld_ca_file[512];
  char log_format[8];
  char log_level[8];
  char log_file[512];
  int64_t heartbeat_interval_ms;
  int64_t config_wait_ms;
  int64_t proxy_threads;
  int64_t metrics_max_origins;
  int64_t header_timeout_ms;
  int64_t keepalive_timeout_ms;
  int64_t body_timeout_ms;
  int64_t max_connections;
  int64_t origin_keepalive;
  int64_t drain_timeout_ms;
  int64_t max_connections_per_ip;
};

/* The node's one context. */
struct node {
  struct node_cfg cfg;
  struct ctl ctl;
  struct proxy *proxy;
  struct sync *sync;
  struct heartbeat *hb;
  struct ntasks *tasks;
  struct admin *admin;
  int64_t started_ms;
  char self[1024]; /* the binary's path at start, re-executed by a SIGUSR2 upgrade */
  char **argv;
};

/* A new binary has this long to say it is ready before the upgrade counts as failed. */
#define UPGRADE_TIMEOUT_MS 60000

static const char *const probe_clients[] = {"own", "curl", NULL};
#define O(f) offsetof(struct node_cfg, f)
#define S(f) sizeof(((struct node_cfg *)0)->f)
static const struct opt_def options[] = {
    {"controld", OPT_STR, O(controld), S(controld), 0, 0, NULL, NULL,
     "controld base URL, or the replicas as URL1,URL2,... (up to 8; required)"},
    {"listen", OPT_LIST, O(listen), S(listen), 0, 0, NULL, "127.0.0.1:7480",
     "visitor listener, repeatable: host:port, [v6]:port or unix:/path, then options "
     "(,proxy-protocol; unix: ,mode=0660 ,owner=USER ,group=GROUP)"},
    {"trusted-proxies", OPT_STR, O(trusted_proxies), S(trusted_proxies), 0, 0, NULL, NULL,
     "CIDR,...,unix: peers whose X-Forwarded-For is extended (anyone else's is replaced; "
     "unix = every Unix-socket peer)"},
    {"admin-listen", OPT_STR, O(admin_listen), S(admin_listen), 0, 0, NULL, "127.0.0.1:7401",
     "address:port of /healthz, /status, /metrics"},
    {"state-dir", OPT_STR, O(state_dir), S(state_dir), 0, 0, NULL, "./noded-state",
     "directory of the config cache and the node token"},
    {"name", OPT_STR, O(name), S(name), 0, 0, NULL, NULL,
     "node name shown in /status and enrolled as (default: host name)"},
    {"enrol-key-file", OPT_STR, O(enrol_key_file), S(enrol_key_file), 0, 0, NULL, NULL,
     "file holding an enrolment key: used once, at a start with no node token (none in "
     "CDNCA_NODE_TOKEN or the state directory)"},
    {"origin-ca-file", OPT_STR, O(origin_ca_file), S(origin_ca_file), 0, 0, NULL, NULL,
     "CA bundle for HTTPS origins (empty = system)"},
    {"deny-targets", OPT_STR, O(deny_targets), S(deny_targets), 0, 0, NULL, NULL,
     "CIDRs origins may not resolve to, added to controld's --deny-targets and the built-in "
     "link-local, unspecified and metadata addresses (comma-separated)"},
    {"probe-client", OPT_ENUM, O(probe_client), S(probe_client), 0, 0, probe_clients, "own",
     "own = plain-HTTP and tcp probes of IP-literal origins on the prober's own HTTP client, the "
     "rest through libcurl; curl = every probe through libcurl"},
    {"controld-ca-file", OPT_STR, O(controld_ca_file), S(controld_ca_file), 0, 0, NULL, NULL,
     "CA bundle for an https controld (empty = system)"},
    OPTS_LOG_ROWS(struct node_cfg),
    {"heartbeat-interval-ms", OPT_INT, O(heartbeat_interval_ms), 0, 100, 3600000, NULL, "10000",
     "time between heartbeats"},
    {"config-wait-ms", OPT_INT, O(config_wait_ms), 0, 0, 60000, NULL, "25000",
     "long-poll hold asked of controld"},
    {"proxy-threads", OPT_INT, O(proxy_threads), 0, 1, 64, NULL, "2",
     "visitor proxy worker threads"},
    {"metrics-max-origins", OPT_INT, O(metrics_max_origins), 0, 0, 1000000, NULL, "1000",
     "skipped origins labelled in /metrics at most (the rest only count)"},
    {"header-timeout-ms", OPT_INT, O(header_timeout_ms), 0, 100, 3600000, NULL, "10000",
     "a visitor's whole request head must arrive within this"},
    {"keepalive-timeout-ms", OPT_INT, O(keepalive_timeout_ms), 0, 100, 3600000, NULL, "60000",
     "idle visitor keep-alive connections are closed after this"},
    {"body-timeout-ms", OPT_INT, O(body_timeout_ms), 0, 100, 3600000, NULL, "60000",
     "a visitor silent this long while its request body is read is closed"},
    {"max-connections", OPT_INT, O(max_connections), 0, 1, 1000000, NULL, "10000",
     "open visitor connections at most (accepting pauses at the cap)"},
    {"origin-keepalive", OPT_INT, O(origin_keepalive), 0, 0, 100000, NULL, "32",
     "idle origin connections kept per origin and proxy thread (0 = none)"},
    {"max-connections-per-ip", OPT_INT, O(max_connections_per_ip), 0, 0, 1000000, NULL, "64",
     "open admin-listener connections from one address at most (0 = no cap)"},
    {"drain-timeout-ms", OPT_INT, O(drain_timeout_ms), 0, 0, 3600000, NULL, "30000",
     "after SIGTERM (or a SIGUSR2 upgrade) in-flight requests and tunnels get this long; a "
     "second SIGTERM ends them at once"},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
#undef O
#undef S

/* What SIGHUP may change in a running noded; any other changed key waits for a restart. */
static const char *const reloadable[] = {"log-level", "log-format", NULL};

/* ---- glue between the modules ---- */

static void on_config(void *arg, struct sitecfg_set *set) {
  struct node *n = arg;
  if (n->proxy && proxy_set_config(n->proxy, set) < 0)
    log_error("the proxy could not take config seq %lld; it keeps the previous one",
              (long long)set->seq);
}

/* A probe task's outcome also feeds the proxy's skip state (docs/design.md#node-skip-and-retry). */
static void on_probe_result(void *arg, int64_t origin_id, int ok) {
  struct node *n = arg;
  if (n->proxy) proxy_probe_result(n->proxy, origin_id, ok);
}

/* The node's probes refuse what its proxy refuses (docs/design.md#errors-and-limits). */
static void on_deny(void *arg, struct targets *out) {
  struct node *n = arg;
  if (n->proxy) proxy_deny_copy(n->proxy, out);
}

static cJSON *on_observations(void *arg) {
  struct node *n = arg;
  return n->proxy ? proxy_observations(n->proxy) : NULL;
}

/* Sites as the sync holds them (used when the proxy gives no status). */
static cJSON *sites_from_sync(struct node *n) {
  struct sitecfg_set *set = sync_current(n->sync);
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; set && i < set->n_sites; i++) {
    const struct sitecfg_site *s = set->sites[i];
    cJSON *o = cJSON_CreateObject(), *og = NULL;
    json_add_i64(o, "id", s->id);
    cJSON_AddStringToObject(o, "name", s->name);
    json_add_i64(o, "config_version", s->config_version);
    cJSON_AddNumberToObject(o, "current_level", s->current_level);
    og = cJSON_AddArrayToObject(o, "origins");
    for (int k = 0; k < s->n_origins; k++) {
      cJSON *x = cJSON_CreateObject();
      json_add_i64(x, "id", s->origins[k].id);
      cJSON_AddNumberToObject(x, "level", s->origins[k].level);
      cJSON_AddItemToArray(og, x);
    }
    cJSON_AddItemToArray(arr, o);
  }
  sitecfg_set_unref(set);
  return arr;
}

static int on_status(void *arg, cJSON *out) {
  struct node *n = arg;
  struct sync_info si;
  int64_t sent, failed, last_ok, rounds, probes, late;
  cJSON *node, *sy, *hb, *tk, *ps = NULL, *sites = NULL;
  sync_get_info(n->sync, &si);
  node = cJSON_AddObjectToObject(out, "node");
  if (si.node_id > 0)
    json_add_i64(node, "id", si.node_id);
  else
    cJSON_AddNullToObject(node, "id");
  cJSON_AddStringToObject(node, "name", n->cfg.name);
  cJSON_AddStringToObject(node, "version", CDNCA_VERSION);
  json_add_i64(node, "uptime_ms", clock_mono_ms() - n->started_ms);
  {
    char url[CTLSET_URL_MAX];
    int idx, nurl;
    int64_t switches;
    ctl_replica(&n->ctl, url, sizeof url, &idx, &nurl, &switches);
    cJSON_AddStringToObject(node, "controld", url);
    cJSON_AddNumberToObject(node, "controld_index", idx);
    cJSON_AddNumberToObject(node, "controld_count", nurl);
    json_add_i64(node, "controld_switches", switches);
    json_add_i64(node, "controld_retry_in_ms", ctl_backoff_left(&n->ctl));
  }
  json_add_i64(out, "seq", si.seq);
  sy = cJSON_AddObjectToObject(out, "sync");
  cJSON_AddStringToObject(sy, "state", sync_state_name(si.state));
  cJSON_AddBoolToObject(sy, "revoked", si.state == SYNC_REVOKED);
  json_add_i64(sy, "seq", si.seq);
  cJSON_AddBoolToObject(sy, "from_cache", si.from_cache);
  json_add_time(sy, "last_ok_at", si.last_ok_wall);
  cJSON_AddNumberToObject(sy, "failures", si.failures);
  json_add_str_or_null(sy, "last_error", si.last_error[0] ? si.last_error : NULL);
  json_add_i64(sy, "cached_seq", si.cached_seq);
  json_add_str_or_null(sy, "cache_error", si.cache_error[0] ? si.cache_error : NULL);
  heartbeat_stats(n->hb, &sent, &failed, &last_ok);
  hb = cJSON_AddObjectToObject(out, "heartbeat");
  json_add_i64(hb, "sent", sent);
  json_add_i64(hb, "failed", failed);
  json_add_time(hb, "last_ok_at", last_ok);
  ntasks_stats(n->tasks, &rounds, &probes, &late);
  tk = cJSON_AddObjectToObject(out, "probe_tasks");
  json_add_i64(tk, "rounds", rounds);
  json_add_i64(tk, "probes", probes);
  json_add_i64(tk, "late", late);
  if (n->proxy) ps = proxy_status(n->proxy);
  if (ps) sites = cJSON_DetachItemFromObjectCaseSensitive(ps, "sites");
  cJSON_Delete(ps);
  cJSON_AddItemToObject(out, "sites", sites ? sites : sites_from_sync(n));
  return 0;
}

static int on_metrics(void *arg, struct buf *out) {
  struct node *n = arg;
  struct sync_info si;
  int64_t sent, failed, last_ok, rounds, probes, late, switches;
  int idx, nurl;
  sync_get_info(n->sync, &si);
  heartbeat_stats(n->hb, &sent, &failed, &last_ok);
  ntasks_stats(n->tasks, &rounds, &probes, &late);
  ctl_replica(&n->ctl, NULL, 0, &idx, &nurl, &switches);
  if (n->proxy && proxy_metrics(n->proxy, out) < 0) return -1;
  if (admin_metrics(n->admin, out) < 0) return -1;
  if (n->proxy && proxy_skip_metrics(n->proxy, (int)n->cfg.metrics_max_origins, out) < 0) return -1;
  if (!n->proxy &&
      buf_printf(out, "# TYPE cdnca_node_config_seq gauge\ncdnca_node_config_seq %lld\n",
                 (long long)si.seq) < 0)
    return -1;
  if (buf_printf(out,
                 "# HELP cdnca_node_sync_state config sync state (1 for the current one)\n"
                 "# TYPE cdnca_node_sync_state gauge\n"
                 "cdnca_node_sync_state{state=\"%s\"} 1\n"
                 "# HELP cdnca_node_sync_failures consecutive failed config polls\n"
                 "# TYPE cdnca_node_sync_failures gauge\n"
                 "cdnca_node_sync_failures %d\n"
                 "# HELP cdnca_node_heartbeats_total heartbeats by result\n"
                 "# TYPE cdnca_node_heartbeats_total counter\n"
                 "cdnca_node_heartbeats_total{result=\"ok\"} %lld\n"
                 "cdnca_node_heartbeats_total{result=\"failed\"} %lld\n"
                 "# HELP cdnca_node_probe_rounds_total probe rounds run for controld\n"
                 "# TYPE cdnca_node_probe_rounds_total counter\n"
                 "cdnca_node_probe_rounds_total %lld\n"
                 "# HELP cdnca_node_probes_total origin probes run for controld\n"
                 "# TYPE cdnca_node_probes_total counter\n"
                 "cdnca_node_probes_total %lld\n"
                 "# HELP cdnca_node_controld_index the controld in use: its 0-based index in "
                 "--controld\n"
                 "# TYPE cdnca_node_controld_index gauge\n"
                 "cdnca_node_controld_index %d\n"
                 "# HELP cdnca_node_controld_urls controld URLs listed in --controld\n"
                 "# TYPE cdnca_node_controld_urls gauge\n"
                 "cdnca_node_controld_urls %d\n"
                 "# HELP cdnca_node_controld_switches_total moves to the next controld (one was "
                 "away)\n"
                 "# TYPE cdnca_node_controld_switches_total counter\n"
                 "cdnca_node_controld_switches_total %lld\n",
                 sync_state_name(si.state), si.failures, (long long)sent, (long long)failed,
                 (long long)rounds, (long long)probes, idx, nurl, (long long)switches) < 0)
    return -1;
  return 0;
}

/* ---- configuration checks and reload ---- */

/* Checks of a parsed configuration that need no file system, one per row: 0, or -1 with err
   naming the option. A start stops at the first failing one; --check-config reports each. */
static int check_controld(const struct node_cfg *c, char *err, size_t errlen) {
  struct ctlset set;
  return ctlset_parse(&set, c->controld, err, errlen);
}

static int check_listen(const struct node_cfg *c, char *err, size_t errlen) {
  struct listen_spec ls[LISTEN_MAX];
  return listen_parse_list(c->listen, ls, LISTEN_MAX, err, errlen) < 0 ? -1 : 0;
}

static int check_trusted_proxies(const struct node_cfg *c, char *err, size_t errlen) {
  struct trust t;
  return trust_parse(c->trusted_proxies, &t, err, errlen);
}

static int check_admin_listen(const struct node_cfg *c, char *err, size_t errlen) {
  return addr_check_listen("admin-listen", c->admin_listen, err, errlen);
}

static int check_deny_targets(const struct node_cfg *c, char *err, size_t errlen) {
  return targets_check_option(c->deny_targets, err, errlen);
}

static int (*const config_checks[])(const struct node_cfg *, char *, size_t) = {
    check_controld, check_deny_targets, check_listen, check_trusted_proxies, check_admin_listen,
};

/* Every check of config_checks: 0, or -1 with err from the first that fails. */
static int config_valid(const struct node_cfg *c, char *err, size_t errlen) {
  for (size_t i = 0; i < sizeof config_checks / sizeof *config_checks; i++)
    if (config_checks[i](c, err, errlen) < 0) return -1;
  return 0;
}

/* The state directory exists and is writable, or can be created. 0 or -1 with err. */
static int check_state_dir(const char *dir, char *err, size_t errlen) {
  struct stat st;
  if (stat(dir, &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      snprintf(err, errlen, "option state-dir: %s is not a directory", dir);
      return -1;
    }
    if (access(dir, W_OK | X_OK) < 0) {
      snprintf(err, errlen, "option state-dir: %s is not writable: %s", dir, strerror(errno));
      return -1;
    }
    return 0;
  }
  return opts_check_appendable("state-dir", dir, err, errlen);
}

#define NO_TOKEN                                                                                   \
  "no node token: set CDNCA_NODE_TOKEN, or give an enrolment key (--enrol-key-file or "            \
  "CDNCA_ENROL_KEY) for the first start"

/* noded --check-config: every check, each error on its own line. Exit status 0 or 2. */
static int check_config(const struct node_cfg *c) {
  char err[1024];
  int errors = 0;
  struct ctl ctl;
  const struct {
    const char *option, *path;
  } files[] = {{"origin-ca-file", c->origin_ca_file}, {"controld-ca-file", c->controld_ca_file}};

  for (size_t i = 0; i < sizeof config_checks / sizeof *config_checks; i++) {
    if (config_checks[i](c, err, sizeof err) < 0) {
      fprintf(stderr, "noded: %s\n", err);
      errors++;
    }
  }
  if (check_controld(c, err, sizeof err) == 0) {
    char *tok = getenv("CDNCA_NODE_TOKEN");
    if (ctl_init(&ctl, c->controld, tok, c->controld_ca_file, err, sizeof err) < 0) {
      fprintf(stderr, "noded: %s\n", err);
      errors++;
    }
    ctl_fini(&ctl);
  }
  /* a node token, or the means to get one (docs/design.md#enrolment-keys) */
  if (c->enrol_key_file[0] &&
      opts_check_readable("enrol-key-file", c->enrol_key_file, err, sizeof err) < 0) {
    fprintf(stderr, "noded: %s\n", err);
    errors++;
  } else if (!getenv("CDNCA_NODE_TOKEN") && !getenv("CDNCA_ENROL_KEY") && !c->enrol_key_file[0]) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", c->state_dir, ENROL_TOKEN_FILE);
    if (access(path, R_OK) < 0) {
      fprintf(stderr, "noded: %s\n", NO_TOKEN);
      errors++;
    }
  }
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    if (!files[i].path[0]) continue;
    if (opts_check_readable(files[i].option, files[i].path, err, sizeof err) < 0) {
      fprintf(stderr, "noded: %s\n", err);
      errors++;
    }
  }
  if (check_listen(c, err, sizeof err) == 0) { /* the owners and groups of Unix sockets exist */
    struct listen_spec ls[LISTEN_MAX];
    int n = listen_parse_list(c->listen, ls, LISTEN_MAX, err, sizeof err);
    for (int i = 0; i < n; i++) {
      uid_t uid;
      gid_t gid;
      if (ls[i].is_unix && listen_ids(&ls[i], &uid, &gid, err, sizeof err) < 0) {
        fprintf(stderr, "noded: %s\n", err);
        errors++;
      }
    }
  }
  if (check_state_dir(c->state_dir, err, sizeof err) < 0) {
    fprintf(stderr, "noded: %s\n", err);
    errors++;
  }
  if (c->log_file[0] && opts_check_appendable("log-file", c->log_file, err, sizeof err) < 0) {
    fprintf(stderr, "noded: %s\n", err);
    errors++;
  }
  if (errors) return 2;
  printf("configuration OK\n");
  return 0;
}

struct reload_arg {
  struct node_cfg *loaded; /* the configuration last applied (main thread only) */
  struct proxy *proxy;     /* its buffered access lines go to the old file first */
  int argc;
  char **argv;
};

/* SIGHUP: reopen the log file, then re-read flags and --config and apply the reloadable keys.
   A bad file leaves everything as it runs. */
static void on_sighup(void *arg) {
  struct reload_arg *ra = arg;
  struct node_cfg next;
  char err[512];
  const char *path = opts_config_path(ra->argc, ra->argv), *fixed;

  if (ra->loaded->log_file[0]) {
    proxy_flush_log(ra->proxy);
    if (log_open_file(ra->loaded->log_file, err, sizeof err) < 0)
      log_error("SIGHUP: %s; logging goes on where it went", err);
    else
      log_info("SIGHUP: log file %s reopened", ra->loaded->log_file);
  }
  if (!path) {
    log_info("SIGHUP: no --config file; nothing else to reload");
    return;
  }
  memset(&next, 0, sizeof next);
  if (opts_defaults(options, &next) < 0 ||
      opts_parse(options, &next, ra->argc, ra->argv, err, sizeof err) != OPTS_OK ||
      config_valid(&next, err, sizeof err) < 0) {
    log_error("SIGHUP: %s; the running configuration is kept", err);
    return;
  }
  if (!next.name[0]) memcpy(next.name, ra->loaded->name, sizeof next.name);
  while ((fixed = opts_changed(options, ra->loaded, &next, reloadable))) {
    log_warn("SIGHUP: option %s changed in %s; it takes effect at the next restart", fixed, path);
    opts_copy(options, &next, ra->loaded, fixed);
  }
  log_set_names(next.log_format, next.log_level);
  *ra->loaded = next;
  log_info("SIGHUP: configuration reloaded from %s (log %s/%s)", path, next.log_format,
           next.log_level);
}

/* ---- the main loop: serving, draining (docs/design.md, Restarts and upgrades) ---- */

/* Wait for signals until the proxy has drained: SIGHUP reloads, the first SIGTERM or SIGINT
   starts the drain (STOPPING=1 to systemd), a second one ends it at once; SIGUSR2 starts the
   binary again with the listening sockets and drains once it is ready (a failed start leaves
   this process serving). Watchdog pings go on all along. Returns the signal that started the
   drain. */
static int node_loop(struct node *n, const sigset_t *sigs, struct reload_arg *ra) {
  enum drain_state st = DRAIN_SERVING;
  struct upgrade up = {0, -1, 0};
  int64_t ping_ms = svc_watchdog_ping_ms(), next_ping = clock_mono_ms() + ping_ms;
  int first = 0;
  if (ping_ms > 0) log_info("systemd watchdog on: a ping every %lld ms", (long long)ping_ms);
  for (;;) {
    int64_t wait = st == DRAIN_SERVING ? -1 : 100;
    int sig;
    if (ping_ms > 0) {
      int64_t left = next_ping - clock_mono_ms();
      if (left < 0) left = 0;
      if (wait < 0 || left < wait) wait = left;
    }
    sig = svc_wait(sigs, wait);
    if (ping_ms > 0 && clock_mono_ms() >= next_ping) {
      svc_watchdog_ping();
      next_ping = clock_mono_ms() + ping_ms;
    }
    if (st == DRAIN_UPGRADING) {
      char err[200];
      int r = upgrade_poll(&up, clock_mono_ms(), UPGRADE_TIMEOUT_MS, err, sizeof err);
      if (r < 0) {
        log_error("SIGUSR2: upgrade failed: %s; this process goes on serving", err);
        st = DRAIN_SERVING;
      } else if (r > 0) {
        log_info("SIGUSR2: the new process (pid %d) serves; draining this one", (int)up.pid);
        /* systemd follows the new process as the service's main one */
        (void)sd_notifyf(0, "MAINPID=%d", (int)up.pid);
        first = SIGUSR2;
        st = DRAIN_DRAINING;
        ctl_stop(&n->ctl);
        proxy_drain(n->proxy, 1);
      }
    }
    if ((st == DRAIN_DRAINING || st == DRAIN_ENDING) && proxy_drained(n->proxy)) return first;
    if (sig == 0) continue;
    switch (drain_on_signal(st, sig)) {
    case DRAIN_CMD_RELOAD:
      svc_reloading();
      on_sighup(ra);
      svc_ready("serving visitors");
      break;
    case DRAIN_CMD_DRAIN:
      if (st == DRAIN_UPGRADING) { /* the sockets stop listening: the new process stops too */
        log_warn("signal %d during an upgrade: the new process (pid %d) is told to stop", sig,
                 (int)up.pid);
        kill(up.pid, SIGTERM); /* it drains what it accepted */
        close(up.ready_fd);
        up.ready_fd = -1;
      }
      first = sig;
      st = DRAIN_DRAINING;
      ctl_stop(&n->ctl);
      svc_stopping();
      log_info("signal %d: draining: no new connections; in-flight requests get %lld ms (a "
               "second SIGTERM ends them now)",
               sig, (long long)n->cfg.drain_timeout_ms);
      proxy_drain(n->proxy, 0);
      break;
    case DRAIN_CMD_END:
      st = DRAIN_ENDING;
      log_info("signal %d again: closing every visitor connection now", sig);
      proxy_end_now(n->proxy);
      break;
    case DRAIN_CMD_UPGRADE: {
      int fds[LISTEN_MAX + 1], nf = proxy_listen_fds(n->proxy, fds, LISTEN_MAX);
      const char *tok =
          strncmp(n->ctl.auth, "Authorization: Bearer ", 22) == 0 ? n->ctl.auth + 22 : "";
      char err[200];
      fds[nf++] = admin_listen_fd(n->admin);
      memset(&up, 0, sizeof up);
      up.started_ms = clock_mono_ms();
      if (fds[nf - 1] < 0 || !n->self[0] ||
          upgrade_spawn(&up, n->self, n->argv, fds, nf, tok, err, sizeof err) < 0) {
        log_error("SIGUSR2: cannot start %s: %s", n->self[0] ? n->self : "the binary",
                  fds[nf - 1] < 0 ? "no admin socket" : err);
        break;
      }
      log_info("SIGUSR2: started %s (pid %d) with the listening sockets; waiting for it to be "
               "ready",
               n->self, (int)up.pid);
      st = DRAIN_UPGRADING;
      break;
    }
    case DRAIN_CMD_NONE:
    default:
      break;
    }
  }
}

/* ---- start-up ---- */

/* The listening sockets passed by systemd (socket activation) or by the noded before a SIGUSR2
   upgrade, matched by address to the --listen values (inherited[i], -1 = none) and to
   --admin-listen (*admin_fd). 0, or -1 (said on stderr) when one matches no address. */
static int take_sockets(const struct node_cfg *c, int *inherited, int *admin_fd) {
  struct listen_spec ls[LISTEN_MAX];
  struct sdlisten_addr got[SDLISTEN_MAX], want[LISTEN_MAX + 1];
  int fds[SDLISTEN_MAX], idx[LISTEN_MAX + 1], n, nl;
  char err[300];
  for (int i = 0; i < LISTEN_MAX; i++)
    inherited[i] = -1;
  *admin_fd = -1;
  n = sdlisten_receive(fds, got, SDLISTEN_MAX, err, sizeof err);
  if (n <= 0) {
    if (n < 0) fprintf(stderr, "noded: %s\n", err);
    return n;
  }
  nl = listen_parse_list(c->listen, ls, LISTEN_MAX, err, sizeof err);
  if (nl < 0) return -1; /* checked before */
  memset(want, 0, sizeof want);
  for (int i = 0; i < nl; i++) {
    if (ls[i].is_unix) {
      struct sockaddr_un *un = (struct sockaddr_un *)&want[i].sa;
      un->sun_family = AF_UNIX;
      snprintf(un->sun_path, sizeof un->sun_path, "%s", ls[i].path);
      want[i].len = sizeof *un;
    } else {
      want[i].sa = ls[i].sa;
      want[i].len = ls[i].salen;
    }
  }
  if (addr_parse_listen(c->admin_listen, 0, &want[nl].sa, &want[nl].len) < 0) return -1;
  if (sdlisten_match(got, n, want, nl + 1, idx, err, sizeof err) < 0) {
    fprintf(stderr, "noded: %s\n", err);
    return -1;
  }
  for (int i = 0; i < nl; i++)
    inherited[i] = idx[i] >= 0 ? fds[idx[i]] : -1;
  *admin_fd = idx[nl] >= 0 ? fds[idx[nl]] : -1;
  return 0;
}

/* Move the secret in environment variable name into out (cap bytes, "" when unset) and wipe it
   from the environment. 0, or -1 (said on stderr) when it is set but no usable secret. */
static int take_env_secret(const char *name, char *out, size_t cap) {
  char *v = getenv(name);
  int rc = 0;
  out[0] = '\0';
  if (!v) return 0;
  if (enrol_secret_text(v, strlen(v), out, cap) < 0) {
    fprintf(stderr, "noded: %s must be 1 to %d printable characters without spaces\n", name,
            ENROL_SECRET_MAX);
    rc = -1;
  }
  token_wipe(v, strlen(v));
  unsetenv(name);
  return rc;
}

/* The node token (docs/design.md#enrolment-keys): CDNCA_NODE_TOKEN (token, already in n->ctl
   when set), else the state directory's node-token, else one enrolment with the key (key, or
   --enrol-key-file), whose token is then kept there. 0, or the exit status (logged): 1 a start
   failure, 2 no token and no key, 3 controld refused the enrolment. */
static int node_token(struct node *n, const char *token, char *key) {
  char tok[ENROL_SECRET_MAX + 1], err[1200], why[512];
  int rc;
  if (token[0]) return 0;
  rc = enrol_token_load(n->cfg.state_dir, tok, sizeof tok, err, sizeof err);
  if (rc == 0) {
    rc = ctl_set_token(&n->ctl, tok, err, sizeof err);
    token_wipe(tok, sizeof tok);
    if (rc < 0) log_error("%s/%s: %s", n->cfg.state_dir, ENROL_TOKEN_FILE, err);
    return rc < 0 ? 1 : 0;
  }
  if (rc < 0) {
    log_error("%s", err);
    return 1;
  }
  if (!key[0] && n->cfg.enrol_key_file[0] &&
      enrol_key_load(n->cfg.enrol_key_file, key, ENROL_SECRET_MAX + 1, err, sizeof err) < 0) {
    log_error("%s", err);
    return 2;
  }
  if (!key[0]) {
    log_error("%s", NO_TOKEN);
    return 2;
  }
  log_info("no node token yet: enrolling as '%s' with controld %s", n->cfg.name, n->cfg.controld);
  switch (enrol_run(&n->ctl, key, n->cfg.name, tok, sizeof tok, why, sizeof why)) {
  case ENROL_OK:
    break;
  case ENROL_REFUSED:
    log_error("enrolment as '%s' refused: %s", n->cfg.name, why);
    return 3;
  case ENROL_STOPPED:
  default:
    return 1;
  }
  rc = enrol_token_store(n->cfg.state_dir, tok, err, sizeof err);
  if (rc == 0) rc = ctl_set_token(&n->ctl, tok, err, sizeof err);
  token_wipe(tok, sizeof tok);
  if (rc < 0) {
    log_error("enrolled as '%s', but the node token could not be kept: %s (delete node '%s' on "
              "controld and start again)",
              n->cfg.name, err, n->cfg.name);
    return 1;
  }
  log_info("enrolled as '%s'; the node token is kept in %s/%s", n->cfg.name, n->cfg.state_dir,
           ENROL_TOKEN_FILE);
  return 0;
}

static int make_state_dir(const char *dir) {
  struct stat st;
  if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
    log_error("cannot create the state directory %s: %s", dir, strerror(errno));
    return -1;
  }
  if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
    log_error("state directory %s is not a directory", dir);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  struct node n; /* the one context */
  struct node_cfg loaded;
  struct proxy_opts po;
  struct admin_src as;
  char err[512];
  char token[ENROL_SECRET_MAX + 1], key[ENROL_SECRET_MAX + 1]; /* secrets: wiped once used */
  sigset_t sigs;
  int sig = 0, ret = 1, check, inherited[LISTEN_MAX], admin_fd = -1;

  memset(&n, 0, sizeof n);
  check = opts_take_flag(&argc, argv, "--check-config");
  ret =
      opts_start(options, &n.cfg, argc, argv, "noded",
                 "--controld URL[,URL...] [--check-config] [--deny-targets CIDR[,CIDR...]] "
                 "[options]  (token in CDNCA_NODE_TOKEN, or an enrolment key in CDNCA_ENROL_KEY)");
  if (ret >= 0) return ret;
  ret = 1;
  if (check) return check_config(&n.cfg);
  if (config_valid(&n.cfg, err, sizeof err) < 0) {
    fprintf(stderr, "noded: %s (see --help)\n", err);
    return 2;
  }
  if (take_sockets(&n.cfg, inherited, &admin_fd) < 0) return 1;
  if (upgrade_self_path(n.self, sizeof n.self) < 0) n.self[0] = '\0';
  n.argv = argv;
  if (!n.cfg.name[0] && gethostname(n.cfg.name, sizeof n.cfg.name - 1) < 0)
    memcpy(n.cfg.name, "noded", 6);
  /* both secrets leave the environment at once, whatever happens next */
  if (take_env_secret("CDNCA_NODE_TOKEN", token, sizeof token) < 0 ||
      take_env_secret("CDNCA_ENROL_KEY", key, sizeof key) < 0)
    return 2;
  if (ctl_init(&n.ctl, n.cfg.controld, token[0] ? token : NULL, n.cfg.controld_ca_file, err,
               sizeof err) < 0) {
    fprintf(stderr, "noded: %s\n", err);
    token_wipe(key, sizeof key);
    return 2;
  }
  log_init("noded", LOG_TEXT, LOG_INFO);
  log_set_names(n.cfg.log_format, n.cfg.log_level);
  if (n.cfg.log_file[0] && log_open_file(n.cfg.log_file, err, sizeof err) < 0) {
    fprintf(stderr, "noded: option log-file: %s\n", err);
    return 1;
  }
  loaded = n.cfg;

  n.started_ms = clock_mono_ms();
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) goto out;
  if (make_state_dir(n.cfg.state_dir) < 0) goto out;
  /* before the signals are blocked: SIGTERM ends an enrolment still waiting for controld */
  ret = node_token(&n, token, key);
  token_wipe(token, sizeof token);
  token_wipe(key, sizeof key);
  if (ret != 0) goto out;
  ret = 1;
  /* signals are taken synchronously by main; threads started later inherit the mask */
  svc_block_signals(&sigs);
  sigaddset(&sigs, SIGUSR2); /* the binary upgrade */
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);

  proxy_opts_default(&po);
  po.listen = n.cfg.listen;
  po.trusted_proxies = n.cfg.trusted_proxies;
  po.origin_ca_file = n.cfg.origin_ca_file[0] ? n.cfg.origin_ca_file : NULL;
  po.deny_targets = n.cfg.deny_targets;
  po.threads = (int)n.cfg.proxy_threads;
  po.header_timeout_ms = (int)n.cfg.header_timeout_ms;
  po.keepalive_timeout_ms = (int)n.cfg.keepalive_timeout_ms;
  po.body_timeout_ms = (int)n.cfg.body_timeout_ms;
  po.max_connections = (int)n.cfg.max_connections;
  po.max_idle_per_origin = (int)n.cfg.origin_keepalive;
  po.stop_grace_ms = (int)n.cfg.drain_timeout_ms;
  po.inherited_fds = inherited;
  n.proxy = proxy_new(&po);
  if (!n.proxy) goto out;
  proxy_set_clock(n.proxy, &n.ctl.clock_offset_ms);
  n.sync = sync_new(&n.ctl, n.cfg.state_dir, n.cfg.config_wait_ms, on_config, &n);
  n.hb = n.sync ? heartbeat_new(&n.ctl, n.sync, n.cfg.heartbeat_interval_ms, on_observations, &n)
                : NULL;
  n.tasks = ntasks_new(&n.ctl, n.cfg.origin_ca_file, strcmp(n.cfg.probe_client, "curl") == 0);
  if (!n.sync || !n.hb || !n.tasks) goto out;
  ntasks_on_result(n.tasks, on_probe_result, &n);
  ntasks_on_deny(n.tasks, on_deny, &n);
  /* serve the cached config before controld answers */
  sync_load_cache(n.sync);
  if (proxy_start(n.proxy) < 0) goto out;
  memset(&as, 0, sizeof as);
  as.status = on_status;
  as.metrics = on_metrics;
  as.arg = &n;
  n.admin = admin_start(n.cfg.admin_listen, admin_fd, (int)n.cfg.max_connections_per_ip, &as);
  if (!n.admin) goto out;
  if (sync_start(n.sync) < 0 || heartbeat_start(n.hb) < 0 || ntasks_start(n.tasks) < 0) {
    log_error("cannot start the node threads");
    goto out;
  }
  {
    char shown[sizeof n.cfg.listen];
    memcpy(shown, n.cfg.listen, sizeof shown);
    for (char *q = shown; (q = strchr(q, '\n'));)
      *q = ' ';
    log_info("noded %s started as '%s' (controld %s, proxy %s, state %s)", CDNCA_VERSION,
             n.cfg.name, n.cfg.controld, shown, n.cfg.state_dir);
  }
  /* both listeners answer (from the cached config until controld does): ready */
  svc_ready("serving visitors");
  upgrade_ready(); /* the process before a SIGUSR2 upgrade drains from now on */
  {
    struct reload_arg ra = {&loaded, n.proxy, argc, argv};
    sig = node_loop(&n, &sigs, &ra);
  }
  log_info("signal %d: drained; shutting down", sig);
  ret = 0;
out:
  ctl_stop(&n.ctl);
  if (n.tasks) ntasks_join(n.tasks);
  if (n.sync) sync_join(n.sync);
  if (n.hb) heartbeat_join(n.hb);
  admin_stop(&n.admin);
  if (n.proxy) proxy_stop(n.proxy);
  proxy_free(&n.proxy);
  ntasks_free(&n.tasks);
  heartbeat_free(&n.hb);
  sync_free(&n.sync);
  ctl_fini(&n.ctl);
  curl_global_cleanup();
  return ret;
}
