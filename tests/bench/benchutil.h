/* benchutil — what the C benchmarks share: a monotonic clock in nanoseconds and the median of
 * their rounds (the middle value, or the mean of the two middle ones for an even count). */
#ifndef CDNCA_BENCHUTIL_H
#define CDNCA_BENCHUTIL_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline int bench_cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts v[0, n) (n > 0) and returns its median. */
static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_d);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
