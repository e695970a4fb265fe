/*
 * store_attempts.c - admission, attempt results and event_log writes in
 * batches, and event dead letters (see store_attempts.h).
 *
 * Every statement takes PostgreSQL array literals built here and unnests
 * them, so a batch costs one round trip per statement whatever its size.
 */
#include "store_attempts.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "log.h"
#include "uuid.h"
#include "store_internal.h"

static void
col_str(PGresult *r, int row, int col, char *buf, size_t len)
{
	snprintf(buf, len, "%s", PQgetvalue(r, row, col));
}

/* ---------------------------------------------------------------------- */
/* admission */

/* Instances with their current (highest) attempt, locked in id order;
 * each by its id, or (id 0) by its key. u.ord answers row ord. */
#define SQL_ADMIT_LOCK                                                        \
	"SELECT u.ord, ti.id, ti.state, coalesce(a.number, 0), "              \
	"coalesce(a.run_id::text, ''), coalesce(a.state, '') "                \
	"FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], "  \
	"$5::int[]) WITH ORDINALITY AS u(iid, d, t, lt, sh, ord) "            \
	"JOIN task_instances ti ON ti.id = coalesce(nullif(u.iid, 0), "       \
	"(SELECT k.id FROM task_instances k WHERE k.dag_id = u.d "            \
	"AND k.task = u.t AND k.logical_time = ax_ts(u.lt) "                  \
	"AND k.shard = u.sh)) "                                               \
	"LEFT JOIN LATERAL (SELECT number, run_id, "                          \
	"state FROM attempts WHERE instance_id = ti.id ORDER BY number DESC " \
	"LIMIT 1) a ON true ORDER BY ti.id FOR UPDATE OF ti"

/* The attempts of the admitted instances, and their move to READY (with
 * the new try number) in the same statement: one write of each row, not
 * a move and then a try_number update. The rows are locked, so `was` is
 * their state; the state guard trigger still checks the move. Moves to
 * READY as SQL_MOVE_TI makes them: reason cleared, ready_at now, ended_at
 * cleared. The rows are locked, so an attempt that exists already (the
 * unique key of instance and number) is a bug elsewhere: the insert
 * fails and the transaction with it. */
#define SQL_ADMIT_INSERT                                                      \
	"WITH u AS (SELECT * FROM unnest($1::bigint[], $2::text[], "          \
	"$3::int[], $4::bigint[], $5::bigint[], $6::text[], $7::text[]) "     \
	"AS u(iid, rid, num, due, adm, was, wg)), "                           \
	"ins AS (INSERT INTO attempts (run_id, instance_id, number, due_at, " \
	"admitted_at) SELECT rid::uuid, iid, num, ax_ts(due), ax_ts(adm) "    \
	"FROM u ORDER BY iid) "                                               \
	"UPDATE task_instances t SET "                                        \
	"try_number = greatest(t.try_number, u.num), state = 'READY', "       \
	"reason = CASE WHEN u.was = 'READY' THEN t.reason END, "              \
	"ready_at = CASE WHEN u.was = 'READY' THEN t.ready_at ELSE now() "    \
	"END, ended_at = NULL, worker_group = coalesce(u.wg, "                \
	"t.worker_group), "                                                   \
	"updated_at = now() FROM u "                                          \
	"WHERE t.id = u.iid AND t.state = u.was"

typedef struct id_pos {
	int64_t id;
	size_t  pos;
} id_pos;

