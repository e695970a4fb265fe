/*
 * result_handler.h - the result handler actor ("result_handler").
 *
 * Role (DESIGN.md 2): AttemptResult (the queue, forwarding a worker's
 * report; RENDER_ERROR and CANCELED-before-dispatch from the instance
 * generator) -> the post hooks (hooks.h, function calls: the report of
 * each worker result) and in ONE transaction per batch the
 * attempt rows (worker, dispatched_at, started_at, ended_at, exit status,
 * state, reason, log path), the guarded instance moves and their events
 * (instance.running, instance.succeeded, instance.failed,
 * instance.timeout, instance.unknown, instance.canceled,
 * instance.preempted, instance.retry_scheduled); after the commit:
 *  - SUCCESS -> InstanceSucceeded to dependency_detector;
 *  - FAILED / TIMEOUT with tries left -> instance back to PENDING (reason
 *    RETRY_SCHEDULED) and TimerSet{TIMER_RETRY, fire_at = now + backoff,
 *    ready = the InstanceReady} to time_detector; backoff from the task's
 *    retries: fixed delay, or exponential delay x 2^(attempt-1) capped at
 *    max_delay; a RENDER_ERROR is not retried (it would fail again);
 *  - CANCELED with reason PREEMPTED after the start (the queue stopped
 *    it for a higher tier) -> PENDING (reason PREEMPTED, no try used),
 *    due again at a jittered instant fixed now (instance.retry_scheduled
 *    stores it); held in the actor's recovery throttle
 *    (ax_preempt_throttle: at most preemption.recovery_rate a second,
 *    highest tier first) and sent on as InstanceReady to
 *    resource_detector at its turn (instance.recovery_released); those
 *    an earlier axd left waiting are read back at the first tick;
 *  - no tries left (and CANCELED) -> InstanceFinished to
 *    dependency_detector;
 *  - UNKNOWN (worker lost) -> RUNNING -> UNKNOWN, retried like a failure
 *    (the retry moves UNKNOWN -> READY); no tries left -> FAILED;
 *  - every attempt that stops holding its slot -> SlotReleased (once per
 *    attempt) to resource_detector.
 *
 * Reconciliation: results are keyed by run_id. A result for an attempt
 * that is not the instance's current one updates only that attempt row.
 * A late result for the current attempt of an UNKNOWN instance is applied
 * (UNKNOWN -> SUCCESS | FAILED) and cancels the pending retry timer. A
 * result for an attempt already terminal is a duplicate: it fills only
 * timestamps still missing, so a SUCCESS is never counted twice. A
 * SUCCESS that arrives before (or in the same batch as) its STARTED moves
 * READY -> RUNNING -> SUCCESS.
 *
 * Back edges: it sends without blocking (send_nonblock).
 */
#ifndef AX_RESULT_HANDLER_H
#define AX_RESULT_HANDLER_H

#include "pipeline.h"

/* Adds the actor "result_handler" to sys; ctx must outlive the system. */
ax_err ax_result_handler_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx);

#endif /* AX_RESULT_HANDLER_H */
