/*
 * queue_service.h - the actor "queue": channels, priority with aging,
 * worker leases, and the nng REP endpoint ax-worker pulls from.
 *
 * Inputs (actor items): AttemptRendered (from instance_generator) and
 * CancelInstance (kill). Outputs: AttemptResult (STARTED, SUCCESS,
 * FAILED, TIMEOUT, CANCELED, UNKNOWN) to result_handler, WorkerCapacity per
 * worker group (worker_id "" = the group's total) to resource_detector,
 * worker events to event_emitter (when those actors exist).
 * Workers speak proto/worker.proto on config key queue.address.
 * See actors/queue/ for the design (overview at the top of queue.c).
 */
#ifndef AX_QUEUE_SERVICE_H
#define AX_QUEUE_SERVICE_H

#include <stdint.h>

#include "actor.h"
#include "ax_err.h"
#include "pipeline.h"

/* Channels, in dispatch precedence order (P0 first). */
enum {
	AX_QUEUE_P0 = 0, /* reserved capacity for critical links */
	AX_QUEUE_PX,     /* P1..P3 tiers sharing capacity */
	AX_QUEUE_K8S,    /* containerised execution */
	AX_QUEUE_BIZ,    /* business-owned worker pools */
	AX_QUEUE_NCHANNELS,
};

typedef struct ax_queue ax_queue;

/* Counters; read from any thread with ax_queue_stats_get(). */
typedef struct ax_queue_stats {
	uint64_t depth[AX_QUEUE_NCHANNELS]; /* attempts queued now */
	uint64_t dispatches;   /* dispatches sent (re-sends included) */
	uint64_t resends;      /* dispatches sent again after ack_timeout */
	uint64_t lease_losses; /* workers whose lease lapsed */
	uint64_t started;      /* STARTED forwarded */
	uint64_t results;      /* terminal results forwarded (dups too) */
	uint64_t cancels;      /* CancelInstance handled */
	uint64_t workers;      /* live workers now */
	uint64_t registers;    /* Register requests handled */
	uint64_t preemptions;  /* running attempts stopped for a higher tier */
} ax_queue_stats;

/*
 * Creates the queue actor and adds it to sys under AX_A_QUEUE (inbox
 * from config actors.queue). Binds the worker endpoint (queue.address)
 * at once, so a bad or busy address fails here: AX_EINVAL / AX_EEXIST
 * (address in use) / AX_ENNG with a detail naming the address. Opens its
 * own PostgreSQL connection for the workers table when ctx->dsn is not
 * empty (AX_EDBCONN when that fails). ctx must outlive the system.
 * *out (may be NULL) lets tests read counters; owned by the system.
 */
ax_err ax_queue_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx,
                    ax_queue **out);

/* Copies the counters. Any thread. */
void ax_queue_stats_get(const ax_queue *q, ax_queue_stats *out);

/*
 * Fault injection for tests: the next n replies acknowledging a Started,
 * Result or Report are dropped after the reports were forwarded, so the
 * worker re-sends them. Any thread.
 */
void ax_queue_fault_drop_acks(ax_queue *q, int n);

/* Channel index of a channel name ("P0"; "Px", "P1".."P3", "": Px;
 * "k8s"; "biz", "biz:<name>"), or -1 when unknown. */
int ax_queue_channel(const char *name);

#endif /* AX_QUEUE_SERVICE_H */
