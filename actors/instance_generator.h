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
 *    READY, one row) is written to event_log in the same transaction. Then
 *    AttemptCreated goes to the renderer with the STORED run_id.
 *
 * Idempotent: a replayed admission of an instance that is already READY
 * with a queued attempt creates nothing and re-sends that attempt (same
 * run_id, harmless downstream); an admission of an instance that is
 * RUNNING or finished is dropped, and its slot is given back to the
 * resource detector (SlotReleased), as for an instance that cannot be
 * found.
 *
 * Back edge: the SlotReleased to the resource detector closes a cycle, so
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
