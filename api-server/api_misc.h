/*
 * api_misc.h - ax-api routes outside DAGs and runs: /healthz (no auth),
 * /metrics (Prometheus text), workers and the event log.
 * Thread: a connection thread, with the request's borrowed store.
 */
#ifndef AX_API_MISC_H
#define AX_API_MISC_H

#include "api_http.h"

void ax_api_healthz(ax_api_req *q, ax_api_resp *r);
void ax_api_metrics_text(ax_api_req *q, ax_api_resp *r);
void ax_api_workers_list(ax_api_req *q, ax_api_resp *r);
void ax_api_events_list(ax_api_req *q, ax_api_resp *r);

#endif /* AX_API_MISC_H */
