/*
 * store_calendars.h - reading the capacity_calendars table (migration
 * 0019) into parsed calendars (engine/calendar.h).
 *
 * Role: axd's resource detector (what is admitted) and its queue (what
 * a preempting window stops and how much is dispatched) read the same
 * table at start and after every {"op": "calendar"} notification, and
 * must agree on what it says: both go through this one reader. ax-api
 * writes the table itself (api-server/api_pools.c, validated there).
 *
 * Invariants: one round trip per call, rows in name order; a row whose
 * spec does not parse (one written around ax-api) is logged as a
 * warning under the caller's component and skipped, never fatal.
 *
 * Workload: a handful of rows, read a few times a day.
 */
#ifndef AX_STORE_CALENDARS_H
#define AX_STORE_CALENDARS_H

#include <stddef.h>

#include "ax_err.h"
#include "calendar.h"
#include "store.h"

/* One row: the worker group's and pool's name and its calendar. */
typedef struct ax_store_calendar {
	char       *name;
	ax_calendar cal;
} ax_store_calendar;

/*
 * Reads every capacity calendar into *out (*n of them; free with
 * ax_store_calendars_free). A row that does not parse is logged
 * (component comp, code BAD_CALENDAR) and left out. A caller may take a
 * row's name and calendar (set name to NULL and zero cal): the free then
 * skips them. Errors: those of ax_store_query, AX_ENOMEM; *out is NULL
 * and *n 0 then.
 */
ax_err ax_store_calendars_load(ax_store *s, const char *comp,
                               ax_store_calendar **out, size_t *n);

/* Finalises v[0..n) and frees v; NULL is fine. */
void ax_store_calendars_free(ax_store_calendar *v, size_t n);

#endif /* AX_STORE_CALENDARS_H */
