#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"

/*
 * next(): expression, zone, from, expected fire times in order as the
 * zone's ISO 8601 local time ("none" = AX_ENOENT at that point). The
 * daylight-saving rows follow Vixie cron: fixed-time jobs run once at the
 * first instant after a gap and once (first occurrence) in a repeat;
 * jobs with * or a step in minute/hour follow the wall clock.
 */
struct next_case {
	char expr[48];
	char zone[32];
	char from[32];
	char want[5][32];
};

ParameterizedTestParameters(cron, next)
{
	static struct next_case cases[] = {
		{ "30 1 * * *",
		  "Europe/London",
		  "2026-03-28T12:00:00Z",
		  { "2026-03-29T02:00:00+01:00",
		    "2026-03-30T01:30:00+01:00" } },
		{ "0 1 * * *",
		  "Europe/London",
		  "2026-03-28T12:00:00Z",
		  { "2026-03-29T02:00:00+01:00",
		    "2026-03-30T01:00:00+01:00" } },
		{ "*/30 * * * *",
		  "Europe/London",
		  "2026-03-29T00:00:00Z",
		  { "2026-03-29T00:30:00+00:00", "2026-03-29T02:00:00+01:00",
		    "2026-03-29T02:30:00+01:00" } },
		{ "30 1 * * *",
		  "Europe/London",
		  "2026-10-24T12:00:00Z",
		  { "2026-10-25T01:30:00+01:00",
		    "2026-10-26T01:30:00+00:00" } },
		{ "30 * * * *",
		  "Europe/London",
		  "2026-10-24T23:45:00Z",
		  { "2026-10-25T01:30:00+01:00", "2026-10-25T01:30:00+00:00",
		    "2026-10-25T02:30:00+00:00" } },
		{ "30 2 * * *",
		  "America/New_York",
		  "2026-03-07T12:00:00-05:00",
		  { "2026-03-08T03:00:00-04:00",
		    "2026-03-09T02:30:00-04:00" } },
		{ "0 2 * * *",
		  "America/New_York",
		  "2026-03-07T12:00:00-05:00",
		  { "2026-03-08T03:00:00-04:00",
		    "2026-03-09T02:00:00-04:00" } },
		{ "0 * * * *",
		  "America/New_York",
		  "2026-03-08T00:30:00-05:00",
		  { "2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00",
		    "2026-03-08T04:00:00-04:00" } },
		{ "0 1 * * *",
		  "America/New_York",
		  "2026-10-31T12:00:00-04:00",
		  { "2026-11-01T01:00:00-04:00",
		    "2026-11-02T01:00:00-05:00" } },
		{ "*/30 1 * * *",
		  "America/New_York",
		  "2026-10-31T12:00:00-04:00",
		  { "2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00",
		    "2026-11-01T01:00:00-05:00",
		    "2026-11-01T01:30:00-05:00" } },
		{ "15 1 * * *",
		  "America/New_York",
		  "2026-11-01T01:20:00-04:00",
		  { "2026-11-02T01:15:00-05:00" } },
		{ "30 2 * * *",
		  "Australia/Sydney",
		  "2026-04-04T12:00:00+11:00",
		  { "2026-04-05T02:30:00+11:00",
		    "2026-04-06T02:30:00+10:00" } },
		{ "0 * * * *",
		  "Australia/Sydney",
		  "2026-04-05T01:30:00+11:00",
		  { "2026-04-05T02:00:00+11:00", "2026-04-05T02:00:00+10:00",
		    "2026-04-05T03:00:00+10:00" } },
		{ "30 2 * * *",
		  "Australia/Sydney",
		  "2026-10-03T12:00:00+10:00",
		  { "2026-10-04T03:00:00+11:00",
		    "2026-10-05T02:30:00+11:00" } },
		{ "*/20 2-3 * * *",
		  "Australia/Sydney",
		  "2026-10-04T01:00:00+10:00",
		  { "2026-10-04T03:00:00+11:00", "2026-10-04T03:20:00+11:00",
		    "2026-10-04T03:40:00+11:00",
		    "2026-10-05T02:00:00+11:00" } },
		{ "0 30 2 * * ?",
		  "Asia/Shanghai",
		  "2026-03-29T00:00:00Z",
		  { "2026-03-30T02:30:00+08:00",
		    "2026-03-31T02:30:00+08:00" } },
		{ "0 0 29 2 *",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2028-02-29T00:00:00+00:00",
		    "2032-02-29T00:00:00+00:00" } },
		{ "0 0 29 2 *",
		  "UTC",
		  "2096-03-01T00:00:00Z",
		  { "2104-02-29T00:00:00+00:00" } },
		{ "0 0 0 L * ?",
		  "UTC",
		  "2026-01-15T00:00:00Z",
		  { "2026-01-31T00:00:00+00:00", "2026-02-28T00:00:00+00:00",
		    "2026-03-31T00:00:00+00:00",
		    "2026-04-30T00:00:00+00:00" } },
		{ "0 0 0 L 2 ?",
		  "UTC",
		  "2027-06-01T00:00:00Z",
		  { "2028-02-29T00:00:00+00:00",
		    "2029-02-28T00:00:00+00:00" } },
		{ "0 0 0 15W * ?",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2026-01-15T00:00:00+00:00", "2026-02-16T00:00:00+00:00",
		    "2026-03-16T00:00:00+00:00",
		    "2026-04-15T00:00:00+00:00" } },
		{ "0 0 0 1W * ?",
		  "UTC",
		  "2026-07-01T00:00:00Z",
		  { "2026-08-03T00:00:00+00:00",
		    "2026-09-01T00:00:00+00:00" } },
		{ "0 0 0 LW * ?",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2026-01-30T00:00:00+00:00", "2026-02-27T00:00:00+00:00",
		    "2026-03-31T00:00:00+00:00",
		    "2026-04-30T00:00:00+00:00" } },
		{ "0 0 0 ? * 6#3",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2026-01-16T00:00:00+00:00", "2026-02-20T00:00:00+00:00",
		    "2026-03-20T00:00:00+00:00" } },
		{ "0 0 * * 5#3",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2026-01-16T00:00:00+00:00",
		    "2026-02-20T00:00:00+00:00" } },
		{ "0 0 0 ? * FRI#5",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2026-01-30T00:00:00+00:00",
		    "2026-05-29T00:00:00+00:00" } },
		{ "0 0 0 ? * 6L",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2026-01-30T00:00:00+00:00", "2026-02-27T00:00:00+00:00",
		    "2026-03-27T00:00:00+00:00" } },
		{ "0 0 0 L-3 * ?",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2026-01-28T00:00:00+00:00", "2026-02-25T00:00:00+00:00",
		    "2026-03-28T00:00:00+00:00" } },
		{ "0 0 13 * 5",
		  "UTC",
		  "2026-02-01T00:00:00Z",
		  { "2026-02-06T00:00:00+00:00", "2026-02-13T00:00:00+00:00",
		    "2026-02-20T00:00:00+00:00",
		    "2026-02-27T00:00:00+00:00" } },
		{ "0 0 */10 * 1",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2026-05-11T00:00:00+00:00",
		    "2026-06-01T00:00:00+00:00" } },
		{ "0 0 * * FRI-MON",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00+00:00",
		    "2026-01-04T00:00:00+00:00",
		    "2026-01-05T00:00:00+00:00" } },
		{ "0 0 22-1 * * ?",
		  "UTC",
		  "2026-01-01T12:00:00Z",
		  { "2026-01-01T22:00:00+00:00", "2026-01-01T23:00:00+00:00",
		    "2026-01-02T00:00:00+00:00",
		    "2026-01-02T01:00:00+00:00" } },
		{ "*/15 * * * * ?",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2026-01-01T00:00:15+00:00", "2026-01-01T00:00:30+00:00",
		    "2026-01-01T00:00:45+00:00",
		    "2026-01-01T00:01:00+00:00" } },
		{ "0 0 12 ? JAN,JUL MON-FRI 2027",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2027-01-01T12:00:00+00:00",
		    "2027-01-04T12:00:00+00:00" } },
		{ "0 0 0 1 1 ? 2199",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2199-01-01T00:00:00+00:00", "none" } },
		{ "0 0 0 1 1 ? 2020",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "none" } },
		{ "0 0 31 2 *", "UTC", "2026-01-01T00:00:00Z", { "none" } },
		{ "0 0 * * *", "UTC", "2199-12-31T00:00:00Z", { "none" } },
		{ "@yearly",
		  "UTC",
		  "2026-03-01T00:00:00Z",
		  { "2027-01-01T00:00:00+00:00",
		    "2028-01-01T00:00:00+00:00" } },
		{ "@annually",
		  "UTC",
		  "2026-03-01T00:00:00Z",
		  { "2027-01-01T00:00:00+00:00" } },
		{ "@monthly",
		  "UTC",
		  "2026-03-01T00:00:00Z",
		  { "2026-04-01T00:00:00+00:00",
		    "2026-05-01T00:00:00+00:00" } },
		{ "@weekly",
		  "UTC",
		  "2026-03-01T00:00:00Z",
		  { "2026-03-08T00:00:00+00:00",
		    "2026-03-15T00:00:00+00:00" } },
		{ "@daily",
		  "Europe/London",
		  "2026-03-01T00:00:00Z",
		  { "2026-03-02T00:00:00+00:00" } },
		{ "@midnight",
		  "UTC",
		  "2026-03-01T00:00:00Z",
		  { "2026-03-02T00:00:00+00:00" } },
		{ "@hourly",
		  "UTC",
		  "2026-03-01T00:00:00.5Z",
		  { "2026-03-01T01:00:00+00:00",
		    "2026-03-01T02:00:00+00:00" } },
		{ "0 0 * * 7",
		  "UTC",
		  "2026-03-01T00:00:00Z",
		  { "2026-03-08T00:00:00+00:00" } },
	};
	return cr_make_param_array(struct next_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct next_case *c, cron, next)
{
	ax_cron    *cr = NULL;
	ax_tz      *tz = NULL;
	ax_cron_err e;
	int64_t     t;
	char        buf[48];

	cr_assert_eq(ax_cron_parse(c->expr, &cr, &e), AX_OK, "'%s': %s",
	             c->expr, e.msg);
	cr_assert_eq(ax_tz_load(c->zone, &tz), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_tz_parse_iso8601(c->from, NULL, &t), AX_OK);
	for (int i = 0; i < 5 && c->want[i][0]; i++) {
		ax_err rv = ax_cron_next(cr, tz, t, &t);
		if (strcmp(c->want[i], "none") == 0) {
			cr_expect_eq(rv, AX_ENOENT, "'%s' #%d: expected none",
			             c->expr, i);
			cr_expect(strstr(ax_err_detail(), "no fire time") !=
			          NULL);
			break;
		}
		cr_assert_eq(rv, AX_OK, "'%s' #%d: %s", c->expr, i,
		             ax_err_detail());
		cr_expect_str_eq(ax_tz_format(tz, t, buf, sizeof(buf)),
		                 c->want[i], "'%s' in %s after %s, #%d",
		                 c->expr, c->zone, c->from, i);
		/* prev() walks the same sequence backwards */
		if (i > 0) {
			int64_t p;
			cr_assert_eq(ax_cron_prev(cr, tz, t, &p), AX_OK);
			cr_expect_str_eq(ax_tz_format(tz, p, buf, sizeof(buf)),
			                 c->want[i - 1], "prev of '%s' #%d",
			                 c->expr, i);
		}
	}
	ax_tz_free(tz);
	ax_cron_free(cr);
}

