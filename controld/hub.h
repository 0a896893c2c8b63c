/* hub — nodes' config long-polls (held, woken on publication, unchanged at wait_ms) and node
   presence (last_seen_at written in batches, at most once a second). Thread-safe. The hub builds
   no HTTP answer: a poll carries callbacks, and its caller turns the outcome into one. */
#ifndef CDNCA_HUB_H
#define CDNCA_HUB_H

#include <stdint.h>

struct hub;
struct pub_blob;
struct store;

/* How a config poll ends. */
enum hub_outcome {
  HUB_CONFIG,    /* something newer than since: the blob (publish.h) */
  HUB_UNCHANGED, /* nothing newer within wait_ms, or the hub is shutting down */
  HUB_REVOKED,   /* the node was deleted (hub_node_revoked) */
  HUB_DB_DOWN,   /* the answer could not be built: the database cannot be reached */
  HUB_FAILED,    /* the answer could not be built, the database answering */
  HUB_NO_MEMORY, /* no room to hold the poll */
};

/* One config poll: whose it is and how it is answered. */
struct hub_poll {
  int64_t node_id; /* hub_node_revoked ends the polls of this node */
  /* Called once, with the hub's lock held, just before the poll is held (so that nobody answers
     it before its caller is ready): suspend the request here, and call no hub function. Not
     called for a poll answered at once. */
  void (*suspend)(void *arg);
  /* The answer, called once per poll: before hub_config_poll returns when it answers at once
     (suspend not called), else after suspend, from the hub's thread or from the caller of
     hub_shutdown or hub_node_revoked. blob (HUB_CONFIG only, else NULL) is borrowed for the
     call: take a reference (pub_blob_ref) to keep it. */
  void (*done)(void *arg, enum hub_outcome outcome, struct pub_blob *blob);
  void *arg;
};

/* New hub over st (not owned) with its timer thread; NULL on failure (logged). */
struct hub *hub_new(struct store *st);

/* Publish the operator's --deny-targets to nodes (publish_set_deny_targets); before serving. */
void hub_set_deny_targets(struct hub *h, const char *list);

/* Stop the timer thread, flush presence and free (after hub_shutdown). NULLs *h. */
void hub_free(struct hub **h);

/* Publication hook for store_set_pub_hook (arg = the hub): wakes every waiter behind seq. */
void hub_on_publication(void *arg, int64_t seq);

/* A node's config poll (GET /v1/node/config): answers at once through p->done when something
   newer than since exists (or since is ahead of the database), or when it may not wait (wait_ms
   <= 0, the hub shut down: HUB_UNCHANGED); else calls p->suspend and holds the poll until a
   publication, a revocation of the node, hub_shutdown or wait_ms (HUB_UNCHANGED). 0 when it was
   answered, 1 when it is held. */
int hub_config_poll(struct hub *h, int64_t since, int64_t wait_ms, const struct hub_poll *p);

/* From now on, log node.online when a node is seen after more than online_ms (or for the first
   time since start) and node.offline once when it has not been seen for online_ms. */
void hub_watch_nodes(struct hub *h, int64_t online_ms);

/* Note that node_id made an authenticated call at wall ms now (written within about a second). */
void hub_node_seen(struct hub *h, int64_t node_id, int64_t now);

/* Note that node_id asked for the config holding publication seq at wall ms now: the first time
   it did for each switch of an active incident is its propagation figure (written with the
   presence batch; at most HUB_APPLIED_MAX notes wait per batch). A seq past the newest
   publication is not noted. */
#define HUB_APPLIED_MAX 65536
void hub_node_applied(struct hub *h, int64_t node_id, int64_t seq, int64_t now);

/* Stop the timer thread (an answer it is building is given first), answer every held poll
   HUB_UNCHANGED and later polls at once; call before http_stop. */
void hub_shutdown(struct hub *h);

/* A node was deleted: answer its held config polls HUB_REVOKED at once. */
void hub_node_revoked(struct hub *h, int64_t node_id);

/* Number of polls held right now. */
int hub_waiters(struct hub *h);

/* The newest publication seq the hub knows of. */
int64_t hub_seq(struct hub *h);

/* The same, read from the store first when seq is ahead of it: so seq > the answer means no
   such publication exists (a node cannot have applied it). */
int64_t hub_seq_for(struct hub *h, int64_t seq);

#endif
