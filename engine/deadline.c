/*
 * deadline.c - a declared deadline -> the UTC instant of one data
 * interval (see deadline.h for the forms and the DST rules).
 *
 * The wall-clock form goes through ax_tz_mktime, whose gap and overlap
 * answers are the fixed-time cron rules: a gap maps to the first instant
 * after it, a repeated hour to its first occurrence. A deadline is
 * therefore never skipped and never doubled by a DST change.
 */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "deadline.h"

static int
two_digits(const char *s, int *out)
{
	if (s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9')
		return -1;
	*out = (s[0] - '0') * 10 + (s[1] - '0');
	return 0;
}

ax_err
ax_deadline_parse_at(const char *text, int32_t *out_sec)
{
	int    h, m, s = 0;
	size_t n = text ? strlen(text) : 0;

	if ((n != 5 && n != 8) || text[2] != ':' ||
	    (n == 8 && text[5] != ':') || two_digits(text, &h) != 0 ||
	    two_digits(text + 3, &m) != 0 ||
	    (n == 8 && two_digits(text + 6, &s) != 0))
		return ax_err_set(AX_EPARSE,
		                  "'%s' is not a time of day; write HH:MM "
		                  "(24-hour), e.g. \"08:00\"",
		                  text ? text : "");
	if (h > 23 || m > 59 || s > 59)
		return ax_err_set(AX_EPARSE,
		                  "'%s' is out of range; hours are 00-23, "
		                  "minutes and seconds 00-59",
		                  text);
	*out_sec = h * 3600 + m * 60 + s;
	return AX_OK;
}

ax_err
ax_deadline_instant(const ax_deadline_spec *spec, int64_t start_us,
                    int64_t end_us, const ax_tz *tz, int64_t *out_us)
{
	ax_tm   lt;
	int64_t y;
	int     mon, mday;

	if (spec == NULL || spec->kind == AX_DEADLINE_NONE)
		return ax_err_set(AX_EINVAL, "no deadline declared");
	if (spec->kind == AX_DEADLINE_AFTER) {
		*out_us = end_us + spec->after_us;
		return AX_OK;
	}
	if (tz == NULL)
		tz = ax_tz_utc();
	ax_tz_to_local(tz, start_us, &lt);
	ax_tz_civil_from_days(ax_tz_days_from_civil(lt.year, lt.mon, lt.mday) +
	                          spec->day,
	                      &y, &mon, &mday);
	*out_us = ax_tz_mktime(tz, (int) y, mon, mday, spec->at_sec / 3600,
	                       spec->at_sec / 60 % 60, spec->at_sec % 60);
	return AX_OK;
}

char *
ax_deadline_text(const ax_deadline_spec *spec, const char *tzname, char *buf,
                 size_t len)
{
	char d[32];

	if (spec == NULL || spec->kind == AX_DEADLINE_NONE)
		snprintf(buf, len, "none");
	else if (spec->kind == AX_DEADLINE_AFTER)
		snprintf(buf, len, "%s after the interval",
		         ax_duration_fmt(spec->after_us, d, sizeof(d)));
	else if (spec->at_sec % 60 != 0)
		snprintf(buf, len, "%02d:%02d:%02d day +%d %s",
		         (int) (spec->at_sec / 3600),
		         (int) (spec->at_sec / 60 % 60),
		         (int) (spec->at_sec % 60), (int) spec->day,
		         tzname ? tzname : "UTC");
	else
		snprintf(buf, len, "%02d:%02d day +%d %s",
		         (int) (spec->at_sec / 3600),
		         (int) (spec->at_sec / 60 % 60), (int) spec->day,
		         tzname ? tzname : "UTC");
	return buf;
}

json_t *
ax_deadline_to_json(const ax_deadline_spec *s)
{
	char at[16], d[32];

	if (s->kind == AX_DEADLINE_AFTER)
		return json_pack("{s:s}", "after",
		                 ax_duration_fmt(s->after_us, d, sizeof(d)));
	if (s->kind != AX_DEADLINE_AT)
		return NULL;
	if (s->at_sec % 60 != 0)
		snprintf(at, sizeof(at), "%02d:%02d:%02d",
		         (int) (s->at_sec / 3600), (int) (s->at_sec / 60 % 60),
		         (int) (s->at_sec % 60));
	else
		snprintf(at, sizeof(at), "%02d:%02d", (int) (s->at_sec / 3600),
		         (int) (s->at_sec / 60 % 60));
	return json_pack("{s:s, s:i}", "at", at, "day", (int) s->day);
}

ax_err
ax_deadline_from_json(const json_t *j, ax_deadline_spec *out)
{
	const json_t *v;
	ax_err        rv;

	*out = (ax_deadline_spec) { 0 };
	if (j == NULL || json_is_null(j))
		return AX_OK;
	if (!json_is_object(j))
		return ax_err_set(AX_EPARSE, "expected {after} or {at, day}");
	if ((v = json_object_get(j, "after")) != NULL) {
		if (!json_is_string(v) ||
		    ax_duration_parse(json_string_value(v), &out->after_us) !=
		        AX_OK ||
		    out->after_us <= 0)
			return ax_err_set(AX_EPARSE,
			                  "after: expected a duration text");
		out->kind = AX_DEADLINE_AFTER;
		return AX_OK;
	}
	v = json_object_get(j, "at");
	if (!json_is_string(v))
		return ax_err_set(AX_EPARSE, "at: expected \"HH:MM\"");
	if ((rv = ax_deadline_parse_at(json_string_value(v), &out->at_sec)) !=
	    AX_OK)
		return rv;
	v = json_object_get(j, "day");
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > AX_DEADLINE_DAY_MAX)
		return ax_err_set(AX_EPARSE, "day: expected 0..%d",
		                  AX_DEADLINE_DAY_MAX);
	out->day  = (int32_t) json_integer_value(v);
	out->kind = AX_DEADLINE_AT;
	return AX_OK;
}
