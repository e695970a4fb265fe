/*
 * calendar.h - capacity calendars (time sharing): the capacity of a
 * worker group or pool by time of day in a time zone, e.g. the classic
 * GPU case, 1 slot for batch work from 08:00 to 20:00 and 7 from 20:00
 * to 08:00:
 *
 *   {"tz": "Asia/Shanghai",
 *    "windows": [{"start": "08:00", "end": "20:00", "slots": 1},
 *                {"start": "20:00", "end": "08:00", "slots": 7}]}
 *
 * Each window is an engine/window.h window (start, end, days, dates,
 * and its own tz, default the calendar's, default UTC) with the slots in
 * force while it holds; the first window that holds decides. Outside
 * every window the group or pool has its own capacity. A pool's
 * calendar replaces its slots; a group's can only lower what its
 * workers offer (slots it has not got cannot be admitted). A lowered
 * capacity never stops running work: it only admits nothing new until
 * the admitted work is below it. Pure: no I/O but the zone files.
 */
#ifndef AX_CALENDAR_H
#define AX_CALENDAR_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "window.h"

#define AX_CALENDAR_WINDOWS_MAX 48
#define AX_CALENDAR_SLOTS_MAX   1000000

typedef struct ax_calendar {
	ax_window win[AX_CALENDAR_WINDOWS_MAX];
	int64_t   slots[AX_CALENDAR_WINDOWS_MAX];
	size_t    n;
} ax_calendar;

/*
 * Parses calendar JSON text into *out (zeroed first; ax_calendar_fini it
 * also on failure). AX_EINVAL with a detail naming the member and the
 * fix ("windows[1].slots: must be an integer 0..1000000"); AX_ENOENT
 * for an unknown zone; AX_ENOMEM.
 */
ax_err ax_calendar_parse_text(const char *json, ax_calendar *out);

void ax_calendar_fini(ax_calendar *c);

/* The slots in force at utc_us, or -1 outside every window. */
int64_t ax_calendar_slots_at(const ax_calendar *c, int64_t utc_us);

#endif /* AX_CALENDAR_H */
