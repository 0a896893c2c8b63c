/* ctl — libcurl requests to controld with the node token. */
#include "ctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "rng.h"
#include "token.h"

#define CTL_BODY_MAX (64 * 1024 * 1024)

int ctl_init(struct ctl *c, const char *url, const char *token, const char *ca_file, char *err,
             size_t errlen) {
  memset(c, 0, sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
  atomic_init(&c->cur_idx, 0);
  atomic_init(&c->revoked, 0);
  atomic_init(&c->stop, 0);
  if (ctlset_parse(&c->set, url, err, errlen) < 0) return -1;
  if (token && *token && ctl_set_token(c, token, err, errlen) < 0) return -1;
  if (ca_file && *ca_file) {
    if (strlen(ca_file) >= sizeof c->ca_file) {
      snprintf(err, errlen, "option controld-ca-file: path too long");
      return -1;
    }
    memcpy(c->ca_file, ca_file, strlen(ca_file) + 1);
  }
  return 0;
}

int ctl_set_token(struct ctl *c, const char *token, char *err, size_t errlen) {
  if (!token || !*token || strlen(token) > 256 || strpbrk(token, "\r\n \t")) {
    snprintf(err, errlen, "the node token must be 1 to 256 characters without spaces");
    return -1;
  }
  snprintf(c->auth, sizeof c->auth, "Authorization: Bearer %s", token);
  return 0;
}

void ctl_fini(struct ctl *c) {
  token_wipe(c->auth, sizeof c->auth);
  pthread_mutex_destroy(&c->mu);
}

CURL *ctl_handle(struct ctl *c) {
  CURL *h = curl_easy_init();
  CURLM *m = h ? curl_multi_init() : NULL;
  int slot = -1;
  if (m) {
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < CTL_HANDLES_MAX && slot < 0; i++)
      if (!c->easy[i]) slot = i;
    if (slot >= 0) {
      c->easy[slot] = h;
      c->multi[slot] = m;
    }
    pthread_mutex_unlock(&c->mu);
  }
  if (slot >= 0) return h;
  if (m) curl_multi_cleanup(m);
  if (h) curl_easy_cleanup(h);
  return NULL;
}

void ctl_handle_free(struct ctl *c, CURL *h) {
  CURLM *m = NULL;
  if (!h) return;
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < CTL_HANDLES_MAX; i++)
    if (c->easy[i] == h) {
      m = c->multi[i];
      c->easy[i] = NULL;
      c->multi[i] = NULL;
    }
  pthread_mutex_unlock(&c->mu);
  if (m) curl_multi_cleanup(m);
  curl_easy_cleanup(h);
}

void ctl_stop(struct ctl *c) {
  atomic_store(&c->stop, 1);
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < CTL_HANDLES_MAX; i++)
    if (c->multi[i]) curl_multi_wakeup(c->multi[i]);
  pthread_mutex_unlock(&c->mu);
}

/* The multi handle ctl_handle made for h. Only h's own thread frees it, so it stays valid while
   that thread runs a transfer. */
static CURLM *multi_of(struct ctl *c, CURL *h) {
  CURLM *m = NULL;
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < CTL_HANDLES_MAX && !m; i++)
    if (c->easy[i] == h) m = c->multi[i];
  pthread_mutex_unlock(&c->mu);
  return m;
}

/* curl_easy_perform(h) on h's multi handle, ended by ctl_stop at once (CURLE_ABORTED_BY_CALLBACK,
   as the progress callback ends it). Between two wake-ups libcurl's own timeouts apply. */
static CURLcode perform(struct ctl *c, CURL *h) {
  CURLM *m = multi_of(c, h);
  CURLcode cc = CURLE_ABORTED_BY_CALLBACK;
  if (!m || curl_multi_add_handle(m, h) != CURLM_OK) return CURLE_FAILED_INIT;
  for (;;) {
    int running = 0, left = 0;
    CURLMsg *msg;
    if (curl_multi_perform(m, &running) != CURLM_OK) {
      cc = CURLE_FAILED_INIT;
      break;
    }
    if (!running) { /* its one transfer is done */
      msg = curl_multi_info_read(m, &left);
      cc = msg && msg->msg == CURLMSG_DONE ? msg->data.result : CURLE_FAILED_INIT;
      break;
    }
    if (atomic_load(&c->stop)) break;
    if (curl_multi_poll(m, NULL, 0, 1000, NULL) != CURLM_OK) {
      cc = CURLE_FAILED_INIT;
      break;
    }
  }
  curl_multi_remove_handle(m, h);
  return cc;
}

