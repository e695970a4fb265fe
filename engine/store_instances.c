/*
 * store_instances.c - the task_instances table (see store_instances.h):
 * the batched, idempotent insert of instances with their first or next
 * attempt, the look-up by key, guarded state moves, reason codes of
 * waiting instances and the manual clear. Statements take array
 * literals and unnest them: one round trip per statement whatever the
 * batch size.
 */
#include "store_instances.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

/* ---------------------------------------------------------------------- */
/* batched, idempotent insert of task instances and attempts */

#define SQL_INSERT_TI                                                         \
	"INSERT INTO task_instances (dag_run_id, dag_id, task, "              \
	"logical_time, "                                                      \
	"shard, shard_total, priority, channel, worker_group, pool, "         \
	"max_tries, state, reason, ready_at) "                                \
	"SELECT r, d, t, ax_ts(lt), sh, st, pr, coalesce(ch, 'Px'), "         \
	"coalesce(wg, 'default'), pl, mt, s, rs, "                            \
	"CASE WHEN s = 'READY' THEN now() END "                               \
	"FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], "  \
	"$5::int[], $6::int[], $7::int[], $8::text[], $9::text[], "           \
	"$10::text[], $11::int[], $12::text[], $13::text[]) "                 \
	"AS u(r, d, t, lt, sh, st, pr, ch, wg, pl, mt, s, rs) "               \
	"ORDER BY d, t, lt, sh "                                              \
	"ON CONFLICT (dag_id, task, logical_time, shard) DO NOTHING "         \
	"RETURNING id"

/* Second round trip, in a new snapshot (READ COMMITTED), so rows that a
 * concurrent writer committed while we waited on its key are visible. */
#define SQL_INSERT_ATT                                                        \
	"WITH u AS (SELECT * FROM unnest($1::bigint[], $2::text[], "          \
	"$3::bigint[], $4::int[], $5::text[], $6::int[], $7::bigint[]) "      \
	"WITH ORDINALITY AS u(d, t, lt, sh, rid, num, due, ord)), "           \
	"k AS (SELECT u.*, ti.id AS iid FROM u JOIN task_instances ti "       \
	"ON ti.dag_id = u.d AND ti.task = u.t "                               \
	"AND ti.logical_time = ax_ts(u.lt) AND ti.shard = u.sh), "            \
	"ins AS (INSERT INTO attempts (run_id, instance_id, number, due_at) " \
	"SELECT rid::uuid, iid, num, ax_ts(due) FROM k "                      \
	"WHERE rid IS NOT NULL ORDER BY iid, num "                            \
	"ON CONFLICT DO NOTHING RETURNING instance_id, number, run_id) "      \
	"SELECT k.ord, k.iid, (ins.run_id IS NOT NULL)::int, "                \
	"coalesce(ins.run_id, a.run_id)::text FROM k "                        \
	"LEFT JOIN ins ON ins.instance_id = k.iid AND ins.number = k.num "    \
	"LEFT JOIN attempts a ON a.instance_id = k.iid AND a.number = k.num"

/* Third round trip, only when an attempt was created concurrently. */
#define SQL_ATT_RUN_ID                                                        \
	"SELECT run_id::text FROM attempts WHERE instance_id = $1 "           \
	"AND number = $2"

typedef struct ti_batch {
	ax_store_ti_row *rows;
	size_t           n;
	int64_t         *new_ids; /* ids this call inserted, sorted */
	size_t           nnew;
} ti_batch;

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
	return x < y ? -1 : x > y;
}

static ax_err
ti_validate(const ax_store_ti_row *rows, size_t n)
{
	if (ax_store_batch_check(n, "instances") != AX_OK)
		return AX_EINVAL;
	for (size_t i = 0; i < n; i++) {
		const ax_store_ti_row *r   = &rows[i];
		const char            *bad = NULL;
		if (r->task == NULL || r->task[0] == '\0')
			bad = "task is empty";
		else if (r->shard_total < 1 || r->shard < 0 ||
		         r->shard >= r->shard_total)
			bad = "shard must satisfy 0 <= shard < shard_total";
		else if (r->max_tries < 1)
			bad = "max_tries must be >= 1";
		else if (r->state != AX_TI_PENDING && r->state != AX_TI_READY)
			bad = "initial state must be PENDING or READY";
		else if (r->run_id != NULL && r->attempt < 1)
			bad = "attempt number must be >= 1";
		if (bad != NULL)
			return ax_err_set(AX_EINVAL,
			                  "store: instance row %zu (task "
			                  "'%s', shard %d): %s",
			                  i, r->task != NULL ? r->task : "",
			                  r->shard, bad);
	}
	return AX_OK;
}

