/*
 * store.h - the PostgreSQL (libpq) layer every AX component uses.
 *
 * Role: one ax_store is one connection with its registered prepared
 * statements, transaction helpers, SQLSTATE -> ax_err translation,
 * reconnection and the lease-epoch fence of axd's writes ("Fencing"
 * below). The SQL of each table sits in its own module on top of this
 * core: store_instances.h (task_instances), store_attempts.h (attempts),
 * store_runs.h (dag_runs), store_events.h (event_log and its dead
 * letters), store_lease.h (scheduler_lease and leadership),
 * store_sched.h (schedules), store_commands.h, store_workers.h,
 * store_stats.h; store_internal.h holds what those modules share.
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
 *   AX_ESTATE, 40001/40P01 -> AX_ERETRY, class 08 and 57P01..57P03 ->
 *   AX_EDBCONN, 42501 -> AX_EPERM, 23503 -> AX_ENOENT, 23502/23514 and
 *   class 22 -> AX_EINVAL,
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

/* The most rows one batched call of the store modules takes. */
#define AX_STORE_BATCH_MAX 10000

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
 * Inside a transaction whose BEGIN has not been sent yet (see
 * ax_store_begin) it sends the BEGIN first, so the caller's statements
 * run inside the transaction.
 */
PGconn *ax_store_conn(ax_store *s);

/*
 * Sets how long a reconnect keeps trying (default 5 s, backoff 20 ms
 * doubling up to 1 s) before the call fails with AX_EDBCONN.
 */
void ax_store_set_reconnect_timeout(ax_store *s, int64_t timeout_us);

/*
 * Sets PostgreSQL's statement_timeout of this connection (and of every
 * reconnect) to timeout_ms, so a statement the server does not finish
 * (a lock wait, a stalled server) fails instead of blocking the caller;
 * 0 leaves the server's setting to the next reconnect. It is enforced by
 * the server's backend: a backend that is frozen itself (SIGSTOP) does
 * not end the wait. AX_EINVAL for a negative value; a refused SET as
 * ax_store_exec.
 */
ax_err ax_store_set_statement_timeout(ax_store *s, int64_t timeout_ms);

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
 * As ax_store_prepare, but AX_OK when name is already registered on s
 * (the usual "prepare this module's statement on first use").
 */
ax_err ax_store_prepare_once(ax_store *s, const char *name, const char *sql,
                             int nparams);

/*
 * As ax_store_prepare_once, and every execution of name uses its
 * generic plan: the plan made once for any parameters (plan_cache_mode
 * force_generic_plan, set before the statement and reset after it in
 * the same pipeline, so no round trip is added and no other statement is
 * affected). For the pipeline's statements whose planning costs more
 * than their execution: a join of several tables on a small batch array
 * (`= ANY($1)`, `unnest($1)`). PostgreSQL plans such a statement again
 * at every execution, because a plan for the known array (one element)
 * is estimated cheaper than the generic plan (a default of 10 or 100);
 * measured with pg_stat_statements on `axctl bench --scenario chain`,
 * the result's look-up took 0.96 ms to plan and 0.10 ms to run. Only
 * for statements whose best plan does not depend on the values (index
 * look-ups by key; no partial index chosen by a parameter). The cached
 * plans are still dropped as the tables grow (DISCARD PLANS, store.c).
 */
ax_err ax_store_prepare_generic(ax_store *s, const char *name, const char *sql,
                                int nparams);

/* One statement of a module, for ax_store_prepare_all. */
typedef struct ax_store_stmt_def {
	const char *name;
	const char *sql;
	int         nparams;
	int         generic; /* 1: ax_store_prepare_generic; 0: _once */
} ax_store_stmt_def;

/* Registers defs[0..n) on s, each with ax_store_prepare_generic or
 * ax_store_prepare_once; the first error stops it. */
ax_err ax_store_prepare_all(ax_store *s, const ax_store_stmt_def *defs,
                            size_t n);

/*
 * Plans every statement prepared on s so far and runs none: EXPLAIN
 * EXECUTE of each with NULL parameters, outside any transaction (it
 * fails with AX_EINVAL inside one). A statement registered with
 * ax_store_prepare_generic keeps the generic plan this builds, so its
 * first execution plans nothing; every statement's tables, indexes,
 * foreign keys and statistics are read into the backend's caches. Both
 * otherwise fall on the first transaction of a new connection: for the
 * actors of axd, the first instance after a start or a takeover. An
 * actor prepares its statements (the modules' ax_store_*_prepare) and
 * calls this when its store opens. A statement that cannot be planned
 * is an error (its name in the detail); the others are planned first.
 */
