/*
 * test_aging.c - the aging key (engine/aging.h): its values, aging off
 * for an interval <= 0, and the order it gives pairs of waiting items
 * (who goes first after how long a wait), checked against the effective
 * priority at several instants.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdint.h>

#include "aging.h"

#define SEC 1000000LL /* us */

typedef struct key_case {
	int64_t prio, enq, aging;
	double  want;
} key_case;

static key_case keys[] = {
	{ 5, 0, 0, 5.0 },          /* aging off */
	{ 5, 1000 * SEC, 0, 5.0 }, /* off: the enqueue time is ignored */
	{ 5, 1000 * SEC, -30 * SEC, 5.0 }, /* a negative interval: off too */
	{ 0, 30 * SEC, 30 * SEC, -1.0 },
	{ 3, 60 * SEC, 30 * SEC, 1.0 },
	{ -2, 15 * SEC, 30 * SEC, -2.5 },
	{ INT32_MAX, 0, 1, 2147483647.0 },
	{ INT32_MIN, 0, 30 * SEC, -2147483648.0 },
	/* a year of monotonic time: still exact in a double */
	{ 1, 365LL * 86400 * SEC, 30 * SEC, 1.0 - 1051200.0 },
};

ParameterizedTestParameters(aging, key_values)
{
	return cr_make_param_array(key_case, keys,
	                           sizeof(keys) / sizeof(keys[0]));
}

ParameterizedTest(key_case *c, aging, key_values)
{
	double k = ax_aging_key(c->prio, c->enq, c->aging);
	cr_assert_eq(k, c->want, "key(%lld, %lld, %lld) = %.17g, want %.17g",
	             (long long) c->prio, (long long) c->enq,
	             (long long) c->aging, k, c->want);
	/* effective at the enqueue instant is the priority itself, and the
	 * effective priority and the key differ by now / aging only */
	cr_assert_eq(ax_aging_effective(c->prio, c->enq, c->enq, c->aging),
	             (double) c->prio);
}

/* Two items a and b: which goes first (larger key), or a tie. */
/* what is an array: a parameter is copied into the test's process,
 * where a pointer into this one would not be valid */
typedef struct order_case {
	char    what[80];
	int64_t pa, ea, pb, eb, aging;
	int     want; /* 1: a first, 0: b first, -1: equal keys */
} order_case;

static order_case orders[] = {
	{ "same priority: the earlier first", 1, 0, 1, 1, 30 * SEC, 1 },
	{ "enqueued together: the higher priority first", 2, 100, 1, 100,
	  30 * SEC, 1 },
	{ "one step lower, waited more than an interval longer: overtakes", 1,
	  0, 2, 31 * SEC, 30 * SEC, 1 },
	{ "one step lower, waited less than an interval longer: behind", 1, 0,
	  2, 29 * SEC, 30 * SEC, 0 },
	{ "one step lower, waited exactly an interval longer: equal", 1, 0, 2,
	  30 * SEC, 30 * SEC, -1 },
	{ "three steps lower, waited three intervals and a second", 0, 0, 3,
	  91 * SEC, 30 * SEC, 1 },
	{ "three steps lower, waited less than three intervals", 0, 0, 3,
	  89 * SEC, 30 * SEC, 0 },
	{ "aging off: waiting never overtakes", 1, 0, 2, 1000000 * SEC, 0, 0 },
	{ "aging off, same priority: equal whatever the wait", 1, 0, 1,
	  1000 * SEC, 0, -1 },
	{ "a short interval erases priorities: old low beats new high", 0, 0,
	  100, 2 * SEC, 10000, 1 },
	{ "negative priorities age the same way", -5, 0, -4, 40 * SEC,
	  30 * SEC, 1 },
};

ParameterizedTestParameters(aging, order_of_pairs)
{
	return cr_make_param_array(order_case, orders,
	                           sizeof(orders) / sizeof(orders[0]));
}