/* First round trip: the instances; remembers which ids are new. */
static ax_err
ti_insert_instances(ax_store *s, ti_batch *b)
{
	ax_sqlarr   a[13] = { 0 };
	const char *p[13];
	PGresult   *r = NULL;
	ax_err      rv;

	for (size_t i = 0; i < b->n; i++) {
		const ax_store_ti_row *x = &b->rows[i];
		ax_sqlarr_int(&a[0], x->dag_run_id);
		ax_sqlarr_int(&a[1], x->dag_id);
		ax_sqlarr_text(&a[2], x->task);
		ax_sqlarr_int(&a[3], x->logical_time_us);
		ax_sqlarr_int(&a[4], x->shard);
		ax_sqlarr_int(&a[5], x->shard_total);
		ax_sqlarr_int(&a[6], x->priority);
		ax_sqlarr_text(&a[7], x->channel);
		ax_sqlarr_text(&a[8], x->worker_group);
		ax_sqlarr_text(&a[9], x->pool);
		ax_sqlarr_int(&a[10], x->max_tries);
		ax_sqlarr_text(&a[11], ax_state_name(x->state));
		ax_sqlarr_text(&a[12], x->reason);
	}
	if ((rv = ax_sqlarr_end_all(a, p, 13)) == AX_OK)
		rv = ax_store_query_prepared(s, "ax_store.insert_ti", 13, p,
		                             &r);
	ax_sqlarr_fini_all(a, 13);
	if (rv != AX_OK)
		return rv;
	b->nnew    = (size_t) PQntuples(r);
	b->new_ids = malloc(sizeof(int64_t) * (b->nnew + 1));
	if (b->new_ids == NULL) {
		PQclear(r);
		return ax_err_set(AX_ENOMEM, "store: out of memory");
	}
	for (size_t i = 0; i < b->nnew; i++)
		b->new_ids[i] = strtoll(PQgetvalue(r, (int) i, 0), NULL, 10);
	PQclear(r);
	qsort(b->new_ids, b->nnew, sizeof(int64_t), cmp_i64);
	return AX_OK;
}

/* A concurrent writer created attempt (iid, num) after our snapshot. */
static ax_err
ti_reread_run_id(ax_store *s, ax_store_ti_row *x)
{
	char        id[24], num[16];
	const char *p[2] = { id, num };
	PGresult   *r;
	ax_err      rv;

	snprintf(id, sizeof(id), "%lld", (long long) x->instance_id);
	snprintf(num, sizeof(num), "%d", x->attempt);
	rv = ax_store_query_prepared(s, "ax_store.att_run_id", 2, p, &r);
	if (rv != AX_OK)
		return rv;
	if (PQntuples(r) == 1)
		snprintf(x->attempt_run_id, sizeof(x->attempt_run_id), "%s",
		         PQgetvalue(r, 0, 0));
	PQclear(r);
	return AX_OK;
}

/* Second round trip: attempts, and every row's instance id. */
static ax_err
ti_insert_attempts(ax_store *s, ti_batch *b)
{
	ax_sqlarr   a[7] = { 0 };
	const char *p[7];
	PGresult   *r = NULL;
	ax_err      rv;

	for (size_t i = 0; i < b->n; i++) {
		const ax_store_ti_row *x = &b->rows[i];
		ax_sqlarr_int(&a[0], x->dag_id);
		ax_sqlarr_text(&a[1], x->task);
		ax_sqlarr_int(&a[2], x->logical_time_us);
		ax_sqlarr_int(&a[3], x->shard);
		ax_sqlarr_text(&a[4], x->run_id);
		ax_sqlarr_int(&a[5], x->run_id != NULL ? x->attempt : 0);
		ax_sqlarr_int(&a[6], x->due_at_us);
	}
	if ((rv = ax_sqlarr_end_all(a, p, 7)) == AX_OK)
		rv = ax_store_query_prepared(s, "ax_store.insert_att", 7, p,
		                             &r);
	ax_sqlarr_fini_all(a, 7);
	if (rv != AX_OK)
		return rv;
	for (int i = 0; i < PQntuples(r); i++) {
		long long ord = strtoll(PQgetvalue(r, i, 0), NULL, 10);
		if (ord < 1 || (size_t) ord > b->n)
			continue;
		ax_store_ti_row *x = &b->rows[ord - 1];
		x->instance_id     = strtoll(PQgetvalue(r, i, 1), NULL, 10);
		x->attempt_created =
		    x->run_id != NULL && strcmp(PQgetvalue(r, i, 2), "1") == 0;
		snprintf(x->attempt_run_id, sizeof(x->attempt_run_id), "%s",
		         PQgetvalue(r, i, 3));
		x->created = bsearch(&x->instance_id, b->new_ids, b->nnew,
		                     sizeof(int64_t), cmp_i64) != NULL;
	}
	PQclear(r);
	for (size_t i = 0; rv == AX_OK && i < b->n; i++) {
		ax_store_ti_row *x = &b->rows[i];
		if (x->instance_id == 0)
			return ax_err_set(
			    AX_EINTERNAL,
			    "store: instance row %zu (task '%s') was neither "
			    "inserted nor found",
			    i, x->task);
		if (x->run_id != NULL && x->attempt_run_id[0] == '\0')
			rv = ti_reread_run_id(s, x);
	}
	return rv;
}

