/*
 * api_views.c - the UI's read models (see api_views.h).
 *
 * Cost at scale: the grid reads its runs through dag_runs' unique
 * (dag_id, logical_date) index and their instances, hot or in history
 * (task_instances_all), through task_instances_run_idx and the history's
 * run index (one probe per month), and PostgreSQL writes the whole compact
 * JSON answer in the same statement: 100 runs x 200 tasks is one statement
 * over 20,000 rows and an answer of about 600 KB, sent as it comes. The
 * graph's downstream DAGs are the one read that is not by index: it looks
 * through the active versions' depends_on_dags (a scan of dags joined to
 * dag_versions by primary key: a few milliseconds at 10,000 DAGs), once per
 * graph view, never per row of a list. The queue depth reads
 * task_instances_active_idx, which holds only unfinished instances.
 */
#include "api_views.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define RFC3339(col)                                                          \
	"to_char(" col " AT TIME ZONE 'UTC', "                                \
	"'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

void
ax_api_me(ax_api_req *q, ax_api_resp *r)
{
	ax_api_reply_json(r, 200,
	                  json_pack("{s:s,s:s,s:I}", "name", q->token_name,
	                            "role", ax_api_role_name(q->role),
	                            "token_id", (json_int_t) q->token_id));
}

/* Column c of row 0 of res parsed as JSON (jsonb text); NULL: json null. */
static json_t *
col_json(const PGresult *res, int c)
{
	if (PQgetisnull(res, 0, c))
		return json_null();
	json_t *j = json_loads(PQgetvalue(res, 0, c), JSON_DECODE_ANY, NULL);
	return j ? j : json_null();
}

void
ax_api_dag_grid(ax_api_req *q, ax_api_resp *r)
{
	int64_t     runs, before_us;
	char        nb[24], bb[24];
	const char *before = NULL;
	PGresult   *res;

	if (!ax_api_query_int(q, r, "runs", 25, 1, 100, &runs))
		return;
	if (ax_api_query(q, "before") != NULL) {
		json_t *s  = json_string(ax_api_query(q, "before"));
		int     ok = ax_api_parse_instant(s, "before", r, &before_us);
		json_decref(s);
		if (!ok)
			return;
		snprintf(bb, sizeof(bb), "%" PRId64, before_us);
		before = bb;
	}
	snprintf(nb, sizeof(nb), "%" PRId64, runs);
	const char *p[] = { q->params[0], nb, before };
	res             = ax_api_query_row(
	                q, r,
	                "WITH d AS (SELECT d.id, v.definition FROM dags d "
	                            "LEFT JOIN dag_versions v ON v.id = d.active_version_id "
	                            "WHERE d.name = $1), "
	                            "runs AS (SELECT r.id, r.logical_date, r.state, r.run_type "
	                            "FROM dag_runs r, d WHERE r.dag_id = d.id "
	                            "AND ($3::bigint IS NULL OR r.logical_date < ax_ts($3::bigint)) "
	                            "ORDER BY r.logical_date DESC LIMIT $2::int), "
	                            "rix AS (SELECT *, (row_number() OVER "
	                            "(ORDER BY logical_date) - 1)::int AS idx FROM runs), "
	                            "inst AS (SELECT i.dag_run_id, i.task, i.id, i.state, "
	                            "i.try_number FROM task_instances_all i "
	                            "WHERE i.dag_run_id IN (SELECT id FROM runs)), "
	                            "deft AS (SELECT t->>'name' AS name, o FROM d, "
	                            "jsonb_array_elements(coalesce(d.definition->'tasks', "
	                            "'[]')) WITH ORDINALITY x(t, o)), "
	                            "allt AS (SELECT name, min(o) AS o FROM (SELECT name, o "
	                            "FROM deft UNION ALL SELECT DISTINCT task, 1000000000 "
	                            "FROM inst) z GROUP BY name), "
	                            "tix AS (SELECT name, (row_number() OVER (ORDER BY o, "
	                            "name) - 1)::int AS idx FROM allt) "
	                            "SELECT json_build_object('dag', $1::text, "
	                            "'tasks', (SELECT coalesce(json_agg(name ORDER BY idx), "
	                            "'[]') FROM tix), "
	                            "'runs', (SELECT coalesce(json_agg(json_build_object('id', "
	                            "id, 'logical_date', " RFC3339(
	                    "logical_date") ", 'state', "
	                                                "state, 'run_type', run_type, "
	                                                "'deadline_missed', EXISTS (SELECT 1 "
	                                                "FROM event_log e WHERE e.dag_run_id = rix.id "
	                                                "AND e.type IN "
	                                                "('run.deadline_missed', "
	                                                "'instance.deadline_missed'))) "
	                                                "ORDER BY idx), "
	                                                "'[]') FROM "
	                                                "rix), "
	                                                "'cells', (SELECT "
	                                                "coalesce(json_agg(json_build_array("
	                                                "rix.idx, tix.idx, inst.id, inst.state, "
	                                                "inst.try_number)), "
	                                                "'[]') FROM inst JOIN rix ON rix.id = "
	                                                "inst.dag_run_id "
	                                                "JOIN tix ON tix.name = inst.task), "
	                                                "'next_before', (SELECT CASE WHEN count(*) = "
	                                                "$2::int THEN " RFC3339(
	                                        "min(logical_date)") " END FROM "
	                                                                         "runs))::text "
	                                                                         "FROM d",
	                3, p, "no DAG named '%s'", q->params[0]);
	if (res == NULL)
		return;
	/* PostgreSQL wrote the whole answer: sent as it is, not parsed and
	 * printed again (20,000 cells) */
	ax_api_reply_text(r, 200, "application/json", PQgetvalue(res, 0, 0),
	                  (size_t) PQgetlength(res, 0, 0));
	PQclear(res);
}

