/*
 * bench_chain.c - `axctl bench --scenario chain`: how fast a success
 * releases the next task, in the shape of the peers' chain benchmarks.
 *
 * One DAG "bench.chain" of --length tasks in a line (t1 -> t2 -> ... ->
 * tN), triggered --runs times one after the other (each run alone in the
 * pipeline: the latency of one hop when idle, not a queue under load).
 * Per edge t<k> -> t<k+1> of every run the time from the upstream's
 * SUCCESS persisted (task_instances.ended_at, written by the transaction
 * that moved it to SUCCESS) to the downstream's user code started
 * (attempts.started_at of its first attempt): P50, P99, max over all
 * edges; also the upstream's SUCCESS to the downstream's dispatch (P99),
 * the part spent inside axd. The makespan of a run is its last SUCCESS
 * persisted minus the run created (median and max over the runs).
 *
 * Figures: chain_edge_p50_ms, chain_edge_p99_ms, chain_edge_max_ms,
 * chain_edge_dispatch_p99_ms, chain_edges, chain_makespan_ms,
 * chain_makespan_max_ms; and the first instance after axd's start:
 * chain_first_start_ms (the first run's t1, its admission decision to its
 * start) and chain_first_edge_ms (that run's edge t1 -> t2).
 *
 * The edge split into its steps, each a P50 and a P99
 * (chain_split_<step>_p50_ms / _p99_ms), from the rows the steps wrote:
 *   report    the upstream's end on the worker (ended_at) to the result
 *             handler's event instance.succeeded (its time is taken when
 *             the result handler builds the transaction);
 *   release   that to the downstream's admission decision (attempts.
 *             admitted_at, the resource detector's clock): the result's
 *             commit, the dependency and resource detectors;
 *   admit     that to the admission transaction (attempts.created_at, the
 *             transaction's start in the instance generator);
 *   dispatch  that to the dispatch record (dispatched_at): the admission's
 *             commit, render, hooks, the queue and its dispatch record;
 *   start     that to the task's start on the worker (started_at).
 */
#include <stdlib.h>

#include "bench_run.h"

#define DAG "bench.chain"

static void
write_chain(FILE *f, void *arg)
{
	const ax_bench *b = arg;
	ax_bench_yaml_chain(f, b->o.length, b->o.process);
}

/* Edge k of a run: downstream d = t<k+1> (its first attempt a) against
 * upstream u = t<k>. */
#define EDGES_FROM                                                            \
	"FROM task_instances_all d JOIN dags g ON g.id = d.dag_id "           \
	"JOIN task_instances_all u ON u.dag_run_id = d.dag_run_id "           \
	"AND u.task = 't' || (substr(d.task, 2)::int - 1) "                   \
	"JOIN attempts_all a ON a.instance_id = d.id AND a.number = 1 "
#define EDGES_WHERE "WHERE g.name = '" DAG "' AND d.task <> 't1'"

#define SQL_EDGES                                                             \
	"SELECT ax_us(a.started_at) - ax_us(u.ended_at), "                    \
	"ax_us(a.dispatched_at) - ax_us(u.ended_at) " EDGES_FROM EDGES_WHERE

#define SQL_MAKESPAN                                                          \
	"SELECT ax_us(max(i.ended_at)) - ax_us(r.created_at) FROM dag_runs "  \
	"r "                                                                  \
	"JOIN dags g ON g.id = r.dag_id JOIN task_instances_all i ON "        \
	"i.dag_run_id = r.id WHERE g.name = '" DAG "' GROUP BY r.id, "        \
	"r.created_at"

/* The first run's t1 (admission decision to start) and its first edge. */
#define SQL_FIRST                                                             \
	"SELECT ax_us(a1.started_at) - ax_us(a1.admitted_at), "               \
	"ax_us(a2.started_at) - ax_us(t1.ended_at) FROM dag_runs r "          \
	"JOIN dags g ON g.id = r.dag_id "                                     \
	"JOIN task_instances_all t1 ON t1.dag_run_id = r.id AND t1.task = "   \
	"'t1' "                                                               \
	"JOIN attempts_all a1 ON a1.instance_id = t1.id AND a1.number = 1 "   \
	"JOIN task_instances_all t2 ON t2.dag_run_id = r.id AND t2.task = "   \
	"'t2' "                                                               \
	"JOIN attempts_all a2 ON a2.instance_id = t2.id AND a2.number = 1 "   \
	"WHERE g.name = '" DAG "' ORDER BY r.id LIMIT 1"

/* The steps of an edge, in the order of SQL_SPLIT's columns. */
static const char *const split_steps[] = { "report", "release", "admit",
	                                   "dispatch", "start" };

#define SQL_SPLIT                                                             \
	"SELECT ax_us(e.time) - ax_us(u.ended_at), "                          \
	"ax_us(a.admitted_at) - ax_us(e.time), "                              \
	"ax_us(a.created_at) - ax_us(a.admitted_at), "                        \
	"ax_us(a.dispatched_at) - ax_us(a.created_at), "                      \
	"ax_us(a.started_at) - ax_us(a.dispatched_at) " EDGES_FROM            \
	"JOIN event_log e ON e.instance_id = u.id "                           \
	"AND e.type = 'instance.succeeded' " EDGES_WHERE

