/*
 * test_preempt.c - preemption eligibility (engine/preempt.h): every rule
 * with the reason code it refuses with, the order in which the rules are
 * checked, and the victim the choice picks among several candidates;
 * the victims' recovery: the jitter window, and the throttle's release
 * order (tier, priority, due instant) and rate in every one-second
 * window.
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
	ax_preempt_recovery r = { .delay_us  = 60 * SEC,
		                  .jitter_us = 60 * SEC };
	for (uint64_t h = 0; h < 1000; h += 7) {
		int64_t at = ax_preempt_recovery_at(&r, 1000, h * 7919);
		cr_assert_geq(at, 1000 + 60 * SEC);
		cr_assert_leq(at, 1000 + 120 * SEC);
	}
	/* the same victim gets the same jitter, whatever came before */
	cr_assert_eq(ax_preempt_recovery_at(&r, 0, 42),
	             ax_preempt_recovery_at(&r, 0, 42));
	ax_preempt_recovery z = { .delay_us = -1, .jitter_us = -1 };
	cr_assert_eq(ax_preempt_recovery_at(&z, 5, 42), 5);
}

/* ---------------------------------------------------------------------- */
/* the recovery throttle */

#define TV_MAX 12

/* One victim of a throttle case: its tier, priority and due instant. */
typedef struct tv {
	int     tier, priority;
	int64_t due_us;
} tv;

/* Victims added at once (none released before), polled every 10 ms from
 * 0 to 30 s; want: the victims' indexes in release order. */
typedef struct throttle_case {
	char what[80];
	int  rate;
	int  n;
	tv   v[TV_MAX];
	int  want[TV_MAX];
} throttle_case;

static throttle_case throttles[] = {
	{ "mixed tiers due together come out in tier order",
	  1,
	  5,
	  { { 3, 50, SEC },
	    { 2, 50, SEC },
	    { 1, 50, SEC },
	    { 3, 50, SEC },
	    { 0, 50, SEC } },
	  { 4, 2, 1, 0, 3 } },
	{ "inside a tier the higher priority, then the earlier due",
	  1,
	  4,
	  { { 3, 10, SEC },
	    { 3, 90, 2 * SEC },
	    { 3, 10, SEC / 2 },
	    { 3, 90, SEC } },
	  /* 2 is alone at 0.5 s; at 1.5 s 3 (priority 90) goes before 0;
	   * 1, due at 2 s, outranks 0 at 2.5 s */
	  { 2, 3, 1, 0 } },
	{ "a later-due higher tier does not jump ahead of a release",
	  1,
	  3,
	  { { 3, 50, SEC }, { 1, 50, SEC + SEC / 2 }, { 3, 50, SEC } },
	  /* at 1 s only the P3s are due: one goes; the P1 is due before the
	   * next turn (2 s) and takes it */
	  { 0, 1, 2 } },
	{ "rate 0: everything due goes at once, in tier order",
	  0,
	  4,
	  { { 3, 50, SEC },
	    { 1, 50, SEC },
	    { 2, 50, SEC },
	    { 0, 50, 2 * SEC } },
	  { 1, 2, 0, 3 } },
	{ "equal victims in the order they were added",
	  10,
	  3,
	  { { 2, 50, SEC }, { 2, 50, SEC }, { 2, 50, SEC } },
	  { 0, 1, 2 } },
};

/* Runs k, writing each victim's release instant into at[] (-1: never)
 * and the release order into order[]; returns the releases. */
static int
run_throttle(const throttle_case *k, ax_preempt_victim *v, int64_t *at,
             int *order)
{
	ax_preempt_throttle t;
	int                 n = 0;

	ax_preempt_throttle_init(&t, k->rate);
	for (int i = 0; i < k->n; i++) {
		v[i]  = (ax_preempt_victim) { .id       = i,
			                      .tier     = k->v[i].tier,
			                      .priority = k->v[i].priority,
			                      .due_us   = k->v[i].due_us };
		at[i] = -1;
		cr_assert_eq(ax_preempt_throttle_add(&t, &v[i]), AX_OK);
	}
	for (int64_t now = 0; now <= 30 * SEC; now += SEC / 100) {
		ax_preempt_victim *r;
		while ((r = ax_preempt_throttle_pop(&t, now)) != NULL) {
			cr_assert_geq(now, r->due_us, "released before due");
			at[r->id]  = now;
			order[n++] = (int) r->id;
		}
	}
	cr_assert_eq(ax_preempt_throttle_count(&t), 0);
	ax_preempt_throttle_fini(&t);
	return n;
}

ParameterizedTestParameters(preempt, throttle)
{
	return cr_make_param_array(throttle_case, throttles,
	                           sizeof(throttles) / sizeof(throttles[0]));
}

