/*
 * store_tx.c - transactions of the store (see store.h): BEGIN, COMMIT and
 * ROLLBACK, ax_store_tx and its retries, the libpq pipeline that carries
 * a transaction's opening with its first statement, the writes sent
 * without waiting (ax_store_write_deferred), COPY FROM STDIN, the
 * autocommit writes of a fenced store and the lease-epoch fence itself
 * (store.h, "Fencing"). The connection and the statements they run on
 * are store.c's (store_core.h).
 *
 * Round trips: a transaction's opening (BEGIN, its settings, the fence
 * lock and read) is queued in one pipeline with its first statement, and
 * writes sent without waiting are read with the next statement or with
 * COMMIT: one sync reads them all. When the fence check has not been read
 * yet at COMMIT it is read first and COMMIT is sent only if the epoch is
 * still ours, so a deposed axd never commits.
 *
 * Lost connections: a connection lost inside a transaction before its
 * COMMIT gives AX_ERETRY, since nothing of it was committed, and
 * ax_store_tx runs it again (as it does a serialization failure or a
 * deadlock) up to TX_MAX_TRIES times with a jittered backoff; one lost
 * during COMMIT gives AX_EDBCONN, the outcome being unknown.
 */
#include "store.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "store_core.h"

#define TX_MAX_TRIES      10
#define TX_BACKOFF0_US    1000LL
#define TX_BACKOFF_MAX_US (200 * AX_USEC_PER_MSEC)

/* The fence check sent with BEGIN (see store.h, "Fencing"): the lock,
 * then the lease read by a statement prepared once per connection (its
 * planning is most of the check's cost). */
#define FENCE_STMT  "ax_store_fence"
#define FENCE_READ  "SELECT epoch, coalesce(holder, '') FROM scheduler_lease"
#define FENCE_LOCK  "LOCK TABLE scheduler_lease IN ROW SHARE MODE"
#define FENCE_SQL   FENCE_LOCK "; EXECUTE " FENCE_STMT
#define RELAXED_SQL "SET LOCAL synchronous_commit TO off"

/* Process-wide fence hook: set by main() before any thread opens a store
 * (store.h), read-only afterwards. */
static ax_store_fence_fn fence_hook;
static void             *fence_hook_arg;

/* ---------------------------------------------------------------------- */
/* transactions */

/* AX_EFENCED for a store whose fence check failed (see fence_lost). */
static ax_err
fenced_error(const ax_store *s)
{
	return ax_err_set(
	    AX_EFENCED,
	    "store: fenced: this connection writes for scheduler lease epoch "
	    "%lld, but the lease is at epoch %lld (holder '%s'): another axd "
	    "took over, so this one must stop; the transaction wrote nothing",
	    (long long) s->fence, (long long) s->fenced_by, s->fenced_holder);
}

/* Reads the fence check's row; AX_OK when the lease is still at the
 * store's epoch, otherwise marks the store fenced for good. */
static ax_err
fence_check(ax_store *s, PGresult *r)
{
	int has = PQntuples(r) == 1 && PQnfields(r) == 2;

	s->fenced_by = has ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
	if (s->fenced_by == s->fence)
		return AX_OK;
	snprintf(s->fenced_holder, sizeof(s->fenced_holder), "%s",
	         has ? PQgetvalue(r, 0, 1) : "(no lease row)");
	s->fenced_out = 1;
	return AX_EFENCED;
}

/* Logs the fence failure and tells the process (hook), once per store. */
static ax_err
fence_lost(ax_store *s)
{
	(void) fenced_error(s);
	ax_logf(AX_LOG_ERROR, "store", "FENCED", NULL, "%s", ax_err_detail());
	if (fence_hook != NULL)
		fence_hook(fence_hook_arg, s->fence, s->fenced_by);
	return fenced_error(s); /* the hook may have set another detail */
}

/*
 * Sends a transaction's opening in one simple-query message: begin_sql
 * (BEGIN with its isolation level), the relaxed durability and the fence
 * check. For a transaction whose first statement is a COPY or a caller's
 * own (ax_store_conn); the others send it with their first statement
 * (axs_pipe_open).
 */
