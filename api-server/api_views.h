/*
 * api_views.h - read models of ax-api shaped for the web UI's pages, each
 * one answer of a few indexed statements whatever the size of the data:
 *
 *   GET /api/v1/me                 the caller's token name and role (the
 *                                  UI shows write buttons by it; every
 *                                  write route still checks the role)
 *   GET /api/v1/dags/{name}/grid   the newest N runs (at most 100) by the
 *                                  DAG's tasks, every cell a compact
 *                                  [run_index, task_index, instance_id,
 *                                  state, try_number] array
 *   GET /api/v1/dags/{name}/graph  tasks with their depends_on, the DAGs
 *                                  it depends on and those depending on it
 *   GET /api/v1/queue              unfinished instances per channel and
 *                                  worker group: pending, ready, running
 *
 * Thread: a connection thread, with the request's borrowed store.
 */
#ifndef AX_API_VIEWS_H
#define AX_API_VIEWS_H

#include "api_http.h"

void ax_api_me(ax_api_req *q, ax_api_resp *r);
void ax_api_dag_grid(ax_api_req *q, ax_api_resp *r);
void ax_api_dag_graph(ax_api_req *q, ax_api_resp *r);
void ax_api_queue_depth(ax_api_req *q, ax_api_resp *r);

#endif /* AX_API_VIEWS_H */
