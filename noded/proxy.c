/* proxy — the proxy's public face (proxy.h): options, binding the listeners, the config snapshot
 * the workers route by, start and graceful stop, and the metrics and status views. The request
 * path is in its own modules: worker (the epoll loop, accepting, timeouts), request (the request
 * head), attempt (origin pick and retry), exchange (the origin's side up to the response head),
 * relay (streaming both ways, the tunnel) and vconn (the visitor connection); the header rules are
 * in rewrite, origin connections and pools in upstream, the skip state in proxy_state. */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alog.h"
#include "clock.h"
#include "json.h"
#include "listen.h"
#include "log.h"
#include "metrics.h"
#include "proxy_state.h"
#include "proxy_types.h"
#include "trust.h"
#include "upstream.h"
#include "worker.h"

/* Access lines are buffered per worker and written in batches: at most this many bytes, and
 * at most ALOG_FLUSH_MS after the oldest line (SIGHUP and stop write them out at once). */
#define ALOG_CAP 65536
#define ALOG_FLUSH_MS 100

/* The metric label of each enum attempt_result, and what it means. */
static const struct {
  const char *name;
  const char *desc;
} attempt_results[AR__N] = {
    [AR_SUCCESS] = {"success", "the origin answered with a non-failure status"},
    [AR_STATUS] = {"error_status", "the origin answered with a status the site counts as failure"},
    [AR_CONNECT] = {"connect_error", "TCP connect refused, unreachable or not resolved"},
    [AR_TIMEOUT] = {"timeout", "connect or response head took too long"},
    [AR_TLS] = {"tls_error", "TLS handshake or certificate check failed"},
    [AR_IO] = {"io_error", "the connection broke or the response head was invalid"},
    [AR_TARGET] = {"refused_target",
                   "the origin's address is a refused target (link-local, metadata, "
                   "--deny-targets): never connected to"},
    [AR_REFUSED] = {"refused_response",
                    "an answer refused for its framing or an unrequested 101 (the visitor gets "
                    "502; not counted against the origin)"},
};

/* The metric label of each enum pp_error, and what it means. */
static const struct {
  const char *name;
  const char *desc;
} pp_errors[PPE__N] = {
    [PPE_MISSING] = {"missing", "the first bytes were no PROXY header"},
    [PPE_MALFORMED] = {"malformed", "a PROXY header breaking the grammar or a bound"},
    [PPE_INCOMPLETE] = {"incomplete", "closed or timed out before a whole PROXY header"},
};

/* ---------- lifecycle ---------- */

void proxy_opts_default(struct proxy_opts *o) {
  memset(o, 0, sizeof *o);
  o->listen = "127.0.0.1:7480";
  o->threads = 2;
  o->connect_timeout_ms = 5000;
  o->origin_timeout_ms = 60000;
  o->visitor_timeout_ms = 60000;
  o->header_timeout_ms = 10000;
  o->keepalive_timeout_ms = 60000;
  o->body_timeout_ms = 60000;
  o->max_connections = 10000;
  o->stop_grace_ms = 30000;
  o->origin_idle_ms = 30000;
  o->max_idle_per_origin = 32;
}

static char *dupstr(const char *s) {
  size_t n;
  char *d;
  if (!s) return NULL;
  n = strlen(s);
  if ((d = malloc(n + 1))) memcpy(d, s, n + 1);
  return d;
}

/* Raise the descriptor soft limit to the hard one (once, at start). */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
}

/* The port of a bound TCP socket. */
static int bound_port(int fd) {
  struct sockaddr_storage bound;
  socklen_t bl = sizeof bound;
  if (getsockname(fd, (struct sockaddr *)&bound, &bl) < 0) return -1;
  return ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                          : ((struct sockaddr_in6 *)&bound)->sin6_port);
}

/* Add listener l to worker w: every worker accepts on the listener's one socket (so it can be
 * handed to another process whole, docs/design.md, Restarts and upgrades). 0 or -1 (logged). */
static int add_listener(struct worker *w, struct listener *l) {
  struct wlisten *wl = &w->wl[w->nwl];
  struct epoll_event ev;
  wl->kind = EV_LISTEN;
  wl->proxy_protocol = l->spec.proxy_protocol;
  wl->is_unix = l->spec.is_unix;
  wl->fd = l->fd;
  wl->own = !l->inherited;
  w->nwl++;
  /* the socket every worker shares wakes one worker per connection, not all of them */
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.ptr = wl;
  return epoll_ctl(w->epfd, EPOLL_CTL_ADD, wl->fd, &ev);
}

