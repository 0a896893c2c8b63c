/* rng — small pseudo-random numbers for jitter, traffic splits and random picks: splitmix64, one
   state word per generator. Never for secrets (token.h makes those from the kernel). */
#ifndef CDNCA_RNG_H
#define CDNCA_RNG_H

#include <stdint.h>

struct rng {
  uint64_t s;
};

/* A seed from the kernel (getrandom, never blocking), else from the monotonic clock. */
uint64_t rng_seed_fresh(void);

/* The next 64 bits of r (splitmix64: every seed, 0 included, gives a full-period sequence). */
uint64_t rng_next(struct rng *r);

/* A uniform draw in [0, n) for n >= 1 (one rng_next; the remainder's bias is below n / 2^64);
   0 for n < 1. */
uint64_t rng_below(struct rng *r, uint64_t n);

#endif
