/* checkpoint — the checkpoint plugin client (see checkpoint.h). */
#include "checkpoint.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdatomic.h>

#include "hcheck.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "curlhead.h"
#include "fields.h"
#include "json.h"
#include "log.h"
#include "probe.h"

#define CHECKPOINT_POLL_MS 100
#define CHECKPOINT_GRACE_MS 1000

struct cp_slot {
  CURL *easy;
  size_t idx;
  struct buf body;
  int too_big;
  struct curlhead head; /* the answer's head and trailers: bounded, one framing */
};

struct checkpoint {
  char *url;
  CURLM *multi;
  struct curl_slist *headers;
  struct cp_slot slots[CHECKPOINT_CONCURRENCY];
};

static void answer_fail(struct checkpoint_answer *a, const char *why) {
  free(a->votes);
  a->votes = NULL;
  a->n = 0;
  a->valid = 0;
  snprintf(a->error, sizeof a->error, "%s", why);
}

/* Copy a string field bounded by cap (longer ones are cut). */
/* Copy src into dst (cap bytes), cut at a character's start when it does not fit: the copy
   stays valid UTF-8. */
static void copy_bounded(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) {
    n = cap - 1;
    while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
      n--;
  }
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* Validate one vote object into v; NULL, or what is wrong with it. */
static const char *parse_vote(const cJSON *o, struct checkpoint_vote *v) {
  static const char *const keys[] = {"checkpoint", "ok", "status", "error", "latency_ms", NULL};
  const char *bad = NULL, *name = NULL, *err = NULL;
  int64_t status = 0, lat = -1;
  const cJSON *st, *lt;
  memset(v, 0, sizeof *v);
  if (!cJSON_IsObject(o)) return "a vote is not an object";
  if (json_only_keys(o, keys, &bad) < 0) return "a vote has an unknown field";
  /* the name and the error are shown in the dashboard, the incident report and the log: text
     only, as a node's vote error is */
  if (json_str(o, "checkpoint", sizeof v->name - 1, &name) != 0 || !name ||
      !fields_text_valid(name, 1, (int64_t)sizeof v->name - 1))
    return "checkpoint must be 1-63 characters of text without control characters";
  if (json_bool(o, "ok", &v->ok) != 0) return "ok must be a boolean";
  st = cJSON_GetObjectItemCaseSensitive(o, "status");
  if (st && !cJSON_IsNull(st)) {
    if (json_int(o, "status", 0, 999, &status) != 0) return "status must be an integer 0..999";
  }
  lt = cJSON_GetObjectItemCaseSensitive(o, "latency_ms");
  if (lt && !cJSON_IsNull(lt)) {
    if (json_int(o, "latency_ms", 0, 86400000, &lat) != 0)
      return "latency_ms must be a non-negative integer";
  }
  if (json_str(o, "error", 4096, &err) < 0) return "error must be a string or null";
  copy_bounded(v->name, sizeof v->name, name);
  v->status = (int)status;
  v->latency_ms = (int)lat;
  if (err) {
    /* shown in the dashboard, the incident report and the log: an honest plugin may quote a
       body with line breaks, so a control byte becomes '?' (the vote counts), and text still
       not clean (a C1 control, bad UTF-8) is named instead */
    copy_bounded(v->error, sizeof v->error, err);
    fields_text_scrub(v->error, sizeof v->error, "checkpoint error (not printable)");
  }
  return NULL;
}

int checkpoint_parse(const char *body, size_t len, struct checkpoint_answer *out) {
  cJSON *root = NULL;
  const cJSON *votes, *it;
  const char *why = NULL;
  int n, i = 0, rc = -1;
  memset(out, 0, sizeof *out);
  root = json_parse(body, len);
  if (!cJSON_IsObject(root)) {
    answer_fail(out, "the answer is not a JSON object");
    goto out;
  }
  votes = cJSON_GetObjectItemCaseSensitive(root, "votes");
  if (!cJSON_IsArray(votes)) {
    answer_fail(out, "votes must be an array");
    goto out;
  }
  n = cJSON_GetArraySize(votes);
  if (n > CHECKPOINT_MAX_VOTES) {
    answer_fail(out, "too many votes");
    goto out;
  }
  out->votes = calloc((size_t)(n ? n : 1), sizeof *out->votes);
  if (!out->votes) {
    answer_fail(out, "out of memory");
    goto out;
  }
  cJSON_ArrayForEach(it, votes) {
    why = parse_vote(it, &out->votes[i]);
    if (why) break;
    for (int k = 0; k < i; k++)
      if (strcmp(out->votes[k].name, out->votes[i].name) == 0) why = "a checkpoint voted twice";
    if (why) break;
    i++;
  }
  if (why) {
    answer_fail(out, why);
    goto out;
  }
  out->n = n;
  out->valid = 1;
  rc = 0;
out:
  cJSON_Delete(root);
  return rc;
}

