/* enrol — the node token file and enrolment with a key (see enrol.h). */
#include "enrol.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "rng.h"
#include "sync.h"
#include "token.h"

int enrol_secret_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > ENROL_SECRET_MAX) return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f) return 0;
  return 1;
}

int enrol_secret_text(const char *text, size_t len, char *out, size_t cap) {
  while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' ' ||
                     text[len - 1] == '\t'))
    len--;
  if (len == 0 || len >= cap || len > ENROL_SECRET_MAX || memchr(text, '\0', len)) return -1;
  memcpy(out, text, len);
  out[len] = '\0';
  if (enrol_secret_ok(out)) return 0;
  token_wipe(out, cap);
  return -1;
}

/* Read a small secret file at path into out. 0, 1 when absent, -1 with err (what names it). */
static int secret_file(const char *path, const char *what, char *out, size_t cap, char *err,
                       size_t errlen) {
  char buf[ENROL_SECRET_MAX + 64];
  ssize_t n;
  size_t len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return 1;
    snprintf(err, errlen, "%s: cannot open %s: %s", what, path, strerror(errno));
    return -1;
  }
  while (len < sizeof buf && (n = read(fd, buf + len, sizeof buf - len)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      snprintf(err, errlen, "%s: cannot read %s: %s", what, path, strerror(errno));
      close(fd);
      token_wipe(buf, sizeof buf);
      return -1;
    }
    len += (size_t)n;
  }
  close(fd);
  n = enrol_secret_text(buf, len, out, cap);
  token_wipe(buf, sizeof buf);
  if (n < 0) {
    snprintf(err, errlen,
             "%s: %s does not hold one line of 1 to %d printable characters without spaces", what,
             path, ENROL_SECRET_MAX);
    return -1;
  }
  return 0;
}

int enrol_token_load(const char *dir, char *out, size_t cap, char *err, size_t errlen) {
  char path[1100];
  struct stat st;
  int rc;
  snprintf(path, sizeof path, "%s/%s", dir, ENROL_TOKEN_FILE);
  rc = secret_file(path, "the node token file", out, cap, err, errlen);
  if (rc == 0 && stat(path, &st) == 0 && (st.st_mode & 077))
    log_warn("%s is readable by others (mode %04o): it holds the node token; chmod 600 it", path,
             (unsigned)(st.st_mode & 07777));
  return rc;
}

int enrol_token_store(const char *dir, const char *token, char *err, size_t errlen) {
  char text[ENROL_SECRET_MAX + 2];
  int rc;
  size_t n = strlen(token);
  if (n > ENROL_SECRET_MAX) {
    snprintf(err, errlen, "the node token is too long to store");
    return -1;
  }
  memcpy(text, token, n);
  text[n] = '\n';
  rc = sync_write_atomic(dir, ENROL_TOKEN_FILE, text, n + 1, err, errlen);
  token_wipe(text, sizeof text);
  return rc;
}

int enrol_key_load(const char *path, char *out, size_t cap, char *err, size_t errlen) {
  int rc = secret_file(path, "option enrol-key-file", out, cap, err, errlen);
  if (rc == 1) snprintf(err, errlen, "option enrol-key-file: %s does not exist", path);
  return rc == 0 ? 0 : -1;
}

int enrol_answer_token(const char *body, size_t len, char *token, size_t cap) {
  cJSON *j = body ? json_parse(body, len) : NULL;
  const cJSON *t = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "token") : NULL;
  int rc = -1;
  if (cJSON_IsString(t) && strlen(t->valuestring) < cap && enrol_secret_ok(t->valuestring)) {
    memcpy(token, t->valuestring, strlen(t->valuestring) + 1);
    rc = 0;
  }
  if (cJSON_IsString(t)) token_wipe(t->valuestring, strlen(t->valuestring));
  cJSON_Delete(j);
  return rc;
}

/* "code: message" of an error answer, or the status alone. */
static void answer_why(const struct ctl_resp *r, char *why, size_t whylen) {
  cJSON *j = r->body.data ? json_parse(r->body.data, r->body.len) : NULL;
  const cJSON *e = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
  const cJSON *code = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "code") : NULL;
  const cJSON *msg = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "message") : NULL;
  if (cJSON_IsString(code) && cJSON_IsString(msg))
    snprintf(why, whylen, "HTTP %ld %s: %s", r->status, code->valuestring, msg->valuestring);
  else
    snprintf(why, whylen, "HTTP %ld", r->status);
  cJSON_Delete(j);
}

enum enrol_rc enrol_run(struct ctl *c, const char *key, const char *name, char *token, size_t cap,
                        char *why, size_t whylen) {
  CURL *h = ctl_handle(c);
  cJSON *o = cJSON_CreateObject();
  char *body = NULL, err[512];
  enum enrol_rc rc = ENROL_STOPPED;
  int failures = 0;
  if (!h || !o || !cJSON_AddStringToObject(o, "key", key) ||
      !cJSON_AddStringToObject(o, "name", name) || !(body = json_print(o))) {
    snprintf(why, whylen, "out of memory");
    rc = ENROL_REFUSED;
    goto out;
  }
  for (;;) {
    struct ctl_resp r;
    int64_t wait;
    int call = ctl_call(c, h, "POST", "/v1/node/enrol", body, 15000L, &r, err, sizeof err);
    if (call == 0 && r.status == 201) {
      int got = enrol_answer_token(r.body.data, r.body.len, token, cap);
      if (r.body.data) token_wipe(r.body.data, r.body.len);
      ctl_resp_fini(&r);
      if (got == 0) {
        rc = ENROL_OK;
        goto out;
      }
      /* the node exists now: asking again would be a 409, so say what happened */
      snprintf(why, whylen, "controld answered 201 without a usable token");
      rc = ENROL_REFUSED;
      goto out;
    }
    if (call == 0 && r.status >= 400 && r.status < 500) {
      answer_why(&r, why, whylen);
      ctl_resp_fini(&r);
      rc = ENROL_REFUSED;
      goto out;
    }
    failures++;
    if (call == 0) {
      log_warn("enrolment: controld answered HTTP %ld; retrying", r.status);
      ctl_resp_fini(&r);
    } else if (atomic_load(&c->stop)) {
      goto out;
    } else {
      log_warn("enrolment: %s; retrying", err);
    }
    if (ctl_away(call, call == 0 ? r.status : 0)) {
      if (ctl_backoff(c, h)) goto out;
      continue;
    }
    /* a 5xx the replica set does not count as away: a backoff of the same shape */
    wait = ctlset_backoff_ms(failures, (uint32_t)rng_seed_fresh());
    if (ctl_sleep(c, wait)) goto out;
  }
out:
  if (body) {
    token_wipe(body, strlen(body));
    free(body);
  }
  if (o) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "key");
    if (cJSON_IsString(k)) token_wipe(k->valuestring, strlen(k->valuestring));
    cJSON_Delete(o);
  }
  ctl_handle_free(c, h);
  return rc;
}