static ax_err
ti_batch_tx(ax_store *s, void *arg)
{
	ti_batch *b = arg;
	ax_err    rv;

	/* The body may run again after a retry: start from scratch. */
	free(b->new_ids);
	b->new_ids = NULL;
	b->nnew    = 0;
	for (size_t i = 0; i < b->n; i++) {
		b->rows[i].instance_id       = 0;
		b->rows[i].created           = 0;
		b->rows[i].attempt_created   = 0;
		b->rows[i].attempt_run_id[0] = '\0';
	}
	if ((rv = ti_insert_instances(s, b)) != AX_OK)
		return rv;
	return ti_insert_attempts(s, b);
}

static const ax_store_stmt_def insert_stmts[] = {
	{ "ax_store.insert_ti", SQL_INSERT_TI, 13, 0 },
	{ "ax_store.insert_att", SQL_INSERT_ATT, 7, 0 },
	{ "ax_store.att_run_id", SQL_ATT_RUN_ID, 2, 0 },
};

ax_err
ax_store_insert_instances_prepare(ax_store *s)
{
	return ax_store_prepare_all(s, insert_stmts, 3);
}

ax_err
ax_store_insert_instances(ax_store *s, ax_store_ti_row *rows, size_t n,
                          size_t *inserted)
{
	ti_batch b = { .rows = rows, .n = n };
	ax_err   rv;

	if (inserted != NULL)
		*inserted = 0;
	if ((rv = ti_validate(rows, n)) != AX_OK || n == 0)
		return rv;
	if ((rv = ax_store_insert_instances_prepare(s)) != AX_OK)
		return rv;
	rv = ax_store_tx_join(s, ti_batch_tx, &b);
	if (rv == AX_OK && inserted != NULL)
		*inserted = b.nnew;
	free(b.new_ids);
	return rv;
}

#define SQL_FIND_TI                                                           \
	"SELECT u.ord, ti.id FROM unnest($1::bigint[], $2::text[], "          \
	"$3::bigint[], $4::int[]) WITH ORDINALITY AS u(d, t, lt, sh, ord) "   \
	"JOIN task_instances ti ON ti.dag_id = u.d AND ti.task = u.t "        \
	"AND ti.logical_time = ax_ts(u.lt) AND ti.shard = u.sh"

ax_err
ax_store_find_instances(ax_store *s, ax_store_ti_row *rows, size_t n,
                        size_t *found)
{
	ax_sqlarr   a[4] = { 0 };
	const char *p[4];
	PGresult   *r = NULL;
	ax_err      rv;

	if (found != NULL)
		*found = 0;
	if ((rv = ax_store_batch_check(n, "instances")) != AX_OK || n == 0)
		return rv;
	if ((rv = ax_store_prepare_once(s, "ax_store.find_ti", SQL_FIND_TI,
	                                4)) != AX_OK)
		return rv;
	for (size_t i = 0; i < n; i++) {
		const ax_store_ti_row *x = &rows[i];
		rows[i].instance_id      = 0;
		ax_sqlarr_int(&a[0], x->dag_id);
		ax_sqlarr_text(&a[1], x->task);
		ax_sqlarr_int(&a[2], x->logical_time_us);
		ax_sqlarr_int(&a[3], x->shard);
	}
	if ((rv = ax_sqlarr_end_all(a, p, 4)) == AX_OK)
		rv = ax_store_query_prepared(s, "ax_store.find_ti", 4, p, &r);
	ax_sqlarr_fini_all(a, 4);
	if (rv != AX_OK)
		return rv;
	for (int i = 0; i < PQntuples(r); i++) {
		int64_t ord = ax_store_cell_i64(r, i, 0);
		if (ord < 1 || (size_t) ord > n)
			continue;
		rows[ord - 1].instance_id = ax_store_cell_i64(r, i, 1);
		if (found != NULL)
			(*found)++;
	}
	PQclear(r);
	return AX_OK;
}

