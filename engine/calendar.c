/*
 * calendar.c - capacity calendars (see calendar.h).
 */
#include "calendar.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static ax_err
parse(json_t *o, ax_calendar *c)
{
	static const char *const extra[] = { "slots", NULL };
	json_t                  *tzv, *ws, *w, *v;
	const char              *k;
	size_t                   i;
	ax_err                   rv;

	if (!json_is_object(o))
		return ax_err_set(AX_EINVAL,
		                  "calendar: must be an object {\"tz\", "
		                  "\"windows\": [{\"start\", \"end\", "
		                  "\"slots\"}]}");
	json_object_foreach(o, k, v)
	{
		if (strcmp(k, "tz") != 0 && strcmp(k, "windows") != 0)
			return ax_err_set(AX_EINVAL,
			                  "calendar.%s: unknown member; a "
			                  "calendar has tz and windows",
			                  k);
	}
	tzv = json_object_get(o, "tz");
	if (tzv != NULL && !json_is_null(tzv) &&
	    (!json_is_string(tzv) || json_string_length(tzv) == 0))
		return ax_err_set(
		    AX_EINVAL,
		    "calendar.tz: must be an IANA time zone name "
		    "(e.g. \"Asia/Shanghai\")");
	ws = json_object_get(o, "windows");
	if (!json_is_array(ws) || json_array_size(ws) == 0 ||
	    json_array_size(ws) > AX_CALENDAR_WINDOWS_MAX)
		return ax_err_set(AX_EINVAL,
		                  "calendar.windows: must be an array of 1 to "
		                  "%d windows {\"start\": \"HH:MM\", \"end\": "
		                  "\"HH:MM\", \"slots\": N}",
		                  AX_CALENDAR_WINDOWS_MAX);
	json_array_foreach(ws, i, w)
	{
		char where[32];
		snprintf(where, sizeof(where), "windows[%zu]", i);
		rv   = ax_window_parse(w, where, extra, &c->win[i]);
		c->n = i + 1; /* fini frees what the parse made */
		if (rv != AX_OK)
			return rv;
		v = json_object_get(w, "slots");
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > AX_CALENDAR_SLOTS_MAX)
			return ax_err_set(
			    AX_EINVAL,
			    "%s.slots: must be an integer "
			    "0..%d (the capacity while the window "
			    "holds)",
			    where, AX_CALENDAR_SLOTS_MAX);
		c->slots[i] = json_integer_value(v);
		if (c->win[i].tz == NULL && tzv != NULL &&
		    !json_is_null(tzv) &&
		    (rv = ax_tz_load(json_string_value(tzv), &c->win[i].tz)) !=
		        AX_OK) {
			char why[256];
			snprintf(why, sizeof(why), "%s", ax_err_detail());
			return ax_err_set(rv, "calendar.tz: %s", why);
		}
	}
	return AX_OK;
}

ax_err
ax_calendar_parse_text(const char *text, ax_calendar *c)
{
	json_error_t je;
	json_t      *o;
	ax_err       rv;

	memset(c, 0, sizeof(*c));
	if (text == NULL ||
	    (o = json_loads(text, JSON_REJECT_DUPLICATES, &je)) == NULL)
		return ax_err_set(AX_EINVAL, "calendar: not JSON: %d:%d: %s",
		                  text ? je.line : 0, text ? je.column : 0,
		                  text ? je.text : "no text");
	rv = parse(o, c);
	json_decref(o);
	return rv;
}

void
ax_calendar_fini(ax_calendar *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n; i++)
		ax_window_fini(&c->win[i]);
	memset(c, 0, sizeof(*c));
}

int64_t
ax_calendar_slots_at(const ax_calendar *c, int64_t utc_us)
{
	for (size_t i = 0; c != NULL && i < c->n; i++)
		if (ax_window_contains(&c->win[i], utc_us))
			return c->slots[i];
	return -1;
}
