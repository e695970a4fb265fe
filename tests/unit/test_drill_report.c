/*
 * test_drill_report.c - the marks, tally and report of `axctl drill`
 * (cli/drill_report.h): what counts as once, lost, twice, stuck and
 * disagreeing, the recovery time, and the JSON report.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drill_report.h"

/* the text itself, not a pointer: criterion runs each case in a
 * process of its own */
typedef struct bad_line {
	char line[64];
} bad_line;

ParameterizedTestParameters(drill_report, refuses_what_is_not_a_mark)
{
	static bad_line v[] = {
		{ "" },
		{ "start" },
		{ "begin k/t/1/0 r 1 100" },
		{ "start k/t/1/0 r 0 100" },    /* attempt 0 */
		{ "start k/t/1/0 r 1 -5" },     /* time */
		{ "start nokey r 1 100" },      /* key without '/' */
		{ "end k/t/1/0 r 1 100 junk" }, /* trailing junk */
		{ "end k/t/1/0 r one 100" },    /* attempt not a number */
		{ "start k/t/1/0 r 1" },        /* torn line */
	};
	return cr_make_param_array(bad_line, v, sizeof(v) / sizeof(v[0]));
}

ParameterizedTest(bad_line *b, drill_report, refuses_what_is_not_a_mark)
{
	ax_drill_mark m;
	cr_assert_eq(ax_drill_mark_parse(b->line, &m), -1, "'%s'", b->line);
}

Test(drill_report, parses_a_start_and_an_end)
{
	ax_drill_mark m;

	cr_assert_eq(ax_drill_mark_parse("start drill.tick/t/1796120000/0 "
	                                 "01a2-ff 2 1796120000123456\n",
	                                 &m),
	             0);
	cr_assert_eq(m.end, 0);
	cr_assert_str_eq(m.key, "drill.tick/t/1796120000/0");
	cr_assert_str_eq(m.run_id, "01a2-ff");
	cr_assert_eq(m.attempt, 2);
	cr_assert_eq(m.utc_us, 1796120000123456LL);
	cr_assert_eq(ax_drill_mark_parse("end a/b/1/0 r 1 7", &m), 0);
	cr_assert_eq(m.end, 1);
}

static ax_drill_mark
mk(int end, const char *key, const char *rid, int64_t us)
{
	ax_drill_mark m;
	memset(&m, 0, sizeof(m));
	m.end = end;
	snprintf(m.key, sizeof(m.key), "%s", key);
	snprintf(m.run_id, sizeof(m.run_id), "%s", rid);
	m.attempt = 1;
	m.utc_us  = us;
	return m;
}

static ax_drill_row
row(const char *key, const char *state)
{
	ax_drill_row r;
	snprintf(r.key, sizeof(r.key), "%s", key);
	snprintf(r.state, sizeof(r.state), "%s", state);
	return r;
}

Test(drill_report, counts_each_kind_once_per_key)
{
	char         *exp[]   = { "d/once/1/0",  "d/lost/1/0",  "d/twice/1/0",
		                  "d/rerun/1/0", "d/stuck/1/0", "d/killed/1/0",
		                  "d/liar/1/0",  "d/redo/1/0" };
	ax_drill_mark marks[] = {
		mk(0, "d/once/1/0", "r1", 10),
		mk(1, "d/once/1/0", "r1", 20),
		/* two attempts, both completed: an orphan ran on */
		mk(0, "d/twice/1/0", "r2", 10),
		mk(0, "d/twice/1/0", "r3", 11),
		mk(1, "d/twice/1/0", "r2", 20),
		mk(1, "d/twice/1/0", "r3", 21),
		/* one run_id started twice, one end: still twice */
		mk(0, "d/rerun/1/0", "r4", 10),
		mk(0, "d/rerun/1/0", "r4", 15),
		mk(1, "d/rerun/1/0", "r4", 20),
		/* killed attempt, then a retry: once */
		mk(0, "d/killed/1/0", "r5", 10),
		mk(0, "d/killed/1/0", "r6", 30),
		mk(1, "d/killed/1/0", "r6", 40),
		/* completed, but the database says FAILED */
		mk(0, "d/liar/1/0", "r7", 10),
		mk(1, "d/liar/1/0", "r7", 20),
		/* completed, report lost with its worker, run again after:
		 * once per attempt */
		mk(0, "d/redo/1/0", "r9", 10),
		mk(1, "d/redo/1/0", "r9", 20),
		mk(0, "d/redo/1/0", "r10", 30),
		mk(1, "d/redo/1/0", "r10", 40),
		/* nobody asked for this one */
		mk(0, "d/extra/1/0", "r8", 10),
	};
	ax_drill_row rows[] = {
		row("d/once/1/0", "SUCCESS"),   row("d/twice/1/0", "SUCCESS"),
		row("d/rerun/1/0", "SUCCESS"),  row("d/stuck/1/0", "RUNNING"),
		row("d/killed/1/0", "SUCCESS"), row("d/liar/1/0", "FAILED"),
		row("d/lost/1/0", "SUCCESS"), /* stored success, never ran */
	};
	ax_drill_tally t;

	ax_drill_tally_count(&t, exp, 8, marks,
	                     sizeof(marks) / sizeof(marks[0]), rows,
	                     sizeof(rows) / sizeof(rows[0]), 1);
	cr_assert_eq(t.expected, 8);
	cr_assert_eq(t.redone, 1, "a redo after the end is not twice");
	cr_assert_eq(t.once, 3, "once, killed, liar: %ld", t.once);
	cr_assert_eq(t.bad[AX_DRILL_LOST], 2, "lost and stuck never ended");
	cr_assert_eq(t.bad[AX_DRILL_TWICE], 2);
	cr_assert_eq(t.bad[AX_DRILL_STUCK], 2, "an instance and a run");
	cr_assert_eq(t.stuck_runs, 1);
	cr_assert_eq(t.bad[AX_DRILL_DISAGREE], 2, "liar and lost");
	cr_assert_eq(t.unexpected, 1);
	cr_assert_eq(t.starts, 11);
	cr_assert_str_eq(t.sample[AX_DRILL_TWICE][0], "d/twice/1/0");
	cr_assert_str_eq(t.sample[AX_DRILL_TWICE][1], "d/rerun/1/0");
	cr_assert_not(ax_drill_ok(&t));
}

