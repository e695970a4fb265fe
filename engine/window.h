/*
 * window.h - a time window of local wall time in a time zone, as rules
 * (engine/rule.h) and capacity calendars (engine/calendar.h) write it:
 *
 *   {"tz": IANA zone (default "UTC"), "start": "HH:MM", "end": "HH:MM",
 *    "days": ["mon".."sun"], "dates": ["YYYY-MM-DD"]}
 *
 * The window holds from start (inclusive) to end (exclusive) of local
 * wall time; start > end crosses midnight (the window belongs to the day
 * it opens on: days and dates name that day). Wall time is compared, so
 * a window follows DST: 20:00 is 20:00 local on both sides of a change;
 * a boundary inside a spring-forward gap takes effect at the first
 * instant after the gap; in a fall-back overlap the repeated hour is
 * inside the window both times.
 */
#ifndef AX_WINDOW_H
#define AX_WINDOW_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "tz.h"

/* One parsed window; owns dates and tz (ax_window_fini). */
typedef struct ax_window {
	int      start;   /* seconds of the local day */
	int      end;     /* seconds of the local day; != start */
	uint8_t  days;    /* bit 0 Sunday .. bit 6; 0: every day */
	int64_t *dates;   /* local days since 1970-01-01 */
	size_t   n_dates; /* 0: any date */
	ax_tz   *tz;      /* NULL: UTC */
} ax_window;

/*
 * Parses window object w (borrowed) into *out (zeroed first;
 * ax_window_fini it also on failure). where names it in errors
 * ("window", "windows[2]"); extra lists the other members the caller
 * reads itself (NULL-terminated, may be NULL), any other member is
 * refused so a typo never changes a window. AX_EINVAL with a detail
 * naming the member and the fix; AX_ENOENT for an unknown time zone
 * (with a did-you-mean); AX_ENOMEM.
 */
ax_err ax_window_parse(json_t *w, const char *where, const char *const *extra,
                       ax_window *out);

/* Frees what ax_window_parse allocated; safe on zeroed memory. */
void ax_window_fini(ax_window *w);

/* 1 when utc_us is inside the window. */
int ax_window_contains(const ax_window *w, int64_t utc_us);

#endif /* AX_WINDOW_H */
