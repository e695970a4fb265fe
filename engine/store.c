/*
 * store.c - libpq connection, prepared statements, transactions, retries,
 * reconnection, the fence and the array literals of batched statements
 * (see store.h, store_internal.h); the SQL of each table sits in its own
 * store_*.c.
 *
 * Why the care around lost connections: the scheduler must ride through
 * a PostgreSQL restart or failover without a human. Before every call the
 * connection is probed without blocking (PQconsumeInput), so a connection
 * the server already closed is replaced before a statement is sent, and
 * the common "server restarted while we were idle" case costs no failed
 * call at all. A statement that was sent on a connection that then broke
 * has an unknown fate outside a transaction, so that call fails with
 * AX_EDBCONN rather than being silently replayed.
 */
#include "store.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "log.h"
#include "store_internal.h"

#define RECONNECT_TIMEOUT_US (5 * AX_USEC_PER_SEC)
#define RECONNECT_DELAY0_US  (20 * AX_USEC_PER_MSEC)
#define RECONNECT_DELAY_MAX  AX_USEC_PER_SEC
#define TX_MAX_TRIES         10
#define TX_BACKOFF0_US       1000LL
#define TX_BACKOFF_MAX_US    (200 * AX_USEC_PER_MSEC)
#define REPLAN_FIRST         64 /* see replan_check */
#define REPLAN_MAX           (1u << 20)
#define REPLAN_PERIOD_US     (60 * AX_USEC_PER_SEC)

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

/* The fence check sent with BEGIN (see store.h, "Fencing"): the lock,
 * then the lease read by a statement prepared once per connection (its
 * planning is most of the check's cost). */
#define FENCE_STMT  "ax_store_fence"
#define FENCE_READ  "SELECT epoch, coalesce(holder, '') FROM scheduler_lease"
#define FENCE_LOCK  "LOCK TABLE scheduler_lease IN ROW SHARE MODE"
#define FENCE_SQL   FENCE_LOCK "; EXECUTE " FENCE_STMT
#define RELAXED_SQL "SET LOCAL synchronous_commit TO off"

/* The libpq `options` entry that carries a fence in a DSN. */
#define FENCE_OPTION "ax.fence_epoch="

/* Process-wide fence hook: set by main() before any thread opens a store
 * (store.h), read-only afterwards. */
static ax_store_fence_fn fence_hook;
static void             *fence_hook_arg;

static ax_err begin_flush(ax_store *s);
static ax_err defer_finish(ax_store *s, int commit);
static void   defer_discard(ax_store *s);
static ax_err pipe_open(ax_store *s, int *piped);
static ax_err pipe_stmt(ax_store *s, const store_stmt *st, const char *sql,
                        int nparams, const char *const *params,
                        PGresult **res);

/* ---------------------------------------------------------------------- */
/* errors */

const char *
ax_store_error_sqlstate(const ax_store *s)
{
	return s->sqlstate;
}

ax_err
ax_store_sqlstate_err(const char *st)
{
	if (st == NULL || strlen(st) != 5)
		return AX_EDB;
	if (strcmp(st, "23505") == 0)
		return AX_EEXIST;
	if (strcmp(st, "P0001") == 0)
		return AX_ESTATE;
	if (strcmp(st, "40001") == 0 || strcmp(st, "40P01") == 0)
		return AX_ERETRY;
	if (strncmp(st, "08", 2) == 0 || strcmp(st, "57P01") == 0 ||
	    strcmp(st, "57P02") == 0 || strcmp(st, "57P03") == 0)
		return AX_EDBCONN;
	if (strcmp(st, "42501") == 0)
		return AX_EPERM;
	if (strcmp(st, "23503") == 0)
		return AX_ENOENT;
	if (strcmp(st, "23502") == 0 || strcmp(st, "23514") == 0 ||
	    strncmp(st, "22", 2) == 0)
		return AX_EINVAL;
	if (strcmp(st, "57014") == 0)
		return AX_ETIMEDOUT;
	if (strcmp(st, "55P03") == 0)
		return AX_EBUSY;
	return AX_EDB;
}

/* Short name of a statement for messages: its name or its first words. */
static void
stmt_label(const char *what, char *buf, size_t len)
{
	size_t n = 0;
	for (; what[n] != '\0' && n + 4 < len && n < 60; n++)
		buf[n] = what[n] == '\n' || what[n] == '\t' ? ' ' : what[n];
	strcpy(buf + n, what[n] != '\0' ? "..." : "");
}

/*
 * Translates a failed result. Called with the result of a statement that
 * did not succeed (r may be NULL). committing: the statement was COMMIT.
 */
