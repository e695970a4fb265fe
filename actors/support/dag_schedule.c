/*
 * dag_schedule.c - a DAG's schedule spec -> ax_schedule (see the header).
 */
#include "dag_schedule.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"

static ax_err
instant(const char *text, const ax_tz *tz, const char *what, const ax_dag *d,
        int64_t *out)
{
	if (ax_tz_parse_iso8601(text, tz, out) != AX_OK) {
		char detail[256];
		snprintf(detail, sizeof(detail), "%s", ax_err_detail());
		return ax_err_set(AX_EPARSE, "DAG '%s' %s '%s': %s", d->name,
		                  what, text, detail);
	}
	return AX_OK;
}

ax_err
ax_dag_schedule_new(const ax_dag *d, ax_tz_cache *tzc, ax_schedule **out)
{
	ax_sched_spec spec = { 0 };
	const ax_tz  *tz   = NULL;
	const char *zone = d->schedule.timezone ? d->schedule.timezone : "UTC";
	ax_cron_err ce   = { 0 };
	ax_err      rv;

	*out = NULL;
	if (d->schedule.kind == AX_SCHED_NONE)
		return ax_err_set(AX_ENOENT, "DAG '%s' has no schedule",
		                  d->name);
	if ((rv = ax_tz_cache_get(tzc, zone, &tz)) != AX_OK)
		return rv;
	spec.kind     = d->schedule.kind;
	spec.cron     = d->schedule.cron;
	spec.tz       = tz;
	spec.every_us = d->schedule.every_us;
	spec.start_us = AX_SCHED_NO_START;
	spec.end_us   = AX_SCHED_NO_END;
	spec.catchup  = d->catchup;
	if (d->schedule.kind == AX_SCHED_AT &&
	    (rv = instant(d->schedule.at, tz, "at", d, &spec.at_us)) != AX_OK)
		return rv;
	if (d->start != NULL &&
	    (rv = instant(d->start, tz, "start", d, &spec.start_us)) != AX_OK)
		return rv;
	if (d->end != NULL &&
	    (rv = instant(d->end, tz, "end", d, &spec.end_us)) != AX_OK)
		return rv;
	rv = ax_schedule_new(&spec, out, &ce);
	if (rv != AX_OK && ce.msg[0])
		return ax_err_set(rv, "DAG '%s' schedule: %s", d->name,
		                  ce.msg);
	return rv;
}

const char *
ax_dag_schedule_expr(const ax_dag *d, char *buf, size_t len)
{
	char dur[64];

	switch (d->schedule.kind) {
	case AX_SCHED_CRON:
		snprintf(buf, len, "%s", d->schedule.cron);
		break;
	case AX_SCHED_EVERY:
		snprintf(
		    buf, len, "@every %s",
		    ax_duration_fmt(d->schedule.every_us, dur, sizeof(dur)));
		break;
	case AX_SCHED_AT:
		snprintf(buf, len, "@at %s", d->schedule.at);
		break;
	default:
		snprintf(buf, len, "@none");
		break;
	}
	return buf;
}

ax_err
ax_dag_schedule_instant(const char *text, const char *zone, ax_tz_cache *tzc,
                        int64_t def, int64_t *out_us)
{
	const ax_tz *tz;
	ax_err       rv;

	*out_us = def;
	if (text == NULL)
		return AX_OK;
	if ((rv = ax_tz_cache_get(tzc, zone ? zone : "UTC", &tz)) != AX_OK)
		return rv;
	if (ax_tz_parse_iso8601(text, tz, out_us) != AX_OK) {
		char detail[256];
		snprintf(detail, sizeof(detail), "%s", ax_err_detail());
		*out_us = def;
		return ax_err_set(AX_EPARSE, "instant '%s': %s", text, detail);
	}
	return AX_OK;
}

ax_err
ax_dag_schedule_parse(const char *expr, const char *zone, int catchup,
                      int64_t start_us, int64_t end_us, ax_tz_cache *tzc,
                      ax_schedule **out)
{
	ax_sched_spec spec = { 0 };
	ax_cron_err   ce   = { 0 };
	char          detail[256];
	ax_err        rv;

	*out = NULL;
	if (expr == NULL || tzc == NULL)
		return ax_err_set(AX_EINVAL, "schedule: no expression");
	if ((rv = ax_tz_cache_get(tzc, zone ? zone : "UTC", &spec.tz)) !=
	    AX_OK)
		return rv;
	spec.start_us = start_us;
	spec.end_us   = end_us;
	spec.catchup  = catchup != 0;
	if (strncmp(expr, "@every ", 7) == 0) {
		spec.kind = AX_SCHED_EVERY;
		rv        = ax_duration_parse(expr + 7, &spec.every_us);
	} else if (strncmp(expr, "@at ", 4) == 0) {
		spec.kind = AX_SCHED_AT;
		rv = ax_tz_parse_iso8601(expr + 4, spec.tz, &spec.at_us);
	} else if (strcmp(expr, "@none") == 0) {
		return ax_err_set(AX_EINVAL, "schedule '%s': no schedule",
		                  expr);
	} else {
		spec.kind = AX_SCHED_CRON; /* cron macros (@daily...) too */
		spec.cron = expr;
	}
	if (rv != AX_OK) {
		snprintf(detail, sizeof(detail), "%s", ax_err_detail());
		return ax_err_set(rv, "schedule '%s': %s", expr, detail);
	}
	rv = ax_schedule_new(&spec, out, &ce);
	if (rv != AX_OK)
		return ax_err_set(rv, "schedule '%s': %s", expr,
		                  ce.msg[0] ? ce.msg : ax_err_detail());
	return AX_OK;
}
