/*
 * store_runs.c - the dag_runs table (see store_runs.h): runs created by
 * the time detector with their schedules' next fire times, and the run
 * life of the dependency detector (load, state changes, supersede, the
 * wait reason of their instances, cross-DAG checks). Statements take
 * array literals and unnest them: one round trip per statement whatever
 * the batch size.
 */
#include "store_runs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

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
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "create runs");
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
	    (rv = ax_store_prepare_once(s, "sched_runs", ins_sql, 8)) !=
	        AX_OK ||
	    (rv = ax_store_prepare_once(s, "sched_next", upd_sql, 3)) != AX_OK)
		goto out;
	if ((rv = ax_store_query_prepared(s, "sched_runs", 8, p, &res)) !=
	    AX_OK)
		goto out;
	for (int r = 0; r < PQntuples(res); r++) {
		int64_t ord = ax_store_cell_i64(res, r, 0);
		if (ord >= 1 && (size_t) ord <= n)
			rows[ord - 1].run_id = ax_store_cell_i64(res, r, 1);
	}
	PQclear(res);
	if (nsched > 0)
		rv = ax_store_query_prepared(s, "sched_next", 3, q, NULL);
out:
	ax_sqlarr_fini_all(a, 8);
	ax_sqlarr_fini_all(b, 3);
	return rv;
}

/* --- dependency detector ------------------------------------------------
 */

#define RUNS_SELECT                                                           \
	"SELECT r.id, d.name, r.dag_id, r.dag_version_id,"                    \
	" ax_us(r.logical_date), ax_us(coalesce(r.due_at, r.created_at)),"    \
	" r.state, r.run_type, ti.task, ti.shard, ti.state, ti.reason, "      \
	"ti.id,"                                                              \
	" ax_us(r.interval_start), ax_us(r.interval_end)"                     \
	" FROM dag_runs r JOIN dags d ON d.id = r.dag_id"                     \
	" LEFT JOIN task_instances ti ON ti.dag_run_id = r.id"

ax_err
ax_store_deps_load_runs(ax_store *s, const int64_t *run_ids, size_t n,
                        PGresult **res)
{
	static const char all_sql[] =
	    RUNS_SELECT " WHERE r.state IN ('QUEUED', 'RUNNING')"
	                " ORDER BY r.logical_date, r.id, ti.task, ti.shard";
	static const char ids_sql[] =
	    RUNS_SELECT " WHERE r.id = ANY ($1::bigint[])"
	                " ORDER BY r.logical_date, r.id, ti.task, ti.shard";
	ax_sqlarr   a = { 0 };
	const char *p[1];
	ax_err      rv;

	*res = NULL;
	if (run_ids == NULL) {
		if ((rv = ax_store_prepare_once(s, "deps_runs_all", all_sql,
		                                0)) != AX_OK)
			return rv;
		return ax_store_query_prepared(s, "deps_runs_all", 0, NULL,
		                               res);
	}
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "load runs");
	for (size_t i = 0; i < n; i++)
		ax_sqlarr_int(&a, run_ids[i]);
	if ((rv = ax_sqlarr_end_all(&a, p, 1)) == AX_OK &&
	    (rv = ax_store_prepare_once(s, "deps_runs_ids", ids_sql, 1)) ==
	        AX_OK)
		rv = ax_store_query_prepared(s, "deps_runs_ids", 1, p, res);
	ax_sqlarr_fini_all(&a, 1);
	return rv;
}

