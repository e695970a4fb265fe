/*
 * test_calendar.c - capacity calendars (engine/calendar.h): the slots in
 * force by local time of day, windows across midnight and by weekday,
 * the first window deciding, the preempt flag of the calendar and of a
 * window, the errors that name the member, and the victims a window
 * that preempts stops.
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
	{ "{\"preempt\": 1, \"windows\": [{\"start\": \"08:00\", "
	  "\"end\": \"20:00\", \"slots\": 1}]}",
	  "calendar.preempt: must be true or false" },
	{ "{\"preempt\": \"yes\", \"windows\": [{\"start\": \"08:00\", "
	  "\"end\": \"20:00\", \"slots\": 1}]}",
	  "calendar.preempt: must be true or false" },
	{ "{\"windows\": [{\"start\": \"08:00\", \"end\": \"20:00\", "
	  "\"slots\": 1}, {\"start\": \"20:00\", \"end\": \"08:00\", "
	  "\"slots\": 7, \"preempt\": null}]}",
	  "windows[1].preempt: must be true or false" },
	{ "{\"windows\": [{\"start\": \"08:00\", \"end\": \"20:00\", "
	  "\"slots\": 1, \"preemt\": true}]}",
	  "windows[0].preemt: unknown member" },
	{ "{\"preemption\": true, \"windows\": []}",
	  "calendar.preemption: unknown member; a calendar has tz, windows "
	  "and preempt" },
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

Test(calendar, preempt_on_the_calendar_and_per_window)
{
	ax_calendar c;
	/* the calendar's flag holds for every window but the one that says
	 * otherwise */
	cr_assert_eq(ax_calendar_parse_text(
	                 "{\"preempt\": true, \"windows\": ["
	                 "{\"start\": \"08:00\", \"end\": \"20:00\", "
	                 "\"slots\": 1},"
	                 "{\"start\": \"20:00\", \"end\": \"22:00\", "
	                 "\"slots\": 2, \"preempt\": false}]}",
	                 &c),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(c.preempt[0], 1);
	cr_assert_eq(c.preempt[1], 0);
	cr_assert(c.any_preempt);
	cr_assert_eq(ax_calendar_window_at(&c, at("2026-12-02T09:00:00Z")), 0);
	cr_assert_eq(ax_calendar_window_at(&c, at("2026-12-02T21:00:00Z")), 1);
	cr_assert_eq(ax_calendar_window_at(&c, at("2026-12-02T23:00:00Z")),
	             -1);
	ax_calendar_fini(&c);
	/* by default nothing preempts; one window may */
	cr_assert_eq(ax_calendar_parse_text(
	                 "{\"windows\": [{\"start\": \"08:00\", \"end\": "
	                 "\"20:00\", \"slots\": 1}]}",
	                 &c),
	             AX_OK);
	cr_assert_eq(c.preempt[0], 0);
	cr_assert(!c.any_preempt);
	ax_calendar_fini(&c);
	cr_assert_eq(ax_calendar_parse_text(
	                 "{\"preempt\": false, \"windows\": [{\"start\": "
	                 "\"08:00\", \"end\": \"20:00\", \"slots\": 1, "
	                 "\"preempt\": true}]}",
	                 &c),
	             AX_OK);
	cr_assert_eq(c.preempt[0], 1);
	cr_assert(c.any_preempt);
	ax_calendar_fini(&c);
	cr_assert_eq(ax_calendar_window_at(NULL, 0), -1);
}

/* Candidates: preemptible, tier, slots, started (0: not yet), stopping. */
#define P(tier, slots, started)                                               \
	{                                                                     \
		1, tier, slots, started, 0                                    \
	}
#define N(tier, slots, started)                                               \
	{                                                                     \
		0, tier, slots, started, 0                                    \
	}

typedef struct victims_case {
	const char      *name;
	int64_t          slots; /* the window's */
	ax_calendar_cand c[8];
	size_t           n;
	size_t           want[8]; /* the victims, in order */
	size_t           nwant;
	int64_t          over; /* held beyond slots after them */
} victims_case;

static victims_case victims[] = {
	{ "fits: nothing stops",
	  3,
	  { P(3, 1, 100), P(3, 1, 200), P(3, 1, 300) },
	  3,
	  { 0 },
	  0,
	  0 },
	{ "7 to 1: the six most recent go",
	  1,
	  { P(3, 1, 100), P(3, 1, 700), P(3, 1, 200), P(3, 1, 600),
	    P(3, 1, 300), P(3, 1, 500), P(3, 1, 400) },
	  7,
	  { 1, 3, 5, 6, 4, 2 },
	  6,
	  0 },
	{ "the lowest tier first, then the most recent",
	  2,
	  { P(1, 1, 900), P(3, 1, 100), P(2, 1, 800), P(3, 1, 200) },
	  4,
	  { 3, 1 },
	  2,
	  0 },
	{ "never a task not preemptible",
	  1,
	  { N(3, 1, 900), N(3, 1, 800), P(1, 1, 100) },
	  3,
	  { 2 },
	  1,
	  1 },
	{ "a dispatch not started holds but is not stopped",
	  1,
	  { P(3, 1, 0), P(3, 1, 100), P(3, 1, 200) },
	  3,
	  { 2, 1 },
	  2,
	  0 },
	{ "victims being stopped hold nothing",
	  1,
	  { { 1, 3, 1, 500, 1 }, { 1, 3, 1, 400, 1 }, P(3, 1, 100) },
	  3,
	  { 0 },
	  0,
	  0 },
	{ "a large victim frees enough alone",
	  2,
	  { P(3, 1, 300), P(3, 3, 300), P(3, 1, 100) },
	  3,
	  { 1 },
	  1,
	  0 },
	{ "0 slots: every preemptible one",
	  0,
	  { P(0, 1, 100), N(3, 1, 200), P(2, 2, 300) },
	  3,
	  { 2, 0 },
	  2,
	  1 },
	{ "nothing in flight", 1, { { 0 } }, 0, { 0 }, 0, 0 },
};

ParameterizedTestParameters(calendar, victims)
{
	return cr_make_param_array(victims_case, victims,
	                           sizeof(victims) / sizeof(victims[0]));
}

ParameterizedTest(victims_case *v, calendar, victims)
{
	size_t  out[8];
	int64_t over = -1;
	size_t  k    = ax_calendar_victims(v->slots, v->c, v->n, out, &over);

	cr_assert_eq(k, v->nwant, "%s: %zu victims, want %zu", v->name, k,
	             v->nwant);
	for (size_t i = 0; i < k; i++)
		cr_assert_eq(out[i], v->want[i],
		             "%s: victim %zu is %zu, want %zu", v->name, i,
		             out[i], v->want[i]);
	cr_assert_eq(over, v->over, "%s: over %lld, want %lld", v->name,
	             (long long) over, (long long) v->over);
}
