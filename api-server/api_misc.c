/*
 * api_misc.c - /healthz, /metrics, workers and events routes of ax-api
 * (see api_misc.h).
 *
 * /metrics reads what axd's actors count in memory and publish in
 * component_stats (api_metrics.c) and the small workers table: a few
 * queries of a few hundred rows at most, whatever the size of the
 * history (task_instances, dag_runs, attempts, event_log are never read
 * by a scrape).
 */
#include "api_misc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_metrics.h"
#include "api_server.h"
#include "state.h"

void
ax_api_healthz(ax_api_req *q, ax_api_resp *r)
{
	int64_t v;
	ax_err  rv = ax_store_query_int64(q->st, "SELECT 1", 0, NULL, &v);

	if (rv != AX_OK) {
		ax_api_reply_error(r, 503, "unavailable",
		                   "the database does not answer: %s",
		                   ax_errname(rv));
		return;
	}
	ax_api_reply_json(
	    r, 200, json_pack("{s:s,s:s}", "status", "ok", "database", "ok"));
}

/* Appends gauge family name{label=key} for every row (key, value) of
 * sql, plus 0 for every key of zeros not in the rows. */
static ax_err
gauge(ax_api_req *q, ax_buf *b, const char *name, const char *help,
      const char *label, const char *sql, const char *const *zeros)
{
	PGresult *res;
	ax_err    rv = ax_store_query(q->st, sql, 0, NULL, &res);

	if (rv != AX_OK)
		return rv;
	ax_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
	for (const char *const *z = zeros; z && *z; z++) {
		int found = 0;
		for (int i = 0; i < PQntuples(res); i++)
			found |= !strcmp(PQgetvalue(res, i, 0), *z);
		if (!found)
			ax_buf_printf(b, "%s{%s=\"%s\"} 0\n", name, label, *z);
	}
	for (int i = 0; i < PQntuples(res); i++)
		ax_buf_printf(b, "%s{%s=\"%s\"} %s\n", name, label,
		              PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
	PQclear(res);
	return AX_OK;
}

void
ax_api_metrics_text(ax_api_req *q, ax_api_resp *r)
{
	static const char *const w_states[] = { "ACTIVE", "DRAINING", "LOST",
		                                "GONE", NULL };
	ax_buf                   b          = { 0 };
	ax_err                   rv         = AX_OK;

	ax_api_metrics_render(ax_api_server_metrics(q->srv), &b);
	/* the workers table: one row per worker, written by the queue */
	if (rv == AX_OK)
		rv =
		    gauge(q, &b, "ax_workers", "Workers by state.", "state",
		          "SELECT state, count(*) FROM workers GROUP BY state "
		          "ORDER BY state",
		          w_states);
	if (rv == AX_OK)
		rv = ax_api_metrics_render_sched(q->st, &b);
	if (rv == AX_OK)
		rv = ax_api_metrics_render_sinks(q->st, &b);
	if (rv == AX_OK)
		rv = ax_api_metrics_render_starving(q->st, &b);
	if (rv != AX_OK) {
		ax_buf_fini(&b);
		ax_api_reply_err(r, rv);
		return;
	}
	if (ax_buf_err(&b) != AX_OK) { /* take reports it, with a detail */
		char *none;
		ax_api_reply_err(r, ax_buf_take(&b, &none, NULL));
		return;
	}
	ax_api_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8",
	                  ax_buf_str(&b), ax_buf_len(&b));
	ax_buf_fini(&b);
}

void
ax_api_workers_list(ax_api_req *q, ax_api_resp *r)
{
	PGresult *res;
	ax_err    rv;

	const char *p[] = { ax_api_query(q, "state"),
		            ax_api_query(q, "group") };
	rv              = ax_store_query(
	                 q->st,
	                 "SELECT id, worker_group, slots, used_slots, address, hostname, "
	                              "pid, state, registered_at, last_heartbeat_at, "
	                              "lease_expires_at, load_x100, cpus, mem_total_kb, "
	                              "mem_available_kb, tasks_cpu_milli, tasks_rss_kb "
	                              "FROM workers "
	                              "WHERE ($1::text IS NULL OR state = $1) "
	                              "AND ($2::text IS NULL OR worker_group = $2) ORDER BY id",
	                 2, p, &res);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	ax_api_reply_json(
	    r, 200, json_pack("{s:o}", "workers", ax_api_rows_json(res)));
	PQclear(res);
}

/* Integer query argument as SQL text, NULL when absent; 0 after a 400. */
static int
opt_int(ax_api_req *q, ax_api_resp *r, const char *key, char *buf, size_t len,
        const char **out)
{
	int64_t v;
	*out = NULL;
	if (ax_api_query(q, key) == NULL)
		return 1;
	if (!ax_api_query_int(q, r, key, 0, 0, INT64_MAX, &v))
		return 0;
	snprintf(buf, len, "%" PRId64, v);
	*out = buf;
	return 1;
}

void
ax_api_events_list(ax_api_req *q, ax_api_resp *r)
{
	char        rb[24], ib[24], cb[24], lb[24], sb[24];
	const char *run, *inst, *cursor, *since = NULL;
	int64_t     limit, since_us;
	PGresult   *res;
	ax_err      rv;

	if (!opt_int(q, r, "run", rb, sizeof(rb), &run) ||
	    !opt_int(q, r, "instance", ib, sizeof(ib), &inst) ||
	    !opt_int(q, r, "cursor", cb, sizeof(cb), &cursor) ||
	    !ax_api_query_int(q, r, "limit", 100, 1, 1000, &limit))
		return;
	if (ax_api_query(q, "since") != NULL) {
		json_t *s  = json_string(ax_api_query(q, "since"));
		int     ok = ax_api_parse_instant(s, "since", r, &since_us);
		json_decref(s);
		if (!ok)
			return;
		snprintf(sb, sizeof(sb), "%" PRId64, since_us);
		since = sb;
	}
	snprintf(lb, sizeof(lb), "%" PRId64, limit);
	const char *p[] = { ax_api_query(q, "dag"),
		            run,
		            inst,
		            ax_api_query(q, "type"),
		            since,
		            cursor,
		            lb };
	rv              = ax_store_query(
	                 q->st,
	                 "SELECT e.id, e.event_id, e.type, e.time, d.name AS dag, "
	                              "e.dag_id, "
	                              "e.dag_run_id, e.instance_id, e.run_id, e.attempt, e.trace_id, "
	                              "e.reason, e.payload FROM event_log e "
	                              "LEFT JOIN dags d ON d.id = e.dag_id "
	                              "WHERE ($1::text IS NULL OR e.dag_id = "
	                              "(SELECT id FROM dags WHERE name = $1)) "
	                              "AND ($2::bigint IS NULL OR e.dag_run_id = $2) "
	                              "AND ($3::bigint IS NULL OR e.instance_id = $3) "
	                              "AND ($4::text IS NULL OR e.type = $4) "
	                              "AND ($5::bigint IS NULL OR e.time >= ax_ts($5::bigint)) "
	                              "AND ($6::bigint IS NULL OR e.id > $6) "
	                              "ORDER BY e.id LIMIT $7::int",
	                 7, p, &res);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	int     n    = PQntuples(res);
	json_t *next = n == limit
	    ? json_integer(strtoll(PQgetvalue(res, n - 1, 0), NULL, 10))
	    : json_null();
	ax_api_reply_json(r, 200,
	                  json_pack("{s:o,s:o}", "events",
	                            ax_api_rows_json(res), "next_cursor",
	                            next));
	PQclear(res);
}