static ax_err
begin_send(ax_store *s, const char *begin_sql, int relaxed)
{
	char      sql[256];
	PGresult *r = NULL;
	ax_err    rv;

	snprintf(sql, sizeof(sql), "%s%s%s", begin_sql,
	         relaxed ? "; " RELAXED_SQL : "",
	         s->fence > 0 ? "; " FENCE_SQL : "");
	rv = axs_check_result(s, PQexec(s->conn, sql), sql, &r);
	if (rv == AX_OK && s->fence > 0)
		rv = fence_check(s, r);
	PQclear(r);
	if (rv == AX_OK)
		return AX_OK;
	ax_store_rollback(s);
	return rv == AX_EFENCED ? fence_lost(s) : rv;
}

/* Sends the pending BEGIN of the open transaction, if any, on its own. */
ax_err
axs_begin_flush(ax_store *s)
{
	const char *b = s->pend_begin;
	ax_err      rv;

	if (b == NULL)
		return AX_OK;
	s->pend_begin = NULL;
	if ((rv = axs_ensure_conn(s)) != AX_OK)
		return rv;
	return begin_send(s, b, s->pend_relaxed);
}

/*
 * Reads the results of the n commands sent in pipeline mode before its
 * sync into r[] (each to PQclear) and leaves pipeline mode. 0 when the
 * connection failed first; *got counts the results read.
 */
static int
pipe_read(PGconn *c, int n, PGresult **r, int *got)
{
	int synced = 0;

	*got = 0;
	/* Each command's result, then the NULL that ends it; the sync
	 * result ends the pipeline. */
	for (int nulls = 0; nulls <= n;) {
		PGresult *x = PQgetResult(c);
		if (x == NULL) {
			if (PQstatus(c) == CONNECTION_BAD)
				break;
			nulls++;
			continue;
		}
		if (PQresultStatus(x) == PGRES_PIPELINE_SYNC) {
			PQclear(x);
			synced = 1;
			break;
		}
		if (nulls < n && r[nulls] == NULL) {
			r[nulls] = x;
			(*got)++;
		} else
			PQclear(x);
	}
	return synced && PQexitPipelineMode(c) == 1;
}

/* Drops a connection that cannot be used, and the transaction with it:
 * the next statement reconnects. */
static void
conn_drop(ax_store *s)
{
	if (s->conn != NULL)
		PQfinish(s->conn);
	s->conn        = NULL;
	s->in_tx       = 0;
	s->ndefer      = 0;
	s->defer_fence = -1;
	s->pend_begin  = NULL;
}

/* The transaction is gone with a connection that cannot be used. */
static ax_err
pipe_broken(ax_store *s, const char *what)
{
	char label[72];

	axs_stmt_label(what, label, sizeof(label));
	ax_log_warn("store", "connection to %s unusable after %s: %s",
	            s->dsn_safe, label,
	            s->conn != NULL ? PQerrorMessage(s->conn) : "none");
	conn_drop(s);
	return ax_err_set(AX_ERETRY,
	                  "store: connection lost during %s; the transaction "
	                  "was not committed and can be run again",
	                  label);
}

/* Sends sql, a statement without parameters, into the open pipeline. */
static int
send_sql(PGconn *c, const char *sql)
{
	return PQsendQueryParams(c, sql, 0, NULL, NULL, NULL, NULL, 0) == 1;
}

/* The commands send_stmt sends for st: the statement, and the settings
 * of its plan around it when it runs its generic plan. */
static int
stmt_cmds(const store_stmt *st)
{
	return st->generic ? 3 : 1;
}

/*
 * Sends the prepared statement st into the open pipeline, between
 * GENERIC_ON and GENERIC_OFF when it runs its generic plan, and names
 * each command in what[] (stmt_cmds(st) entries). Returns how many were
 * sent: fewer than stmt_cmds(st) when the connection failed, what[] then
 * names the one that was not sent.
 */