/* ---------------------------------------------------------------------- */
/* batched state moves guarded by the state machine */

#define SQL_MOVE_TI                                                           \
	"UPDATE task_instances t SET state = u.to_s, reason = u.rs, "         \
	"updated_at = now(), "                                                \
	"ready_at = CASE WHEN u.to_s = 'READY' THEN now() "                   \
	"WHEN u.to_s = 'PENDING' THEN NULL ELSE t.ready_at END, "             \
	"started_at = CASE WHEN u.to_s = 'RUNNING' OR u.via THEN now() "      \
	"WHEN u.to_s = 'PENDING' THEN NULL ELSE t.started_at END, "           \
	"ended_at = CASE WHEN u.to_s IN ('SUCCESS', 'FAILED', 'TIMEOUT', "    \
	"'CANCELED', 'SKIPPED') THEN now() "                                  \
	"WHEN u.to_s IN ('PENDING', 'READY') THEN NULL ELSE t.ended_at END "  \
	"FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], "      \
	"$5::bool[]) AS u(id, from_s, to_s, rs, via) "                        \
	"WHERE t.id = u.id AND t.state = u.from_s RETURNING t.id"

typedef struct move_batch {
	ax_store_ti_move *moves;
	size_t            n;
	size_t            applied;
	int               deferred; /* no answer read: nothing is applied */
} move_batch;

static ax_err
move_tx(ax_store *s, void *arg)
{
	move_batch *b    = arg;
	ax_sqlarr   a[5] = { 0 };
	const char *p[5];
	PGresult   *r = NULL;
	ax_err      rv;

	for (size_t i = 0; i < b->n; i++) {
		b->moves[i].applied = 0;
		ax_sqlarr_int(&a[0], b->moves[i].instance_id);
		ax_sqlarr_text(&a[1], ax_state_name(b->moves[i].from));
		ax_sqlarr_text(&a[2], ax_state_name(b->moves[i].to));
		ax_sqlarr_text(&a[3], b->moves[i].reason);
		ax_sqlarr_bool(&a[4], b->moves[i].via_running);
	}
	if ((rv = ax_sqlarr_end_all(a, p, 5)) == AX_OK && b->deferred)
		rv = ax_store_write_deferred(s, "ax_store.move_ti", 5, p);
	else if (rv == AX_OK)
		rv = ax_store_query_prepared(s, "ax_store.move_ti", 5, p, &r);
	ax_sqlarr_fini_all(a, 5);
	if (rv != AX_OK || b->deferred)
		return rv;
	b->applied   = (size_t) PQntuples(r);
	int64_t *ids = malloc(sizeof(int64_t) * (b->applied + 1));
	if (ids == NULL) {
		PQclear(r);
		return ax_err_set(AX_ENOMEM, "store: out of memory");
	}
	for (size_t i = 0; i < b->applied; i++)
		ids[i] = strtoll(PQgetvalue(r, (int) i, 0), NULL, 10);
	PQclear(r);
	qsort(ids, b->applied, sizeof(int64_t), cmp_i64);
	for (size_t i = 0; i < b->n; i++)
		b->moves[i].applied =
		    bsearch(&b->moves[i].instance_id, ids, b->applied,
		            sizeof(int64_t), cmp_i64) != NULL;
	free(ids);
	return AX_OK;
}

