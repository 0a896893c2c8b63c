/* heartbeat — periodic POST /v1/node/heartbeat. */
#include "heartbeat.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ctl.h"
#include "json.h"
#include "log.h"
#include "sync.h"

struct heartbeat {
  struct ctl *ctl;
  struct sync *sync;
  int64_t interval_ms;
  heartbeat_obs_fn obs;
  void *arg;
  pthread_t thr;
  int started;
  pthread_mutex_t mu;
  int64_t sent, failed, last_ok;
};

/* 1 when x is an observation object with the fields controld validates. */
static int obs_ok(const cJSON *x) {
  int64_t v;
  int b;
  return cJSON_IsObject(x) && json_int(x, "site_id", 1, INT64_MAX / 2, &v) == 0 &&
         json_int(x, "origin_id", 1, INT64_MAX / 2, &v) == 0 &&
         json_int(x, "requests", 0, INT64_MAX / 2, &v) == 0 &&
         json_int(x, "failures", 0, INT64_MAX / 2, &v) == 0 && json_bool(x, "skipped", &b) == 0;
}

char *heartbeat_body(const char *version, int64_t seq, cJSON *obs) {
  cJSON *root = cJSON_CreateObject(), *arr;
  char *text;
  if (!root) {
    cJSON_Delete(obs);
    return NULL;
  }
  cJSON_AddStringToObject(root, "version", version);
  json_add_i64(root, "config_version", seq);
  arr = cJSON_AddArrayToObject(root, "observations");
  if (cJSON_IsArray(obs)) {
    cJSON *x;
    while ((x = cJSON_DetachItemFromArray(obs, 0)) != NULL) {
      if (obs_ok(x))
        cJSON_AddItemToArray(arr, x);
      else
        cJSON_Delete(x);
    }
  }
  cJSON_Delete(obs);
  text = json_print(root);
  cJSON_Delete(root);
  return text;
}