ParameterizedTest(order_case *c, aging, order_of_pairs)
{
	double  ka   = ax_aging_key(c->pa, c->ea, c->aging);
	double  kb   = ax_aging_key(c->pb, c->eb, c->aging);
	int     got  = ka > kb ? 1 : ka < kb ? 0 : -1;
	int64_t from = c->ea > c->eb ? c->ea : c->eb;

	cr_assert_eq(got, c->want, "%s: keys %.17g and %.17g", c->what, ka,
	             kb);
	/* the key needs no now: at any later instant the effective
	 * priorities rank the two the same way */
	for (int64_t later = 0; later <= 3600 * SEC; later += 600 * SEC) {
		int64_t now = from + later;
		double  ea  = ax_aging_effective(c->pa, c->ea, now, c->aging);
		double  eb  = ax_aging_effective(c->pb, c->eb, now, c->aging);
		if (c->want == -1)
			cr_assert_float_eq(ea, eb, 1e-9, "%s at +%llds",
			                   c->what, (long long) (later / SEC));
		else
			cr_assert_eq(ea > eb, c->want,
			             "%s at +%llds: %.17g %.17g", c->what,
			             (long long) (later / SEC), ea, eb);
	}
}

Test(aging, effective_grows_one_step_per_interval)
{
	int64_t aging = 30 * SEC;
	cr_assert_eq(ax_aging_effective(2, 10 * SEC, 10 * SEC, aging), 2.0);
	cr_assert_eq(ax_aging_effective(2, 10 * SEC, 40 * SEC, aging), 3.0);
	cr_assert_eq(ax_aging_effective(2, 10 * SEC, 25 * SEC, aging), 2.5);
	cr_assert_eq(ax_aging_effective(2, 10 * SEC, 100 * SEC, 0), 2.0);
}

/* Tier priorities: the value, the clamps, and who goes first. */
typedef struct tier_case {
	char    what[80];
	int     tier;
	int64_t prio, want;
} tier_case;

static tier_case tiers[] = {
	{ "P0 of priority 0 is above every P1", 0, 0, 303 },
	{ "P0 of priority 100", 0, 100, 403 },
	{ "P1 of priority 100 stays below P0 of priority 0", 1, 100, 302 },
	{ "P3 of priority 0 is the bottom", 3, 0, 0 },
	{ "P2 of priority 50", 2, 50, 151 },
	{ "a tier out of range counts as P3", 7, 50, 50 },
	{ "a negative tier counts as P3", -1, 50, 50 },
	{ "a priority over 100 is 100", 3, 1000, 100 },
	{ "a negative priority is 0", 1, -5, 202 },
};

ParameterizedTestParameters(aging, tier_priority_values)
{
	return cr_make_param_array(tier_case, tiers,
	                           sizeof(tiers) / sizeof(tiers[0]));
}

ParameterizedTest(tier_case *c, aging, tier_priority_values)
{
	cr_assert_eq(ax_aging_tier_priority(c->tier, c->prio), c->want,
	             "%s: got %lld", c->what,
	             (long long) ax_aging_tier_priority(c->tier, c->prio));
}

Test(aging, tiers_order_first_then_aging_crosses_them)
{
	int64_t aging = 30 * SEC;
	int64_t p0    = ax_aging_tier_priority(0, 0);
	int64_t p3    = ax_aging_tier_priority(3, 100);
	/* enqueued together: the higher tier first, whatever the priority */
	cr_assert_gt(ax_aging_key(p0, 0, aging), ax_aging_key(p3, 0, aging));
	/* P3 waited 203 intervals longer (p0 - p3 steps): behind by a hair
	 * less than one, ahead one interval later */
	cr_assert_lt(ax_aging_key(p3, 0, aging),
	             ax_aging_key(p0, 202 * aging, aging));
	cr_assert_gt(ax_aging_key(p3, 0, aging),
	             ax_aging_key(p0, 204 * aging, aging));
	/* aging off: tier order for good */
	cr_assert_gt(ax_aging_key(p0, 1000000 * SEC, 0),
	             ax_aging_key(p3, 0, 0));
}
