/*
 * store_lease.c - the scheduler_lease row and the leadership of axd (see
 * store_lease.h): expiry-based lease take/renew/release on a pipeline
 * connection, and the advisory lock of the leader connection that moves
 * the epoch every fenced write checks.
 */
#include "store_lease.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "store_internal.h"

/* --- lease --------------------------------------------------------------
 */

/* One takeover attempt: in, the holder and ttl; out, the new epoch. */
typedef struct lease_take {
	const char *holder;
	int64_t     ttl_us;
	int64_t     epoch;    /* 0: not taken */
	char        who[128]; /* the holder that keeps it */
	char        until[64];
} lease_take;

/*
 * The takeover: a plain read first, so a standby polling a valid lease
 * locks nothing; then the EXCLUSIVE lock that fenced transactions (store.h,
 * "Fencing") conflict with, so the epoch moves only once the deposed
 * holder's transactions in flight are over; then the update, which checks
 * the lease again under the lock.
 */
static ax_err
lease_take_tx(ax_store *s, void *arg)
{
	static const char peek[] =
	    "SELECT holder IS NULL OR holder = $1 OR expires_at IS NULL"
	    " OR expires_at < now(), coalesce(holder, '?'),"
	    " coalesce(expires_at::text, '?') FROM scheduler_lease WHERE id";
	static const char upd[] =
	    "UPDATE scheduler_lease SET epoch = epoch + 1, holder = $1,"
	    " acquired_at = now(),"
	    " expires_at = now() + $2::bigint * interval '1 microsecond'"
	    " WHERE id AND (holder IS NULL OR holder = $1 OR expires_at IS "
	    "NULL OR expires_at < now()) RETURNING epoch";
	lease_take *t = arg;
	char        ttl[24], lock[96];
	const char *p[2] = { t->holder, ttl };
	PGresult   *res  = NULL;
	int         free_now;
	ax_err      rv;

	t->epoch = 0;
	snprintf(ttl, sizeof(ttl), "%lld", (long long) t->ttl_us);
	/* a deposed holder stuck in a transaction must not stall the
	 * standby: give up after a third of the lease and try again */
	snprintf(lock, sizeof(lock), "SET LOCAL lock_timeout = %lld",
	         (long long) (t->ttl_us / 3 / 1000 > 100 ? t->ttl_us / 3 / 1000
	                                                 : 100));
	if ((rv = ax_store_query(s, peek, 1, p, &res)) != AX_OK)
		return rv;
	free_now = PQntuples(res) == 1 && PQgetvalue(res, 0, 0)[0] == 't';
	if (PQntuples(res) == 1) {
		snprintf(t->who, sizeof(t->who), "%s", PQgetvalue(res, 0, 1));
		snprintf(t->until, sizeof(t->until), "%s",
		         PQgetvalue(res, 0, 2));
	}
	PQclear(res);
	if (!free_now)
		return AX_OK;
	if ((rv = ax_store_exec(s, lock, 0, NULL)) != AX_OK ||
	    (rv = ax_store_exec(s,
	                        "LOCK TABLE scheduler_lease IN EXCLUSIVE MODE",
	                        0, NULL)) != AX_OK ||
	    (rv = ax_store_query(s, upd, 2, p, &res)) != AX_OK)
		return rv;
	if (PQntuples(res) == 1)
		t->epoch = ax_store_cell_i64(res, 0, 0);
	PQclear(res);
	return AX_OK;
}