/* FNV-1a, 64 bits. */
static uint64_t text_hash(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static int by_origin(const void *a, const void *b) {
  int64_t x = ((const struct hb_seen *)a)->origin_id, y = ((const struct hb_seen *)b)->origin_id;
  return (x > y) - (x < y);
}

static const struct hb_seen *acked_of(const struct hb_memo *m, int64_t origin_id) {
  struct hb_seen key = {.origin_id = origin_id};
  return m->n_acked ? bsearch(&key, m->acked, (size_t)m->n_acked, sizeof key, by_origin) : NULL;
}

struct cand {
  struct hb_seen seen;
  cJSON *x;
  size_t len; /* its text, with a separating comma */
};

static int cand_by_origin(const void *a, const void *b) {
  return by_origin(&((const struct cand *)a)->seen, &((const struct cand *)b)->seen);
}

cJSON *heartbeat_pick(struct hb_memo *m, cJSON *obs, size_t budget, int64_t now) {
  cJSON *out = cJSON_CreateArray(), *x;
  struct cand *c = NULL;
  int n = 0, cap = cJSON_IsArray(obs) ? cJSON_GetArraySize(obs) : 0, start = 0, last = 0;
  size_t used = 0;
  free(m->pending);
  m->pending = NULL;
  m->n_pending = 0;
  if (!out || (cap > 0 && !(c = calloc((size_t)cap, sizeof *c)))) goto oom;
  while (cap > 0 && (x = cJSON_DetachItemFromArray(obs, 0)) != NULL) {
    char *t = obs_ok(x) ? cJSON_PrintUnformatted(x) : NULL;
    int64_t id = 0;
    int skipped = 0;
    if (!t) {
      cJSON_Delete(x);
      continue;
    }
    (void)json_int(x, "origin_id", 1, INT64_MAX / 2, &id);
    (void)json_bool(x, "skipped", &skipped);
    c[n].seen = (struct hb_seen){id, text_hash(t), now, 0};
    c[n].x = x;
    c[n].len = strlen(t) + 1;
    free(t);
    {
      const struct hb_seen *a = acked_of(m, id);
      c[n].seen.send = skipped || !a || a->hash != c[n].seen.hash || now - a->at >= m->refresh_ms;
    }
    n++;
  }
  if (n > 1) qsort(c, (size_t)n, sizeof *c, cand_by_origin); /* c is NULL when n is 0 */
  /* the first to send: after the origin the budget stopped at last time, wrapping round */
  while (start < n && c[start].seen.origin_id <= m->cursor)
    start++;
  if (start == n) start = 0;
  m->cursor = 0;
  for (int k = 0; k < n; k++) {
    struct cand *e = &c[(start + k) % n];
    if (!e->seen.send) continue;
    if (used + e->len > budget) {
      e->seen.send = 0;
      if (!m->cursor) m->cursor = c[last].seen.origin_id;
      continue;
    }
    used += e->len;
    last = (start + k) % n;
    cJSON_AddItemToArray(out, e->x);
    e->x = NULL;
  }
  if (n > 0 && !(m->pending = malloc((size_t)n * sizeof *m->pending))) goto oom;
  for (int k = 0; k < n; k++) {
    m->pending[k] = c[k].seen;
    cJSON_Delete(c[k].x);
  }
  m->n_pending = n;
  free(c);
  cJSON_Delete(obs);
  return out;
oom:
  for (int k = 0; k < n; k++)
    cJSON_Delete(c[k].x);
  free(c);
  cJSON_Delete(out);
  cJSON_Delete(obs);
  m->n_pending = 0;
  return NULL;
}

void heartbeat_acked(struct hb_memo *m, int ok) {
  int keep = 0;
  if (ok) {
    /* the pending beat lists every current origin: what it sent, or what was known before */
    for (int k = 0; k < m->n_pending; k++) {
      struct hb_seen *p = &m->pending[k];
      const struct hb_seen *a = p->send ? NULL : acked_of(m, p->origin_id);
      if (p->send)
        m->pending[keep++] = (struct hb_seen){p->origin_id, p->hash, p->at, 0};
      else if (a)
        m->pending[keep++] = (struct hb_seen){a->origin_id, a->hash, a->at, 0};
    }
    free(m->acked);
    m->acked = m->pending;
    m->n_acked = keep;
  } else {
    free(m->pending);
    m->cursor = 0; /* the next beat sends from the start again */
  }
  m->pending = NULL;
  m->n_pending = 0;
}

void heartbeat_memo_fini(struct hb_memo *m) {
  free(m->acked);
  free(m->pending);
  memset(m, 0, sizeof *m);
}

static void *hb_thread(void *arg) {
  struct heartbeat *hb = arg;
  CURL *h = ctl_handle(hb->ctl);
  char err[256];
  int warned = 0;
  struct hb_memo memo;
  memset(&memo, 0, sizeof memo);
  memo.refresh_ms = hb->interval_ms * HEARTBEAT_REFRESH_BEATS;
  if (!h) return NULL;
  while (ctl_running(hb->ctl)) {
    struct sync_info si;
    struct ctl_resp r;
    char *body;
    int ok = 0;
    sync_get_info(hb->sync, &si);
    body = heartbeat_body(CDNCA_VERSION, si.seq,
                          heartbeat_pick(&memo, hb->obs ? hb->obs(hb->arg) : NULL,
                                         HEARTBEAT_OBS_BUDGET, clock_mono_ms()));
    if (body &&
        ctl_call(hb->ctl, h, "POST", "/v1/node/heartbeat", body, 10000, &r, err, sizeof err) == 0) {
      ok = r.status == 204;
      if (!ok && r.status != 401)
        snprintf(err, sizeof err, "controld answered %ld to the heartbeat", r.status);
      ctl_resp_fini(&r);
    } else if (!body) {
      snprintf(err, sizeof err, "out of memory");
    }
    free(body);
    heartbeat_acked(&memo, ok);
    pthread_mutex_lock(&hb->mu);
    if (ok) {
      hb->sent++;
      hb->last_ok = clock_wall_ms();
    } else {
      hb->failed++;
    }
    pthread_mutex_unlock(&hb->mu);
    if (!ok && ctl_running(hb->ctl) && !warned) log_warn("heartbeat failed: %s", err);
    if (ok && warned) log_info("heartbeats accepted again");
    warned = !ok;
    /* wait for the next beat, but report a newly applied config soon (within a second) */
    for (int64_t waited = 0; waited < hb->interval_ms && ctl_running(hb->ctl); waited += 100) {
      struct sync_info now_si;
      if (ctl_sleep(hb->ctl, 100)) break;
      sync_get_info(hb->sync, &now_si);
      if (ok && now_si.seq != si.seq && waited >= 900) break;
    }
  }
  heartbeat_memo_fini(&memo);
  ctl_handle_free(hb->ctl, h);
  return NULL;
}

struct heartbeat *heartbeat_new(struct ctl *ctl, struct sync *sync, int64_t interval_ms,
                                heartbeat_obs_fn obs, void *arg) {
  struct heartbeat *hb = calloc(1, sizeof *hb);
  if (!hb) return NULL;
  hb->ctl = ctl;
  hb->sync = sync;
  hb->interval_ms = interval_ms;
  hb->obs = obs;
  hb->arg = arg;
  pthread_mutex_init(&hb->mu, NULL);
  return hb;
}

int heartbeat_start(struct heartbeat *hb) {
  if (pthread_create(&hb->thr, NULL, hb_thread, hb) != 0) return -1;
  hb->started = 1;
  return 0;
}

void heartbeat_join(struct heartbeat *hb) {
  if (hb->started) pthread_join(hb->thr, NULL);
  hb->started = 0;
}

void heartbeat_free(struct heartbeat **p) {
  if (!*p) return;
  pthread_mutex_destroy(&(*p)->mu);
  free(*p);
  *p = NULL;
}

void heartbeat_stats(struct heartbeat *hb, int64_t *sent, int64_t *failed, int64_t *last_ok_wall) {
  pthread_mutex_lock(&hb->mu);
  *sent = hb->sent;
  *failed = hb->failed;
  *last_ok_wall = hb->last_ok;
  pthread_mutex_unlock(&hb->mu);
}