static ax_err
moves_validate(const ax_store_ti_move *moves, size_t n)
{
	ax_err rv;

	if ((rv = ax_store_batch_check(n, "moves")) != AX_OK)
		return rv;
	for (size_t i = 0; i < n; i++) {
		const ax_store_ti_move *m = &moves[i];
		ax_ti_state mid = m->via_running ? AX_TI_RUNNING : m->from;
		if ((m->via_running &&
		     (rv = ax_state_check(m->from, mid)) != AX_OK) ||
		    (rv = ax_state_check(mid, m->to)) != AX_OK) {
			char d[256];
			snprintf(d, sizeof(d), "%s", ax_err_detail());
			return ax_err_set(
			    rv, "store: move %zu (instance %lld): %s", i,
			    (long long) moves[i].instance_id, d);
		}
	}
	int64_t *ids = malloc(sizeof(int64_t) * (n + 1));
	if (ids == NULL)
		return ax_err_set(AX_ENOMEM, "store: out of memory");
	for (size_t i = 0; i < n; i++)
		ids[i] = moves[i].instance_id;
	qsort(ids, n, sizeof(int64_t), cmp_i64);
	rv = AX_OK;
	for (size_t i = 1; i < n && rv == AX_OK; i++)
		if (ids[i] == ids[i - 1])
			rv = ax_err_set(
			    AX_EINVAL,
			    "store: instance %lld appears twice in one batch "
			    "of moves",
			    (long long) ids[i]);
	free(ids);
	return rv;
}

ax_err
ax_store_move_instances_prepare(ax_store *s)
{
	return ax_store_prepare_generic(s, "ax_store.move_ti", SQL_MOVE_TI, 5);
}

ax_err
ax_store_move_instances(ax_store *s, ax_store_ti_move *moves, size_t n,
                        size_t *applied)
{
	/* Inside a transaction with applied NULL the move is sent without
	 * waiting (ax_store_write_deferred). */
	move_batch b = { .moves    = moves,
		         .n        = n,
		         .deferred = applied == NULL && ax_store_in_tx(s) };
	ax_err     rv;

	if (applied != NULL)
		*applied = 0;
	if ((rv = moves_validate(moves, n)) != AX_OK || n == 0)
		return rv;
	if ((rv = ax_store_move_instances_prepare(s)) != AX_OK)
		return rv;
	rv = ax_store_tx_join(s, move_tx, &b);
	if (rv == AX_OK && applied != NULL)
		*applied = b.applied;
	return rv;
}

/* ---------------------------------------------------------------------- */
/* reasons of waiting instances */

#define SQL_TI_REASON                                                         \
	"UPDATE task_instances t SET reason = u.rs, updated_at = now() "      \
	"FROM unnest($1::text[], $2::text[], $3::bigint[], $4::int[], "       \
	"$5::text[], $6::text[]) WITH ORDINALITY "                            \
	"AS u(dag, task, lt, sh, rs, only_if, ord) "                          \
	"JOIN dags d ON d.name = u.dag "                                      \
	"WHERE t.dag_id = d.id AND t.task = u.task "                          \
	"AND t.logical_time = ax_ts(u.lt) AND t.shard = u.sh "                \
	"AND t.state IN ('PENDING', 'READY') "                                \
	"AND (u.only_if IS NULL OR t.reason = u.only_if) RETURNING u.ord"

ax_err
ax_store_set_reasons(ax_store *s, ax_store_ti_reason *rows, size_t n,
                     size_t *applied)
{
	ax_sqlarr   a[6] = { 0 };
	const char *p[6];
	PGresult   *r = NULL;
	ax_err      rv;

	if (applied != NULL)
		*applied = 0;
	if ((rv = ax_store_batch_check(n, "reasons")) != AX_OK)
		return rv;
	for (size_t i = 0; i < n; i++) {
		rows[i].applied = 0;
		if (rows[i].dag == NULL || rows[i].dag[0] == '\0' ||
		    rows[i].task == NULL || rows[i].task[0] == '\0')
			return ax_err_set(
			    AX_EINVAL,
			    "store: reason row %zu: empty DAG or "
			    "task name",
			    i);
	}
	if (n == 0)
		return AX_OK;
	for (size_t i = 0; i < n; i++) {
		ax_sqlarr_text(&a[0], rows[i].dag);
		ax_sqlarr_text(&a[1], rows[i].task);
		ax_sqlarr_int(&a[2], rows[i].logical_time_us);
		ax_sqlarr_int(&a[3], rows[i].shard);
		ax_sqlarr_text(&a[4], rows[i].reason);
		ax_sqlarr_text(&a[5], rows[i].only_if);
	}
	if ((rv = ax_sqlarr_end_all(a, p, 6)) == AX_OK &&
	    (rv = ax_store_prepare_once(s, "ax_store.ti_reason", SQL_TI_REASON,
	                                6)) == AX_OK)
		rv = ax_store_write(s, "ax_store.ti_reason", NULL, 6, p, &r);
	ax_sqlarr_fini_all(a, 6);
	if (rv != AX_OK)
		return rv;
	for (int i = 0; i < PQntuples(r); i++) {
		long long ord = strtoll(PQgetvalue(r, i, 0), NULL, 10);
		if (ord >= 1 && (size_t) ord <= n)
			rows[ord - 1].applied = 1;
	}
	if (applied != NULL)
		*applied = (size_t) PQntuples(r);
	PQclear(r);
	return AX_OK;
}

