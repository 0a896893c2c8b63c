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

void clock_mono_timespec(struct timespec *ts, int64_t ms_from_now) {
  if (ms_from_now < 0) ms_from_now = 0;
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += (time_t)(ms_from_now / 1000);
  ts->tv_nsec += (long)(ms_from_now % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

int clock_cond_init(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc) return rc;
  rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (!rc) rc = pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
  return rc;
}

void clock_format_iso(int64_t wall_ms, char *out, unsigned cap) {
  time_t s = (time_t)(wall_ms / 1000);
  struct tm tm;
  gmtime_r(&s, &tm);
  snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void clock_set_fake_ms(int64_t ms) {
  atomic_store(&fake_ms, ms);
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d) {
  int64_t era, yoe, doy, doe;
  y -= m <= 2;
  era = (y >= 0 ? y : y - 399) / 400;
  yoe = y - era * 400;
  doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

/* n decimal digits at s into *v; 0 or -1. */
static int digits(const char *s, int n, int *v) {
  *v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    *v = *v * 10 + (s[i] - '0');
  }
  return 0;
}

int clock_parse_iso(const char *s, int64_t *wall_ms) {
  static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int y, mo, d, h, mi, sec, ms = 0, leap, oh = 0, om = 0, sign = 0;
  const char *p;
  int64_t t;
  if (!s || digits(s, 4, &y) < 0 || s[4] != '-' || digits(s + 5, 2, &mo) < 0 || s[7] != '-' ||
      digits(s + 8, 2, &d) < 0 || (s[10] != 'T' && s[10] != 't') || digits(s + 11, 2, &h) < 0 ||
      s[13] != ':' || digits(s + 14, 2, &mi) < 0 || s[16] != ':' || digits(s + 17, 2, &sec) < 0)
    return -1;
  p = s + 19;
  if (*p == '.') {
    int n = 0;
    for (p++; *p >= '0' && *p <= '9'; p++, n++)
      if (n < 3) ms = ms * 10 + (*p - '0');
    if (n == 0 || n > 9) return -1;
    for (; n < 3; n++)
      ms *= 10;
  }
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    sign = *p == '+' ? 1 : -1;
    if (digits(p + 1, 2, &oh) < 0 || p[3] != ':' || digits(p + 4, 2, &om) < 0 || oh > 23 || om > 59)
      return -1;
    p += 6;
  } else {
    return -1;
  }
  if (*p) return -1;
  leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && leap) || h > 23 ||
      mi > 59 || sec > 59)
    return -1;
  t = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60 + sec;
  t -= (int64_t)sign * (oh * 3600 + om * 60);
  if (t < 0) return -1;
  *wall_ms = t * 1000 + ms;
  return 0;
}