struct proxy *proxy_new(const struct proxy_opts *o) {
  struct proxy *p = calloc(1, sizeof *p);
  char err[512];
  if (!p) return NULL;
  p->o = *o;
  pthread_mutex_init(&p->cfg_mu, NULL);
  for (int i = 0; i < LISTEN_MAX; i++)
    p->ls[i].fd = -1;
  p->listen = dupstr(o->listen ? o->listen : "127.0.0.1:7480");
  p->ca_file = dupstr(o->origin_ca_file);
  p->trusted = dupstr(o->trusted_proxies ? o->trusted_proxies : "");
  p->o.listen = p->listen;
  p->o.origin_ca_file = p->ca_file;
  p->o.trusted_proxies = p->trusted;
  if (!p->listen || !p->trusted) goto fail;
  if (p->o.threads < 1) p->o.threads = 1;
  if (p->o.threads > 64) p->o.threads = 64;
  if (p->o.connect_timeout_ms <= 0) p->o.connect_timeout_ms = 5000;
  if (p->o.origin_timeout_ms <= 0) p->o.origin_timeout_ms = 60000;
  if (p->o.visitor_timeout_ms <= 0) p->o.visitor_timeout_ms = 60000;
  if (p->o.header_timeout_ms <= 0) p->o.header_timeout_ms = 10000;
  if (p->o.keepalive_timeout_ms <= 0) p->o.keepalive_timeout_ms = 60000;
  if (p->o.body_timeout_ms <= 0) p->o.body_timeout_ms = 60000;
  if (p->o.max_connections <= 0) p->o.max_connections = 10000;
  raise_fd_limit();
  atomic_store(&p->max_conns, p->o.max_connections);
  worker_update_cap(p);
  if (p->o.stop_grace_ms < 0) p->o.stop_grace_ms = 0;
  if (p->o.origin_idle_ms <= 0) p->o.origin_idle_ms = 30000;
  if (p->o.max_idle_per_origin < 0) p->o.max_idle_per_origin = 0;
  p->nthreads = p->o.threads;
  if (!(p->state = proxy_state_new())) goto fail;
  if (proxy_state_set_deny(p->state, o->deny_targets, err, sizeof err) < 0) {
    log_error("deny-targets: %s", err);
    goto fail;
  }
  if (!(p->ssl = upstream_tls_ctx(p->ca_file))) goto fail;
  {
    struct listen_spec specs[LISTEN_MAX];
    int n = listen_parse_list(p->listen, specs, LISTEN_MAX, err, sizeof err);
    if (n < 0) {
      log_error("%s", err);
      goto fail;
    }
    for (int i = 0; i < n; i++)
      p->ls[i].spec = specs[i];
    p->nls = n;
  }
  if (trust_parse(p->trusted, &p->trust, err, sizeof err) < 0) {
    log_error("%s", err);
    goto fail;
  }
  for (int i = 0; i < p->nls; i++) {
    struct listener *l = &p->ls[i];
    if (o->inherited_fds && o->inherited_fds[i] >= 0) {
      l->fd = o->inherited_fds[i];
      l->inherited = 1;
      log_info("listening on %s (socket received)", l->spec.text);
    } else if (l->spec.is_unix) {
      if ((l->fd = listen_unix_open(&l->spec, &l->dev, &l->ino, err, sizeof err)) < 0) {
        log_error("%s", err);
        goto fail;
      }
    } else if ((l->fd = listen_tcp_open(&l->spec.sa, l->spec.salen)) < 0) {
      log_error("cannot listen on %s: %s", l->spec.text, strerror(errno));
      goto fail;
    }
    if (!l->spec.is_unix && !p->port) p->port = bound_port(l->fd);
  }
  if (!(p->w = calloc((size_t)p->nthreads, sizeof *p->w))) goto fail;
  for (int i = 0; i < p->nthreads; i++) {
    struct worker *w = &p->w[i];
    w->p = p;
    w->idx = i;
    w->wfd = w->epfd = -1;
    buf_init(&w->logbuf, 8192); /* a longer access line is not logged */
    if (!(w->alog = alog_new(STDERR_FILENO, ALOG_CAP, ALOG_FLUSH_MS))) goto fail;
  }
  for (int i = 0; i < p->nthreads; i++) {
    struct worker *w = &p->w[i];
    struct epoll_event ev;
    if ((w->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (w->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        !(w->ups = upstream_new(p->ssl, w->epfd, EV_UPSTREAM, p->o.max_idle_per_origin)))
      goto fail;
    for (int k = 0; k < p->nls; k++)
      if (add_listener(w, &p->ls[k]) < 0) goto fail;
    w->wtag.kind = EV_WAKE;
    ev.events = EPOLLIN;
    ev.data.ptr = &w->wtag;
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wfd, &ev) < 0) goto fail;
  }
  return p;
fail:
  proxy_free(&p);
  return NULL;
}