Test(drill_report, a_clean_run_is_ok)
{
	char          *exp[]   = { "d/a/1/0" };
	ax_drill_mark  marks[] = { mk(0, "d/a/1/0", "r", 1),
		                   mk(1, "d/a/1/0", "r", 2) };
	ax_drill_row   rows[]  = { row("d/a/1/0", "SUCCESS") };
	ax_drill_tally t;

	ax_drill_tally_count(&t, exp, 1, marks, 2, rows, 1, 0);
	cr_assert(ax_drill_ok(&t));
	cr_assert_eq(t.once, 1);
	cr_assert_lt(t.recovery_s, 0, "not measured yet");
}

Test(drill_report, recovery_is_the_first_start_dispatched_after_the_fault)
{
	ax_drill_mark marks[] = {
		mk(0, "d/a/1/0", "old", 1500000), /* dispatched before */
		mk(0, "d/b/1/0", "new2", 3500000),
		mk(0, "d/c/1/0", "new1", 2250000),
		mk(1, "d/c/1/0", "new1", 2000000), /* an end never counts */
		mk(0, "d/d/1/0", "new3", 900000),  /* before the fault */
	};
	char *after[] = { "new1", "new2", "new3" };

	cr_assert_float_eq(ax_drill_recovery(marks, 5, 1000000, after, 3),
	                   1.25, 1e-9);
	cr_assert_eq(ax_drill_recovery(marks, 5, 1000000, after, 0), -1);
}

Test(drill_report, percentile_and_sums)
{
	double         v[] = { 3, 1, 2, 10 };
	ax_drill_tally a, b;

	cr_assert_float_eq(ax_drill_percentile(v, 4, 50), 2, 1e-9);
	cr_assert_float_eq(ax_drill_percentile(v, 4, 100), 10, 1e-9);
	cr_assert_eq(ax_drill_percentile(v, 0, 50), -1);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.recovery_s         = 1;
	b.recovery_s         = 2;
	b.bad[AX_DRILL_LOST] = 1;
	b.expected           = 5;
	snprintf(b.sample[AX_DRILL_LOST][0], AX_DRILL_KEY_MAX, "x/y/1/0");
	ax_drill_tally_add(&a, &b);
	cr_assert_eq(a.expected, 5);
	cr_assert_eq(a.bad[AX_DRILL_LOST], 1);
	cr_assert_str_eq(a.sample[AX_DRILL_LOST][0], "x/y/1/0");
	cr_assert_float_eq(a.recovery_s, 2, 1e-9);
}

Test(drill_report, json_has_every_count_and_the_repeat_summary)
{
	char          *buf = NULL;
	size_t         len = 0;
	FILE          *f   = open_memstream(&buf, &len);
	ax_drill_tally t;
	double         rec[] = { 0.5, -1, 2.5, 1.5 };
	json_error_t   je;
	json_t        *o;

	memset(&t, 0, sizeof(t));
	t.expected            = 3;
	t.once                = 2;
	t.bad[AX_DRILL_TWICE] = 1;
	t.recovery_s          = 2.5;
	t.restarts            = 1;
	snprintf(t.sample[AX_DRILL_TWICE][0], AX_DRILL_KEY_MAX, "d/a/1/0");
	ax_drill_json(f, "kill-worker", &t, rec, 4);
	fclose(f);
	o = json_loads(buf, 0, &je);
	cr_assert_not_null(o, "%s: %s", je.text, buf);
	cr_assert_str_eq(json_string_value(json_object_get(o, "drill")),
	                 "kill-worker");
	cr_assert(json_is_false(json_object_get(o, "ok")));
	cr_assert_eq(json_integer_value(json_object_get(o, "twice")), 1);
	cr_assert_eq(json_integer_value(json_object_get(o, "lost")), 0);
	cr_assert_eq(json_integer_value(json_object_get(o, "restarts")), 1);
	cr_assert_str_eq(json_string_value(json_array_get(
	                     json_object_get(o, "twice_keys"), 0)),
	                 "d/a/1/0");
	cr_assert_eq(json_integer_value(json_object_get(o, "repetitions")), 4);
	cr_assert_float_eq(
	    json_real_value(json_object_get(o, "recovery_median_s")), 1.5,
	    1e-9);
	cr_assert_float_eq(
	    json_real_value(json_object_get(o, "recovery_max_s")), 2.5, 1e-9);
	json_decref(o);
	free(buf);
}

Test(drill_report, text_report_gives_median_and_max)
{
	char          *buf = NULL;
	size_t         len = 0;
	FILE          *f   = open_memstream(&buf, &len);
	ax_drill_tally t;
	double         rec[] = { 0.27, 0.18, 0.22 };

	memset(&t, 0, sizeof(t));
	ax_drill_print(f, "stop-worker", &t, rec, 3);
	fclose(f);
	cr_assert(strstr(buf, "recovery median:        0.220 s") != NULL, "%s",
	          buf);
	cr_assert(strstr(buf, "recovery max:           0.270 s") != NULL, "%s",
	          buf);
	cr_assert(strstr(buf, "drill stop-worker: ok") != NULL, "%s", buf);
	free(buf);
}