static int
cmp_id_pos(const void *a, const void *b)
{
	const id_pos *x = a, *y = b;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* What the lock found for row i, before rows of one instance are
 * merged. */
static void
admit_classify(ax_store_admit_row *x, ax_ti_state st, int32_t num,
               const char *rid, const char *astat)
{
	int queued =
	    strcmp(astat, "QUEUED") == 0 || strcmp(astat, "DISPATCHED") == 0;

	x->state_before = st;
	if (st == AX_TI_PENDING || st == AX_TI_UNKNOWN ||
	    (st == AX_TI_READY && num == 0)) {
		x->action  = AX_ADMIT_NEW;
		x->attempt = num + 1;
		ax_uuid_v7(x->run_id);
	} else if (st == AX_TI_READY && queued) {
		x->action  = AX_ADMIT_REPLAY;
		x->attempt = num;
		snprintf(x->run_id, sizeof(x->run_id), "%s", rid);
	} else {
		x->action  = AX_ADMIT_SKIP;
		x->attempt = num;
	}
}

/* Locks and classifies the rows (action, state_before, attempt, run_id,
 * and instance_id of the rows given by key). */
static ax_err
admit_lock(ax_store *s, ax_store_admit_row *rows, size_t n)
{
	ax_sqlarr   a[5];
	const char *p[5];
	PGresult   *r = NULL;
	ax_err      rv;

	memset(a, 0, sizeof(a));
	for (size_t i = 0; i < n; i++) {
		const ax_store_admit_row *x = &rows[i];
		int                       k = x->instance_id == 0;
		/* the key's columns are read only for a row without id */
		ax_sqlarr_int(&a[0], x->instance_id);
		ax_sqlarr_int(&a[1], k ? x->dag_id : 0);
		ax_sqlarr_text(&a[2], k ? x->task : NULL);
		ax_sqlarr_int(&a[3], k ? x->logical_time_us : 0);
		ax_sqlarr_int(&a[4], k ? x->shard : 0);
	}
	rv = ax_sqlarr_end_all(a, p, 5);
	if (rv == AX_OK)
		rv = ax_store_query_prepared(s, "ax_sa.admit_lock", 5, p, &r);
	ax_sqlarr_fini_all(a, 5);
	if (rv != AX_OK)
		return rv;
	for (int k = 0; k < PQntuples(r); k++) {
		int64_t     ord = ax_store_cell_i64(r, k, 0);
		ax_ti_state st;
		if (ord < 1 || (size_t) ord > n ||
		    ax_state_parse(PQgetvalue(r, k, 2), &st) != AX_OK)
			continue;
		ax_store_admit_row *x = &rows[ord - 1];
		x->instance_id        = ax_store_cell_i64(r, k, 1);
		admit_classify(x, st, (int32_t) ax_store_cell_i64(r, k, 3),
		               PQgetvalue(r, k, 4), PQgetvalue(r, k, 5));
	}
	PQclear(r);
	return AX_OK;
}

/* Rows of one instance: the later ones replay the first (*first[i] is
 * the index of the first row with row i's id; O(n log n)). */
static ax_err
admit_merge(ax_store_admit_row *rows, size_t n, size_t *first)
{
	id_pos *ip = malloc(sizeof(id_pos) * n);

	if (ip == NULL)
		return ax_err_set(AX_ENOMEM, "store: out of memory");
	for (size_t i = 0; i < n; i++)
		ip[i] = (id_pos) { rows[i].instance_id, i };
	qsort(ip, n, sizeof(id_pos), cmp_id_pos);
	for (size_t i = 0; i < n; i++)
		first[ip[i].pos] =
		    i > 0 && ip[i].id != 0 && ip[i].id == ip[i - 1].id
		    ? first[ip[i - 1].pos]
		    : ip[i].pos;
	free(ip);
	for (size_t i = 0; i < n; i++) {
		if (first[i] == i)
			continue;
		const ax_store_admit_row *f = &rows[first[i]];
		rows[i].state_before        = f->state_before;
		rows[i].attempt             = f->attempt;
		memcpy(rows[i].run_id, f->run_id, sizeof(f->run_id));
		rows[i].action =
		    f->action == AX_ADMIT_NEW ? AX_ADMIT_REPLAY : f->action;
	}
	return AX_OK;
}

typedef struct admit_batch {
	ax_store_admit_row *rows;
	size_t              n;
	size_t             *first; /* index of the first row with same id */
} admit_batch;

static ax_err
admit_tx(ax_store *s, void *arg)
{
	admit_batch *b  = arg;
	size_t       nn = 0;
	ax_sqlarr    a[7];
	const char  *p[7];
	ax_err       rv;

	for (size_t i = 0; i < b->n; i++) {
		b->rows[i].action       = AX_ADMIT_MISSING;
		b->rows[i].state_before = AX_TI_PENDING;
		b->rows[i].attempt      = 0;
		b->rows[i].run_id[0]    = '\0';
	}
	if ((rv = admit_lock(s, b->rows, b->n)) != AX_OK ||
	    (rv = admit_merge(b->rows, b->n, b->first)) != AX_OK)
		return rv;
	memset(a, 0, sizeof(a));
	for (size_t i = 0; i < b->n; i++) {
		const ax_store_admit_row *x = &b->rows[i];
		if (b->first[i] != i || x->action != AX_ADMIT_NEW)
			continue;
		ax_sqlarr_int(&a[0], x->instance_id);
		ax_sqlarr_text(&a[1], x->run_id);
		ax_sqlarr_int(&a[2], x->attempt);
		ax_sqlarr_int(&a[3], x->due_at_us);
		ax_sqlarr_int(&a[4], x->admitted_at_us);
		ax_sqlarr_text(&a[5], ax_state_name(x->state_before));
		ax_sqlarr_text(&a[6], x->worker_group);
		nn++;
	}
	rv = ax_sqlarr_end_all(a, p, 7);
	if (rv == AX_OK && nn > 0)
		rv = ax_store_write_deferred(s, "ax_sa.admit_insert", 7, p);
	ax_sqlarr_fini_all(a, 7);
	return rv;
}

/* The statements of the admission, the result's look-up and update and
 * the dispatch record: registered from this one table at their first use
 * and by the ax_store_*_prepare functions below. */
enum { /* each function's statements are adjacent */
       ST_ADMIT_LOCK,
       ST_ADMIT_INSERT,
       ST_LOCK_ATT,
       ST_UPDATE_ATT,
       ST_RECORD_DISPATCH,
       ST_NSTMTS
};
static const ax_store_stmt_def att_stmts[ST_NSTMTS];

ax_err
ax_store_admit(ax_store *s, ax_store_admit_row *rows, size_t n)
{
	admit_batch b = { .rows = rows, .n = n };
	ax_err      rv;

	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "admission");
	if (n == 0)
		return AX_OK;
	if ((rv = ax_store_admit_prepare(s)) != AX_OK)
		return rv;
	if ((b.first = malloc(sizeof(size_t) * n)) == NULL)
		return ax_err_set(AX_ENOMEM, "store: out of memory");
	rv = ax_store_tx_join(s, admit_tx, &b);
	free(b.first);
	return rv;
}

