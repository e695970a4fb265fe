#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "tz.h"

static int64_t
iso(const char *s)
{
	int64_t us = 0;
	ax_err  rv = ax_tz_parse_iso8601(s, NULL, &us);
	cr_assert_eq(rv, AX_OK, "%s: %s", s, ax_err_detail());
	return us;
}

static ax_tz *
load(const char *name)
{
	ax_tz *tz = NULL;
	ax_err rv = ax_tz_load(name, &tz);
	cr_assert_eq(rv, AX_OK, "%s: %s", name, ax_err_detail());
	return tz;
}

/* UTC instant -> offset, table-driven: transitions in both directions,
 * instants past the TZif table (POSIX footer rule), the far past. */
struct off_case {
	char    zone[40];
	char    utc[32];
	int32_t off;
	int     dst;
};

ParameterizedTestParameters(tz, offsets)
{
	static struct off_case cases[] = {
		{ "Europe/London", "2026-03-29T00:59:59Z", 0, 0 },
		{ "Europe/London", "2026-03-29T01:00:00Z", 3600, 1 },
		{ "Europe/London", "2026-10-25T00:59:59Z", 3600, 1 },
		{ "Europe/London", "2026-10-25T01:00:00Z", 0, 0 },
		{ "America/New_York", "2026-03-08T06:59:59Z", -18000, 0 },
		{ "America/New_York", "2026-03-08T07:00:00Z", -14400, 1 },
		{ "America/New_York", "2026-11-01T05:59:59Z", -14400, 1 },
		{ "America/New_York", "2026-11-01T06:00:00Z", -18000, 0 },
		{ "Australia/Sydney", "2026-04-04T15:59:59Z", 39600, 1 },
		{ "Australia/Sydney", "2026-04-04T16:00:00Z", 36000, 0 },
		{ "Australia/Sydney", "2026-10-03T15:59:59Z", 36000, 0 },
		{ "Australia/Sydney", "2026-10-03T16:00:00Z", 39600, 1 },
		/* past the table: the footer rule */
		{ "America/New_York", "2150-07-01T00:00:00Z", -14400, 1 },
		{ "America/New_York", "2150-01-01T00:00:00Z", -18000, 0 },
		{ "Australia/Sydney", "2199-01-01T00:00:00Z", 39600, 1 },
		{ "Europe/London", "2190-03-28T00:59:59Z", 0, 0 },
		{ "Europe/London", "2190-03-28T01:00:00Z", 3600, 1 },
		/* no DST, half-hour and 45-minute offsets, history */
		{ "Asia/Kolkata", "2026-06-01T00:00:00Z", 19800, 0 },
		{ "Asia/Kathmandu", "2026-06-01T00:00:00Z", 20700, 0 },
		{ "Asia/Shanghai", "2026-06-01T00:00:00Z", 28800, 0 },
		{ "UTC", "2026-06-01T00:00:00Z", 0, 0 },
		{ "Europe/London", "1970-06-01T00:00:00Z", 3600, 0 },
	};
	return cr_make_param_array(struct off_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct off_case *c, tz, offsets)
{
	ax_tz *tz = load(c->zone);
	ax_tm  tm;
	ax_tz_to_local(tz, iso(c->utc), &tm);
	cr_expect_eq(tm.utcoff, c->off, "%s at %s: got %d", c->zone, c->utc,
	             tm.utcoff);
	cr_expect_eq(tm.is_dst, c->dst, "%s at %s: dst", c->zone, c->utc);
	cr_expect_eq(ax_tz_offset(tz, iso(c->utc) / 1000000), c->off);
	ax_tz_free(tz);
}

/* Local wall time -> UTC: unique, gap (first instant after), overlap
 * (both instants). */
struct wall_case {
	char       zone[40];
	int        y, mo, d, h, mi;
	ax_tz_kind kind;
	char       first[32];
	char       second[32];
};

ParameterizedTestParameters(tz, from_wall)
{
	static struct wall_case cases[] = {
		{ "Europe/London", 2026, 3, 29, 1, 30, AX_TZ_GAP,
		  "2026-03-29T01:00:00Z", "2026-03-29T01:00:00Z" },
		{ "Europe/London", 2026, 10, 25, 1, 30, AX_TZ_OVERLAP,
		  "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z" },
		{ "Europe/London", 2026, 7, 1, 12, 0, AX_TZ_UNIQUE,
		  "2026-07-01T11:00:00Z", "2026-07-01T11:00:00Z" },
		{ "America/New_York", 2026, 3, 8, 2, 30, AX_TZ_GAP,
		  "2026-03-08T07:00:00Z", "2026-03-08T07:00:00Z" },
		{ "America/New_York", 2026, 11, 1, 1, 30, AX_TZ_OVERLAP,
		  "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z" },
		{ "Australia/Sydney", 2026, 10, 4, 2, 30, AX_TZ_GAP,
		  "2026-10-03T16:00:00Z", "2026-10-03T16:00:00Z" },
		{ "Australia/Sydney", 2026, 4, 5, 2, 30, AX_TZ_OVERLAP,
		  "2026-04-04T15:30:00Z", "2026-04-04T16:30:00Z" },
		{ "America/New_York", 2180, 3, 12, 2, 30, AX_TZ_GAP,
		  "2180-03-12T07:00:00Z", "2180-03-12T07:00:00Z" },
	};
	return cr_make_param_array(struct wall_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct wall_case *c, tz, from_wall)
{
	ax_tz      *tz = load(c->zone);
	ax_tz_local l;
	int64_t     wall = ax_tz_days_from_civil(c->y, c->mo, c->d) * 86400 +
	    c->h * 3600 + c->mi * 60;
	ax_tz_from_wall(tz, wall, &l);
	cr_expect_eq(l.kind, c->kind, "%s %04d-%02d-%02d %02d:%02d kind %d",
	             c->zone, c->y, c->mo, c->d, c->h, c->mi, l.kind);
	cr_expect_eq(l.first * 1000000, iso(c->first), "%s first", c->zone);
	cr_expect_eq(l.second * 1000000, iso(c->second), "%s second", c->zone);
	ax_tz_free(tz);
}

Test(tz, span_merges_and_bounds)
{
	ax_tz     *tz = load("Europe/London");
	ax_tz_span sp;
	ax_tz_span_at(tz, iso("2026-07-01T00:00:00Z") / 1000000, &sp);
	cr_assert_eq(sp.start * 1000000, iso("2026-03-29T01:00:00Z"));
	cr_assert_eq(sp.end * 1000000, iso("2026-10-25T01:00:00Z"));
	cr_assert_eq(sp.off, 3600);
	cr_assert_eq(sp.prev_off, 0);
	cr_assert_eq(sp.next_off, 0);
	ax_tz_free(tz);

	tz = load("UTC");
	ax_tz_span_at(tz, 0, &sp);
	cr_assert_eq(sp.start, INT64_MIN);
	cr_assert_eq(sp.end, INT64_MAX);
	ax_tz_free(tz);
}

Test(tz, unknown_zone_suggests)
{
	ax_tz *tz = (ax_tz *) 1;
	cr_assert_eq(ax_tz_load("Europe/Londn", &tz), AX_ENOENT);
	cr_assert_null(tz);
	cr_assert_str_eq(ax_err_detail(),
	                 "unknown time zone 'Europe/Londn' "
	                 "(did you mean 'Europe/London'?)");
	cr_assert_eq(ax_tz_load("europe/london", &tz), AX_ENOENT);
	cr_assert(strstr(ax_err_detail(), "'Europe/London'") != NULL, "%s",
	          ax_err_detail());
	cr_assert_eq(ax_tz_load("Mars/Olympus_Mons", &tz), AX_ENOENT);
	cr_assert(strstr(ax_err_detail(),
	                 "unknown time zone "
	                 "'Mars/Olympus_Mons'") != NULL);
}

Test(tz, rejects_paths)
{
	static const char *bad[] = { "",
		                     "/etc/passwd",
		                     "../../etc/passwd",
		                     "Europe/../../../etc/passwd",
		                     "Europe/./London",
		                     "Europe//London",
		                     "Europe/London/",
		                     "Europe/Lon don",
		                     "Europe/London\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ax_tz *tz = NULL;
		cr_expect_eq(ax_tz_load(bad[i], &tz), AX_EINVAL, "'%s'",
		             bad[i]);
		cr_expect(strstr(ax_err_detail(), "invalid time zone name") !=
		          NULL);
	}
	ax_tz *tz = NULL;
	cr_assert_eq(ax_tz_load("Europe", &tz), AX_ENOENT); /* a directory */
}

Test(tz, tzdir_override_and_builtin_utc)
{
	ax_tz *tz = NULL;
	setenv("TZDIR", "/nonexistent-zoneinfo", 1);
	cr_assert_eq(ax_tz_load("Europe/London", &tz), AX_ENOENT);
	cr_assert_eq(ax_tz_load("UTC", &tz), AX_OK, "UTC needs no files");
	cr_assert_str_eq(ax_tz_name(tz), "UTC");
	cr_assert_eq(ax_tz_offset(tz, 1774749600), 0);
	ax_tz_free(tz);
	unsetenv("TZDIR");
}

Test(tz, rejects_garbage_tzif)
{
	ax_tz        *tz     = NULL;
	const char    junk[] = "not a zone file at all, no magic here......";
	unsigned char trunc[60];
	memset(trunc, 0, sizeof(trunc));
	memcpy(trunc, "TZif2", 5);
	trunc[35] = 200; /* 200 transitions announced, none present */
	trunc[39] = 1;
	cr_assert_eq(ax_tz_load_tzif("x", junk, sizeof(junk), &tz), AX_EPARSE);
	cr_assert_eq(ax_tz_load_tzif("x", trunc, sizeof(trunc), &tz),
	             AX_EPARSE);
	cr_assert_null(tz);
}

Test(tz, format_with_offset)
{
	ax_tz *tz = load("Europe/Berlin");
	char   buf[48];
	cr_assert_str_eq(
	    ax_tz_format(tz, iso("2026-03-29T01:00:00Z"), buf, sizeof(buf)),
	    "2026-03-29T03:00:00+02:00");
	cr_assert_str_eq(
	    ax_tz_format(tz, iso("2026-01-01T00:00:00.25Z"), buf, sizeof(buf)),
	    "2026-01-01T01:00:00.250000+01:00");
	ax_tz_free(tz);
	tz = load("America/St_Johns");
	cr_assert_str_eq(
	    ax_tz_format(tz, iso("2026-01-01T00:00:00Z"), buf, sizeof(buf)),
	    "2025-12-31T20:30:00-03:30");
	ax_tz_free(tz);
	cr_assert_str_eq(ax_tz_format(ax_tz_utc(), 0, buf, sizeof(buf)),
	                 "1970-01-01T00:00:00+00:00");
}

struct iso_case {
	char    text[48];
	char    zone[32]; /* "" = no zone */
	int64_t us;       /* expected; ignored when bad */
	int     bad;
};

ParameterizedTestParameters(tz, iso_parse)
{
	static struct iso_case cases[] = {
		{ "2026-03-29T03:00:00+02:00", "", 1774746000000000LL, 0 },
		{ "2026-03-29T01:00:00Z", "", 1774746000000000LL, 0 },
		{ "2026-03-29T01:00:00z", "", 1774746000000000LL, 0 },
		{ "2026-03-29 01:00:00Z", "", 1774746000000000LL, 0 },
		{ "2026-03-29T03:00+0200", "", 1774746000000000LL, 0 },
		{ "2026-03-29T03:00:00+02", "", 1774746000000000LL, 0 },
		{ "2026-03-29T01:00:00.5Z", "", 1774746000500000LL, 0 },
		{ "2026-03-29T01:00:00.123456789Z", "", 1774746000123456LL,
		  0 },
		{ "2026-03-29T01:00:00-00:30", "", 1774747800000000LL, 0 },
		{ "1969-12-31T23:59:59Z", "", -1000000LL, 0 },
		/* local times need a zone; a gap maps past it */
		{ "2026-03-29T03:00:00", "Europe/Berlin", 1774746000000000LL,
		  0 },
		{ "2026-03-29T02:30:00", "Europe/Berlin", 1774746000000000LL,
		  0 },
		{ "2026-10-25T02:30:00", "Europe/Berlin", 1792888200000000LL,
		  0 },
		{ "2026-03-29", "UTC", 1774742400000000LL, 0 },
		{ "2026-03-29T03:00:00", "", 0, 1 },
		{ "2026-02-29T00:00:00Z", "", 0, 1 },
		{ "2026-13-01T00:00:00Z", "", 0, 1 },
		{ "2026-03-29T24:00:00Z", "", 0, 1 },
		{ "2026-03-29T03:00:00+25:00", "", 0, 1 },
		{ "2026-03-29T03:00:00Zjunk", "", 0, 1 },
		{ "2026-3-29T03:00:00Z", "", 0, 1 },
		{ "tomorrow", "", 0, 1 },
		{ "", "", 0, 1 },
		{ "2026-03-29T01:00:00.Z", "", 0, 1 },
	};
	return cr_make_param_array(struct iso_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct iso_case *c, tz, iso_parse)
{
	ax_tz  *tz = c->zone[0] ? load(c->zone) : NULL;
	int64_t us = 0;
	ax_err  rv = ax_tz_parse_iso8601(c->text, tz, &us);
	if (c->bad) {
		cr_expect_eq(rv, AX_EPARSE, "'%s' should fail", c->text);
		cr_expect(strstr(ax_err_detail(), "invalid ISO 8601") != NULL,
		          "%s", ax_err_detail());
	} else {
		cr_expect_eq(rv, AX_OK, "'%s': %s", c->text, ax_err_detail());
		cr_expect_eq(us, c->us, "'%s': %lld", c->text, (long long) us);
	}
	ax_tz_free(tz);
}

Test(tz, civil_round_trip)
{
	for (int64_t d = -800000; d < 800000; d += 997) {
		int64_t y;
		int     m, md;
		ax_tz_civil_from_days(d, &y, &m, &md);
		cr_assert_eq(ax_tz_days_from_civil(y, m, md), d);
	}
	cr_assert_eq(ax_tz_days_in_month(2024, 2), 29);
	cr_assert_eq(ax_tz_days_in_month(2100, 2), 28);
	cr_assert_eq(ax_tz_days_in_month(2000, 2), 29);
	cr_assert_eq(ax_tz_mktime(ax_tz_utc(), 2026, 3, 29, 1, 0, 0),
	             1774746000000000LL);
}

Test(tz, cache_returns_same_zone)
{
	ax_tz_cache *c;
	const ax_tz *a, *b;
	cr_assert_eq(ax_tz_cache_new(&c), AX_OK);
	cr_assert_eq(ax_tz_cache_get(c, "Asia/Tokyo", &a), AX_OK);
	cr_assert_eq(ax_tz_cache_get(c, "Asia/Tokyo", &b), AX_OK);
	cr_assert_eq(a, b);
	cr_assert_eq(ax_tz_cache_get(c, "Asia/Tokio", &b), AX_ENOENT);
	ax_tz_cache_free(c);
}
