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

#endif /* AX_DAG_SCHEDULE_H */
