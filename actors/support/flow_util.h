/*
 * flow_util.h - small pieces shared by the flow actors (resource detector,
 * instance generator, renderer, hooks, result handler, event emitter).
 * Their maps and arrays are the shared containers of engine/ (hmap.h:
 * ax_strmap; buf.h: AX_GROW).
 *
 * - ax_flow_key: the instance key (dag, task, logical time, shard) as one
 *   string, the same key that is unique in task_instances.
 * - ax_flow_event_*: events with every id of an instance (task, logical
 *   time and shard included, which ax_pipeline_event cannot carry), and
 *   the mapping of an ax.Event to a row of event_log.
 */
#ifndef AX_FLOW_UTIL_H
#define AX_FLOW_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline.h"
#include "store_attempts.h"
#include "uuid.h"

/* ---------------------------------------------------------------------- */
/* keys */

#define AX_FLOW_KEY_MAX 600

/* "dag\x1ftask\x1flogical_us\x1fshard" into buf; returns buf. */
char *ax_flow_key(const Ax__InstanceRef *ref, char *buf, size_t len);

/* ---------------------------------------------------------------------- */
/* events */

/* Storage for one event built by ax_flow_event_init (id and strings). */
typedef struct ax_flow_event {
	Ax__Event ev;
	char      id[AX_UUID_LEN];
} ax_flow_event;

/*
 * Fills e with a fresh id, now, type, reason, source and the ids of ref
 * (may be NULL), run_id / attempt (may be NULL / 0), trace (may be NULL)
 * and payload (a JSON object text or NULL). Strings are borrowed: they
 * must outlive the send / store call.
 */
void ax_flow_event_init(ax_flow_event *e, const char *source, const char *type,
                        const char *reason, const Ax__InstanceRef *ref,
                        const char *run_id, int32_t attempt, const char *trace,
                        const char *payload);

/* Sends e->ev to the event emitter with persisted set as given. */
ax_err ax_flow_event_send(ax_actor *self, ax_flow_event *e, int persisted);

/* The event_log row of ev (strings point into ev). */
void ax_flow_event_row(const Ax__Event *ev, ax_store_event_row *row);

/* Text form of InstanceReady.channel for task_instances.channel
 * ("P0", "Px", "k8s", "biz"). */
const char *ax_flow_db_channel(const char *channel);

/* ---------------------------------------------------------------------- */
/* commands kept while PostgreSQL is unreachable */

/*
 * A bounded FIFO of unpacked commands (owned) kept while PostgreSQL is
 * unreachable, and the commands collected by the handlers of the batch
 * being handled; zeroed = empty.
 */
typedef struct ax_flow_pending {
	Ax__Command **v;
	size_t        n, cap;
	size_t        max;     /* 0: 100000 */
	uint64_t      dropped; /* commands refused because it was full */
	Ax__Command **batch;   /* collected by ax_flow_pending_collect */
	size_t        nbatch, capbatch;
} ax_flow_pending;

/* Keeps cmd (ownership passes); frees and counts it when full. */
void ax_flow_pending_keep(ax_flow_pending *p, Ax__Command *cmd);

/* Hands every kept command to the caller (free the array and the
 * commands); the FIFO is empty afterwards. */
Ax__Command **ax_flow_pending_take(ax_flow_pending *p, size_t *n);

/* Frees what is kept and collected. */
void ax_flow_pending_fini(ax_flow_pending *p);

/* Runs a batch of commands (ownership passes); st is the actor's state. */
typedef ax_err (*ax_flow_run_fn)(ax_actor *self, void *st, Ax__Command **cmds,
                                 size_t n);

/*
 * The handler of a command that an actor writes in one transaction per
 * batch and keeps while PostgreSQL is down: keeps m's command
 * (ax_pipeline_keep: it is p's now) and, while p holds kept ones, queues
 * it behind them (order is kept), otherwise collects it for the batch's
 * run (ax_flow_pending_run, from the actor's batch_end). AX_ENOMEM: not
 * kept (the pipeline frees it).
 */
ax_err ax_flow_pending_collect(ax_flow_pending *p, ax_pipeline_msg *m);

/* Runs what the handlers of this batch collected (the actor's
 * batch_end); nothing collected is left afterwards. */
ax_err ax_flow_pending_run(ax_actor *self, void *st, ax_flow_pending *p,
                           ax_flow_run_fn run);

/* Runs what p kept (from the actor's tick). */
ax_err ax_flow_pending_retry(ax_actor *self, void *st, ax_flow_pending *p,
                             ax_flow_run_fn run);

/* 1 for the errors after which a batch is worth running again later
 * (connection lost, serialization, timeout, generic database error). */
int ax_flow_db_transient(ax_err rv);

/* Registers the statements of one store operation (ax_store_*_prepare). */
typedef ax_err (*ax_flow_prepare_fn)(ax_store *s);

/*
 * Opens *store on dsn when it is not open yet, registers the statements
 * of the actor's operations (prep[0..n)) and plans them (ax_store_warm),
 * so that the first instance after a start or a takeover does not open
 * the connection, plan them or fill the backend's caches on its way. For
 * the actors on an instance's path (instance generator, queue, result
 * handler), from their init, each with the operations it runs. Nothing
 * without a DSN. A failure (PostgreSQL down) is logged at debug under
 * comp and leaves *store as it was or NULL: the actor opens it and
 * prepares each statement at its first use, as it would without this.
 */
void ax_flow_store_warm(ax_store **store, const char *dsn, const char *comp,
                        const ax_flow_prepare_fn *prep, size_t n);

#endif /* AX_FLOW_UTIL_H */
