/* probe_poll — the prober's loop before the epoll loop: curl_multi_perform + curl_multi_poll,
 * every probe through libcurl and every turn walking every transfer in flight. Kept outside the
 * daemons, through probe.h's loop seam, to compare the engines against it: bench_probe measures
 * its CPU, tests/unit/test_probe checks it gives the same results. */
#ifndef CDNCA_PROBE_POLL_H
#define CDNCA_PROBE_POLL_H

struct probe;

/* One turn of the poll loop (a probe_loop_fn). */
int probe_poll_turn(struct probe *p, void *multi, int more_to_start, int wait_ms);

/* Make p run its probes on the poll loop (probe_set_loop); after probe_new. 0 or -1. */
int probe_poll_use(struct probe *p);

#endif
