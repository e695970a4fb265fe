/*
 * sink_alert.h - the alert sink of the event emitter: events that need a
 * person become alerts labelled by the DAG's impact and owner, POSTed to
 * Prometheus Alertmanager (v2 API, POST <alerts.alertmanager_url>/api/v2/
 * alerts) and/or a plain JSON webhook (alerts.webhook_url).
 *
 * Mapping (docs/operations.md, "Alerts", has the full table):
 *   instance.failed of the last attempt     -> AxTaskFailed
 *   instance.timeout (any attempt)           -> AxTaskTimeout
 *   instance.deadline_missed / run.deadline_missed -> AxDeadlineMissed
 *   instance.succeeded of a task that fired  -> the same alerts resolved
 *                                               (endsAt = now)
 * Labels: alertname, impact (P0..P3), severity (P0 critical, P1 error,
 * P2 warning, P3 info), owner, dag, task, reason; a label without a value
 * is left out. Annotations: summary, explain (the axctl command that
 * says why), link (alerts.link_url + the explain endpoint) when set.
 * "The last attempt" is the attempt number reaching the task's retries
 * + 1 in the DAG version the event names (the DAG registry); when the
 * version cannot be read every failure alerts (a missed page costs more
 * than a spurious one).
 *
 * Never blocks the emitter: submit maps the event and pushes one small
 * JSON body per target onto that target's bounded queue (sink_http.h,
 * overflow DROP_OLDEST: under a long outage the freshest alerts are the
 * ones worth keeping), which its own sender thread POSTs with retries.
 * Impact and owner come from the registry's memory; a DAG not cached
 * there costs one PostgreSQL read, only for the few events that alert.
 * Stuck instances: with a DSN and stuck_after set, a thread of the sink
 * reads every stuck_check the instances left in READY, RUNNING or
 * UNKNOWN longer than stuck_after (a bounded query on the partial index
 * of unfinished instances: no scan of the history, no cost per
 * instance on the hot path) and alerts AxInstanceStuck once for each,
 * resolved when it moves on. axd itself alerts AxSchedulerNoLease
 * (ax_sink_alert_scheduler) when it loses the lease or cannot take one.
 * The alerts fired per task are remembered (at most AX_SINK_ALERT_OPEN
 * tasks) so a success can resolve them with identical labels.
 */
#ifndef AX_SINK_ALERT_H
#define AX_SINK_ALERT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "events.pb-c.h"
#include "sink_http.h"
#include "store_instances.h"

#define AX_SINK_ALERT_OPEN      10000 /* tasks with firing alerts kept */
#define AX_SINK_ALERT_STUCK_MAX 1000  /* stuck instances read per check */

struct ax_dag_registry;
typedef struct ax_sink_alert ax_sink_alert;

typedef struct ax_sink_alert_config {
	const char *alertmanager_url; /* base URL; NULL or "": off */
	const char *webhook_url;      /* NULL or "": off */
	const char *link_url;     /* ax-api base URL for links; may be "" */
	size_t      capacity;     /* per target; >= 1 */
	int         max_attempts; /* POSTs per alert; 0: 5 */
	int64_t     backoff0_us;  /* first retry delay; 0: 100 ms */
	int64_t     timeout_us;   /* per POST; 0: 5 s */
	struct ax_dag_registry *registry; /* impact, owner, retries; may be
	                                     NULL (P2, no owner, final) */
	const char *dsn;            /* the stuck check's database; NULL: off */
	int64_t     stuck_after_us; /* READY/RUNNING/UNKNOWN this long is
	                               stuck; 0: no stuck check */
	int64_t stuck_check_us;     /* period of the check; 0: 1 min */
} ax_sink_alert_config;

typedef struct ax_sink_alert_stats {
	uint64_t           fired, resolved; /* alerts mapped */
	uint64_t           checks;          /* stuck checks done */
	int                am_on, wh_on;    /* targets configured */
	ax_sink_http_stats am, wh;          /* per target (0 when off) */
} ax_sink_alert_stats;

/* What the sink knows of an event's DAG and task. */
typedef struct ax_alert_dag {
	const char *owner;     /* NULL: unknown */
	int         impact;    /* ax_impact; -1: unknown (P2) */
	int         max_tries; /* attempts of the task; 0: unknown */
} ax_alert_dag;

typedef enum ax_alert_action {
	AX_ALERT_NONE = 0, /* the event is no alert */
	AX_ALERT_FIRE,
	AX_ALERT_RESOLVE, /* resolves what fired for (dag, task) */
} ax_alert_action;

/*
 * Decides what e means for alerting, given what is known of its DAG
 * (d, borrowed). For AX_ALERT_FIRE *out (may be NULL for the others)
 * gets the alert as Alertmanager's postable alert object: labels,
 * annotations (link under link_url when not empty), startsAt (the event
 * time); caller json_decref()s it. Pure: no I/O, any thread.
 */
ax_alert_action ax_sink_alert_map(const Ax__Event *e, const ax_alert_dag *d,
                                  const char *link_url, json_t **out);

/*
 * The alert of an instance stuck in x->state (AxInstanceStuck, reason
 * STUCK_<state>, startsAt when it became stuck). Pure; json_decref it.
 */
json_t *ax_sink_alert_stuck_json(const ax_store_stuck *x,
                                 const ax_alert_dag *d, int64_t stuck_after_us,
                                 const char *link_url);

/*
 * The alert of a scheduler without its lease (AxSchedulerNoLease, P0,
 * reason e.g. LEASE_LOST or NO_LEASE, label instance = holder, the axd).
 * Pure; json_decref it.
 */
json_t *ax_sink_alert_scheduler_json(const char *reason, const char *holder,
                                     const char *summary, int64_t time_us);

/*
 * Queues the scheduler alert (resolved 0) or its resolution (1, endsAt
 * now) on every target. The labels depend on reason and holder only, so
 * the resolution matches the alert. Returns 1 when queued. Any thread.
 */
int ax_sink_alert_scheduler(ax_sink_alert *sa, const char *reason,
                            const char *holder, const char *summary,
                            int resolved);

/*
 * Checks the configuration: AX_EINVAL with a detail naming the key and
 * the fix when a URL set is not http:// or https:// or capacity is 0;
 * AX_ENOENT when neither target is set (the sink is off). Pure.
 */
ax_err ax_sink_alert_check(const ax_sink_alert_config *cfg);

/*
 * Starts one sender per configured target. Errors: those of
 * ax_sink_alert_check (AX_ENOENT: nothing to start), AX_ENOMEM, AX_EIO.
 */
ax_err ax_sink_alert_new(const ax_sink_alert_config *cfg, ax_sink_alert **out);

/*
 * Maps e (borrowed) and queues its alert (or resolutions) on every
 * target. Returns the number of alerts queued per target. Never blocks
 * on the network. Owner thread only (the event emitter's).
 */
int ax_sink_alert_submit(ax_sink_alert *sa, const Ax__Event *e);

void ax_sink_alert_stats_get(ax_sink_alert *sa, ax_sink_alert_stats *out);

/* Stops the senders (see ax_sink_http_free), writes the final counters
 * to *final (may be NULL) and frees sa. NULL sa is fine. */
void ax_sink_alert_free(ax_sink_alert *sa, int64_t drain_us,
                        ax_sink_alert_stats *final);

#endif /* AX_SINK_ALERT_H */
