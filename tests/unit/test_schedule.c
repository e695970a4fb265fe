#include <criterion/criterion.h>
#include <string.h>

#include "schedule.h"

static int64_t
iso(const char *s)
{
	int64_t us = 0;
	cr_assert_eq(ax_tz_parse_iso8601(s, NULL, &us), AX_OK, "%s", s);
	return us;
}

static ax_schedule *
mk(ax_sched_spec spec)
{
	ax_schedule *s  = NULL;
	ax_err       rv = ax_schedule_new(&spec, &s, NULL);
	cr_assert_eq(rv, AX_OK, "%s", ax_err_detail());
	return s;
}

static ax_sched_spec
cron_spec(const char *expr, const char *start, const char *end, int catchup)
{
	return (ax_sched_spec) {
		.kind     = AX_SCHED_CRON,
		.cron     = expr,
		.start_us = start ? iso(start) : AX_SCHED_NO_START,
		.end_us   = end ? iso(end) : AX_SCHED_NO_END,
		.catchup  = catchup,
	};
}

static void
expect_period(const ax_period *p, const char *start, const char *end)
{
	cr_expect_eq(p->start_us, iso(start), "start %lld != %s",
	             (long long) p->start_us, start);
	cr_expect_eq(p->end_us, iso(end), "end %lld != %s",
	             (long long) p->end_us, end);
	cr_expect_eq(p->logical_us, p->start_us, "logical date = start");
}

Test(schedule, cron_periods_are_data_intervals)
{
	ax_schedule *s =
	    mk(cron_spec("0 0 * * *", "2026-01-01T00:00:00Z", NULL, 1));
	ax_period p[8];
	size_t    n;
	int       more;

	cr_assert_eq(ax_schedule_periods(s, AX_SCHED_NO_START,
	                                 iso("2026-01-04T00:00:00Z"), p, 8, &n,
	                                 &more),
	             AX_OK);
	cr_assert_eq(n, 3);
	cr_assert_eq(more, 0);
	expect_period(&p[0], "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z");
	expect_period(&p[1], "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z");
	expect_period(&p[2], "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z");

	/* the range is (from, to]: a period ending at `from` is excluded */
	cr_assert_eq(ax_schedule_periods(s, iso("2026-01-02T00:00:00Z"),
	                                 iso("2026-01-03T12:00:00Z"), p, 8, &n,
	                                 NULL),
	             AX_OK);
	cr_assert_eq(n, 1);
	expect_period(&p[0], "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z");

	/* bounded by max, with `more` */
	cr_assert_eq(ax_schedule_periods(s, AX_SCHED_NO_START,
	                                 iso("2026-02-01T00:00:00Z"), p, 2, &n,
	                                 &more),
	             AX_OK);
	cr_assert_eq(n, 2);
	cr_assert_eq(more, 1);

	cr_assert_eq(
	    ax_schedule_next_period(s, iso("2026-01-01T00:00:00Z"), &p[0]),
	    AX_OK);
	expect_period(&p[0], "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z");
	cr_assert_eq(
	    ax_schedule_latest_period(s, iso("2026-01-05T12:00:00Z"), &p[0]),
	    AX_OK);
	expect_period(&p[0], "2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z");
	cr_assert_eq(
	    ax_schedule_latest_period(s, iso("2026-01-01T23:00:00Z"), &p[0]),
	    AX_ENOENT, "no period has ended yet");
	ax_schedule_free(s);
}

Test(schedule, start_between_fires_and_end)
{
	ax_schedule *s = mk(cron_spec("0 0 * * *", "2026-01-01T10:00:00Z",
	                              "2026-01-03T00:00:00Z", 1));
	ax_period    p[8];
	size_t       n;
	int64_t      f;

	cr_assert_eq(ax_schedule_periods(s, AX_SCHED_NO_START,
	                                 iso("2027-01-01T00:00:00Z"), p, 8, &n,
	                                 NULL),
	             AX_OK);
	cr_assert_eq(n, 2,
	             "first period starts at the first fire >= start, "
	             "last one starts <= end");
	expect_period(&p[0], "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z");
	expect_period(&p[1], "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z");
	cr_assert_eq(ax_schedule_next_fire(s, iso("2026-01-04T00:00:00Z"), &f),
	             AX_ENOENT);
	cr_assert_eq(
	    ax_schedule_latest_period(s, iso("2026-06-01T00:00:00Z"), &p[0]),
	    AX_OK);
	expect_period(&p[0], "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z");
	cr_assert_eq(ax_schedule_prev_fire(s, iso("2026-01-04T00:00:00Z"), &f),
	             AX_OK);
	cr_assert_eq(f, iso("2026-01-03T00:00:00Z"));
	ax_schedule_free(s);
}