static ax_err
result_error(ax_store *s, PGresult *r, const char *what, int committing)
{
	char label[72];

	stmt_label(what, label, sizeof(label));
	s->sqlstate[0] = '\0';
	if (s->conn == NULL || PQstatus(s->conn) == CONNECTION_BAD) {
		int was_tx = s->in_tx;
		s->in_tx   = 0;
		ax_log_warn("store", "connection to %s lost during %s: %s",
		            s->dsn_safe, label,
		            s->conn != NULL ? PQerrorMessage(s->conn)
		                            : "no connection");
		if (was_tx && !committing)
			return ax_err_set(
			    AX_ERETRY,
			    "store: connection lost during %s; the "
			    "transaction "
			    "was not committed and can be run again",
			    label);
		return ax_err_set(
		    AX_EDBCONN, "store: connection to %s lost during %s%s",
		    s->dsn_safe, label,
		    committing ? "; the outcome of the COMMIT is unknown"
		               : "");
	}
	const char *st   = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	const char *msg  = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
	const char *det  = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
	const char *hint = PQresultErrorField(r, PG_DIAG_MESSAGE_HINT);
	ax_err      rv   = ax_store_sqlstate_err(st);
	if (st != NULL && strlen(st) == 5)
		memcpy(s->sqlstate, st, 6);
	return ax_err_set(
	    rv, "store: %s: %s [SQLSTATE %s]%s%s%s%s", label,
	    msg != NULL ? msg : PQerrorMessage(s->conn), st != NULL ? st : "?",
	    det != NULL ? "; " : "", det != NULL ? det : "",
	    hint != NULL ? "; hint: " : "", hint != NULL ? hint : "");
}

/* ---------------------------------------------------------------------- */
/* DSN */

static int
needs_quotes(const char *v)
{
	if (*v == '\0')
		return 1;
	for (; *v != '\0'; v++)
		if (*v == ' ' || *v == '\'' || *v == '\\' || *v == '\t')
			return 1;
	return 0;
}

/*
 * Appends `key=value` to the conninfo string in buf (len bytes, *n used),
 * quoting and escaping the value when it needs it. Returns 0, or -1 when
 * it does not fit (buf keeps what it had).
 */
static int
conninfo_put(char *buf, size_t len, size_t *n, const char *key, const char *v)
{
	size_t k = *n;
	int    q = needs_quotes(v);
	int    w = snprintf(buf + k, len - k, "%s%s=%s", k > 0 ? " " : "", key,
                         q ? "'" : "");

	if (w < 0 || (size_t) w >= len - k)
		goto full;
	k += (size_t) w;
	for (; *v != '\0'; v++) {
		if (k + 3 >= len)
			goto full;
		if (q && (*v == '\'' || *v == '\\'))
			buf[k++] = '\\';
		buf[k++] = *v;
	}
	if (q)
		buf[k++] = '\'';
	buf[k] = '\0';
	*n     = k;
	return 0;
full:
	buf[*n] = '\0';
	return -1;
}

char *
ax_store_dsn_redact(const char *dsn, char *buf, size_t len)
{
	char             *err = NULL;
	PQconninfoOption *opts;
	size_t            n = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	if (dsn == NULL || *dsn == '\0') {
		snprintf(buf, len,
		         "(empty DSN: libpq defaults and PG* "
		         "environment)");
		return buf;
	}
	if ((opts = PQconninfoParse(dsn, &err)) == NULL) {
		snprintf(buf, len, "(unparsable DSN: %s",
		         err != NULL ? err : "out of memory");
		n = strlen(buf);
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
			buf[--n] = '\0';
		if (n + 1 < len)
			strcpy(buf + n, ")");
		PQfreemem(err);
		return buf;
	}
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++) {
		const char *v = o->val;
		if (v == NULL)
			continue;
		if (strcmp(o->keyword, "password") == 0)
			v = "***";
		if (conninfo_put(buf, len, &n, o->keyword, v) != 0)
			break;
	}
	PQconninfoFree(opts);
	return buf;
}

ax_err
ax_store_dsn_fenced(const char *dsn, int64_t epoch, char **out)
{
	char              fence[48], *err = NULL, *buf = NULL, *opt = NULL;
	PQconninfoOption *opts;
	size_t            len = sizeof(fence) + 16, n = 0;
	int               had_options = 0;
	ax_err            rv          = AX_OK;

	*out = NULL;
	if (epoch < 1)
		return ax_err_set(AX_EINVAL,
		                  "store: fence epoch %lld: must be >= 1",
		                  (long long) epoch);
	if ((opts = PQconninfoParse(dsn != NULL ? dsn : "", &err)) == NULL) {
		rv = ax_err_set(AX_EINVAL, "store: cannot fence the DSN: %s",
		                err != NULL ? err : "out of memory");
		PQfreemem(err);
		return rv;
	}
	snprintf(fence, sizeof(fence), "-c " FENCE_OPTION "%lld",
	         (long long) epoch);
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
		if (o->val != NULL)
			len += strlen(o->keyword) + 2 * strlen(o->val) + 4;
	if ((buf = malloc(len)) == NULL)
		goto oom;
	buf[0] = '\0';
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++) {
		const char *v = o->val;
		if (v == NULL)
			continue;
		if (strcmp(o->keyword, "options") == 0) {
			/* a later -c of the same setting wins, here and on
			 * the server */
			if ((opt = malloc(strlen(v) + sizeof(fence) + 2)) ==
			    NULL)
				goto oom;
			sprintf(opt, "%s %s", v, fence);
			v           = opt;
			had_options = 1;
		}
		if (conninfo_put(buf, len, &n, o->keyword, v) != 0)
			goto oom; /* cannot happen: len is an upper bound */
	}
	if (!had_options && conninfo_put(buf, len, &n, "options", fence) != 0)
		goto oom;
	PQconninfoFree(opts);
	free(opt);
	*out = buf;
	return AX_OK;
