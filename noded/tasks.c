/* tasks — node probe tasks: poll, probe, vote. */
#include "tasks.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ctl.h"
#include "fields.h"
#include "hcheck.h"
#include "json.h"
#include "log.h"

#define NTASKS_MAX 10000
#define NTASKS_MARGIN_MS 500 /* kept for posting the votes */
#define NTASKS_WAIT_MS 25000

struct ntasks {
  struct ctl *ctl;
  struct probe *probe;
  pthread_t thr;
  int started;
  atomic_int cancel; /* read by probe_run: set when stopping */
  pthread_mutex_t mu;
  int64_t rounds, probes, late;
  ntasks_result_fn *on_result;
  void *on_result_arg;
  ntasks_deny_fn *deny_fn;
  void *deny_arg;
  struct targets deny; /* what probes never connect to (probe_opts.deny), refreshed each round */
};

void ntasks_round_fini(struct ntask_round *r) {
  free(r->tasks);
  memset(r, 0, sizeof *r);
}

/* A task's "check" (absent = defaults): only the probe options, each validated. 0 or -1. */
static int parse_check(const cJSON *c, struct hcheck_opts *o, int i, char *err, size_t errlen) {
  static const char *const keys[] = {"type",          "method", "headers", "expected_codes",
                                     "expected_body", "port",   NULL};
  struct field_err he;
  const char *bad = NULL;
  if (!c) return 0;
  if (!cJSON_IsObject(c)) {
    snprintf(err, errlen, "tasks[%d].check: not an object", i);
    return -1;
  }
  if (json_only_keys(c, keys, &bad) < 0) {
    snprintf(err, errlen, "tasks[%d].check.%s: unknown field", i, bad);
    return -1;
  }
  if (hcheck_apply_json(c, o, &he) < 0) {
    snprintf(err, errlen, "tasks[%d].check.%s: %s", i, he.field, he.message);
    return -1;
  }
  return 0;
}

int ntasks_parse(const char *json, size_t len, struct ntask_round *out, char *err, size_t errlen) {
  cJSON *root = json_parse(json, len), *arr, *x;
  const char *s;
  int i = 0, rc = -1;
  int64_t v;
  memset(out, 0, sizeof *out);
  if (!cJSON_IsObject(root)) {
    snprintf(err, errlen, "not a JSON object");
    goto out;
  }
  if (json_int(root, "round_id", 1, INT64_MAX / 2, &out->round_id) != 0) {
    snprintf(err, errlen, "round_id: not a positive integer");
    goto out;
  }
  if (json_int(root, "deadline_ms", INT64_MIN / 2, 86400000, &out->deadline_ms) != 0) {
    snprintf(err, errlen, "deadline_ms: not an integer");
    goto out;
  }
  arr = cJSON_GetObjectItemCaseSensitive(root, "tasks");
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > NTASKS_MAX) {
    snprintf(err, errlen, "tasks: not an array of at most %d objects", NTASKS_MAX);
    goto out;
  }
  out->tasks = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *out->tasks);
  if (!out->tasks) {
    snprintf(err, errlen, "out of memory");
    goto out;
  }
  cJSON_ArrayForEach(x, arr) {
    struct ntask *t = &out->tasks[i];
    if (!cJSON_IsObject(x)) {
      snprintf(err, errlen, "tasks[%d]: not an object", i);
      goto out;
    }
    if (json_int(x, "task_id", 1, INT64_MAX / 2, &t->task_id) != 0) {
      snprintf(err, errlen, "tasks[%d].task_id: not a positive integer", i);
      goto out;
    }
    if (json_int(x, "origin_id", 1, INT64_MAX / 2, &t->origin_id) != 0) {
      snprintf(err, errlen, "tasks[%d].origin_id: not a positive integer", i);
      goto out;
    }
    if (json_str(x, "url", sizeof t->url - 1, &s) != 0 || !*s) {
      snprintf(err, errlen, "tasks[%d].url: not a string of 1-%zu bytes", i, sizeof t->url - 1);
      goto out;
    }
    memcpy(t->url, s, strlen(s) + 1);
    if (json_str(x, "host", sizeof t->host - 1, &s) != 0) {
      snprintf(err, errlen, "tasks[%d].host: not a string of at most %zu bytes", i,
               sizeof t->host - 1);
      goto out;
    }
    memcpy(t->host, s, strlen(s) + 1);
    if (json_int(x, "timeout_ms", 1, 600000, &v) != 0) {
      snprintf(err, errlen, "tasks[%d].timeout_ms: not an integer in [1, 600000]", i);
      goto out;
    }
    t->timeout_ms = (int)v;
    hcheck_defaults(&t->check);
    if (parse_check(cJSON_GetObjectItemCaseSensitive(x, "check"), &t->check, i, err, errlen) < 0)
      goto out;
    i++;
  }
  out->n = i;
  rc = 0;
out:
  cJSON_Delete(root);
  return rc;
}