static int
send_stmt(PGconn *c, const store_stmt *st, int nparams,
          const char *const *params, const char **what)
{
	int n = 0;

	if (st->generic) {
		what[n] = GENERIC_ON;
		if (!send_sql(c, GENERIC_ON))
			return n;
		n++;
	}
	what[n] = st->name;
	if (PQsendQueryPrepared(c, st->name, nparams, params, NULL, NULL, 0) !=
	    1)
		return n;
	n++;
	if (st->generic) {
		what[n] = GENERIC_OFF;
		if (!send_sql(c, GENERIC_OFF))
			return n;
		n++;
	}
	return n;
}

/*
 * Makes the connection ready to take commands into a pipeline: enters
 * pipeline mode unless writes sent without waiting hold it already, and
 * sends the open transaction's pending opening (BEGIN, the relaxed
 * durability, the fence check) as its first commands, remembered like
 * deferred writes: their answers are read, and the fence judged, with
 * the next sync (axs_pipe_stmt, axs_defer_finish). *piped is 0 when the
 * connection cannot enter pipeline mode: the opening was then sent on
 * its own and the caller runs its statement the plain way.
 */
ax_err
axs_pipe_open(ax_store *s, int *piped)
{
	PGconn     *c = s->conn;
	const char *b = s->pend_begin;
	int         n;

	*piped = 1;
	if (s->ndefer == 0 && PQenterPipelineMode(c) != 1) {
		*piped = 0;
		return axs_begin_flush(s);
	}
	if (b == NULL)
		return AX_OK;
	s->pend_begin    = NULL;
	n                = s->ndefer;
	s->defer_what[n] = b;
	if (!send_sql(c, b))
		return pipe_broken(s, b);
	n++;
	if (s->pend_relaxed) {
		s->defer_what[n] = RELAXED_SQL;
		if (!send_sql(c, RELAXED_SQL))
			return pipe_broken(s, RELAXED_SQL);
		n++;
	}
	if (s->fence > 0) {
		s->defer_what[n] = FENCE_LOCK;
		if (!send_sql(c, FENCE_LOCK))
			return pipe_broken(s, FENCE_LOCK);
		n++;
		s->defer_what[n] = FENCE_STMT;
		if (PQsendQueryPrepared(c, FENCE_STMT, 0, NULL, NULL, NULL,
		                        0) != 1)
			return pipe_broken(s, FENCE_STMT);
		s->defer_fence = n++;
	}
	s->ndefer = n;
	return AX_OK;
}

/*
 * Checks the answers r[0..n) of commands sent into one pipeline, in
 * order: the first that failed is the error (the server skipped what
 * followed it), and the fence check at fi (-1: none) is judged at its
 * place. A failed fence rolls the transaction back and tells the
 * process (fence_lost).
 */
static ax_err
pipe_check(ax_store *s, PGresult **r, const char *const *what, int n, int fi)
{
	ax_err rv = AX_OK;

	for (int i = 0; i < n && rv == AX_OK; i++) {
		ExecStatusType x = PQresultStatus(r[i]);
		if (x != PGRES_COMMAND_OK && x != PGRES_TUPLES_OK)
			rv = axs_result_error(s, r[i], what[i], 0);
		else if (i == fi)
			rv = fence_check(s, r[i]);
	}
	if (rv != AX_EFENCED)
		return rv;
	ax_store_rollback(s);
	return fence_lost(s);
}

/*
 * A statement (prepared st, else the text sql) sent after the commands
 * already in the pipeline (the transaction's opening, writes sent without
 * waiting), between the settings of its plan when it runs its generic
 * plan; one sync, one round trip for all of them. The earlier commands'
 * answers are judged first (pipe_check): a fenced transaction writes
 * nothing, and a deferred write that failed is the error, naming it.
 */
