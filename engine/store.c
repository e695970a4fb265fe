/*
 * store.c - the core of the store (see store.h): the libpq connection,
 * its session and reconnection, SQLSTATE -> ax_err translation, the DSN
 * helpers and the registered prepared statements with the dropping of
 * their cached plans. Transactions, the pipeline of writes sent without
 * waiting and the fence are in store_tx.c, the array literals of batched
 * statements in store_sqlarr.c (both share struct ax_store through
 * store_core.h); the SQL of each table sits in its own store_*.c.
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "log.h"
#include "store_core.h"

#define RECONNECT_TIMEOUT_US (5 * AX_USEC_PER_SEC)
#define RECONNECT_DELAY0_US  (20 * AX_USEC_PER_MSEC)
#define RECONNECT_DELAY_MAX  AX_USEC_PER_SEC
#define REPLAN_FIRST         64 /* see replan_check */
#define REPLAN_MAX           (1u << 20)
#define REPLAN_PERIOD_US     (60 * AX_USEC_PER_SEC)

/* The libpq `options` entry that carries a fence in a DSN. */
#define FENCE_OPTION "ax.fence_epoch="

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
void
axs_stmt_label(const char *what, char *buf, size_t len)
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
ax_err
axs_result_error(ax_store *s, PGresult *r, const char *what, int committing)
{
	char label[72];

	axs_stmt_label(what, label, sizeof(label));
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
		rv = axs_result_error(s, r, "SET statement_timeout", 0);
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
		rv = axs_result_error(s, r, "SET TIME ZONE", 0);
	PQclear(r);
	if (rv == AX_OK && s->stmt_timeout_ms > 0)
		rv = stmt_timeout_apply(s);
	for (size_t i = 0; rv == AX_OK && i < s->nstmts; i++) {
		store_stmt *st = &s->stmts[i];
		r = PQprepare(s->conn, st->name, st->sql, st->nparams, NULL);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			rv = axs_result_error(s, r, st->name, 0);
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
	(void) axs_begin_flush(s);
	if (s->ndefer > 0)
		(void) axs_defer_finish(s, 0);
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
ax_err
axs_ensure_conn(ax_store *s)
{
	ax_err rv;

	/* the answers of writes sent without waiting come first */
	if (s->ndefer > 0 && (rv = axs_defer_finish(s, 0)) != AX_OK)
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

store_stmt *
axs_find_stmt(ax_store *s, const char *name)
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

	if (axs_find_stmt(s, name) != NULL)
		return ax_err_set(AX_EEXIST,
		                  "store: statement '%s' is already prepared",
		                  name);
	if ((rv = axs_ensure_conn(s)) != AX_OK)
		return rv;
	PGresult *r = PQprepare(s->conn, name, sql, nparams, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		rv = axs_result_error(s, r, name, 0);
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
	if (axs_find_stmt(s, name) != NULL)
		return AX_OK;
	return ax_store_prepare(s, name, sql, nparams);
}

ax_err
ax_store_prepare_generic(ax_store *s, const char *name, const char *sql,
                         int nparams)
{
	store_stmt *st = axs_find_stmt(s, name);
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
	if ((rv = axs_ensure_conn(s)) != AX_OK)
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
			first = axs_result_error(s, r, st->name, 0);
		PQclear(r);
	}
	ax_buf_fini(&b);
	return first;
}

ax_err
axs_check_result(ax_store *s, PGresult *r, const char *what, PGresult **res)
{
	ExecStatusType st = PQresultStatus(r);
	if (r != NULL && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)) {
		if (res != NULL)
			*res = r;
		else
			PQclear(r);
		return AX_OK;
	}
	ax_err rv = axs_result_error(s, r, what, 0);
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
	if (s->ndefer == 0 && (rv = axs_ensure_conn(s)) != AX_OK)
		return rv;
	if (s->pend_begin != NULL || s->ndefer > 0) {
		int piped;
		if ((rv = axs_pipe_open(s, &piped)) != AX_OK)
			return rv;
		if (piped)
			return axs_pipe_stmt(s, NULL, sql, nparams, params,
			                     res);
	}
	PGresult *r =
	    PQexecParams(s->conn, sql, nparams, NULL, params, NULL, NULL, 0);
	return axs_check_result(s, r, sql, res);
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
ax_err
axs_stmt_ready(ax_store *s, int full)
{
	ax_err rv;

	if ((full || (s->ndefer > 0 && replan_due(s))) &&
	    (rv = axs_defer_finish(s, 0)) != AX_OK)
		return rv;
	if (s->ndefer == 0) {
		if ((rv = axs_ensure_conn(s)) != AX_OK)
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
	const store_stmt *st = axs_find_stmt(s, name);
	ax_err            rv;

	if (res != NULL)
		*res = NULL;
	if (st == NULL)
		return ax_err_set(AX_ENOENT,
		                  "store: no prepared statement named '%s'",
		                  name);
	if ((rv = axs_stmt_ready(s, 0)) != AX_OK)
		return rv;
	if (s->pend_begin != NULL || s->ndefer > 0 || st->generic) {
		int piped;
		if ((rv = axs_pipe_open(s, &piped)) != AX_OK)
			return rv;
		if (piped)
			return axs_pipe_stmt(s, st, NULL, nparams, params,
			                     res);
	}
	PGresult *r =
	    PQexecPrepared(s->conn, name, nparams, params, NULL, NULL, 0);
	return axs_check_result(s, r, name, res);
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
		axs_stmt_label(sql, label, sizeof(label));
		return ax_err_set(AX_ENOENT, "store: %s: no value", label);
	}
	*out = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return AX_OK;
}
