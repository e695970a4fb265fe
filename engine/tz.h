/*
 * tz.h - IANA time zones, civil-time arithmetic and ISO 8601 instants.
 *
 * Role: every schedule of a DAG is written in the DAG's time zone; the cron
 * engine, the schedule layer and the renderer convert between UTC instants
 * (what AX stores) and local wall time (what users write) through here.
 *
 * A zone is read from the system TZif file (/usr/share/zoneinfo/NAME, or
 * $TZDIR/NAME) and parsed by our own code: the 64-bit (v2+) transition
 * table plus the POSIX TZ footer rule for instants past the table. Nothing
 * here touches the process TZ or calls localtime(), so a loaded zone is
 * immutable and may be shared by any number of threads.
 *
 * Conventions: instants are UTC microseconds since the Unix epoch
 * (clock.h) unless a name says _sec. "Wall seconds" are a local civil time
 * counted as if it were UTC: wall = utc_sec + offset.
 */
#ifndef AX_TZ_H
#define AX_TZ_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"

typedef struct ax_tz ax_tz;

/* Broken-down local time of one instant in one zone. */
typedef struct ax_tm {
	int     year;   /* e.g. 2026 */
	int     mon;    /* 1-12 */
	int     mday;   /* 1-31 */
	int     hour;   /* 0-23 */
	int     min;    /* 0-59 */
	int     sec;    /* 0-59 */
	int     usec;   /* 0-999999 */
	int     wday;   /* 0-6, 0 = Sunday */
	int     yday;   /* 0-365 */
	int32_t utcoff; /* seconds east of UTC */
	int     is_dst; /* 1 when daylight saving time is in effect */
} ax_tm;

/*
 * A span of constant UTC offset: every second in [start, end) has offset
 * off. Transitions that change only the abbreviation or the DST flag are
 * merged away, so prev_off != off at start and next_off != off at end.
 */
typedef struct ax_tz_span {
	int64_t start;    /* UTC seconds; INT64_MIN when unbounded */
	int64_t end;      /* UTC seconds; INT64_MAX when unbounded */
	int32_t off;      /* offset in the span, seconds east of UTC */
	int32_t prev_off; /* offset before start (== off when unbounded) */
	int32_t next_off; /* offset from end on (== off when unbounded) */
} ax_tz_span;

/* How a local wall time maps to UTC. */
typedef enum ax_tz_kind {
	AX_TZ_UNIQUE = 0, /* exactly one instant */
	AX_TZ_GAP,        /* skipped by a forward jump (spring forward) */
	AX_TZ_OVERLAP,    /* happens twice (fall back) */
} ax_tz_kind;

typedef struct ax_tz_local {
	ax_tz_kind kind;
	int64_t    first; /* UNIQUE: the instant; GAP: the transition (first
	                     instant after the gap); OVERLAP: earlier one.
	                     UTC seconds. */
	int64_t second;   /* OVERLAP: the later instant; else == first */
} ax_tz_local;

/*
 * Loads zone name ("Europe/London", "UTC", "America/New_York"). Names are
 * relative paths under $TZDIR or /usr/share/zoneinfo; absolute paths, ".."
 * or "." components and odd characters are rejected (AX_EINVAL). An
 * unknown zone is AX_ENOENT with detail "unknown time zone 'X'" and a
 * did-you-mean when a close name exists. A file that is not TZif is
 * AX_EPARSE. "UTC" works even without zone files. *out is owned by the
 * caller (ax_tz_free).
 */
ax_err ax_tz_load(const char *name, ax_tz **out);

/* Parses a TZif image already in memory (for tests and fuzzing). */
ax_err ax_tz_load_tzif(const char *name, const void *data, size_t len,
                       ax_tz **out);

/* The built-in UTC zone: static, never freed, needs no zone files. */
const ax_tz *ax_tz_utc(void);

/* Frees a zone; NULL is fine. */
void ax_tz_free(ax_tz *tz);

/* The name the zone was loaded with. */
const char *ax_tz_name(const ax_tz *tz);

/* Offset (seconds east of UTC) in effect at utc_sec. */
int32_t ax_tz_offset(const ax_tz *tz, int64_t utc_sec);

/* The span of constant offset containing utc_sec. */
void ax_tz_span_at(const ax_tz *tz, int64_t utc_sec, ax_tz_span *out);

/* UTC instant -> local broken-down time (with offset and DST flag). */
void ax_tz_to_local(const ax_tz *tz, int64_t utc_us, ax_tm *out);

/*
 * Local wall seconds -> UTC, with the gap/overlap information DST rules
 * need (see ax_tz_local). Thread-safe; costs a few table look-ups.
 */
void ax_tz_from_wall(const ax_tz *tz, int64_t wall_sec, ax_tz_local *out);

/*
 * Local civil time -> UTC microseconds. In a gap the result is the first
 * instant after the gap; in an overlap the earlier instant. Fields are
 * not range-checked beyond what days_from_civil normalises (callers pass
 * valid dates).
 */
int64_t ax_tz_mktime(const ax_tz *tz, int year, int mon, int mday, int hour,
                     int min, int sec);

/* Days since 1970-01-01 of a proleptic Gregorian date (mon 1-12). */
int64_t ax_tz_days_from_civil(int64_t year, int mon, int mday);

/* Inverse of ax_tz_days_from_civil. */
void ax_tz_civil_from_days(int64_t days, int64_t *year, int *mon, int *mday);

/* 28..31. */
int ax_tz_days_in_month(int64_t year, int mon);

/*
 * Formats an instant as ISO 8601 local time with its UTC offset, e.g.
 * 2026-03-29T03:00:00+02:00 (".123456" is added when the instant has a
 * fraction; UTC prints +00:00). buf should hold 40 bytes. Returns buf.
 */
char *ax_tz_format(const ax_tz *tz, int64_t utc_us, char *buf, size_t len);

/*
 * Parses an ISO 8601 instant: YYYY-MM-DD[(T| )HH:MM[:SS[.frac]]][offset]
 * with offset Z, +HH, +HHMM or +HH:MM. Without an offset the text is a
 * local time in tz (a gap maps to the first instant after it, an
 * overlap to the earlier instant); when tz is NULL an offset is required.
 * A bare date means midnight. Errors are AX_EPARSE with a detail naming
 * the bad part. Years 0001-9999.
 */
ax_err ax_tz_parse_iso8601(const char *text, const ax_tz *tz, int64_t *out_us);

/*
 * A per-caller cache of loaded zones (not thread-safe: one per thread or
 * actor). Zones returned stay valid until the cache is freed.
 */
typedef struct ax_tz_cache ax_tz_cache;

ax_err ax_tz_cache_new(ax_tz_cache **out);
void   ax_tz_cache_free(ax_tz_cache *c);

/* Looks name up, loading it on first use; errors as ax_tz_load. */
ax_err ax_tz_cache_get(ax_tz_cache *c, const char *name, const ax_tz **out);

#endif /* AX_TZ_H */
