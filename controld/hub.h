/* hub — nodes' config long-polls (suspended, woken on publication, 304 at wait_ms) and node
   presence (last_seen_at written in batches, at most once a second). Thread-safe. */
#ifndef CDNCA_HUB_H
#define CDNCA_HUB_H

#include <stdint.h>

#include "http.h"

struct hub;
struct store;

/* New hub over st (not owned) with its timer thread; NULL on failure (logged). */
struct hub *hub_new(struct store *st);

/* Stop the timer thread, flush presence and free (after hub_shutdown). NULLs *h. */
void hub_free(struct hub **h);

/* Publication hook for store_set_pub_hook (arg = the hub): wakes every waiter behind seq. */
void hub_on_publication(void *arg, int64_t seq);

/* GET /v1/node/config for r: answers at once when something newer than since exists (or since is
   ahead of the database), else suspends r until a publication or wait_ms (then 304). */
enum http_rc hub_config_poll(struct hub *h, struct req *r, int64_t since, int64_t wait_ms);

/* From now on, log node.online when a node is seen after more than online_ms (or for the first
   time since start) and node.offline once when it has not been seen for online_ms. */
void hub_watch_nodes(struct hub *h, int64_t online_ms);

/* Note that node_id made an authenticated call at wall ms now (written within about a second). */
void hub_node_seen(struct hub *h, int64_t node_id, int64_t now);

/* Stop the timer thread (an answer it is building is sent first), answer every suspended waiter
   with 304 and answer later polls at once; call before http_stop. */
void hub_shutdown(struct hub *h);

/* A node was deleted: answer its suspended config polls with 401 at once. */
void hub_node_revoked(struct hub *h, int64_t node_id);

/* Number of waiters suspended right now. */
int hub_waiters(struct hub *h);

/* The newest publication seq the hub knows of. */
int64_t hub_seq(struct hub *h);

#endif