Test(schedule, cron_in_a_zone)
{
	ax_tz        *tz;
	ax_sched_spec spec = cron_spec("0 30 2 * * ?", NULL, NULL, 0);
	ax_period     p;
	cr_assert_eq(ax_tz_load("Asia/Shanghai", &tz), AX_OK);
	spec.tz        = tz;
	ax_schedule *s = mk(spec);
	cr_assert_eq(
	    ax_schedule_next_period(s, iso("2026-03-29T00:00:00Z"), &p),
	    AX_OK);
	expect_period(&p, "2026-03-29T02:30:00+08:00",
	              "2026-03-30T02:30:00+08:00");
	ax_schedule_free(s);
	ax_tz_free(tz);
}

Test(schedule, catchup_after_a_pause)
{
	ax_schedule *on =
	    mk(cron_spec("0 * * * *", "2026-01-01T00:00:00Z", NULL, 1));
	ax_schedule *off =
	    mk(cron_spec("0 * * * *", "2026-01-01T00:00:00Z", NULL, 0));
	ax_period p[16];
	size_t    n;
	int       more;
	int64_t   last = iso("2026-01-01T03:00:00Z");
	int64_t   now  = iso("2026-01-01T08:30:00Z");

	/* catchup: every missed hour, oldest first, bounded */
	cr_assert_eq(ax_schedule_due(on, last, now, p, 16, &n, &more), AX_OK);
	cr_assert_eq(n, 5);
	cr_assert_eq(more, 0);
	expect_period(&p[0], "2026-01-01T03:00:00Z", "2026-01-01T04:00:00Z");
	expect_period(&p[4], "2026-01-01T07:00:00Z", "2026-01-01T08:00:00Z");
	cr_assert_eq(ax_schedule_due(on, last, now, p, 3, &n, &more), AX_OK);
	cr_assert_eq(n, 3);
	cr_assert_eq(more, 1);

	/* no catchup: only the latest period */
	cr_assert_eq(ax_schedule_due(off, last, now, p, 16, &n, &more), AX_OK);
	cr_assert_eq(n, 1);
	cr_assert_eq(more, 0);
	expect_period(&p[0], "2026-01-01T07:00:00Z", "2026-01-01T08:00:00Z");
	/* ... and nothing when it was already created */
	cr_assert_eq(ax_schedule_due(off, iso("2026-01-01T08:00:00Z"), now, p,
	                             16, &n, NULL),
	             AX_OK);
	cr_assert_eq(n, 0);
	/* first start ever, no catchup: the latest only */
	cr_assert_eq(
	    ax_schedule_due(off, AX_SCHED_NO_START, now, p, 16, &n, NULL),
	    AX_OK);
	cr_assert_eq(n, 1);
	expect_period(&p[0], "2026-01-01T07:00:00Z", "2026-01-01T08:00:00Z");
	ax_schedule_free(on);
	ax_schedule_free(off);
}

