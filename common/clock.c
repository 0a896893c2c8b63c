/* clock — real or fake time. */
#include "clock.h"

#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static _Atomic int64_t fake_ms = -1;

int64_t clock_mono_ms(void) {
  struct timespec ts;
  int64_t f = atomic_load(&fake_ms);
  if (f >= 0) return f;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_wall_ms(void) {
  struct timespec ts;
  int64_t f = atomic_load(&fake_ms);
  if (f >= 0) return f;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void clock_format_iso(int64_t wall_ms, char *out, unsigned cap) {
  time_t s = (time_t)(wall_ms / 1000);
  struct tm tm;
  gmtime_r(&s, &tm);
  snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void clock_set_fake_ms(int64_t ms) { atomic_store(&fake_ms, ms); }
