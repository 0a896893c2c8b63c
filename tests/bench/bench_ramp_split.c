/* bench_ramp_split — what the failback ramp's split costs a request by itself: the work noded's
 * attempt_start adds for a site with a running ramp (a wall-clock read, a draw from a per-thread
 * xorshift64* generator as attempt.c's draw100, proxy_state_start_level), timed over N calls,
 * against the same loop for a site without a ramp (the one branch on ramp.from_level).
 * usage: bench_ramp_split [N (default 20000000)] [ROUNDS (default 5)]
 * Prints ns per call for each and the difference: divided by the proxy's CPU per request
 * (bench_ramp.sh, about 30 us on this machine) it bounds the split's share of that CPU. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchutil.h"
#include "clock.h"
#include "proxy_state.h"
#include "sitecfg.h"

static uint64_t x = 88172645463325252ull;
static int draw100(void) {
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  return (int)(((x * UINT64_C(2685821657736338717)) >> 33) % 100);
}

/* ns per call of the request's start-level decision; *sink keeps the result alive */
static double run(const struct sitecfg_site *s, long n, long *sink) {
  double t0 = bench_now_ns();
  long acc = 0;
  for (long i = 0; i < n; i++) {
    int level = s->current_level;
    if (s->ramp.from_level) level = proxy_state_start_level(s, clock_wall_ms(), 0, draw100());
    acc += level;
  }
  *sink += acc;
  return (bench_now_ns() - t0) / (double)n;
}

static int cmp(const void *a, const void *b) {
  double d = *(const double *)a - *(const double *)b;
  return d < 0 ? -1 : d > 0;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20000000L, sink = 0;
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  struct sitecfg_site none, ramp;
  double a[64], b[64];
  if (n < 1 || rounds < 1 || rounds > 64) {
    fprintf(stderr, "usage: bench_ramp_split [N] [ROUNDS (1-64)]\n");
    return 2;
  }
  memset(&none, 0, sizeof none);
  none.current_level = 2;
  ramp = none;
  /* a ramp back to level 1 started now, its first step (50 %) lasting an hour */
  ramp.ramp.from_level = 2;
  ramp.ramp.to_level = 1;
  ramp.ramp.started_at = clock_wall_ms();
  ramp.ramp.n_steps = 2;
  ramp.ramp.steps[0] = 50;
  ramp.ramp.steps[1] = 100;
  ramp.ramp.step_ms = 3600000;
  for (int r = 0; r < rounds; r++) {
    a[r] = run(&none, n, &sink);
    b[r] = run(&ramp, n, &sink);
    printf("round %d: none %.2f ns, ramp %.2f ns per request\n", r + 1, a[r], b[r]);
  }
  qsort(a, (size_t)rounds, sizeof a[0], cmp);
  qsort(b, (size_t)rounds, sizeof b[0], cmp);
  printf("median: none %.2f ns, ramp %.2f ns: the split adds %.2f ns per request (sink %ld)\n",
         a[rounds / 2], b[rounds / 2], b[rounds / 2] - a[rounds / 2], sink % 7);
  return 0;
}