ax_err
ax_store_sched_lease_take(ax_store *s, const char *holder, int64_t ttl_us,
                          int64_t *epoch)
{
	lease_take t = { .holder = holder, .ttl_us = ttl_us };
	ax_err     rv;

	snprintf(t.who, sizeof(t.who), "?");
	snprintf(t.until, sizeof(t.until), "?");
	rv = ax_store_tx(s, lease_take_tx, &t);
	if (rv == AX_EBUSY)
		return ax_err_set(
		    AX_EBUSY,
		    "the scheduler lease is free but transactions "
		    "of its previous holder '%s' are still "
		    "running (the takeover waits for them)",
		    t.who);
	if (rv != AX_OK)
		return rv;
	if (t.epoch > 0) {
		*epoch = t.epoch;
		return AX_OK;
	}
	return ax_err_set(AX_EBUSY,
	                  "the scheduler lease is held by '%s' until %s; "
	                  "another axd is active (wait for it to stop, or for "
	                  "its lease to lapse)",
	                  t.who, t.until);
}

/* The renewal both lease APIs send: $1 holder, $2 epoch, $3 ttl_us. */
static const char renew_sql[] =
    "UPDATE scheduler_lease SET"
    " expires_at = now() + $3::bigint * interval '1 microsecond'"
    " WHERE id AND holder = $1 AND epoch = $2::bigint RETURNING epoch";

/* The parameters of renew_sql; the strings live in r. */
typedef struct renew_args {
	char        ep[24], ttl[24];
	const char *p[3];
} renew_args;

static void
renew_args_init(renew_args *r, const char *holder, int64_t epoch,
                int64_t ttl_us)
{
	snprintf(r->ep, sizeof(r->ep), "%lld", (long long) epoch);
	snprintf(r->ttl, sizeof(r->ttl), "%lld", (long long) ttl_us);
	r->p[0] = holder;
	r->p[1] = r->ep;
	r->p[2] = r->ttl;
}

/* Reads (and clears) renew_sql's result: AX_OK when a row was renewed,
 * lost (the epoch moved on) otherwise. */
static ax_err
renew_result(PGresult *res, ax_err lost, int64_t epoch)
{
	int ok = PQntuples(res) == 1;

	PQclear(res);
	if (!ok)
		return ax_err_set(lost,
		                  "the scheduler lease (epoch %lld) was taken "
		                  "over by another axd: its epoch moved on",
		                  (long long) epoch);
	return AX_OK;
}

ax_err
ax_store_sched_lease_renew(ax_store *s, const char *holder, int64_t epoch,
                           int64_t ttl_us)
{
	renew_args a;
	PGresult  *res = NULL;
	ax_err     rv;

	renew_args_init(&a, holder, epoch, ttl_us);
	if ((rv = ax_store_query(s, renew_sql, 3, a.p, &res)) != AX_OK)
		return rv;
	return renew_result(res, AX_EBUSY, epoch);
}

ax_err
ax_store_sched_lease_release(ax_store *s, const char *holder, int64_t epoch)
{
	char        ep[24];
	const char *p[2] = { holder, ep };

	snprintf(ep, sizeof(ep), "%lld", (long long) epoch);
	return ax_store_exec(
	    s,
	    "UPDATE scheduler_lease SET expires_at = now()"
	    " WHERE id AND holder = $1 AND epoch = $2::bigint",
	    2, p);
}

/* --- leadership ---------------------------------------------------------
 */

struct ax_store_sched_leader {
	PGconn *conn;          /* NULL once closed */
	char    dsn_safe[512]; /* password masked: for messages */
};

/* Fenced transactions of a deposed leader get this long to end before
 * a take terminates them (ax_store_sched_leader_take). */
#define SEIZE_LOCK_TIMEOUT_MS 300
#define SEIZE_ATTEMPTS        5

/* AX_SCHED_LOCK_KEY as a query parameter. */
#define LOCK_KEY_TEXT "4708640281206285312"

/* libpq's message on one line, without its trailing newline. */
static const char *
conn_msg(PGconn *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s", c != NULL ? PQerrorMessage(c) : "closed");
	for (char *p = buf; *p != '\0'; p++)
		if (*p == '\n')
			*p = (p[1] == '\0') ? '\0' : ' ';
	return buf;
}

/*
 * Runs sql on the leader connection. AX_EDBCONN once the session has
 * ended (nothing reconnects), otherwise the SQLSTATE's ax_err; the detail
 * names what. *res (may be NULL) receives a row result.
 */