oom:
	PQconninfoFree(opts);
	free(opt);
	free(buf);
	return ax_err_set(AX_ENOMEM, "store: out of memory");
}

/* The fence a DSN carries (ax_store_dsn_fenced), or 0. */
static int64_t
dsn_fence(const char *dsn)
{
	PQconninfoOption *opts  = PQconninfoParse(dsn, NULL);
	int64_t           fence = 0;

	if (opts == NULL)
		return 0;
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++) {
		const char *p = o->val, *hit = NULL;
		if (p == NULL || strcmp(o->keyword, "options") != 0)
			continue;
		while ((p = strstr(p, FENCE_OPTION)) != NULL)
			hit = p = p + strlen(FENCE_OPTION); /* the last wins */
		if (hit != NULL)
			fence = strtoll(hit, NULL, 10);
	}
	PQconninfoFree(opts);
	return fence > 0 ? fence : 0;
}

const char *
ax_store_dsn(const ax_store *s)
{
	return s->dsn_safe;
}

/* ---------------------------------------------------------------------- */
/* connection */

static void
notice_to_log(void *arg, const char *message)
{
	char   buf[512];
	size_t n = strlen(message);
	(void) arg;
	while (n > 0 && message[n - 1] == '\n')
		n--;
	if (n >= sizeof(buf))
		n = sizeof(buf) - 1;
	memcpy(buf, message, n);
	buf[n] = '\0';
	ax_log_debug("store", "postgres: %s", buf);
}

/*
 * Opens one connection: our defaults first, so the DSN overrides them.
 * Over TCP, keepalives (idle 10 s, then 3 probes 5 s apart) and
 * tcp_user_timeout (30 s of unacknowledged data) bound how long a call
 * waits on a peer that vanished (a dead host, a cut network) to about
 * 30 s instead of the kernel's minutes to hours; a query that merely
 * runs long is not affected. Unix sockets ignore them.
 */
static PGconn *
connect_once(const char *dsn)
{
	const char *keys[] = { "connect_timeout",
		               "keepalives",
		               "keepalives_idle",
		               "keepalives_interval",
		               "keepalives_count",
		               "tcp_user_timeout",
		               "fallback_application_name",
		               "dbname",
		               NULL };
	const char *vals[] = { "10",    "1",  "10", "5", "3",
		               "30000", "ax", dsn,  NULL };
	return PQconnectdbParams(keys, vals, 1);
}

/* Sets the session's statement_timeout to s->stmt_timeout_ms. */
static ax_err
stmt_timeout_apply(ax_store *s)
{
	char      sql[64];
	PGresult *r;
	ax_err    rv = AX_OK;

	snprintf(sql, sizeof(sql), "SET statement_timeout = %lld",
	         (long long) s->stmt_timeout_ms);
	r = PQexec(s->conn, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		rv = result_error(s, r, "SET statement_timeout", 0);
	PQclear(r);
	return rv;
}

static ax_err
session_setup(ax_store *s)
{
	PQsetNoticeProcessor(s->conn, notice_to_log, s);
	PGresult *r  = PQexec(s->conn, "SET TIME ZONE 'UTC'");
	ax_err    rv = AX_OK;
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		rv = result_error(s, r, "SET TIME ZONE", 0);
	PQclear(r);
	if (rv == AX_OK && s->stmt_timeout_ms > 0)
		rv = stmt_timeout_apply(s);
	for (size_t i = 0; rv == AX_OK && i < s->nstmts; i++) {
		store_stmt *st = &s->stmts[i];
		r = PQprepare(s->conn, st->name, st->sql, st->nparams, NULL);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			rv = result_error(s, r, st->name, 0);
		PQclear(r);
	}
	return rv;
}

ax_err
ax_store_open(const char *dsn, ax_store **out)
{
	ax_store *s;
	char      safe[512];
	ax_err    rv;

	*out = NULL;
	if (dsn == NULL)
		dsn = "";
	ax_store_dsn_redact(dsn, safe, sizeof(safe));
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->dsn = strdup(dsn)) == NULL ||
	    (s->dsn_safe = strdup(safe)) == NULL) {
		ax_store_close(s);
		return ax_err_set(AX_ENOMEM, "store: out of memory");
	}
	s->reconnect_timeout_us = RECONNECT_TIMEOUT_US;
	s->replan_at            = REPLAN_FIRST;
	s->replan_by            = ax_clock_mono_us() + REPLAN_PERIOD_US;
	s->defer_fence          = -1;
	s->seed  = (unsigned) ax_clock_mono_us() ^ (unsigned) (uintptr_t) s;
	s->fence = dsn_fence(dsn);
	s->conn  = connect_once(dsn);
	if (s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%s",
		         s->conn != NULL ? PQerrorMessage(s->conn)
		                         : "out of memory");
		size_t n = strlen(msg);
		while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
			msg[--n] = '\0';
		ax_store_close(s);
		return ax_err_set(
		    AX_EDBCONN,
		    "cannot connect to PostgreSQL at %s: %s; check that the "
		    "server runs and the DSN is right",
		    safe, msg);
	}
	if ((rv = session_setup(s)) != AX_OK) {
		ax_store_close(s);
		return rv;
	}
	*out = s;
	return AX_OK;
}

