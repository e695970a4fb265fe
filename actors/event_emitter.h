/*
 * event_emitter.h - the event emitter actor ("event_emitter").
 *
 * Role (DESIGN.md 2, 5): every actor sends its Events here (items of
 * type AX_ITEM_EVENT). Each event goes through a const table of sinks:
 *   "log"        one structured log line per event, with its reason and
 *                ids; decision events (instance.admitted / delayed /
 *                blocked, admission.skipped, attempt.reported) at debug,
 *                the others at info, so logs stay readable under load;
 *   "event_log"  events not yet persisted by their producer
 *                (persisted = 0) are inserted into event_log in batches
 *                (ON CONFLICT (event_id, time) DO NOTHING: a re-send
 *                carries its envelope's id and time, so it is a no-op).
 *   "pub"        every event on the nng PUB socket events.pub (topic =
 *                type, then a NUL byte, then the event as JSON; see
 *                sink_pub.h and docs/events.md);
 *   "openlineage" run and instance events mapped to OpenLineage
 *                RunEvents, POSTed to openlineage.url by a sender thread
 *                with a bounded queue (sink_openlineage.h); disabled when
 *                the URL is empty;
 *   "alerts"     final failures, timeouts and missed deadlines as alerts
 *                labelled by impact and owner, to Alertmanager and/or a
 *                webhook, each with its own sender thread and bounded
 *                queue that drops the oldest (sink_alert.h); off unless
 *                alerts.alertmanager_url or alerts.webhook_url is set.
 * A PUB address that cannot be bound (e.g. in use) is logged and the PUB
 * sink stays off; it never stops axd.
 *
 * Counters of every sink are upserted into component_stats (component
 * "event_sink.<sink>", the alert targets as "alertmanager" and "webhook"; keys
 * "delivered", "retries", "dropped.<reason>") every AX_EVENT_EMITTER_STATS_US
 * and at stop, when a DSN is set; ax-api exposes them as ax_event_sink_*_total
 * on /metrics.
 *
 * Never blocks the pipeline: while PostgreSQL is unreachable the
 * event_log sink keeps a bounded buffer (config events.buffer), counts
 * the events it had to drop, and retries from a tick with backoff (100 ms
 * doubling to 5 s); handling a batch meanwhile costs no database call.
 *
 * Never stopped by one event: when PostgreSQL refuses a batch for its
 * content (an invalid UTF-8 byte, a \u0000 in a payload, ...), the rows
 * it refuses are isolated by splitting the batch, the others are written,
 * and each refused event is kept in event_dead_letter (its envelope and
 * the error; key "dead_lettered", ax_events_dead_lettered_total) or, when
 * even that insert fails, dropped and counted ("dropped.refused").
 */
#ifndef AX_EVENT_EMITTER_H
#define AX_EVENT_EMITTER_H

#include <stdint.h>

#include "pipeline.h"
#include "sink_alert.h"

typedef struct ax_event_emitter ax_event_emitter;

/* Counters (any thread). */
typedef struct ax_event_emitter_stats {
	uint64_t events;          /* events received */
	uint64_t stored;          /* rows inserted into event_log */
	uint64_t dropped;         /* events lost because the buffer was full */
	uint64_t buffered;        /* events waiting for event_log now */
	uint64_t failures;        /* failed event_log writes */
	uint64_t bad;             /* items that were not an ax.Event */
	uint64_t dead_lettered;   /* refused by event_log, kept in
	                             event_dead_letter */
	uint64_t refused_dropped; /* refused by event_log and by
	                             event_dead_letter: lost */
	/* PUB sink (0 when off) */
	int      pub_on;
	uint64_t pub_published, pub_dropped;
	uint64_t pub_unheard; /* no subscriber connected: not encoded */
	/* OpenLineage sink (0 when off) */
	int      ol_on;
	uint64_t ol_mapped, ol_delivered, ol_retries, ol_queued;
	uint64_t ol_dropped_full;  /* queue full */
	uint64_t ol_undeliverable; /* retries exhausted, or stop */
	uint64_t ol_rejected;      /* endpoint answered 4xx */
	/* alert sink (0 when off) */
	int                 alert_on;
	ax_sink_alert_stats alerts;
	uint64_t            stats_writes; /* component_stats upserts done */
} ax_event_emitter_stats;

#define AX_EVENT_EMITTER_STATS_US (5 * 1000000LL) /* component_stats */

/*
 * Adds the actor "event_emitter" to sys. *out (may be NULL) reads its
 * counters; owned by the system. ctx->dsn NULL disables the event_log
 * sink. ctx must outlive the system.
 */
ax_err ax_event_emitter_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx,
                            ax_event_emitter **out);

void ax_event_emitter_stats_get(const ax_event_emitter *em,
                                ax_event_emitter_stats *out);

#endif /* AX_EVENT_EMITTER_H */