ax_err
ax_store_deps_runs_update(ax_store *s, const ax_store_run_change *c, size_t n)
{
	static const char sql[] =
	    "UPDATE dag_runs r SET state = u.st, reason = u.rs,"
	    " started_at = CASE WHEN u.st = 'RUNNING'"
	    "  THEN coalesce(r.started_at, greatest(now(), r.due_at))"
	    "  ELSE r.started_at END,"
	    " ended_at = CASE WHEN u.st IN ('SUCCESS', 'FAILED', 'CANCELED')"
	    "  THEN coalesce(ax_ts(u.en), now()) ELSE NULL END"
	    " FROM (SELECT DISTINCT ON (id) id, st, rs, en FROM"
	    " unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[])"
	    " WITH ORDINALITY AS x(id, st, rs, en, ord)"
	    " ORDER BY id, ord DESC) u WHERE r.id = u.id";
	ax_sqlarr   a[4] = { 0 };
	const char *p[4];
	ax_err      rv;

	if (n == 0)
		return AX_OK;
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "run update");
	for (size_t i = 0; i < n; i++) {
		ax_sqlarr_int(&a[0], c[i].run_id);
		ax_sqlarr_text(&a[1], c[i].state);
		ax_sqlarr_text(&a[2], c[i].reason);
		ax_sqlarr_int0(&a[3], c[i].ended_us);
	}
	if ((rv = ax_sqlarr_end_all(a, p, 4)) == AX_OK &&
	    (rv = ax_store_prepare_once(s, "deps_runs_upd", sql, 4)) == AX_OK)
		rv = ax_store_query_prepared(s, "deps_runs_upd", 4, p, NULL);
	ax_sqlarr_fini_all(a, 4);
	return rv;
}

ax_err
ax_store_deps_wait_reason(ax_store *s, const int64_t *run_ids,
                          const char *const *tasks, size_t n,
                          const char *reason, size_t *updated)
{
	static const char sql[] =
	    "UPDATE task_instances t SET reason = $3, updated_at = now()"
	    " FROM unnest($1::bigint[], $2::text[]) AS u(r, k)"
	    " WHERE t.dag_run_id = u.r AND t.task = u.k"
	    " AND t.state = 'PENDING' AND t.reason IS DISTINCT FROM $3";
	ax_sqlarr   a[2] = { 0 };
	const char *p[3];
	PGresult   *res = NULL;
	ax_err      rv;

	if (updated != NULL)
		*updated = 0;
	if (n == 0)
		return AX_OK;
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "wait reason");
	for (size_t i = 0; i < n; i++) {
		ax_sqlarr_int(&a[0], run_ids[i]);
		ax_sqlarr_text(&a[1], tasks[i]);
	}
	p[2] = reason;
	if ((rv = ax_sqlarr_end_all(a, p, 2)) == AX_OK &&
	    (rv = ax_store_prepare_once(s, "deps_wait_reason", sql, 3)) ==
	        AX_OK)
		rv =
		    ax_store_query_prepared(s, "deps_wait_reason", 3, p, &res);
	if (rv == AX_OK && updated != NULL)
		*updated = (size_t) strtoull(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	ax_sqlarr_fini_all(a, 2);
	return rv;
}

ax_err
ax_store_deps_supersede(ax_store *s, const int64_t *run_ids, size_t n,
                        PGresult **live)
{
	static const char cancel_sql[] =
	    "UPDATE task_instances SET state = 'CANCELED',"
	    " reason = 'SUPERSEDED', ended_at = now(), updated_at = now()"
	    " WHERE dag_run_id = ANY ($1::bigint[]) AND state = 'PENDING'";
	static const char live_sql[] =
	    "SELECT id, dag_run_id, task, shard, shard_total"
	    " FROM task_instances WHERE dag_run_id = ANY ($1::bigint[])"
	    " AND state IN ('READY', 'RUNNING', 'UNKNOWN') ORDER BY id";
	ax_sqlarr   a = { 0 };
	const char *p[1];
	ax_err      rv;

	*live = NULL;
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "supersede");
	for (size_t i = 0; i < n; i++)
		ax_sqlarr_int(&a, run_ids[i]);
	if ((rv = ax_sqlarr_end_all(&a, p, 1)) == AX_OK &&
	    (rv = ax_store_prepare_once(s, "deps_sup_cancel", cancel_sql,
	                                1)) == AX_OK &&
	    (rv = ax_store_prepare_once(s, "deps_sup_live", live_sql, 1)) ==
	        AX_OK &&
	    (rv = ax_store_query_prepared(s, "deps_sup_cancel", 1, p, NULL)) ==
	        AX_OK)
		rv = ax_store_query_prepared(s, "deps_sup_live", 1, p, live);
	ax_sqlarr_fini_all(&a, 1);
	return rv;
}

