/*
 * dag_schedule.h - the schedule of a loaded DAG version, as engine/schedule.h
 * understands it, and the text stored in schedules.expression.
 *
 * Role: the DAG loader computes missing next fire times with it and the
 * time detector builds the schedule it arms from the registry's entry, so
 * both read a DAG's `schedule`, `start`, `end` and `catchup` the same way.
 * Invariant: start/end/at without an offset are wall time in the
 * schedule's time zone (dag.h), resolved through the caller's tz cache.
 * Workload: once per DAG version load or arm; not on a per-fire path.
 */
#ifndef AX_DAG_SCHEDULE_H
#define AX_DAG_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "dag.h"
#include "schedule.h"
#include "tz.h"

/*
 * Builds the schedule of dag into *out (owned by the caller,
 * ax_schedule_free). tzc must outlive *out (zones are borrowed) and be
 * owned by the calling thread. Errors: AX_ENOENT when the DAG has no
 * schedule (API-triggered only), AX_EPARSE / AX_EINVAL from the time zone,
 * instants or cron (detail names the DAG).
 */
ax_err ax_dag_schedule_new(const ax_dag *dag, ax_tz_cache *tzc,
                           ax_schedule **out);

/*
 * The text stored in schedules.expression: the cron as written, or
 * "@every <duration>", or "@at <instant>". Writes into buf and returns it.
 */
const char *ax_dag_schedule_expr(const ax_dag *dag, char *buf, size_t len);

/*
 * Builds a schedule from its stored form, without the DAG: expr as
 * ax_dag_schedule_expr() writes it (a cron, "@every <duration>",
 * "@at <instant>"), zone (NULL: UTC), catchup, and the window start_us /
 * end_us (AX_SCHED_NO_START / AX_SCHED_NO_END when open). The schedule
 * equals ax_dag_schedule_new() of the DAG the text came from. tzc as
 * there. Errors: AX_EINVAL for NULL or "@none", AX_EPARSE / AX_ENOENT
 * from the cron (an unknown "@" macro too), duration, instant or zone
 * (the detail quotes expr).
 */
ax_err ax_dag_schedule_parse(const char *expr, const char *zone, int catchup,
                             int64_t start_us, int64_t end_us,
                             ax_tz_cache *tzc, ax_schedule **out);

/*
 * Resolves a DAG's start or end as written (wall time in zone, NULL: UTC,
 * unless the text has an offset) into *out_us. text NULL gives def.
 * Errors: AX_EPARSE, zone errors.
 */
ax_err ax_dag_schedule_instant(const char *text, const char *zone,
                               ax_tz_cache *tzc, int64_t def, int64_t *out_us);

#endif /* AX_DAG_SCHEDULE_H */
