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