ax_err
axs_pipe_stmt(ax_store *s, const store_stmt *st, const char *sql, int nparams,
              const char *const *params, PGresult **res)
{
	PGconn     *c = s->conn;
	const char *what[DEFER_MAX + 3];
	PGresult   *r[DEFER_MAX + 3] = { NULL };
	int         nw = s->ndefer, fi = s->defer_fence, n = nw, got = 0;
	int         generic = st != NULL && st->generic;
	int         k       = nw + generic; /* the statement's answer */
	int         total   = k + 1 + generic;
	ax_err      rv;

	memcpy(what, s->defer_what, sizeof(what[0]) * (size_t) nw);
	s->ndefer      = 0;
	s->defer_fence = -1;
	if (st != NULL)
		n += send_stmt(c, st, nparams, params, &what[n]);
	else {
		what[n] = sql;
		n += PQsendQueryParams(c, sql, nparams, NULL, params, NULL,
		                       NULL, 0) == 1;
	}
	if (n != total || PQpipelineSync(c) != 1)
		return pipe_broken(s, what[n < total ? n : k]);
	if (!pipe_read(c, n, r, &got)) {
		for (int i = 0; i < n; i++)
			PQclear(r[i]);
		return pipe_broken(s, what[got < n ? got : k]);
	}
	rv = pipe_check(s, r, what, k, fi);
	for (int i = 0; i < n; i++)
		if (i != k)
			PQclear(r[i]);
	if (rv != AX_OK) {
		PQclear(r[k]);
		return rv;
	}
	return axs_check_result(s, r[k], what[k], res);
}

/*
 * Reads the answers of the writes sent without waiting, with the
 * transaction's COMMIT sent after them when commit is set: one sync,
 * one round trip for all of them. The first write that failed is the
 * error (the server skipped everything after it, the COMMIT too, and
 * the transaction is rolled back here). With commit, the transaction
 * is over whatever the outcome.
 */
ax_err
axs_defer_finish(ax_store *s, int commit)
{
	PGconn     *c                = s->conn;
	PGresult   *r[DEFER_MAX + 1] = { NULL };
	const char *what[DEFER_MAX + 1];
	int         nw = s->ndefer, fi = s->defer_fence, n = nw, got = 0;
	ax_err      rv = AX_OK;

	memcpy(what, s->defer_what, sizeof(what[0]) * (size_t) nw);
	s->ndefer      = 0;
	s->defer_fence = -1;
	if (commit) {
		what[n] = "COMMIT";
		if (!send_sql(c, "COMMIT"))
			return pipe_broken(s, what[n]);
		n++;
	}
	if (PQpipelineSync(c) != 1 || !pipe_read(c, n, r, &got)) {
		for (int i = 0; i < n; i++)
			PQclear(r[i]);
		if (!commit)
			return pipe_broken(s, what[got < n ? got : n - 1]);
		/* The server may have run the COMMIT before the connection
		 * failed: its outcome is unknown. */
		ax_log_warn("store", "connection to %s lost during COMMIT: %s",
		            s->dsn_safe, PQerrorMessage(c));
		conn_drop(s);
		return ax_err_set(
		    AX_EDBCONN,
		    "store: connection to %s lost during COMMIT; "
		    "the outcome of the COMMIT is unknown",
		    s->dsn_safe);
	}
	rv = pipe_check(s, r, what, nw, fi);
	if (commit && rv == AX_OK) {
		s->in_tx = 0;
		if (PQresultStatus(r[nw]) != PGRES_COMMAND_OK)
			rv = axs_result_error(s, r[nw], "COMMIT", 1);
		else if (strcmp(PQcmdStatus(r[nw]), "ROLLBACK") == 0)
			rv =
			    ax_err_set(AX_EDB,
			               "store: the transaction was aborted by "
			               "an earlier error and has been rolled "
			               "back");
	}
	for (int i = 0; i < n; i++)
		PQclear(r[i]);
	if (commit && s->in_tx)
		ax_store_rollback(s); /* a write failed: COMMIT was skipped */
	return rv;
}

/* Reads and drops the answers of the writes sent without waiting (a
 * rollback follows: their errors are not the caller's). */