ax_err ax_store_warm(ax_store *s);

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
 * As ax_store_query / ax_store_query_prepared (name NULL: sql is the
 * text; otherwise the registered statement name), for a statement that
 * writes: on a fenced store outside a transaction it runs in a
 * transaction of its own (ax_store_tx), so the fence check covers it, at
 * the cost of the BEGIN and COMMIT round trips; otherwise it is the plain
 * call. Hot paths write inside their own transaction and pay nothing.
 */
ax_err ax_store_write(ax_store *s, const char *name, const char *sql,
                      int nparams, const char *const *params, PGresult **res);

/*
 * A write whose answer the caller does not read (the prepared statement
 * name, as ax_store_query_prepared), sent inside the open transaction
 * without waiting: its answer is read with the next statement of the
 * transaction or its COMMIT, which then travel with it in one libpq
 * pipeline, so a transaction that ends with such writes pays one round
 * trip for all of them and the COMMIT. The first deferred write that
 * failed is the error of that next call (its detail names the write);
 * the server runs nothing after it, so the transaction commits nothing.
 * Outside a transaction, or as a transaction's first statement (the
 * fence is judged on its answer, see "Fencing"), it is ax_store_write.
 * AX_ENOENT when name was never registered; AX_ERETRY when the
 * connection failed while it was sent.
 */
ax_err ax_store_write_deferred(ax_store *s, const char *name, int nparams,
                               const char *const *params);

/*
 * Runs sql, a COPY ... FROM STDIN in text format, with data (len bytes:
 * lines of tab-separated fields, \\N for NULL) as its input, in one round
 * trip. *rows (may be NULL) receives the number of rows copied. Writes
 * like ax_store_write (on a fenced store outside a transaction it runs in
 * one); errors as ax_store_query (a bad line fails the whole COPY).
 */
ax_err ax_store_copy_in(ax_store *s, const char *sql, const char *data,
                        size_t len, int64_t *rows);

/*
 * Runs sql and reads the first column of its first row as an integer
 * into *out. AX_ENOENT when there is no row or the value is NULL.
 */
ax_err ax_store_query_int64(ax_store *s, const char *sql, int nparams,
                            const char *const *params, int64_t *out);

/* A result cell: its text, or NULL for SQL NULL. */
const char *ax_store_cell(const PGresult *r, int row, int col);

/* A result cell as an integer; 0 for SQL NULL. */
int64_t ax_store_cell_i64(const PGresult *r, int row, int col);

/*
 * Transactions. begin fails with AX_EINVAL when one is already open;
 * rollback is safe to call when none is open and after a lost connection.
 * begin sends nothing: the BEGIN (with the relaxed durability and the
 * fence check) goes with the transaction's first statement, in one libpq
 * pipeline, so opening a transaction costs no round trip of its own; the
 * server runs them in the same order as if each had been sent alone. A
 * COPY or a caller's own statement (ax_store_conn) first sends the BEGIN
 * on its own; a transaction with no statement sends nothing at all.
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
 * instances), admissions (re-admitted from their PENDING rows), results
 * (sent again by their workers, whose reports are acknowledged only once
 * a durable commit follows: ax_store_flush_commits), audit rows of
 * decisions. A crash of PostgreSQL ends axd's leader session, so the
 * pipeline is rebuilt from what survived (actors/axd.c). The commit that
 * hands an attempt to a worker (the dispatch record) is durable, because
 * something outside the database acts on it; the result and the
 * admission before a dispatch record need not be, the record's flush
 * takes them to disk.
 * tests/integration/test_store_durability.c holds that rule across a
 * crash; `axctl drill crash-db` kills PostgreSQL under a running pipeline.
 */
ax_err ax_store_tx_relaxed(ax_store *s, ax_store_tx_fn fn, void *arg);

/*
 * Makes every commit PostgreSQL made before this call durable, the
 * relaxed ones of any connection included: a transaction of its own that
 * writes a WAL record (an empty logical message) and commits durably, so
 * its commit record, after theirs in the WAL, is flushed (and, under
 * synchronous replication, confirmed by the standby) with everything
 * before it. Fenced and retried as ax_store_tx. The queue calls it for
 * results committed relaxed that none of its dispatch records has taken
 * to disk yet (actors/queue/queue_endpoint.c).
 */
