/*
 * time_detector.h - the time detector actor (DESIGN.md 2): every armed
 * schedule and one-shot timer in a hierarchical timing wheel, one OS
 * deadline for the nearest.
 *
 * Role: ScheduleArmed / ScheduleDisarmed from the DAG loader; TimerSet /
 * TimerCancel from the result handler (and other actors); ControlOp
 * "trigger" from the control thread (a trigger with a command_id marks
 * its control_command row applied, with the run id, in the transaction
 * that creates the run, or rejected when its DAG does not exist or has a
 * run at that logical date). When schedules come due it creates
 * their DAG runs and advances their next fire times in ONE transaction per
 * tick, then sends Due to the dependency detector. A retry timer sends the
 * InstanceReady it carries to the resource detector; other timers send
 * TimerFired to the actor named in TimerSet.notify.
 *
 * Clocks: the wheel runs on the monotonic clock; a schedule due at a UTC
 * instant is armed at mono_now + (utc_due - utc_now). At every tick the
 * UTC-minus-monotonic offset is compared with the last one; a move of
 * more than 2 s is a wall-clock jump: logged with its size (reason
 * CLOCK_JUMP) and every schedule re-armed from its UTC instant.
 *
 * Prepare ahead: a schedule fires scheduler.prepare_ahead (default
 * 500 ms) before its due instant. Its run, instances and root attempts
 * are then created, admitted and rendered while there is time, and the
 * queue service holds each attempt until its due_at, so the transactions
 * of the chain are off the critical path: the start latency is the
 * queue's release plus the worker's pull. The run's period and due_at are
 * those of the due instant. Missed periods (next fire already past) are
 * collected up to now only, so catchup off still creates the latest
 * missed period.
 *
 * Restart and downtime: next_fire_at is persisted in the same transaction
 * as the runs it creates, so a restart neither skips nor repeats a period;
 * a schedule armed with a next fire in the past creates the missed
 * periods (catchup on) or only the latest (catchup off), at most
 * AX_TIME_DETECTOR_CATCHUP_MAX per tick (logged as CATCHUP_CAPPED; the
 * rest follow at the next ticks, none is lost).
 *
 * Workload: 10,000+ armed schedules, ~170 fires per second; a fire must
 * leave as Due within a millisecond or two of its instant.
 */
#ifndef AX_TIME_DETECTOR_H
#define AX_TIME_DETECTOR_H

#include "actor.h"
#include "pipeline.h"

#define AX_TIME_DETECTOR_CATCHUP_MAX 1000 /* runs per schedule per tick */

/* Counters of the time detector (for tests and the stop log line). */
typedef struct ax_time_detector_stats {
	uint64_t fires;        /* runs created by schedules */
	uint64_t manual;       /* manual runs created */
	uint64_t timers_fired; /* TimerSet timers fired */
	uint64_t clock_jumps;  /* wall-clock jumps detected */
	int64_t  max_late_us;  /* worst Due send time - fire instant */
	uint64_t armed;        /* schedules armed now */
	uint64_t specs;        /* distinct schedule specs (at stop) */
	uint64_t compiled;     /* specs compiled in memory now (a bound) */
	uint64_t swept;        /* schedules of vanished DAGs disarmed */
} ax_time_detector_stats;

/*
 * Adds the time detector (AX_A_TIME_DETECTOR) to sys. ctx must outlive
 * the system. Opens its own PostgreSQL connection. Errors: store errors
 * (AX_EDBCONN), those of ax_actor_system_add, AX_ENOMEM.
 */
ax_err ax_time_detector_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx);

/*
 * As ax_time_detector_add; the actor also keeps its counters in *stats
 * (may be NULL), which the caller owns and reads once the system stopped.
 */
ax_err ax_time_detector_add_ex(ax_actor_system        *sys,
                               const ax_pipeline_ctx  *ctx,
                               ax_time_detector_stats *stats);

#endif /* AX_TIME_DETECTOR_H */
