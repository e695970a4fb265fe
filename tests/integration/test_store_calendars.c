/*
 * test_store_calendars.c - the capacity_calendars table (migration 0019)
 * read through engine/store_calendars.c, the one reader the resource
 * detector and the queue share, against a real PostgreSQL: rows come
 * back parsed in name order, a row whose spec does not parse (written
 * around ax-api) is skipped without failing the others, and a row taken
 * by the caller is not freed twice.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_calendars.h"
#include "store_fixture.h"

AX_TEST_STORE_SUITE(store_calendars);

static void
put(const char *name, const char *spec)
{
	const char *p[] = { name, spec };
	cr_assert_eq(ax_store_exec(st,
	                           "INSERT INTO capacity_calendars (name, "
	                           "spec) VALUES ($1, $2::jsonb)",
	                           2, p),
	             AX_OK, "%s", ax_err_detail());
}

Test(store_calendars, rows_parsed_in_name_order_and_a_bad_one_skipped)
{
	ax_store_calendar *v;
	size_t             n;

	put("gpu",
	    "{\"tz\": \"UTC\", \"windows\": [{\"start\": \"08:00\", "
	    "\"end\": \"20:00\", \"slots\": 1, \"preempt\": true}]}");
	/* an hour that does not exist: ax-api refuses it, a hand-written
	 * row gets in */
	put("bad",
	    "{\"windows\": [{\"start\": \"25:00\", \"end\": "
	    "\"26:00\", \"slots\": 1}]}");
	put("etl",
	    "{\"windows\": [{\"start\": \"00:00\", \"end\": "
	    "\"06:00\", \"slots\": 3}]}");
	cr_assert_eq(ax_store_calendars_load(st, "test", &v, &n), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(n, 2, "the bad row is skipped, the others kept");
	cr_assert_str_eq(v[0].name, "etl");
	cr_assert_str_eq(v[1].name, "gpu");
	cr_assert_eq(v[0].cal.n, 1);
	cr_assert_eq(v[0].cal.slots[0], 3);
	cr_assert_eq(v[0].cal.any_preempt, 0);
	cr_assert_eq(v[1].cal.slots[0], 1);
	cr_assert_eq(v[1].cal.any_preempt, 1);
	/* 10:00 UTC on some day: inside gpu's window, outside etl's */
	cr_assert_eq(ax_calendar_slots_at(&v[1].cal, 1774778400000000LL), 1);
	cr_assert_eq(ax_calendar_slots_at(&v[0].cal, 1774778400000000LL), -1);

	/* the queue takes what it keeps; the free skips the taken row */
	char       *name = v[1].name;
	ax_calendar cal  = v[1].cal;
	v[1].name        = NULL;
	memset(&v[1].cal, 0, sizeof(v[1].cal));
	ax_store_calendars_free(v, n);
	cr_assert_str_eq(name, "gpu");
	cr_assert_eq(ax_calendar_slots_at(&cal, 1774778400000000LL), 1);
	ax_calendar_fini(&cal);
	free(name);
}

Test(store_calendars, an_empty_table_gives_none)
{
	ax_store_calendar *v = (ax_store_calendar *) 1;
	size_t             n = 7;

	cr_assert_eq(ax_store_calendars_load(st, "test", &v, &n), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(n, 0);
	ax_store_calendars_free(v, n);
}