void
ax_store_close(ax_store *s)
{
	if (s == NULL)
		return;
	if (s->conn != NULL)
		PQfinish(s->conn);
	for (size_t i = 0; i < s->nstmts; i++) {
		free(s->stmts[i].name);
		free(s->stmts[i].sql);
	}
	free(s->stmts);
	free(s->dsn);
	free(s->dsn_safe);
	free(s);
}

PGconn *
ax_store_conn(ax_store *s)
{
	/* a caller's own statements must run inside the transaction, after
	 * the writes sent before them */
	(void) begin_flush(s);
	if (s->ndefer > 0)
		(void) defer_finish(s, 0);
	return s->conn;
}

void
ax_store_set_reconnect_timeout(ax_store *s, int64_t timeout_us)
{
	s->reconnect_timeout_us = timeout_us;
}

ax_err
ax_store_set_statement_timeout(ax_store *s, int64_t timeout_ms)
{
	if (timeout_ms < 0)
		return ax_err_set(AX_EINVAL,
		                  "store: statement timeout %lld ms: must be "
		                  ">= 0 (0: the server's setting)",
		                  (long long) timeout_ms);
	s->stmt_timeout_ms = timeout_ms;
	if (s->conn == NULL || timeout_ms == 0)
		return AX_OK; /* applied by session_setup at the reconnect */
	return stmt_timeout_apply(s);
}

uint64_t
ax_store_reconnects(const ax_store *s)
{
	return s->reconnects;
}

uint64_t
ax_store_retries(const ax_store *s)
{
	return s->retries;
}

int
ax_store_in_tx(const ax_store *s)
{
	return s->in_tx;
}

/* Replaces a broken connection, retrying with backoff until the timeout. */
static ax_err
reconnect(ax_store *s)
{
	int64_t t0    = ax_clock_mono_us();
	int64_t delay = RECONNECT_DELAY0_US;
	char    why[256];

	snprintf(why, sizeof(why), "%s",
	         s->conn != NULL ? PQerrorMessage(s->conn) : "not connected");
	for (char *p = why; *p != '\0'; p++)
		if (*p == '\n')
			*p = ' ';
	ax_log_warn("store", "connection to %s lost (%s); reconnecting",
	            s->dsn_safe, why);
	if (s->conn != NULL)
		PQfinish(s->conn);
	s->conn        = NULL;
	s->in_tx       = 0;
	s->pend_begin  = NULL;
	s->ndefer      = 0;
	s->defer_fence = -1;
	for (;;) {
		s->conn = connect_once(s->dsn);
		if (s->conn != NULL && PQstatus(s->conn) == CONNECTION_OK &&
		    session_setup(s) == AX_OK) {
			s->reconnects++;
			ax_log_info("store", "reconnected to %s after %lld ms",
			            s->dsn_safe,
			            (long long) ((ax_clock_mono_us() - t0) /
			                         AX_USEC_PER_MSEC));
			return AX_OK;
		}
		snprintf(why, sizeof(why), "%s",
		         s->conn != NULL ? PQerrorMessage(s->conn)
		                         : "out of memory");
		if (s->conn != NULL)
			PQfinish(s->conn);
		s->conn = NULL;
		if (ax_clock_mono_us() + delay - t0 > s->reconnect_timeout_us)
			break;
		ax_clock_sleep_us(delay);
		delay = delay * 2 > RECONNECT_DELAY_MAX ? RECONNECT_DELAY_MAX
		                                        : delay * 2;
	}
	for (char *p = why; *p != '\0'; p++)
		if (*p == '\n')
			*p = ' ';
	ax_log_error("store", "could not reconnect to %s: %s", s->dsn_safe,
	             why);
	return ax_err_set(
	    AX_EDBCONN,
	    "store: connection to %s lost and not re-established within "
	    "%lld ms: %s",
	    s->dsn_safe,
	    (long long) (s->reconnect_timeout_us / AX_USEC_PER_MSEC), why);
}

