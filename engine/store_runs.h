/*
 * store_runs.h - batched SQL of the dag_runs table: runs created by the
 * time detector together with their schedules' next fire times, and the
 * run life of the dependency detector (start, hold, finish, discard,
 * supersede), the reason codes of a run's waiting instances, cross-DAG
 * dependency checks, and the one-pass read of unfinished runs a restart
 * rebuilds its counters from.
 *
 * Role: keeps the SQL of dag_runs in one module; the actors fill rows.
 * Every hot-path call is one round trip for the whole batch (unnest of
 * array literals, store_internal.h), prepared once per connection.
 *
 * Invariants:
 *  - Instants cross this API as UTC microseconds; 0 means SQL NULL where
 *    a field says so.
 *  - Run creation is idempotent on (dag_id, logical_date): a run that
 *    exists is reported with run_id 0 and is not touched, so a replayed
 *    fire never creates or announces a run twice.
 *  - Only rows still in the expected state move, so a writer that lost a
 *    race changes nothing.
 *
 * Workload: the time detector creates up to a few hundred runs per tick;
 * one run update per Due and per run completion (hundreds per second,
 * batched per handler call); restart reads every unfinished run once.
 */
#ifndef AX_STORE_RUNS_H
#define AX_STORE_RUNS_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "store.h"

/* --- time detector ------------------------------------------------------
 */

/* One DAG run to create (and the schedule it advances, if any). */
typedef struct ax_store_run_row {
	/* in */
	int64_t     dag_id;
	int64_t     dag_version_id;
	const char *run_type; /* "scheduled" | "manual" | "backfill" */
	int64_t     logical_us;
	int64_t     interval_start_us, interval_end_us;
	int64_t     due_us;       /* the fire instant (theoretical start) */
	const char *conf_json;    /* params of a manual run; NULL: {} */
	int64_t     schedule_id;  /* 0: no schedule to update */
	int64_t     next_fire_us; /* schedules.next_fire_at; 0: NULL */
	/* out */
	int64_t run_id; /* new dag_runs.id; 0 when the run existed */
} ax_store_run_row;

/*
 * In the caller's transaction (or its own when none is open): inserts the
 * n runs (ON CONFLICT (dag_id, logical_date) DO NOTHING, state QUEUED,
 * due_at), then sets next_fire_at / last_fire_at of their schedules (the
 * last row of a schedule wins) — two prepared statements, one round trip
 * each. Fills run_id. AX_EINVAL for n over AX_STORE_BATCH_MAX.
 */
ax_err ax_store_sched_create_runs(ax_store *s, ax_store_run_row *rows,
                                  size_t n);

/* --- dependency detector ------------------------------------------------
 */

/* Columns of ax_store_deps_load_runs' result (one row per instance; a
 * run without instances has one row with NULL instance columns). */
enum {
	AX_DEPS_C_RUN = 0,   /* dag_runs.id */
	AX_DEPS_C_DAG,       /* dags.name */
	AX_DEPS_C_DAG_ID,    /* dags.id */
	AX_DEPS_C_VERSION,   /* dag_runs.dag_version_id */
	AX_DEPS_C_LOGICAL,   /* logical date, UTC us */
	AX_DEPS_C_DUE,       /* due_at (created_at when NULL), UTC us */
	AX_DEPS_C_RUN_STATE, /* dag_runs.state */
	AX_DEPS_C_RUN_TYPE,  /* scheduled | manual | backfill */
	AX_DEPS_C_TASK,      /* task_instances.task or NULL */
	AX_DEPS_C_SHARD,     /* shard */
	AX_DEPS_C_TI_STATE,  /* state */
	AX_DEPS_C_TI_REASON, /* reason or NULL */
	AX_DEPS_C_TI_ID,     /* task_instances.id */
	AX_DEPS_C_IV_START,  /* interval_start, UTC us */
	AX_DEPS_C_IV_END,    /* interval_end, UTC us */
	AX_DEPS_C_COUNT_
};

/*
 * Reads runs with their instances, ordered by logical date then run id:
 * the n runs of run_ids, or (run_ids NULL) every unfinished run (state
 * QUEUED or RUNNING) of non-deleted DAGs. The caller PQclear()s *res.
 * AX_EINVAL for n over AX_STORE_BATCH_MAX.
 */
ax_err ax_store_deps_load_runs(ax_store *s, const int64_t *run_ids, size_t n,
                               PGresult **res);

/* One change of a dag_runs row. */
typedef struct ax_store_run_change {
	int64_t     run_id;
	const char *state;    /* QUEUED, RUNNING, SUCCESS, FAILED, CANCELED */
	const char *reason;   /* reason code; NULL clears it */
	int64_t     ended_us; /* terminal states: ended_at; 0: now() */
} ax_store_run_change;

