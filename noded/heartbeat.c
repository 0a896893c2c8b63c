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

static void *hb_thread(void *arg) {
  struct heartbeat *hb = arg;
  CURL *h = ctl_handle();
  char err[256];
  int warned = 0;
  if (!h) return NULL;
  while (ctl_running(hb->ctl)) {
    struct sync_info si;
    struct ctl_resp r;
    char *body;
    int ok = 0;
    sync_get_info(hb->sync, &si);
    body = heartbeat_body(CDNCA_VERSION, si.seq, hb->obs ? hb->obs(hb->arg) : NULL);
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
  curl_easy_cleanup(h);
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
