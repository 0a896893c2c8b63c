/* prober — probe rounds: due sites, node tasks and votes, checkpoint plugin, direct probes, engine.
 */
#ifndef CDNCA_PROBER_H
#define CDNCA_PROBER_H

#include <stdint.h>

struct prober;
struct store;
struct task_board;
struct metrics;
struct engine_env;
struct targets;

/* What the prober works with (copied by prober_new; the pointers are borrowed and must outlive
   the prober). */
struct prober_env {
  struct store *store;
  struct task_board *tasks; /* node probe tasks and votes; NULL: no node votes */
  struct metrics *metrics;
  struct engine_env *engine;  /* a round's results go to engine_apply_round; its interval follows
                                 prober_set_schedule */
  const struct targets *deny; /* destinations probes may not connect to */
  int64_t probe_interval_ms, suspect_interval_ms, probe_batch, node_online_ms;
  const char *probe_ca_file;  /* NULL or "": the system's CAs */
  int probe_curl;             /* 1: every probe through libcurl (--probe-client curl) */
  const char *checkpoint_url; /* NULL or "": no checkpoint plugin */
};

/* What one round did. */
struct prober_stats {
  int64_t round_id;                         /* 0 when no site was due */
  int sites, origins;                       /* probed in the round */
  int nodes;                                /* nodes handed tasks */
  int by_nodes, by_checkpoints, by_control; /* verdicts per source */
  int failures;                             /* failure verdicts */
  int checkpoint_errors;                    /* plugin answers that failed or were garbage */
  int shadow_sites;   /* sites whose shadow policy was probed (-1: their results were lost) */
  int shadow_skipped; /* sites whose shadow probes the batch left out */
  int64_t wall_ms;    /* duration of the round */
  int64_t load_ms, nodes_ms, checkpoints_ms, control_ms, store_ms; /* its phases */
};

/* New prober for env (probe client, checkpoint client when env->checkpoint_url is set); no thread
   yet. NULL on failure (logged). Free with prober_free. */
struct prober *prober_new(const struct prober_env *env);

/* Start the round thread: a round every probe_interval_ms (every min(probe_interval_ms,
   suspect_interval_ms) with fast re-probes on), and in between as soon as a site with its own
   health_check.interval_ms is due; rounds never overlap. 0 or -1 (0 when it runs already). */
int prober_start(struct prober *p);

/* Change the probe interval and batch (SIGHUP reload): the round thread takes them before its
   next round, which is then due interval_ms after the last round started (at once if past). */
void prober_set_schedule(struct prober *p, int64_t interval_ms, int64_t batch);

/* Run one round on the calling thread (not while the thread runs); *st (may be NULL) gets its
   figures. 0 (also when nothing was due or the round was cancelled), -1 on failure. */
int prober_run_once(struct prober *p, struct prober_stats *st);

/* Stop the round thread (an ongoing round is cancelled within about 100 ms, its results
   dropped) and keep the prober: prober_start runs it again (the engine lease's role changes).
   A no-op when the thread is not running. */
void prober_stop(struct prober *p);

/* Stop the thread (an ongoing round is cancelled within about 100 ms, its results dropped) and
   free; NULLs *p. NULL is a no-op. */
void prober_free(struct prober **p);

/* 1 when the round thread starts a round now (mono ms; wall ms for the store's times): not before
   not_before_mono, and either the global tick is reached (next_round_mono) or a site with its own
   interval is due (have_own, own_due_wall <= now_wall). Pure. */
int prober_round_due(int64_t now_mono, int64_t next_round_mono, int64_t not_before_mono,
                     int have_own, int64_t own_due_wall, int64_t now_wall);

/* Mono ms at which the round thread wakes: the global tick, the next own-interval site due, or
   now + recheck_ms, whichever comes first, never before not_before_mono. Pure. */
int64_t prober_next_wake(int64_t now_mono, int64_t next_round_mono, int64_t not_before_mono,
                         int have_own, int64_t own_due_wall, int64_t now_wall, int64_t recheck_ms);

/* The voters of a round: k of the n online node ids (fewer when n < k) drawn without replacement,
   each equally likely, by a generator seeded with seed (the round draws it from getrandom), into
   out; online is shuffled in part. How recently or how often a node called does not matter, so
   nodes that call often cannot keep the others out. Returns how many. Pure. */
int prober_pick_voters(int64_t *online, int n, uint64_t seed, int64_t *out, int k);

/* The node deadline of a round, in ms from its start: min(max_timeout_ms + 2000,
   probe_interval_ms / 2), at least 1 ms. Pure. */
int64_t prober_node_deadline_ms(int64_t max_timeout_ms, int64_t probe_interval_ms);

#endif
