/* sync — the node's config sync: long-poll GET /v1/node/config, apply full sets and deltas,
   keep state-dir/config.json (written atomically), serve from it before controld answers. */
#ifndef CDNCA_SYNC_H
#define CDNCA_SYNC_H

#include <stddef.h>
#include <stdint.h>

struct ctl;
struct sitecfg_set;
struct sync;

enum sync_state {
  SYNC_STARTING = 0, /* no config yet */
  SYNC_CACHED,       /* serving config.json, controld not reached yet */
  SYNC_LIVE,         /* the last long-poll came back fine */
  SYNC_RETRYING,     /* controld unreachable or answering errors: backing off */
  SYNC_REVOKED,      /* 401: the token was revoked; sync stopped, last config still served */
};

struct sync_info {
  enum sync_state state;
  int64_t seq;           /* publication seq of the config being served (0 = none) */
  int from_cache;        /* the config being served came from config.json */
  int64_t node_id;       /* as controld told us (0 = not known yet) */
  int64_t last_ok_wall;  /* last answer from controld (wall ms, 0 = never) */
  int failures;          /* consecutive failed polls */
  int64_t applied;       /* configs applied since start */
  char last_error[200];  /* "" when none */
  int64_t cached_seq;    /* publication seq config.json holds (what a restart serves; 0 = none) */
  char cache_error[200]; /* why config.json does not hold seq: its last write failed; "" when it
                            does. The write is tried again after every poll until it succeeds */
};

/* Called with each new config (borrowed: take a reference to keep it), from the sync thread. */
typedef void (*sync_apply_fn)(void *arg, struct sitecfg_set *set);

/* New sync against ctl (not owned) keeping its cache in state_dir; wait_ms is the long-poll
   hold asked of controld. NULL on OOM. */
struct sync *sync_new(struct ctl *ctl, const char *state_dir, int64_t wait_ms, sync_apply_fn fn,
                      void *arg);

/* Apply state_dir/config.json when there is one: 1 loaded, 0 none, -1 unreadable (logged). */
int sync_load_cache(struct sync *s);

/* Start the sync thread. 0 or -1. */
int sync_start(struct sync *s);

/* Join the sync thread (set ctl->stop first so the long-poll aborts). */
void sync_join(struct sync *s);

/* Free (after sync_join). NULLs *s. */
void sync_free(struct sync **s);

/* The config being served with one reference (caller sitecfg_set_unref's it), or NULL. */
struct sitecfg_set *sync_current(struct sync *s);

/* A copy of the sync's state. */
void sync_get_info(struct sync *s, struct sync_info *out);

/* "starting" | "cached" | "live" | "retrying" | "revoked". */
const char *sync_state_name(enum sync_state st);

/* Write text to dir/name atomically: a new temp file of mode 0600, fsync, rename, fsync of the
   directory. 0, or -1 with err filled. */
int sync_write_atomic(const char *dir, const char *name, const char *text, size_t len, char *err,
                      size_t errlen);

#endif