/*
 * Makes sure a usable connection exists before a statement is sent. A
 * connection the server closed while we were idle is noticed here without
 * blocking. Inside a transaction a lost connection means the transaction
 * is gone: AX_ERETRY after reconnecting.
 */
static ax_err
ensure_conn(ax_store *s)
{
	ax_err rv;

	/* the answers of writes sent without waiting come first */
	if (s->ndefer > 0 && (rv = defer_finish(s, 0)) != AX_OK)
		return rv;
	/* Two reads: a server that went away left its FATAL message and
	 * then EOF; the first read returns the message, the second sees
	 * the EOF and marks the connection bad. */
	if (s->conn != NULL && PQstatus(s->conn) == CONNECTION_OK &&
	    PQconsumeInput(s->conn) != 0 && PQconsumeInput(s->conn) != 0 &&
	    PQstatus(s->conn) == CONNECTION_OK)
		return AX_OK;
	int was_tx = s->in_tx;
	rv         = reconnect(s);
	if (rv != AX_OK)
		return rv;
	if (was_tx)
		return ax_err_set(
		    AX_ERETRY,
		    "store: connection lost inside a transaction; it was not "
		    "committed and can be run again");
	return AX_OK;
}

/* ---------------------------------------------------------------------- */
/* statements */

static store_stmt *
find_stmt(ax_store *s, const char *name)
{
	for (size_t i = 0; i < s->nstmts; i++)
		if (strcmp(s->stmts[i].name, name) == 0)
			return &s->stmts[i];
	return NULL;
}

ax_err
ax_store_prepare(ax_store *s, const char *name, const char *sql, int nparams)
{
	ax_err rv;

	if (find_stmt(s, name) != NULL)
		return ax_err_set(AX_EEXIST,
		                  "store: statement '%s' is already prepared",
		                  name);
	if ((rv = ensure_conn(s)) != AX_OK)
		return rv;
	PGresult *r = PQprepare(s->conn, name, sql, nparams, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		rv = result_error(s, r, name, 0);
		PQclear(r);
		return rv;
	}
	PQclear(r);
	if (s->nstmts == s->capstmts) {
		size_t      cap = s->capstmts ? s->capstmts * 2 : 16;
		store_stmt *n   = realloc(s->stmts, cap * sizeof(*n));
		if (n == NULL)
			return ax_err_set(AX_ENOMEM, "store: out of memory");
		s->stmts    = n;
		s->capstmts = cap;
	}
	store_stmt *st = &s->stmts[s->nstmts];
	st->name       = strdup(name);
	st->sql        = strdup(sql);
	st->nparams    = nparams;
	st->generic    = 0;
	if (st->name == NULL || st->sql == NULL) {
		free(st->name);
		free(st->sql);
		return ax_err_set(AX_ENOMEM, "store: out of memory");
	}
	s->nstmts++;
	return AX_OK;
}

ax_err
ax_store_prepare_once(ax_store *s, const char *name, const char *sql,
                      int nparams)
{
	if (find_stmt(s, name) != NULL)
		return AX_OK;
	return ax_store_prepare(s, name, sql, nparams);
}

ax_err
ax_store_prepare_generic(ax_store *s, const char *name, const char *sql,
                         int nparams)
{
	store_stmt *st = find_stmt(s, name);
	ax_err      rv;

	if (st == NULL) {
		if ((rv = ax_store_prepare(s, name, sql, nparams)) != AX_OK)
			return rv;
		st = &s->stmts[s->nstmts - 1];
	}
	st->generic = 1;
	return AX_OK;
}

ax_err
ax_store_prepare_all(ax_store *s, const ax_store_stmt_def *defs, size_t n)
{
	ax_err rv = AX_OK;

	for (size_t i = 0; rv == AX_OK && i < n; i++)
		rv = defs[i].generic
		    ? ax_store_prepare_generic(s, defs[i].name, defs[i].sql,
		                               defs[i].nparams)
		    : ax_store_prepare_once(s, defs[i].name, defs[i].sql,
		                            defs[i].nparams);
	return rv;
}

