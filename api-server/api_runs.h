/*
 * api_runs.h - ax-api routes on DAG runs and task instances: list, show,
 * kill, clear, mark, logs (tail / offset / follow) and lineage.
 *
 * Role: reads come straight from PostgreSQL. Kill and clear are
 * requests to axd, sent as control notifications on channel ax_control
 * ({"op":"kill","instance_id":N}, {"op":"clear","instance_id":N,
 * "downstream":BOOL}); the pipeline moves the instance. Mark moves the
 * instance here, through the state machine (state.h and the SQL guard),
 * with an event_log row (type instance.marked, reason MANUAL_MARK).
 * Thread: a connection thread, with the request's borrowed store; a log
 * follow streams from MHD's reader callback on the same thread and
 * borrows a store only to look at the attempt's state.
 */
#ifndef AX_API_RUNS_H
#define AX_API_RUNS_H

#include "api_http.h"
#include "tz.h"

/*
 * The helper columns of a run row (r: dag_runs, v: its dag_versions
 * row) that ax_api_run_deadline turns into the run's deadline members.
 */
#define AX_API_DEADLINE_COLS                                                  \
	"v.definition->'deadline' AS deadline_def, "                          \
	"v.definition->'schedule'->>'timezone' AS deadline_tz, "              \
	"ax_us(r.interval_start) AS iv_start_us, "                            \
	"ax_us(r.interval_end) AS iv_end_us, "                                \
	"(SELECT coalesce(jsonb_agg(coalesce(e.payload->>'task', '')), "      \
	"'[]') FROM event_log e WHERE e.dag_run_id = r.id AND e.type IN "     \
	"('run.deadline_missed', 'instance.deadline_missed')) AS "            \
	"deadline_misses"

/*
 * Replaces the helper members of AX_API_DEADLINE_COLS in row (a run as
 * ax_api_row_json makes it) by deadline (RFC 3339 UTC, null when the
 * DAG declares none), deadline_rule (as written, e.g. "08:00 day +1
 * Asia/Shanghai"), deadline_missed (the run's own deadline) and
 * task_deadlines_missed (names of its tasks whose deadline was missed).
 * tzc (may be NULL: UTC only) caches zones across rows.
 */
void ax_api_run_deadline(json_t *row, ax_tz_cache *tzc);

/*
 * The deadline instant of a run into *at_us and its rule as written into
 * rule (len bytes, AX_DEADLINE_TEXT_LEN are enough): def is the DAG
 * definition's deadline member (NULL: none), tzn its schedule's zone
 * (NULL: UTC; a zone that cannot be loaded counts as UTC), [start_us,
 * end_us) the run's data interval. Returns 1, or 0 when there is none.
 */
int ax_api_deadline_of(const json_t *def, const char *tzn, int64_t start_us,
                       int64_t end_us, ax_tz_cache *tzc, int64_t *at_us,
                       char *rule, size_t len);

void ax_api_runs_list(ax_api_req *q, ax_api_resp *r);
void ax_api_run_show(ax_api_req *q, ax_api_resp *r);
void ax_api_instances_list(ax_api_req *q, ax_api_resp *r);
void ax_api_instance_show(ax_api_req *q, ax_api_resp *r);
void ax_api_instance_kill(ax_api_req *q, ax_api_resp *r);
void ax_api_instance_clear(ax_api_req *q, ax_api_resp *r);
void ax_api_instance_mark(ax_api_req *q, ax_api_resp *r);
void ax_api_instance_logs(ax_api_req *q, ax_api_resp *r);
void ax_api_instance_lineage(ax_api_req *q, ax_api_resp *r);

#endif /* AX_API_RUNS_H */
