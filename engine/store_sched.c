/*
 * store_sched.c - batched SQL of the DAG loader, time detector and lease
 * (see store_sched.h). Statements take array literals and unnest them:
 * one round trip per statement whatever the batch size.
 */
#include "store_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH_MAX 10000

/* Prepares a statement of this module on first use on s. */
static ax_err
stmt(ax_store *s, const char *name, const char *sql, int nparams)
{
	return ax_store_prepare_once(s, name, sql, nparams);
}

static int64_t
val_i64(PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col)
	    ? 0
	    : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

/* --- DAG loader ---------------------------------------------------------
 */

ax_err
ax_store_sched_dags(ax_store *s, const char *dag_name, int64_t after_id,
                    int limit, PGresult **res)
{
	/* keyset paging: the index on dags.id drives the scan, and the
	 * schedules join is bounded by the same key, so a merge join starts
	 * at the slice instead of at the first row (every slice costs the
	 * same, the millionth DAG like the first) */
#define SCHED_DAGS_COLS                                                       \
	"SELECT d.id, d.name, d.paused, d.active_version_id,"                 \
	" v.schedule_expr, v.schedule_tz, v.schedule_catchup,"                \
	" v.schedule_start, v.schedule_end,"                                  \
	" s.id, s.expression, s.tz, s.catchup, ax_us(s.start_at),"            \
	" ax_us(s.end_at), ax_us(s.next_fire_at),"                            \
	" s.last_fire_at IS NOT NULL"                                         \
	" FROM dags d JOIN dag_versions v ON v.id = d.active_version_id"
	static const char all_sql[] = SCHED_DAGS_COLS
	    " LEFT JOIN schedules s ON s.dag_id = d.id AND s.dag_id > $1"
	    " WHERE d.id > $1::bigint ORDER BY d.id LIMIT $2::int";
	static const char one_sql[] =
	    SCHED_DAGS_COLS " LEFT JOIN schedules s ON s.dag_id = d.id"
	                    " WHERE d.name = $1";
#undef SCHED_DAGS_COLS
	char        after[24], lim[16];
	const char *p[2] = { after, lim };
	ax_err      rv;

	if (dag_name != NULL) {
		if ((rv = stmt(s, "sched_dag_one", one_sql, 1)) != AX_OK)
			return rv;
		return ax_store_query_prepared(s, "sched_dag_one", 1,
		                               &dag_name, res);
	}
	snprintf(after, sizeof(after), "%lld", (long long) after_id);
	snprintf(lim, sizeof(lim), "%d", limit > 0 ? limit : 1);
	/* a parallel plan costs more to start (about 40 ms) than a slice
	 * costs to read (about 15 ms); set per call, so a reconnect does
	 * not lose it */
	if ((rv = ax_store_exec(s, "SET max_parallel_workers_per_gather = 0",
	                        0, NULL)) != AX_OK ||
	    (rv = stmt(s, "sched_dags", all_sql, 2)) != AX_OK)
		return rv;
	return ax_store_query_prepared(s, "sched_dags", 2, p, res);
}

