/* notify — webhook delivery: a worker thread draining the deliveries outbox over libcurl multi.

   The outbox is the deliveries table. Each (webhook, site) pair is a queue whose oldest pending row
   is its head: only the head is attempted, so a later event never overtakes an earlier one to the
   same receiver. The worker scans the heads when woken (new events), when an attempt ends and when
   the earliest retry falls due; it holds the store's writer lock only to record results, never
   while waiting on the network. */
#include "notify.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "chan.h"
#include "clock.h"
#include "curlhead.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "names.h"
#include "rng.h"
#include "store_events.h"
#include "store_notify.h"
#include "token.h"

/* look at the outbox at least this often (clock jumps, missed wakes) */
#define IDLE_RESCAN_MS 5000
#define PRUNE_EVERY_MS 3600000 /* outbox clean-up, once an hour */
#define ERROR_RESCAN_MS 1000

/* One attempt in flight. */
struct xfer {
  CURL *easy;
  struct curl_slist *hdrs;
  struct curl_slist *rcpt; /* email: the recipients */
  char *body;
  size_t body_len, read_at; /* email: the message, and how much of it curl has read */
  int kind;                 /* the channel's enum chan_kind */
  int64_t id, webhook_id, site_id, created_at;
  int attempts;               /* made before this one */
  struct targets_guard guard; /* the deny list on every address the name resolves to now */
  struct curlhead head;       /* HTTP kinds: the answer's head and trailers, bounded, one framing */
  char errbuf[CURL_ERROR_SIZE];
};

struct notify {
  struct store *st;
  struct metrics *m;
  struct notify_policy p;      /* the worker's own copy */
  pthread_mutex_t pmu;         /* guards next_p */
  struct notify_policy next_p; /* a reloaded policy, taken by the worker (policy_pending) */
  atomic_int policy_pending;
  CURLM *multi;
  pthread_t thread;
  int started, curl_inited;
  atomic_int wake;
  atomic_int stop;
  atomic_int active; /* delivery on (the engine); off on a replica in cluster mode */
  struct xfer *slots[NOTIFY_MAX_INFLIGHT];
  int ninflight;
  struct rng rng;
};

/* A finished attempt waiting to be written. */
struct finished {
  struct delivery_result r;
  char err[256];
  enum notify_result res;
};

void notify_policy_defaults(struct notify_policy *p) {
  p->retry_min_ms = 1000;
  p->retry_max_ms = 600000;
  p->give_up_ms = 86400000;
  p->timeout_ms = 10000;
  p->shutdown_grace_ms = 5000;
  p->keep_ms = 7LL * 86400000;
  p->start_inactive = 0;
}

int64_t notify_backoff_ms(const struct notify_policy *p, int attempts, uint32_t rnd) {
  int64_t base = p->retry_min_ms > 0 ? p->retry_min_ms : 1, cap = p->retry_max_ms;
  if (cap < base) cap = base;
  for (int i = 1; i < attempts && base < cap; i++)
    base *= 2;
  if (base > cap) base = cap;
  return base - (int64_t)(rnd % (uint32_t)(base / 4 + 1));
}

enum notify_result notify_decide(const struct notify_policy *p, int status, int attempts,
                                 int64_t created_at, int64_t now, uint32_t rnd, int64_t *next_at) {
  int64_t deadline = created_at + p->give_up_ms, next;
  if (status >= 200 && status <= 299) return NOTIFY_DELIVERED;
  if (now >= deadline) return NOTIFY_FAILED;
  next = now + notify_backoff_ms(p, attempts, rnd);
  *next_at = next < deadline ? next : deadline;
  return NOTIFY_RETRY;
}

int notify_sign(const char *secret, int64_t ts, const char *body, size_t len,
                char out[NOTIFY_SIGNATURE_LEN]) {
  struct buf msg;
  char hex[65];
  int rc = -1;
  buf_init(&msg, 0);
  if (buf_printf(&msg, "%" PRId64 ".", ts) < 0 || buf_append(&msg, body, len) < 0) goto out;
  token_hmac_hex(secret, strlen(secret), msg.data, msg.len, hex);
  snprintf(out, NOTIFY_SIGNATURE_LEN, "sha256=%s", hex);
  rc = 0;
out:
  buf_fini(&msg);
  return rc;
}

