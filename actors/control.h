/*
 * control.h - axd's control thread: LISTEN ax_control on its own libpq
 * connection and forward every payload (the JSON of engine/control.h) as
 * a Command to the actor owning it.
 *
 * Role (DESIGN.md 2, pipeline.md "Control from outside"): axctl and
 * ax-api change PostgreSQL and NOTIFY in the same transaction; this
 * thread turns each notification into a command:
 *   dag_changed, paused, unpaused, resync -> dag_loader (ControlOp)
 *   trigger                               -> time_detector (ControlOp)
 *   kill      -> pre_hook (CancelInstance, reason MANUAL_KILL): the
 *                pre-hook remembers it (an attempt not yet queued is
 *                dropped there) and forwards it to the queue, which
 *                cancels a queued attempt or kills a running one
 *   clear, mark, backfill                 -> dependency_detector
 *                                            (ControlOp)
 * The paused flag reaches the resource detector and the pre-hook through
 * the DAG registry, which the loader updates.
 *
 * Invariants:
 *  - A malformed payload (not JSON, unknown op, a required member missing
 *    or mistyped) is logged with the reason and dropped; never fatal.
 *  - The LISTEN connection is opened by ax_control_new(), before the
 *    actors start, so nothing committed after that is missed. When the
 *    connection is lost the thread reconnects with backoff (100 ms
 *    doubling to 5 s) and then sends "resync" to the dag_loader, which
 *    reloads every DAG: DAG changes missed meanwhile are not lost
 *    (triggers, kills and clears sent while disconnected are: the API
 *    can be retried).
 *  - The thread blocks in poll() on the connection's socket and a wake-up
 *    pipe; it costs nothing while idle.
 *
 * Workload: a few notifications per second (API calls, `axctl dag load`),
 * bursts of hundreds (bench triggers); each is one client send.
 */
#ifndef AX_ACTORS_CONTROL_H
#define AX_ACTORS_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "actor.h"
#include "ax_err.h"
#include "pipeline.h"

typedef struct ax_control ax_control;

/* One decoded payload: a packed ax.Command and where it goes. */
typedef struct ax_control_msg {
	const char *dest[2]; /* actor names; dest[1] NULL unless two */
	uint8_t    *cmd;     /* packed ax.Command (malloc'd) */
	size_t      len;     /* bytes in cmd */
	const char *op;      /* the op (static string) */
} ax_control_msg;

/* Counters (any thread). */
typedef struct ax_control_stats {
	uint64_t received;      /* notifications received */
	uint64_t forwarded;     /* commands sent to an actor */
	uint64_t malformed;     /* payloads dropped as malformed */
	uint64_t undeliverable; /* valid payloads whose actor is missing */
	uint64_t reconnects;    /* connections re-established */
} ax_control_stats;

/*
 * Decodes one payload. On success *out holds the packed command and its
 * destinations (free with ax_control_msg_fini). AX_EPARSE with a detail
 * saying what is wrong (the member and what was expected) for a
 * malformed payload; AX_ENOMEM.
 */
ax_err ax_control_decode(const char *json, ax_control_msg *out);

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
 * Starts the thread forwarding to sys (already started). Errors:
 * AX_ESTATE (already started), those of ax_actor_client_new, AX_ENOMEM.
 */
ax_err ax_control_start(ax_control *c, ax_actor_system *sys);

/*
 * Stops and joins the thread (call before ax_actor_system_stop), closes
 * the connection and frees. NULL is fine.
 */
void ax_control_free(ax_control *c);

void ax_control_stats_get(const ax_control *c, ax_control_stats *out);

#endif /* AX_ACTORS_CONTROL_H */