/* ---------------------------------------------------------------------- */
/* results */

#define SQL_LOCK_ATT                                                          \
	"SELECT u.ord, a.number, a.state, (a.number = cur.number)::int, "     \
	"(a.worker_id IS NOT NULL)::int, ti.id, ti.state, ti.max_tries, "     \
	"ti.dag_run_id, r.dag_version_id, ax_us(ti.logical_time), ti.shard, " \
	"ti.shard_total, ti.priority, d.name, ti.task, ti.channel, "          \
	"ti.worker_group, coalesce(ti.pool, '') "                             \
	"FROM unnest($1::uuid[]) WITH ORDINALITY AS u(rid, ord) "             \
	"JOIN attempts a ON a.run_id = u.rid "                                \
	"JOIN task_instances ti ON ti.id = a.instance_id "                    \
	"JOIN dag_runs r ON r.id = ti.dag_run_id "                            \
	"JOIN dags d ON d.id = ti.dag_id "                                    \
	"CROSS JOIN LATERAL (SELECT max(number) AS number FROM attempts "     \
	"WHERE instance_id = ti.id) cur "                                     \
	"ORDER BY ti.id FOR UPDATE OF ti"

ax_err
ax_store_lock_attempts(ax_store *s, const char *const *run_ids, size_t n,
                       ax_store_attempt_info *out)
{
	ax_sqlarr   a[1];
	const char *p[1];
	PGresult   *r = NULL;
	ax_err      rv;

	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "lock attempts");
	memset(out, 0, sizeof(*out) * n);
	if (n == 0)
		return AX_OK;
	if ((rv = ax_store_results_prepare(s)) != AX_OK)
		return rv;
	memset(a, 0, sizeof(a));
	/* An invalid uuid would fail the cast of the whole batch: send a
	 * NULL in its place so the positions still line up. */
	for (size_t i = 0; i < n; i++)
		ax_sqlarr_text(&a[0],
		               run_ids[i] != NULL && ax_uuid_valid(run_ids[i])
		                   ? run_ids[i]
		                   : NULL);
	rv = ax_sqlarr_end_all(a, p, 1);
	if (rv == AX_OK)
		rv = ax_store_query_prepared(s, "ax_sa.lock_att", 1, p, &r);
	ax_sqlarr_fini_all(a, 1);
	if (rv != AX_OK)
		return rv;
	for (int k = 0; k < PQntuples(r); k++) {
		long long ord = ax_store_cell_i64(r, k, 0);
		if (ord < 1 || (size_t) ord > n)
			continue;
		ax_store_attempt_info *x = &out[ord - 1];
		x->found                 = 1;
		x->number = (int32_t) ax_store_cell_i64(r, k, 1);
		col_str(r, k, 2, x->state, sizeof(x->state));
		x->is_current  = (int) ax_store_cell_i64(r, k, 3);
		x->has_worker  = (int) ax_store_cell_i64(r, k, 4);
		x->instance_id = ax_store_cell_i64(r, k, 5);
		if (ax_state_parse(PQgetvalue(r, k, 6), &x->ti_state) != AX_OK)
			x->ti_state = AX_TI_PENDING;
		x->max_tries       = (int32_t) ax_store_cell_i64(r, k, 7);
		x->dag_run_id      = ax_store_cell_i64(r, k, 8);
		x->dag_version_id  = ax_store_cell_i64(r, k, 9);
		x->logical_time_us = ax_store_cell_i64(r, k, 10);
		x->shard           = (int32_t) ax_store_cell_i64(r, k, 11);
		x->shard_total     = (int32_t) ax_store_cell_i64(r, k, 12);
		x->priority        = (int32_t) ax_store_cell_i64(r, k, 13);
		col_str(r, k, 14, x->dag, sizeof(x->dag));
		col_str(r, k, 15, x->task, sizeof(x->task));
		col_str(r, k, 16, x->channel, sizeof(x->channel));
		col_str(r, k, 17, x->worker_group, sizeof(x->worker_group));
		col_str(r, k, 18, x->pool, sizeof(x->pool));
	}
	PQclear(r);
	return AX_OK;
}