cJSON *notify_event_json(const struct event_rec *e) {
  cJSON *j = cJSON_CreateObject(), *data;
  if (!j) return NULL;
  json_add_i64(j, "id", e->id);
  cJSON_AddStringToObject(j, "type", e->type);
  cJSON_AddStringToObject(j, "title", e->title);
  if (e->site_id > 0) {
    cJSON *s = cJSON_AddObjectToObject(j, "site");
    json_add_i64(s, "id", e->site_id);
    json_add_str_or_null(s, "name", e->site_name[0] ? e->site_name : NULL);
  } else {
    cJSON_AddNullToObject(j, "site");
  }
  json_add_time(j, "created_at", e->created_at);
  data = e->data ? json_parse(e->data, strlen(e->data)) : NULL;
  if (!cJSON_IsObject(data)) {
    cJSON_Delete(data);
    data = cJSON_CreateObject();
  }
  cJSON_AddItemToObject(j, "data", data);
  return j;
}

/* ---- the worker ---- */

static uint32_t next_rand(struct notify *n) {
  return (uint32_t)(rng_next(&n->rng) >> 32); /* jitter only, not a secret */
}

static size_t discard_body(char *p, size_t size, size_t nmemb, void *arg) {
  (void)p;
  (void)arg;
  return size * nmemb;
}

static void xfer_free(struct xfer *x) {
  if (!x) return;
  if (x->easy) curl_easy_cleanup(x->easy);
  curl_slist_free_all(x->hdrs);
  curl_slist_free_all(x->rcpt);
  if (x->body) token_wipe(x->body, strlen(x->body)); /* a PagerDuty body holds the routing key */
  free(x->body);
  free(x);
}

static int queue_busy(const struct notify *n, int64_t webhook_id, int64_t site_id) {
  for (int i = 0; i < NOTIFY_MAX_INFLIGHT; i++)
    if (n->slots[i] && n->slots[i]->webhook_id == webhook_id && n->slots[i]->site_id == site_id)
      return 1;
  return 0;
}

static int add_header(struct curl_slist **list, const char *name, const char *value) {
  char line[256];
  struct curl_slist *nl;
  snprintf(line, sizeof line, "%s:%s%s", name, value[0] ? " " : "", value);
  nl = curl_slist_append(*list, line);
  if (!nl) return -1;
  *list = nl;
  return 0;
}

/* The common options of an HTTP POST of x->body to url. */
static void http_post(struct notify *n, struct xfer *x, const char *url, const char *agent) {
  curl_easy_setopt(x->easy, CURLOPT_URL, url);
  curl_easy_setopt(x->easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(x->easy, CURLOPT_POST, 1L);
  curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body);
  curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(x->body));
  curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->hdrs);
  curl_easy_setopt(x->easy, CURLOPT_USERAGENT, agent);
  curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)n->p.timeout_ms);
  curl_easy_setopt(x->easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, discard_body);
  curlhead_init(&x->head, 0, 0);
  curlhead_bound_wire(x->easy, &x->head);
  curl_easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, curlhead_cb);
  curl_easy_setopt(x->easy, CURLOPT_HEADERDATA, &x->head);
}

/* A signed webhook (docs/design.md, Webhook delivery). 0 or -1. */
static int setup_webhook(struct notify *n, struct xfer *x, struct delivery_job *job, int64_t now) {
  cJSON *ev = notify_event_json(&job->event);
  char sig[NOTIFY_SIGNATURE_LEN], ts[24];
  int64_t secs = now / 1000;
  x->body = ev ? json_print(ev) : NULL;
  cJSON_Delete(ev);
  if (!x->body) return -1;
  snprintf(ts, sizeof ts, "%" PRId64, secs);
  if (notify_sign(job->secret, secs, x->body, strlen(x->body), sig) < 0) return -1;
  if (add_header(&x->hdrs, "Content-Type", "application/json") < 0 ||
      add_header(&x->hdrs, "X-Cdnca-Event", job->event.type) < 0 ||
      add_header(&x->hdrs, "X-Cdnca-Delivery", job->uuid) < 0 ||
      add_header(&x->hdrs, "X-Cdnca-Timestamp", ts) < 0 ||
      add_header(&x->hdrs, "X-Cdnca-Signature", sig) < 0 || add_header(&x->hdrs, "Expect", "") < 0)
    return -1;
  if (!(x->easy = curl_easy_init())) return -1;
  http_post(n, x, job->url, "cdnca-controld/" CDNCA_VERSION " (webhook)");
  return 0;
}

