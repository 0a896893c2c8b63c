/* clock — the one place time is read; tests can freeze or advance it. */
#ifndef CDNCA_CLOCK_H
#define CDNCA_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Monotonic milliseconds (for timeouts and intervals). */
int64_t clock_mono_ms(void);

/* Wall-clock milliseconds since the Unix epoch (for stored timestamps). */
int64_t clock_wall_ms(void);

/* Format wall-clock ms as RFC 3339 UTC ("2026-12-02T10:00:00Z") into out (>= 25 bytes). */
void clock_format_iso(int64_t wall_ms, char *out, unsigned cap);

/* Parse an RFC 3339 date-time ("2026-12-31T23:59:59Z", optional fraction of a second, "Z" or a
   "+HH:MM"/"-HH:MM" offset; 'T' and 'Z' in either case) into wall ms since the epoch (years
   1970-9999). 0, or -1 for anything else (out untouched). Pure. */
int clock_parse_iso(const char *s, int64_t *wall_ms);

/* The real CLOCK_MONOTONIC time ms_from_now ms from now (< 0: now) into *ts, for
   pthread_cond_timedwait on a condition variable made by clock_cond_init. */
void clock_mono_timespec(struct timespec *ts, int64_t ms_from_now);

/* Initialise *cv so that its timed waits read CLOCK_MONOTONIC: a step of the wall clock neither
   hurries nor holds a wait. 0 or an error number. */
int clock_cond_init(pthread_cond_t *cv);

/* Test hook: when set to a value >= 0, clock_wall_ms returns it (and clock_mono_ms too). -1
 * restores real time. */
void clock_set_fake_ms(int64_t ms);

#endif