Test(schedule, every_is_anchored_at_start)
{
	ax_sched_spec spec = {
		.kind     = AX_SCHED_EVERY,
		.every_us = 3600LL * 1000000,
		.start_us = iso("2026-01-01T00:30:00Z"),
		.end_us   = AX_SCHED_NO_END,
		.catchup  = 1,
	};
	ax_schedule *s = mk(spec);
	ax_period    p[4];
	size_t       n;

	cr_assert_eq(
	    ax_schedule_next_period(s, iso("2025-12-01T00:00:00Z"), &p[0]),
	    AX_OK);
	expect_period(&p[0], "2026-01-01T00:30:00Z", "2026-01-01T01:30:00Z");
	cr_assert_eq(
	    ax_schedule_next_period(s, iso("2026-01-01T01:30:00Z"), &p[0]),
	    AX_OK);
	expect_period(&p[0], "2026-01-01T01:30:00Z", "2026-01-01T02:30:00Z");
	cr_assert_eq(ax_schedule_periods(s, AX_SCHED_NO_START,
	                                 iso("2026-01-01T03:00:00Z"), p, 4, &n,
	                                 NULL),
	             AX_OK);
	cr_assert_eq(n, 2);
	cr_assert_eq(
	    ax_schedule_latest_period(s, iso("2026-01-01T01:29:59Z"), &p[0]),
	    AX_ENOENT);
	ax_schedule_free(s);

	/* without a start: anchored at the epoch, so 1h is on the hour */
	spec.start_us = AX_SCHED_NO_START;
	s             = mk(spec);
	cr_assert_eq(
	    ax_schedule_next_period(s, iso("2026-01-01T00:10:00Z"), &p[0]),
	    AX_OK);
	expect_period(&p[0], "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z");
	ax_schedule_free(s);
}

Test(schedule, at_runs_once)
{
	ax_sched_spec spec = {
		.kind     = AX_SCHED_AT,
		.at_us    = iso("2026-05-01T09:00:00Z"),
		.start_us = AX_SCHED_NO_START,
		.end_us   = AX_SCHED_NO_END,
	};
	ax_schedule *s = mk(spec);
	ax_period    p[2];
	size_t       n;
	int64_t      f;

	cr_assert_eq(ax_schedule_next_fire(s, iso("2026-01-01T00:00:00Z"), &f),
	             AX_OK);
	cr_assert_eq(f, iso("2026-05-01T09:00:00Z"));
	cr_assert_eq(ax_schedule_next_fire(s, f, &f), AX_ENOENT);
	cr_assert_eq(ax_schedule_due(s, AX_SCHED_NO_START,
	                             iso("2026-04-30T00:00:00Z"), p, 2, &n,
	                             NULL),
	             AX_OK);
	cr_assert_eq(n, 0, "not due before the instant");
	cr_assert_eq(ax_schedule_due(s, AX_SCHED_NO_START,
	                             iso("2026-06-01T00:00:00Z"), p, 2, &n,
	                             NULL),
	             AX_OK);
	cr_assert_eq(n, 1);
	expect_period(&p[0], "2026-05-01T09:00:00Z", "2026-05-01T09:00:00Z");
	cr_assert_eq(ax_schedule_due(s, p[0].end_us,
	                             iso("2026-07-01T00:00:00Z"), p, 2, &n,
	                             NULL),
	             AX_OK);
	cr_assert_eq(n, 0, "runs once");
	ax_schedule_free(s);
}

Test(schedule, none_never_fires)
{
	ax_sched_spec spec = { .kind     = AX_SCHED_NONE,
		               .start_us = AX_SCHED_NO_START,
		               .end_us   = AX_SCHED_NO_END };
	ax_schedule  *s    = mk(spec);
	ax_period     p[2];
	size_t        n;
	int64_t       f;
	cr_assert_eq(ax_schedule_next_fire(s, 0, &f), AX_ENOENT);
	cr_assert_eq(ax_schedule_due(s, AX_SCHED_NO_START, INT64_MAX - 1, p, 2,
	                             &n, NULL),
	             AX_OK);
	cr_assert_eq(n, 0);
	ax_schedule_free(s);
}

Test(schedule, bad_specs)
{
	ax_schedule  *s = NULL;
	ax_cron_err   e;
	ax_sched_spec every0 = { .kind     = AX_SCHED_EVERY,
		                 .every_us = 0,
		                 .start_us = AX_SCHED_NO_START,
		                 .end_us   = AX_SCHED_NO_END };
	cr_assert_eq(ax_schedule_new(&every0, &s, NULL), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "positive") != NULL);
	ax_sched_spec backwards = cron_spec(
	    "0 0 * * *", "2026-02-01T00:00:00Z", "2026-01-01T00:00:00Z", 0);
	cr_assert_eq(ax_schedule_new(&backwards, &s, NULL), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "end is before") != NULL);
	ax_sched_spec bad = cron_spec("0 0 32 * *", NULL, NULL, 0);
	cr_assert_eq(ax_schedule_new(&bad, &s, &e), AX_EPARSE);
	cr_assert_eq(e.field, 3);
	cr_assert_null(s);
}
