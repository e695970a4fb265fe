/*
 * store_attempts.h - batched SQL of the attempts table: admission of
 * task instances (instance READY + a new attempt), the attempt side of
 * worker results, and the dispatches the queue service records. It
 * includes store_instances.h and store_events.h, whose functions its
 * callers use with these in one transaction.
 *
 * Role: the instance generator admits instances with ax_store_admit()
 * (after making sure the rows exist with ax_store_insert_instances); the
 * result handler locks the attempts a batch of results talks about with
 * ax_store_lock_attempts(), moves instances with ax_store_move_instances()
 * and writes the attempt columns with ax_store_update_attempts(); every
 * actor that changes state writes its events with ax_store_insert_events()
 * in the same transaction; the event emitter writes the others, and keeps
 * those PostgreSQL refuses with ax_store_dead_letter_event(). The
 * queue service records each dispatch (the worker it goes to) with
 * ax_store_record_dispatches() before sending it, and after a start
 * reads back what may be running with ax_store_load_in_doubt().
 *
 * Invariants:
 * - The current attempt of an instance is its attempt with the highest
 *   number; task_instances.try_number is kept equal to that number.
 * - Admission is idempotent: an instance already READY with a QUEUED or
 *   DISPATCHED current attempt is not admitted again; the call returns the
 *   stored run_id so the caller dispatches that one (a replayed admission
 *   creates nothing).
 * - Every function runs inside the caller's transaction when one is open
 *   (so a state change and its events commit together), else in its own.
 * - Rows are locked in id order (FOR UPDATE), so concurrent writers of the
 *   same instances queue instead of deadlocking.
 *
 * Workload: batches of up to a few thousand rows; one round trip per
 * statement per batch (unnest of array parameters), prepared statements.
 */
#ifndef AX_STORE_ATTEMPTS_H
#define AX_STORE_ATTEMPTS_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "state.h"
#include "store.h"

#include "store_events.h"    /* the events written with these moves */
#include "store_instances.h" /* ax_store_ti_* and the instance moves */

/* ---------------------------------------------------------------------- */
/* admission */

typedef enum ax_admit_action {
	AX_ADMIT_NEW = 0, /* moved to READY (or was READY without attempt)
	                     and a new attempt was created */
	AX_ADMIT_REPLAY,  /* already READY with a queued attempt: dispatch
	                     the stored run_id again */
	AX_ADMIT_SKIP,    /* RUNNING, terminal, ...: nothing to do */
	AX_ADMIT_MISSING, /* no such instance */
} ax_admit_action;

/* One instance to admit. */
typedef struct ax_store_admit_row {
	/* in: the instance by id, or (instance_id 0) by its key, the unique
	 * key of task_instances; the id found is written back */
	int64_t     instance_id;
	int64_t     dag_id;
	const char *task;
	int64_t     logical_time_us;
	int32_t     shard;
	int64_t     due_at_us; /* theoretical start of the attempt, UTC us */
	int64_t     admitted_at_us; /* decision time, UTC us */
	/* the worker group it was admitted to, written on its row when the
	 * task may run in several (NULL: the row's stays) */
	const char *worker_group;
	/* out */
	ax_admit_action action;
	ax_ti_state     state_before; /* instance state found */
	int32_t         attempt;      /* number of the attempt to dispatch */
	char            run_id[37];   /* its run_id ("" on SKIP/MISSING) */
} ax_store_admit_row;

/*
 * Admits n instances: locks them (by id or by key, one statement), moves
 * PENDING / UNKNOWN ones to READY (guarded move, reason cleared) and
 * creates their next attempt with a fresh run_id (engine/uuid.h), due_at
 * and admitted_at; READY ones with a QUEUED / DISPATCHED current attempt
 * are replays; an instance that does not exist is AX_ADMIT_MISSING.
 * Fills the out fields. An instance given twice is admitted once (the
 * second row is a REPLAY of the first). The writes are sent without
 * waiting (ax_store_write_deferred): inside the caller's transaction
 * they travel with its next statement or its COMMIT, one round trip for
 * the lock and none of their own. Errors: AX_EINVAL (n over
 * AX_STORE_BATCH_MAX), database errors as store.h (an attempt that
 * exists already is AX_EEXIST, a bug elsewhere: nothing is written);
 * retried like ax_store_tx when no transaction is open.
 */
ax_err ax_store_admit(ax_store *s, ax_store_admit_row *rows, size_t n);

/* ---------------------------------------------------------------------- */
/* results */

/* What ax_store_lock_attempts found for one run_id. */
typedef struct ax_store_attempt_info {
	int         found;      /* 0: no attempt with this run_id */
	int32_t     number;     /* attempt number */
	char        state[16];  /* attempts.state */
	int         is_current; /* 1: the instance's highest attempt */
	int         has_worker; /* attempts.worker_id is set */
	int64_t     instance_id;
	ax_ti_state ti_state;
	int32_t     max_tries;
	int64_t     dag_run_id;
	int64_t     dag_version_id; /* of the run */
	int64_t     logical_time_us;
	int32_t     shard, shard_total, priority;
	char        dag[256];
	char        task[256];
	char        channel[8];
	char        worker_group[256];
	char        pool[256]; /* "" for none */
} ax_store_attempt_info;

