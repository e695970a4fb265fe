/*
 * control.h - the control channel from outside into axd: axctl and ax-api
 * write PostgreSQL and then `NOTIFY ax_control, '<json>'` in the same
 * transaction; axd's control thread (actors/control.h) LISTENs and
 * forwards each payload to the actor owning it.
 *
 * ax-api records each state-changing request as a control_command row
 * (engine/store_commands.h) and sends the payload below with a member
 * "command_id": N. Such a payload only wakes axd: the row is the truth,
 * and axd applies every pending row (also those recorded while no axd
 * listened). A payload without "command_id" (axctl dag load, tests) is
 * forwarded as it is and lost when no axd listens.
 *
 * Payload format: one JSON object with a string member "op". The members
 * each op needs (unknown members are ignored; a missing or mistyped
 * required member makes the payload malformed: axd logs and drops it):
 *
 *   {"op":"dag_changed","dag":"name"}   a DAG version was stored
 *                                         -> dag_loader reloads that DAG
 *   {"op":"submit","dags":["a",..]}     DAG versions were stored (a
 *                                         member may also be an object
 *                                         with "name") -> dag_loader
 *   {"op":"paused","dag":"name"}        dags.paused was set / cleared
 *   {"op":"unpaused","dag":"name"}        -> dag_loader (registry flag,
 *                                         schedule disarmed / re-armed)
 *   {"op":"trigger","dag":"name",       a manual run -> time_detector;
 *    "logical_date_us":N, "params":{..}} logical_date_us optional
 *                                         (0 or absent: now), params an
 *                                         optional object
 *   {"op":"kill","instance_id":N}       -> queue (CancelInstance)
 *   {"op":"clear","instance_id":N,      -> dependency_detector;
 *    "downstream":true|false}             downstream optional (false)
 *   {"op":"mark","instance_id":N,       the API wrote the state; ->
 *    "state":"SUCCESS"|"FAILED"}          dependency_detector
 *   {"op":"backfill","dag":"name",      the API created the dag_runs rows
 *    "mode":"serial"|"parallel",          (run_type backfill) -> the
 *    "run_ids":[N,...]}                   dependency_detector plans them
 *
 * "dag" is the DAG name; instance ids are task_instances.id. Every op may
 * carry "command_id" (a positive integer, control_command.id). PostgreSQL
 * limits a payload to 8000 bytes (ax-api sends only op and command_id
 * when the members do not fit: axd reads them from the row).
 *
 * Invariants: ax_control_notify runs in the caller's transaction when one
 * is open, so the notification is delivered only if the change commits.
 */
#ifndef AX_CONTROL_H
#define AX_CONTROL_H

#include "ax_err.h"
#include "store.h"

/* The PostgreSQL channel axd listens on. */
#define AX_CONTROL_CHANNEL "ax_control"

/* PostgreSQL's limit on a NOTIFY payload, in bytes (excluding the NUL). */
#define AX_CONTROL_PAYLOAD_MAX 7999

/*
 * Sends json (one payload as documented above) on AX_CONTROL_CHANNEL with
 * SELECT pg_notify(), inside the caller's open transaction if any.
 * Errors: AX_EINVAL (NULL, empty or over AX_CONTROL_PAYLOAD_MAX bytes),
 * those of ax_store_exec.
 */
ax_err ax_control_notify(ax_store *s, const char *json);

#endif /* AX_CONTROL_H */
