/*
 * test_preempt.c - preemption eligibility (engine/preempt.h): every rule
 * with the reason code it refuses with, the order in which the rules are
 * checked, and the victim the choice picks among several candidates.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "preempt.h"

#define SEC 1000000LL
#define MIN (60 * SEC)

static const ax_preempt_policy pol = { .max_runtime_us     = 30 * MIN,
	                               .per_worker_per_min = 2 };

/* what is an array: parameters are copied into the test's process */
typedef struct check_case {
	char            what[80];
	int             winner;
	ax_preempt_cand c;
	char            want[24];
} check_case;

static check_case checks[] = {
	{ "P3 victim, P0 winner",
	  0,
	  { 1, 3, 50, 10 * SEC, 0, 0 },
	  "PREEMPTED" },
	{ "one tier above is enough",
	  2,
	  { 1, 3, 50, 10 * SEC, 0, 0 },
	  "PREEMPTED" },
	{ "not marked preemptible",
	  0,
	  { 0, 3, 50, 10 * SEC, 0, 0 },
	  "NOT_PREEMPTIBLE" },
	{ "not started yet", 0, { 1, 3, 50, -1, 0, 0 }, "NOT_STARTED" },
	{ "same tier", 3, { 1, 3, 50, 10 * SEC, 0, 0 }, "TIER_NOT_LOWER" },
	{ "winner of a lower tier",
	  3,
	  { 1, 1, 50, 10 * SEC, 0, 0 },
	  "TIER_NOT_LOWER" },
	{ "preempted before: one tier above is not enough",
	  2,
	  { 1, 3, 50, 10 * SEC, 1, 0 },
	  "PREEMPTED_BEFORE" },
	{ "preempted before: two tiers above may",
	  1,
	  { 1, 3, 50, 10 * SEC, 1, 0 },
	  "PREEMPTED" },
	{ "ran past max_runtime",
	  0,
	  { 1, 3, 50, 30 * MIN + 1, 0, 0 },
	  "RUNTIME_EXCEEDED" },
	{ "exactly max_runtime may",
	  0,
	  { 1, 3, 50, 30 * MIN, 0, 0 },
	  "PREEMPTED" },
	{ "its worker had 2 this minute",
	  0,
	  { 1, 3, 50, 10 * SEC, 0, 2 },
	  "WORKER_LIMIT" },
	{ "its worker had 1 this minute",
	  0,
	  { 1, 3, 50, 10 * SEC, 0, 1 },
	  "PREEMPTED" },
	/* order: the first rule that fails names the refusal */
	{ "not preemptible wins over every other rule",
	  3,
	  { 0, 3, 50, -1, 1, 9 },
	  "NOT_PREEMPTIBLE" },
	{ "tier before runtime and worker limit",
	  3,
	  { 1, 3, 50, 40 * MIN, 0, 9 },
	  "TIER_NOT_LOWER" },
	{ "runtime before worker limit",
	  0,
	  { 1, 3, 50, 40 * MIN, 0, 9 },
	  "RUNTIME_EXCEEDED" },
};

ParameterizedTestParameters(preempt, check)
{
	return cr_make_param_array(check_case, checks,
	                           sizeof(checks) / sizeof(checks[0]));
}

ParameterizedTest(check_case *k, preempt, check)
{
	const char *got =
	    ax_preempt_reason(ax_preempt_check(&pol, k->winner, &k->c));
	cr_assert_str_eq(got, k->want, "%s: %s, want %s", k->what, got,
	                 k->want);
}

Test(preempt, no_limit_when_max_runtime_is_zero)
{
	ax_preempt_policy p = { .max_runtime_us = 0, .per_worker_per_min = 2 };
	ax_preempt_cand   c = { 1, 3, 50, 100 * MIN, 0, 0 };
	cr_assert_eq(ax_preempt_check(&p, 0, &c), AX_PREEMPT_OK);
	p.per_worker_per_min = 0; /* 0 per minute: never */
	cr_assert_eq(ax_preempt_check(&p, 0, &c), AX_PREEMPT_WORKER_LIMIT);
}