void
ax_api_dag_graph(ax_api_req *q, ax_api_resp *r)
{
	PGresult *res;

	const char *p[] = { q->params[0] };
	res             = ax_api_query_row(
	                q, r,
	                "SELECT (SELECT coalesce(jsonb_agg(jsonb_build_object('name', "
	                            "t->>'name', 'type', t->>'type', 'depends_on', "
	                            "coalesce(t->'depends_on', '[]')) ORDER BY o), '[]') "
	                            "FROM jsonb_array_elements(coalesce(v.definition->'tasks', "
	                            "'[]')) WITH ORDINALITY x(t, o)), "
	                            "coalesce(v.definition->'depends_on_dags', '[]'), "
	                            "(SELECT coalesce(jsonb_agg(jsonb_build_object('dag', "
	                            "d2.name, 'mode', e->>'mode') ORDER BY d2.name), '[]') "
	                            "FROM dags d2 JOIN dag_versions v2 "
	                            "ON v2.id = d2.active_version_id, "
	                            "jsonb_array_elements(v2.definition->'depends_on_dags') e "
	                            "WHERE v2.definition->'depends_on_dags' @> "
	                            "jsonb_build_array(jsonb_build_object('dag', d.name)) "
	                            "AND e->>'dag' = d.name) "
	                            "FROM dags d LEFT JOIN dag_versions v "
	                            "ON v.id = d.active_version_id WHERE d.name = $1",
	                1, p, "no DAG named '%s'", q->params[0]);
	if (res == NULL)
		return;
	ax_api_reply_json(r, 200,
	                  json_pack("{s:s,s:o,s:o,s:o}", "dag", q->params[0],
	                            "tasks", col_json(res, 0), "upstream_dags",
	                            col_json(res, 1), "downstream_dags",
	                            col_json(res, 2)));
	PQclear(res);
}

void
ax_api_queue_depth(ax_api_req *q, ax_api_resp *r)
{
	PGresult *res;
	ax_err    rv;

	rv = ax_store_query(
	    q->st,
	    "SELECT channel, worker_group, "
	    "count(*) FILTER (WHERE state = 'PENDING') AS pending, "
	    "count(*) FILTER (WHERE state = 'READY') AS ready, "
	    "count(*) FILTER (WHERE state IN ('RUNNING', 'UNKNOWN')) AS "
	    "running FROM task_instances "
	    "WHERE state IN ('PENDING', 'READY', 'RUNNING', 'UNKNOWN') "
	    "GROUP BY channel, worker_group ORDER BY channel, worker_group",
	    0, NULL, &res);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	ax_api_reply_json(r, 200,
	                  json_pack("{s:o}", "depth", ax_api_rows_json(res)));
	PQclear(res);
}