/* chain_split_<step>_p50_ms / _p99_ms; nothing when the rows lack them. */
static void
measure_split(ax_bench *b)
{
	PGresult *r = PQexec(b->db, SQL_SPLIT);
	char      key[64];

	for (int c = 0; PQresultStatus(r) == PGRES_TUPLES_OK &&
	     (size_t) c < sizeof(split_steps) / sizeof(split_steps[0]);
	     c++) {
		size_t  n;
		double *v = ax_bench_fetch_sorted(r, c, &n);
		if (v != NULL && n > 0) {
			snprintf(key, sizeof(key), "chain_split_%s_p50_ms",
			         split_steps[c]);
			ax_bench_put(&b->r, key,
			             ax_bench_percentile(v, n, 50) / 1000.0);
			snprintf(key, sizeof(key), "chain_split_%s_p99_ms",
			         split_steps[c]);
			ax_bench_put(&b->r, key,
			             ax_bench_percentile(v, n, 99) / 1000.0);
		}
		free(v);
	}
	PQclear(r);
}

static int
measure_chain(ax_bench *b)
{
	PGresult *r = PQexec(b->db, SQL_EDGES);
	double   *v;
	size_t    n;

	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "axctl bench: %s", PQerrorMessage(b->db));
		PQclear(r);
		return 1;
	}
	if ((v = ax_bench_fetch_sorted(r, 0, &n)) == NULL || n == 0) {
		fprintf(stderr, "axctl bench: chain: no edge measured\n");
		free(v);
		PQclear(r);
		return 1;
	}
	ax_bench_put(&b->r, "chain_edge_p50_ms",
	             ax_bench_percentile(v, n, 50) / 1000.0);
	ax_bench_put(&b->r, "chain_edge_p99_ms",
	             ax_bench_percentile(v, n, 99) / 1000.0);
	ax_bench_put(&b->r, "chain_edge_max_ms", v[n - 1] / 1000.0);
	ax_bench_put(&b->r, "chain_edges", (double) n);
	free(v);
	if ((v = ax_bench_fetch_sorted(r, 1, &n)) != NULL && n > 0)
		ax_bench_put(&b->r, "chain_edge_dispatch_p99_ms",
		             ax_bench_percentile(v, n, 99) / 1000.0);
	free(v);
	PQclear(r);
	r = PQexec(b->db, SQL_MAKESPAN);
	if (PQresultStatus(r) == PGRES_TUPLES_OK &&
	    (v = ax_bench_fetch_sorted(r, 0, &n)) != NULL) {
		if (n > 0) {
			ax_bench_put(&b->r, "chain_makespan_ms",
			             ax_bench_percentile(v, n, 50) / 1000.0);
			ax_bench_put(&b->r, "chain_makespan_max_ms",
			             v[n - 1] / 1000.0);
		}
		free(v);
	}
	PQclear(r);
	r = PQexec(b->db, SQL_FIRST);
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
	    !PQgetisnull(r, 0, 0) && !PQgetisnull(r, 0, 1)) {
		ax_bench_put(&b->r, "chain_first_start_ms",
		             strtod(PQgetvalue(r, 0, 0), NULL) / 1000.0);
		ax_bench_put(&b->r, "chain_first_edge_ms",
		             strtod(PQgetvalue(r, 0, 1), NULL) / 1000.0);
	}
	PQclear(r);
	measure_split(b);
	return 0;
}

int
ax_bench_run_chain(ax_bench *b)
{
	/* Generous: a second per edge on top of a minute. */
	int timeout_s = 60 + b->o.length;

	fprintf(stderr, "chain: %d tasks in a line, %d run(s), %s\n",
	        b->o.length, b->o.runs, b->o.process ? "process" : "noop");
	if (ax_bench_begin(b, "chain", write_chain, b))
		return 1;
	for (int k = 1; k <= b->o.runs; k++)
		if (ax_bench_trigger(b, DAG) ||
		    ax_bench_wait_runs(b, DAG, k, timeout_s, 20)) {
			ax_bench_stop_stack(b);
			return 1;
		}
	ax_bench_stop_stack(b);
	if (ax_bench_check_success(b, DAG, (long) b->o.length * b->o.runs) ||
	    measure_chain(b))
		return 1;
	ax_bench_say(&b->r,
	             "chain (%d tasks, %d run(s), %s, %.0f edges): success to "
	             "next start P50 %.2f ms, P99 %.2f ms, max %.2f ms; "
	             "makespan %.1f ms",
	             b->o.length, b->o.runs, b->o.process ? "process" : "noop",
	             ax_bench_get(&b->r, "chain_edges"),
	             ax_bench_get(&b->r, "chain_edge_p50_ms"),
	             ax_bench_get(&b->r, "chain_edge_p99_ms"),
	             ax_bench_get(&b->r, "chain_edge_max_ms"),
	             ax_bench_get(&b->r, "chain_makespan_ms"));
	return 0;
}
