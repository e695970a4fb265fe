/*
 * test_axctl_cron.c - `axctl cron next` driven as a user drives it: the
 * real axctl binary (path in $AXCTL, set by tests/meson.build).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_run.h"

static char out[16384];
static char err[16384];

#define axctl(...) AX_CLI_AXCTL(__VA_ARGS__)

Test(axctl_cron, next_across_spring_forward)
{
	int rc = axctl("cron", "next", "0 2 * * *", "--tz", "Europe/Berlin",
	               "--from", "2026-03-27T12:00:00Z", "--count", "3", NULL);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_str_eq(out,
	                 "2026-03-28T02:00:00+01:00\n"
	                 "2026-03-29T03:00:00+02:00\n"
	                 "2026-03-30T02:00:00+02:00\n");
}

Test(axctl_cron, quartz_seconds_and_equals_options)
{
	int rc = axctl("cron", "next", "*/20 0 0 1 1 ?", "--tz=UTC",
	               "--from=2026-06-01T00:00:00+02:00", "--count=3", NULL);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_str_eq(out,
	                 "2027-01-01T00:00:00+00:00\n"
	                 "2027-01-01T00:00:20+00:00\n"
	                 "2027-01-01T00:00:40+00:00\n");
}

Test(axctl_cron, defaults_five_lines_from_now)
{
	cr_assert_eq(axctl("cron", "next", "@hourly", NULL), 0, "%s", err);
	int lines = 0;
	for (const char *p = out; *p; p++)
		lines += *p == '\n';
	cr_assert_eq(lines, 5, "%s", out);
	cr_assert(strstr(out, ":00:00+00:00\n") != NULL, "%s", out);
}

Test(axctl_cron, local_from_is_read_in_the_zone)
{
	int rc =
	    axctl("cron", "next", "30 1 * * *", "--tz", "America/New_York",
	          "--from", "2026-11-01T00:00:00", "--count", "2", NULL);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_str_eq(out,
	                 "2026-11-01T01:30:00-04:00\n"
	                 "2026-11-02T01:30:00-05:00\n");
}

Test(axctl_cron, invalid_expression_points_at_field)
{
	int rc = axctl("cron", "next", "0 30 25 * * ?", NULL);
	cr_assert_eq(rc, 1);
	cr_assert_str_eq(out, "");
	cr_assert_str_eq(err,
	                 "axctl: invalid cron expression: field 3 "
	                 "(hour): value 25 out of range 0-23\n"
	                 "  0 30 25 * * ?\n"
	                 "       ^~\n");
}

Test(axctl_cron, unknown_zone_fails_with_suggestion)
{
	int rc =
	    axctl("cron", "next", "0 0 * * *", "--tz", "Europe/Londn", NULL);
	cr_assert_eq(rc, 1);
	cr_assert(strstr(err,
	                 "unknown time zone 'Europe/Londn' (did you "
	                 "mean 'Europe/London'?)") != NULL,
	          "%s", err);
}

Test(axctl_cron, year_limit_stops_early)
{
	int rc = axctl("cron", "next", "0 0 0 1 1 ? 2198-2199", "--from",
	               "2026-01-01T00:00:00Z", "--count", "5", NULL);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_str_eq(out,
	                 "2198-01-01T00:00:00+00:00\n"
	                 "2199-01-01T00:00:00+00:00\n");
	cr_assert(strstr(err, "up to year 2199") != NULL, "%s", err);
}

Test(axctl_cron, usage_errors_exit_2)
{
	cr_assert_eq(axctl("cron", "next", NULL), 2);
	cr_assert(strstr(err, "missing EXPR") != NULL, "%s", err);
	cr_assert_eq(axctl("cron", "next", "* * * * *", "--count", "0", NULL),
	             2);
	cr_assert(strstr(err, "--count '0'") != NULL, "%s", err);
	cr_assert_eq(axctl("cron", "next", "* * * * *", "--count", NULL), 2);
	cr_assert_eq(axctl("cron", "next", "* * * * *", "--bogus", NULL), 2);
	cr_assert_eq(
	    axctl("cron", "next", "* * * * *", "--from", "yesterday", NULL),
	    2);
	cr_assert(strstr(err, "invalid ISO 8601") != NULL, "%s", err);
	cr_assert_eq(axctl("cron", "next", "*", "*", "*", "*", "*", NULL), 2);
	cr_assert(strstr(err, "quote the expression") != NULL, "%s", err);
	cr_assert_eq(axctl("cron", "later", NULL), 2);
	cr_assert_eq(axctl("cron", NULL), 2);
	cr_assert_eq(axctl("cron", "next", "--help", NULL), 0);
	cr_assert(strstr(out, "usage: axctl cron next") != NULL);
}
