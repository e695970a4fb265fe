/*
 * store_instances.h - batched SQL of the task_instances table: the
 * idempotent insert of instances with their first or next attempt
 * (instance generator), the look-up by key, guarded state moves (result
 * handler, resource detector), the reason codes of waiting instances,
 * and the manual clear (dependency detector).
 *
 * Role: keeps the SQL of task_instances in one module; the actors fill
 * rows. Every call is one round trip per statement for the whole batch
 * (unnest of array literals, store_internal.h), prepared once per
 * connection.
 *
 * Invariants:
 *  - Instance state changes respect the state machine (the SQL trigger of
 *    0001_init.sql guards every UPDATE); only rows still in the expected
 *    state move, so a writer that lost a race changes nothing.
 *  - Try counting after a clear: the result handler retries while the
 *    attempt number is below task_instances.max_tries, and attempt
 *    numbers only grow (UNIQUE (instance_id, number)). A clear therefore
 *    sets max_tries = try_number + base (base = 1 + the task's retries),
 *    which gives the cleared instance its full budget again without
 *    renumbering attempts.
 *
 * Workload: the instance generator and result handler write thousands of
 * rows per second in batches of up to a few thousand; clears are rare.
 */
#ifndef AX_STORE_INSTANCES_H
#define AX_STORE_INSTANCES_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "state.h"
#include "store.h"

/*
 * One task instance (and its first or next attempt) for the batched,
 * idempotent insert. Strings are borrowed for the duration of the call.
 */
typedef struct ax_store_ti_row {
	/* in: the instance; its key is (dag_id, task, logical_time_us, shard)
	 */
	int64_t     dag_run_id;
	int64_t     dag_id;
	const char *task;
	int64_t     logical_time_us; /* the run's logical date, UTC us */
	int32_t     shard;           /* 0-based */
	int32_t     shard_total;     /* >= 1 */
	int32_t     priority;
	const char *channel;      /* "P0", "Px", "k8s", "biz"; NULL: "Px" */
	const char *worker_group; /* NULL: "default" */
	const char *pool;         /* NULL: none */
	int32_t     max_tries;    /* >= 1 */
	ax_ti_state state;        /* initial state: PENDING or READY */
	const char *reason;       /* reason code of the state; may be NULL */
	/* in: the attempt; run_id NULL creates no attempt */
	const char *run_id;    /* uuid text, fresh per attempt */
	int32_t     attempt;   /* attempt number, >= 1 */
	int64_t     due_at_us; /* theoretical start, UTC us */
	/* out */
	int64_t instance_id;     /* the row's id, new or existing */
	int     created;         /* 1 when this call inserted the instance */
	int     attempt_created; /* 1 when this call inserted the attempt */
	char    attempt_run_id[37]; /* run_id of attempt `attempt` as stored
	                               ("" when there is none) */
} ax_store_ti_row;

/*
 * Inserts n instances and their attempts in one transaction with two round
 * trips, ON CONFLICT DO NOTHING on every unique key: running it twice, or
 * from several writers at once, leaves one instance per key and one
 * attempt per (instance, number). Fills the out fields of every row; when
 * the attempt already existed (under another run_id) attempt_run_id is the
 * stored one, which the caller must dispatch instead of its own.
 * *inserted (may be NULL) counts the instances this call created.
 * AX_EINVAL names the first bad row (empty task, shard out of range, bad
 * initial state, n over AX_STORE_BATCH_MAX); AX_ENOENT when a dag or run id
 * does not exist; retries like ax_store_tx.
 */
ax_err ax_store_insert_instances(ax_store *s, ax_store_ti_row *rows, size_t n,
                                 size_t *inserted);

/*
 * Looks n instances up by their key (dag_id, task, logical_time_us, shard)
 * in one statement: sets instance_id of the rows that exist, 0 of the
 * others. Writes nothing, so a caller that only needs the ids of rows
 * already planned skips the insert's conflict checks. *found (may be
 * NULL) counts the rows found. AX_EINVAL when n is over AX_STORE_BATCH_MAX.
 */
ax_err ax_store_find_instances(ax_store *s, ax_store_ti_row *rows, size_t n,
                               size_t *found);

