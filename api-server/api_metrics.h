/*
 * api_metrics.h - request counters and latency histograms of ax-api, per
 * route, in the Prometheus text format.
 *
 * Role: api_server.c records every answered request; GET /metrics
 * (api_misc.c) renders them together with what axd's actors publish in
 * component_stats (scheduling latency, queue depth, slots, throughput,
 * starvation, sink counters): memory counters of axd, never a scan of
 * the history tables.
 * Invariants: fixed-size arrays indexed by route (the route table is
 * const), one mutex; recording costs a lock and a few increments.
 */
#ifndef AX_API_METRICS_H
#define AX_API_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "buf.h"

typedef struct ax_api_metrics ax_api_metrics;

ax_err ax_api_metrics_new(ax_api_metrics **out);
void   ax_api_metrics_free(ax_api_metrics *m);

/*
 * Records one answered request: route is an index into ax_api_routes or
 * -1 for an unmatched path; status the HTTP status; dur_us the time from
 * the request's first byte to its answer being queued. Any thread.
 */
void ax_api_metrics_record(ax_api_metrics *m, int route, unsigned status,
                           int64_t dur_us);

/*
 * Appends ax_api_requests_total{method,route,code} and the
 * ax_api_request_duration_seconds histogram {method,route} to b.
 */
void ax_api_metrics_render(ax_api_metrics *m, ax_buf *b);

struct ax_store;

/*
 * Appends the event sink counters that axd publishes in component_stats
 * (components "event_sink.<sink>"): ax_event_sink_delivered_total{sink},
 * ax_event_sink_retries_total{sink} and
 * ax_event_sink_dropped_total{sink,reason}. A family without rows is
 * left out. One query; errors as ax_store_query.
 */
ax_err ax_api_metrics_render_sinks(struct ax_store *st, ax_buf *b);

/*
 * Appends the admission gauges that axd's resource detector publishes in
 * component_stats (component "resource_detector", counted in memory):
 * ax_instances_starving{tier} (P0..P3, each present, 0 when axd has not
 * written it) and ax_instances_waiting_admission. One query of a handful
 * of rows; errors as ax_store_query.
 */
ax_err ax_api_metrics_render_starving(struct ax_store *st, ax_buf *b);

/*
 * Appends the scheduling metrics that axd's actors count in memory and
 * publish in component_stats (components "queue" and "result_handler"):
 * the latency histograms ax_scheduling_decision_seconds,
 * ax_scheduling_env_ready_seconds and ax_scheduling_end_to_end_seconds
 * {channel} (every channel present, empty when axd has not written it),
 * ax_queue_depth{channel,group}, ax_worker_slots{group,kind},
 * ax_worker_heartbeat_losses_total, ax_instances_finished_total{state}
 * and ax_instance_retries_total. One query of component_stats (a few
 * hundred rows at most), never task_instances; errors as ax_store_query.
 */
ax_err ax_api_metrics_render_sched(struct ax_store *st, ax_buf *b);

#endif /* AX_API_METRICS_H */