static ax_err
lq(ax_store_sched_leader *l, const char *what, const char *sql, int n,
   const char *const *p, PGresult **res)
{
	PGresult      *r;
	ExecStatusType st;
	char           msg[512];
	ax_err         rv;

	if (res != NULL)
		*res = NULL;
	if (l->conn == NULL || PQstatus(l->conn) != CONNECTION_OK)
		return ax_err_set(
		    AX_EDBCONN, "scheduler leader connection to %s: %s",
		    l->dsn_safe, conn_msg(l->conn, msg, sizeof(msg)));
	/* without parameters: the simple protocol, which takes several
	 * statements (the session setup) */
	r  = n == 0 ? PQexec(l->conn, sql)
	            : PQexecParams(l->conn, sql, n, NULL, p, NULL, NULL, 0);
	st = PQresultStatus(r);
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
		if (res != NULL)
			*res = r;
		else
			PQclear(r);
		return AX_OK;
	}
	rv = PQstatus(l->conn) != CONNECTION_OK
	    ? AX_EDBCONN
	    : ax_store_sqlstate_err(r ? PQresultErrorField(r, PG_DIAG_SQLSTATE)
	                              : NULL);
	ax_err_set(rv, "scheduler leader connection to %s: %s: %s",
	           l->dsn_safe, what, conn_msg(l->conn, msg, sizeof(msg)));
	PQclear(r);
	return rv;
}

ax_err
ax_store_sched_leader_open(const char *dsn, int64_t ttl_us,
                           ax_store_sched_leader **out)
{
	/* the client notices a dead server, the server a dead client,
	 * within about ttl / 2 (at least 4 s: whole seconds, 3 probes) */
	int64_t idle = ttl_us / 4 / AX_USEC_PER_SEC, intv;
	char    s_idle[24], s_intv[24], s_uto[24], s_ct[24], setup[512];
	char    msg[512];
	ax_store_sched_leader *l;
	ax_err                 rv;

	*out = NULL;
	idle = idle < 1 ? 1 : idle;
	intv = ttl_us / 12 / AX_USEC_PER_SEC;
	intv = intv < 1 ? 1 : intv;
	snprintf(s_idle, sizeof(s_idle), "%lld", (long long) idle);
	snprintf(s_intv, sizeof(s_intv), "%lld", (long long) intv);
	snprintf(s_uto, sizeof(s_uto), "%lld",
	         (long long) ((idle + 3 * intv) * 1000));
	snprintf(s_ct, sizeof(s_ct), "%lld",
	         (long long) (ttl_us / 2 / AX_USEC_PER_SEC < 2
	                          ? 2
	                          : ttl_us / 2 / AX_USEC_PER_SEC));
	/* our defaults first: a keyword of the DSN overrides them */
	const char *keys[] = { "keepalives",
		               "keepalives_idle",
		               "keepalives_interval",
		               "keepalives_count",
		               "tcp_user_timeout",
		               "connect_timeout",
		               "fallback_application_name",
		               "dbname",
		               NULL };
	const char *vals[] = { "1",  s_idle,       s_intv,         "3", s_uto,
		               s_ct, "axd-leader", dsn ? dsn : "", NULL };

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return ax_err_set(AX_ENOMEM,
		                  "scheduler leader: out of memory");
	ax_store_dsn_redact(dsn ? dsn : "", l->dsn_safe, sizeof(l->dsn_safe));
	l->conn = PQconnectdbParams(keys, vals, 1);
	if (l->conn == NULL || PQstatus(l->conn) != CONNECTION_OK) {
		rv = ax_err_set(
		    AX_EDBCONN, "cannot connect to PostgreSQL at %s: %s",
		    l->dsn_safe, conn_msg(l->conn, msg, sizeof(msg)));
		ax_store_sched_leader_close(l);
		return rv;
	}
	snprintf(
	    setup, sizeof(setup),
	    "SET TIME ZONE 'UTC'; SET statement_timeout = %lld;"
	    " SET tcp_keepalives_idle = %s;"
	    " SET tcp_keepalives_interval = %s;"
	    " SET tcp_keepalives_count = 3; SET tcp_user_timeout = %s",
	    (long long) (ttl_us / 2 / 1000 < 1000 ? 1000 : ttl_us / 2 / 1000),
	    s_idle, s_intv, s_uto);
	if ((rv = lq(l, "session setup", setup, 0, NULL, NULL)) != AX_OK) {
		ax_store_sched_leader_close(l);
		return rv;
	}
	*out = l;
	return AX_OK;
}

