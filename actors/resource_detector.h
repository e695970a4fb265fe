/*
 * resource_detector.h - the resource detector actor ("resource_detector").
 *
 * Role (DESIGN.md 2): InstanceReady (from the dependency detector, and
 * from the time detector when a retry timer fires) -> one decision per
 * instance: ADMIT (Admission to the instance generator), DELAY(reason) or
 * BLOCK(reason); every decision is an event with its reason code
 * (WAIT_RESOURCE, BACKPRESSURE_DELAYED, DAG_PAUSED, RULE_BLOCKED,
 * CHANNEL_BLOCKED).
 *
 * Inputs: InstanceReady, WorkerCapacity (queue), SlotReleased (result
 * handler), AttemptHeld (the instance generator's pre hooks: DAG
 * paused after admission), ControlOp "rules" (the control thread: the
 * rules table changed) and "pressure" (pool_pressure changed).
 *
 * Rules, in order: paused DAG -> BLOCK(DAG_PAUSED); an Allow/Block rule
 * in force (the rules table, engine/rule.h, docs/rules.md) ->
 * BLOCK(RULE_BLOCKED or CHANNEL_BLOCKED, row reason "... rule=<id>");
 * worker-group slots
 * (capacity reported by the queue x resources.overcommit, or
 * resources.default_group_slots before the first report); the cpu and
 * memory the task declares against what the group's workers offer
 * (their Register, summed by the queue) less what admitted tasks
 * declare; named pool
 * slots (pools table, read once at start; resources.default_pool_slots
 * for a pool not in it); the P0 reserves (P1..P3 never take the slots a
 * group's workers keep with worker.reserve_p0, nor a pool's
 * pools.reserve_p0); a water level pushed for the group or pool at
 * shaving.pressure_hold or above holds P1..P3 (DELAY BACKPRESSURE_DELAYED,
 * held_by "pressure", until its expiry); backpressure of the instance
 * generator's inbox. Peak shaving (shaving.*, engine/shaving.h), on
 * arrival: while the group's backlog or water level passes a threshold,
 * the lowest tier present (never P0) is delayed by a bounded jittered
 * amount (DELAY BACKPRESSURE_DELAYED, held_by "shaving", with "until")
 * and released at that instant or as soon as the group drains.
 * The DAG format has no per-DAG "max active tasks", so there is no such
 * rule; run-level concurrency is the dependency detector's. A delayed
 * instance's event says what holds it (payload "held_by").
 *
 * Order (tiers, DESIGN.md 6b): the tier is the DAG's impact P0..P3, the
 * task's priority orders inside it; waiting instances go by the aging
 * key of both (engine/aging.h, the function the queue orders by), so
 * tiers go in order under contention and a long wait lifts a lower tier
 * over a fresh higher one (nothing starves).
 *
 * Starvation gauge: instances waiting longer than
 * scheduler.starvation_after, per tier, counted in memory and published
 * in component_stats (ax-api's /metrics: ax_instances_starving{tier}).
 *
 * State (memory only; rebuilt by the dependency detector's re-sends after
 * a restart): every instance it knows by key (admitted, waiting or
 * blocked), per (group, pool, P0 or not) lanes of waiting instances in
 * admission order, slot counters per group and pool, the waiting
 * instances in order of their wait (for the gauge).
 */
#ifndef AX_RESOURCE_DETECTOR_H
#define AX_RESOURCE_DETECTOR_H

#include "pipeline.h"

/*
 * Adds the actor "resource_detector" (address from config
 * actors.resource_detector) to sys. Reads the pools table once when
 * ctx->dsn is set (a failure is logged; defaults apply). ctx must outlive
 * the system. Errors as ax_actor_system_add.
 */
ax_err ax_resource_detector_add(ax_actor_system       *sys,
                                const ax_pipeline_ctx *ctx);

#endif /* AX_RESOURCE_DETECTOR_H */
