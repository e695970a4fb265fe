/*
 * test_overlap.c - the overlap decision of the dependency detector
 * (actors/dependency/overlap.h): what a new run of a DAG does while
 * earlier runs are active or held, for every policy and run kind, table
 * driven. The detector applies these answers; its integration test
 * (test_dependency_detector) proves the application against PostgreSQL.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "dependency/overlap.h"

/* Parameters are copied into the test's own process: no pointers. */
struct ocase {
	char           what[40];
	ax_overlap_in  in;
	ax_overlap_act act;
	int64_t        behind;
	size_t         nsupersede;
};

#define DUE AX_RUN_KIND_DUE
#define BFS AX_RUN_KIND_BACKFILL_SERIAL
#define BFP AX_RUN_KIND_BACKFILL_PARALLEL
#define SER AX_OVERLAP_SERIAL
#define PAR AX_OVERLAP_PARALLEL
#define DIS AX_OVERLAP_DISCARD
#define REP AX_OVERLAP_REPLACE
/* policy, max_active_runs, kind, nactive, nheld, oldest, bf_run, early */
#define IN(p, m, k, na, nh, old, bf, e)                                       \
	{                                                                     \
		.policy = (p), .max_active_runs = (m), .kind = (k),           \
		.nactive = (na), .nheld = (nh), .oldest_active = (old),       \
		.backfill_active = (bf), .early = (e)                         \
	}

