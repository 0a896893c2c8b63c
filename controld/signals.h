/* signals — signals between controld replicas on one PostgreSQL database
   (docs/design.md#cluster-mode). (The header is signals.h, not signal.h: controld/ is on the
   include path and <signal.h> must stay the C library's.)

   Replicas never talk to each other; a write transaction that others must hear about sends a
   PostgreSQL NOTIFY from inside itself (the store does it, so it fires at commit and only then),
   and every replica runs one listener thread on its own connection that LISTENs on the four
   channels below and turns each notification into local work:

   - cdnca_pub, payload "seq=<S> gen=<G>": an ordered write committed (S: the newest publication
     seq it recorded, 0 for none; G: its cdnca_meta.gen). The reply cache's generation moves;
     config long-polls behind S wake (the publication hook).
   - cdnca_inval, payload "tokens": tokens were removed; the token cache is cleared.
   - cdnca_inval, payload "node:<id>": node id was deleted; the token cache is cleared and its
     suspended config poll is answered 401 (the node_revoked hook).
   - cdnca_inval, payload "events": events were recorded; the store's event hook runs, which wakes
     the webhook delivery worker at once instead of at its next rescan.
   - cdnca_inval, payload "webhooks": webhooks changed (for subscribers).
   - cdnca_tasks, cdnca_votes, free text (a round id): for subscribers (probe task polls, the
     leader's wait for votes).

   Missed notifications: every SIGNAL_POLL_MS the listener reads MAX(seq) and cdnca_meta.gen; a
   newer seq wakes the hub at once, and a gen that notifications have not caught up with within
   one more poll counts as a missed notification: full resync. While the listener connection is
   down the store's caches are off (every token lookup reads the database, every reply is
   rendered afresh); it reconnects with backoff (SIGNAL_BACKOFF_MIN_MS doubling to
   SIGNAL_BACKOFF_MAX_MS), LISTENs again, then resyncs: reads seq and gen, wakes the hub, clears
   the caches, calls every subscriber with payload NULL, and turns the caches back on.

   Only cluster mode has signals (coord.h makes them); with SQLite there is nothing to listen to
   and the coordination has none. */
#ifndef CDNCA_SIGNALS_H
#define CDNCA_SIGNALS_H

#include <stddef.h>
#include <stdint.h>

#include "sigmsg.h"

struct store;
struct signals;

#define SIGNAL_POLL_MS 1000        /* the fallback poll of MAX(seq) and gen */
#define SIGNAL_BACKOFF_MIN_MS 100  /* first reconnect delay */
#define SIGNAL_BACKOFF_MAX_MS 5000 /* reconnect delays double up to this */

/* ---- decisions (pure) ---- */

/* What the listener knows: the newest seq and gen it has acted on, and the gen the previous
   fallback poll read (-1 before the first poll). */
struct signal_view {
  int64_t seq;
  int64_t gen;
  int64_t polled_gen;
};

/* Actions of signal_poll_decide / signal_resync_decide (bits). */
enum {
  SIGNAL_ACT_WAKE = 1,   /* tell the hub about the seq read (the publication hook) */
  SIGNAL_ACT_GEN = 2,    /* move the reply cache's generation */
  SIGNAL_ACT_CLEAR = 4,  /* clear the token cache */
  SIGNAL_ACT_NOTIFY = 8, /* call every subscriber with payload NULL (something may be missed) */
};

/* A fallback poll read seq and gen while the listener is connected: WAKE when seq > v->seq (a
   publication whose notification has not arrived yet, or was missed); when the gen of the
   previous poll is still ahead of v->gen (notifications had a whole poll interval to bring it
   and did not), notifications were missed: GEN | CLEAR | NOTIFY. Updates v (seq, gen when acted
   on, polled_gen). */
unsigned signal_poll_decide(struct signal_view *v, int64_t seq, int64_t gen);

/* After (re)connecting and LISTENing, seq and gen were read: everything may have been missed, so
   WAKE | GEN | CLEAR | NOTIFY; v takes seq (when newer: a database behind the view keeps the
   hub's seq) and gen. */
unsigned signal_resync_decide(struct signal_view *v, int64_t seq, int64_t gen);

/* A notification on cdnca_pub with (seq, gen): WAKE when seq > v->seq, GEN when gen > v->gen;
   updates v. */
unsigned signal_pub_decide(struct signal_view *v, int64_t seq, int64_t gen);

/* The delay before reconnect attempt n (0-based): SIGNAL_BACKOFF_MIN_MS doubling, capped at
   SIGNAL_BACKOFF_MAX_MS. */
int64_t signal_backoff_ms(int attempt);

/* ---- the listener ---- */

/* A subscriber: kind is the channel, payload the notification's text, or NULL after a reconnect
   or a detected miss (re-read whatever you wait for). Called on the listener thread: return
   quickly (signal a condition variable), never block on the database. */
typedef void (*signal_fn)(void *arg, enum signal_kind kind, const char *payload);

/* What the listener tells the layer above (the config long-polls): a publication seq it read,
   and a node that was deleted. Called on the listener thread; return quickly. */
struct signals_hooks {
  void (*publication)(void *arg, int64_t seq);
  void (*node_revoked)(void *arg, int64_t node_id);
  void *arg;
};

/* New signals for st (not owned). hooks (may be NULL; copied) are told about publications and
   revoked nodes. On PostgreSQL the store's caches stay off until signals_start has connected
   once. NULL on OOM (logged). */
struct signals *signals_new(struct store *st, const struct signals_hooks *hooks);

/* Call fn(arg, kind, payload) for every notification on kind, and with payload NULL after a
   resync (see above). At most 8 subscribers per kind; call before signals_start. 0 or -1. */
int signal_on(struct signals *s, enum signal_kind kind, signal_fn fn, void *arg);

/* Start the listener thread (PostgreSQL). The first connection is attempted by the thread, so a
   database that is down at start delays nothing. 0 or -1 (logged). */
int signals_start(struct signals *s);

/* 1 while the listener is connected and LISTENing. */
int signals_connected(struct signals *s);

/* Notifications handled since start, for tests and metrics. */
uint64_t signals_received(struct signals *s);

/* Stop the thread (within about 100 ms) and free; NULLs *s. */
void signals_free(struct signals **s);

#endif