int proxy_port(const struct proxy *p) {
  return p->port;
}

void proxy_set_clock(struct proxy *p, _Atomic int64_t *offset_ms) {
  p->clock_offset = offset_ms;
}

int proxy_listen_fds(const struct proxy *p, int *fds, int max) {
  int n = 0;
  for (int i = 0; i < p->nls && n < max; i++)
    fds[n++] = p->ls[i].fd;
  return n;
}

int proxy_set_config(struct proxy *p, struct sitecfg_set *s) {
  struct sitecfg_set *old;
  if (proxy_state_sync(p->state, s) < 0) return -1;
  pthread_mutex_lock(&p->cfg_mu);
  old = p->cfg;
  p->cfg = s ? sitecfg_set_ref(s) : NULL;
  atomic_fetch_add_explicit(&p->cfg_gen, 1, memory_order_release);
  pthread_mutex_unlock(&p->cfg_mu);
  sitecfg_set_unref(old);
  return 0;
}

int proxy_start(struct proxy *p) {
  if (p->started) return 0;
  if (proxy_state_resolver_start(p->state) < 0) {
    log_error("cannot start the origin resolver thread");
    return -1;
  }
  for (int i = 0; i < p->nthreads; i++) {
    if (pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i]) != 0) {
      log_error("cannot start proxy worker %d", i);
      proxy_stop(p);
      return -1;
    }
    p->w[i].started = 1;
  }
  p->started = 1;
  return 0;
}

static void wake_workers(struct proxy *p) {
  for (int i = 0; p->w && i < p->nthreads; i++) {
    uint64_t one = 1;
    if (p->w[i].wfd >= 0 && write(p->w[i].wfd, &one, sizeof one) < 0)
      log_warn("cannot wake proxy worker %d", i);
  }
}

void proxy_drain(struct proxy *p, int handed_over) {
  if (!p || atomic_load(&p->stopping)) return;
  atomic_store(&p->keep_paths, handed_over);
  if (atomic_exchange(&p->stopping, 1)) return;
  /* a Unix socket of this process alone loses its path at once: a visitor (or a front proxy,
     which may serve stale) connecting now is refused instead of waiting in the backlog of a
     socket no worker accepts on any more. Each worker then accepts what the backlogs already
     hold and the last one shuts the sockets down (worker.c, begin_stop), so a connection the
     kernel queued before the stop is answered, not reset. A socket received from systemd or
     handed to a new process stays as it is: another process accepts on it. */
  for (int i = 0; !handed_over && i < p->nls; i++) {
    struct listener *l = &p->ls[i];
    if (l->fd >= 0 && !l->inherited && l->spec.is_unix)
      listen_unix_remove(l->spec.path, l->dev, l->ino);
  }
  wake_workers(p);
}

void proxy_end_now(struct proxy *p) {
  if (!p) return;
  atomic_store(&p->ending, 1);
  wake_workers(p);
}

int proxy_drained(struct proxy *p) {
  int started = 0;
  for (int i = 0; p->w && i < p->nthreads; i++)
    started += p->w[i].started;
  return atomic_load(&p->workers_done) >= started;
}

void proxy_stop(struct proxy *p) {
  if (!p || p->stopped) return;
  proxy_drain(p, atomic_load(&p->keep_paths));
  for (int i = 0; p->w && i < p->nthreads; i++)
    if (p->w[i].started) {
      pthread_join(p->w[i].th, NULL);
      p->w[i].started = 0;
    }
  p->stopped = 1;
}

void proxy_free(struct proxy **pp) {
  struct proxy *p = pp ? *pp : NULL;
  if (!p) return;
  proxy_stop(p);
  for (int i = 0; p->w && i < p->nthreads; i++) {
    struct worker *w = &p->w[i];
    if (w->wfd >= 0) close(w->wfd);
    for (; w->n_pipes > 0; w->n_pipes--) {
      close(w->pipes[w->n_pipes - 1][0]);
      close(w->pipes[w->n_pipes - 1][1]);
    }
    upstream_free(&w->ups);
    buf_fini(&w->logbuf);
    alog_free(&w->alog);
    if (w->epfd >= 0) close(w->epfd);
    sitecfg_set_unref(w->cfg);
  }
  free(p->w);
  for (int i = 0; i < p->nls; i++)
    if (p->ls[i].fd >= 0) {
      close(p->ls[i].fd);
      if (p->ls[i].spec.is_unix && !atomic_load(&p->keep_paths) && !p->ls[i].inherited)
        listen_unix_remove(p->ls[i].spec.path, p->ls[i].dev, p->ls[i].ino);
    }
  sitecfg_set_unref(p->cfg);
  proxy_state_free(&p->state);
  if (p->ssl) SSL_CTX_free(p->ssl);
  pthread_mutex_destroy(&p->cfg_mu);
  free(p->listen);
  free(p->ca_file);
  free(p->trusted);
  free(p);
  *pp = NULL;
}

