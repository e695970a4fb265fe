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
 * workers offer (slots it has not got cannot be admitted).
 *
 * A lowered capacity stops no running work unless the calendar says so:
 * with "preempt": true (on the calendar, for all its windows, or on one
 * window, which overrides the calendar's), while such a window holds the
 * queue stops running attempts of preemptible tasks (`preemptible:
 * true`) until the running slots fit the window's, and dispatches no
 * more than they allow (actors/queue/queue_calendar.c; the victims:
 * ax_calendar_victims). Without it, the capacity only admits nothing new
 * until the admitted work is below it. Pure: no I/O but the zone files.
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
	uint8_t   preempt[AX_CALENDAR_WINDOWS_MAX]; /* its own or the
	                                               calendar's flag */
	size_t n;
	int    any_preempt; /* some window has preempt */
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

/* The index of the window in force at utc_us (the first that holds), or
 * -1 outside every window (also for c NULL). */
long ax_calendar_window_at(const ax_calendar *c, int64_t utc_us);

/* One attempt in flight under a calendar whose window preempts. */
typedef struct ax_calendar_cand {
	int     preemptible;   /* the task's flag */
	int     tier;          /* 0 = P0 .. 3 = P3 */
	int64_t slots;         /* the slots it holds, >= 1 */
	int64_t started_at_us; /* UTC, its user code's start; 0: not yet */
	int     stopping;      /* a kill is on its way: holds nothing more */
} ax_calendar_cand;

/*
 * The attempts to stop so that those in flight, c[0..n), hold no more
 * than slots (the window's): their indices into out[0..) (room for n),
 * in the order they are chosen; returns how many. The slots held are
 * those of the candidates not stopping. Victims are started attempts of
 * preemptible tasks only, the lowest tier first (P3 before P2), then the
 * most recently started (the least work lost), then the larger (fewer
 * stopped); a dispatch not started yet holds its slots but frees nothing
 * sooner by a kill, and a task not preemptible is never stopped. *over
 * (may be NULL) gets the slots still held beyond slots after the victims
 * (0 when they fit): what only ends or starts can change. Pure; any
 * thread.
 */
size_t ax_calendar_victims(int64_t slots, const ax_calendar_cand *c, size_t n,
                           size_t *out, int64_t *over);

#endif /* AX_CALENDAR_H */
