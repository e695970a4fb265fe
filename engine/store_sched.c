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

/* --- array literals -----------------------------------------------------
 */

static void
put(ax_sqlarr *a, const char *s, size_t n)
{
	if (a->oom)
		return;
	if (a->len + n + 3 > a->cap) {
		size_t cap = a->cap ? a->cap : 256;
		while (a->len + n + 3 > cap)
			cap *= 2;
		char *b = realloc(a->buf, cap);
		if (b == NULL) {
			a->oom = 1;
			return;
		}
		a->buf = b;
		a->cap = cap;
	}
	memcpy(a->buf + a->len, s, n);
	a->len += n;
	a->buf[a->len] = '\0';
}

static void
sep(ax_sqlarr *a)
{
	put(a, a->n++ == 0 ? "{" : ",", 1);
}

void
ax_sqlarr_int(ax_sqlarr *a, int64_t v)
{
	char b[24];
	int  n = snprintf(b, sizeof(b), "%lld", (long long) v);
	sep(a);
	put(a, b, (size_t) n);
}

void
ax_sqlarr_int0(ax_sqlarr *a, int64_t v)
{
	if (v == 0) {
		sep(a);
		put(a, "NULL", 4);
		return;
	}
	ax_sqlarr_int(a, v);
}

void
ax_sqlarr_text(ax_sqlarr *a, const char *s)
{
	sep(a);
	if (s == NULL) {
		put(a, "NULL", 4);
		return;
	}
	put(a, "\"", 1);
	for (const char *p = s; *p != '\0'; p++) {
		if (*p == '"' || *p == '\\')
			put(a, "\\", 1);
		put(a, p, 1);
	}
	put(a, "\"", 1);
}

void
ax_sqlarr_bool(ax_sqlarr *a, int v)
{
	sep(a);
	put(a, v ? "t" : "f", 1);
}

const char *
ax_sqlarr_end(ax_sqlarr *a)
{
	put(a, a->n == 0 ? "{}" : "}", a->n == 0 ? 2 : 1);
	return a->oom ? NULL : a->buf;
}

void
ax_sqlarr_fini(ax_sqlarr *a)
{
	free(a->buf);
	memset(a, 0, sizeof(*a));
}

/* Finishes n literals into p[]; AX_ENOMEM when one is unusable. */
static ax_err
arrs_end(ax_sqlarr *a, const char **p, int n)
{
	ax_err rv = AX_OK;
	for (int i = 0; i < n; i++)
		if ((p[i] = ax_sqlarr_end(&a[i])) == NULL)
			rv = ax_err_set(AX_ENOMEM, "store: out of memory");
	return rv;
}

static void
arrs_free(ax_sqlarr *a, int n)
{
	for (int i = 0; i < n; i++)
		ax_sqlarr_fini(&a[i]);
}