ax_err
ax_store_sched_upsert(ax_store *s, ax_store_sched_row *rows, size_t n)
{
	/* the rows come back by ordinality: O(n) matching */
	static const char sql[] =
	    "WITH u AS (SELECT * FROM unnest($1::bigint[], $2::text[],"
	    " $3::text[], $4::bool[], $5::bigint[], $6::bigint[],"
	    " $7::bigint[]) WITH ORDINALITY AS u(d, e, z, c, st, en, nf, "
	    "ord)),"
	    " up AS (INSERT INTO schedules AS s (dag_id, expression, tz,"
	    " catchup, start_at, end_at, next_fire_at)"
	    " SELECT u.d, u.e, u.z, u.c, ax_ts(u.st), ax_ts(u.en), ax_ts(u.nf)"
	    " FROM u ORDER BY u.ord"
	    " ON CONFLICT (dag_id) DO UPDATE SET"
	    " expression = EXCLUDED.expression, tz = EXCLUDED.tz,"
	    " catchup = EXCLUDED.catchup, start_at = EXCLUDED.start_at,"
	    " end_at = EXCLUDED.end_at,"
	    " next_fire_at = CASE WHEN (s.next_fire_at IS NULL AND"
	    " s.last_fire_at IS NULL) OR s.expression <> EXCLUDED.expression"
	    " OR s.tz <> EXCLUDED.tz THEN EXCLUDED.next_fire_at"
	    " ELSE s.next_fire_at END,"
	    " updated_at = now()"
	    " RETURNING s.dag_id, s.id, coalesce(ax_us(s.next_fire_at), 0)"
	    " AS nf)"
	    " SELECT u.ord, up.id, up.nf FROM u JOIN up ON up.dag_id = u.d";
	ax_sqlarr   a[7] = { 0 };
	const char *p[7];
	PGresult   *res = NULL;
	ax_err      rv;

	if (n == 0)
		return AX_OK;
	if (n > BATCH_MAX)
		return ax_err_set(AX_EINVAL,
		                  "schedules upsert: %zu rows, at "
		                  "most 10000 per call",
		                  n);
	for (size_t i = 0; i < n; i++) {
		ax_sqlarr_int(&a[0], rows[i].dag_id);
		ax_sqlarr_text(&a[1], rows[i].expression);
		ax_sqlarr_text(&a[2], rows[i].tz ? rows[i].tz : "UTC");
		ax_sqlarr_bool(&a[3], rows[i].catchup);
		ax_sqlarr_int0(&a[4], rows[i].start_us);
		ax_sqlarr_int0(&a[5], rows[i].end_us);
		ax_sqlarr_int0(&a[6], rows[i].first_fire_us);
	}
	if ((rv = ax_sqlarr_end_all(a, p, 7)) == AX_OK &&
	    (rv = stmt(s, "sched_upsert", sql, 7)) == AX_OK)
		rv = ax_store_write(s, "sched_upsert", NULL, 7, p, &res);
	ax_sqlarr_fini_all(a, 7);
	if (rv != AX_OK)
		return rv;
	for (int r = 0; r < PQntuples(res); r++) {
		int64_t ord = val_i64(res, r, 0);
		if (ord >= 1 && (size_t) ord <= n) {
			rows[ord - 1].schedule_id  = val_i64(res, r, 1);
			rows[ord - 1].next_fire_us = val_i64(res, r, 2);
		}
	}
	PQclear(res);
	return AX_OK;
}

ax_err
ax_store_sched_delete(ax_store *s, const int64_t *dag_ids, size_t n)
{
	ax_sqlarr   a = { 0 };
	const char *p[1];
	ax_err      rv;

	if (n == 0)
		return AX_OK;
	for (size_t i = 0; i < n; i++)
		ax_sqlarr_int(&a, dag_ids[i]);
	if ((rv = ax_sqlarr_end_all(&a, p, 1)) == AX_OK)
		rv = ax_store_write(
		    s, NULL,
		    "DELETE FROM schedules WHERE dag_id = ANY($1::bigint[])",
		    1, p, NULL);
	ax_sqlarr_fini(&a);
	return rv;
}

/* --- time detector ------------------------------------------------------
 */

/* The arguments of a create_runs transaction of its own. */
typedef struct create_runs_arg {
	ax_store_run_row *rows;
	size_t            n;
} create_runs_arg;

static ax_err
create_runs_tx(ax_store *s, void *arg)
{
	create_runs_arg *c = arg;
	return ax_store_sched_create_runs(s, c->rows, c->n);
}

