/* sync — config long-poll loop, delta application, atomic disk cache. */
#include "sync.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "ctl.h"
#include "ctlset.h"
#include "log.h"
#include "rng.h"
#include "sitecfg.h"

#define SYNC_CACHE_FILE "config.json"
#define SYNC_CACHE_MAX (256 * 1024 * 1024)

struct sync {
  struct ctl *ctl;
  char dir[512];
  int64_t wait_ms;
  sync_apply_fn fn;
  void *arg;
  pthread_t thr;
  int started;
  pthread_mutex_t mu; /* guards cur and info */
  struct sitecfg_set *cur;
  struct sync_info info;
};

const char *sync_state_name(enum sync_state st) {
  switch (st) {
  case SYNC_STARTING:
    return "starting";
  case SYNC_CACHED:
    return "cached";
  case SYNC_LIVE:
    return "live";
  case SYNC_RETRYING:
    return "retrying";
  case SYNC_REVOKED:
    return "revoked";
  }
  return "unknown";
}

int sync_write_atomic(const char *dir, const char *name, const char *text, size_t len, char *err,
                      size_t errlen) {
  char tmp[1100], dst[1100];
  int fd = -1, dfd = -1, rc = -1;
  size_t off = 0;
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
  snprintf(dst, sizeof dst, "%s/%s", dir, name);
  /* a fresh file, so its mode is 0600 whatever a stale one left there had */
  if (unlink(tmp) < 0 && errno != ENOENT) {
    snprintf(err, errlen, "cannot remove %s: %s", tmp, strerror(errno));
    return -1;
  }
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    goto out;
  }
  while (off < len) {
    ssize_t w = write(fd, text + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
      goto out;
    }
    off += (size_t)w;
  }
  if (fsync(fd) < 0) {
    snprintf(err, errlen, "cannot fsync %s: %s", tmp, strerror(errno));
    goto out;
  }
  close(fd);
  fd = -1;
  if (rename(tmp, dst) < 0) {
    snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, dst, strerror(errno));
    goto out;
  }
  dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || fsync(dfd) < 0) {
    snprintf(err, errlen, "cannot fsync directory %s: %s", dir, strerror(errno));
    goto out;
  }
  rc = 0;
out:
  if (fd >= 0) {
    close(fd);
    unlink(tmp);
  }
  if (dfd >= 0) close(dfd);
  return rc;
}

struct sync *sync_new(struct ctl *ctl, const char *state_dir, int64_t wait_ms, sync_apply_fn fn,
                      void *arg) {
  struct sync *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->ctl = ctl;
  snprintf(s->dir, sizeof s->dir, "%s", state_dir);
  s->wait_ms = wait_ms;
  s->fn = fn;
  s->arg = arg;
  pthread_mutex_init(&s->mu, NULL);
  return s;
}

/* Make set the served config (takes the caller's reference) and hand it to the callback. */
static void install(struct sync *s, struct sitecfg_set *set, int from_cache) {
  struct sitecfg_set *old;
  pthread_mutex_lock(&s->mu);
  old = s->cur;
  s->cur = set;
  s->info.seq = set->seq;
  s->info.from_cache = from_cache;
  s->info.applied++;
  pthread_mutex_unlock(&s->mu);
  if (s->fn) s->fn(s->arg, set);
  sitecfg_set_unref(old);
}

int sync_load_cache(struct sync *s) {
  char path[1100], err[256];
  FILE *f;
  char *data = NULL;
  long n;
  struct sitecfg_set *set = NULL;
  int rc = -1;
  snprintf(path, sizeof path, "%s/%s", s->dir, SYNC_CACHE_FILE);
  f = fopen(path, "rb");
  if (!f) {
    if (errno == ENOENT) return 0;
    log_warn("cannot open the config cache %s: %s", path, strerror(errno));
    return -1;
  }
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || n > SYNC_CACHE_MAX ||
      fseek(f, 0, SEEK_SET) != 0)
    goto out;
  data = malloc((size_t)n + 1);
  if (!data || fread(data, 1, (size_t)n, f) != (size_t)n) goto out;
  data[n] = '\0';
  set = sitecfg_load(data, (size_t)n, err, sizeof err);
  if (!set) {
    log_warn("ignoring the config cache %s: %s", path, err);
    goto out;
  }
  log_info("serving the cached config (seq %lld, %d sites) from %s until controld answers",
           (long long)set->seq, set->n_sites, path);
  pthread_mutex_lock(&s->mu);
  s->info.state = SYNC_CACHED;
  s->info.cached_seq = set->seq;
  pthread_mutex_unlock(&s->mu);
  install(s, set, 1);
  rc = 1;
