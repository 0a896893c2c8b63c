/* rng — splitmix64 (see rng.h). */
#include "rng.h"

#include <sys/random.h>
#include <sys/types.h>

#include "clock.h"

uint64_t rng_seed_fresh(void) {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed)
    seed = (uint64_t)clock_mono_ms() * 0x9e3779b97f4a7c15ULL;
  return seed;
}

uint64_t rng_next(struct rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rng_below(struct rng *r, uint64_t n) {
  return n < 1 ? 0 : rng_next(r) % n;
}
