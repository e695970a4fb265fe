/*
 * store.h - the PostgreSQL (libpq) layer every AX component uses.
 *
 * Role: one ax_store is one connection with its registered prepared
 * statements, transaction helpers, SQLSTATE -> ax_err translation,
 * reconnection, and the batched writes of the pipeline's hot paths
 * (instance generator, result handler).
 *
 * Invariants:
 * - An ax_store is used by one thread at a time (libpq connections are not
 *   thread-safe); give each actor or thread its own.
 * - Statements registered with ax_store_prepare survive a reconnect: they
 *   are prepared again on the new connection before it is used.
 * - A lost connection (CONNECTION_BAD) is logged and re-established with
 *   backoff at the next call; the failing call returns AX_EDBCONN, or
 *   AX_ERETRY when it broke an open transaction before COMMIT (nothing of
 *   it was committed, so ax_store_tx runs it again). A connection lost
 *   during COMMIT gives AX_EDBCONN: the outcome is unknown, and the hot
 *   path writes are idempotent so the caller may simply redo them.
 * - SQLSTATEs map to ax_err: 23505 -> AX_EEXIST, P0001 (state trigger) ->
 *   AX_ESTATE, 40001/40P01 -> AX_ERETRY, 08xxx/57P0x -> AX_EDBCONN, 42501
 *   -> AX_EPERM, 23503 -> AX_ENOENT, 23502/23514/22xxx -> AX_EINVAL,
 *   57014 -> AX_ETIMEDOUT, 55P03 -> AX_EBUSY, anything else -> AX_EDB. The
 *   detail names the statement and carries PostgreSQL's message, detail
 *   and hint.
 * - Instants cross this API as int64 UTC microseconds; SQL converts with
 *   ax_ts(bigint) / ax_us(timestamptz) (0001_init.sql).
 *
 * Workload: the instance generator and result handler write thousands of
 * rows per second in batches of up to a few thousand; one round trip per
 * batch (unnest of array parameters), not one per row.
 */
#ifndef AX_STORE_H
#define AX_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "ax_err.h"
#include "state.h"

typedef struct ax_store ax_store;

/*
 * Connects to dsn (a libpq conninfo string or URI). On failure returns
 * AX_EDBCONN whose detail names the DSN with any password masked, and
 * libpq's reason; *out is NULL. On success the caller owns *out and
 * releases it with ax_store_close.
 */
ax_err ax_store_open(const char *dsn, ax_store **out);

/* Closes the connection and frees s. Accepts NULL. */
void ax_store_close(ax_store *s);

/*
 * Copies dsn into buf (len bytes) with the value of any password masked
 * as "***" (conninfo `password=...` and URI `user:pass@`). Returns buf.
 */
char *ax_store_dsn_redact(const char *dsn, char *buf, size_t len);

/* The DSN with its password masked (valid while s is open). */
const char *ax_store_dsn(const ax_store *s);

/*
 * The underlying connection, for what this API does not cover (COPY,
 * LISTEN). Owned by s; may change after a reconnect, so do not keep it.
 */
PGconn *ax_store_conn(ax_store *s);

/*
 * Sets how long a reconnect keeps trying (default 5 s, backoff 20 ms
 * doubling up to 1 s) before the call fails with AX_EDBCONN.
 */
void ax_store_set_reconnect_timeout(ax_store *s, int64_t timeout_us);

/* Number of reconnects so far (monitoring, tests). */
uint64_t ax_store_reconnects(const ax_store *s);

/*
 * Registers and prepares statement name (unique per store) with nparams
 * text parameters; it is prepared again after every reconnect. Names and
 * SQL are copied. AX_EEXIST when name is taken, AX_EDB on a bad statement
 * (the detail carries PostgreSQL's message).
 */
ax_err ax_store_prepare(ax_store *s, const char *name, const char *sql,
                        int nparams);

/*
 * Runs sql with nparams text parameters (params[i] NULL is SQL NULL; may
 * be NULL when nparams is 0). On success *res (when res is not NULL)
 * receives the result, which the caller PQclear()s; with res NULL the
 * result is discarded. On failure *res is NULL.
 */
ax_err ax_store_query(ax_store *s, const char *sql, int nparams,
                      const char *const *params, PGresult **res);

/* As ax_store_query, without a result. */
ax_err ax_store_exec(ax_store *s, const char *sql, int nparams,
                     const char *const *params);