#define SQL_PREEMPTED                                                         \
	"SELECT ti.id, a.run_id::text, coalesce((SELECT (e.payload->>"        \
	"'fire_at_us')::bigint FROM event_log e WHERE e.instance_id = ti.id"  \
	" AND e.type = 'instance.retry_scheduled' AND e.reason = 'PREEMPTED'" \
	" ORDER BY e.id DESC LIMIT 1), 0)"                                    \
	" FROM task_instances ti CROSS JOIN LATERAL (SELECT run_id FROM"      \
	" attempts WHERE instance_id = ti.id ORDER BY number DESC LIMIT 1) a" \
	" WHERE ti.state = 'PENDING' AND ti.reason = 'PREEMPTED' AND ti.id >" \
	" $1::bigint ORDER BY ti.id LIMIT $2::int"

ax_err
ax_store_preempted_list(ax_store *s, int64_t after_id, ax_store_preempted *out,
                        size_t max, size_t *n)
{
	char        a[24], m[24];
	const char *p[2] = { a, m };
	PGresult   *r    = NULL;
	ax_err      rv;

	*n = 0;
	snprintf(a, sizeof(a), "%lld", (long long) after_id);
	snprintf(m, sizeof(m), "%zu", max);
	if ((rv = ax_store_query(s, SQL_PREEMPTED, 2, p, &r)) != AX_OK)
		return rv;
	for (int k = 0; k < PQntuples(r) && *n < max; k++) {
		ax_store_preempted *x = &out[(*n)++];
		x->instance_id        = ax_store_cell_i64(r, k, 0);
		col_str(r, k, 1, x->run_id, sizeof(x->run_id));
		x->fire_at_us = ax_store_cell_i64(r, k, 2);
	}
	PQclear(r);
	return AX_OK;
}