int ntasks_url_target(const char *url, char *store, size_t cap, struct probe_target *t) {
  const char *p, *hs, *he, *ps;
  size_t need;
  char *w = store;
  long port;
  char *end;
  memset(t, 0, sizeof *t);
  if (strncmp(url, "http://", 7) == 0) {
    t->scheme = "http";
    p = url + 7;
  } else if (strncmp(url, "https://", 8) == 0) {
    t->scheme = "https";
    p = url + 8;
  } else {
    return -1;
  }
  if (*p == '[') {
    hs = p + 1;
    he = strchr(hs, ']');
    if (!he) return -1;
    p = he + 1;
  } else {
    hs = p;
    he = p + strcspn(p, ":/");
    p = he;
  }
  if (he == hs || *p != ':') return -1;
  port = strtol(p + 1, &end, 10);
  if (end == p + 1 || port < 1 || port > 65535 || (*end && *end != '/')) return -1;
  ps = *end ? end : "/";
  need = (size_t)(he - hs) + 1 + strlen(ps) + 1;
  if (need > cap) return -1;
  memcpy(w, hs, (size_t)(he - hs));
  w[he - hs] = '\0';
  t->address = w;
  w += (he - hs) + 1;
  memcpy(w, ps, strlen(ps) + 1);
  t->path = w;
  t->port = (int)port;
  return 0;
}

int ntasks_effective_timeout(int timeout_ms, int64_t deadline_ms) {
  int64_t left = deadline_ms - NTASKS_MARGIN_MS;
  int64_t t = timeout_ms < left ? timeout_ms : left;
  if (left < 100) return 0;
  return (int)(t < 100 ? 100 : t);
}

/* The last line about probes this node could not make (no descriptor, no memory). */
static _Atomic int64_t local_log;

/* Probe every task of rd and post the votes. */
static void run_round(struct ntasks *nt, CURL *h, const struct ntask_round *rd, int64_t got_at) {
  struct probe_target *tg = calloc((size_t)rd->n + 1, sizeof *tg);
  struct probe_result *res = calloc((size_t)rd->n + 1, sizeof *res);
  char *store = malloc((size_t)rd->n * 700 + 1);
  int local = 0;
  cJSON *root = NULL, *arr;
  char *body = NULL, err[256];
  struct ctl_resp r;
  int64_t spent;
  if (!tg || !res || !store) goto out;
  for (int i = 0; i < rd->n; i++) {
    int tmo = ntasks_effective_timeout(rd->tasks[i].timeout_ms, rd->deadline_ms);
    if (tmo == 0) {
      log_warn("probe round %lld: deadline too close (%lld ms), skipped", (long long)rd->round_id,
               (long long)rd->deadline_ms);
      goto out;
    }
    if (ntasks_url_target(rd->tasks[i].url, store + (size_t)i * 700, 700, &tg[i]) < 0) {
      /* an unusable URL still gets a (failed) target so the vote says why */
      tg[i].scheme = "invalid";
      tg[i].address = "";
      tg[i].port = 0;
    }
    tg[i].host = rd->tasks[i].host;
    tg[i].timeout_ms = tmo;
    tg[i].check = &rd->tasks[i].check;
  }
  /* the refused targets in force now: controld's list can change with any publication */
  if (nt->deny_fn) nt->deny_fn(nt->deny_arg, &nt->deny);
  probe_run(nt->probe, tg, (size_t)rd->n, res, &nt->cancel);
  if (nt->cancel) goto out;
  for (int i = 0; nt->on_result && i < rd->n; i++)
    if (strcmp(tg[i].scheme, "invalid") != 0 && strncmp(res[i].error, "invalid target", 14) != 0 &&
        !res[i].local)
      nt->on_result(nt->on_result_arg, rd->tasks[i].origin_id, res[i].ok);
  /* controld takes an error as text only (an origin's or a peer certificate's words can reach
     it): a control byte becomes '?', and text that is still not clean is named, not sent */
  for (int i = 0; i < rd->n; i++)
    fields_text_scrub(res[i].error, sizeof res[i].error, "probe error (not printable)");
  root = cJSON_CreateObject();
  json_add_i64(root, "round_id", rd->round_id);
  arr = cJSON_AddArrayToObject(root, "results");
  for (int i = 0; i < rd->n; i++) {
    cJSON *v;
    /* a probe never made (no descriptor or no memory here) is no vote on the origin */
    if (res[i].local) {
      if (local++ == 0 && log_every(&local_log, clock_mono_ms(), 10000))
        log_warn("probe round %lld: origin %lld not probed (%s): no vote sent for it",
                 (long long)rd->round_id, (long long)rd->tasks[i].origin_id, res[i].error);
      continue;
    }
    v = cJSON_CreateObject();
    json_add_i64(v, "task_id", rd->tasks[i].task_id);
    cJSON_AddBoolToObject(v, "ok", res[i].ok);
    cJSON_AddNumberToObject(v, "status", res[i].status);
    json_add_str_or_null(v, "error", res[i].error[0] ? res[i].error : NULL);
    cJSON_AddNumberToObject(v, "latency_ms", res[i].latency_ms);
    cJSON_AddItemToArray(arr, v);
  }
  body = json_print(root);
  spent = clock_mono_ms() - got_at;
  if (!body) goto out;
  if (ctl_call(nt->ctl, h, "POST", "/v1/node/votes", body, 10000, &r, err, sizeof err) < 0) {
    log_warn("probe round %lld: votes not delivered: %s", (long long)rd->round_id, err);
    goto out;
  }
  pthread_mutex_lock(&nt->mu);
  nt->rounds++;
  nt->probes += rd->n;
  if (r.status == 409) nt->late++;
  pthread_mutex_unlock(&nt->mu);
  if (r.status == 409)
    log_warn("probe round %lld: votes refused as late (%lld ms after the tasks came)",
             (long long)rd->round_id, (long long)spent);
  else if (r.status != 204)
    log_warn("probe round %lld: controld answered %ld to the votes", (long long)rd->round_id,
             r.status);
  ctl_resp_fini(&r);
out:
  cJSON_Delete(root);
  free(body);
  free(tg);
  free(res);
  free(store);
}