ax_err
ax_store_warm(ax_store *s)
{
	ax_buf b;
	ax_err rv, first = AX_OK;

	if (s->in_tx || s->pend_begin != NULL)
		return ax_err_set(AX_EINVAL,
		                  "store: warm-up inside a transaction");
	if ((rv = ensure_conn(s)) != AX_OK)
		return rv;
	ax_buf_init(&b, 0);
	for (size_t i = 0; i < s->nstmts; i++) {
		const store_stmt *st = &s->stmts[i];
		char             *id =
		    PQescapeIdentifier(s->conn, st->name, strlen(st->name));
		ax_buf_reset(&b);
		ax_buf_printf(&b, "%sEXPLAIN (COSTS OFF) EXECUTE %s",
		              st->generic ? GENERIC_ON "; " : "",
		              id != NULL ? id : "");
		PQfreemem(id);
		for (int k = 0; k < st->nparams; k++)
			ax_buf_puts(&b, k == 0 ? "(NULL" : ", NULL");
		ax_buf_puts(&b, st->nparams > 0 ? ")" : "");
		if (st->generic)
			ax_buf_puts(&b, "; " GENERIC_OFF);
		if (ax_buf_err(&b) != AX_OK) {
			char *text = NULL; /* freed by the failed take */
			return ax_buf_take(&b, &text, NULL);
		}
		/* PQexec runs the three as one implicit transaction: a
		 * failed plan also leaves plan_cache_mode as it was */
		PGresult *r = PQexec(s->conn, ax_buf_str(&b));
		if (PQresultStatus(r) != PGRES_COMMAND_OK &&
		    PQresultStatus(r) != PGRES_TUPLES_OK && first == AX_OK)
			first = result_error(s, r, st->name, 0);
		PQclear(r);
	}
	ax_buf_fini(&b);
	return first;
}

static ax_err
check_result(ax_store *s, PGresult *r, const char *what, PGresult **res)
{
	ExecStatusType st = PQresultStatus(r);
	if (r != NULL && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)) {
		if (res != NULL)
			*res = r;
		else
			PQclear(r);
		return AX_OK;
	}
	ax_err rv = result_error(s, r, what, 0);
	PQclear(r);
	return rv;
}

ax_err
ax_store_query(ax_store *s, const char *sql, int nparams,
               const char *const *params, PGresult **res)
{
	ax_err rv;

	if (res != NULL)
		*res = NULL;
	if (s->ndefer == 0 && (rv = ensure_conn(s)) != AX_OK)
		return rv;
	if (s->pend_begin != NULL || s->ndefer > 0) {
		int piped;
		if ((rv = pipe_open(s, &piped)) != AX_OK)
			return rv;
		if (piped)
			return pipe_stmt(s, NULL, sql, nparams, params, res);
	}
	PGresult *r =
	    PQexecParams(s->conn, sql, nparams, NULL, params, NULL, NULL, 0);
	return check_result(s, r, sql, res);
}

ax_err
ax_store_exec(ax_store *s, const char *sql, int nparams,
              const char *const *params)
{
	return ax_store_query(s, sql, nparams, params, NULL);
}

/*
 * PostgreSQL caches a generic plan for a prepared statement at its sixth
 * execution, costed with the table sizes of that moment, and keeps it
 * until the next ANALYZE of a table it reads. A plan made while a table
 * was nearly empty (a new installation, tables just truncated) keeps
 * scanning the whole table as it grows: at 60,000 instances the result
 * handler's batch lookups read 200 million attempts rows that way.
 * Forcing a new plan at every execution (plan_cache_mode) cost about 12%
 * of the throughput in planning (axctl bench --scenario throughput, A/B).
 * Instead the cached plans of the connection are dropped (DISCARD PLANS, one
 * statement) when its executions double, up to every REPLAN_MAX executions: a
 * plan is never made from tables much smaller than they have grown since.
 * They are also dropped once a minute (REPLAN_PERIOD_US), for tables that
 * grow without this connection's executions (a restore, a bulk backfill,
 * a statement run seldom): the statements that always run their generic
 * plan (ax_store_prepare_generic) keep a plan of the table sizes of at
 * most a minute ago.
 */
static int
replan_due(const ax_store *s)
{
	return s->execs + 1 >= s->replan_at ||
	    ax_clock_mono_us() >= s->replan_by;
}

static void
replan_check(ax_store *s)
{
	int due = replan_due(s);

	s->execs++;
	if (!due)
		return;
	if (s->execs >= s->replan_at)
		s->replan_at = s->execs < REPLAN_MAX ? s->execs * 2
		                                     : s->execs + REPLAN_MAX;
	s->replan_by = ax_clock_mono_us() + REPLAN_PERIOD_US;
	PGresult *r  = PQexec(s->conn, "DISCARD PLANS");
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		ax_log_debug("store", "DISCARD PLANS: %s",
		             PQresultErrorMessage(r));
	PQclear(r);
}

/*
 * Before a prepared statement is sent or queued: the unread commands are
 * read first when full (no room for the statement) or when the cached
 * plans are due to be dropped (that is done outside a pipeline); then a
 * statement that starts a pipeline gets a live connection and the replan
 * check, and one that joins a pipeline counts as an execution.
 */
static ax_err
stmt_ready(ax_store *s, int full)
{
	ax_err rv;

	if ((full || (s->ndefer > 0 && replan_due(s))) &&
	    (rv = defer_finish(s, 0)) != AX_OK)
		return rv;
	if (s->ndefer == 0) {
		if ((rv = ensure_conn(s)) != AX_OK)
			return rv;
		replan_check(s);
	} else
		s->execs++;
	return AX_OK;
}