struct prev_case {
	char expr[48];
	char zone[32];
	char before[32];
	char want[4][32];
};

ParameterizedTestParameters(cron, prev)
{
	static struct prev_case cases[] = {
		{ "0 1 * * *",
		  "America/New_York",
		  "2026-11-02T00:00:00-05:00",
		  { "2026-11-01T01:00:00-04:00",
		    "2026-10-31T01:00:00-04:00" } },
		{ "30 2 * * *",
		  "America/New_York",
		  "2026-03-08T12:00:00-04:00",
		  { "2026-03-08T03:00:00-04:00",
		    "2026-03-07T02:30:00-05:00" } },
		{ "*/30 1 * * *",
		  "America/New_York",
		  "2026-11-01T03:00:00-05:00",
		  { "2026-11-01T01:30:00-05:00", "2026-11-01T01:00:00-05:00",
		    "2026-11-01T01:30:00-04:00",
		    "2026-11-01T01:00:00-04:00" } },
		{ "0 0 29 2 *",
		  "UTC",
		  "2026-01-01T00:00:00Z",
		  { "2024-02-29T00:00:00+00:00",
		    "2020-02-29T00:00:00+00:00" } },
		{ "0 0 1 1 *",
		  "UTC",
		  "1971-01-01T00:00:00Z",
		  { "1970-01-01T00:00:00+00:00", "none" } },
		{ "0 0 12 * * ?",
		  "UTC",
		  "2026-01-01T12:00:00.000001Z",
		  { "2026-01-01T12:00:00+00:00" } },
	};
	return cr_make_param_array(struct prev_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct prev_case *c, cron, prev)
{
	ax_cron *cr = NULL;
	ax_tz   *tz = NULL;
	int64_t  t;
	char     buf[48];

	cr_assert_eq(ax_cron_parse(c->expr, &cr, NULL), AX_OK);
	cr_assert_eq(ax_tz_load(c->zone, &tz), AX_OK);
	cr_assert_eq(ax_tz_parse_iso8601(c->before, NULL, &t), AX_OK);
	for (int i = 0; i < 4 && c->want[i][0]; i++) {
		ax_err rv = ax_cron_prev(cr, tz, t, &t);
		if (strcmp(c->want[i], "none") == 0) {
			cr_expect_eq(rv, AX_ENOENT);
			break;
		}
		cr_assert_eq(rv, AX_OK, "'%s' #%d: %s", c->expr, i,
		             ax_err_detail());
		cr_expect_str_eq(ax_tz_format(tz, t, buf, sizeof(buf)),
		                 c->want[i], "prev '%s' #%d", c->expr, i);
	}
	ax_tz_free(tz);
	ax_cron_free(cr);
}

/* Every parse error: the field, the byte offset and the message. */
struct err_case {
	char   expr[64];
	int    field;
	size_t offset;
	char   msg[160];
};

ParameterizedTestParameters(cron, parse_errors)
{
	static struct err_case cases[] = {
		{ "0 30 25 * * ?", 3, 5,
		  "field 3 (hour): value 25 out of range 0-23" },
		{ "60 * * * *", 1, 0,
		  "field 1 (minute): value 60 out of range 0-59" },
		{ "0 60 * * * ?", 2, 2,
		  "field 2 (minute): value 60 out of range 0-59" },
		{ "61 * * * * ?", 1, 0,
		  "field 1 (second): value 61 out of range 0-59" },
		{ "* * 0 * *", 3, 4,
		  "field 3 (day of month): value 0 out of range 1-31" },
		{ "* * 32 * *", 3, 4,
		  "field 3 (day of month): value 32 out of range 1-31" },
		{ "* * * 13 *", 4, 6,
		  "field 4 (month): value 13 out of range 1-12 (JAN-DEC)" },
		{ "* * * * 8", 5, 8,
		  "field 5 (day of week): value 8 out of range 0-7 (SUN-SAT; "
		  "0 and 7 = SUN)" },
		{ "0 0 0 ? * 0", 6, 10,
		  "field 6 (day of week): value 0 out of range 1-7 (SUN-SAT; "
		  "1 "
		  "= SUN)" },
		{ "0 0 0 1 1 ? 2200", 7, 12,
		  "field 7 (year): value 2200 out of range 1970-2199" },
		{ "0 0 0 1 1 ? 1969", 7, 12,
		  "field 7 (year): value 1969 out of range 1970-2199" },
		{ "* * * FOO *", 4, 6,
		  "field 4 (month): unknown name 'FOO' (expected JAN-DEC)" },
		{ "* * * * MOX", 5, 8,
		  "field 5 (day of week): unknown name 'MOX' (expected "
		  "SUN-SAT)" },
		{ "*/0 * * * *", 1, 2,
		  "field 1 (minute): step 0 out of range 1-60" },
		{ "*/61 * * * *", 1, 2,
		  "field 1 (minute): step 61 out of range 1-60" },
		{ "5/ * * * *", 1, 2,
		  "field 1 (minute): expected step (1-60)" },
		{ "1-2-3 * * * *", 1, 3, "field 1 (minute): unexpected '-'" },
		{ "*/5-10 * * * *", 1, 3, "field 1 (minute): unexpected '-'" },
		{ "? * * * *", 1, 0,
		  "field 1 (minute): '?' is only allowed in day of month and "
		  "day of week" },
		{ "0 0 ?/2 * ?", 3, 5,
		  "field 3 (day of month): '?' cannot take a step" },
		{ "* * 20-10 * *", 3, 4,
		  "field 3 (day of month): range 20-10 is backwards (write "
		  "10-20)" },
		{ "1,,2 * * * *", 1, 2, "field 1 (minute): empty list item" },
		{ "1, * * * *", 1, 2, "field 1 (minute): empty list item" },
		{ "0 0 x * *", 3, 4,
		  "field 3 (day of month): unexpected 'x', expected a value "
		  "in "
		  "1-31" },
		{ "0 0 0 ? * 6#6", 6, 12,
		  "field 6 (day of week): week 6 out of range 1-5" },
		{ "0 0 0 ? * 6#", 6, 12,
		  "field 6 (day of week): expected week (1-5)" },
		{ "0 0 0 ? * 9#2", 6, 10,
		  "field 6 (day of week): value 9 out of range 1-7 (SUN-SAT; "
		  "1 "
		  "= SUN)" },
		{ "0 0 0 L-31 * ?", 4, 8,
		  "field 4 (day of month): days before the last 31 out of "
		  "range 0-30" },
		{ "0 0 0 32W * ?", 4, 6,
		  "field 4 (day of month): day 32 out of range 1-31" },
		{ "0 0 0 ? * 8L", 6, 10,
		  "field 6 (day of week): value 8 out of range 1-7 (SUN-SAT; "
		  "1 "
		  "= SUN)" },
		{ "* * * *", 0, 0,
		  "expected 5 fields (MIN HOUR DOM MON DOW) or 6-7 (SEC MIN "
		  "HOUR DOM MON DOW [YEAR]), got 4" },
		{ "* * * * * * * *", 0, 14,
		  "expected 5 fields (MIN HOUR DOM MON DOW) or 6-7 (SEC MIN "
		  "HOUR DOM MON DOW [YEAR]), got more than 7" },
		{ "", 0, 0, "empty cron expression" },
		{ "   ", 0, 0, "empty cron expression" },
		{ "@fortnightly", 0, 0,
		  "unknown macro '@fortnightly' (use @yearly, @annually, "
		  "@monthly, @weekly, @daily, @midnight or @hourly)" },
		{ "@reboot", 0, 0,
		  "unknown macro '@reboot' (use @yearly, @annually, @monthly, "
		  "@weekly, @daily, @midnight or @hourly)" },
		{ "@daily 5", 0, 7, "unexpected text after @daily" },
		{ "0 0 * * 1\x01", 0, 9, "unexpected byte 0x01" },
	};
	return cr_make_param_array(struct err_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct err_case *c, cron, parse_errors)
{
	ax_cron    *cr = (ax_cron *) 1;
	ax_cron_err e;
	ax_err      rv = ax_cron_parse(c->expr, &cr, &e);
	cr_assert_eq(rv, AX_EPARSE, "'%s' should fail", c->expr);
	cr_assert_null(cr);
	cr_expect_str_eq(e.msg, c->msg, "'%s'", c->expr);
	cr_expect_str_eq(ax_err_detail(), c->msg);
	cr_expect_eq(e.field, c->field, "'%s': field %d", c->expr, e.field);
	cr_expect_eq(e.offset, c->offset, "'%s': offset %zu", c->expr,
	             e.offset);
	/* the same error without an err struct */
	cr_assert_eq(ax_cron_parse(c->expr, &cr, NULL), AX_EPARSE);
}

Test(cron, too_long)
{
	char        buf[AX_CRON_MAX_LEN + 16];
	ax_cron    *cr;
	ax_cron_err e;
	memset(buf, ' ', sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = '\0';
	memcpy(buf, "* * * * *", 9);
	cr_assert_eq(ax_cron_parse(buf, &cr, &e), AX_EPARSE);
	cr_assert(strstr(e.msg, "longer than 1024") != NULL, "%s", e.msg);
}

Test(cron, error_points_at_field)
{
	ax_cron    *cr;
	ax_cron_err e;
	cr_assert_eq(ax_cron_parse("0 30 2,99 * * ?", &cr, &e), AX_EPARSE);
	cr_assert_eq(e.field, 3);
	cr_assert_eq(e.field_offset, 5);
	cr_assert_eq(e.field_len, 4);
	cr_assert_eq(e.offset, 7);
}

Test(cron, names_and_forms_agree)
{
	static const char *same[][2] = {
		{ "0 0 * * MON-FRI", "0 0 * * 1-5" },
		{ "0 0 0 ? * MON-FRI", "0 0 0 ? * 2-6" },
		{ "0 0 * * sun", "0 0 * * 7" },
		{ "0 0 1 jan,Jul *", "0 0 1 1,7 *" },
		{ "0 0 0 ? * L", "0 0 0 ? * SAT" },
		{ "0 0 0 ? * FRIL", "0 0 0 ? * 6L" },
		{ "0 0 0 ? * MON#2", "0 0 0 ? * 2#2" },
		{ "5/15 * * * *", "5-59/15 * * * *" },
		{ "0 0 * * */2", "0 0 * * 0,2,4,6" },
		{ "@weekly", "0 0 * * 0" },
		{ "\t0  0\t* * *  ", "0 0 * * *" },
	};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		ax_cron *a, *b;
		int64_t  ta = 1767225600000000LL, tb = ta;
		cr_assert_eq(ax_cron_parse(same[i][0], &a, NULL), AX_OK, "%s",
		             same[i][0]);
		cr_assert_eq(ax_cron_parse(same[i][1], &b, NULL), AX_OK, "%s",
		             same[i][1]);
		for (int k = 0; k < 20; k++) {
			cr_assert_eq(ax_cron_next(a, NULL, ta, &ta), AX_OK);
			cr_assert_eq(ax_cron_next(b, NULL, tb, &tb), AX_OK);
			cr_expect_eq(ta, tb, "'%s' vs '%s' at #%d", same[i][0],
			             same[i][1], k);
		}
		ax_cron_free(a);
		ax_cron_free(b);
	}
}

Test(cron, fixed_time_classification)
{
	static const struct {
		const char *expr;
		int         fixed;
	} cases[] = {
		{ "0 2 * * *", 1 },      { "0 1-3 * * *", 1 },
		{ "0,30 2 * * *", 1 },   { "*/5 2 * * *", 0 },
		{ "0 * * * *", 0 },      { "0 1/2 * * *", 0 },
		{ "*/10 0 2 * * ?", 1 }, { "@daily", 1 },
		{ "@hourly", 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ax_cron *c;
		cr_assert_eq(ax_cron_parse(cases[i].expr, &c, NULL), AX_OK);
		cr_expect_eq(ax_cron_is_fixed(c), cases[i].fixed, "%s",
		             cases[i].expr);
		cr_expect_str_eq(ax_cron_text(c), cases[i].expr);
		ax_cron_free(c);
	}
}

Test(cron, strictly_after_and_before)
{
	ax_cron *c;
	int64_t  t, at = 1767225600000000LL; /* 2026-01-01T00:00:00Z */
	cr_assert_eq(ax_cron_parse("0 0 * * *", &c, NULL), AX_OK);
	cr_assert_eq(ax_cron_next(c, NULL, at, &t), AX_OK);
	cr_assert_eq(t, at + 86400000000LL);
	cr_assert_eq(ax_cron_next(c, NULL, at - 1, &t), AX_OK);
	cr_assert_eq(t, at);
	cr_assert_eq(ax_cron_prev(c, NULL, at, &t), AX_OK);
	cr_assert_eq(t, at - 86400000000LL);
	cr_assert_eq(ax_cron_prev(c, NULL, at + 1, &t), AX_OK);
	cr_assert_eq(t, at);
	cr_assert_eq(ax_cron_next(c, NULL, INT64_MIN, &t), AX_OK);
	cr_assert_eq(t, 0);
	cr_assert_eq(ax_cron_prev(c, NULL, INT64_MIN, &t), AX_ENOENT);
	cr_assert_eq(ax_cron_next(c, NULL, INT64_MAX, &t), AX_ENOENT);
	ax_cron_free(c);
}

/* The year limit must be reached by jumps, not by walking: a never-firing
 * expression answers quickly. */
Test(cron, impossible_is_fast)
{
	ax_cron *c;
	ax_tz   *tz;
	int64_t  t;
	cr_assert_eq(ax_cron_parse("0 0 0 30 2 ?", &c, NULL), AX_OK);
	cr_assert_eq(ax_tz_load("Europe/London", &tz), AX_OK);
	for (int i = 0; i < 20; i++)
		cr_assert_eq(ax_cron_next(c, tz, 0, &t), AX_ENOENT);
	cr_assert_eq(ax_cron_prev(c, tz, INT64_MAX, &t), AX_ENOENT);
	ax_tz_free(tz);
	ax_cron_free(c);
}
