/*
 * store_sched.c - batched SQL of the schedules table and the DAG reads
 * of the DAG loader (see store_sched.h). Statements take array
 * literals and unnest them: one round trip per statement whatever the
 * batch size.
 */
#include "store_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "store_internal.h"

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
		if ((rv = ax_store_prepare_once(s, "sched_dag_one", one_sql,
		                                1)) != AX_OK)
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
	    (rv = ax_store_prepare_once(s, "sched_dags", all_sql, 2)) != AX_OK)
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
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "schedules upsert");
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
	    (rv = ax_store_prepare_once(s, "sched_upsert", sql, 7)) == AX_OK)
		rv = ax_store_write(s, "sched_upsert", NULL, 7, p, &res);
	ax_sqlarr_fini_all(a, 7);
	if (rv != AX_OK)
		return rv;
	for (int r = 0; r < PQntuples(res); r++) {
		int64_t ord = ax_store_cell_i64(res, r, 0);
		if (ord >= 1 && (size_t) ord <= n) {
			rows[ord - 1].schedule_id =
			    ax_store_cell_i64(res, r, 1);
			rows[ord - 1].next_fire_us =
			    ax_store_cell_i64(res, r, 2);
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
	    (rv = ax_store_prepare_once(s, "sched_set_next", sql, 2)) == AX_OK)
		rv = ax_store_write(s, "sched_set_next", NULL, 2, p, NULL);
	ax_sqlarr_fini_all(a, 2);
	return rv;
}
