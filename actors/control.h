/*
 * control.h - axd's control thread: LISTEN ax_control on its own libpq
 * connection, apply the durable commands of the control_command table
 * (engine/store_commands.h) and forward bare payloads (the JSON of
 * engine/control.h), each as a Command to the actor owning it.
 *
 * Role (DESIGN.md 2 and 6, docs/pipeline.md "Control from outside"): ax-api
 * records every state-changing request as a control_command row in the
 * request's transaction and NOTIFYs to wake this thread; axctl and tests
 * may still NOTIFY a bare payload. Each becomes a command:
 *   dag_changed, submit, paused, unpaused, resync -> dag_loader
 *   trigger                               -> time_detector (ControlOp)
 *   kill      -> instance_generator (CancelInstance, reason
 *                MANUAL_KILL): it remembers it for its pre hooks (an
 *                attempt not yet queued is dropped there) and forwards it
 *                to the queue, which cancels a queued attempt or kills a
 *                running one
 *   clear, mark, backfill                 -> dependency_detector
 *                                            (ControlOp)
 *   rules     -> resource_detector (ControlOp): the rules table changed
 *                (ax-api NOTIFYs it in the transaction of the change);
 *                the detector reads the table again
 *   pressure  -> resource_detector (ControlOp): pool_pressure changed
 *                (PUT/DELETE /api/v1/pools/{name}/pressure); the
 *                detector reads that table again ("rules" after a
 *                reconnect makes it read both)
 * The paused flag reaches the resource detector and the pre hooks through
 * the DAG registry, which the loader updates.
 *
 * Durable commands: the thread forwards every pending row, in id order,
 * when it starts (with a pipeline: at start and after a takeover), after
 * the LISTEN connection comes back, after each notification, and again
 * every AX_CONTROL_RETRY_S while a row it forwarded stays pending (an
 * actor that could not write it, e.g. during a database outage). The
 * ControlOp carries the row's id; the actor that applies it marks it
 * applied or rejected in the transaction of the effect, only while it is
 * pending, so a command forwarded twice is applied once and a command
 * recorded while no axd ran is applied at the next start. A kill has no
 * transaction of its own (the pre hooks and the queue act in memory, and
 * a restart forgets them): this thread sends it again every second
 * while the instance runs or waits, naming the current attempt's run_id,
 * and marks it applied once the instance is CANCELED (rejected when it
 * ended otherwise). A row that cannot be decoded is rejected with the
 * reason.
 *
 * Invariants:
 *  - A malformed bare payload (not JSON, unknown op, a required member
 *    missing or mistyped) is logged with the reason and dropped; never
 *    fatal.
 *  - The LISTEN connection is opened by ax_control_new(), before the
 *    actors start, so nothing committed after that is missed. When the
 *    connection is lost the thread reconnects with backoff (100 ms
 *    doubling to 5 s), sends "resync" to the dag_loader and "rules" to
 *    the resource detector (DAG and rule changes missed meanwhile are
 *    not lost) and forwards every pending command
 *    again.
 *  - The thread blocks in poll() on the connection's socket and a wake-up
 *    pipe; it costs nothing while idle (no timer runs while nothing it
 *    forwarded is pending).
 *
 * Workload: a few notifications per second (API calls, `axctl dag load`),
 * bursts of hundreds (bench triggers); each is one client send, plus one
 * read of the pending rows per wake-up.
 */
#ifndef AX_ACTORS_CONTROL_H
#define AX_ACTORS_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "actor.h"
#include "ax_err.h"
#include "pipeline.h"

typedef struct ax_control ax_control;

/* Forwarded commands still pending are sent again after this long. */
#define AX_CONTROL_RETRY_S 30

/* One decoded payload: a packed ax.Command and where it goes. */
typedef struct ax_control_msg {
	const char *dest[2];     /* actor names; dest[1] NULL unless two */
	uint8_t    *cmd;         /* packed ax.Command (malloc'd) */
	size_t      len;         /* bytes in cmd */
	const char *op;          /* the op (static string) */
	int64_t     command_id;  /* control_command.id; 0: a bare payload */
	int64_t     instance_id; /* kill: the instance */
} ax_control_msg;

/* Counters (any thread). */
typedef struct ax_control_stats {
	uint64_t received;      /* notifications received */
	uint64_t forwarded;     /* commands sent to an actor */
	uint64_t malformed;     /* payloads dropped as malformed */
	uint64_t undeliverable; /* valid payloads whose actor is missing */
	uint64_t reconnects;    /* connections re-established */
	uint64_t commands;      /* command rows forwarded (retries too) */
	uint64_t rejected;      /* command rows this thread rejected */
} ax_control_stats;

/*
 * Decodes one payload. On success *out holds the packed command and its
 * destinations (free with ax_control_msg_fini). AX_EPARSE with a detail
 * saying what is wrong (the member and what was expected) for a
 * malformed payload; AX_ENOMEM.
 */
ax_err ax_control_decode(const char *json, ax_control_msg *out);

/*
 * Decodes one control_command row (id, kind, body: the JSON object
 * text) as the payload {"op": <op of kind>, "command_id": id, ...body}
 * (kind pause is op paused, unpause unpaused; the others are their own
 * op). Errors as ax_control_decode; the detail is the reason a row that
 * cannot be applied is rejected with.
 */
ax_err ax_control_decode_command(int64_t id, const char *kind,
                                 const char *body, ax_control_msg *out);

/* Frees what ax_control_decode allocated; safe on zeroed memory. */
void ax_control_msg_fini(ax_control_msg *m);

/*
 * Connects to ctx->dsn and runs LISTEN ax_control. ctx must outlive the
 * object. Errors: AX_EDBCONN (detail names the redacted DSN), AX_EDB,
 * AX_ENOMEM.
 */
ax_err ax_control_new(const ax_pipeline_ctx *ctx, ax_control **out);

/*
 * Drops every notification received so far (a standby axd calls it
 * while it waits for the lease, so the server-side queue does not grow
 * and stale operations are not replayed). Not after ax_control_start.
 */
void ax_control_discard(ax_control *c);

/*
 * Starts the thread forwarding to sys (already started); it opens its own
 * store with ctx->dsn as it is then (axd's fenced DSN) to read and finish
 * commands, and first forwards every pending command (a database that is
 * away is tried again every second). Errors: AX_ESTATE (already
 * started), those of ax_actor_client_new, AX_ENOMEM.
 */
ax_err ax_control_start(ax_control *c, ax_actor_system *sys);

/*
 * Stops and joins the thread (call before ax_actor_system_stop), closes
 * the connection and frees. NULL is fine.
 */
void ax_control_free(ax_control *c);

void ax_control_stats_get(const ax_control *c, ax_control_stats *out);

#endif /* AX_ACTORS_CONTROL_H */
