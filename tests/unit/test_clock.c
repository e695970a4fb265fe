#include <errno.h>
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "clock.h"

struct dur_case {
	char    text[32]; /* arrays, not pointers: criterion copies params */
	int64_t us;       /* -1: must fail */
};

ParameterizedTestParameters(clock, duration_parse)
{
	static struct dur_case cases[] = {
		{ "30s", 30000000LL },
		{ "5m", 300000000LL },
		{ "2h", 7200000000LL },
		{ "1h30m", 5400000000LL },
		{ "250ms", 250000LL },
		{ "1d", 86400000000LL },
		{ "0s", 0 },
		{ "", -1 },
		{ "-5s", -1 },
		{ "5", -1 },
		{ "5x", -1 },
		{ "s", -1 },
		{ "99999999999999999999s", -1 },
		{ "9999999999999w", -1 },
	};
	return cr_make_param_array(struct dur_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct dur_case *c, clock, duration_parse)
{
	int64_t us = 0;
	ax_err  rv = ax_duration_parse(c->text, &us);
	if (c->us < 0) {
		cr_assert_eq(rv, AX_EPARSE, "'%s' should fail", c->text);
		cr_assert(strlen(ax_err_detail()) > 0);
	} else {
		cr_assert_eq(rv, AX_OK, "'%s': %s", c->text, ax_err_detail());
		cr_assert_eq(us, c->us, "'%s'", c->text);
	}
}

Test(clock, duration_format_round_trips)
{
	char    buf[64];
	int64_t us;
	cr_assert_str_eq(ax_duration_fmt(5400000000LL, buf, sizeof(buf)),
	                 "1h30m");
	cr_assert_eq(ax_duration_parse(buf, &us), AX_OK);
	cr_assert_eq(us, 5400000000LL);
	cr_assert_str_eq(ax_duration_fmt(0, buf, sizeof(buf)), "0s");
}

Test(clock, utc_format)
{
	char buf[40];
	cr_assert_str_eq(ax_clock_fmt_utc(0, buf, sizeof(buf)),
	                 "1970-01-01T00:00:00.000000Z");
	cr_assert_str_eq(
	    ax_clock_fmt_utc(1774749600123456LL, buf, sizeof(buf)),
	    "2026-03-29T02:00:00.123456Z");
	cr_assert_str_eq(ax_clock_fmt_utc(-1, buf, sizeof(buf)),
	                 "1969-12-31T23:59:59.999999Z");
}

Test(clock, monotonic_never_goes_back)
{
	int64_t a = ax_clock_mono_us();
	ax_clock_sleep_us(1000);
	int64_t b = ax_clock_mono_us();
	cr_assert_geq(b - a, 1000);
}

Test(clock, mono_deadline_adds_and_normalises)
{
	struct timespec now, ts;
	pthread_cond_t  cv;
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ax_clock_mono_deadline(1999999, &ts); /* just under 2 s */
	cr_assert(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
	int64_t d = (int64_t) (ts.tv_sec - now.tv_sec) * 1000000 +
	    (ts.tv_nsec - now.tv_nsec) / 1000;
	cr_assert(d >= 1999999 && d < 2100000, "%lld us", (long long) d);
	/* a wait on a monotonic condition variable ends at its deadline */
	cr_assert_eq(ax_clock_cond_init(&cv), 0);
	ax_clock_mono_deadline(20000, &ts);
	pthread_mutex_lock(&mu);
	int64_t t0 = ax_clock_mono_us();
	cr_assert_eq(pthread_cond_timedwait(&cv, &mu, &ts), ETIMEDOUT);
	int64_t took = ax_clock_mono_us() - t0;
	pthread_mutex_unlock(&mu);
	cr_assert(took >= 15000 && took < 1000000, "%lld us",
	          (long long) took);
	/* a stop flag set before the sleep returns at once */
	int stop = 1;
	t0       = ax_clock_mono_us();
	cr_assert_eq(ax_clock_cond_sleep(&cv, &mu, &stop, 10000000), 1);
	cr_assert(ax_clock_mono_us() - t0 < 1000000);
	pthread_cond_destroy(&cv);
}
