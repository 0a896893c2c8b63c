/* ctl — noded's HTTP client to controld (libcurl easy handles, one per thread) and the link state
   every loop shares: the controld replicas and which one is current (ctlset), the shared retry
   backoff, revoked token, shutdown. */
#ifndef CDNCA_CTL_H
#define CDNCA_CTL_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ctlset.h"

#define CTL_HANDLES_MAX 8 /* handles at once: the enrolment, the sync, heartbeat and task loops */

struct ctl {
  pthread_mutex_t mu; /* guards set */
  struct ctlset set;  /* the controld URLs, the current one, the shared backoff */
  char auth[320];     /* "Authorization: Bearer <token>" (a secret: never logged); "" = none */
  char ca_file[512];  /* CA bundle for an https controld; "" = system CAs */
  atomic_int cur_idx; /* set.cur, for transfer callbacks that do not take the mutex */
  atomic_int revoked; /* controld answered 401: the token is revoked or wrong */
  atomic_int stop;    /* shutting down (ctl_stop): transfers abort at once */
  /* each loop's handle and the multi handle its transfers run on (guarded by mu): ctl_stop wakes
     every multi, so a held poll ends at the stop, not at libcurl's next progress call */
  CURL *easy[CTL_HANDLES_MAX];
  CURLM *multi[CTL_HANDLES_MAX];
  /* controld's wall clock minus ours (ms), from X-Cdnca-Now on its last answer (docs/design.md,
     Failback ramp): the ramp's share is computed on controld's time */
  _Atomic int64_t clock_offset_ms;
};

struct ctl_resp {
  long status; /* HTTP status, 0 when no response */
  struct buf body;
  int64_t node_id; /* from X-Cdnca-Node-Id, 0 when absent */
  int64_t now_ms;  /* controld's wall clock from X-Cdnca-Now, 0 when absent */
};

/* Fill c from the controld URL list ("URL" or "URL1,URL2,…", each http:// or https://, see
   ctlset_parse), the node token (NULL or "": none yet, set later with ctl_set_token; calls then
   go without one) and an optional CA file. 0, or -1 with err filled (the token is never put in
   err); ctl_fini it either way. */
int ctl_init(struct ctl *c, const char *url, const char *token, const char *ca_file, char *err,
             size_t errlen);

/* Make token the node token of every later call (before the loops start). 0, or -1 with err
   filled when it is empty, longer than 256 characters or holds a space (never put in err). */
int ctl_set_token(struct ctl *c, const char *token, char *err, size_t errlen);

/* Wipe the token from c and free what ctl_init made. */
void ctl_fini(struct ctl *c);

/* A new easy handle for the calling thread, its transfers woken by ctl_stop (the caller
   ctl_handle_free's it); NULL on OOM or when CTL_HANDLES_MAX are in use. */
CURL *ctl_handle(struct ctl *c);

/* Free a handle of ctl_handle (NULL: nothing). */
void ctl_handle_free(struct ctl *c, CURL *h);

/* Shut down: set c->stop and wake every transfer, which ends with -1 ("stopping"). */
void ctl_stop(struct ctl *c);

/* One request to the current replica: method, path with query, optional JSON body,
   whole-transfer timeout. 0 when a response arrived (out->status set; a 401 to a call with the
   node token also sets c->revoked and is logged once), -1 on a transport error or shutdown (err
   filled). The outcome is reported to the replica set: an answer ends the shared backoff, a
   transport error or 502/503/504 moves to the next replica (logged once per switch). A call still
   running when another loop moved to the next replica is aborted (-1, "moved to …"), so a long-poll
   held by a stalled replica does not outlast the switch. out is initialised here; after 0 the
   caller ctl_resp_fini's it, after -1 there is nothing to free (a partial body is released here).
 */
int ctl_call(struct ctl *c, CURL *h, const char *method, const char *path, const char *json_body,
             long timeout_ms, struct ctl_resp *out, char *err, size_t errlen);

/* Free a response body. */
void ctl_resp_fini(struct ctl_resp *r);

/* 1 when a ctl_call result (its return rc and out->status) means the replica is away (transport
   error, 502, 503, 504): the caller waits with ctl_backoff, not with a retry rule of its own. */
int ctl_away(int rc, long status);

/* Wait out the shared backoff: returns as soon as any loop's call succeeds or the backoff ends
   (1 when c->stop was set, else 0). While nothing answers at all it probes GET /healthz on the
   current replica with h about once a second, so a controld that comes back is used at once. */
int ctl_backoff(struct ctl *c, CURL *h);

/* Milliseconds the shared backoff has left (0 = none). */
int64_t ctl_backoff_left(struct ctl *c);

/* The replica in use: its URL copied into url (cap bytes), and (each may be NULL) its index,
   how many are listed, and the switches between replicas since start. */
void ctl_replica(struct ctl *c, char *url, size_t cap, int *idx, int *n, int64_t *switches);

/* Sleep up to ms; returns 1 early when c->stop is set, else 0. */
int ctl_sleep(struct ctl *c, int64_t ms);

/* 1 while the loops should go on (not stopping, token not revoked). */
int ctl_running(struct ctl *c);

#endif
