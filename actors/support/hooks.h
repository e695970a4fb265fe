/*
 * hooks.h - the pre and post hooks, built from one const ops table of
 * hooks (support/hooks.c). Not actors: the instance generator runs the pre
 * hooks on each rendered attempt inside its batch, the result handler
 * runs the post hooks on each worker report inside its batch; neither
 * costs a message or a transaction (docs/pipeline.md).
 *
 * Pre hooks: a rendered attempt -> a verdict. Built-in, in order:
 *   "dag_paused"  the DAG was paused after admission: the attempt is held
 *                 (the instance generator sends AttemptHeld, reason
 *                 DAG_PAUSED, to resource_detector, which frees its slot
 *                 and re-admits it on unpause; the attempt keeps its
 *                 run_id);
 *   "canceled"    the instance was canceled (a CancelInstance seen by the
 *                 instance generator, ax_hooks_cancel): the attempt is not
 *                 dispatched; an AttemptResult CANCELED goes to
 *                 result_handler so the instance and its slot are settled.
 * The instance generator forwards each CancelInstance to the queue after
 * remembering it, so one message covers both "not dispatched yet" and
 * "queued or running".
 *
 * Post hooks: a worker's AttemptResult -> the report the result handler
 * writes into the event of the move the result causes. Built-in post
 * hook: "log_location" records the attempt's log path.
 *
 * Adding a hook: one entry in the table in hooks.c with .pre and/or
 * .post; pre hooks return a verdict (pass, hold, drop), post hooks add
 * fields to the report.
 *
 * Threads: an ax_hooks belongs to one actor thread (the instance
 * generator's); ax_hooks_post keeps no state and may run anywhere.
 */
#ifndef AX_HOOKS_H
#define AX_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline.h"

typedef enum ax_hook_verdict {
	AX_HOOK_PASS = 0,
	AX_HOOK_HOLD, /* back to resource_detector until the rule lifts */
	AX_HOOK_DROP, /* never dispatched: reported CANCELED */
} ax_hook_verdict;

typedef struct ax_hooks ax_hooks;

/* The pre hooks' state (the canceled set) for ctx; ctx must outlive it.
 * AX_ENOMEM. */
ax_err ax_hooks_new(const ax_pipeline_ctx *ctx, ax_hooks **out);

/* Frees h (NULL is fine). */
void ax_hooks_free(ax_hooks *h);

/* Remembers that instance_id was canceled (bounded; 0 is ignored). */
void ax_hooks_cancel(ax_hooks *h, int64_t instance_id);

/*
 * Runs the pre hooks on r: the first verdict other than AX_HOOK_PASS
 * wins, with *reason its reason code and *hook the hook's name (both
 * static strings; NULL / the last hook run on a pass).
 */
ax_hook_verdict ax_hooks_pre(const ax_hooks *h, const Ax__AttemptRendered *r,
                             const char **reason, const char **hook);

/*
 * Writes the post hooks' report of res into buf (cap bytes, at least 4):
 * a JSON object {"status":..., "worker":..., <hook members>}, truncated
 * to fit. Returns its length.
 */
size_t ax_hooks_post(const Ax__AttemptResult *res, char *buf, size_t cap);

#endif /* AX_HOOKS_H */
