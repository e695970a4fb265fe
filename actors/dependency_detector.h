/*
 * dependency_detector.h - the dependency detector actor
 * ("dependency_detector", DESIGN.md 2): it owns DAG runs. Its code is in
 * actors/dependency/ (one file per concept, see dependency_internal.h).
 *
 * Inputs and outputs:
 *  - Due (time detector): the run is planned: RunPlan commands to
 *    instance_generator listing every task x shard (PENDING, reason
 *    WAIT_DEPENDENCY for tasks with upstreams and WAIT_RESOURCE for
 *    roots), at most 2,000 instances per command, so a large run is
 *    planned in several (the generator's insert is idempotent per
 *    instance, so they compose); then one InstanceReady per root instance
 *    to resource_detector (past 16,384 waiting in the outbox they are
 *    kept in order and sent from the tick as it drains). dag_runs goes
 *    QUEUED -> RUNNING.
 *  - InstanceSucceeded (result handler): the per-run counters of unmet
 *    upstream instances of its downstream tasks drop; exactly the tasks
 *    whose counter reaches 0 are released (InstanceReady per shard).
 *  - InstanceFinished (terminal non-success after the last try): its
 *    downstreams stay PENDING with reason WAIT_DEPENDENCY (one batched
 *    UPDATE of the rows' reason).
 *  - Run completion: when no instance of a run is in flight any more, the
 *    run is finished: SUCCESS when every instance succeeded, FAILED
 *    otherwise (a failed instance leaves its downstreams waiting; a clear
 *    brings the run back). dag_runs state and ended_at (batched), event
 *    run.succeeded / run.failed, and RunCompleted to itself.
 *  - depends_on_dags: a run whose DAG depends on other DAGs is held
 *    (dag_runs.reason WAIT_DEPENDENCY, event run.waiting) until each
 *    upstream is met: same_period = the upstream's run of the same
 *    logical date succeeded; latest_success = the upstream's latest
 *    finished run succeeded. PostgreSQL is checked once at plan time;
 *    later RunCompleted (SUCCESS) of the upstream releases the wait.
 *  - Run-level concurrency per DAG: at most max_active_runs active runs;
 *    a new run beyond it is, by policy: serial / parallel - held (reason
 *    CONCURRENCY_BLOCKED, started in logical order as runs finish);
 *    discard - CANCELED with CONCURRENCY_BLOCKED; replace - the oldest
 *    active run is CANCELED with SUPERSEDED (its PENDING instances
 *    CANCELED, its READY/RUNNING ones canceled through instance_generator ->
 *    queue with CancelInstance) and the new run starts. A run prepared
 *    ahead of its due instant that finds the DAG full under discard or
 *    replace is held, and a TimerSet (TIMER_GATE) to the time detector
 *    brings it back at the instant, when the overlap is judged.
 *  - ControlOp (control thread): "clear" {instance_id, downstream}: the
 *    instance (and every transitive downstream when asked) goes back to
 *    PENDING with reason MANUAL_CLEAR and a fresh try budget
 *    (store_deps.h), the run is rebuilt from PostgreSQL and what is
 *    ready is released. "mark" {instance_id, state}: the API already
 *    wrote the state; the run is rebuilt, so a SUCCESS releases its
 *    downstreams. "backfill" {run_ids, mode}: the API created the runs;
 *    they are planned like Due ones, bypassing the DAG's overlap policy:
 *    serial = one backfill run of the DAG at a time, in logical order;
 *    parallel = all at once. An op with a command_id (a control_command
 *    row) is applied once: a clear marks its row applied in the clear's
 *    own transaction and rolls back when the row is no longer pending;
 *    mark and backfill claim their row before the run is re-read; an op
 *    naming no instance is rejected.
 *  - Restart: the first tick (or the first batch, whichever comes first)
 *    reads every unfinished run with its instances in ONE query, rebuilds
 *    the counters (SUCCESS counts as met), re-sends InstanceReady for
 *    PENDING / READY instances whose upstreams are met (the instance
 *    generator and resource detector are idempotent), re-sends the plan of
 *    a run with missing instance rows, and plans runs that have none.
 *
 * Invariants: an instance is released at most once per clear (its
 * in-memory state moves WAIT -> SENT once); a duplicate InstanceSucceeded
 * or InstanceFinished changes nothing; PostgreSQL is written once per
 * batch (one transaction) before RunCompleted leaves.
 *
 * Workload: hundreds of Due per second (10,000 schedules, ~170 fires/s)
 * and thousands of instance results per second. Everything is O(1) per
 * message plus O(downstreams) per release; a finished run is dropped from
 * memory.
 */
#ifndef AX_DEPENDENCY_DETECTOR_H
#define AX_DEPENDENCY_DETECTOR_H

#include "actor.h"
#include "pipeline.h"

/* Counters (for tests and the stop log line). */
typedef struct ax_dependency_detector_stats {
	uint64_t planned;    /* runs planned (RunPlan sent) */
	uint64_t released;   /* InstanceReady sent */
	uint64_t succeeded;  /* runs finished SUCCESS */
	uint64_t failed;     /* runs finished FAILED */
	uint64_t held;       /* runs held (concurrency or upstream DAG) */
	uint64_t discarded;  /* runs discarded */
	uint64_t superseded; /* runs superseded (replace) */
	uint64_t rebuilt;    /* runs rebuilt from PostgreSQL */
	uint64_t startups;   /* start-up rebuilds done (0 or 1) */
	uint64_t cleared;    /* instances cleared */
	uint64_t versions;   /* DAG version graphs in memory now */
	uint64_t deadlines_missed; /* deadline misses recorded */
} ax_dependency_detector_stats;

/*
 * Adds the actor "dependency_detector" (address from config
 * actors.dependency_detector) to sys; opens its own PostgreSQL
 * connection. ctx must outlive the system. Errors: AX_EDBCONN, those of
 * ax_actor_system_add, AX_ENOMEM.
 */
ax_err ax_dependency_detector_add(ax_actor_system       *sys,
                                  const ax_pipeline_ctx *ctx);

/* As ax_dependency_detector_add; *stats (may be NULL, owned by the
 * caller) receives the counters; read it once the system stopped. */
ax_err ax_dependency_detector_add_ex(ax_actor_system              *sys,
                                     const ax_pipeline_ctx        *ctx,
                                     ax_dependency_detector_stats *stats);

#endif /* AX_DEPENDENCY_DETECTOR_H */