/* As ax_store_query for a statement registered with ax_store_prepare;
 * AX_ENOENT when name was never registered. */
ax_err ax_store_query_prepared(ax_store *s, const char *name, int nparams,
                               const char *const *params, PGresult **res);

/*
 * Runs sql and reads the first column of its first row as an integer
 * into *out. AX_ENOENT when there is no row or the value is NULL.
 */
ax_err ax_store_query_int64(ax_store *s, const char *sql, int nparams,
                            const char *const *params, int64_t *out);

/*
 * Transactions. begin fails with AX_EINVAL when one is already open;
 * rollback is safe to call when none is open and after a lost connection.
 */
ax_err ax_store_begin(ax_store *s);
ax_err ax_store_commit(ax_store *s);
ax_err ax_store_rollback(ax_store *s);

/* 1 while a transaction opened by ax_store_begin is open. */
int ax_store_in_tx(const ax_store *s);

/*
 * The body of a transaction: runs statements on s and returns AX_OK to
 * commit or an error to roll back. It may be called several times, so it
 * must not keep side effects outside the database between calls (or must
 * undo them at its start).
 */
typedef ax_err (*ax_store_tx_fn)(ax_store *s, void *arg);

/*
 * Runs fn(s, arg) in a transaction (isolation: READ COMMITTED, or
 * SERIALIZABLE with ax_store_tx_serializable) and commits it. Retries the
 * whole transaction on AX_ERETRY (serialization_failure,
 * deadlock_detected, a connection lost before COMMIT) up to 10 times with
 * jittered exponential backoff from 1 ms to 200 ms, logging each retry;
 * returns fn's error otherwise, or AX_ERETRY when the attempts ran out.
 * Must not be called inside an open transaction (AX_EINVAL).
 */
ax_err ax_store_tx(ax_store *s, ax_store_tx_fn fn, void *arg);
ax_err ax_store_tx_serializable(ax_store *s, ax_store_tx_fn fn, void *arg);

/*
 * As ax_store_tx, committed without waiting for the WAL flush
 * (synchronous_commit off for this transaction only). A crash of
 * PostgreSQL may lose the last such commits, never half of one, and never
 * one that precedes a durable commit: WAL is flushed in order, so every
 * relaxed commit before a durable one is on disk once the durable one is.
 * Use it only where a lost commit is re-derived after a restart and
 * nothing outside the database has acted on it yet: run creation (the
 * schedule re-fires), plans (idempotent), run bookkeeping (rebuilt from
 * instances), audit rows of decisions. The commit that creates an attempt
 * is durable, because a worker acts on it.
 */
ax_err ax_store_tx_relaxed(ax_store *s, ax_store_tx_fn fn, void *arg);

/* Number of transaction retries so far (monitoring, tests). */
uint64_t ax_store_retries(const ax_store *s);

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
 * initial state, n over 10000); AX_ENOENT when a dag or run id does not
 * exist; retries like ax_store_tx.
 */
ax_err ax_store_insert_instances(ax_store *s, ax_store_ti_row *rows, size_t n,
                                 size_t *inserted);

/* One guarded move of a task instance for ax_store_move_instances. */
typedef struct ax_store_ti_move {
	int64_t     instance_id;
	ax_ti_state from;    /* expected current state */
	ax_ti_state to;      /* new state */
	const char *reason;  /* reason code, may be NULL */
	int         applied; /* out: 1 when the row was in `from` and moved */
} ax_store_ti_move;

/*
 * Moves n instances in one statement: each row moves only when it is
 * still in its expected state (UPDATE ... WHERE state = from), so a writer
 * that lost a race changes nothing and sees applied = 0. Every move is
 * checked against the state machine first: an illegal one fails the whole
 * batch with AX_ESTATE before anything is written. Sets ready_at on READY,
 * started_at on RUNNING, ended_at on a terminal state, clears them on a
 * move back to PENDING. *applied (may be NULL) counts the moved rows.
 * AX_EINVAL when an id appears twice or n is over 10000.
 */
ax_err ax_store_move_instances(ax_store *s, ax_store_ti_move *moves, size_t n,
                               size_t *applied);

/* Maps a SQLSTATE (5 characters; NULL: unknown) to an ax_err. */
ax_err ax_store_sqlstate_err(const char *sqlstate);

#endif /* AX_STORE_H */
