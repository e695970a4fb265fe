/*
 * clock.h - the two clocks of AX.
 *
 * Monotonic microseconds for durations and timers (never jumps); UTC
 * microseconds since the Unix epoch for anything stored or shown. The
 * database's clock is the reference across machines; these are the local
 * readings.
 */
#ifndef AX_CLOCK_H
#define AX_CLOCK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ax_err.h"

#define AX_USEC_PER_SEC  1000000LL
#define AX_USEC_PER_MSEC 1000LL

/* Microseconds on CLOCK_MONOTONIC; for timers and durations only. */
int64_t ax_clock_mono_us(void);

/*
 * *ts = now + us on CLOCK_MONOTONIC: the deadline for
 * pthread_cond_timedwait on a condition variable made by
 * ax_clock_cond_init (so a wall-clock step never shortens or stretches
 * the wait). Any thread.
 */
void ax_clock_mono_deadline(int64_t us, struct timespec *ts);

/* Initialises cv to time its waits on CLOCK_MONOTONIC; returns
 * pthread_cond_init's result. */
int ax_clock_cond_init(pthread_cond_t *cv);

/*
 * Waits on cv (made by ax_clock_cond_init) for up to us microseconds
 * unless *stop is set, which a signal or broadcast of cv makes it check
 * at once; mu guards *stop and is not held by the caller. Returns *stop.
 * Any thread.
 */
int ax_clock_cond_sleep(pthread_cond_t *cv, pthread_mutex_t *mu,
                        const int *stop, int64_t us);

/* Microseconds since 1970-01-01T00:00:00Z on CLOCK_REALTIME. */
int64_t ax_clock_utc_us(void);

/*
 * Formats a UTC instant as ISO 8601 with microseconds and a Z suffix,
 * e.g. 2026-11-30T09:54:32.123456Z. buf must hold at least 32 bytes.
 * Returns buf.
 */
char *ax_clock_fmt_utc(int64_t utc_us, char *buf, size_t len);

/*
 * Parses a duration such as "30s", "5m", "2h", "1d", "250ms", "1h30m" into
 * microseconds. Returns AX_EPARSE with a detail naming the bad part.
 */
ax_err ax_duration_parse(const char *text, int64_t *out_us);

/* Formats a duration compactly ("1h30m", "250ms", "0s"). */
char *ax_duration_fmt(int64_t us, char *buf, size_t len);

/* Sleeps for us microseconds on the monotonic clock (restarts on EINTR). */
void ax_clock_sleep_us(int64_t us);

#endif /* AX_CLOCK_H */