#define SQL_UPDATE_ATT                                                        \
	"UPDATE attempts a SET state = u.st, "                                \
	"worker_id = coalesce(u.w, a.worker_id), "                            \
	"dispatched_at = coalesce(a.dispatched_at, ax_ts(nullif(u.di, 0))), " \
	"started_at = coalesce(a.started_at, ax_ts(nullif(u.sa, 0))), "       \
	"ended_at = coalesce(a.ended_at, ax_ts(nullif(u.en, 0))), "           \
	"exit_status = coalesce(u.ex, a.exit_status), "                       \
	"reason = coalesce(u.rs, a.reason), "                                 \
	"log_path = coalesce(u.lp, a.log_path) "                              \
	"FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], "      \
	"$5::bigint[], $6::bigint[], $7::int[], $8::text[], $9::text[]) "     \
	"AS u(rid, st, w, di, sa, en, ex, rs, lp) "                           \
	"WHERE a.run_id = u.rid RETURNING a.id"

ax_err
ax_store_update_attempts(ax_store *s, const ax_store_attempt_update *u,
                         size_t n, size_t *updated)
{
	static const char *const states[] = { "QUEUED",   "DISPATCHED",
		                              "RUNNING",  "SUCCESS",
		                              "FAILED",   "TIMEOUT",
		                              "CANCELED", "UNKNOWN" };
	ax_sqlarr                a[9];
	const char              *p[9];
	PGresult                *r = NULL;
	ax_err                   rv;

	if (updated != NULL)
		*updated = 0;
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "attempt updates");
	for (size_t i = 0; i < n; i++) {
		int ok = 0;
		for (size_t k = 0; k < sizeof(states) / sizeof(states[0]); k++)
			ok |= u[i].state != NULL &&
			    strcmp(u[i].state, states[k]) == 0;
		if (u[i].run_id == NULL || !ax_uuid_valid(u[i].run_id) || !ok)
			return ax_err_set(AX_EINVAL,
			                  "store: attempt update %zu: run_id "
			                  "'%s' or state '%s' is not valid",
			                  i, u[i].run_id ? u[i].run_id : "",
			                  u[i].state ? u[i].state : "");
	}
	if (n == 0)
		return AX_OK;
	if ((rv = ax_store_results_prepare(s)) != AX_OK)
		return rv;
	memset(a, 0, sizeof(a));
	for (size_t i = 0; i < n; i++) {
		ax_sqlarr_text(&a[0], u[i].run_id);
		ax_sqlarr_text(&a[1], u[i].state);
		ax_sqlarr_text(&a[2], u[i].worker_id);
		ax_sqlarr_int(&a[3], u[i].dispatched_at_us);
		ax_sqlarr_int(&a[4], u[i].started_at_us);
		ax_sqlarr_int(&a[5], u[i].ended_at_us);
		if (u[i].has_exit)
			ax_sqlarr_int(&a[6], u[i].exit_status);
		else
			ax_sqlarr_text(&a[6], NULL);
		ax_sqlarr_text(&a[7], u[i].reason);
		ax_sqlarr_text(&a[8], u[i].log_path);
	}
	rv = ax_sqlarr_end_all(a, p, 9);
	if (rv == AX_OK && updated == NULL)
		rv = ax_store_write_deferred(s, "ax_sa.update_att", 9, p);
	else if (rv == AX_OK)
		rv = ax_store_write(s, "ax_sa.update_att", NULL, 9, p, &r);
	ax_sqlarr_fini_all(a, 9);
	if (rv != AX_OK || updated == NULL)
		return rv;
	if (updated != NULL)
		*updated = (size_t) PQntuples(r);
	PQclear(r);
	return AX_OK;
}