static void
defer_discard(ax_store *s)
{
	PGresult *r[DEFER_MAX] = { NULL };
	int       n = s->ndefer, got = 0;

	s->ndefer      = 0;
	s->defer_fence = -1;
	if (PQpipelineSync(s->conn) != 1 || !pipe_read(s->conn, n, r, &got))
		conn_drop(s);
	for (int i = 0; i < n; i++)
		PQclear(r[i]);
}

ax_err
ax_store_write_deferred(ax_store *s, const char *name, int nparams,
                        const char *const *params)
{
	store_stmt *st = axs_find_stmt(s, name);
	ax_err      rv;

	if (st == NULL)
		return ax_err_set(AX_ENOENT,
		                  "store: no prepared statement named '%s'",
		                  name);
	/* Outside a transaction: a plain write. As the transaction's first
	 * statement it follows the opening (axs_pipe_open), and the fence is
	 * judged with their answers, before any COMMIT is sent. */
	if (!s->in_tx)
		return ax_store_write(s, name, NULL, nparams, params, NULL);
	if ((rv = axs_stmt_ready(s, s->ndefer + stmt_cmds(st) > DEFER_MAX)) !=
	    AX_OK)
		return rv;
	int piped;
	if ((rv = axs_pipe_open(s, &piped)) != AX_OK)
		return rv;
	if (!piped)
		return ax_store_query_prepared(s, name, nparams, params, NULL);
	int sent =
	    send_stmt(s->conn, st, nparams, params, &s->defer_what[s->ndefer]);
	if (sent != stmt_cmds(st))
		return pipe_broken(s, s->defer_what[s->ndefer + sent]);
	s->ndefer += sent;
	return AX_OK;
}

/*
 * Opens a transaction. Nothing is sent yet: begin_sql (BEGIN with its
 * isolation level), the relaxed durability and the fence check go with
 * the transaction's first statement (axs_pipe_open), or on their own before
 * a COPY or a caller's statements (axs_begin_flush). A transaction with no
 * statement sends nothing.
 */
static ax_err
begin_with(ax_store *s, const char *begin_sql, int relaxed)
{
	ax_err rv;

	if (s->in_tx)
		return ax_err_set(
		    AX_EINVAL,
		    "store: a transaction is already open on this connection");
	if (s->fenced_out)
		return fenced_error(s);
	s->sqlstate[0] = '\0';
	if (s->fence > 0 &&
	    (rv = ax_store_prepare_once(s, FENCE_STMT, FENCE_READ, 0)) !=
	        AX_OK)
		return rv;
	if ((rv = axs_ensure_conn(s)) != AX_OK)
		return rv;
	s->in_tx        = 1;
	s->pend_begin   = begin_sql;
	s->pend_relaxed = relaxed;
	return AX_OK;
}

ax_err
ax_store_begin(ax_store *s)
{
	return begin_with(s, "BEGIN", 0);
}

ax_err
ax_store_commit(ax_store *s)
{
	ax_err rv;

	if (!s->in_tx)
		return ax_err_set(AX_EINVAL, "store: COMMIT without BEGIN");
	if (s->pend_begin != NULL) { /* no statement: nothing was sent */
		s->pend_begin = NULL;
		s->in_tx      = 0;
		return AX_OK;
	}
	if (s->ndefer > 0) {
		/* the COMMIT goes with the deferred writes, unless the fence
		 * check is among them: it is judged before the COMMIT is
		 * sent, so a deposed axd never commits */
		if (s->defer_fence < 0)
			return axs_defer_finish(s, 1);
		if ((rv = axs_defer_finish(s, 0)) != AX_OK) {
			ax_store_rollback(s);
			return rv;
		}
	}
	if ((rv = axs_ensure_conn(s)) != AX_OK)
		return rv;
	PGresult *r = PQexec(s->conn, "COMMIT");
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		rv = axs_result_error(s, r, "COMMIT", 1);
		PQclear(r);
		s->in_tx = 0;
		return rv;
	}
	s->in_tx = 0;
	/* COMMIT of a transaction aborted by an earlier error rolls back. */
	if (strcmp(PQcmdStatus(r), "ROLLBACK") == 0) {
		PQclear(r);
		return ax_err_set(
		    AX_EDB,
		    "store: the transaction was aborted by an earlier error "
		    "and has been rolled back");
	}
	PQclear(r);
	return AX_OK;
}

