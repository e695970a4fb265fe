/*
 * api_explain.h - GET /api/v1/instances/{id}/explain and
 * GET /api/v1/runs/{id}/explain (viewer role): what an instance or a run
 * waits for, its decision timeline and its attempts (engine/explain.h
 * builds the document; docs/explain.md and api-server/openapi.yaml
 * describe it).
 * Thread: a connection thread, with the request's borrowed store.
 */
#ifndef AX_API_EXPLAIN_H
#define AX_API_EXPLAIN_H

#include "api_http.h"

void ax_api_instance_explain(ax_api_req *q, ax_api_resp *r);
void ax_api_run_explain(ax_api_req *q, ax_api_resp *r);

#endif /* AX_API_EXPLAIN_H */