out:
  if (rc < 0 && !set) log_warn("the config cache %s is unreadable; starting without it", path);
  free(data);
  fclose(f);
  return rc;
}

static void set_error(struct sync *s, enum sync_state st, const char *msg) {
  pthread_mutex_lock(&s->mu);
  s->info.state = st;
  if (st == SYNC_RETRYING) s->info.failures++;
  snprintf(s->info.last_error, sizeof s->info.last_error, "%.199s", msg);
  pthread_mutex_unlock(&s->mu);
}

/* controld answered the poll (200 or 304): the config in use is its newest, wherever it was
   read from. */
static void set_ok(struct sync *s, int64_t node_id) {
  pthread_mutex_lock(&s->mu);
  s->info.state = SYNC_LIVE;
  s->info.from_cache = 0;
  s->info.failures = 0;
  s->info.last_error[0] = '\0';
  s->info.last_ok_wall = clock_wall_ms();
  if (node_id > 0) s->info.node_id = node_id;
  pthread_mutex_unlock(&s->mu);
}

/* Write set to config.json and record the outcome in info (cached_seq, cache_error); 0 or -1. A
   failure is logged when it is the first since the last success (quiet is the retry of the same
   failure after every poll), a success after failures too. */
static int cache_write(struct sync *s, const struct sitecfg_set *set) {
  struct buf out;
  char err[256];
  int rc, was_failing;
  int64_t on_disk;
  buf_init(&out, 0);
  snprintf(err, sizeof err, "cannot serialize it");
  rc = sitecfg_serialize(set, &out) < 0 ||
               sync_write_atomic(s->dir, SYNC_CACHE_FILE, out.data ? out.data : "", out.len, err,
                                 sizeof err) < 0
           ? -1
           : 0;
  buf_fini(&out);
  pthread_mutex_lock(&s->mu);
  was_failing = s->info.cache_error[0] != '\0';
  if (rc == 0) {
    s->info.cached_seq = set->seq;
    s->info.cache_error[0] = '\0';
  } else {
    snprintf(s->info.cache_error, sizeof s->info.cache_error, "%.199s", err);
  }
  on_disk = s->info.cached_seq;
  pthread_mutex_unlock(&s->mu);
  if (rc < 0 && !was_failing)
    log_warn("config seq %lld applied but not cached (a restart would serve seq %lld; retried "
             "after every poll): %s",
             (long long)set->seq, (long long)on_disk, err);
  else if (rc == 0 && was_failing)
    log_info("config seq %lld cached in %s/%s", (long long)set->seq, s->dir, SYNC_CACHE_FILE);
  return rc;
}

/* Write the served config again when config.json does not hold it (a no-op when it does). */
static void cache_catch_up(struct sync *s) {
  struct sitecfg_set *cur;
  int behind;
  pthread_mutex_lock(&s->mu);
  behind = s->cur && s->info.cached_seq != s->cur->seq;
  pthread_mutex_unlock(&s->mu);
  if (!behind || !(cur = sync_current(s))) return;
  cache_write(s, cur);
  sitecfg_set_unref(cur);
}

/* Apply one 200 body. 0 or -1 with err filled. */
static int apply_body(struct sync *s, const struct buf *body, char *err, size_t errlen) {
  struct sitecfg_update *u = NULL;
  struct sitecfg_set *cur, *next;
  char perr[256];
  if (sitecfg_parse(body->data ? body->data : "", body->len, &u, perr, sizeof perr) < 0) {
    snprintf(err, errlen, "controld sent an invalid config: %.200s", perr);
    return -1;
  }
  cur = sync_current(s);
  next = sitecfg_apply(u->full ? NULL : cur, u);
  sitecfg_set_unref(cur);
  if (!next) {
    snprintf(err, errlen, "out of memory applying config seq %lld", (long long)u->seq);
    sitecfg_update_free(&u);
    return -1;
  }
  log_info("applied config seq %lld (%s, %d sites changed, %d deleted; %d sites now)",
           (long long)u->seq, u->full ? "full" : "delta", u->n_sites, u->n_deleted, next->n_sites);
  sitecfg_update_free(&u);
  cache_write(s, next);
  install(s, next, 0);
  return 0;
}