ax_err ax_store_flush_commits(ax_store *s);

/*
 * Runs fn(s, arg) in the transaction already open on s (the caller's, so
 * its error aborts the caller's transaction), or in its own with
 * ax_store_tx when none is open. For helpers that write several
 * statements (or one that must be fenced) whether or not the caller
 * batches them into a larger transaction.
 */
ax_err ax_store_tx_join(ax_store *s, ax_store_tx_fn fn, void *arg);

/* Number of transaction retries so far (monitoring, tests). */
uint64_t ax_store_retries(const ax_store *s);

/*
 * Fencing (DESIGN.md section 6). A store with a fence (the scheduler
 * lease epoch its owner holds) checks, inside every transaction it opens
 * (ax_store_begin, ax_store_tx and its variants), that the lease is still
 * at that epoch, and fails the transaction with AX_EFENCED, rolled back
 * before any of its statements commits, when the epoch moved on: a
 * deposed axd writes nothing. The check travels with the BEGIN (BEGIN;
 * LOCK TABLE scheduler_lease IN ROW SHARE MODE; EXECUTE of the epoch
 * read, prepared once per connection), in the same pipeline as the
 * transaction's first statement, so it costs no extra round trip (about
 * 15 us of server time). The server takes the lock and reads the epoch
 * before it runs that statement; its result is looked at only after the
 * check passed, and a fenced transaction is rolled back. The ROW SHARE lock (a
 * fast-path lock, no shared state) is held to the end of the transaction
 * and conflicts with the EXCLUSIVE lock ax_store_sched_leader_take (and
 * ax_store_sched_lease_take) holds while it bumps the epoch: a takeover
 * waits for the deposed holder's transactions in flight (or ends them,
 * when they outlast a short wait: a hung holder), and every later one
 * sees the new epoch. A takeover that updates the row without that lock
 * (by hand) fences every transaction that begins after it commits.
 *
 * Once fenced, a store stays fenced: every later transaction fails with
 * AX_EFENCED at once, without a round trip. Statements run outside a
 * transaction (ax_store_query / ax_store_exec in autocommit) are not
 * checked: the write helpers of the store modules send theirs through
 * ax_store_write (or ax_store_tx_join), which opens a fenced transaction
 * when none is open; reads stay unchecked (a deposed axd may look).
 */

/* Sets the fence of s (epoch >= 1), or removes it (0); clears a fenced
 * state. AX_EINVAL for a negative epoch. */
ax_err ax_store_set_fence(ax_store *s, int64_t epoch);

/* The fence of s (0: none). */
int64_t ax_store_fence(const ax_store *s);

/*
 * Writes into *out (malloc'd, the caller frees it) dsn with the libpq
 * option `-c ax.fence_epoch=EPOCH` added to its `options`: every store
 * opened with that DSN (ax_store_open) gets that fence, so a process
 * fences all of its connections by handing this DSN to whatever opens
 * them. The server sees the same value as the setting ax.fence_epoch.
 * AX_EINVAL when dsn does not parse or epoch < 1; AX_ENOMEM.
 */
ax_err ax_store_dsn_fenced(const char *dsn, int64_t epoch, char **out);

/*
 * Called once per store, on the thread whose transaction found the fence
 * moved on: fence is the store's epoch, epoch the lease's (0 when the
 * lease row is gone). axd uses it to stop at once rather than at its next
 * lease renewal.
 */
typedef void (*ax_store_fence_fn)(void *arg, int64_t fence, int64_t epoch);

/*
 * Installs the process-wide fence hook (fn NULL removes it). Call it from
 * main() before any thread opens a store; it is read without a lock.
 */
void ax_store_set_fence_hook(ax_store_fence_fn fn, void *arg);

/*
 * The SQLSTATE of the last statement PostgreSQL refused on s since the
 * last transaction began: "" when none was refused, or when the error was
 * not PostgreSQL's (a lost connection, a client-side failure). For callers
 * that must tell a refused row (class 22 data exception, 23 integrity,
 * 54 program limit) from a failing database; read it right after the
 * failing call.
 */
const char *ax_store_error_sqlstate(const ax_store *s);

/* Maps a SQLSTATE (5 characters; NULL: unknown) to an ax_err. */
ax_err ax_store_sqlstate_err(const char *sqlstate);

#endif /* AX_STORE_H */
