/*
 * instance_generator.h - the instance generator actor ("instance_generator").
 *
 * Role (DESIGN.md 2): turns plans and admissions into rows.
 *  - RunPlan (dependency detector): one PENDING task_instances row per
 *    planned instance (batched, ON CONFLICT DO NOTHING on the instance
 *    key).
 *  - Admission ADMIT (resource detector): in ONE transaction per batch,
 *    the instance row is made sure of (upsert when the plan row is not
 *    there yet), moved to READY (guarded move), and its next attempt is
 *    created with a fresh run_id, due_at and admitted_at; the event
 *    instance.admitted (the resource detector's decision and the move to
 *    READY, one row) is written to event_log in the same transaction.
 *    After the commit each attempt (with the STORED run_id) is rendered
 *    (renderer.h) and passed through the pre hooks (hooks.h) as function
 *    calls in the same batch: AttemptRendered to the queue, or AttemptHeld
 *    (DAG_PAUSED) to the resource detector, or an AttemptResult (CANCELED
 *    before dispatch, or FAILED with RENDER_ERROR) to the result handler.
 *    The dag_runs rows the renders need are read before the transaction
 *    (cached), so a database failure keeps the whole batch.
 *  - CancelInstance (control's kill, the dependency detector's
 *    SUPERSEDED): remembered for the pre hooks and forwarded to the
 *    queue at once, even while a batch waits for the database.
 *
 * Idempotent: a replayed admission of an instance that is already READY
 * with a queued attempt creates nothing and re-sends that attempt (same
 * run_id, harmless downstream); an admission of an instance that is
 * RUNNING or finished is dropped, and its slot is given back to the
 * resource detector (SlotReleased), as for an instance that cannot be
 * found.
 *
 * Back edge: the SlotReleased and AttemptHeld to the resource detector and
 * the results to the result handler close cycles, so
 * the actor sends without blocking (send_nonblock); its outbox is bounded
 * by the resource detector's admission limit.
 */
#ifndef AX_INSTANCE_GENERATOR_H
#define AX_INSTANCE_GENERATOR_H

#include "pipeline.h"

/*
 * Adds the actor "instance_generator" to sys. It opens its own
 * connection to ctx->dsn on its first batch. ctx must outlive the system.
 */
ax_err ax_instance_generator_add(ax_actor_system       *sys,
                                 const ax_pipeline_ctx *ctx);

#endif /* AX_INSTANCE_GENERATOR_H */