#define SQL_GUARD_LOCK                                                        \
	"SELECT id FROM dag_runs WHERE id = ANY ($1::bigint[])"               \
	" ORDER BY id FOR SHARE"
/*
 * The EXISTS, which reads only the batch's runs, is a one-time filter
 * above the join: while none of them is CANCELED (nearly always) the
 * join never runs. Without it the plan walked every PENDING instance of
 * the database (task_instances_active_idx) and probed its run: a cost
 * that grew with the backlog, not the batch (27 ms per admission batch
 * with 20,000 instances waiting, about a third of PostgreSQL's time per
 * instance in `axctl bench --scenario throughput`).
 */
#define SQL_GUARD_CANCEL                                                      \
	"UPDATE task_instances t SET state = 'CANCELED',"                     \
	" reason = coalesce(r.reason, 'RUN_CANCELED'), ended_at = now(),"     \
	" updated_at = now() FROM dag_runs r"                                 \
	" WHERE EXISTS (SELECT 1 FROM dag_runs c WHERE c.id = ANY"            \
	" ($1::bigint[]) AND c.state = 'CANCELED')"                           \
	" AND r.id = ANY ($1::bigint[]) AND r.state = 'CANCELED'"             \
	" AND t.dag_run_id = r.id AND t.state = 'PENDING'"

static const ax_store_stmt_def guard_stmts[] = {
	{ "runs_guard_lock", SQL_GUARD_LOCK, 1, 1 },
	{ "runs_guard_cancel", SQL_GUARD_CANCEL, 1, 1 },
};

ax_err
ax_store_runs_guard_prepare(ax_store *s)
{
	return ax_store_prepare_all(s, guard_stmts, 2);
}

ax_err
ax_store_runs_guard(ax_store *s, const int64_t *run_ids, size_t n,
                    size_t *canceled)
{
	ax_sqlarr   a = { 0 };
	const char *p[1];
	PGresult   *upd = NULL;
	ax_err      rv;

	if (canceled != NULL)
		*canceled = 0;
	if (n == 0)
		return AX_OK;
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "run guard");
	for (size_t i = 0; i < n; i++)
		ax_sqlarr_int(&a, run_ids[i]);
	/* Two statements, neither answer waited for unless *canceled is
	 * asked: the lock, then the cancel in a statement of its own, so
	 * that it sees what a supersede waited for by the lock committed.
	 * Both travel with the transaction's next statement or its COMMIT
	 * (ax_store_write_deferred). */
	if ((rv = ax_sqlarr_end_all(&a, p, 1)) == AX_OK &&
	    (rv = ax_store_runs_guard_prepare(s)) == AX_OK &&
	    (rv = ax_store_write_deferred(s, "runs_guard_lock", 1, p)) ==
	        AX_OK) {
		if (canceled == NULL)
			rv = ax_store_write_deferred(s, "runs_guard_cancel", 1,
			                             p);
		else if ((rv = ax_store_query_prepared(s, "runs_guard_cancel",
		                                       1, p, &upd)) == AX_OK)
			*canceled =
			    (size_t) strtoull(PQcmdTuples(upd), NULL, 10);
	}
	PQclear(upd);
	ax_sqlarr_fini_all(&a, 1);
	return rv;
}

