/*
 * window.c - local wall-time windows in a time zone (see window.h).
 */
#include "window.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const day_names[] = { "sun", "mon", "tue", "wed",
	                                 "thu", "fri", "sat" };

/* "HH:MM" -> seconds of the day, or -1. */
static int
time_of_day(const char *s)
{
	int h, m;
	if (strlen(s) != 5 || s[2] != ':' ||
	    sscanf(s, "%2d:%2d", &h, &m) != 2 || s[0] < '0' || s[0] > '9' ||
	    s[3] < '0' || s[3] > '9' || h < 0 || h > 23 || m < 0 || m > 59)
		return -1;
	return h * 3600 + m * 60;
}

static ax_err
parse_hhmm(json_t *w, const char *where, const char *key, int *out)
{
	json_t *v = json_object_get(w, key);

	if (!json_is_string(v))
		return ax_err_set(AX_EINVAL,
		                  "%s.%s: required, a local time of day "
		                  "\"HH:MM\" (e.g. \"20:00\")",
		                  where, key);
	if ((*out = time_of_day(json_string_value(v))) < 0)
		return ax_err_set(AX_EINVAL,
		                  "%s.%s: \"%s\" is not a time of day; "
		                  "write HH:MM from 00:00 to 23:59",
		                  where, key, json_string_value(v));
	return AX_OK;
}

static ax_err
parse_days(json_t *w, const char *where, ax_window *r)
{
	json_t *v = json_object_get(w, "days"), *e;
	size_t  i;

	if (v == NULL || json_is_null(v))
		return AX_OK;
	if (!json_is_array(v) || json_array_size(v) == 0)
		return ax_err_set(AX_EINVAL,
		                  "%s.days: must be a non-empty array of "
		                  "mon, tue, wed, thu, fri, sat, sun",
		                  where);
	json_array_foreach(v, i, e)
	{
		const char *s = json_is_string(e) ? json_string_value(e) : "";
		int         d = -1;
		for (int k = 0; k < 7; k++)
			if (strcasecmp(s, day_names[k]) == 0)
				d = k;
		if (d < 0)
			return ax_err_set(AX_EINVAL,
			                  "%s.days[%zu]: must be one of "
			                  "mon, tue, wed, thu, fri, sat, sun",
			                  where, i);
		r->days |= (uint8_t) (1u << d);
	}
	return AX_OK;
}

static ax_err
parse_dates(json_t *w, const char *where, ax_window *r)
{
	json_t *v = json_object_get(w, "dates"), *e;
	size_t  i;

	if (v == NULL || json_is_null(v))
		return AX_OK;
	if (!json_is_array(v) || json_array_size(v) == 0 ||
	    json_array_size(v) > 366)
		return ax_err_set(AX_EINVAL,
		                  "%s.dates: must be an array of 1 to 366 "
		                  "local dates \"YYYY-MM-DD\"",
		                  where);
	if ((r->dates = calloc(json_array_size(v), sizeof(*r->dates))) == NULL)
		return ax_err_set(AX_ENOMEM, "%s: out of memory", where);
	json_array_foreach(v, i, e)
	{
		const char *s = json_is_string(e) ? json_string_value(e) : "";
		int         y, mo, d;
		char        tail;
		if (strlen(s) != 10 || s[4] != '-' || s[7] != '-' ||
		    sscanf(s, "%4d-%2d-%2d%c", &y, &mo, &d, &tail) != 3 ||
		    y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 ||
		    d > ax_tz_days_in_month(y, mo))
			return ax_err_set(AX_EINVAL,
			                  "%s.dates[%zu]: \"%s\" is not a "
			                  "date; write YYYY-MM-DD (e.g. "
			                  "\"2026-11-11\")",
			                  where, i, s);
		r->dates[r->n_dates++] = ax_tz_days_from_civil(y, mo, d);
	}
	return AX_OK;
}

static int
listed(const char *const *keys, const char *k)
{
	for (size_t i = 0; keys != NULL && keys[i] != NULL; i++)
		if (strcmp(keys[i], k) == 0)
			return 1;
	return 0;
}

ax_err
ax_window_parse(json_t *w, const char *where, const char *const *extra,
                ax_window *r)
{
	static const char *const keys[] = { "tz",   "start", "end",
		                            "days", "dates", NULL };
	json_t                  *v;
	const char              *k;
	ax_err                   rv;

	memset(r, 0, sizeof(*r));
	if (!json_is_object(w))
		return ax_err_set(AX_EINVAL,
		                  "%s: must be an object {\"tz\", "
		                  "\"start\", \"end\", \"days\", \"dates\"}",
		                  where);
	json_object_foreach(w, k, v)
	{
		if (!listed(keys, k) && !listed(extra, k))
			return ax_err_set(
			    AX_EINVAL,
			    "%s.%s: unknown member; a window "
			    "has tz, start, end, days and dates%s",
			    where, k,
			    extra != NULL ? " (and what its use adds)" : "");
	}
	if ((rv = parse_hhmm(w, where, "start", &r->start)) != AX_OK ||
	    (rv = parse_hhmm(w, where, "end", &r->end)) != AX_OK)
		return rv;
	if (r->start == r->end)
		return ax_err_set(AX_EINVAL,
		                  "%s: start and end are equal; a window "
		                  "needs a length (for all day, leave out the "
		                  "window)",
		                  where);
	if ((rv = parse_days(w, where, r)) != AX_OK ||
	    (rv = parse_dates(w, where, r)) != AX_OK)
		return rv;
	v = json_object_get(w, "tz");
	if (v == NULL || json_is_null(v))
		return AX_OK;
	if (!json_is_string(v) || json_string_length(v) == 0)
		return ax_err_set(AX_EINVAL,
		                  "%s.tz: must be an IANA time zone name "
		                  "(e.g. \"Asia/Shanghai\")",
		                  where);
	if ((rv = ax_tz_load(json_string_value(v), &r->tz)) != AX_OK) {
		char why[256]; /* the detail is rewritten by ax_err_set */
		snprintf(why, sizeof(why), "%s", ax_err_detail());
		return ax_err_set(rv, "%s.tz: %s", where, why);
	}
	return AX_OK;
}

void
ax_window_fini(ax_window *w)
{
	if (w == NULL)
		return;
	free(w->dates);
	ax_tz_free(w->tz);
	memset(w, 0, sizeof(*w));
}

/* 1 when the window may open on local day `day` (weekday wday). */
static int
day_ok(const ax_window *w, int64_t day, int wday)
{
	if (w->days != 0 && !(w->days & (1u << wday)))
		return 0;
	if (w->n_dates == 0)
		return 1;
	for (size_t i = 0; i < w->n_dates; i++)
		if (w->dates[i] == day)
			return 1;
	return 0;
}

int
ax_window_contains(const ax_window *w, int64_t utc_us)
{
	ax_tm   tm;
	int64_t day;
	int     sec;

	ax_tz_to_local(w->tz ? w->tz : ax_tz_utc(), utc_us, &tm);
	sec = tm.hour * 3600 + tm.min * 60 + tm.sec;
	day = ax_tz_days_from_civil(tm.year, tm.mon, tm.mday);
	if (w->start < w->end)
		return sec >= w->start && sec < w->end &&
		    day_ok(w, day, tm.wday);
	/* crosses midnight: the evening of today or the night after
	 * yesterday's opening */
	if (sec >= w->start)
		return day_ok(w, day, tm.wday);
	return sec < w->end && day_ok(w, day - 1, (tm.wday + 6) % 7);
}