void ctl_resp_fini(struct ctl_resp *r) {
  buf_fini(&r->body);
}

int ctl_running(struct ctl *c) {
  return !atomic_load(&c->stop) && !atomic_load(&c->revoked);
}

int ctl_sleep(struct ctl *c, int64_t ms) {
  while (ms > 0) {
    int64_t step = ms < 50 ? ms : 50;
    struct timespec ts = {(time_t)(step / 1000), (long)(step % 1000) * 1000000L};
    if (atomic_load(&c->stop)) return 1;
    nanosleep(&ts, NULL);
    ms -= step;
  }
  return atomic_load(&c->stop) ? 1 : 0;
}

static size_t on_body(char *p, size_t sz, size_t nm, void *arg) {
  struct ctl_resp *r = arg;
  if (buf_append(&r->body, p, sz * nm) < 0) return 0;
  return sz * nm;
}

/* When header line p (n bytes) is the header name (given with its colon), its integer value into
 *out. */
static void header_int(const char *p, size_t n, const char *name, int64_t *out) {
  size_t k = strlen(name), l;
  char tmp[32];
  if (n <= k || strncasecmp(p, name, k) != 0) return;
  l = n - k;
  if (l >= sizeof tmp) l = sizeof tmp - 1;
  memcpy(tmp, p + k, l);
  tmp[l] = '\0';
  *out = strtoll(tmp, NULL, 10);
}

static size_t on_header(char *p, size_t sz, size_t nm, void *arg) {
  struct ctl_resp *r = arg;
  size_t n = sz * nm;
  header_int(p, n, "X-Cdnca-Node-Id:", &r->node_id);
  header_int(p, n, "X-Cdnca-Now:", &r->now_ms);
  return n;
}

/* What a transfer's progress callback checks: shutdown, and whether the node has moved away
   from the replica the transfer went to. */
struct xfer {
  struct ctl *c;
  int idx;   /* the replica this transfer went to */
  int moved; /* aborted because the current replica is another one now */
};

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c2, curl_off_t d) {
  struct xfer *x = arg;
  if (atomic_load(&x->c->stop)) return 1;
  if (atomic_load(&x->c->cur_idx) != x->idx) {
    x->moved = 1;
    return 1;
  }
  return 0;
}

static uint32_t jitter(void) {
  return (uint32_t)rng_seed_fresh();
}

/* The options every request to controld has. */
static void easy_common(struct ctl *c, CURL *h, const char *url, long timeout_ms, struct xfer *x) {
  curl_easy_reset(h);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(h, CURLOPT_USERAGENT, "cdnca-noded/" CDNCA_VERSION);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  if (c->ca_file[0]) curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
}

/* Hand a call's outcome to the replica set; one log line when it moved to another replica. */
static void report(struct ctl *c, int idx, uint64_t gen, int answered, long status,
                   const char *why) {
  enum ctlset_outcome o = ctlset_classify(answered, status);
  char from[CTLSET_URL_MAX], to[CTLSET_URL_MAX];
  int switched, now_idx, n;
  pthread_mutex_lock(&c->mu);
  switched = ctlset_report(&c->set, gen, o, clock_mono_ms(), jitter());
  atomic_store(&c->cur_idx, c->set.cur);
  n = c->set.n;
  memcpy(from, c->set.url[idx], sizeof from);
  memcpy(to, ctlset_current(&c->set, &now_idx, NULL), sizeof to);
  pthread_mutex_unlock(&c->mu);
  if (switched)
    log_warn("controld %d/%d %s is away (%s); switching to controld %d/%d %s", idx + 1, n, from,
             why, now_idx + 1, n, to);
}

