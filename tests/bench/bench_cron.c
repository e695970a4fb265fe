/*
 * bench_cron.c - next-fire computations per second for a set of cron
 * expressions and zones: median and P99 nanoseconds per ax_cron_next()
 * call, and calls per second. Each expression walks its fire times
 * forward from 2026-01-01 (restarting at the year limit), so calls cross
 * DST transitions, month ends and leap days as a real scheduler's do.
 * Bounded: CALLS calls per case. Prints a table; not a pass/fail test.
 *   build/tests/bench_cron [calls]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron.h"
#include "tz.h"

#define CALLS 20000

static int64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int
cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	static const struct {
		const char *expr;
		const char *zone;
	} cases[] = {
		{ "*/5 * * * *", "UTC" },
		{ "0 2 * * *", "UTC" },
		{ "0 2 * * *", "America/New_York" },
		{ "30 1 * * *", "Europe/London" },
		{ "*/15 * * * * ?", "Australia/Sydney" },
		{ "0 30 2 * * ?", "Asia/Shanghai" },
		{ "0 0 9-17 ? * MON-FRI", "Europe/Berlin" },
		{ "0 0 0 L * ?", "UTC" },
		{ "0 0 0 15W * ?", "America/New_York" },
		{ "0 0 0 ? * 6#3", "Europe/London" },
		{ "0 0 29 2 *", "UTC" },
		{ "0 0 0 1 1 ? 2150", "Europe/London" },
		{ "@hourly", "America/New_York" },
	};
	int      calls = argc > 1 ? atoi(argv[1]) : CALLS;
	int64_t *ns;

	if (calls < 100)
		calls = 100;
	if ((ns = malloc(sizeof(*ns) * (size_t) calls)) == NULL)
		return 1;
	printf("%-26s %-18s %10s %10s %12s\n", "expression", "zone",
	       "median ns", "p99 ns", "calls/s");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ax_cron *c;
		ax_tz   *tz;
		int64_t  start = 1767225600000000LL, t = start, total = 0;
		if (ax_cron_parse(cases[i].expr, &c, NULL) != AX_OK ||
		    ax_tz_load(cases[i].zone, &tz) != AX_OK) {
			fprintf(stderr, "bench_cron: %s\n", ax_err_detail());
			return 1;
		}
		for (int k = 0; k < calls; k++) {
			int64_t a  = now_ns();
			ax_err  rv = ax_cron_next(c, tz, t, &t);
			int64_t b  = now_ns();
			ns[k]      = b - a;
			total += ns[k];
			if (rv != AX_OK)
				t = start;
		}
		qsort(ns, (size_t) calls, sizeof(*ns), cmp64);
		printf("%-26s %-18s %10lld %10lld %12.0f\n", cases[i].expr,
		       cases[i].zone, (long long) ns[calls / 2],
		       (long long) ns[(size_t) calls * 99 / 100],
		       total > 0 ? 1e9 * calls / (double) total : 0.0);
		ax_tz_free(tz);
		ax_cron_free(c);
	}
	free(ns);
	return 0;
}