void checkpoint_answers_free(struct checkpoint_answer *a, size_t n) {
  if (!a) return;
  for (size_t i = 0; i < n; i++) {
    free(a[i].votes);
    a[i].votes = NULL;
    a[i].n = 0;
  }
}

struct checkpoint *checkpoint_new(const char *url) {
  struct checkpoint *c;
  if (!url || strncmp(url, "http://", 7) != 0) {
    if (!url || strncmp(url, "https://", 8) != 0) {
      log_error("checkpoint plugin URL must start with http:// or https://");
      return NULL;
    }
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    log_error("curl_global_init failed");
    return NULL;
  }
  c = calloc(1, sizeof *c);
  if (!c) goto fail;
  c->url = strdup(url);
  c->multi = curl_multi_init();
  c->headers = curl_slist_append(NULL, "Content-Type: application/json");
  if (!c->url || !c->multi || !c->headers) goto fail;
  for (int i = 0; i < CHECKPOINT_CONCURRENCY; i++)
    buf_init(&c->slots[i].body, CHECKPOINT_BODY_MAX);
  return c;
fail:
  log_error("cannot set up the checkpoint plugin client");
  checkpoint_free(&c);
  if (!c) curl_global_cleanup();
  return NULL;
}

void checkpoint_free(struct checkpoint **cp) {
  struct checkpoint *c = *cp;
  if (!c) return;
  for (int i = 0; i < CHECKPOINT_CONCURRENCY; i++) {
    if (c->slots[i].easy) curl_easy_cleanup(c->slots[i].easy);
    buf_fini(&c->slots[i].body);
  }
  if (c->multi) curl_multi_cleanup(c->multi);
  curl_slist_free_all(c->headers);
  free(c->url);
  free(c);
  *cp = NULL;
  curl_global_cleanup();
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg) {
  struct cp_slot *s = arg;
  size_t n = size * nmemb;
  if (buf_append(&s->body, data, n) < 0) {
    s->too_big = 1;
    return 0; /* abort the transfer */
  }
  return n;
}

/* Start query q (index idx) on slot s; 0 or -1 (out filled with the error). */
static int slot_start(struct checkpoint *c, struct cp_slot *s, const struct checkpoint_query *q,
                      size_t idx, struct checkpoint_answer *out) {
  cJSON *j = cJSON_CreateObject();
  char *payload;
  CURLcode rc = CURLE_OK;
  long timeout =
      (long)(q->timeout_ms > 0 ? q->timeout_ms : PROBE_DEFAULT_TIMEOUT_MS) + CHECKPOINT_GRACE_MS;
  cJSON_AddStringToObject(j, "url", q->url ? q->url : "");
  cJSON_AddStringToObject(j, "host", q->host ? q->host : "");
  cJSON_AddNumberToObject(j, "timeout_ms", q->timeout_ms);
  cJSON_AddStringToObject(j, "user_agent", PROBE_UA_CONTROL);
  {
    struct hcheck_opts d;
    const struct hcheck_opts *o = q->check;
    cJSON *chk = cJSON_AddObjectToObject(j, "check");
    if (!o) {
      hcheck_defaults(&d);
      o = &d;
    }
    if (chk) hcheck_add_json(chk, o, 0);
  }
  payload = json_print(j);
  cJSON_Delete(j);
  if (!payload) {
    answer_fail(out, "out of memory");
    return -1;
  }
  if (!s->easy)
    s->easy = curl_easy_init();
  else
    curl_easy_reset(s->easy);
  if (!s->easy) {
    free(payload);
    answer_fail(out, "cannot create a transfer");
    return -1;
  }
  buf_fini(&s->body);
  buf_init(&s->body, CHECKPOINT_BODY_MAX);
  s->too_big = 0;
  s->idx = idx;
  rc |= curl_easy_setopt(s->easy, CURLOPT_URL, c->url);
  rc |= curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
  rc |= curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
  rc |= curl_easy_setopt(s->easy, CURLOPT_PROTOCOLS_STR, "http,https");
  rc |= curl_easy_setopt(s->easy, CURLOPT_PROXY, "");
  rc |= curl_easy_setopt(s->easy, CURLOPT_FOLLOWLOCATION, 0L);
  rc |= curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, c->headers);
  rc |= curl_easy_setopt(s->easy, CURLOPT_USERAGENT, "cdnca-controld/checkpoint-client");
  rc |= curl_easy_setopt(s->easy, CURLOPT_COPYPOSTFIELDS, payload);
  rc |= curl_easy_setopt(s->easy, CURLOPT_TIMEOUT_MS, timeout);
  rc |= curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, on_body);
  rc |= curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
  curlhead_init(&s->head, 0, 0);
  rc |= curlhead_bound_wire(s->easy, &s->head);
  rc |= curl_easy_setopt(s->easy, CURLOPT_HEADERFUNCTION, curlhead_cb);
  rc |= curl_easy_setopt(s->easy, CURLOPT_HEADERDATA, &s->head);
  free(payload);
  if (rc != CURLE_OK || curl_multi_add_handle(c->multi, s->easy) != CURLM_OK) {
    answer_fail(out, "cannot start the request");
    return -1;
  }
  return 0;
}

