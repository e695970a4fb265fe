/*
 * test_calendar.c - capacity calendars (engine/calendar.h): the slots in
 * force by local time of day, windows across midnight and by weekday,
 * the first window deciding, and the errors that name the member.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "calendar.h"
#include "tz.h"
#include "utf8.h"

static int64_t
at(const char *iso)
{
	int64_t us = 0;
	cr_assert_eq(ax_tz_parse_iso8601(iso, NULL, &us), AX_OK, "%s", iso);
	return us;
}

Test(calendar, gpu_time_sharing_in_shanghai)
{
	ax_calendar c;
	cr_assert_eq(ax_calendar_parse_text(
	                 "{\"tz\": \"Asia/Shanghai\", \"windows\": ["
	                 "{\"start\": \"08:00\", \"end\": \"20:00\", "
	                 "\"slots\": 1},"
	                 "{\"start\": \"20:00\", \"end\": \"08:00\", "
	                 "\"slots\": 7}]}",
	                 &c),
	             AX_OK, "%s", ax_err_detail());
	/* 10:00, 19:59, 20:00, 03:00 and 07:59 in Shanghai (UTC+8) */
	cr_assert_eq(ax_calendar_slots_at(&c, at("2026-12-02T02:00:00Z")), 1);
	cr_assert_eq(ax_calendar_slots_at(&c, at("2026-12-02T11:59:00Z")), 1);
	cr_assert_eq(ax_calendar_slots_at(&c, at("2026-12-02T12:00:00Z")), 7);
	cr_assert_eq(ax_calendar_slots_at(&c, at("2026-12-02T19:00:00Z")), 7);
	cr_assert_eq(ax_calendar_slots_at(&c, at("2026-12-02T23:59:00Z")), 7);
	cr_assert_eq(ax_calendar_slots_at(&c, at("2026-12-03T00:00:00Z")), 1);
	ax_calendar_fini(&c);
}

Test(calendar, outside_every_window_and_first_window_wins)
{
	ax_calendar c;
	/* weekends all day at 0 (listed first), weekdays 09:00-18:00 at 2 */
	cr_assert_eq(ax_calendar_parse_text(
	                 "{\"windows\": ["
	                 "{\"start\": \"00:00\", \"end\": \"23:59\", "
	                 "\"days\": [\"sat\", \"sun\"], \"slots\": 0},"
	                 "{\"start\": \"09:00\", \"end\": \"18:00\", "
	                 "\"slots\": 2, \"tz\": \"Europe/Berlin\"}]}",
	                 &c),
	             AX_OK, "%s", ax_err_detail());
	/* Wednesday 2026-12-02: 10:00 Berlin (09:00 UTC) is in; 20:00 out */
	cr_assert_eq(ax_calendar_slots_at(&c, at("2026-12-02T09:00:00Z")), 2);
	cr_assert_eq(ax_calendar_slots_at(&c, at("2026-12-02T19:00:00Z")), -1);
	/* Saturday 2026-12-05 10:00 UTC: the weekend window, first */
	cr_assert_eq(ax_calendar_slots_at(&c, at("2026-12-05T10:00:00Z")), 0);
	/* summer time in Berlin: 09:30 local is 07:30 UTC */
	cr_assert_eq(ax_calendar_slots_at(&c, at("2026-07-01T07:30:00Z")), 2);
	cr_assert_eq(ax_calendar_slots_at(&c, at("2026-07-01T06:30:00Z")), -1);
	ax_calendar_fini(&c);
	cr_assert_eq(ax_calendar_slots_at(NULL, 0), -1);
}

typedef struct bad_case {
	char json[200];
	char want[80];
} bad_case;

static bad_case bads[] = {
	{ "[]", "calendar: must be an object" },
	{ "{\"windows\": []}", "calendar.windows: must be an array of 1" },
	{ "{\"tz\": \"UTC\"}", "calendar.windows: must be" },
	{ "{\"windows\": [{\"start\": \"08:00\", \"end\": \"20:00\"}]}",
	  "windows[0].slots: must be an integer" },
	{ "{\"windows\": [{\"start\": \"08:00\", \"end\": \"20:00\", "
	  "\"slots\": -1}]}",
	  "windows[0].slots" },
	{ "{\"windows\": [{\"start\": \"08:00\", \"end\": \"20:00\", "
	  "\"slots\": 1.5}]}",
	  "windows[0].slots" },
	{ "{\"windows\": [{\"start\": \"8:00\", \"end\": \"20:00\", "
	  "\"slots\": 1}]}",
	  "windows[0].start: \"8:00\" is not a time of day" },
	{ "{\"windows\": [{\"start\": \"08:00\", \"end\": \"08:00\", "
	  "\"slots\": 1}]}",
	  "windows[0]: start and end are equal" },
	{ "{\"windows\": [{\"start\": \"08:00\", \"end\": \"20:00\", "
	  "\"slot\": 1}]}",
	  "windows[0].slot: unknown member" },
	{ "{\"tz\": \"Asia/Shanghia\", \"windows\": [{\"start\": \"08:00\", "
	  "\"end\": \"20:00\", \"slots\": 1}]}",
	  "calendar.tz: unknown time zone" },
	{ "{\"tz\": 8, \"windows\": []}", "calendar.tz: must be an IANA" },
	{ "{\"zone\": \"UTC\", \"windows\": []}",
	  "calendar.zone: unknown member" },
	{ "{\"windows\": [{\"start\": \"08:00\", \"end\": \"20:00\", "
	  "\"slots\": 1, \"days\": [\"mo\"]}]}",
	  "windows[0].days[0]" },
	{ "not json", "calendar: not JSON: 1:" },
};

ParameterizedTestParameters(calendar, bad)
{
	return cr_make_param_array(bad_case, bads,
	                           sizeof(bads) / sizeof(bads[0]));
}

ParameterizedTest(bad_case *b, calendar, bad)
{
	ax_calendar c;
	cr_assert_neq(ax_calendar_parse_text(b->json, &c), AX_OK,
	              "accepted %s", b->json);
	cr_assert(strstr(ax_err_detail(), b->want) != NULL,
	          "%s: detail \"%s\" does not say \"%s\"", b->json,
	          ax_err_detail(), b->want);
	cr_assert(ax_utf8_valid(ax_err_detail(), strlen(ax_err_detail())));
	ax_calendar_fini(&c);
}