ax_err
ax_store_query_prepared(ax_store *s, const char *name, int nparams,
                        const char *const *params, PGresult **res)
{
	const store_stmt *st = find_stmt(s, name);
	ax_err            rv;

	if (res != NULL)
		*res = NULL;
	if (st == NULL)
		return ax_err_set(AX_ENOENT,
		                  "store: no prepared statement named '%s'",
		                  name);
	if ((rv = stmt_ready(s, 0)) != AX_OK)
		return rv;
	if (s->pend_begin != NULL || s->ndefer > 0 || st->generic) {
		int piped;
		if ((rv = pipe_open(s, &piped)) != AX_OK)
			return rv;
		if (piped)
			return pipe_stmt(s, st, NULL, nparams, params, res);
	}
	PGresult *r =
	    PQexecPrepared(s->conn, name, nparams, params, NULL, NULL, 0);
	return check_result(s, r, name, res);
}

const char *
ax_store_cell(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? NULL : PQgetvalue(r, row, col);
}

int64_t
ax_store_cell_i64(const PGresult *r, int row, int col)
{
	const char *v = ax_store_cell(r, row, col);
	return v != NULL ? strtoll(v, NULL, 10) : 0;
}

ax_err
ax_store_query_int64(ax_store *s, const char *sql, int nparams,
                     const char *const *params, int64_t *out)
{
	PGresult *r;
	ax_err    rv;
	char      label[72];

	if ((rv = ax_store_query(s, sql, nparams, params, &r)) != AX_OK)
		return rv;
	if (PQntuples(r) < 1 || PQnfields(r) < 1 || PQgetisnull(r, 0, 0)) {
		PQclear(r);
		stmt_label(sql, label, sizeof(label));
		return ax_err_set(AX_ENOENT, "store: %s: no value", label);
	}
	*out = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return AX_OK;
}

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
 * (pipe_open).
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
	rv = check_result(s, PQexec(s->conn, sql), sql, &r);
	if (rv == AX_OK && s->fence > 0)
		rv = fence_check(s, r);
	PQclear(r);
	if (rv == AX_OK)
		return AX_OK;
	ax_store_rollback(s);
	return rv == AX_EFENCED ? fence_lost(s) : rv;
}

/* Sends the pending BEGIN of the open transaction, if any, on its own. */
static ax_err
begin_flush(ax_store *s)
{
	const char *b = s->pend_begin;
	ax_err      rv;

	if (b == NULL)
		return AX_OK;
	s->pend_begin = NULL;
	if ((rv = ensure_conn(s)) != AX_OK)
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

	stmt_label(what, label, sizeof(label));
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
 * the next sync (pipe_stmt, defer_finish). *piped is 0 when the
 * connection cannot enter pipeline mode: the opening was then sent on
 * its own and the caller runs its statement the plain way.
 */
static ax_err
pipe_open(ax_store *s, int *piped)
{
	PGconn     *c = s->conn;
	const char *b = s->pend_begin;
	int         n;

	*piped = 1;
	if (s->ndefer == 0 && PQenterPipelineMode(c) != 1) {
		*piped = 0;
		return begin_flush(s);
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
			rv = result_error(s, r[i], what[i], 0);
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
static ax_err
pipe_stmt(ax_store *s, const store_stmt *st, const char *sql, int nparams,
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
	return check_result(s, r[k], what[k], res);
}

/*
 * Reads the answers of the writes sent without waiting, with the
 * transaction's COMMIT sent after them when commit is set: one sync,
 * one round trip for all of them. The first write that failed is the
 * error (the server skipped everything after it, the COMMIT too, and
 * the transaction is rolled back here). With commit, the transaction
 * is over whatever the outcome.
 */
static ax_err
defer_finish(ax_store *s, int commit)
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
			rv = result_error(s, r[nw], "COMMIT", 1);
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
	store_stmt *st = find_stmt(s, name);
	ax_err      rv;

	if (st == NULL)
		return ax_err_set(AX_ENOENT,
		                  "store: no prepared statement named '%s'",
		                  name);
	/* Outside a transaction: a plain write. As the transaction's first
	 * statement it follows the opening (pipe_open), and the fence is
	 * judged with their answers, before any COMMIT is sent. */
	if (!s->in_tx)
		return ax_store_write(s, name, NULL, nparams, params, NULL);
	if ((rv = stmt_ready(s, s->ndefer + stmt_cmds(st) > DEFER_MAX)) !=
	    AX_OK)
		return rv;
	int piped;
	if ((rv = pipe_open(s, &piped)) != AX_OK)
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
 * the transaction's first statement (pipe_open), or on their own before
 * a COPY or a caller's statements (begin_flush). A transaction with no
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
	if ((rv = ensure_conn(s)) != AX_OK)
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
			return defer_finish(s, 1);
		if ((rv = defer_finish(s, 0)) != AX_OK) {
			ax_store_rollback(s);
			return rv;
		}
	}
	if ((rv = ensure_conn(s)) != AX_OK)
		return rv;
	PGresult *r = PQexec(s->conn, "COMMIT");
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		rv = result_error(s, r, "COMMIT", 1);
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

	if ((rv = ensure_conn(s)) != AX_OK || (rv = begin_flush(s)) != AX_OK)
		return rv;
	r = PQexec(s->conn, c->sql);
	if (PQresultStatus(r) != PGRES_COPY_IN) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK &&
		    PQresultStatus(r) != PGRES_TUPLES_OK)
			return check_result(s, r, c->sql, NULL);
		PQclear(r);
		return ax_err_set(AX_EINVAL,
		                  "store: %s: not a COPY FROM STDIN", c->sql);
	}
	PQclear(r);
	/* A failed send still ends the COPY so the server reports why. */
	int sent =
	    c->len == 0 || PQputCopyData(s->conn, c->data, (int) c->len) == 1;
	if (PQputCopyEnd(s->conn, sent ? NULL : "client: send failed") != 1)
		return result_error(s, NULL, c->sql, 0);
	r = PQgetResult(s->conn);
	if (PQresultStatus(r) == PGRES_COMMAND_OK && c->rows != NULL)
		*c->rows = strtoll(PQcmdTuples(r), NULL, 10);
	rv = check_result(s, r, c->sql, NULL);
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