/* A Slack message or a PagerDuty event (docs/design.md, Notification channels): 0, 1 when the
   event has nothing to send to PagerDuty, -1. */
static int setup_json(struct notify *n, struct xfer *x, struct delivery_job *job) {
  if (job->kind == CHAN_SLACK)
    x->body = chan_slack_body(&job->event, n->p.public_url);
  else if (chan_pd_action(job->event.type) == EVENT_PAGE_NONE)
    return 1;
  else
    x->body = chan_pd_body(&job->event, job->secret, n->p.public_url);
  if (!x->body) return -1;
  if (add_header(&x->hdrs, "Content-Type", "application/json") < 0 ||
      add_header(&x->hdrs, "Expect", "") < 0 || !(x->easy = curl_easy_init()))
    return -1;
  http_post(n, x, job->url, "cdnca-controld/" CDNCA_VERSION);
  return 0;
}

static size_t read_body(char *buf, size_t size, size_t nmemb, void *arg) {
  struct xfer *x = arg;
  size_t want = size * nmemb, left = x->body_len - x->read_at;
  if (want > left) want = left;
  memcpy(buf, x->body + x->read_at, want);
  x->read_at += want;
  return want;
}

/* An email over SMTP: smtps:// is TLS from the start, smtp:// must upgrade with STARTTLS (a
   server that does not offer it fails the attempt, nothing is sent in the clear) except to a
   loopback host. 0 or -1. */