int ctl_call(struct ctl *c, CURL *h, const char *method, const char *path, const char *json_body,
             long timeout_ms, struct ctl_resp *out, char *err, size_t errlen) {
  char url[1024], base[CTLSET_URL_MAX], why[64];
  struct curl_slist *hdrs = NULL;
  struct xfer x = {c, 0, 0};
  CURLcode cc;
  uint64_t gen;
  int rc = -1, idx;
  memset(out, 0, sizeof *out);
  buf_init(&out->body, CTL_BODY_MAX);
  if (atomic_load(&c->stop)) {
    snprintf(err, errlen, "stopping");
    return -1;
  }
  pthread_mutex_lock(&c->mu);
  memcpy(base, ctlset_current(&c->set, &idx, &gen), sizeof base);
  pthread_mutex_unlock(&c->mu);
  snprintf(url, sizeof url, "%s%s", base, path);
  x.idx = idx;
  easy_common(c, h, url, timeout_ms, &x);
  if (c->auth[0]) hdrs = curl_slist_append(hdrs, c->auth); /* none before enrolment */
  hdrs = curl_slist_append(hdrs, "Accept: application/json");
  if (json_body) hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  if (json_body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, json_body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(json_body));
  }
  cc = perform(c, h);
  if (cc != CURLE_OK) {
    if (cc == CURLE_ABORTED_BY_CALLBACK && x.moved)
      snprintf(err, errlen, "%s %s%s: aborted, moved to another controld", method, base, path);
    else
      snprintf(err, errlen, "%s %s%s: %s", method, base, path,
               cc == CURLE_ABORTED_BY_CALLBACK ? "stopping" : curl_easy_strerror(cc));
    /* a transfer aborted by shutdown or by a switch says nothing more about the replica */
    if (cc != CURLE_ABORTED_BY_CALLBACK) report(c, idx, gen, 0, 0, curl_easy_strerror(cc));
    goto out;
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
  /* the answer left controld at now_ms and arrived now: the offset is off by at most the one-way
     delay (loopback to a few ms), enough for steps of a second or more */
  if (out->now_ms > 0) atomic_store(&c->clock_offset_ms, out->now_ms - clock_wall_ms());
  snprintf(why, sizeof why, "HTTP %ld", out->status);
  report(c, idx, gen, 1, out->status, why);
  if (out->status == 401 && c->auth[0] && !atomic_exchange(&c->revoked, 1))
    log_error("controld refused the node token (401 on %s %s): the node was revoked or the token "
              "is wrong; syncing stops and the last config keeps being served",
              method, path);
  rc = 0;
out:
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
  curl_slist_free_all(hdrs);
  if (rc < 0) ctl_resp_fini(out); /* part of a body may have come before the transfer failed */
  return rc;
}

int ctl_away(int rc, long status) {
  return ctlset_classify(rc == 0, status) != CTLSET_ANSWERED;
}

static size_t discard(char *p, size_t sz, size_t nm, void *arg) {
  (void)p;
  (void)arg;
  return sz * nm;
}

/* GET /healthz on the current replica (no token: the route is public); 1 when it answered 200. */
static int probe_healthz(struct ctl *c, CURL *h, const char *base, int idx) {
  char url[CTLSET_URL_MAX + 16];
  struct xfer x = {c, idx, 0};
  long status = 0;
  snprintf(url, sizeof url, "%s/healthz", base);
  easy_common(c, h, url, 1000L, &x);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
  if (perform(c, h) != CURLE_OK) return 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  return status == 200;
}

int ctl_backoff(struct ctl *c, CURL *h) {
  for (;;) {
    char base[CTLSET_URL_MAX];
    int64_t now = clock_mono_ms(), left;
    int probe, idx = 0;
    uint64_t gen;
    if (atomic_load(&c->stop)) return 1;
    pthread_mutex_lock(&c->mu);
    left = ctlset_wait_ms(&c->set, now);
    probe = left > 0 && ctlset_probe_claim(&c->set, now, jitter());
    if (probe) memcpy(base, ctlset_current(&c->set, &idx, &gen), sizeof base);
    pthread_mutex_unlock(&c->mu);
    if (left <= 0) return 0;
    if (probe && probe_healthz(c, h, base, idx)) {
      pthread_mutex_lock(&c->mu);
      ctlset_reachable(&c->set, gen, clock_mono_ms());
      pthread_mutex_unlock(&c->mu);
      log_info("controld %s answers /healthz again: retrying now", base);
      continue;
    }
    if (ctl_sleep(c, left < 50 ? left : 50)) return 1;
  }
}

int64_t ctl_backoff_left(struct ctl *c) {
  int64_t left;
  pthread_mutex_lock(&c->mu);
  left = ctlset_wait_ms(&c->set, clock_mono_ms());
  pthread_mutex_unlock(&c->mu);
  return left;
}

void ctl_replica(struct ctl *c, char *url, size_t cap, int *idx, int *n, int64_t *switches) {
  const char *cur;
  int i;
  pthread_mutex_lock(&c->mu);
  cur = ctlset_current(&c->set, &i, NULL);
  if (url && cap) snprintf(url, cap, "%s", cur);
  if (idx) *idx = i;
  if (n) *n = c->set.n;
  if (switches) *switches = c->set.switches;
  pthread_mutex_unlock(&c->mu);
}