ParameterizedTest(throttle_case *k, preempt, throttle)
{
	ax_preempt_victim v[TV_MAX];
	int64_t           at[TV_MAX];
	int               order[TV_MAX];

	cr_assert_eq(run_throttle(k, v, at, order), k->n, "%s", k->what);
	for (int i = 0; i < k->n; i++)
		cr_assert_eq(order[i], k->want[i],
		             "%s: release %d is %d, want %d", k->what, i,
		             order[i], k->want[i]);
	/* the rate is never exceeded in any window of one second */
	for (int i = 0; k->rate > 0 && i < k->n; i++) {
		int in = 0;
		for (int j = 0; j < k->n; j++)
			in += at[j] >= at[i] && at[j] < at[i] + SEC;
		cr_assert_leq(in, k->rate, "%s: %d in the second from %lld",
		              k->what, in, (long long) at[i]);
	}
}

/* Every rate from 1 to 40, 200 victims due together: no second ever
 * holds more than the rate, and the throttle is not slower than it
 * must be (a turn every ceil(1 s / rate)). */
Test(preempt, throttle_never_exceeds_the_rate)
{
	static ax_preempt_victim v[200];
	static int64_t           at[200];

	for (int rate = 1; rate <= 40; rate++) {
		ax_preempt_throttle t;
		int64_t             gap = (SEC + rate - 1) / rate;
		int                 n   = 0;
		ax_preempt_throttle_init(&t, rate);
		for (int i = 0; i < 200; i++) {
			v[i] = (ax_preempt_victim) { .id     = i,
				                     .tier   = i % 4,
				                     .due_us = 0 };
			cr_assert_eq(ax_preempt_throttle_add(&t, &v[i]),
			             AX_OK);
		}
		/* polled every 1 ms, as a busy actor might */
		for (int64_t now = 0; n < 200; now += 1000) {
			ax_preempt_victim *r =
			    ax_preempt_throttle_pop(&t, now);
			if (r == NULL)
				continue;
			at[n++] = now;
			cr_assert_null(ax_preempt_throttle_pop(&t, now),
			               "rate %d: two at %lld", rate,
			               (long long) now);
			/* held: the next turn is announced */
			if (ax_preempt_throttle_count(&t) > 0)
				cr_assert_eq(ax_preempt_throttle_next_us(&t),
				             now + gap);
		}
		for (int i = 0; i < n; i++) {
			int in = 0;
			for (int j = i; j < n && at[j] < at[i] + SEC; j++)
				in++;
			cr_assert_leq(in, rate, "rate %d: %d in a second",
			              rate, in);
		}
		/* spaced by the gap rounded up to the ms of the polls */
		cr_assert_leq(at[199], 199 * (gap + 1000), "rate %d: slow",
		              rate);
		ax_preempt_throttle_fini(&t);
	}
}

Test(preempt, throttle_next_remove_and_idle)
{
	ax_preempt_throttle t;
	ax_preempt_victim   a = { .id = 1, .tier = 3, .due_us = 5 * SEC };
	ax_preempt_victim   b = { .id = 2, .tier = 1, .due_us = 7 * SEC };

	ax_preempt_throttle_init(&t, 2);
	cr_assert_eq(ax_preempt_throttle_next_us(&t), INT64_MAX);
	cr_assert_null(ax_preempt_throttle_pop(&t, 0));
	cr_assert_eq(ax_preempt_throttle_add(&t, &a), AX_OK);
	cr_assert_eq(ax_preempt_throttle_add(&t, &b), AX_OK);
	/* nothing due: the first due instant is the next call */
	cr_assert_eq(ax_preempt_throttle_next_us(&t), 5 * SEC);
	cr_assert_null(ax_preempt_throttle_pop(&t, 5 * SEC - 1));
	cr_assert_eq(ax_preempt_throttle_pop(&t, 5 * SEC), &a);
	/* b is due at 7 s, after a's gap (5.5 s): 7 s */
	cr_assert_eq(ax_preempt_throttle_next_us(&t), 7 * SEC);
	/* removed while waiting: never released */
	ax_preempt_throttle_remove(&t, &b);
	cr_assert_eq(ax_preempt_throttle_count(&t), 0);
	cr_assert_null(ax_preempt_throttle_pop(&t, 60 * SEC));
	/* idle for long: no burst was saved up, one per gap still */
	a.due_us = b.due_us = 60 * SEC;
	cr_assert_eq(ax_preempt_throttle_add(&t, &a), AX_OK);
	cr_assert_eq(ax_preempt_throttle_add(&t, &b), AX_OK);
	cr_assert_eq(ax_preempt_throttle_pop(&t, 100 * SEC), &b);
	cr_assert_eq(ax_preempt_throttle_held(&t), 1);
	cr_assert_null(ax_preempt_throttle_pop(&t, 100 * SEC));
	cr_assert_eq(ax_preempt_throttle_next_us(&t), 100 * SEC + SEC / 2);
	/* removed while held */
	ax_preempt_throttle_remove(&t, &a);
	cr_assert_eq(ax_preempt_throttle_held(&t), 0);
	cr_assert_eq(ax_preempt_throttle_next_us(&t), INT64_MAX);
	ax_preempt_throttle_fini(&t);
	ax_preempt_throttle_fini(&t); /* twice, or on zeroed memory: safe */
}