ax_err
ax_store_deps_check_dags(ax_store *s, ax_store_dagdep_check *c, size_t n)
{
	static const char sql[] =
	    "SELECT u.ord, CASE WHEN u.same THEN EXISTS (SELECT 1"
	    " FROM dag_runs r JOIN dags d ON d.id = r.dag_id"
	    " WHERE d.name = u.dag AND r.logical_date = ax_ts(u.lt)"
	    " AND r.state = 'SUCCESS')"
	    " ELSE coalesce((SELECT r.state = 'SUCCESS'"
	    " FROM dag_runs r JOIN dags d ON d.id = r.dag_id"
	    " WHERE d.name = u.dag AND r.state IN ('SUCCESS', 'FAILED')"
	    " ORDER BY r.logical_date DESC LIMIT 1), false) END"
	    " FROM unnest($1::text[], $2::bool[], $3::bigint[])"
	    " WITH ORDINALITY AS u(dag, same, lt, ord)";
	ax_sqlarr   a[3] = { 0 };
	const char *p[3];
	PGresult   *res = NULL;
	ax_err      rv;

	if (n == 0)
		return AX_OK;
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "check dags");
	for (size_t i = 0; i < n; i++) {
		c[i].met = 0;
		ax_sqlarr_text(&a[0], c[i].upstream);
		ax_sqlarr_bool(&a[1], c[i].same_period);
		ax_sqlarr_int(&a[2], c[i].logical_us);
	}
	if ((rv = ax_sqlarr_end_all(a, p, 3)) == AX_OK &&
	    (rv = ax_store_prepare_once(s, "deps_check_dags", sql, 3)) ==
	        AX_OK)
		rv = ax_store_query_prepared(s, "deps_check_dags", 3, p, &res);
	for (int r = 0; rv == AX_OK && r < PQntuples(res); r++) {
		long ord = strtol(PQgetvalue(res, r, 0), NULL, 10);
		if (ord >= 1 && (size_t) ord <= n)
			c[ord - 1].met = PQgetvalue(res, r, 1)[0] == 't';
	}
	PQclear(res);
	ax_sqlarr_fini_all(a, 3);
	return rv;
}

ax_err
ax_store_deps_instance_run(ax_store *s, int64_t instance_id, int64_t *run_id)
{
	char        id[24];
	const char *p[1] = { id };
	ax_err      rv;

	snprintf(id, sizeof(id), "%lld", (long long) instance_id);
	rv = ax_store_query_int64(
	    s,
	    "SELECT dag_run_id FROM task_instances_all WHERE id = $1::bigint",
	    1, p, run_id);
	if (rv == AX_ENOENT)
		return ax_err_set(AX_ENOENT, "task instance %lld not found",
		                  (long long) instance_id);
	return rv;
}

ax_err
ax_store_deadline_check(ax_store *s, int64_t run_id, const char *task,
                        int64_t deadline_us, char *state, size_t len)
{
	static const char lock_sql[] =
	    "SELECT id FROM dag_runs WHERE id = $1::bigint FOR UPDATE";
	/* a statement of its own after the lock: its snapshot sees the
	 * event a concurrent caller committed while this one waited; the
	 * task's instances are read hot or in history (a run that ended
	 * long before a late deadline has moved: not NOT_PLANNED) */
	static const char check_sql[] =
	    "SELECT CASE WHEN $2::text = '' THEN"
	    " CASE WHEN r.state = 'SUCCESS' AND r.ended_at <= "
	    "ax_ts($3::bigint)"
	    " THEN NULL ELSE r.state END"
	    " ELSE (SELECT CASE WHEN count(*) = 0 THEN 'NOT_PLANNED'"
	    " WHEN bool_and(t.state = 'SUCCESS') THEN NULL"
	    " ELSE min(t.state) FILTER (WHERE t.state <> 'SUCCESS') END"
	    " FROM task_instances_all t WHERE t.dag_run_id = r.id"
	    " AND t.task = $2::text) END"
	    " FROM dag_runs r WHERE r.id = $1::bigint"
	    " AND r.state <> 'CANCELED' AND NOT EXISTS ("
	    "SELECT 1 FROM event_log e WHERE e.dag_run_id = r.id"
	    " AND e.type IN ('run.deadline_missed', "
	    "'instance.deadline_missed')"
	    " AND coalesce(e.payload->>'task', '') = $2::text)";
	char        id[24], at[24];
	const char *p[3] = { id, task ? task : "", at };
	PGresult   *res  = NULL;
	ax_err      rv;

	state[0] = '\0';
	snprintf(id, sizeof(id), "%lld", (long long) run_id);
	snprintf(at, sizeof(at), "%lld", (long long) deadline_us);
	if ((rv = ax_store_query(s, lock_sql, 1, p, &res)) != AX_OK)
		return rv;
	PQclear(res);
	res = NULL;
	if ((rv = ax_store_query(s, check_sql, 3, p, &res)) != AX_OK)
		return rv;
	if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
		snprintf(state, len, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return AX_OK;
}
