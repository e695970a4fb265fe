/*
 * sink_openlineage.h - the OpenLineage sink of the event emitter: AX
 * events mapped to OpenLineage RunEvents (spec 2-0-2) and POSTed as JSON
 * to openlineage.url (or AX_OPENLINEAGE_URL) with libcurl.
 *
 * Mapping (docs/events.md has the full table):
 *   DAG run  (job name = <dag>):  run.created -> START,
 *            run.succeeded -> COMPLETE, run.failed -> FAIL,
 *            run.superseded / run.discarded / run.canceled -> ABORT;
 *   task instance attempt (job name = <dag>.<task>, with a `parent` run
 *            facet naming the DAG run): instance.running -> START,
 *            instance.succeeded -> COMPLETE, instance.failed /
 *            instance.timeout -> FAIL, instance.canceled -> ABORT.
 *   Other event types are not sent.
 * run.runId: for a task attempt its run_id (the attempt's UUID); for a
 * DAG run a UUID derived from SHA-256("ax.dag_run\0<namespace>\0<dag>\0
 * <dag_run_id>\0") with the version nibble 8 and RFC 4122 variant bits
 * (RFC 9562 version 8), so every event of one DAG run carries the same
 * runId without storing it. An attempt event without run_id gets a UUID
 * derived the same way from ("ax.attempt", namespace, dag, instance_id,
 * attempt).
 *
 * Never blocks the emitter: submit maps and encodes the event, then
 * appends it to a bounded queue (openlineage.buffer) or counts a drop
 * when full. One sender thread of its own POSTs them in order; on a
 * connection error, a timeout, 408, 429 or 5xx it retries with
 * exponential backoff (100 ms doubling, at most 5 s) up to max_attempts
 * times, then drops the event (counted as undeliverable); other 4xx are
 * dropped at once (counted as rejected).
 */
#ifndef AX_SINK_OPENLINEAGE_H
#define AX_SINK_OPENLINEAGE_H

#include <stddef.h>
#include <stdint.h>

#include "ax_config.h"
#include "ax_err.h"
#include "events.pb-c.h"

#define AX_OL_PRODUCER "https://github.com/ax-scheduler/ax/tree/v" AX_VERSION
#define AX_OL_SCHEMA_URL                                                      \
	"https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"

typedef struct ax_sink_ol ax_sink_ol;

typedef struct ax_sink_ol_config {
	const char *url;          /* endpoint, required (copied) */
	const char *ns;           /* job namespace, required (copied) */
	size_t      capacity;     /* queued events before drops; >= 1 */
	int         max_attempts; /* POSTs per event; 0: 5 */
	int64_t     backoff0_us;  /* first retry delay; 0: 100 ms */
	int64_t     timeout_us;   /* per POST; 0: 5 s */
} ax_sink_ol_config;

typedef struct ax_sink_ol_stats {
	uint64_t mapped;        /* events turned into RunEvents */
	uint64_t delivered;     /* POSTs answered 2xx */
	uint64_t retries;       /* POSTs repeated after a failure */
	uint64_t dropped_full;  /* queue full at submit */
	uint64_t undeliverable; /* attempts exhausted, or stopped */
	uint64_t rejected;      /* 4xx (not 408/429): the receiver refuses */
	uint64_t queued;        /* waiting now (racy, for monitoring) */
} ax_sink_ol_stats;

/*
 * Starts the sender thread. Errors: AX_EINVAL (empty url or namespace,
 * capacity 0), AX_ENOMEM, AX_EIO (thread or libcurl could not start).
 */
ax_err ax_sink_ol_new(const ax_sink_ol_config *cfg, ax_sink_ol **out);

/*
 * Maps e (borrowed) and queues the RunEvent. Returns 1 when queued, 0
 * when the event type has no OpenLineage mapping or the queue was full
 * (counted). Never blocks on the network. Owner thread only.
 */
int ax_sink_ol_submit(ax_sink_ol *ol, const Ax__Event *e);

void ax_sink_ol_stats_get(ax_sink_ol *ol, ax_sink_ol_stats *out);

/*
 * Stops the sender: what is queued is still tried once each for up to
 * drain_us (no retries), the rest is counted undeliverable; joins the
 * thread, writes the final counters to *final (may be NULL) and frees ol.
 * NULL ol is fine (final untouched).
 */
void ax_sink_ol_free(ax_sink_ol *ol, int64_t drain_us,
                     ax_sink_ol_stats *final);

/*
 * The RunEvent for e as JSON text (malloc'd, free()) in *out. AX_ENOENT
 * when e's type is not mapped (*out NULL); AX_ENOMEM. Any thread.
 */
ax_err ax_sink_ol_event_json(const Ax__Event *e, const char *ns, char **out);

/* The OpenLineage runId of DAG run dag_run_id of dag (see above). */
void ax_sink_ol_dag_run_uuid(const char *ns, const char *dag,
                             int64_t dag_run_id, char out[37]);

#endif /* AX_SINK_OPENLINEAGE_H */
