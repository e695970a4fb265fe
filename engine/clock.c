/*
 * clock.c - monotonic and UTC clocks, ISO 8601 output, durations.
 */
#include "clock.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t
ax_clock_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * AX_USEC_PER_SEC + ts.tv_nsec / 1000;
}

void
ax_clock_mono_deadline(int64_t us, struct timespec *ts)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += us / AX_USEC_PER_SEC;
	ts->tv_nsec += (long) (us % AX_USEC_PER_SEC) * 1000;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

int
ax_clock_cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	int                rv;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rv = pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
	return rv;
}

int
ax_clock_cond_sleep(pthread_cond_t *cv, pthread_mutex_t *mu, const int *stop,
                    int64_t us)
{
	struct timespec ts;
	int             rv;

	ax_clock_mono_deadline(us, &ts);
	pthread_mutex_lock(mu);
	while (!*stop && pthread_cond_timedwait(cv, mu, &ts) == 0)
		;
	rv = *stop;
	pthread_mutex_unlock(mu);
	return rv;
}

int64_t
ax_clock_utc_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t) ts.tv_sec * AX_USEC_PER_SEC + ts.tv_nsec / 1000;
}

char *
ax_clock_fmt_utc(int64_t utc_us, char *buf, size_t len)
{
	int64_t   sec  = utc_us / AX_USEC_PER_SEC;
	int64_t   frac = utc_us % AX_USEC_PER_SEC;
	struct tm tm;
	time_t    t;

	if (frac < 0) {
		frac += AX_USEC_PER_SEC;
		sec--;
	}
	t = (time_t) sec;
	gmtime_r(&t, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ",
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	         tm.tm_min, tm.tm_sec, (int) frac);
	return buf;
}

static int64_t
unit_us(const char *u, size_t n)
{
	static const struct {
		const char *name;
		int64_t     us;
	} units[] = {
		{ "us", 1 },
		{ "ms", AX_USEC_PER_MSEC },
		{ "s", AX_USEC_PER_SEC },
		{ "m", 60 * AX_USEC_PER_SEC },
		{ "h", 3600 * AX_USEC_PER_SEC },
		{ "d", 86400 * AX_USEC_PER_SEC },
		{ "w", 7 * 86400 * AX_USEC_PER_SEC },
	};
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strlen(units[i].name) == n &&
		    strncmp(units[i].name, u, n) == 0)
			return units[i].us;
	}
	return 0;
}

ax_err
ax_duration_parse(const char *text, int64_t *out_us)
{
	const char *p     = text;
	int64_t     total = 0;

	if (text == NULL || *text == '\0')
		return ax_err_set(
		    AX_EPARSE,
		    "empty duration; write a number and a unit, e.g. 30s");
	if (*p == '-')
		return ax_err_set(
		    AX_EPARSE,
		    "duration '%s' is negative; durations must be >= 0", text);
	while (*p != '\0') {
		int64_t     v = 0;
		const char *u;
		int64_t     mult;

		if (*p < '0' || *p > '9')
			return ax_err_set(
			    AX_EPARSE,
			    "duration '%s': expected a digit at '%s' "
			    "(write e.g. 30s, 5m, 2h, 1h30m)",
			    text, p);
		while (*p >= '0' && *p <= '9') {
			if (v > (INT64_MAX / 10) - 10)
				return ax_err_set(AX_EPARSE,
				                  "duration '%s' is too large",
				                  text);
			v = v * 10 + (*p++ - '0');
		}
		u = p;
		while ((*p >= 'a' && *p <= 'z'))
			p++;
		if (u == p)
			return ax_err_set(
			    AX_EPARSE,
			    "duration '%s' has no unit after %" PRId64
			    "; use one of us, ms, s, m, h, d, w",
			    text, v);
		mult = unit_us(u, (size_t) (p - u));
		if (mult == 0)
			return ax_err_set(
			    AX_EPARSE,
			    "duration '%s': unknown unit '%.*s'; use one of "
			    "us, ms, s, m, h, d, w",
			    text, (int) (p - u), u);
		if (v > INT64_MAX / mult || total > INT64_MAX - v * mult)
			return ax_err_set(AX_EPARSE,
			                  "duration '%s' is too large", text);
		total += v * mult;
	}
	*out_us = total;
	return AX_OK;
}

char *
ax_duration_fmt(int64_t us, char *buf, size_t len)
{
	static const struct {
		const char *name;
		int64_t     us;
	} units[] = {
		{ "d", 86400 * AX_USEC_PER_SEC },
		{ "h", 3600 * AX_USEC_PER_SEC },
		{ "m", 60 * AX_USEC_PER_SEC },
		{ "s", AX_USEC_PER_SEC },
		{ "ms", AX_USEC_PER_MSEC },
		{ "us", 1 },
	};
	size_t off = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	if (us <= 0) {
		snprintf(buf, len, "0s");
		return buf;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (us >= units[i].us && off < len) {
			int n = snprintf(buf + off, len - off, "%" PRId64 "%s",
			                 us / units[i].us, units[i].name);
			if (n < 0)
				break;
			off += (size_t) n;
			us %= units[i].us;
		}
	}
	return buf;
}

void
ax_clock_sleep_us(int64_t us)
{
	struct timespec ts = { .tv_sec  = us / AX_USEC_PER_SEC,
		               .tv_nsec = (us % AX_USEC_PER_SEC) * 1000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}