/* A transfer ended with result res: fill its answer. */
static void slot_done(struct cp_slot *s, CURLcode res, struct checkpoint_answer *out) {
  long code = 0;
  char why[128];
  curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
  if (s->head.why) {
    snprintf(why, sizeof why, "the answer is refused: %s", s->head.why);
    answer_fail(out, why);
  } else if (s->too_big || s->head.wire_cut) {
    answer_fail(out, "the answer is too large");
  } else if (res != CURLE_OK) {
    snprintf(why, sizeof why, "request failed: %s", curl_easy_strerror(res));
    answer_fail(out, why);
  } else if (curlhead_unfinished(&s->head)) {
    snprintf(why, sizeof why, "the answer is refused: %s", curlhead_unfinished(&s->head));
    answer_fail(out, why);
  } else if (code != 200) {
    snprintf(why, sizeof why, "the plugin answered status %ld", code);
    answer_fail(out, why);
  } else {
    checkpoint_parse(s->body.data ? s->body.data : "", s->body.len, out);
  }
}

int64_t checkpoint_phase_ms(int64_t max_timeout_ms) {
  return (max_timeout_ms > 0 ? max_timeout_ms : PROBE_DEFAULT_TIMEOUT_MS) + CHECKPOINT_GRACE_MS;
}

int checkpoint_run(struct checkpoint *c, const struct checkpoint_query *q, size_t n,
                   struct checkpoint_answer *out, atomic_int *cancel, int64_t deadline_mono_ms) {
  size_t next = 0, running = 0;
  int free_slots[CHECKPOINT_CONCURRENCY], nfree = 0, rc = 0, late = 0;
  for (size_t i = 0; i < n; i++) {
    memset(&out[i], 0, sizeof out[i]);
    snprintf(out[i].error, sizeof out[i].error, "cancelled");
  }
  for (int i = CHECKPOINT_CONCURRENCY - 1; i >= 0; i--)
    free_slots[nfree++] = i;
  while (next < n || running > 0) {
    int still = 0, msgs = 0;
    CURLMsg *m;
    if (cancel && *cancel) break;
    if (deadline_mono_ms > 0 && clock_mono_ms() >= deadline_mono_ms) {
      late = 1;
      break;
    }
    while (next < n && nfree > 0) {
      struct cp_slot *s = &c->slots[free_slots[nfree - 1]];
      if (slot_start(c, s, &q[next], next, &out[next]) == 0) {
        nfree--;
        running++;
      }
      next++;
    }
    if (curl_multi_perform(c->multi, &still) != CURLM_OK ||
        curl_multi_poll(c->multi, NULL, 0, CHECKPOINT_POLL_MS, NULL) != CURLM_OK) {
      log_error("checkpoint plugin client: libcurl multi failure");
      rc = -1;
      break;
    }
    while ((m = curl_multi_info_read(c->multi, &msgs)) != NULL) {
      struct cp_slot *s = NULL;
      if (m->msg != CURLMSG_DONE) continue;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
      if (!s) continue;
      slot_done(s, m->data.result, &out[s->idx]);
      curl_multi_remove_handle(c->multi, s->easy);
      free_slots[nfree++] = (int)(s - c->slots);
      running--;
    }
  }
  /* out of time: what was never asked says so */
  for (size_t i = next; late && i < n; i++)
    answer_fail(&out[i], CHECKPOINT_LATE);
  /* cancelled, out of time or failed: abandon what is still running */
  for (int i = 0; i < CHECKPOINT_CONCURRENCY && running > 0; i++) {
    int in_free = 0;
    for (int k = 0; k < nfree; k++)
      if (free_slots[k] == i) in_free = 1;
    if (in_free || !c->slots[i].easy) continue;
    curl_multi_remove_handle(c->multi, c->slots[i].easy);
    answer_fail(&out[c->slots[i].idx], late ? CHECKPOINT_LATE : "cancelled");
    running--;
  }
  return rc;
}