void
ax_store_sched_leader_close(ax_store_sched_leader *l)
{
	if (l == NULL)
		return;
	if (l->conn != NULL)
		PQfinish(l->conn);
	free(l);
}

int
ax_store_sched_leader_socket(const ax_store_sched_leader *l)
{
	return l != NULL && l->conn != NULL ? PQsocket(l->conn) : -1;
}

ax_err
ax_store_sched_leader_alive(ax_store_sched_leader *l)
{
	char      msg[512];
	PGnotify *n;

	/* two reads: a closing server leaves its FATAL message, then EOF */
	if (l->conn != NULL && PQstatus(l->conn) == CONNECTION_OK &&
	    PQconsumeInput(l->conn) && PQconsumeInput(l->conn) &&
	    PQstatus(l->conn) == CONNECTION_OK) {
		while ((n = PQnotifies(l->conn)) != NULL)
			PQfreemem(n);
		return AX_OK;
	}
	return ax_err_set(AX_EDBCONN,
	                  "the scheduler leader session at %s ended: %s",
	                  l->dsn_safe, conn_msg(l->conn, msg, sizeof(msg)));
}

/* The lock without waiting: *got = 1 when this session holds it now. */
static ax_err
try_lock(ax_store_sched_leader *l, int *got)
{
	static const char *const p[1] = { LOCK_KEY_TEXT };
	PGresult                *r;
	ax_err                   rv = lq(l, "pg_try_advisory_lock",
	                                 "SELECT pg_try_advisory_lock($1::bigint)", 1, p, &r);

	*got = 0;
	if (rv != AX_OK)
		return rv;
	*got = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	return AX_OK;
}

static void
unlock(ax_store_sched_leader *l)
{
	static const char *const p[1] = { LOCK_KEY_TEXT };
	(void) lq(l, "pg_advisory_unlock",
	          "SELECT pg_advisory_unlock($1::bigint)", 1, p, NULL);
}

/*
 * The lock is held by another session: reads who holds the row, and
 * ends that session when it hangs: the row expired and the session has
 * been idle for a whole ttl_us (its last statement was the renewal that
 * expired; a leader between its lock and its epoch bump, whose row still
 * shows its predecessor's expired lease, is busy, not idle). *ended = 1
 * when a session was terminated. AX_EBUSY with the holder otherwise.
 */