static void *ntasks_thread(void *arg) {
  struct ntasks *nt = arg;
  CURL *h = ctl_handle(nt->ctl);
  char path[64], err[256];
  int failures = 0;
  if (!h) return NULL;
  snprintf(path, sizeof path, "/v1/node/tasks?wait_ms=%d", NTASKS_WAIT_MS);
  while (ctl_running(nt->ctl)) {
    struct ctl_resp r;
    int bad = 0, away;
    int rc = ctl_call(nt->ctl, h, "GET", path, NULL, NTASKS_WAIT_MS + 15000, &r, err, sizeof err);
    away = ctl_away(rc, r.status);
    if (away) {
      if (rc == 0) snprintf(err, sizeof err, "controld answered %ld to the task poll", r.status);
      bad = 1;
    } else if (r.status == 200) {
      struct ntask_round rd;
      int64_t got = clock_mono_ms();
      if (ntasks_parse(r.body.data ? r.body.data : "", r.body.len, &rd, err, sizeof err) < 0) {
        log_warn("controld sent invalid probe tasks: %s", err);
        bad = 1;
      } else {
        run_round(nt, h, &rd, got);
      }
      ntasks_round_fini(&rd);
    } else if (r.status != 304 && r.status != 401) {
      snprintf(err, sizeof err, "controld answered %ld to the task poll", r.status);
      bad = 1;
    }
    ctl_resp_fini(&r);
    if (!bad) {
      failures = 0;
      continue;
    }
    if (++failures == 1) log_debug("task poll: %s", err);
    if (away)
      ctl_backoff(nt->ctl, h); /* shared with the config sync: ends when any call succeeds */
    else
      ctl_sleep(nt->ctl, failures < 6 ? 500LL << failures : 30000);
  }
  ctl_handle_free(nt->ctl, h);
  return NULL;
}

struct ntasks *ntasks_new(struct ctl *ctl, const char *origin_ca_file, int curl_only) {
  struct ntasks *nt = calloc(1, sizeof *nt);
  struct probe_opts po;
  if (!nt) return NULL;
  memset(&po, 0, sizeof po);
  po.user_agent = PROBE_UA_NODE;
  po.ca_file = origin_ca_file && *origin_ca_file ? origin_ca_file : NULL;
  po.engine = curl_only ? PROBE_ENGINE_EPOLL_CURL : PROBE_ENGINE_EPOLL;
  (void)targets_init(&nt->deny, NULL, NULL, 0); /* the built-in list until the first round */
  po.deny = &nt->deny;
  nt->ctl = ctl;
  nt->probe = probe_new(&po);
  if (!nt->probe) {
    free(nt);
    return NULL;
  }
  pthread_mutex_init(&nt->mu, NULL);
  return nt;
}

void ntasks_on_result(struct ntasks *nt, ntasks_result_fn *fn, void *arg) {
  nt->on_result = fn;
  nt->on_result_arg = arg;
}

void ntasks_on_deny(struct ntasks *nt, ntasks_deny_fn *fn, void *arg) {
  nt->deny_fn = fn;
  nt->deny_arg = arg;
}

int ntasks_start(struct ntasks *nt) {
  if (pthread_create(&nt->thr, NULL, ntasks_thread, nt) != 0) return -1;
  nt->started = 1;
  return 0;
}

void ntasks_join(struct ntasks *nt) {
  nt->cancel = 1;
  if (nt->started) pthread_join(nt->thr, NULL);
  nt->started = 0;
}

void ntasks_free(struct ntasks **p) {
  struct ntasks *nt = *p;
  if (!nt) return;
  probe_free(&nt->probe);
  pthread_mutex_destroy(&nt->mu);
  free(nt);
  *p = NULL;
}

void ntasks_stats(struct ntasks *nt, int64_t *rounds, int64_t *probes, int64_t *late) {
  pthread_mutex_lock(&nt->mu);
  *rounds = nt->rounds;
  *probes = nt->probes;
  *late = nt->late;
  pthread_mutex_unlock(&nt->mu);
}
