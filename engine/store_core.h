/*
 * store_core.h - what the two files of the store's core share: struct
 * ax_store, its registered statements and the functions one file calls
 * in the other (prefix axs_). store.c holds the connection and the
 * statements, store_tx.c the transactions, the pipeline and the fence.
 * Include it from store.c and store_tx.c only: the table modules
 * (store_*.c) and every caller see ax_store through store.h and
 * store_internal.h, never its fields.
 *
 * Invariants:
 * - An ax_store is used by one thread at a time (store.h); nothing here
 *   locks.
 * - Every statement in stmts is prepared on the current connection: a
 *   new connection prepares them all again before it is used.
 * - Between calls, ndefer <= DEFER_MAX commands were sent and are unread,
 *   the connection stays in pipeline mode while ndefer > 0, and every
 *   other statement reads their answers first (axs_ensure_conn,
 *   axs_pipe_stmt); defer_fence is the fence check's index among them or
 *   -1.
 * - Once fenced_out is set, no transaction begins until
 *   ax_store_set_fence.
 */
#ifndef AX_STORE_CORE_H
#define AX_STORE_CORE_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "ax_err.h"
#include "store.h"

/* Writes sent without waiting (ax_store_write_deferred) before their
 * answers are read with the next statement. */
#define DEFER_MAX 16

typedef struct store_stmt {
	char *name;
	char *sql;
	int   nparams;
	int generic; /* run with its generic plan (ax_store_prepare_generic) */
} store_stmt;

/* Around each execution of a statement registered with
 * ax_store_prepare_generic, in the same pipeline (see there). */
#define GENERIC_ON  "SET plan_cache_mode TO force_generic_plan"
#define GENERIC_OFF "RESET plan_cache_mode"

struct ax_store {
	PGconn     *conn;         /* NULL after a failed reconnect */
	char       *dsn;          /* as given, with password: for reconnects */
	char       *dsn_safe;     /* password masked: for messages */
	int         in_tx;        /* a transaction opened by ax_store_begin */
	const char *pend_begin;   /* its BEGIN, not sent yet (begin_with) */
	int         pend_relaxed; /* and whether it is relaxed */
	int         ndefer;       /* commands sent without waiting, unread */
	const char *defer_what[DEFER_MAX]; /* their statement names */
	int         defer_fence; /* which of them is the fence check; -1 */
	int64_t     reconnect_timeout_us;
	int64_t     stmt_timeout_ms; /* statement_timeout; 0: the server's */
	uint64_t    reconnects;
	uint64_t    retries;
	uint64_t    execs;     /* prepared statements executed */
	uint64_t    replan_at; /* execs at which cached plans are dropped */
	int64_t     replan_by; /* and the monotonic instant by which */
	unsigned    seed;      /* jitter of the retry backoff */
	store_stmt *stmts;     /* registered prepared statements */
	size_t      nstmts;
	size_t      capstmts;
	int64_t     fence;      /* lease epoch to check; 0: none */
	int         fenced_out; /* a check failed: no more transactions */
	int64_t     fenced_by;  /* the lease's epoch at that check */
	char        fenced_holder[128]; /* and its holder */
	char        sqlstate[6]; /* of the last refused statement, or "" */
};

/* --- store.c ---------------------------------------------------------- */

/* Writes the short name of a statement for messages into buf (len
 * bytes): its name or its first words, "..." when cut. */
void axs_stmt_label(const char *what, char *buf, size_t len);

/* The ax_err of a statement that did not succeed (r may be NULL), with
 * its detail set; committing: the statement was COMMIT, whose outcome is
 * unknown when the connection broke. Ends the transaction when the
 * connection is gone. Does not clear r. */
ax_err axs_result_error(ax_store *s, PGresult *r, const char *what,
                        int committing);

/* AX_OK and r in *res (the caller's to PQclear; cleared here when res is
 * NULL) when r succeeded; otherwise r is cleared and its error returned
 * (axs_result_error). */
ax_err axs_check_result(ax_store *s, PGresult *r, const char *what,
                        PGresult **res);

/* Reads the answers of the writes sent without waiting, then makes sure a
 * usable connection exists, reconnecting if need be; AX_ERETRY when that
 * broke an open transaction. */
ax_err axs_ensure_conn(ax_store *s);

/* The registered statement called name, or NULL. Valid until the next
 * statement is registered. */
store_stmt *axs_find_stmt(ax_store *s, const char *name);

/* Before a prepared statement is sent or queued (full: the pipeline has
 * no room for it): reads the unread commands first when full or when the
 * cached plans are due to be dropped; then a statement that starts a
 * pipeline gets a live connection and the replan check, one that joins
 * it counts as an execution. */
ax_err axs_stmt_ready(ax_store *s, int full);

/* --- store_tx.c ------------------------------------------------------- */

/* Sends the pending opening of the open transaction, if any, on its own:
 * before a COPY or a caller's own statements. */
ax_err axs_begin_flush(ax_store *s);

/* Reads the answers of the writes sent without waiting, with COMMIT after
 * them when commit is set; the first that failed is the error. */
ax_err axs_defer_finish(ax_store *s, int commit);

/* Makes the connection ready to take commands into a pipeline, with the
 * transaction's pending opening queued first; *piped is 0 when it cannot
 * enter pipeline mode (the caller then runs its statement the plain way).
 */
ax_err axs_pipe_open(ax_store *s, int *piped);

/* Runs a statement (prepared st, else the text sql) after the commands
 * already in the pipeline, with one sync; their errors come first. On
 * AX_OK *res (if res) is the caller's to PQclear. */
ax_err axs_pipe_stmt(ax_store *s, const store_stmt *st, const char *sql,
                     int nparams, const char *const *params, PGresult **res);

#endif /* AX_STORE_CORE_H */