static ax_err
busy_or_end_holder(ax_store_sched_leader *l, int64_t ttl_us, int *ended)
{
	static const char sql[] =
	    "SELECT coalesce(s.holder, '?'), coalesce(s.expires_at::text, "
	    "'?'),"
	    " s.expires_at IS NOT NULL AND s.expires_at < now(), h.pid,"
	    " coalesce(h.idle, false)"
	    " FROM scheduler_lease s LEFT JOIN (SELECT k.pid, a.state = 'idle'"
	    " AND a.state_change < now() - $2::bigint * interval "
	    "'1 microsecond' AS idle"
	    " FROM pg_locks k LEFT JOIN pg_stat_activity a ON a.pid = k.pid"
	    " WHERE k.locktype = 'advisory'"
	    " AND k.classid = ($1::bigint >> 32)::oid"
	    " AND k.objid = ($1::bigint & 4294967295)::oid"
	    " AND k.objsubid = 1 AND k.granted LIMIT 1) h ON true"
	    " WHERE s.id";
	char        ttl[24], who[160], until[64], pid[24];
	const char *p[2] = { LOCK_KEY_TEXT, ttl };
	const char *q[1] = { pid };
	PGresult   *r;
	int         hung;
	ax_err      rv;

	*ended = 0;
	snprintf(ttl, sizeof(ttl), "%lld", (long long) ttl_us);
	if ((rv = lq(l, "lease holder", sql, 2, p, &r)) != AX_OK)
		return rv;
	if (PQntuples(r) != 1) {
		PQclear(r);
		return ax_err_set(AX_EBUSY,
		                  "the scheduler leadership lock is "
		                  "held, and the scheduler_lease row "
		                  "is missing");
	}
	snprintf(who, sizeof(who), "%s", PQgetvalue(r, 0, 0));
	snprintf(until, sizeof(until), "%s", PQgetvalue(r, 0, 1));
	snprintf(pid, sizeof(pid), "%s", PQgetvalue(r, 0, 3));
	hung = PQgetvalue(r, 0, 2)[0] == 't' && pid[0] != '\0' &&
	    PQgetvalue(r, 0, 4)[0] == 't';
	PQclear(r);
	if (hung) {
		ax_logf(AX_LOG_WARN, "store", "LEASE_EXPIRED", NULL,
		        "the scheduler lease of '%s' expired at %s but its "
		        "session (backend pid %s) still holds the leadership "
		        "lock: the holder hangs; ending that session",
		        who, until, pid);
		if ((rv = lq(l, "pg_terminate_backend",
		             "SELECT pg_terminate_backend($1::int, 1000)", 1,
		             q, NULL)) != AX_OK)
			return ax_err_set(
			    rv,
			    "cannot end the session of the hung "
			    "scheduler '%s' (backend pid %s): %s; "
			    "give this role pg_signal_backend or "
			    "run every axd as the same role",
			    who, pid, ax_err_detail());
		*ended = 1;
		return AX_OK;
	}
	return ax_err_set(AX_EBUSY,
	                  "the scheduler lease is held by '%s' until %s; "
	                  "another axd is active (this one takes over the "
	                  "moment that one's session ends)",
	                  who, until);
}

/* Ends the sessions whose fenced transactions hold scheduler_lease (a
 * deposed leader's, still open: see ax_store_sched_leader_take). */
static ax_err
end_fenced_writers(ax_store_sched_leader *l)
{
	static const char sql[] =
	    "SELECT count(pg_terminate_backend(pid, 1000)) FROM pg_locks"
	    " WHERE locktype = 'relation'"
	    " AND relation = 'scheduler_lease'::regclass"
	    " AND mode = 'RowShareLock' AND granted"
	    " AND pid <> pg_backend_pid()";
	PGresult *r;
	ax_err    rv = lq(l, "end fenced writers", sql, 0, NULL, &r);

	if (rv != AX_OK)
		return rv;
	ax_logf(AX_LOG_WARN, "store", "LEASE_TAKEOVER", NULL,
	        "ended %s session(s) of the previous scheduler still in a "
	        "fenced transaction after %d ms",
	        PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "?",
	        SEIZE_LOCK_TIMEOUT_MS);
	PQclear(r);
	return AX_OK;
}

/* Bumps the epoch; the caller holds the lock. AX_ETIMEDOUT when the
 * deposed leader's transactions kept the table locked. */
