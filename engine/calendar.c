/*
 * calendar.c - capacity calendars (see calendar.h): the parser, the
 * window in force, and the victims of a window that preempts.
 */
#include "calendar.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* A "preempt" member v of where (may be absent: dflt) into *out. */
static ax_err
preempt_flag(json_t *v, const char *where, int dflt, uint8_t *out)
{
	if (v == NULL) {
		*out = (uint8_t) dflt;
		return AX_OK;
	}
	if (!json_is_boolean(v))
		return ax_err_set(AX_EINVAL,
		                  "%s.preempt: must be true or false (true: "
		                  "running preemptible tasks beyond the slots "
		                  "are stopped)",
		                  where);
	*out = json_is_true(v) ? 1 : 0;
	return AX_OK;
}

static ax_err
parse(json_t *o, ax_calendar *c)
{
	static const char *const extra[] = { "slots", "preempt", NULL };
	json_t                  *tzv, *ws, *w, *v;
	const char              *k;
	size_t                   i;
	uint8_t                  all = 0;
	ax_err                   rv;

	if (!json_is_object(o))
		return ax_err_set(AX_EINVAL,
		                  "calendar: must be an object {\"tz\", "
		                  "\"windows\": [{\"start\", \"end\", "
		                  "\"slots\"}]}");
	json_object_foreach(o, k, v)
	{
		if (strcmp(k, "tz") != 0 && strcmp(k, "windows") != 0 &&
		    strcmp(k, "preempt") != 0)
			return ax_err_set(
			    AX_EINVAL,
			    "calendar.%s: unknown member; a "
			    "calendar has tz, windows and preempt",
			    k);
	}
	if ((rv = preempt_flag(json_object_get(o, "preempt"), "calendar", 0,
	                       &all)) != AX_OK)
		return rv;
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
		if ((rv = preempt_flag(json_object_get(w, "preempt"), where,
		                       all, &c->preempt[i])) != AX_OK)
			return rv;
		c->any_preempt |= c->preempt[i];
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

long
ax_calendar_window_at(const ax_calendar *c, int64_t utc_us)
{
	for (size_t i = 0; c != NULL && i < c->n; i++)
		if (ax_window_contains(&c->win[i], utc_us))
			return (long) i;
	return -1;
}

int64_t
ax_calendar_slots_at(const ax_calendar *c, int64_t utc_us)
{
	long i = ax_calendar_window_at(c, utc_us);
	return i < 0 ? -1 : c->slots[i];
}

/* Victim order (see ax_calendar_victims): a before b. */
static int
victim_before(const ax_calendar_cand *a, size_t ia, const ax_calendar_cand *b,
              size_t ib)
{
	if (a->tier != b->tier)
		return a->tier > b->tier;
	if (a->started_at_us != b->started_at_us)
		return a->started_at_us > b->started_at_us;
	if (a->slots != b->slots)
		return a->slots > b->slots;
	return ia < ib;
}

size_t
ax_calendar_victims(int64_t slots, const ax_calendar_cand *c, size_t n,
                    size_t *out, int64_t *over)
{
	int64_t held = 0;
	size_t  k    = 0;

	for (size_t i = 0; i < n; i++)
		if (!c[i].stopping)
			held += c[i].slots;
	if (slots < 0)
		slots = 0;
	/* each round takes the best victim after the last one (the order
	 * is total): O(n) per victim, and the victims are at most what the
	 * window took away */
	while (held > slots) {
		size_t best = n;
		for (size_t i = 0; i < n; i++) {
			if (c[i].stopping || !c[i].preemptible ||
			    c[i].started_at_us <= 0)
				continue;
			if (k > 0 &&
			    !victim_before(&c[out[k - 1]], out[k - 1], &c[i],
			                   i))
				continue; /* chosen already */
			if (best == n ||
			    victim_before(&c[i], i, &c[best], best))
				best = i;
		}
		if (best == n)
			break;
		out[k++] = best;
		held -= c[best].slots;
	}
	if (over != NULL)
		*over = held > slots ? held - slots : 0;
	return k;
}
