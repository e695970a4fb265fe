/*
 * test_deadline.c - a declared deadline -> the UTC instant of one data
 * interval (engine/deadline.h), table driven: both forms, days across
 * months and years, zones east and west of UTC, and the DST rules (a
 * deadline in a spring-forward gap is the first instant after the gap,
 * one in a repeated hour its first occurrence, as cron's fixed jobs).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "clock.h"
#include "deadline.h"
#include "tz.h"

/* Parameters are copied into the test's own process: no pointers. */
struct dcase {
	char    what[48];
	char    zone[32];
	char    start[32], end[32]; /* ISO 8601 with offsets */
	int     kind;               /* ax_deadline_kind */
	char    at[12];             /* AT */
	int     day;                /* AT */
	int64_t after_s;            /* AFTER */
	char    want[32];           /* ISO 8601 UTC */
};

ParameterizedTestParameters(deadline, instant)
{
	static struct dcase cases[] = {
		{ "2h after a daily interval", "UTC", "2026-12-01T00:00Z",
		  "2026-12-02T00:00Z", AX_DEADLINE_AFTER, "", 0, 7200,
		  "2026-12-02T02:00Z" },
		{ "after is from the end, not the start", "Asia/Shanghai",
		  "2026-12-01T00:00+08:00", "2026-12-01T01:00+08:00",
		  AX_DEADLINE_AFTER, "", 0, 1800, "2026-11-30T17:30Z" },
		{ "08:00 Shanghai the next day", "Asia/Shanghai",
		  "2026-12-01T00:00+08:00", "2026-12-02T00:00+08:00",
		  AX_DEADLINE_AT, "08:00", 1, 0, "2026-12-02T00:00Z" },
		{ "08:00 Shanghai the same day", "Asia/Shanghai",
		  "2026-12-01T00:00+08:00", "2026-12-02T00:00+08:00",
		  AX_DEADLINE_AT, "08:00", 0, 0, "2026-12-01T00:00Z" },
		{ "the start's local date, not its UTC date", "Asia/Shanghai",
		  "2026-12-01T23:00+08:00", "2026-12-02T00:00+08:00",
		  AX_DEADLINE_AT, "08:00", 1, 0, "2026-12-02T00:00Z" },
		{ "across a year", "UTC", "2026-12-31T00:00Z",
		  "2027-01-01T00:00Z", AX_DEADLINE_AT, "06:00", 1, 0,
		  "2027-01-01T06:00Z" },
		{ "a week later, with seconds", "UTC", "2026-02-25T00:00Z",
		  "2026-02-26T00:00Z", AX_DEADLINE_AT, "23:59:59", 7, 0,
		  "2026-03-04T23:59:59Z" },
		{ "west of UTC", "America/New_York", "2026-12-01T00:00-05:00",
		  "2026-12-02T00:00-05:00", AX_DEADLINE_AT, "09:30", 1, 0,
		  "2026-12-02T14:30Z" },
		/* DST: Europe/Berlin springs 02:00 -> 03:00 on 2026-03-29
		 * and falls 03:00 -> 02:00 on 2026-10-25 */
		{ "Berlin gap: first instant after it", "Europe/Berlin",
		  "2026-03-28T00:00+01:00", "2026-03-29T00:00+01:00",
		  AX_DEADLINE_AT, "02:30", 1, 0, "2026-03-29T01:00Z" },
		{ "Berlin repeat: the first occurrence", "Europe/Berlin",
		  "2026-10-24T00:00+02:00", "2026-10-25T00:00+02:00",
		  AX_DEADLINE_AT, "02:30", 1, 0, "2026-10-25T00:30Z" },
		{ "Berlin after the change: the new offset", "Europe/Berlin",
		  "2026-03-28T00:00+01:00", "2026-03-29T00:00+01:00",
		  AX_DEADLINE_AT, "08:00", 1, 0, "2026-03-29T06:00Z" },
		/* America/New_York: 2026-03-08 02:00 -> 03:00, 2026-11-01
		 * 02:00 -> 01:00 */
		{ "New York gap", "America/New_York", "2026-03-07T00:00-05:00",
		  "2026-03-08T00:00-05:00", AX_DEADLINE_AT, "02:15", 1, 0,
		  "2026-03-08T07:00Z" },
		{ "New York repeat", "America/New_York",
		  "2026-10-31T00:00-04:00", "2026-11-01T00:00-04:00",
		  AX_DEADLINE_AT, "01:30", 1, 0, "2026-11-01T05:30Z" },
		{ "after is elapsed time across a repeat", "America/New_York",
		  "2026-10-31T00:00-04:00", "2026-11-01T00:00-04:00",
		  AX_DEADLINE_AFTER, "", 0, 3 * 3600, "2026-11-01T07:00Z" },
	};
	return cr_make_param_array(struct dcase, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct dcase *c, deadline, instant)
{
	ax_tz           *tz = NULL;
	ax_deadline_spec s  = { .kind = (ax_deadline_kind) c->kind };
	int64_t          start, end, want, got = 0;

	cr_assert_eq(ax_tz_load(c->zone, &tz), AX_OK, "%s: zone %s: %s",
	             c->what, c->zone, ax_err_detail());
	cr_assert_eq(ax_tz_parse_iso8601(c->start, NULL, &start), AX_OK);
	cr_assert_eq(ax_tz_parse_iso8601(c->end, NULL, &end), AX_OK);
	cr_assert_eq(ax_tz_parse_iso8601(c->want, NULL, &want), AX_OK);
	if (s.kind == AX_DEADLINE_AT) {
		cr_assert_eq(ax_deadline_parse_at(c->at, &s.at_sec), AX_OK);
		s.day = c->day;
	} else {
		s.after_us = c->after_s * AX_USEC_PER_SEC;
	}
	cr_assert_eq(ax_deadline_instant(&s, start, end, tz, &got), AX_OK);
	char g[40], w[40];
	cr_expect_eq(got, want, "%s: got %s, want %s", c->what,
	             ax_clock_fmt_utc(got, g, sizeof(g)),
	             ax_clock_fmt_utc(want, w, sizeof(w)));
	ax_tz_free(tz);
}

Test(deadline, none_has_no_instant)
{
	ax_deadline_spec s = { 0 };
	int64_t          out;

	cr_assert_eq(ax_deadline_instant(&s, 0, 0, NULL, &out), AX_EINVAL);
}

struct atcase {
	char text[16];
	int  ok;
	int  sec;
};

ParameterizedTestParameters(deadline, parse_at)
{
	static struct atcase cases[] = {
		{ "08:00", 1, 8 * 3600 },
		{ "00:00", 1, 0 },
		{ "23:59:59", 1, 86399 },
		{ "8:00", 0, 0 },
		{ "24:00", 0, 0 },
		{ "08:60", 0, 0 },
		{ "08:00:60", 0, 0 },
		{ "08-00", 0, 0 },
		{ "", 0, 0 },
		{ "08:00pm", 0, 0 },
	};
	return cr_make_param_array(struct atcase, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct atcase *c, deadline, parse_at)
{
	int32_t sec = -1;
	ax_err  rv  = ax_deadline_parse_at(c->text, &sec);

	if (c->ok) {
		cr_assert_eq(rv, AX_OK, "'%s': %s", c->text, ax_err_detail());
		cr_expect_eq(sec, c->sec, "'%s'", c->text);
	} else {
		cr_assert_eq(rv, AX_EPARSE, "'%s' accepted", c->text);
		cr_expect(strstr(ax_err_detail(), "HH:MM") != NULL ||
		              strstr(ax_err_detail(), "00-23") != NULL,
		          "'%s': %s", c->text, ax_err_detail());
	}
}

Test(deadline, text)
{
	char             b[AX_DEADLINE_TEXT_LEN];
	ax_deadline_spec at = { .kind   = AX_DEADLINE_AT,
		                .at_sec = 8 * 3600,
		                .day    = 1 };
	ax_deadline_spec af = { .kind     = AX_DEADLINE_AFTER,
		                .after_us = 2LL * 3600 * AX_USEC_PER_SEC };

	cr_expect_str_eq(ax_deadline_text(&at, "Asia/Shanghai", b, sizeof(b)),
	                 "08:00 day +1 Asia/Shanghai");
	cr_expect_str_eq(ax_deadline_text(&af, NULL, b, sizeof(b)),
	                 "2h after the interval");
}