static ax_err
seize(ax_store_sched_leader *l, const char *holder, int64_t ttl_us,
      int64_t *epoch)
{
	static const char upd[] =
	    "UPDATE scheduler_lease SET epoch = epoch + 1, holder = $1,"
	    " acquired_at = now(),"
	    " expires_at = now() + $2::bigint * interval '1 microsecond'"
	    " WHERE id RETURNING epoch";
	char        ttl[24], lock[64];
	const char *p[2] = { holder, ttl };
	PGresult   *r;
	ax_err      rv = AX_OK;

	snprintf(ttl, sizeof(ttl), "%lld", (long long) ttl_us);
	snprintf(lock, sizeof(lock), "SET LOCAL lock_timeout = %d",
	         SEIZE_LOCK_TIMEOUT_MS);
	for (int i = 0; i < SEIZE_ATTEMPTS; i++) {
		if ((rv = lq(l, "BEGIN", "BEGIN", 0, NULL, NULL)) != AX_OK)
			return rv;
		if ((rv = lq(l, "lock_timeout", lock, 0, NULL, NULL)) ==
		        AX_OK &&
		    (rv = lq(l, "LOCK scheduler_lease",
		             "LOCK TABLE scheduler_lease IN EXCLUSIVE MODE", 0,
		             NULL, NULL)) == AX_OK &&
		    (rv = lq(l, "epoch bump", upd, 2, p, &r)) == AX_OK) {
			*epoch =
			    PQntuples(r) == 1 ? ax_store_cell_i64(r, 0, 0) : 0;
			PQclear(r);
			if (*epoch <= 0)
				rv = ax_err_set(
				    AX_ENOENT,
				    "the scheduler_lease row is "
				    "missing: run `axctl db migrate`");
			else
				rv = lq(l, "COMMIT", "COMMIT", 0, NULL, NULL);
			if (rv != AX_OK)
				(void) lq(l, "ROLLBACK", "ROLLBACK", 0, NULL,
				          NULL);
			return rv;
		}
		(void) lq(l, "ROLLBACK", "ROLLBACK", 0, NULL, NULL);
		if (rv != AX_EBUSY) /* 55P03: lock_timeout */
			return rv;
		if ((rv = end_fenced_writers(l)) != AX_OK)
			return rv;
	}
	return ax_err_set(AX_ETIMEDOUT,
	                  "the scheduler lease table stayed locked by the "
	                  "previous scheduler's transactions through %d "
	                  "attempts",
	                  SEIZE_ATTEMPTS);
}

ax_err
ax_store_sched_leader_take(ax_store_sched_leader *l, const char *holder,
                           int64_t ttl_us, int64_t *epoch)
{
	int    got = 0, ended = 0;
	ax_err rv;

	if ((rv = try_lock(l, &got)) != AX_OK)
		return rv;
	if (!got) {
		if ((rv = busy_or_end_holder(l, ttl_us, &ended)) != AX_OK)
			return rv;
		if ((rv = try_lock(l, &got)) != AX_OK)
			return rv;
		if (!got)
			return ax_err_set(
			    AX_EBUSY,
			    "the session of the hung scheduler "
			    "was ended; its lock is not free yet");
	}
	if ((rv = seize(l, holder, ttl_us, epoch)) != AX_OK) {
		char why[512];
		snprintf(why, sizeof(why), "%s", ax_err_detail());
		unlock(l);
		return ax_err_set(rv, "%s", why);
	}
	return AX_OK;
}

ax_err
ax_store_sched_leader_renew(ax_store_sched_leader *l, const char *holder,
                            int64_t epoch, int64_t ttl_us)
{
	renew_args a;
	PGresult  *r;
	ax_err     rv;

	renew_args_init(&a, holder, epoch, ttl_us);
	if ((rv = lq(l, "lease renewal", renew_sql, 3, a.p, &r)) != AX_OK)
		return rv;
	return renew_result(r, AX_EFENCED, epoch);
}

ax_err
ax_store_sched_leader_release(ax_store_sched_leader *l, const char *holder,
                              int64_t epoch)
{
	char        ep[24];
	const char *p[2] = { holder, ep };
	ax_err      rv;

	snprintf(ep, sizeof(ep), "%lld", (long long) epoch);
	rv = lq(l, "lease release",
	        "UPDATE scheduler_lease SET expires_at = now()"
	        " WHERE id AND holder = $1 AND epoch = $2::bigint",
	        2, p, NULL);
	unlock(l);
	return rv;
}
