/*
 * fuzz_cron.c - libFuzzer target for the cron parser and next/prev.
 *
 * Input: the first 8 bytes are an instant (microseconds, little end
 * first), the rest is the expression. Any expression must either parse
 * or fail with a message naming a place; a parsed one must give next()
 * strictly after and prev() strictly before, in UTC and across DST in
 * Europe/London and Australia/Sydney, and prev(next(t)) must not skip
 * back past t. Build: see tests/fuzz/meson.build; run briefly:
 *   build/tests/fuzz/fuzz_cron -max_total_time=20 tests/fuzz/corpus_cron
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "tz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ax_tz *
zone(int i)
{
	/* loaded once per fuzzing process; read-only afterwards */
	static ax_tz *z[2];
	static int    tried;
	if (!tried) {
		tried = 1;
		if (ax_tz_load("Europe/London", &z[0]) != AX_OK)
			z[0] = NULL;
		if (ax_tz_load("Australia/Sydney", &z[1]) != AX_OK)
			z[1] = NULL;
	}
	return z[i];
}

static void
check(const ax_cron *c, const ax_tz *tz, int64_t t)
{
	int64_t n        = 0, p, back;
	int     has_next = ax_cron_next(c, tz, t, &n) == AX_OK;

	if (has_next) {
		if (n <= t)
			__builtin_trap();
		if (ax_cron_prev(c, tz, n, &back) == AX_OK && back >= n)
			__builtin_trap();
	}
	if (ax_cron_prev(c, tz, t, &p) == AX_OK) {
		if (p >= t)
			__builtin_trap();
		/* p is the last fire before t, so the fire after p is t
		 * itself or next(t); ENOENT only past the year limit */
		ax_err rv = ax_cron_next(c, tz, p, &back);
		if (rv == AX_OK && (back < t || (has_next && back > n)))
			__builtin_trap();
		if (rv != AX_OK && (rv != AX_ENOENT || has_next))
			__builtin_trap();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t    raw = 0;
	char       *expr;
	ax_cron    *c = NULL;
	ax_cron_err e;

	if (size < 8)
		return 0;
	for (int i = 7; i >= 0; i--)
		raw = raw << 8 | data[i];
	/* keep instants within 1900..2300 so the interesting range is hit */
	int64_t t = (int64_t) (raw % (400ULL * 366 * 86400 * 1000000)) -
	    70LL * 365 * 86400 * 1000000;
	if ((expr = malloc(size - 8 + 1)) == NULL)
		return 0;
	memcpy(expr, data + 8, size - 8);
	expr[size - 8] = '\0';
	if (ax_cron_parse(expr, &c, &e) != AX_OK) {
		if (c != NULL || e.msg[0] == '\0' || e.offset > strlen(expr))
			__builtin_trap();
	} else {
		check(c, NULL, t);
		for (int i = 0; i < 2; i++)
			if (zone(i) != NULL)
				check(c, zone(i), t);
		ax_cron_free(c);
	}
	free(expr);
	return 0;
}