static void *sync_thread(void *arg) {
  struct sync *s = arg;
  CURL *h = ctl_handle(s->ctl);
  char path[128], err[256];
  int failures = 0;
  if (!h) {
    log_error("config sync: no curl handle");
    return NULL;
  }
  while (ctl_running(s->ctl)) {
    struct ctl_resp r;
    int64_t since;
    int bad = 0, away = 0, rc;
    pthread_mutex_lock(&s->mu);
    since = s->info.seq;
    pthread_mutex_unlock(&s->mu);
    snprintf(path, sizeof path, "/v1/node/config?since=%lld&wait_ms=%lld", (long long)since,
             (long long)s->wait_ms);
    rc = ctl_call(s->ctl, h, "GET", path, NULL, (long)s->wait_ms + 15000, &r, err, sizeof err);
    if (ctl_away(rc, r.status)) {
      if (rc == 0) snprintf(err, sizeof err, "controld answered %ld to the config poll", r.status);
      bad = away = 1;
    } else if (r.status == 200) {
      if (apply_body(s, &r.body, err, sizeof err) < 0)
        bad = 1;
      else
        set_ok(s, r.node_id);
    } else if (r.status == 304) {
      set_ok(s, r.node_id);
    } else if (r.status == 401) {
      set_error(s, SYNC_REVOKED, "controld refused the node token (401): revoked");
    } else {
      snprintf(err, sizeof err, "controld answered %ld to the config poll", r.status);
      bad = 1;
    }
    ctl_resp_fini(&r);
    /* after every poll, answered or not: controld may stay away, and a restart then serves the
       cache */
    cache_catch_up(s);
    if (!bad) {
      failures = 0;
      continue;
    }
    if (!ctl_running(s->ctl)) break;
    failures++;
    set_error(s, SYNC_RETRYING, err);
    if (away) {
      /* the replica is away: the shared backoff, which ends as soon as any call succeeds */
      if (failures == 1 || failures % 10 == 0)
        log_warn("config sync: %s (attempt %d, retrying within %lld ms; serving the last config)",
                 err, failures, (long long)ctl_backoff_left(s->ctl));
      if (ctl_backoff(s->ctl, h)) break;
    } else {
      /* controld answered but the answer was not usable: back off on this loop's own count */
      int64_t d = ctlset_backoff_ms(failures, (uint32_t)rng_seed_fresh());
      if (failures == 1 || failures % 10 == 0)
        log_warn("config sync: %s (attempt %d, retrying in %lld ms; serving the last config)", err,
                 failures, (long long)d);
      ctl_sleep(s->ctl, d);
    }
  }
  ctl_handle_free(s->ctl, h);
  return NULL;
}

int sync_start(struct sync *s) {
  if (pthread_create(&s->thr, NULL, sync_thread, s) != 0) return -1;
  s->started = 1;
  return 0;
}

void sync_join(struct sync *s) {
  if (s->started) pthread_join(s->thr, NULL);
  s->started = 0;
}

void sync_free(struct sync **sp) {
  struct sync *s = *sp;
  if (!s) return;
  sitecfg_set_unref(s->cur);
  pthread_mutex_destroy(&s->mu);
  free(s);
  *sp = NULL;
}

struct sitecfg_set *sync_current(struct sync *s) {
  struct sitecfg_set *set;
  pthread_mutex_lock(&s->mu);
  set = s->cur ? sitecfg_set_ref(s->cur) : NULL;
  pthread_mutex_unlock(&s->mu);
  return set;
}

void sync_get_info(struct sync *s, struct sync_info *out) {
  pthread_mutex_lock(&s->mu);
  /* a 401 seen by any loop (heartbeat, tasks) stops the sync too */
  if (atomic_load(&s->ctl->revoked) && s->info.state != SYNC_REVOKED) {
    s->info.state = SYNC_REVOKED;
    snprintf(s->info.last_error, sizeof s->info.last_error,
             "controld refused the node token (401): revoked");
  }
  *out = s->info;
  pthread_mutex_unlock(&s->mu);
}
