/*
 * renderer.h - the renderer: an attempt -> what a worker runs. Not an
 * actor: the instance generator calls it inside its batch, right after
 * the commit that created the attempts (docs/pipeline.md).
 *
 * Role (DESIGN.md 2): an attempt (as Ax__AttemptCreated, built in
 * memory) -> everything a worker needs, with every template rendered
 * (engine/render.h): command, env (the task's env plus AX_RUN_ID, AX_DAG,
 * AX_TASK, AX_LOGICAL_DATE, AX_ATTEMPT, AX_SHARD_INDEX, AX_SHARD_TOTAL),
 * timeout, kill grace (worker.kill_grace), log path
 * <home>/logs/<dag>/<task>/<logical>/<shard>/<attempt>.log, priority,
 * channel, group, routing, routing key, pinned worker, resource limits
 * -> an AttemptRendered, which the instance generator passes through the
 * pre hooks (hooks.h) and sends to the queue.
 *
 * Context of a render: ds and friends from the run's logical date in the
 * DAG's time zone, the data interval of the run (dag_runs, one query per
 * batch through ax_renderer_load_runs, cached), run_id, dag.name, task.name,
 * shard, and params (DAG params < task params < the run's conf, each value
 * rendered in turn). The command of a bash task renders in shell mode: every
 * value is one shell word (render.h); env values and the routing key are plain
 * text. The run's conf params are checked against the DAG's declarations
 * (dag_params.h) before they are used.
 *
 * A render error (unknown variable, a bash task without command, a DAG
 * version that cannot be loaded, a value that cannot be quoted where it
 * lands, an undeclared or mistyped conf param) never produces an empty
 * command: the attempt fails with reason RENDER_ERROR and a message naming the
 * task, the field and the offset (the caller sends an AttemptResult
 * FAILED to result_handler and emits attempt.render_failed).
 *
 * Threads: one renderer belongs to one actor thread (the instance
 * generator's); nothing in it is shared.
 */
#ifndef AX_RENDERER_H
#define AX_RENDERER_H

#include <stddef.h>
#include <stdint.h>

#include "dag.h"
#include "pipeline.h"
#include "store.h"

typedef struct ax_renderer   ax_renderer;
typedef struct ax_render_out ax_render_out;

/* A renderer for ctx (worker.kill_grace, worker.log_dir, home); ctx must
 * outlive it. AX_ENOMEM. */
ax_err ax_renderer_new(const ax_pipeline_ctx *ctx, ax_renderer **out);

/* Frees rn (NULL is fine). */
void ax_renderer_free(ax_renderer *rn);

/*
 * Makes sure the data interval and conf of the runs ids[0..n) are cached:
 * one dag_runs query on s for those not cached yet (0 ids are skipped;
 * s NULL: nothing is read, renders use the logical date). Errors as
 * store.h (the caller keeps its batch for a retry on a transient one).
 */
ax_err ax_renderer_load_runs(ax_renderer *rn, ax_store *s, const int64_t *ids,
                             size_t n);

/*
 * Renders attempt ac of task t of dag (both NULL: the version is not
 * loaded, a render error) into *r. Strings of *r point into ac, dag, t
 * and *out, which the caller frees with ax_render_out_free() after r is
 * sent (also after a failure). Returns 0, or -1 with *err the message
 * (valid until *out is freed).
 */
int ax_renderer_render(ax_renderer *rn, const Ax__AttemptCreated *ac,
                       const ax_dag *dag, const ax_task *t,
                       Ax__AttemptRendered *r, ax_render_out **out,
                       const char **err);

/* Frees what a render kept (NULL is fine). */
void ax_render_out_free(ax_render_out *o);

/* Attempts rendered and failed so far (for the owner's stop line). */
void ax_renderer_counts(const ax_renderer *rn, uint64_t *rendered,
                        uint64_t *failed);

#endif /* AX_RENDERER_H */