static int setup_email(struct notify *n, struct xfer *x, struct delivery_job *job) {
  cJSON *cfg = job->config ? json_parse(job->config, strlen(job->config)) : NULL, *it;
  const cJSON *from = cJSON_GetObjectItemCaseSensitive(cfg, "from");
  const cJSON *to = cJSON_GetObjectItemCaseSensitive(cfg, "to");
  const cJSON *user = cJSON_GetObjectItemCaseSensitive(cfg, "username");
  const char *list[CHAN_EMAIL_MAX_TO];
  char addr[CHAN_EMAIL_ADDR_MAX + 3];
  CURLU *u = curl_url();
  char *host = NULL, *scheme = NULL;
  int nto = 0, rc = -1;
  if (!cJSON_IsString(from) || !cJSON_IsArray(to)) goto out;
  cJSON_ArrayForEach(it, to) if (cJSON_IsString(it) && nto < CHAN_EMAIL_MAX_TO) {
    struct curl_slist *nl;
    list[nto++] = it->valuestring;
    snprintf(addr, sizeof addr, "<%s>", it->valuestring);
    if (!(nl = curl_slist_append(x->rcpt, addr))) goto out;
    x->rcpt = nl;
  }
  if (!nto) goto out;
  x->body =
      chan_email_message(&job->event, from->valuestring, list, nto, job->uuid, n->p.public_url);
  if (!x->body) goto out;
  x->body_len = strlen(x->body);
  if (!u || curl_url_set(u, CURLUPART_URL, job->url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK)
    goto out;
  if (!(x->easy = curl_easy_init())) goto out;
  snprintf(addr, sizeof addr, "<%s>", from->valuestring);
  curl_easy_setopt(x->easy, CURLOPT_URL, job->url);
  curl_easy_setopt(x->easy, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
  curl_easy_setopt(x->easy, CURLOPT_MAIL_FROM, addr);
  curl_easy_setopt(x->easy, CURLOPT_MAIL_RCPT, x->rcpt);
  curl_easy_setopt(x->easy, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(x->easy, CURLOPT_READFUNCTION, read_body);
  curl_easy_setopt(x->easy, CURLOPT_READDATA, x);
  curl_easy_setopt(x->easy, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->body_len);
  curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)n->p.timeout_ms);
  curl_easy_setopt(x->easy, CURLOPT_USE_SSL,
                   strcmp(scheme, "smtps") == 0 || !chan_host_loopback(host)
                       ? (long)CURLUSESSL_ALL
                       : (long)CURLUSESSL_TRY);
  if (cJSON_IsString(user) && user->valuestring[0]) {
    curl_easy_setopt(x->easy, CURLOPT_USERNAME, user->valuestring);
    curl_easy_setopt(x->easy, CURLOPT_PASSWORD, job->secret);
  }
  rc = 0;
out:
  curl_free(host);
  curl_free(scheme);
  curl_url_cleanup(u);
  cJSON_Delete(cfg);
  return rc;
}

/* Build the request of a loaded job into x: 0, 1 when there is nothing to send, -1 (logged). */
static int xfer_setup(struct notify *n, struct xfer *x, struct delivery_job *job, int64_t now) {
  int rc;
  x->kind = job->kind;
  switch (job->kind) {
  case CHAN_SLACK:
  case CHAN_PAGERDUTY:
    rc = setup_json(n, x, job);
    break;
  case CHAN_EMAIL:
    rc = setup_email(n, x, job);
    break;
  default:
    rc = setup_webhook(n, x, job, now);
    break;
  }
  if (rc == 0) {
    curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
    /* the deny list again, on every address the name resolves to now */
    x->guard.t = n->p.deny;
    if (n->p.deny && targets_guard_curl_note(x->easy, &x->guard) < 0) rc = -1;
  }
  if (rc < 0) log_error("delivery %" PRId64 ": cannot build the request", job->id);
  return rc;
}

/* Record a delivery there was nothing to send for (a PagerDuty channel and an event without an
   action) as delivered, with why. */
static void record_nothing(struct notify *n, const struct delivery_job *job, int64_t now) {
  struct delivery_result r;
  memset(&r, 0, sizeof r);
  r.id = job->id;
  r.state = DELIVERY_DELIVERED;
  r.error = "nothing sent: no PagerDuty action for this event type";
  r.at = now;
  (void)store_delivery_record(n->st, &r, 1);
  atomic_store(&n->wake, 1); /* the queue's next delivery is its head now */
}

/* Start the attempt of one due head in a free slot; 0 started, 1 skipped (gone), -1 error. */
static int start_one(struct notify *n, const struct delivery_head *h, int64_t now) {
  struct delivery_job job;
  struct xfer *x = NULL;
  int slot = -1, rc = -1, setup;
  enum store_rc src;
  for (int i = 0; i < NOTIFY_MAX_INFLIGHT && slot < 0; i++)
    if (!n->slots[i]) slot = i;
  if (slot < 0) return -1;
  src = store_delivery_load(n->st, h->id, &job);
  if (src == STORE_NOT_FOUND) return 1;
  if (src != STORE_OK) return -1;
  x = calloc(1, sizeof *x);
  if (!x) goto out;
  x->id = job.id;
  x->webhook_id = job.webhook_id;
  x->site_id = job.site_id;
  x->created_at = job.created_at;
  x->attempts = job.attempts;
  setup = xfer_setup(n, x, &job, now);
  if (setup == 1) {
    record_nothing(n, &job, now);
    rc = 1;
    goto out;
  }
  if (setup < 0) goto out;
  if (curl_multi_add_handle(n->multi, x->easy) != CURLM_OK) {
    log_error("delivery %" PRId64 ": cannot add the transfer", job.id);
    goto out;
  }
  log_debug("delivery %" PRId64 " (%s, event %" PRId64 ") attempt %d to channel %" PRId64, job.id,
            job.uuid, job.event.id, job.attempts + 1, job.webhook_id);
  n->slots[slot] = x;
  n->ninflight++;
  x = NULL;
  rc = 0;
out:
  xfer_free(x);
  delivery_job_fini(&job);
  return rc;
}

/* The attempts in flight to channel webhook_id. */
static int channel_inflight(const struct notify *n, int64_t webhook_id) {
  int k = 0;
  for (int i = 0; i < NOTIFY_MAX_INFLIGHT; i++)
    k += n->slots[i] && n->slots[i]->webhook_id == webhook_id;
  return k;
}

static int cmp_heads(const void *a, const void *b) {
  const struct delivery_head *x = a, *y = b;
  if (x->next_attempt_at != y->next_attempt_at)
    return x->next_attempt_at < y->next_attempt_at ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* Start every due head whose queue is idle while slots last. Returns when to look again (wall ms);
   INT64_MAX when only a finishing attempt can change anything. */
static int64_t start_due(struct notify *n, int64_t now) {
  struct delivery_head *heads = NULL;
  int nh = 0;
  int64_t next = INT64_MAX;
  if (store_delivery_heads(n->st, &heads, &nh) != STORE_OK) return now + ERROR_RESCAN_MS;
  if (nh > 1) qsort(heads, (size_t)nh, sizeof *heads, cmp_heads);
  for (int i = 0; i < nh; i++) {
    const struct delivery_head *h = &heads[i];
    if (queue_busy(n, h->webhook_id, h->site_id)) continue; /* its end triggers a rescan */
    if (h->next_attempt_at > now) {
      if (h->next_attempt_at < next) next = h->next_attempt_at;
      continue;
    }
    if (n->ninflight >= NOTIFY_MAX_INFLIGHT) continue; /* a slot freeing triggers a rescan */
    /* no channel takes more than its share: one whose receiver hangs holds its own slots only */
    if (channel_inflight(n, h->webhook_id) >= NOTIFY_MAX_PER_CHANNEL) continue;
    if (start_one(n, h, now) < 0 && now + ERROR_RESCAN_MS < next) next = now + ERROR_RESCAN_MS;
  }
  free(heads);
  return next;
}

/* the metric label of each result */
static const char *const result_names[] = {
    [NOTIFY_DELIVERED] = "delivered",
    [NOTIFY_RETRY] = "retry",
    [NOTIFY_FAILED] = "failed",
};

/* Judge one finished transfer into f and free its slot. */
static void finish(struct notify *n, struct xfer *x, CURLcode code, struct finished *f) {
  long status = 0;
  int64_t now = clock_wall_ms(), next = now;
  enum log_level lvl;
  /* every address the target resolved to was refused: nothing was connected to, and a retry
     would only ask the deny list again (docs/design.md, Errors and limits) */
  int refused = code != CURLE_OK && x->guard.refused > 0 && x->guard.opened == 0;
  memset(f, 0, sizeof *f);
  curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
  if (refused) {
    snprintf(f->err, sizeof f->err, "target_refused: %s is %s, not connected", x->guard.addr,
             x->guard.reason ? x->guard.reason : "refused");
    status = 0;
  } else if (code != CURLE_OK && !x->head.wire_cut) {
    /* (an answer whose body was cut at CURLHEAD_WIRE_MAX is judged by its status: the receiver
       has answered, and nothing of its body is needed) */
    snprintf(f->err, sizeof f->err, "%s",
             x->head.why    ? x->head.why /* refused by curlhead: not delivered, retried */
             : x->errbuf[0] ? x->errbuf
                            : curl_easy_strerror(code));
    status = 0;
  } else if (x->kind != CHAN_EMAIL && curlhead_unfinished(&x->head)) {
    /* the receiver closed inside its head: no answer, not delivered, retried */
    snprintf(f->err, sizeof f->err, "%s", curlhead_unfinished(&x->head));
    status = 0;
  } else if (status < 200 || status > 299) {
    snprintf(f->err, sizeof f->err, "%s %ld", x->kind == CHAN_EMAIL ? "SMTP" : "HTTP", status);
  }
  f->res = refused ? NOTIFY_FAILED
                   : notify_decide(&n->p, (int)status, x->attempts + 1, x->created_at, now,
                                   next_rand(n), &next);
  f->r.id = x->id;
  f->r.state = f->res == NOTIFY_DELIVERED ? DELIVERY_DELIVERED
               : f->res == NOTIFY_RETRY   ? DELIVERY_PENDING
                                          : DELIVERY_FAILED;
  f->r.status = (int)status;
  f->r.error = f->err;
  f->r.next_attempt_at = next;
  f->r.at = now;
  /* a delivery's first failure and its end go to the log; the retries between (a receiver down
     for a day is tried some 150 times a delivery) are in its record (GET …/deliveries) and the
     metrics, and in the log at debug */
  lvl = f->res == NOTIFY_RETRY && x->attempts > 0 ? LOG_DEBUG : LOG_INFO;
  if (f->res == NOTIFY_DELIVERED)
    log_debug("delivery %" PRId64 " delivered (HTTP %ld)", x->id, status);
  else if (log_enabled(lvl))
    log_write(lvl, __func__, "delivery %" PRId64 " to channel %" PRId64 " attempt %d: %s (%s)",
              x->id, x->webhook_id, x->attempts + 1, f->err,
              f->res == NOTIFY_RETRY ? "will retry" : "gave up");
}

/* Record every finished attempt; returns how many finished, or -1 when recording failed. */
static int collect(struct notify *n) {
  struct finished done[NOTIFY_MAX_INFLIGHT];
  struct delivery_result res[NOTIFY_MAX_INFLIGHT];
  CURLMsg *msg;
  int left, nd = 0;
  while (nd < NOTIFY_MAX_INFLIGHT && (msg = curl_multi_info_read(n->multi, &left))) {
    struct xfer *x;
    char *priv = NULL;
    if (msg->msg != CURLMSG_DONE) continue;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
    x = (struct xfer *)(void *)priv;
    if (!x) continue;
    finish(n, x, msg->data.result, &done[nd]);
    res[nd] = done[nd].r;
    nd++;
    curl_multi_remove_handle(n->multi, x->easy);
    for (int i = 0; i < NOTIFY_MAX_INFLIGHT; i++)
      if (n->slots[i] == x) n->slots[i] = NULL;
    n->ninflight--;
    xfer_free(x);
  }
  if (nd == 0) return 0;
  if (store_delivery_record(n->st, res, nd) < 0) return -1;
  for (int i = 0; i < nd; i++) {
    char labels[32];
    snprintf(labels, sizeof labels, "result=\"%s\"",
             names_word(NAMES(result_names), (int)done[i].res, "failed"));
    if (n->m) metrics_add(n->m, "cdnca_webhook_deliveries_total", labels, 1);
  }
  return nd;
}

/* Delivery went off: attempts in flight are dropped, their rows stay pending. */
static void drop_inflight(struct notify *n, const char *why) {
  for (int i = 0; i < NOTIFY_MAX_INFLIGHT; i++) {
    if (!n->slots[i]) continue;
    log_info("delivery %" PRId64 " still in flight %s: left pending", n->slots[i]->id, why);
    curl_multi_remove_handle(n->multi, n->slots[i]->easy);
    xfer_free(n->slots[i]);
    n->slots[i] = NULL;
  }
  n->ninflight = 0;
}

static void *worker(void *arg) {
  struct notify *n = arg;
  int64_t next_due = 0, grace_end = 0, next_prune = 0;
  int rescan = 1;
  for (;;) {
    int64_t now = clock_wall_ms();
    int running = 0, got, timeout;
    if (!atomic_load(&n->active) && !atomic_load(&n->stop)) {
      /* not the engine: nothing is sent or pruned here (notify_set_active wakes us) */
      if (n->ninflight) drop_inflight(n, "when the engine lease was lost");
      atomic_store(&n->wake, 0);
      curl_multi_poll(n->multi, NULL, 0, IDLE_RESCAN_MS, NULL);
      rescan = 1;
      next_prune = 0;
      continue;
    }
    if (clock_mono_ms() >= next_prune) { /* finished outbox rows are history: keep keep_ms of it */
      store_delivery_prune(n->st, now - n->p.keep_ms);
      /* test events go with their deliveries (the others by retain.h, after their retention) */
      if (store_event_prune(n->st, now - n->p.keep_ms, 1) < 0) log_warn("could not prune events");
      next_prune = clock_mono_ms() + PRUNE_EVERY_MS;
    }
    if (atomic_exchange(&n->wake, 0)) rescan = 1;
    if (atomic_exchange(&n->policy_pending, 0)) {
      pthread_mutex_lock(&n->pmu);
      n->p = n->next_p;
      pthread_mutex_unlock(&n->pmu);
    }
    if (atomic_load(&n->stop)) {
      if (!grace_end) grace_end = clock_mono_ms() + n->p.shutdown_grace_ms;
      if (n->ninflight == 0 || clock_mono_ms() >= grace_end) break;
    } else if (rescan || now >= next_due) {
      next_due = start_due(n, now);
      rescan = 0;
    }
    if (n->ninflight > 0) curl_multi_perform(n->multi, &running);
    got = collect(n);
    if (got > 0)
      rescan = 1;
    else if (got < 0)
      next_due = now + ERROR_RESCAN_MS; /* rows stay pending: try later */
    if (atomic_load(&n->stop))
      timeout = 100; /* only the in-flight ones now */
    else if (rescan)
      timeout = 0;
    else if (next_due - now > IDLE_RESCAN_MS)
      timeout = IDLE_RESCAN_MS;
    else
      timeout = next_due > now ? (int)(next_due - now) : 0;
    if (timeout > 0) curl_multi_poll(n->multi, NULL, 0, timeout, NULL);
  }
  /* unfinished attempts stay pending in the outbox and are sent again after a restart */
  drop_inflight(n, "at shutdown");
  return NULL;
}

struct notify *notify_new(struct store *st, struct metrics *m, const struct notify_policy *p) {
  struct notify *n = calloc(1, sizeof *n);
  if (!n) return NULL;
  n->st = st;
  n->m = m;
  n->p = *p;
  n->rng.s = rng_seed_fresh();
  atomic_init(&n->wake, 0);
  atomic_init(&n->stop, 0);
  atomic_init(&n->active, !p->start_inactive);
  atomic_init(&n->policy_pending, 0);
  pthread_mutex_init(&n->pmu, NULL);
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    log_error("curl_global_init failed");
    goto fail;
  }
  n->curl_inited = 1;
  n->multi = curl_multi_init();
  if (!n->multi) {
    log_error("cannot create the webhook transfer set");
    goto fail;
  }
  curl_multi_setopt(n->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)NOTIFY_MAX_INFLIGHT);
  if (pthread_create(&n->thread, NULL, worker, n) != 0) {
    log_error("cannot start the webhook delivery thread");
    goto fail;
  }
  n->started = 1;
  return n;
fail:
  notify_free(&n);
  return NULL;
}

void notify_wake(void *arg) {
  struct notify *n = arg;
  if (!n) return;
  atomic_store(&n->wake, 1);
  curl_multi_wakeup(n->multi);
}

void notify_set_active(struct notify *n, int active) {
  if (!n) return;
  atomic_store(&n->active, active ? 1 : 0);
  atomic_store(&n->wake, 1);
  curl_multi_wakeup(n->multi);
}

void notify_set_policy(struct notify *n, const struct notify_policy *p) {
  pthread_mutex_lock(&n->pmu);
  n->next_p = *p;
  pthread_mutex_unlock(&n->pmu);
  atomic_store(&n->policy_pending, 1);
  curl_multi_wakeup(n->multi);
}

void notify_free(struct notify **np) {
  struct notify *n = *np;
  if (!n) return;
  if (n->started) {
    atomic_store(&n->stop, 1);
    curl_multi_wakeup(n->multi);
    pthread_join(n->thread, NULL);
  }
  if (n->multi) curl_multi_cleanup(n->multi);
  if (n->curl_inited) curl_global_cleanup();
  pthread_mutex_destroy(&n->pmu);
  free(n);
  *np = NULL;
}