/* ---------------------------------------------------------------------- */
/* manual clear */

ax_err
ax_store_deps_clear(ax_store *s, const int64_t *ids, const int32_t *base,
                    size_t n, size_t *cleared)
{
	static const char sql[] =
	    "UPDATE task_instances t SET state = 'PENDING',"
	    " reason = 'MANUAL_CLEAR', max_tries = t.try_number + u.b,"
	    " ready_at = NULL, started_at = NULL, ended_at = NULL,"
	    " updated_at = now()"
	    " FROM unnest($1::bigint[], $2::int[]) AS u(id, b)"
	    " WHERE t.id = u.id AND t.state IN ('PENDING', 'SUCCESS',"
	    " 'FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED')";
	ax_sqlarr   a[2] = { 0 };
	const char *p[2];
	PGresult   *res = NULL;
	ax_err      rv;

	if (cleared != NULL)
		*cleared = 0;
	if (n == 0)
		return AX_OK;
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "clear");
	for (size_t i = 0; i < n; i++) {
		ax_sqlarr_int(&a[0], ids[i]);
		ax_sqlarr_int(&a[1], base[i] > 0 ? base[i] : 1);
	}
	if ((rv = ax_sqlarr_end_all(a, p, 2)) == AX_OK &&
	    (rv = ax_store_prepare_once(s, "deps_clear", sql, 2)) == AX_OK)
		rv = ax_store_query_prepared(s, "deps_clear", 2, p, &res);
	if (rv == AX_OK && cleared != NULL)
		*cleared = (size_t) strtoull(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	ax_sqlarr_fini_all(a, 2);
	return rv;
}

/* ---------------------------------------------------------------------- */
/* instances stuck in a non-terminal state (the alert sink's check) */

#define SQL_STUCK_TI                                                          \
	"SELECT t.id, t.dag_run_id, coalesce(r.dag_version_id, 0), "          \
	"ax_us(t.updated_at), t.try_number, t.state, d.name, t.task "         \
	"FROM task_instances t JOIN dags d ON d.id = t.dag_id "               \
	"JOIN dag_runs r ON r.id = t.dag_run_id "                             \
	"WHERE t.state IN ('READY', 'RUNNING', 'UNKNOWN') "                   \
	"AND t.updated_at < now() - $1::bigint * interval '1 microsecond' "   \
	"ORDER BY t.updated_at LIMIT $2::int"

static void
copy_cell(char *dst, size_t cap, const PGresult *r, int row, int col)
{
	const char *v = ax_store_cell(r, row, col);
	snprintf(dst, cap, "%s", v != NULL ? v : "");
}

ax_err
ax_store_stuck_instances(ax_store *s, int64_t older_than_us,
                         ax_store_stuck *out, size_t max, size_t *n)
{
	char        age[24], lim[24];
	const char *p[2] = { age, lim };
	PGresult   *r    = NULL;
	ax_err      rv;

	*n = 0;
	if (max == 0)
		return AX_OK;
	snprintf(age, sizeof(age), "%lld", (long long) older_than_us);
	snprintf(lim, sizeof(lim), "%zu", max);
	if ((rv = ax_store_query(s, SQL_STUCK_TI, 2, p, &r)) != AX_OK)
		return rv;
	for (int i = 0; i < PQntuples(r) && (size_t) i < max; i++) {
		ax_store_stuck *x = &out[i];
		x->instance_id    = ax_store_cell_i64(r, i, 0);
		x->dag_run_id     = ax_store_cell_i64(r, i, 1);
		x->dag_version_id = ax_store_cell_i64(r, i, 2);
		x->since_us       = ax_store_cell_i64(r, i, 3);
		x->try_number     = (int) ax_store_cell_i64(r, i, 4);
		copy_cell(x->state, sizeof(x->state), r, i, 5);
		copy_cell(x->dag, sizeof(x->dag), r, i, 6);
		copy_cell(x->task, sizeof(x->task), r, i, 7);
		(*n)++;
	}
	PQclear(r);
	return AX_OK;
}