/* ---------------------------------------------------------------------- */
/* batch limit and array parameters of the batched statements */

ax_err
ax_store_batch_check(size_t n, const char *what)
{
	if (n <= AX_STORE_BATCH_MAX)
		return AX_OK;
	return ax_err_set(AX_EINVAL,
	                  "store: %s: %zu rows, at most %d per call", what, n,
	                  AX_STORE_BATCH_MAX);
}

static void
sqlarr_put(ax_sqlarr *a, const char *s, size_t n)
{
	ax_buf_append(&a->b, s, n);
}

static void
sqlarr_sep(ax_sqlarr *a)
{
	sqlarr_put(a, a->n++ == 0 ? "{" : ",", 1);
}

void
ax_sqlarr_int(ax_sqlarr *a, int64_t v)
{
	/* digits from the end; no printf (a hot path: ids of every row) */
	char     b[24];
	size_t   i = sizeof(b);
	uint64_t u = v < 0 ? 0 - (uint64_t) v : (uint64_t) v;
	do {
		b[--i] = (char) ('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		b[--i] = '-';
	sqlarr_sep(a);
	sqlarr_put(a, b + i, sizeof(b) - i);
}

void
ax_sqlarr_int0(ax_sqlarr *a, int64_t v)
{
	if (v == 0) {
		sqlarr_sep(a);
		sqlarr_put(a, "NULL", 4);
		return;
	}
	ax_sqlarr_int(a, v);
}

/* Text element: always quoted, " and \ escaped; NULL is SQL NULL. */
void
ax_sqlarr_text(ax_sqlarr *a, const char *s)
{
	sqlarr_sep(a);
	if (s == NULL) {
		sqlarr_put(a, "NULL", 4);
		return;
	}
	sqlarr_put(a, "\"", 1);
	/* runs without a character to escape are copied whole: payloads of
	 * a few hundred bytes went through here one byte per call */
	for (const char *p = s; *p != '\0';) {
		size_t run = strcspn(p, "\"\\");
		sqlarr_put(a, p, run);
		p += run;
		if (*p != '\0') {
			char esc[2] = { '\\', *p++ };
			sqlarr_put(a, esc, 2);
		}
	}
	sqlarr_put(a, "\"", 1);
}

void
ax_sqlarr_bool(ax_sqlarr *a, int v)
{
	sqlarr_sep(a);
	sqlarr_put(a, v ? "t" : "f", 1);
}

const char *
ax_sqlarr_end(ax_sqlarr *a)
{
	sqlarr_put(a, a->n == 0 ? "{}" : "}", a->n == 0 ? 2 : 1);
	return ax_buf_err(&a->b) != AX_OK ? NULL : ax_buf_str(&a->b);
}

void
ax_sqlarr_fini(ax_sqlarr *a)
{
	ax_buf_fini(&a->b);
	a->n = 0;
}

ax_err
ax_sqlarr_end_all(ax_sqlarr *a, const char **p, size_t n)
{
	ax_err rv = AX_OK;
	for (size_t i = 0; i < n; i++)
		if ((p[i] = ax_sqlarr_end(&a[i])) == NULL)
			rv = ax_err_set(AX_ENOMEM,
			                "store: out of memory for an array "
			                "parameter");
	return rv;
}

void
ax_sqlarr_fini_all(ax_sqlarr *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ax_sqlarr_fini(&a[i]);
}