void proxy_flush_log(struct proxy *p) {
  for (int i = 0; p && p->w && i < p->nthreads; i++)
    alog_flush(p->w[i].alog);
}

/* ---------- observability ---------- */

int proxy_metrics(struct proxy *p, struct buf *out) {
  uint64_t codes[600], att[AR__N], ppe[PPE__N], retries = 0, skips = 0, fo = 0, bp = 0, rto = 0,
                                                rfrom = 0, alog_drops = 0;
  int64_t seq = 0;
  struct metrics *m;
  char label[64];
  int rc;
  memset(codes, 0, sizeof codes);
  memset(att, 0, sizeof att);
  memset(ppe, 0, sizeof ppe);
  for (int i = 0; i < p->nthreads; i++) {
    struct counters *c = &p->w[i].ctr;
    for (int k = 100; k < 600; k++)
      codes[k] += atomic_load_explicit(&c->codes[k], memory_order_relaxed);
    for (int k = 0; k < AR__N; k++)
      att[k] += atomic_load_explicit(&c->attempts[k], memory_order_relaxed);
    retries += atomic_load_explicit(&c->retries, memory_order_relaxed);
    skips += atomic_load_explicit(&c->skips, memory_order_relaxed);
    fo += atomic_load_explicit(&c->fail_open, memory_order_relaxed);
    bp += atomic_load_explicit(&c->backup_picks, memory_order_relaxed);
    rto += atomic_load_explicit(&c->ramp_to, memory_order_relaxed);
    rfrom += atomic_load_explicit(&c->ramp_from, memory_order_relaxed);
    for (int k = 0; k < PPE__N; k++)
      ppe[k] += atomic_load_explicit(&c->pp_errors[k], memory_order_relaxed);
    alog_drops += alog_dropped(p->w[i].alog);
  }
  skips += atomic_load_explicit(&p->probe_skips, memory_order_relaxed);
  pthread_mutex_lock(&p->cfg_mu);
  if (p->cfg) seq = p->cfg->seq;
  pthread_mutex_unlock(&p->cfg_mu);
  /* the workers count with relaxed atomics; the snapshot renders through a registry */
  if (!(m = metrics_new())) return -1;
  metrics_declare(m, "cdnca_node_requests_total", "counter",
                  "Visitor requests answered, by status.");
  for (int k = 100; k < 600; k++)
    if (codes[k]) {
      snprintf(label, sizeof label, "code=\"%d\"", k);
      metrics_add(m, "cdnca_node_requests_total", label, (double)codes[k]);
    }
  metrics_declare(m, "cdnca_node_origin_attempts_total", "counter", "Origin attempts, by result.");
  for (int k = 0; k < AR__N; k++) {
    snprintf(label, sizeof label, "result=\"%s\"", attempt_results[k].name);
    metrics_add(m, "cdnca_node_origin_attempts_total", label, (double)att[k]);
  }
  metrics_declare(m, "cdnca_node_retries_total", "counter", "Attempts retried on another origin.");
  metrics_add(m, "cdnca_node_retries_total", "", (double)retries);
  metrics_declare(m, "cdnca_node_origin_skips_total", "counter",
                  "Times an origin was put into skip.");
  metrics_add(m, "cdnca_node_origin_skips_total", "", (double)skips);
  metrics_declare(m, "cdnca_node_fail_open_total", "counter",
                  "Picks made while every origin was skipped.");
  metrics_add(m, "cdnca_node_fail_open_total", "", (double)fo);
  metrics_declare(m, "cdnca_node_backup_picks_total", "counter",
                  "Picks of an origin on a level after the site's current one.");
  metrics_add(m, "cdnca_node_backup_picks_total", "", (double)bp);
  metrics_declare(m, "cdnca_node_ramp_requests_total", "counter",
                  "Requests of sites in a failback ramp, by the level they started on (to: the "
                  "ramp level, from: the current one).");
  metrics_add(m, "cdnca_node_ramp_requests_total", "level=\"to\"", (double)rto);
  metrics_add(m, "cdnca_node_ramp_requests_total", "level=\"from\"", (double)rfrom);
  metrics_declare(m, "cdnca_node_proxy_header_errors_total", "counter",
                  "Connections of proxy-protocol listeners closed for their PROXY header, by "
                  "reason (missing, malformed, incomplete).");
  for (int k = 0; k < PPE__N; k++) {
    snprintf(label, sizeof label, "reason=\"%s\"", pp_errors[k].name);
    metrics_add(m, "cdnca_node_proxy_header_errors_total", label, (double)ppe[k]);
  }
  metrics_declare(m, "cdnca_node_access_log_dropped_total", "counter",
                  "Access-log lines not written whole: a write to the log failed or was cut "
                  "short (a full disk, an I/O error).");
  metrics_add(m, "cdnca_node_access_log_dropped_total", "", (double)alog_drops);
  metrics_declare(m, "cdnca_node_config_seq", "gauge", "Sequence of the config being served.");
  metrics_set(m, "cdnca_node_config_seq", "", (double)seq);
  rc = metrics_render(m, out);
  metrics_free(&m);
  return rc;
}

