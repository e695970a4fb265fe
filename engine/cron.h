/*
 * cron.h - cron expressions: parse, next and previous fire time.
 *
 * Role: the schedule layer (schedule.h) and the time detector ask "when
 * does this DAG fire next"; the DAG validator asks "is this expression
 * valid, and if not where is it wrong".
 *
 * Forms accepted:
 *   5 fields  MIN HOUR DOM MON DOW              (Unix/Vixie; DOW 0-7,
 *                                                0 and 7 = Sunday)
 *   6 fields  SEC MIN HOUR DOM MON DOW          (Quartz; DOW 1-7, 1 = SUN)
 *   7 fields  SEC MIN HOUR DOM MON DOW YEAR     (Quartz; YEAR 1970-2199)
 *   @yearly @annually @monthly @weekly @daily @midnight @hourly
 * Each field is a comma list of `*`, `N`, `A-B`, `*`/`A`/`A-B` followed by
 * `/STEP`; month and weekday names (JAN, MON); `?` in day-of-month or
 * day-of-week; day-of-month `L`, `L-N`, `NW`, `LW`; day-of-week `NL`
 * (last N-day of the month) and `N#K` (K-th N-day). Ranges wrap in
 * cyclic fields (`FRI-MON`, `22-2`).
 *
 * Day rule (Vixie): when day-of-month and day-of-week are both restricted
 * a day matches if either matches; when either field starts with `*` or
 * `?` a day must match both (so `0 0 *` + `/10 * MON` means days 1, 11,
 * 21, 31 that are Mondays, exactly as Vixie cron does).
 *
 * Daylight saving (Vixie, man 8 cron): a fixed-time job (no `*` and no
 * step in its minute and hour fields) whose wall time falls in a
 * spring-forward gap fires once at the first instant after the gap, and
 * once, at the first occurrence, when its wall time repeats in a fall-back.
 * Other jobs follow the wall clock: nothing in the gap, both occurrences
 * of a repeated hour.
 *
 * Invariants: a parsed ax_cron is immutable and may be shared by threads.
 * Cost: next/prev use per-field bitmasks and jump field by field, a few
 * microseconds per call; never a walk over every second of a year.
 */
#ifndef AX_CRON_H
#define AX_CRON_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "tz.h"

#define AX_CRON_YEAR_MIN 1970
#define AX_CRON_YEAR_MAX 2199
#define AX_CRON_MAX_LEN  1024 /* longest expression accepted, bytes */

typedef struct ax_cron ax_cron;

/* Where a parse failed. */
typedef struct ax_cron_err {
	int    field;        /* 1-based field index; 0: the whole expression */
	size_t offset;       /* byte offset in expr of the offending text */
	size_t field_offset; /* byte offset of the field (== offset if 0) */
	size_t field_len;    /* length of the field in bytes */
	char   msg[192];     /* e.g. "field 3 (hour): value 25 out of range
	                        0-23" */
} ax_cron_err;

/*
 * Parses expr. On success *out is owned by the caller (ax_cron_free). On
 * failure returns AX_EPARSE (AX_ENOMEM when out of memory), *out is NULL,
 * err (may be NULL) says where, and the ax_err detail holds err->msg.
 */
ax_err ax_cron_parse(const char *expr, ax_cron **out, ax_cron_err *err);

/*
 * The first fire time strictly after after_us in zone tz (NULL = UTC).
 * AX_ENOENT when there is none up to AX_CRON_YEAR_MAX. Thread-safe.
 */
ax_err ax_cron_next(const ax_cron *c, const ax_tz *tz, int64_t after_us,
                    int64_t *next_us);

/* The last fire time strictly before before_us; AX_ENOENT when none. */
ax_err ax_cron_prev(const ax_cron *c, const ax_tz *tz, int64_t before_us,
                    int64_t *prev_us);

/* Whether the job is fixed-time (no `*` or step in minute and hour). */
int ax_cron_is_fixed(const ax_cron *c);

/* The expression as given (macros unexpanded). */
const char *ax_cron_text(const ax_cron *c);

/* Frees; NULL is fine. */
void ax_cron_free(ax_cron *c);

#endif /* AX_CRON_H */