Test(preempt, choose_lowest_tier_then_priority_then_shortest)
{
	ax_preempt_cand c[] = {
		{ 1, 2, 10, 5 * SEC, 0, 0 },  /* P2 */
		{ 1, 3, 60, 5 * SEC, 0, 0 },  /* P3, priority 60 */
		{ 1, 3, 20, 50 * SEC, 0, 0 }, /* P3, priority 20, long */
		{ 1, 3, 20, 8 * SEC, 0, 0 },  /* P3, priority 20, short */
		{ 0, 3, 0, 1 * SEC, 0, 0 },   /* not preemptible */
	};
	ax_preempt_verdict why = AX_PREEMPT_NO_CANDIDATE;
	cr_assert_eq(ax_preempt_choose(&pol, 0, c, 5, &why), 3);
	cr_assert_eq(why, AX_PREEMPT_OK);
	/* a P2 winner may only take the P3s */
	cr_assert_eq(ax_preempt_choose(&pol, 2, c, 3, &why), 2);
	/* a P3 winner takes nothing: the closest refusal is reported */
	cr_assert_eq(ax_preempt_choose(&pol, 3, c, 5, &why), -1);
	cr_assert_str_eq(ax_preempt_reason(why), "TIER_NOT_LOWER");
}

Test(preempt, choose_reports_the_closest_refusal)
{
	ax_preempt_cand c[] = {
		{ 0, 3, 50, 5 * SEC, 0, 0 },  /* not preemptible */
		{ 1, 3, 50, 5 * SEC, 0, 2 },  /* worker limit */
		{ 1, 3, 50, 40 * MIN, 0, 0 }, /* too long */
	};
	ax_preempt_verdict why;
	cr_assert_eq(ax_preempt_choose(&pol, 0, c, 3, &why), -1);
	cr_assert_str_eq(ax_preempt_reason(why), "WORKER_LIMIT");
	cr_assert_eq(ax_preempt_choose(&pol, 0, c, 0, &why), -1);
	cr_assert_str_eq(ax_preempt_reason(why), "NO_CANDIDATE");
	cr_assert_eq(ax_preempt_choose(&pol, 0, c, 1, NULL), -1);
	cr_assert_str_eq(ax_preempt_reason((ax_preempt_verdict) 99),
	                 "INVALID");
}

Test(preempt, recovery_jitters_inside_the_window)
{
	ax_preempt_recovery r = { .delay_us   = 60 * SEC,
		                  .jitter_us  = 60 * SEC,
		                  .rate_per_s = 0 };
	for (uint64_t h = 0; h < 1000; h += 7) {
		int64_t at = ax_preempt_recovery_at(&r, 1000, h * 7919);
		cr_assert_geq(at, 1000 + 60 * SEC);
		cr_assert_leq(at, 1000 + 120 * SEC);
	}
	/* the same victim gets the same jitter */
	cr_assert_eq(ax_preempt_recovery_at(&r, 0, 42),
	             ax_preempt_recovery_at(&r, 0, 42));
}

Test(preempt, recovery_throttle_spaces_a_burst)
{
	/* 100 victims preempted at once, no jitter, 10 per second: the
	 * k-th is ready k/10 s after the first, never two in 100 ms */
	ax_preempt_recovery r    = { .delay_us   = 60 * SEC,
		                     .jitter_us  = 0,
		                     .rate_per_s = 10 };
	int64_t             prev = 0;
	for (int k = 0; k < 100; k++) {
		int64_t at = ax_preempt_recovery_at(&r, 0, (uint64_t) k);
		cr_assert_eq(at, 60 * SEC + k * (SEC / 10));
		if (k > 0)
			cr_assert_geq(at - prev, SEC / 10);
		prev = at;
	}
	/* a victim preempted later than the backlog is not held back */
	cr_assert_eq(ax_preempt_recovery_at(&r, 100 * SEC, 0), 160 * SEC);
}
