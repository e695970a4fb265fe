/*
 * api_dags.h - ax-api routes on DAGs: submit YAML, list, show, versions,
 * pause / unpause, trigger, backfill.
 *
 * Role: writes go to PostgreSQL and, in the same transaction, a control
 * notification tells axd (channel ax_control; payloads documented in
 * api-server/openapi.yaml): {"op":"dag_changed","dag":NAME},
 * {"op":"paused"|"unpaused","dag":NAME}, {"op":"trigger","dag":NAME,
 * "logical_date_us":N,"params":{...}}, and for a backfill
 * {"op":"backfill","dag":NAME,"mode":"serial"|"parallel",
 * "run_ids":[...]} after its dag_runs rows (run_type backfill) exist.
 * Thread: a connection thread, with the request's borrowed store.
 */
#ifndef AX_API_DAGS_H
#define AX_API_DAGS_H

#include "api_http.h"

/* Most runs one backfill request may create. */
#define AX_API_BACKFILL_MAX 1000

void ax_api_dags_submit(ax_api_req *q, ax_api_resp *r);
void ax_api_dags_list(ax_api_req *q, ax_api_resp *r);
void ax_api_dag_show(ax_api_req *q, ax_api_resp *r);
void ax_api_dag_versions(ax_api_req *q, ax_api_resp *r);
void ax_api_dag_pause(ax_api_req *q, ax_api_resp *r);
void ax_api_dag_unpause(ax_api_req *q, ax_api_resp *r);
void ax_api_dag_trigger(ax_api_req *q, ax_api_resp *r);
void ax_api_dag_backfill(ax_api_req *q, ax_api_resp *r);

#endif /* AX_API_DAGS_H */