/* Prepares a statement of this module on first use on s. */
static ax_err
stmt(ax_store *s, const char *name, const char *sql, int nparams)
{
	ax_err rv = ax_store_prepare(s, name, sql, nparams);
	return rv == AX_EEXIST ? AX_OK : rv;
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
ax_store_sched_dags(ax_store *s, const char *dag_name, PGresult **res)
{
	static const char sql[] =
	    "SELECT d.id, d.name, d.paused, d.active_version_id,"
	    " v.definition::text FROM dags d"
	    " JOIN dag_versions v ON v.id = d.active_version_id"
	    " WHERE $1::text IS NULL OR d.name = $1 ORDER BY d.id";
	const char *p[1] = { dag_name };
	return ax_store_query(s, sql, 1, p, res);
}

ax_err
ax_store_sched_upsert(ax_store *s, ax_store_sched_row *rows, size_t n)
{
	static const char sql[] =
	    "INSERT INTO schedules AS s (dag_id, expression, tz, catchup,"
	    " start_at, end_at, next_fire_at)"
	    " SELECT u.d, u.e, u.z, u.c, ax_ts(u.st), ax_ts(u.en), ax_ts(u.nf)"
	    " FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bool[],"
	    " $5::bigint[], $6::bigint[], $7::bigint[])"
	    " AS u(d, e, z, c, st, en, nf)"
	    " ON CONFLICT (dag_id) DO UPDATE SET"
	    " expression = EXCLUDED.expression, tz = EXCLUDED.tz,"
	    " catchup = EXCLUDED.catchup, start_at = EXCLUDED.start_at,"
	    " end_at = EXCLUDED.end_at,"
	    " next_fire_at = CASE WHEN (s.next_fire_at IS NULL AND"
	    " s.last_fire_at IS NULL) OR s.expression <> EXCLUDED.expression"
	    " OR s.tz <> EXCLUDED.tz THEN EXCLUDED.next_fire_at"
	    " ELSE s.next_fire_at END,"
	    " updated_at = now()"
	    " RETURNING s.dag_id, s.id, coalesce(ax_us(s.next_fire_at), 0)";
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
	if ((rv = arrs_end(a, p, 7)) == AX_OK &&
	    (rv = stmt(s, "sched_upsert", sql, 7)) == AX_OK)
		rv = ax_store_query_prepared(s, "sched_upsert", 7, p, &res);
	arrs_free(a, 7);
	if (rv != AX_OK)
		return rv;
	/* RETURNING order is not guaranteed: match by dag_id (unique) */
	for (int r = 0; r < PQntuples(res); r++) {
		int64_t dag = val_i64(res, r, 0);
		for (size_t i = 0; i < n; i++)
			if (rows[i].dag_id == dag) {
				rows[i].schedule_id  = val_i64(res, r, 1);
				rows[i].next_fire_us = val_i64(res, r, 2);
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
	if ((rv = arrs_end(&a, p, 1)) == AX_OK)
		rv = ax_store_exec(
		    s,
		    "DELETE FROM schedules WHERE dag_id = ANY($1::bigint[])",
		    1, p);
	ax_sqlarr_fini(&a);
	return rv;
}

/* --- time detector ------------------------------------------------------
 */

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
	if ((rv = arrs_end(a, p, 8)) != AX_OK ||
	    (rv = arrs_end(b, q, 3)) != AX_OK ||
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
	arrs_free(a, 8);
	arrs_free(b, 3);
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
	if ((rv = arrs_end(a, p, 2)) == AX_OK &&
	    (rv = stmt(s, "sched_set_next", sql, 2)) == AX_OK)
		rv = ax_store_query_prepared(s, "sched_set_next", 2, p, NULL);
	arrs_free(a, 2);
	return rv;
}

/* --- lease --------------------------------------------------------------
 */

ax_err
ax_store_sched_lease_take(ax_store *s, const char *holder, int64_t ttl_us,
                          int64_t *epoch)
{
	static const char sql[] =
	    "UPDATE scheduler_lease SET epoch = epoch + 1, holder = $1,"
	    " acquired_at = now(),"
	    " expires_at = now() + $2::bigint * interval '1 microsecond'"
	    " WHERE id AND (holder IS NULL OR holder = $1 OR expires_at IS "
	    "NULL"
	    " OR expires_at < now()) RETURNING epoch";
	char        ttl[24];
	const char *p[2] = { holder, ttl };
	PGresult   *res  = NULL;
	ax_err      rv;

	snprintf(ttl, sizeof(ttl), "%lld", (long long) ttl_us);
	if ((rv = ax_store_query(s, sql, 2, p, &res)) != AX_OK)
		return rv;
	if (PQntuples(res) == 1) {
		*epoch = val_i64(res, 0, 0);
		PQclear(res);
		return AX_OK;
	}
	PQclear(res);
	if ((rv = ax_store_query(s,
	                         "SELECT coalesce(holder, '?'),"
	                         " coalesce(expires_at::text, '?')"
	                         " FROM scheduler_lease",
	                         0, NULL, &res)) != AX_OK)
		return rv;
	rv = ax_err_set(AX_EBUSY,
	                "the scheduler lease is held by '%s' until %s; "
	                "another axd is active (wait for it to stop, or for "
	                "its lease to lapse)",
	                PQntuples(res) ? PQgetvalue(res, 0, 0) : "?",
	                PQntuples(res) ? PQgetvalue(res, 0, 1) : "?");
	PQclear(res);
	return rv;
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