ParameterizedTestParameters(overlap, decide)
{
	static struct ocase cases[] = {
		/* room and nobody held: every policy starts */
		{ "serial, idle", IN(SER, 1, DUE, 0, 0, 0, 0, 0), AX_ACT_START,
		  0, 0 },
		{ "parallel, room", IN(PAR, 3, DUE, 2, 0, 4, 0, 0),
		  AX_ACT_START, 0, 0 },
		{ "discard, idle", IN(DIS, 1, DUE, 0, 0, 0, 0, 0),
		  AX_ACT_START, 0, 0 },
		{ "replace, room", IN(REP, 2, DUE, 1, 0, 4, 0, 1),
		  AX_ACT_START, 0, 0 },
		/* full: serial and parallel hold behind the oldest */
		{ "serial, full", IN(SER, 1, DUE, 1, 0, 7, 0, 0), AX_ACT_HOLD,
		  7, 0 },
		{ "parallel, full", IN(PAR, 3, DUE, 3, 0, 5, 0, 0),
		  AX_ACT_HOLD, 5, 0 },
		{ "serial, full, early", IN(SER, 1, DUE, 1, 0, 7, 0, 1),
		  AX_ACT_HOLD, 7, 0 },
		/* room, but earlier runs held: logical order first */
		{ "serial, room, held", IN(SER, 2, DUE, 1, 1, 3, 0, 0),
		  AX_ACT_HOLD, 3, 0 },
		{ "parallel, idle, held", IN(PAR, 2, DUE, 0, 2, 0, 0, 0),
		  AX_ACT_HOLD, 0, 0 },
		/* discard */
		{ "discard, full", IN(DIS, 1, DUE, 1, 0, 7, 0, 0),
		  AX_ACT_DISCARD, 0, 0 },
		{ "discard, full, early", IN(DIS, 1, DUE, 1, 0, 7, 0, 1),
		  AX_ACT_DEFER, 7, 0 },
		{ "discard, room, held", IN(DIS, 2, DUE, 1, 1, 7, 0, 0),
		  AX_ACT_DISCARD, 0, 0 },
		{ "discard, idle, held, early", IN(DIS, 1, DUE, 0, 1, 0, 0, 1),
		  AX_ACT_DEFER, 0, 0 },
		/* replace: the oldest go until one slot is free */
		{ "replace, full", IN(REP, 1, DUE, 1, 0, 7, 0, 0),
		  AX_ACT_REPLACE, 0, 1 },
		{ "replace, over (max lowered)",
		  IN(REP, 2, DUE, 4, 0, 7, 0, 0), AX_ACT_REPLACE, 0, 3 },
		{ "replace, room, held", IN(REP, 2, DUE, 1, 1, 7, 0, 0),
		  AX_ACT_REPLACE, 0, 0 },
		{ "replace, full, early", IN(REP, 1, DUE, 1, 0, 7, 0, 1),
		  AX_ACT_DEFER, 7, 0 },
		/* max_active_runs <= 0 counts as 1 */
		{ "max 0, idle", IN(DIS, 0, DUE, 0, 0, 0, 0, 0), AX_ACT_START,
		  0, 0 },
		{ "max 0, one active", IN(DIS, 0, DUE, 1, 0, 2, 0, 0),
		  AX_ACT_DISCARD, 0, 0 },
		{ "max -3, replace", IN(REP, -3, DUE, 1, 0, 2, 0, 0),
		  AX_ACT_REPLACE, 0, 1 },
		{ "max -3, serial", IN(SER, -3, DUE, 1, 0, 2, 0, 0),
		  AX_ACT_HOLD, 2, 0 },
		/* serial backfill: one at a time, whatever the policy */
		{ "backfill serial, full DAG", IN(DIS, 1, BFS, 5, 2, 1, 0, 0),
		  AX_ACT_START, 0, 0 },
		{ "backfill serial, one active",
		  IN(SER, 4, BFS, 1, 0, 9, 9, 0), AX_ACT_QUEUE_BACKFILL, 9,
		  0 },
		{ "backfill serial, discard", IN(DIS, 1, BFS, 2, 0, 3, 9, 1),
		  AX_ACT_QUEUE_BACKFILL, 9, 0 },
		{ "backfill serial, replace", IN(REP, 1, BFS, 2, 0, 3, 9, 0),
		  AX_ACT_QUEUE_BACKFILL, 9, 0 },
		/* parallel backfill: up to max, held runs not waited for,
		 * never discarded, deferred nor replacing */
		{ "backfill parallel, room, held",
		  IN(SER, 2, BFP, 1, 3, 4, 0, 0), AX_ACT_START, 0, 0 },
		{ "backfill parallel, full", IN(PAR, 2, BFP, 2, 0, 4, 0, 0),
		  AX_ACT_HOLD, 4, 0 },
		{ "backfill parallel, discard, early",
		  IN(DIS, 2, BFP, 2, 0, 4, 0, 1), AX_ACT_HOLD, 4, 0 },
		{ "backfill parallel, replace", IN(REP, 1, BFP, 1, 0, 4, 0, 0),
		  AX_ACT_HOLD, 4, 0 },
		{ "backfill parallel, max 0", IN(SER, 0, BFP, 1, 0, 4, 0, 0),
		  AX_ACT_HOLD, 4, 0 },
	};
	return cr_make_param_array(struct ocase, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct ocase *c, overlap, decide)
{
	ax_overlap_out o = ax_overlap_decide(&c->in);

	cr_assert_eq(o.act, c->act, "%s: %s, want %s", c->what,
	             ax_overlap_act_name(o.act), ax_overlap_act_name(c->act));
	cr_assert_eq(o.behind, c->behind, "%s: behind %lld, want %lld",
	             c->what, (long long) o.behind, (long long) c->behind);
	cr_assert_eq(o.nsupersede, c->nsupersede,
	             "%s: supersede %zu, want %zu", c->what, o.nsupersede,
	             c->nsupersede);
}

/* The input is only read: the same input gives the same answer. */
Test(overlap, is_pure)
{
	const ax_overlap_in in   = IN(REP, 2, DUE, 3, 1, 11, 0, 0);
	ax_overlap_in       copy = in;
	ax_overlap_out      a    = ax_overlap_decide(&copy);
	ax_overlap_out      b    = ax_overlap_decide(&copy);

	cr_assert_eq(memcmp(&copy, &in, sizeof(in)), 0);
	cr_assert_eq(a.act, b.act);
	cr_assert_eq(a.nsupersede, b.nsupersede);
	cr_assert_eq(a.nsupersede, 2);
}

Test(overlap, act_names_are_stable)
{
	cr_assert_str_eq(ax_overlap_act_name(AX_ACT_START), "start");
	cr_assert_str_eq(ax_overlap_act_name(AX_ACT_HOLD), "hold");
	cr_assert_str_eq(ax_overlap_act_name(AX_ACT_QUEUE_BACKFILL),
	                 "queue_backfill");
	cr_assert_str_eq(ax_overlap_act_name(AX_ACT_DEFER), "defer");
	cr_assert_str_eq(ax_overlap_act_name(AX_ACT_DISCARD), "discard");
	cr_assert_str_eq(ax_overlap_act_name(AX_ACT_REPLACE), "replace");
	cr_assert_str_eq(ax_overlap_act_name((ax_overlap_act) 99), "?");
	cr_assert_str_eq(ax_overlap_act_name((ax_overlap_act) -1), "?");
}
