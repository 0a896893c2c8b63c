/* ctl — libcurl requests to controld with the node token. */
#include "ctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "log.h"
#include "token.h"

#define CTL_BODY_MAX (64 * 1024 * 1024)

int ctl_init(struct ctl *c, const char *url, const char *token, const char *ca_file, char *err,
             size_t errlen) {
  size_t n = strlen(url);
  memset(c, 0, sizeof *c);
  atomic_init(&c->revoked, 0);
  atomic_init(&c->stop, 0);
  if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
    snprintf(err, errlen, "option controld: '%s' is not an http:// or https:// URL", url);
    return -1;
  }
  while (n > 0 && url[n - 1] == '/')
    n--;
  if (n >= sizeof c->base || n <= 8) {
    snprintf(err, errlen, "option controld: URL too long or empty");
    return -1;
  }
  memcpy(c->base, url, n);
  c->base[n] = '\0';
  if (!token || !*token || strlen(token) > 256 || strpbrk(token, "\r\n ")) {
    snprintf(err, errlen, "CDNCA_NODE_TOKEN must be set to the node token shown by POST /v1/nodes");
    return -1;
  }
  snprintf(c->auth, sizeof c->auth, "Authorization: Bearer %s", token);
  if (ca_file && *ca_file) {
    if (strlen(ca_file) >= sizeof c->ca_file) {
      snprintf(err, errlen, "option controld-ca-file: path too long");
      return -1;
    }
    memcpy(c->ca_file, ca_file, strlen(ca_file) + 1);
  }
  return 0;
}

void ctl_fini(struct ctl *c) {
  token_wipe(c->auth, sizeof c->auth);
}

CURL *ctl_handle(void) {
  return curl_easy_init();
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

static size_t on_header(char *p, size_t sz, size_t nm, void *arg) {
  struct ctl_resp *r = arg;
  size_t n = sz * nm;
  static const char name[] = "X-Cdnca-Node-Id:";
  if (n > sizeof name - 1 && strncasecmp(p, name, sizeof name - 1) == 0) {
    char tmp[32];
    size_t l = n - (sizeof name - 1);
    if (l >= sizeof tmp) l = sizeof tmp - 1;
    memcpy(tmp, p + sizeof name - 1, l);
    tmp[l] = '\0';
    r->node_id = strtoll(tmp, NULL, 10);
  }
  return n;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c2, curl_off_t d) {
  struct ctl *c = arg;
  return atomic_load(&c->stop) ? 1 : 0;
}

int ctl_call(struct ctl *c, CURL *h, const char *method, const char *path, const char *json_body,
             long timeout_ms, struct ctl_resp *out, char *err, size_t errlen) {
  char url[1024];
  struct curl_slist *hdrs = NULL;
  CURLcode cc;
  int rc = -1;
  memset(out, 0, sizeof *out);
  buf_init(&out->body, CTL_BODY_MAX);
  if (atomic_load(&c->stop)) {
    snprintf(err, errlen, "stopping");
    return -1;
  }
  snprintf(url, sizeof url, "%s%s", c->base, path);
  curl_easy_reset(h);
  hdrs = curl_slist_append(hdrs, c->auth);
  hdrs = curl_slist_append(hdrs, "Accept: application/json");
  if (json_body) hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(h, CURLOPT_USERAGENT, "cdnca-noded/" CDNCA_VERSION);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  if (c->ca_file[0]) curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  if (json_body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, json_body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(json_body));
  }
  cc = curl_easy_perform(h);
  if (cc != CURLE_OK) {
    snprintf(err, errlen, "%s %s: %s", method, path,
             cc == CURLE_ABORTED_BY_CALLBACK ? "stopping" : curl_easy_strerror(cc));
    goto out;
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
  if (out->status == 401 && !atomic_exchange(&c->revoked, 1))
    log_error("controld refused the node token (401 on %s %s): the node was revoked or the token "
              "is wrong; syncing stops and the last config keeps being served",
              method, path);
  rc = 0;
out:
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
  curl_slist_free_all(hdrs);
  return rc;
}