int proxy_skip_metrics(struct proxy *p, int max_labelled, struct buf *out) {
  return proxy_state_skip_metrics(p->state, clock_mono_ms(), max_labelled, out);
}

void proxy_deny_copy(struct proxy *p, struct targets *out) {
  proxy_state_deny_copy(p->state, out);
}

void proxy_probe_result(struct proxy *p, int64_t origin_id, int ok) {
  int n = proxy_state_probe(p->state, origin_id, clock_mono_ms(), ok);
  if (n > 0) atomic_fetch_add_explicit(&p->probe_skips, (uint64_t)n, memory_order_relaxed);
}

cJSON *proxy_observations(struct proxy *p) {
  return proxy_state_observations(p->state, clock_mono_ms());
}

cJSON *proxy_status(struct proxy *p) {
  struct sitecfg_set *s;
  cJSON *root = cJSON_CreateObject(), *arr;
  int64_t now = clock_mono_ms();
  if (!root) return NULL;
  pthread_mutex_lock(&p->cfg_mu);
  s = p->cfg ? sitecfg_set_ref(p->cfg) : NULL;
  pthread_mutex_unlock(&p->cfg_mu);
  json_add_i64(root, "seq", s ? s->seq : 0);
  arr = cJSON_AddArrayToObject(root, "sites");
  for (int i = 0; s && arr && i < s->n_sites; i++) {
    const struct sitecfg_site *site = s->sites[i];
    cJSON *j = cJSON_CreateObject(), *o;
    if (!j) break;
    json_add_i64(j, "id", site->id);
    cJSON_AddStringToObject(j, "name", site->name);
    json_add_i64(j, "config_version", site->config_version);
    json_add_i64(j, "current_level", site->current_level);
    if (site->ramp.from_level) {
      cJSON *rj = ramp_run_json(&site->ramp);
      _Atomic int64_t *off = p->clock_offset;
      int64_t ofs = off ? atomic_load(off) : 0;
      if (rj) {
        json_add_i64(rj, "share", ramp_share(&site->ramp, clock_wall_ms(), ofs));
        json_add_i64(rj, "clock_offset_ms", ofs);
        cJSON_AddItemToObject(j, "ramp", rj);
      }
    } else {
      cJSON_AddNullToObject(j, "ramp");
    }
    if ((o = proxy_state_site_json(p->state, site, now))) {
      /* the requests each level has taken (its origins' counts, attempts included) */
      int64_t per[SITECFG_MAX_LEVEL + 1];
      const cJSON *it;
      cJSON *lv = cJSON_CreateArray();
      memset(per, 0, sizeof per);
      cJSON_ArrayForEach(it, o) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(it, "level");
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(it, "requests");
        if (cJSON_IsNumber(l) && cJSON_IsNumber(q) && l->valueint >= 1 &&
            l->valueint <= SITECFG_MAX_LEVEL)
          per[l->valueint] += (int64_t)q->valuedouble;
      }
      for (int l = 1; lv && l <= SITECFG_MAX_LEVEL; l++) {
        int has = 0;
        for (int k = 0; k < site->n_origins; k++)
          if (site->origins[k].level == l) has = 1;
        if (!has) continue;
        cJSON *e = cJSON_CreateObject();
        if (!e) break;
        json_add_i64(e, "level", l);
        json_add_i64(e, "requests", per[l]);
        cJSON_AddItemToArray(lv, e);
      }
      if (lv) cJSON_AddItemToObject(j, "levels", lv);
      cJSON_AddItemToObject(j, "origins", o);
    }
    cJSON_AddItemToArray(arr, j);
  }
  sitecfg_set_unref(s);
  return root;
}