/*
 * Applies n run changes in one statement (the last change of a run
 * wins): state and reason; started_at is set on the first RUNNING;
 * ended_at is set for terminal states and cleared otherwise.
 */
ax_err ax_store_deps_runs_update(ax_store *s, const ax_store_run_change *c,
                                 size_t n);

/*
 * Sets reason on the PENDING instances of (run_ids[i], tasks[i]), i <
 * n, whose reason differs: one statement. *updated (may be NULL) counts
 * the rows changed.
 */
ax_err ax_store_deps_wait_reason(ax_store *s, const int64_t *run_ids,
                                 const char *const *tasks, size_t n,
                                 const char *reason, size_t *updated);

/*
 * Supersedes the n runs: their PENDING instances move to CANCELED with
 * reason SUPERSEDED (ended_at now). *live receives the instances that
 * are still READY, RUNNING or UNKNOWN (columns: 0 id, 1 dag_run_id, 2
 * task, 3 shard, 4 shard_total), which the caller cancels through the
 * queue; it PQclear()s it. Call inside the transaction that also marks
 * the runs CANCELED.
 */
ax_err ax_store_deps_supersede(ax_store *s, const int64_t *run_ids, size_t n,
                               PGresult **live);

/*
 * The guard of new instances against their run's end, inside the
 * caller's transaction, after it wrote the instances of run_ids (n,
 * duplicates and zeros fine): locks those dag_runs rows (FOR SHARE, in
 * id order) and moves the PENDING instances of the runs that are
 * CANCELED to CANCELED, with the run's reason (SUPERSEDED, ...; else
 * RUN_CANCELED). *canceled (may be NULL) counts them. With canceled
 * NULL nothing is waited for: both statements travel with the
 * transaction's next statement or its COMMIT (ax_store_write_deferred).
 *
 * Why: a run can be superseded or canceled while its plan and its first
 * admissions are still on their way through the pipeline (even in the
 * same batch that started it); ax_store_deps_supersede then finds no
 * rows to cancel, and the instances written after it would run. The
 * lock closes the window: a supersede that marked the run first is
 * waited for and seen; one that comes second waits for this transaction
 * and then finds its rows.
 */
ax_err ax_store_runs_guard(ax_store *s, const int64_t *run_ids, size_t n,
                           size_t *canceled);

/* Prepares ax_store_runs_guard's statements on s without running them
 * (for ax_store_warm, engine/store.h). */
ax_err ax_store_runs_guard_prepare(ax_store *s);

/* One cross-DAG dependency to check at plan time. */
typedef struct ax_store_dagdep_check {
	const char *upstream;    /* upstream DAG name */
	int         same_period; /* 1: same_period, 0: latest_success */
	int64_t     logical_us;  /* same_period: the period's logical date */
	int         met;         /* out */
} ax_store_dagdep_check;

/*
 * Fills met for n checks in one statement. same_period: the upstream DAG
 * has a SUCCESS run with that logical date. latest_success: the upstream
 * DAG's latest finished run (SUCCESS or FAILED, by logical date)
 * succeeded.
 */
ax_err ax_store_deps_check_dags(ax_store *s, ax_store_dagdep_check *c,
                                size_t n);

/*
 * The dag_runs id of task instance instance_id (hot or in history) into
 * *run_id. AX_ENOENT (detail names the id) when there is no such
 * instance.
 */
ax_err ax_store_deps_instance_run(ax_store *s, int64_t instance_id,
                                  int64_t *run_id);

/*
 * In the caller's transaction (a fenced one, ax_store_tx): whether the
 * deadline at deadline_us of run run_id (task NULL or "": the run's own
 * deadline, else that task's) is a miss not recorded yet. Locks the
 * dag_runs row first, so two callers (a restarted axd and a late timer)
 * serialise and the second sees the first's event. The recorded miss is
 * the event_log row run.deadline_missed / instance.deadline_missed of the
 * run (and payload.task), written by the caller in the same transaction.
 * On AX_OK state (len bytes) holds the state at the deadline: the run's
 * (QUEUED, RUNNING, FAILED, or SUCCESS when it came after the deadline),
 * or the task's first unsuccessful state (its instances read hot or in
 * history; NOT_PLANNED when it has no instance yet); "" when the deadline
 * was met, the run is gone or CANCELED (discarded or superseded by its
 * DAG's overlap policy, or killed: nobody waits for it any more) or the
 * miss is already recorded.
 */
ax_err ax_store_deadline_check(ax_store *s, int64_t run_id, const char *task,
                               int64_t deadline_us, char *state, size_t len);

#endif /* AX_STORE_RUNS_H */
