/*
 * renderer.h - the renderer actor ("renderer").
 *
 * Role (DESIGN.md 2): AttemptCreated (instance generator) -> everything
 * a worker needs, with every template rendered (engine/render.h):
 * command, env (the task's env plus AX_RUN_ID, AX_DAG, AX_TASK,
 * AX_LOGICAL_DATE, AX_ATTEMPT, AX_SHARD_INDEX, AX_SHARD_TOTAL), timeout,
 * kill grace (worker.kill_grace), log path
 * <home>/logs/<dag>/<task>/<logical>/<shard>/<attempt>.log, priority,
 * channel, group, routing, routing key, pinned worker, resource limits
 * -> AttemptRendered to pre_hook.
 *
 * Context of a render: ds and friends from the run's logical date in the
 * DAG's time zone, the data interval of the run (dag_runs, one query per
 * batch, cached), run_id, dag.name, task.name, shard, and params (DAG
 * params < task params < the run's conf, each value rendered in turn).
 * The command of a bash task renders in shell mode: every value is one
 * shell word (render.h); env values and the routing key are plain text.
 * The run's conf params are checked against the DAG's declarations
 * (dag_params.h) before they are used.
 *
 * A render error (unknown variable, a bash task without command, a DAG
 * version that cannot be loaded, a value that cannot be quoted where it
 * lands, an undeclared or mistyped conf param) never produces an empty
 * command: the attempt fails with reason RENDER_ERROR and a message naming the
 * task, the field and the offset (AttemptResult FAILED to result_handler).
 */
#ifndef AX_RENDERER_H
#define AX_RENDERER_H

#include "pipeline.h"

/* Adds the actor "renderer" to sys; ctx must outlive the system. */
ax_err ax_renderer_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx);

#endif /* AX_RENDERER_H */
