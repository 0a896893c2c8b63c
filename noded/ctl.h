/* ctl — noded's HTTP client to controld (libcurl easy handles, one per thread) and the link state
   every loop shares: revoked token, shutdown. */
#ifndef CDNCA_CTL_H
#define CDNCA_CTL_H

#include <curl/curl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct ctl {
  char base[512];     /* controld URL without a trailing '/' */
  char auth[320];     /* "Authorization: Bearer <token>" (a secret: never logged) */
  char ca_file[512];  /* CA bundle for an https controld; "" = system CAs */
  atomic_int revoked; /* controld answered 401: the token is revoked or wrong */
  atomic_int stop;    /* shutting down: transfers abort within a second */
};

struct ctl_resp {
  long status; /* HTTP status, 0 when no response */
  struct buf body;
  int64_t node_id; /* from X-Cdnca-Node-Id, 0 when absent */
};

/* Fill c from the controld URL (http:// or https://), the token and an optional CA file. 0, or -1
   with err filled (the token is never put in err). */
int ctl_init(struct ctl *c, const char *url, const char *token, const char *ca_file, char *err,
             size_t errlen);

/* Wipe the token from c. */
void ctl_fini(struct ctl *c);

/* A new easy handle for the calling thread (caller curl_easy_cleanup's it); NULL on OOM. */
CURL *ctl_handle(void);

/* One request: method, path with query, optional JSON body, whole-transfer timeout. 0 when a
   response arrived (out->status set; a 401 also sets c->revoked and is logged once), -1 on a
   transport error or shutdown (err filled). out is initialised here; caller ctl_resp_fini's it. */
int ctl_call(struct ctl *c, CURL *h, const char *method, const char *path, const char *json_body,
             long timeout_ms, struct ctl_resp *out, char *err, size_t errlen);

/* Free a response body. */
void ctl_resp_fini(struct ctl_resp *r);

/* Sleep up to ms; returns 1 early when c->stop is set, else 0. */
int ctl_sleep(struct ctl *c, int64_t ms);

/* 1 while the loops should go on (not stopping, token not revoked). */
int ctl_running(struct ctl *c);

#endif