ax_err
ax_store_sched_create_runs(ax_store *s, ax_store_run_row *rows, size_t n)
{
	/* the new run ids come back by ordinality; a run that existed has
	 * no row in ins and gets 0 */
	static const char ins_sql[] =
	    "WITH u AS (SELECT * FROM unnest($1::bigint[], $2::bigint[],"
	    " $3::text[], $4::bigint[], $5::bigint[], $6::bigint[],"
	    " $7::bigint[], $8::text[]) WITH ORDINALITY"
	    " AS u(d, v, t, l, st, en, due, conf, ord)),"
	    " ins AS (INSERT INTO dag_runs (dag_id, dag_version_id, run_type,"
	    " logical_date, interval_start, interval_end, due_at, conf)"
	    " SELECT d, v, t, ax_ts(l), ax_ts(st), ax_ts(en), ax_ts(due),"
	    " coalesce(conf::jsonb, '{}') FROM u ORDER BY ord"
	    " ON CONFLICT (dag_id, logical_date) DO NOTHING"
	    " RETURNING id, dag_id, ax_us(logical_date) AS l)"
	    " SELECT u.ord, coalesce(ins.id, 0) FROM u"
	    " LEFT JOIN ins ON ins.dag_id = u.d AND ins.l = u.l";
	static const char upd_sql[] =
	    "UPDATE schedules s SET next_fire_at = ax_ts(u.nf),"
	    " last_fire_at = greatest(s.last_fire_at, ax_ts(u.due)),"
	    " updated_at = now()"
	    " FROM (SELECT DISTINCT ON (id) id, nf, due FROM"
	    " unnest($1::bigint[], $2::bigint[], $3::bigint[])"
	    " WITH ORDINALITY AS x(id, nf, due, ord) ORDER BY id, ord DESC) u"
	    " WHERE s.id = u.id";
	ax_sqlarr   a[8] = { 0 }, b[3] = { 0 };
	const char *p[8], *q[3];
	PGresult   *res = NULL;
	ax_err      rv;
	size_t      nsched = 0;

	if (n == 0)
		return AX_OK;
	if (n > BATCH_MAX)
		return ax_err_set(AX_EINVAL,
		                  "create runs: %zu rows, at most "
		                  "10000 per call",
		                  n);
	if (!ax_store_in_tx(s)) { /* both statements, or neither */
		create_runs_arg c = { rows, n };
		return ax_store_tx(s, create_runs_tx, &c);
	}
	for (size_t i = 0; i < n; i++) {
		ax_store_run_row *r = &rows[i];
		r->run_id           = 0;
		ax_sqlarr_int(&a[0], r->dag_id);
		ax_sqlarr_int(&a[1], r->dag_version_id);
		ax_sqlarr_text(&a[2], r->run_type ? r->run_type : "scheduled");
		ax_sqlarr_int(&a[3], r->logical_us);
		ax_sqlarr_int(&a[4], r->interval_start_us);
		ax_sqlarr_int(&a[5], r->interval_end_us);
		ax_sqlarr_int(&a[6], r->due_us);
		ax_sqlarr_text(&a[7], r->conf_json);
		if (r->schedule_id > 0) {
			ax_sqlarr_int(&b[0], r->schedule_id);
			ax_sqlarr_int0(&b[1], r->next_fire_us);
			ax_sqlarr_int(&b[2], r->due_us);
			nsched++;
		}
	}
	if ((rv = ax_sqlarr_end_all(a, p, 8)) != AX_OK ||
	    (rv = ax_sqlarr_end_all(b, q, 3)) != AX_OK ||
	    (rv = stmt(s, "sched_runs", ins_sql, 8)) != AX_OK ||
	    (rv = stmt(s, "sched_next", upd_sql, 3)) != AX_OK)
		goto out;
	if ((rv = ax_store_query_prepared(s, "sched_runs", 8, p, &res)) !=
	    AX_OK)
		goto out;
	for (int r = 0; r < PQntuples(res); r++) {
		int64_t ord = val_i64(res, r, 0);
		if (ord >= 1 && (size_t) ord <= n)
			rows[ord - 1].run_id = val_i64(res, r, 1);
	}
	PQclear(res);
	if (nsched > 0)
		rv = ax_store_query_prepared(s, "sched_next", 3, q, NULL);
out:
	ax_sqlarr_fini_all(a, 8);
	ax_sqlarr_fini_all(b, 3);
	return rv;
}

ax_err
ax_store_sched_set_next(ax_store *s, const int64_t *ids, const int64_t *next,
                        size_t n)
{
	static const char sql[] =
	    "UPDATE schedules s SET next_fire_at = ax_ts(u.nf),"
	    " updated_at = now() FROM unnest($1::bigint[], $2::bigint[])"
	    " AS u(id, nf) WHERE s.id = u.id";
	ax_sqlarr   a[2] = { 0 };
	const char *p[2];
	ax_err      rv;

	if (n == 0)
		return AX_OK;
	for (size_t i = 0; i < n; i++) {
		ax_sqlarr_int(&a[0], ids[i]);
		ax_sqlarr_int0(&a[1], next[i]);
	}
	if ((rv = ax_sqlarr_end_all(a, p, 2)) == AX_OK &&
	    (rv = stmt(s, "sched_set_next", sql, 2)) == AX_OK)
		rv = ax_store_write(s, "sched_set_next", NULL, 2, p, NULL);
	ax_sqlarr_fini_all(a, 2);
	return rv;
}

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
		t->epoch = val_i64(res, 0, 0);
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

ax_err
ax_store_sched_lease_renew(ax_store *s, const char *holder, int64_t epoch,
                           int64_t ttl_us)
{
	static const char sql[] =
	    "UPDATE scheduler_lease SET"
	    " expires_at = now() + $3::bigint * interval '1 microsecond'"
	    " WHERE id AND holder = $1 AND epoch = $2::bigint RETURNING epoch";
	char        ep[24], ttl[24];
	const char *p[3] = { holder, ep, ttl };
	PGresult   *res  = NULL;
	ax_err      rv;
	int         ok;

	snprintf(ep, sizeof(ep), "%lld", (long long) epoch);
	snprintf(ttl, sizeof(ttl), "%lld", (long long) ttl_us);
	if ((rv = ax_store_query(s, sql, 3, p, &res)) != AX_OK)
		return rv;
	ok = PQntuples(res) == 1;
	PQclear(res);
	if (!ok)
		return ax_err_set(AX_EBUSY,
		                  "the scheduler lease (epoch %lld) was taken "
		                  "over by another axd",
		                  (long long) epoch);
	return AX_OK;
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