ax_err
ax_store_rollback(ax_store *s)
{
	int was = s->in_tx && s->pend_begin == NULL;
	if (s->ndefer > 0)
		defer_discard(s);
	s->in_tx      = 0;
	s->pend_begin = NULL;
	if (!was || s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK)
		return AX_OK;
	PGresult *r = PQexec(s->conn, "ROLLBACK");
	PQclear(r);
	return AX_OK;
}

static ax_err
run_tx(ax_store *s, const char *begin_sql, int relaxed, ax_store_tx_fn fn,
       void *arg)
{
	int64_t backoff = TX_BACKOFF0_US;
	ax_err  rv;

	if (s->in_tx)
		return ax_err_set(
		    AX_EINVAL,
		    "store: ax_store_tx inside an open transaction");
	for (int attempt = 1;; attempt++) {
		if ((rv = begin_with(s, begin_sql, relaxed)) == AX_OK) {
			if ((rv = fn(s, arg)) == AX_OK)
				rv = ax_store_commit(s);
			else
				ax_store_rollback(s);
		}
		if (rv != AX_ERETRY)
			return rv;
		if (attempt >= TX_MAX_TRIES) {
			return ax_err_set(
			    AX_ERETRY,
			    "store: transaction still conflicting after %d "
			    "tries (last: %s)",
			    attempt, ax_err_detail());
		}
		s->retries++;
		ax_logf(AX_LOG_INFO, "store", "TX_RETRY", NULL,
		        "retrying transaction (try %d of %d) in %lld us: %s",
		        attempt + 1, TX_MAX_TRIES, (long long) backoff,
		        ax_err_detail());
		/* Jitter so that two conflicting writers do not collide
		 * again in lock step. */
		int64_t j = backoff / 2 +
		    (int64_t) (rand_r(&s->seed) %
		               (unsigned) (backoff / 2 + 1));
		ax_clock_sleep_us(j);
		backoff = backoff * 2 > TX_BACKOFF_MAX_US ? TX_BACKOFF_MAX_US
		                                          : backoff * 2;
	}
}

ax_err
ax_store_tx(ax_store *s, ax_store_tx_fn fn, void *arg)
{
	return run_tx(s, "BEGIN", 0, fn, arg);
}

ax_err
ax_store_tx_relaxed(ax_store *s, ax_store_tx_fn fn, void *arg)
{
	return run_tx(s, "BEGIN", 1, fn, arg);
}

/* A statement that takes a transaction id and writes a WAL record (an
 * empty transactional message, ignored by anything but a logical
 * decoding client that asks for prefix ax.flush): PostgreSQL flushes at
 * COMMIT only a transaction that did both (RecordTransactionCommit); one
 * that only took an id commits asynchronously. */
static ax_err
flush_tx(ax_store *s, void *arg)
{
	(void) arg;
	return ax_store_exec(
	    s, "SELECT pg_logical_emit_message(true, 'ax.flush', '')", 0,
	    NULL);
}

ax_err
ax_store_flush_commits(ax_store *s)
{
	return ax_store_tx(s, flush_tx, NULL);
}

ax_err
ax_store_tx_serializable(ax_store *s, ax_store_tx_fn fn, void *arg)
{
	return run_tx(s, "BEGIN ISOLATION LEVEL SERIALIZABLE", 0, fn, arg);
}

ax_err
ax_store_tx_join(ax_store *s, ax_store_tx_fn fn, void *arg)
{
	return s->in_tx ? fn(s, arg) : ax_store_tx(s, fn, arg);
}

