/*
 * test_shaving.c - peak shaving decisions (engine/shaving.h): when a
 * group is overloaded, which tier is delayed (the lowest present, never
 * P0), and that every delay lies in [max/2, max] of its tier and is
 * spread (jittered) across instances.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "shaving.h"

#define SEC 1000000LL

static const ax_shave_policy pol = {
	.enabled      = 1,
	.backlog      = 10,
	.level_pct    = 80,
	.max_delay_us = { 0, 10 * SEC, 30 * SEC, 60 * SEC },
};

typedef struct shave_case {
	char          what[80];
	int           enabled;
	ax_shave_load load;
	int           tier;
	int64_t       max; /* 0: not delayed; else delayed within its bounds */
} shave_case;

static shave_case cases[] = {
	{ "quiet group: nothing delayed", 1, { 3, 0, 3 }, 3, 0 },
	{ "backlog at the threshold delays P3", 1, { 10, 0, 3 }, 3, 60 * SEC },
	{ "backlog past it delays P3", 1, { 500, 0, 3 }, 3, 60 * SEC },
	{ "one under the threshold does not", 1, { 9, 0, 3 }, 3, 0 },
	{ "water level at the threshold delays",
	  1,
	  { 0, 80, 3 },
	  3,
	  60 * SEC },
	{ "water level under it does not", 1, { 0, 79, 3 }, 3, 0 },
	{ "P0 is never delayed, even alone", 1, { 500, 100, 0 }, 0, 0 },
	{ "P2 is spared while P3 is present", 1, { 500, 0, 3 }, 2, 0 },
	{ "P2 is delayed when it is the lowest",
	  1,
	  { 500, 0, 2 },
	  2,
	  30 * SEC },
	{ "P1 when it is the lowest", 1, { 500, 0, 1 }, 1, 10 * SEC },
	{ "P1 spared while P2 is present", 1, { 500, 0, 2 }, 1, 0 },
	{ "shaving off: nothing delayed", 0, { 500, 100, 3 }, 3, 0 },
	{ "tier out of range is not delayed", 1, { 500, 0, 3 }, 7, 0 },
};

ParameterizedTestParameters(shaving, decide)
{
	return cr_make_param_array(shave_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(shave_case *c, shaving, decide)
{
	ax_shave_policy p = pol;
	p.enabled         = c->enabled;
	for (uint64_t seed = 0; seed < 200; seed++) {
		int64_t d = ax_shave_delay(&p, &c->load, c->tier, seed);
		if (c->max == 0) {
			cr_assert_eq(d, 0, "%s: delayed %lld us", c->what,
			             (long long) d);
			continue;
		}
		cr_assert(d >= c->max / 2 && d <= c->max,
		          "%s: delay %lld us outside [%lld, %lld]", c->what,
		          (long long) d, (long long) (c->max / 2),
		          (long long) c->max);
	}
}

Test(shaving, delays_are_jittered_over_the_upper_half)
{
	ax_shave_load l  = { 100, 0, 3 };
	int64_t       lo = INT64_MAX, hi = 0;
	int           buckets[5];

	memset(buckets, 0, sizeof(buckets));
	for (uint64_t seed = 0; seed < 1000; seed++) {
		int64_t d = ax_shave_delay(&pol, &l, 3, seed);
		lo        = d < lo ? d : lo;
		hi        = d > hi ? d : hi;
		buckets[(d - 30 * SEC) * 5 / (30 * SEC + 1)]++;
		cr_assert_eq(d, ax_shave_delay(&pol, &l, 3, seed),
		             "the same seed gives the same delay");
	}
	cr_assert_lt(lo, 33 * SEC, "spread reaches the bottom: %lld", lo);
	cr_assert_gt(hi, 57 * SEC, "spread reaches the top: %lld", hi);
	for (int i = 0; i < 5; i++)
		cr_assert_gt(buckets[i], 120, "bucket %d holds %d of 1000", i,
		             buckets[i]);
}

Test(shaving, a_zero_largest_delay_or_threshold_turns_that_part_off)
{
	ax_shave_policy p = pol;
	ax_shave_load   l = { 500, 100, 3 };

	p.max_delay_us[3] = 0;
	cr_assert_eq(ax_shave_delay(&p, &l, 3, 1), 0);
	p           = pol;
	p.backlog   = 0;
	l.level_pct = 0;
	cr_assert_eq(ax_shave_overloaded(&p, &l), 0,
	             "backlog threshold 0: the backlog never shaves");
	l.level_pct = 90;
	cr_assert_eq(ax_shave_overloaded(&p, &l), 1);
	p.level_pct = 0;
	cr_assert_eq(ax_shave_overloaded(&p, &l), 0,
	             "level threshold 0: the level never shaves");
}