/* ---------------------------------------------------------------------- */
/* dispatch and reconciliation */

/* Locks the rows still waiting for a worker in id order (the result
 * handler locks instances first and then writes attempts, so a fixed
 * order keeps the two from deadlocking in most interleavings; a
 * deadlock that remains is retried by ax_store_tx), then names the
 * worker. A row already RUNNING, terminal or UNKNOWN is left alone and
 * not returned. */
#define SQL_RECORD_DISPATCH                                                   \
	"WITH u AS (SELECT * FROM unnest($1::uuid[], $2::text[], "            \
	"$3::bigint[], $4::text[]) WITH ORDINALITY AS u(rid, w, di, c, "      \
	"ord)), "                                                             \
	"l AS (SELECT a.id, u.w, u.di, u.c, u.ord FROM attempts a JOIN u ON " \
	"a.run_id = u.rid WHERE a.state IN ('QUEUED', 'DISPATCHED') "         \
	"ORDER BY a.id FOR UPDATE OF a) "                                     \
	"UPDATE attempts a SET state = 'DISPATCHED', worker_id = l.w, "       \
	"dispatched_at = coalesce(a.dispatched_at, ax_ts(nullif(l.di, 0))), " \
	"command = coalesce(l.c, a.command) "                                 \
	"FROM l WHERE a.id = l.id RETURNING l.ord"

typedef struct dispatch_arg {
	ax_store_dispatch_row *rows;
	size_t                 n;
} dispatch_arg;

static ax_err
dispatch_tx(ax_store *s, void *arg)
{
	dispatch_arg *d = arg;
	ax_sqlarr     a[4];
	const char   *p[4];
	PGresult     *r = NULL;
	ax_err        rv;

	memset(a, 0, sizeof(a));
	for (size_t i = 0; i < d->n; i++) {
		const ax_store_dispatch_row *x = &d->rows[i];
		d->rows[i].recorded            = 0;
		/* a bad uuid would fail the cast of the whole batch */
		ax_sqlarr_text(&a[0],
		               x->run_id != NULL && ax_uuid_valid(x->run_id)
		                   ? x->run_id
		                   : NULL);
		ax_sqlarr_text(&a[1], x->worker_id);
		ax_sqlarr_int(&a[2], x->dispatched_at_us);
		ax_sqlarr_text(&a[3], x->command);
	}
	rv = ax_sqlarr_end_all(a, p, 4);
	if (rv == AX_OK)
		rv = ax_store_query_prepared(s, "ax_sa.record_dispatch", 4, p,
		                             &r);
	ax_sqlarr_fini_all(a, 4);
	if (rv != AX_OK)
		return rv;
	for (int k = 0; k < PQntuples(r); k++) {
		int64_t ord = ax_store_cell_i64(r, k, 0);
		if (ord >= 1 && (size_t) ord <= d->n)
			d->rows[ord - 1].recorded = 1;
	}
	PQclear(r);
	return AX_OK;
}

