/*
 * api_pools.h - the pool pressure routes of ax-api: water levels the
 * platform pushes for a pool or worker group (usage AX cannot see itself,
 * e.g. a YARN queue's or a Kubernetes namespace's), with an expiry:
 *   GET    /api/v1/pools/{name}/pressure  the last push (viewer), with
 *                                         "in_force" (not expired)
 *   PUT    /api/v1/pools/{name}/pressure  push (operator): body
 *          {"level": 0.93, "expires_in": "5m"} or {"level": 0.93,
 *          "expires_at": "2026-12-02T04:00:00Z"}; 200 with the row
 *   DELETE /api/v1/pools/{name}/pressure  withdraw (operator)
 * A push or withdrawal is one statement: the pool_pressure row, an
 * event_log row (pool.pressure_set / pool.pressure_cleared, with the
 * token's name) and the NOTIFY ax_control {"op": "pressure"} that makes
 * axd's resource detector read the table again, committed together.
 * Thread: a connection thread, with the request's borrowed store.
 */
#ifndef AX_API_POOLS_H
#define AX_API_POOLS_H

#include "api_http.h"

void ax_api_pressure_get(ax_api_req *q, ax_api_resp *r);
void ax_api_pressure_put(ax_api_req *q, ax_api_resp *r);
void ax_api_pressure_delete(ax_api_req *q, ax_api_resp *r);

/*
 * Capacity calendars (engine/calendar.h), for the pool and the worker
 * group of that name:
 *   GET    /api/v1/pools/{name}/calendar  the calendar (viewer)
 *   PUT    /api/v1/pools/{name}/calendar  set it (operator): body
 *          {"tz": "Asia/Shanghai", "windows": [{"start": "08:00",
 *          "end": "20:00", "slots": 1}, ...]}; 400 names the member
 *   DELETE /api/v1/pools/{name}/calendar  remove it (operator)
 * Each is one statement with its event (pool.calendar_set /
 * pool.calendar_cleared) and the NOTIFY {"op": "calendar"}.
 */
void ax_api_calendar_get(ax_api_req *q, ax_api_resp *r);
void ax_api_calendar_put(ax_api_req *q, ax_api_resp *r);
void ax_api_calendar_delete(ax_api_req *q, ax_api_resp *r);

#endif /* AX_API_POOLS_H */
