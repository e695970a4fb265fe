/*
 * cmd_bench.c - `axctl bench`: scheduling latency, throughput, chain and
 * layered DAGs, and memory of the real processes on this machine.
 *
 * Role: brings up a PostgreSQL (the embedded one of --home, or of a temp
 * home), then runs the chosen scenario (or, for `all`, every scenario
 * ax_bench_in_all() selects, in enum order): each empties the DAG tables,
 * loads generated DAGs, starts axd and workers (cli/stack.h), measures
 * from the tables and stops them. Numbers come from what the pipeline
 * persisted (attempts, task_instances, dag_runs), never from the
 * pipeline's own claims. One file per scenario (bench_latency.c,
 * bench_throughput.c, bench_chain.c, bench_layered.c, bench_timers.c,
 * bench_scale.c)
 * with the shared helpers of bench_run.h; `dispatch` below maps each
 * scenario to its function.
 *
 * SIGINT / SIGTERM: the scenario's waits return, the stack and the
 * embedded PostgreSQL are stopped and a temp home is removed before
 * axctl exits 1; nothing is left running.
 *
 * Progress goes to stderr; stdout holds the result only (one JSON object
 * with --json).
 */
#include "cmd_bench.h"

#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "bench_run.h"
#include "log.h"

static volatile sig_atomic_t g_stop; /* SIGINT / SIGTERM received */

static void
on_stop(int sig)
{
	g_stop = sig;
}

/* The function of each scenario; NULL: not a scenario of its own. */
static int (*const dispatch[AX_BENCH_N_SCENARIOS])(ax_bench *b) = {
	[AX_BENCH_LATENCY]    = ax_bench_run_latency,
	[AX_BENCH_THROUGHPUT] = ax_bench_run_throughput,
	[AX_BENCH_CHAIN]      = ax_bench_run_chain,
	[AX_BENCH_LAYERED]    = ax_bench_run_layered,
	[AX_BENCH_TIMERS]     = ax_bench_run_timers,
	[AX_BENCH_SCALE]      = ax_bench_run_scale,
	[AX_BENCH_STORM]      = ax_bench_run_storm,
};

static int
setup(ax_bench *b)
{
	ax_err rv;

	fprintf(stderr, "bench: starting PostgreSQL\n");
	if ((rv = ax_stack_home_open(&b->h, b->o.home, "bench")) != AX_OK)
		return ax_bench_fail("database", rv);
	fprintf(stderr, "bench: home %s\n", b->h.home);
	if (g_stop)
		return 1;
	b->db = PQconnectdb(b->h.w.dsn);
	if (PQstatus(b->db) != CONNECTION_OK) {
		fprintf(stderr, "axctl bench: %s", PQerrorMessage(b->db));
		return 1;
	}
	return ax_bench_sql(b, "SET client_min_messages = warning");
}

static void
teardown(ax_bench *b)
{
	PQfinish(b->db);
	b->db = NULL;
	ax_stack_home_close(&b->h);
}

static void
print_human(const ax_bench *b)
{
	const ax_bench_result *r = &b->r;
	if (r->p50_ms >= 0)
		printf("latency (%d schedules, %s, %ld samples): P50 %.2f ms, "
		       "P99 %.2f ms, max %.2f ms; decision P99 %.2f ms, "
		       "env-ready P99 %.2f ms\n",
		       b->o.schedules, b->o.process ? "process" : "noop",
		       r->samples, r->p50_ms, r->p99_ms, r->max_ms,
		       r->decision_p99_ms, r->env_ready_p99_ms);
	if (r->throughput_per_s >= 0)
		printf("throughput (%d instances, %s): %.0f instances/s to a "
		       "persisted SUCCESS\n",
		       b->o.instances, b->o.process ? "process" : "noop",
		       r->throughput_per_s);
	if (r->cpu_us_per_instance >= 0)
		printf("CPU per instance (whole machine): %.0f us\n",
		       r->cpu_us_per_instance);
	fputs(r->human, stdout);
	if (r->rss_mb >= 0)
		printf("axd peak RSS: %.1f MB\n", r->rss_mb);
}

int
ax_cmd_bench(int argc, char **argv)
{
	ax_bench         b;
	struct sigaction act;
	int              rc;

	memset(&b, 0, sizeof(b));
	if ((rc = ax_bench_parse(argc, argv, &b.o, stdout, stderr)) != 0)
		return rc == 1 ? 0 : 2;
	ax_log_init(AX_LOG_WARN, 2);
	memset(&act, 0, sizeof(act));
	act.sa_handler = on_stop;
	act.sa_flags   = SA_RESTART;
	sigaction(SIGINT, &act, NULL);
	sigaction(SIGTERM, &act, NULL);
	signal(SIGPIPE, SIG_IGN);
	b.stop = &g_stop;
	ax_bench_result_init(&b.r);
	rc = setup(&b);
	for (int s = 1; rc == 0 && s < AX_BENCH_N_SCENARIOS; s++)
		if (dispatch[s] != NULL &&
		    (b.o.scenario == (ax_bench_scenario) s ||
		     (b.o.scenario == AX_BENCH_ALL &&
		      ax_bench_in_all((ax_bench_scenario) s))))
			rc = dispatch[s](&b) || g_stop;
	teardown(&b);
	if (rc != 0 || g_stop) {
		if (g_stop)
			fprintf(stderr, "axctl bench: interrupted by %s\n",
			        g_stop == SIGINT ? "SIGINT" : "SIGTERM");
		return 1;
	}
	if (b.o.json)
		ax_bench_json(stdout, &b.r);
	else
		print_human(&b);
	return 0;
}