ax_err
ax_store_record_dispatches(ax_store *s, ax_store_dispatch_row *rows, size_t n)
{
	dispatch_arg d = { .rows = rows, .n = n };
	ax_err       rv;

	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "dispatches");
	for (size_t i = 0; i < n; i++) {
		rows[i].recorded = 0;
		if (rows[i].worker_id == NULL || *rows[i].worker_id == '\0')
			return ax_err_set(
			    AX_EINVAL,
			    "store: dispatch %zu (%s) names no "
			    "worker",
			    i, rows[i].run_id ? rows[i].run_id : "");
	}
	if (n == 0)
		return AX_OK;
	if ((rv = ax_store_dispatches_prepare(s)) != AX_OK)
		return rv;
	return ax_store_tx_join(s, dispatch_tx, &d);
}

/* The attempts a worker may hold, with that worker's lease left on the
 * database clock (NULL when the worker has no row). */
#define SQL_IN_DOUBT                                                          \
	"SELECT a.run_id::text, a.state, a.worker_id, coalesce(w.pid, 0), "   \
	"coalesce(w.hostname, ''), (w.id IS NOT NULL)::int, "                 \
	"coalesce(ax_us(w.lease_expires_at) - ax_us(now()), 0) "              \
	"FROM attempts a LEFT JOIN workers w ON w.id = a.worker_id "          \
	"WHERE a.state IN ('DISPATCHED', 'RUNNING') AND a.worker_id IS NOT "  \
	"NULL ORDER BY a.worker_id, a.id"

ax_err
ax_store_load_in_doubt(ax_store *s, ax_store_in_doubt **out, size_t *n)
{
	PGresult          *r = NULL;
	ax_store_in_doubt *v;
	ax_err             rv;
	int                k;

	*out = NULL;
	*n   = 0;
	if ((rv = ax_store_query(s, SQL_IN_DOUBT, 0, NULL, &r)) != AX_OK)
		return rv;
	if ((v = calloc((size_t) PQntuples(r) + 1, sizeof(*v))) == NULL) {
		PQclear(r);
		return ax_err_set(AX_ENOMEM, "store: out of memory");
	}
	for (k = 0; k < PQntuples(r); k++) {
		ax_store_in_doubt *x = &v[k];
		col_str(r, k, 0, x->run_id, sizeof(x->run_id));
		col_str(r, k, 1, x->state, sizeof(x->state));
		col_str(r, k, 2, x->worker_id, sizeof(x->worker_id));
		x->worker_pid = (int32_t) ax_store_cell_i64(r, k, 3);
		col_str(r, k, 4, x->hostname, sizeof(x->hostname));
		x->has_lease     = (int) ax_store_cell_i64(r, k, 5);
		x->lease_left_us = ax_store_cell_i64(r, k, 6);
	}
	PQclear(r);
	*out = v;
	*n   = (size_t) k;
	return AX_OK;
}

static const ax_store_stmt_def att_stmts[ST_NSTMTS] = {
	[ST_ADMIT_LOCK]   = { "ax_sa.admit_lock", SQL_ADMIT_LOCK, 5, 1 },
	[ST_ADMIT_INSERT] = { "ax_sa.admit_insert", SQL_ADMIT_INSERT, 7, 0 },
	[ST_LOCK_ATT]     = { "ax_sa.lock_att", SQL_LOCK_ATT, 1, 1 },
	[ST_UPDATE_ATT]   = { "ax_sa.update_att", SQL_UPDATE_ATT, 9, 0 },
	[ST_RECORD_DISPATCH] = { "ax_sa.record_dispatch", SQL_RECORD_DISPATCH,
	                         4, 0 },
};

ax_err
ax_store_admit_prepare(ax_store *s)
{
	return ax_store_prepare_all(s, &att_stmts[ST_ADMIT_LOCK], 2);
}

ax_err
ax_store_results_prepare(ax_store *s)
{
	return ax_store_prepare_all(s, &att_stmts[ST_LOCK_ATT], 2);
}

ax_err
ax_store_dispatches_prepare(ax_store *s)
{
	return ax_store_prepare_all(s, &att_stmts[ST_RECORD_DISPATCH], 1);
}
