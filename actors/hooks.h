/*
 * hooks.h - the pre_hook and post_hook actors, built from one const ops
 * table of hooks (actors/hooks.c).
 *
 * pre_hook: AttemptRendered (renderer) -> checks, then the queue. Built-in
 * pre hooks, in order:
 *   "dag_paused"  the DAG was paused after admission: the attempt is held
 *                 (AttemptHeld, reason DAG_PAUSED, to resource_detector,
 *                 which frees its slot and re-admits it on unpause; the
 *                 attempt keeps its run_id);
 *   "canceled"    the instance was canceled (a CancelInstance seen by
 *                 pre_hook): the attempt is not dispatched; an
 *                 AttemptResult CANCELED goes to result_handler so the
 *                 instance and its slot are settled.
 * CancelInstance sent to pre_hook is remembered (bounded) and forwarded
 * to the queue, so one message covers both "not dispatched yet" and
 * "queued or running".
 *
 * post_hook: AttemptResult (queue) -> post hooks -> result_handler, and
 * one event per result. Built-in post hook: "log_location" records the
 * attempt's log path in that event.
 *
 * Adding a hook: one entry in the table in hooks.c with .pre and/or
 * .post; pre hooks return a verdict (pass, hold, drop), post hooks add
 * fields to the event payload.
 */
#ifndef AX_HOOKS_H
#define AX_HOOKS_H

#include "pipeline.h"

/* Adds the actors "pre_hook" and "post_hook"; ctx must outlive sys. */
ax_err ax_hooks_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx);

/* Adds one of them (tests compose subsets). */
ax_err ax_pre_hook_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx);
ax_err ax_post_hook_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx);

#endif /* AX_HOOKS_H */