/* One guarded move of a task instance for ax_store_move_instances. */
typedef struct ax_store_ti_move {
	int64_t     instance_id;
	ax_ti_state from;   /* expected current state */
	ax_ti_state to;     /* new state */
	const char *reason; /* reason code, may be NULL */
	/* 1: from -> RUNNING -> to in one row write (both moves legal);
	 * started_at is set as a move to RUNNING sets it */
	int via_running;
	int applied; /* out: 1 when the row was in `from` and moved */
} ax_store_ti_move;

/*
 * Moves n instances in one statement: each row moves only when it is
 * still in its expected state (UPDATE ... WHERE state = from), so a writer
 * that lost a race changes nothing and sees applied = 0. Every move is
 * checked against the state machine first: an illegal one fails the whole
 * batch with AX_ESTATE before anything is written. Sets ready_at on READY,
 * started_at on RUNNING, ended_at on a terminal state, clears them on a
 * move back to PENDING. *applied (may be NULL) counts the moved rows.
 * With applied NULL inside a transaction the move is sent without waiting
 * for its answer (ax_store_write_deferred): moves[].applied stay 0 and
 * an error comes from the transaction's next statement or its COMMIT.
 * AX_EINVAL when an id appears twice or n is over AX_STORE_BATCH_MAX.
 */
ax_err ax_store_move_instances(ax_store *s, ax_store_ti_move *moves, size_t n,
                               size_t *applied);

/* One waiting instance, named by its key, whose reason code changes. */
typedef struct ax_store_ti_reason {
	const char *dag;  /* DAG name */
	const char *task; /* with logical_time_us and shard: the key */
	int64_t     logical_time_us;
	int32_t     shard;
	const char *reason;  /* the new reason code; NULL clears it */
	const char *only_if; /* change only a row whose reason is this one;
	                        NULL: whatever it is */
	int applied;         /* out: 1 when the row was found and changed */
} ax_store_ti_reason;

/*
 * Sets the reason of n instances that wait (PENDING or READY; a running
 * or finished instance keeps its own) in one statement, without changing
 * their state: the reason a waiting instance shows (axctl instance list,
 * the API) when the decision that holds it is not a state move, e.g.
 * DAG_PAUSED. A row that does not exist (yet) is not created: its
 * applied stays 0 and the caller may try again once it does. A write:
 * fenced (ax_store_write). *applied (may be NULL) counts the changed
 * rows. AX_EINVAL for an empty dag or task or n over AX_STORE_BATCH_MAX.
 */
ax_err ax_store_set_reasons(ax_store *s, ax_store_ti_reason *rows, size_t n,
                            size_t *applied);

/*
 * Clears n instances: each row in PENDING or a terminal state goes
 * (back) to PENDING with reason MANUAL_CLEAR, its timestamps cleared and
 * max_tries = try_number + base[i] (see "Try counting" above); READY,
 * RUNNING and UNKNOWN rows are left alone. *cleared (may be NULL) counts
 * the rows changed. One statement.
 */
ax_err ax_store_deps_clear(ax_store *s, const int64_t *ids,
                           const int32_t *base, size_t n, size_t *cleared);

/* One instance that has stayed in READY, RUNNING or UNKNOWN too long. */
typedef struct ax_store_stuck {
	int64_t instance_id;
	int64_t dag_run_id;
	int64_t dag_version_id; /* of its run */
	int64_t since_us;       /* updated_at: its last state change */
	int     try_number;
	char    state[16];
	char    dag[256];
	char    task[256];
} ax_store_stuck;

/*
 * Up to max instances in READY, RUNNING or UNKNOWN whose last change
 * (updated_at) is older than older_than_us by the database clock, the
 * oldest first, into out; *n gets how many. PENDING is not included:
 * waiting for an upstream or a time can last days by design. Reads the
 * partial index of unfinished instances (task_instances_active_idx), so
 * its cost follows the unfinished instances, never the history. Any
 * thread that owns s.
 */
ax_err ax_store_stuck_instances(ax_store *s, int64_t older_than_us,
                                ax_store_stuck *out, size_t max, size_t *n);

/* Register on s, without running them (for ax_store_warm, store.h), the
 * statements of ax_store_insert_instances; of ax_store_move_instances. */
ax_err ax_store_insert_instances_prepare(ax_store *s);
ax_err ax_store_move_instances_prepare(ax_store *s);

#endif /* AX_STORE_INSTANCES_H */