/* One autocommit write run in a fenced transaction (ax_store_write). */
typedef struct write_one {
	const char        *name, *sql;
	int                nparams;
	const char *const *params;
	PGresult         **res;
} write_one;

static ax_err
write_one_tx(ax_store *s, void *arg)
{
	write_one *w = arg;

	if (w->res != NULL && *w->res != NULL) { /* from a retried attempt */
		PQclear(*w->res);
		*w->res = NULL;
	}
	return w->name != NULL
	    ? ax_store_query_prepared(s, w->name, w->nparams, w->params,
	                              w->res)
	    : ax_store_query(s, w->sql, w->nparams, w->params, w->res);
}

typedef struct copy_in {
	const char *sql, *data;
	size_t      len;
	int64_t    *rows;
} copy_in;

static ax_err
copy_in_tx(ax_store *s, void *arg)
{
	copy_in  *c = arg;
	PGresult *r;
	ax_err    rv;

	if ((rv = axs_ensure_conn(s)) != AX_OK ||
	    (rv = axs_begin_flush(s)) != AX_OK)
		return rv;
	r = PQexec(s->conn, c->sql);
	if (PQresultStatus(r) != PGRES_COPY_IN) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK &&
		    PQresultStatus(r) != PGRES_TUPLES_OK)
			return axs_check_result(s, r, c->sql, NULL);
		PQclear(r);
		return ax_err_set(AX_EINVAL,
		                  "store: %s: not a COPY FROM STDIN", c->sql);
	}
	PQclear(r);
	/* A failed send still ends the COPY so the server reports why. */
	int sent =
	    c->len == 0 || PQputCopyData(s->conn, c->data, (int) c->len) == 1;
	if (PQputCopyEnd(s->conn, sent ? NULL : "client: send failed") != 1)
		return axs_result_error(s, NULL, c->sql, 0);
	r = PQgetResult(s->conn);
	if (PQresultStatus(r) == PGRES_COMMAND_OK && c->rows != NULL)
		*c->rows = strtoll(PQcmdTuples(r), NULL, 10);
	rv = axs_check_result(s, r, c->sql, NULL);
	while ((r = PQgetResult(s->conn)) != NULL)
		PQclear(r);
	return rv;
}

ax_err
ax_store_copy_in(ax_store *s, const char *sql, const char *data, size_t len,
                 int64_t *rows)
{
	copy_in c = { sql, data, len, rows };

	if (rows != NULL)
		*rows = 0;
	if (len > INT_MAX)
		return ax_err_set(AX_EINVAL,
		                  "store: %zu bytes of COPY data is over the "
		                  "limit of %d",
		                  len, INT_MAX);
	if (s->fence == 0 || s->in_tx)
		return copy_in_tx(s, &c);
	return ax_store_tx(s, copy_in_tx, &c);
}

ax_err
ax_store_write(ax_store *s, const char *name, const char *sql, int nparams,
               const char *const *params, PGresult **res)
{
	write_one w = { name, sql, nparams, params, res };
	ax_err    rv;

	if (res != NULL)
		*res = NULL;
	if (s->fence == 0 || s->in_tx)
		return write_one_tx(s, &w);
	if ((rv = ax_store_tx(s, write_one_tx, &w)) != AX_OK && res != NULL) {
		PQclear(*res); /* the COMMIT failed: no result */
		*res = NULL;
	}
	return rv;
}

/* ---------------------------------------------------------------------- */
/* fencing */

ax_err
ax_store_set_fence(ax_store *s, int64_t epoch)
{
	if (epoch < 0)
		return ax_err_set(AX_EINVAL,
		                  "store: fence epoch %lld: must be >= 0",
		                  (long long) epoch);
	s->fence      = epoch;
	s->fenced_out = 0;
	return AX_OK;
}

int64_t
ax_store_fence(const ax_store *s)
{
	return s->fence;
}

void
ax_store_set_fence_hook(ax_store_fence_fn fn, void *arg)
{
	fence_hook     = fn;
	fence_hook_arg = arg;
}