/*
 * Looks up the attempts of run_ids[0..n) (uuid text; invalid ones are
 * reported not found) with their instances, locking the instances
 * (FOR UPDATE, id order). out[i] answers run_ids[i]. Call inside a
 * transaction to keep the locks (the result handler does). Errors as
 * store.h; AX_EINVAL when n is over AX_STORE_BATCH_MAX.
 */
ax_err ax_store_lock_attempts(ax_store *s, const char *const *run_ids,
                              size_t n, ax_store_attempt_info *out);

/* One instance waiting for its recovery after a preemption. */
typedef struct ax_store_preempted {
	int64_t instance_id;
	char    run_id[37]; /* its current (preempted) attempt */
	int64_t fire_at_us; /* due again (UTC us); 0: no event says when */
} ax_store_preempted;

/*
 * The instances preempted and not ready again yet (PENDING, reason
 * PREEMPTED) with an id above after_id, by id, at most max: each with
 * the due instant of its last instance.retry_scheduled event of reason
 * PREEMPTED (payload fire_at_us). *n: how many were written. For the
 * result handler's start (its throttle is in memory). Errors as store.h.
 */
ax_err ax_store_preempted_list(ax_store *s, int64_t after_id,
                               ax_store_preempted *out, size_t max, size_t *n);

/* New values for one attempt row; 0 / NULL members keep the stored value
 * (timestamps already set are never overwritten). */
typedef struct ax_store_attempt_update {
	const char *run_id;    /* uuid text */
	const char *state;     /* new attempts.state (required) */
	const char *worker_id; /* NULL: keep */
	int64_t     dispatched_at_us;
	int64_t     started_at_us;
	int64_t     ended_at_us;
	int         has_exit; /* exit_status is set from exit_status */
	int32_t     exit_status;
	const char *reason;   /* NULL: keep */
	const char *log_path; /* NULL: keep */
} ax_store_attempt_update;

/*
 * Writes n attempt rows in one statement; *updated (may be NULL) counts
 * the rows found. The caller decides the state (the result handler keeps
 * a terminal state terminal). With updated NULL inside a transaction the
 * statement is sent without waiting for its answer
 * (ax_store_write_deferred). AX_EINVAL for a bad run_id or state.
 */
ax_err ax_store_update_attempts(ax_store *s, const ax_store_attempt_update *u,
                                size_t n, size_t *updated);

/* ---------------------------------------------------------------------- */
/* dispatch and reconciliation */

/* One dispatch the queue service records before it sends it. */
typedef struct ax_store_dispatch_row {
	const char *run_id;    /* uuid text */
	const char *worker_id; /* required */
	int64_t     dispatched_at_us;
	const char *command;  /* as rendered and sent; NULL: keep the stored */
	int         recorded; /* out: 1 when the row now names worker_id */
} ax_store_dispatch_row;

/*
 * Records n dispatches: each attempt still QUEUED or DISPATCHED becomes
 * DISPATCHED to its worker (dispatched_at kept when already set) and is
 * marked recorded; one found RUNNING, terminal or UNKNOWN, or not found,
 * is left as it is (recorded 0: it must not be sent). So a restarted or
 * new axd knows which worker may hold each attempt (see
 * ax_store_load_in_doubt). Runs in the caller's transaction or its own
 * (retried like ax_store_tx). AX_EINVAL for a row without worker or n over
 * AX_STORE_BATCH_MAX; database errors as store.h.
 */
ax_err ax_store_record_dispatches(ax_store *s, ax_store_dispatch_row *rows,
                                  size_t n);

/* An attempt that may be running on a worker, as found at a start. */
typedef struct ax_store_in_doubt {
	char    run_id[37];
	char    state[16];      /* DISPATCHED or RUNNING */
	char    worker_id[256]; /* the worker that was sent it */
	int32_t worker_pid;     /* workers.pid; 0 when unknown */
	char    hostname[256];  /* workers.hostname; "" when unknown */
	int     has_lease;      /* the worker has a workers row */
	int64_t lease_left_us;  /* its lease_expires_at - now() on the
	                           database clock (negative: lapsed) */
} ax_store_in_doubt;

/*
 * Lists the DISPATCHED and RUNNING attempts that name a worker, ordered
 * by worker: what the queue service must reconcile with the workers
 * before it dispatches any of them again. *out (freed by the caller with
 * free()) holds *n rows. Errors as store.h.
 */
ax_err ax_store_load_in_doubt(ax_store *s, ax_store_in_doubt **out, size_t *n);

/* Register on s, without running them (for ax_store_warm, store.h), the
 * statements of ax_store_admit; of ax_store_lock_attempts and
 * ax_store_update_attempts (a result); of ax_store_record_dispatches. */
ax_err ax_store_admit_prepare(ax_store *s);
ax_err ax_store_results_prepare(ax_store *s);
ax_err ax_store_dispatches_prepare(ax_store *s);

#endif /* AX_STORE_ATTEMPTS_H */
