/*
 * bench_scale.c - `axctl bench --scenario scale`: axd and ax-api over a
 * big installation: --dags DAGs (default 100,000) and --history task
 * instances of history (default 10,000,000).
 *
 * Builds the state in SQL, in bulk: one DAG loaded normally
 * ("bench.scale.0000000", monthly), cloned --dags - 1 times with one
 * INSERT ... SELECT generate_series per table, each clone monthly at its
 * own instant (as the timers scenario does); then a probe DAG
 * "bench.scale.probe" firing every second, loaded last so that it has
 * the highest id and the loader arms it last. History: --history / 10
 * past runs spread over the DAGs (1 % FAILED), 10 instances each (shards
 * of task t), one attempt and one event_log row per instance, in the
 * event_log month partitions of their times (created first).
 *
 * Measures, each from what PostgreSQL holds or from real HTTP requests:
 *  - axd exec -> first on-time fire, twice: the first start (it writes
 *    every schedules row) and an ordinary restart. The first on-time
 *    fire is the first scheduled dag_runs row created after exec and no
 *    later than its due_at (the probe's, or any clone's that falls due).
 *  - axd's RSS with every schedule armed (stable for 3 s) and its peak.
 *  - ax-api (started through cli/stack.c on a free port, admin token):
 *    P50 / P99 of list pages (DAGs, runs, instances, events, with and
 *    without filters) and of GET /metrics, 40 requests each after 3 of
 *    warm-up, one keep-alive connection.
 *
 * Progress goes to stderr; the figures go into b->r (ax_bench_put, and
 * one human line per figure group).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_client.h"
#include "bench_run.h"
#include "clock.h"

#define SCALE_REQS   40 /* timed requests per API query */
#define SCALE_WARMUP 3

static void
write_template(FILE *f, void *arg)
{
	(void) arg;
	fputs("kind: DAG\nname: bench.scale.0000000\n"
	      "schedule: {cron: \"0 0 0 1 * ?\", timezone: UTC}\n"
	      "tasks:\n  - {name: t, type: noop, command: \"/bin/true\"}\n",
	      f);
}

static void
write_probe(FILE *f, void *arg)
{
	(void) arg;
	fputs("kind: DAG\nname: bench.scale.probe\n"
	      "schedule: {cron: \"* * * * * ?\", timezone: UTC}\n"
	      "concurrency: {max_active_runs: 10, policy: parallel}\n"
	      "tasks:\n  - {name: t, type: noop, command: \"/bin/true\"}\n",
	      f);
}

/* The DAGs: the template loaded, N-1 clones by SQL, the probe last. */
static int
build_dags(ax_bench *b)
{
	char    q[4096];
	int64_t t0;

	if (ax_bench_fresh_tables(b) ||
	    ax_bench_load(b, "scale", write_template, NULL))
		return 1;
	t0 = ax_clock_mono_us();
	snprintf(
	    q, sizeof(q),
	    "BEGIN;"
	    "INSERT INTO dags (name) SELECT 'bench.scale.' || "
	    "lpad(g::text, 7, '0') FROM generate_series(1, %d) g;"
	    "INSERT INTO dag_versions (dag_id, version, content_hash, yaml, "
	    "definition, source) SELECT d.id, 1, "
	    "encode(sha256(convert_to(d.name, 'UTF8')), 'hex'), "
	    "replace(replace(v.yaml, 'bench.scale.0000000', d.name), "
	    "'0 0 0 1 * ?', c.cron), "
	    "jsonb_set(jsonb_set(v.definition, '{name}', to_jsonb(d.name)), "
	    "'{schedule,cron}', to_jsonb(c.cron)), 'bench' "
	    "FROM dags d CROSS JOIN LATERAL (SELECT substr(d.name, 13)::int "
	    "AS g) n CROSS JOIN LATERAL (SELECT format('%%s %%s %%s %%s * ?', "
	    "n.g %% 60, n.g / 60 %% 60, n.g / 3600 %% 24, "
	    "1 + n.g / 86400 %% 28) AS cron) c, "
	    "dag_versions v JOIN dags d0 ON d0.active_version_id "
	    "= v.id AND d0.name = 'bench.scale.0000000' "
	    "WHERE d.active_version_id IS NULL;"
	    "UPDATE dags d SET active_version_id = v.id FROM dag_versions v "
	    "WHERE v.dag_id = d.id AND d.active_version_id IS NULL;"
	    "COMMIT;",
	    b->o.dags - 1);
	if (b->o.dags > 1 && ax_bench_sql(b, q))
		return 1;
	if (ax_bench_load(b, "scale-probe", write_probe, NULL))
		return 1;
	fprintf(stderr, "scale: %d DAGs (and the probe) in %.1f s\n",
	        b->o.dags, ax_bench_secs_since(t0));
	return 0;
}

/* A TCP port nobody listens on now (bound to 0 and released). */
static int
free_port(void)
{
	struct sockaddr_in a;
	socklen_t          len = sizeof(a);
	int                fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sin_family      = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *) &a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *) &a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* axd alone (no worker: the runs' instances wait), ax-api on port. */
static int
start_axd(ax_bench *b, int port)
{
	ax_stack_opts so = {
		.home      = b->h.home,
		.dsn       = b->h.w.dsn,
		.workers   = 0,
		.api_port  = port,
		.log_level = "info",
	};
	ax_err rv;

	if ((rv = ax_stack_init(&b->st, &so)) != AX_OK)
		return ax_bench_fail("home", rv);
	if ((rv = ax_stack_start_axd(&b->st, 300 * AX_USEC_PER_SEC)) != AX_OK)
		return ax_bench_fail("axd", rv);
	return 0;
}

/*
 * Starts axd and waits for its first on-time fire; *secs gets exec ->
 * that fire (run created, database clock). 0, or 1 said on stderr (the
 * caller stops the stack).
 */
static int
first_fire(ax_bench *b, int port, const char *what, double *secs)
{
	char    q[512];
	double  t0_db = ax_bench_sql_num(b, "SELECT ax_us(now())"), v;
	int64_t deadline;

	*secs = -1;
	if (t0_db < 0 || start_axd(b, port))
		return 1;
	deadline = ax_clock_mono_us() + 600 * AX_USEC_PER_SEC;
	snprintf(q, sizeof(q),
	         "SELECT ax_us(min(created_at)) FROM dag_runs WHERE "
	         "run_type = 'scheduled' AND created_at >= ax_ts(%.0f) AND "
	         "created_at <= due_at",
	         t0_db);
	while ((v = ax_bench_sql_num(b, q)) < 0) {
		if (ax_bench_children_dead(b) ||
		    ax_clock_mono_us() > deadline) {
			fprintf(stderr,
			        "axctl bench: scale: no on-time fire %s\n",
			        ax_clock_mono_us() > deadline ? "in 600 s"
			                                      : "(stopped)");
			return 1;
		}
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	}
	*secs = (v - t0_db) / 1e6;
	fprintf(stderr, "scale: %s: first on-time fire %.2f s after exec\n",
	        what, *secs);
	return 0;
}

/* VmRSS of axd once flat (1 %) for 3 s, at most 120 s. */
static double
stable_rss(ax_bench *b)
{
	double last = -1, cur = -1;
	int    stable = 0;

	for (int s = 0; s < 120 && stable < 3; s++) {
		if (ax_bench_children_dead(b))
			return -1;
		ax_clock_sleep_us(AX_USEC_PER_SEC);
		cur    = ax_bench_rss_mb(b->st.axd.pid, "VmRSS:");
		stable = (last > 0 && cur < last * 1.01 && cur > last * 0.99)
		    ? stable + 1
		    : 0;
		last   = cur;
	}
	return cur;
}

/* One query timed SCALE_REQS times; figures key_p50_ms and key_p99_ms. */
static int
time_get(ax_bench *b, ax_api_client *c, const char *key, const char *path)
{
	double v[SCALE_REQS], p50, p99;
	char   k[48];

	for (int i = 0; i < SCALE_WARMUP + SCALE_REQS; i++) {
		ax_api_reply rep = { 0 };
		int64_t      t0  = ax_clock_mono_us();
		ax_err  rv = ax_api_client_call(c, "GET", path, NULL, NULL, 0,
		                                NULL, &rep);
		int64_t us = ax_clock_mono_us() - t0;
		ax_api_reply_fini(&rep);
		if (rv != AX_OK) {
			fprintf(stderr, "axctl bench: scale: GET %s: %s\n",
			        path, ax_err_detail());
			return 1;
		}
		if (i >= SCALE_WARMUP)
			v[i - SCALE_WARMUP] = (double) us / 1000.0;
	}
	ax_bench_sort(v, SCALE_REQS);
	p50 = ax_bench_percentile(v, SCALE_REQS, 50);
	p99 = ax_bench_percentile(v, SCALE_REQS, 99);
	snprintf(k, sizeof(k), "%s_p50_ms", key);
	ax_bench_put(&b->r, k, p50);
	snprintf(k, sizeof(k), "%s_p99_ms", key);
	ax_bench_put(&b->r, k, p99);
	fprintf(stderr, "scale: GET %-48s P50 %8.2f ms  P99 %8.2f ms\n", path,
	        p50, p99);
	ax_bench_say(&b->r, "  %-20s P50 %8.2f ms, P99 %8.2f ms  (GET %s)",
	             key, p50, p99, path);
	return 0;
}

/* The list pages and /metrics through ax-api; the DAG filters name the
 * DAG in the middle of the id range (its runs are in the history). */
static int
measure_api(ax_bench *b, int port)
{
	static const struct {
		const char *key, *path;
		int         dag; /* 1: path + the DAG's name */
	} gets[] = {
		{ "api_dags", "/api/v1/dags?limit=100", 0 },
		{ "api_runs", "/api/v1/runs?limit=100", 0 },
		{ "api_runs_dag", "/api/v1/runs?dag=", 1 },
		{ "api_runs_failed", "/api/v1/runs?state=FAILED&limit=100",
		  0 },
		{ "api_instances", "/api/v1/instances?limit=100", 0 },
		{ "api_instances_dag", "/api/v1/instances?dag=", 1 },
		{ "api_instances_failed",
		  "/api/v1/instances?state=FAILED&limit=100", 0 },
		{ "api_events", "/api/v1/events?limit=100", 0 },
		{ "api_events_dag", "/api/v1/events?dag=", 1 },
		{ "api_events_type",
		  "/api/v1/events?type=instance.failed&limit=100", 0 },
		{ "metrics", "/metrics", 0 },
	};
	char           dag[32], path[128];
	char           url[64], why[512], token[PATH_MAX + 16];
	int            up = 0, rc = 0;
	ax_api_client *c  = NULL;
	ax_api_opts    ao = { 0 };
	ax_err         rv;

	if ((rv = ax_stack_start_api(&b->st, &up, why, sizeof(why))) !=
	        AX_OK ||
	    !up) {
		fprintf(stderr, "axctl bench: scale: ax-api: %s\n",
		        rv != AX_OK ? ax_err_detail() : why);
		return 1;
	}
	if ((rv = ax_stack_admin_token(&b->st, token, sizeof(token))) != AX_OK)
		return ax_bench_fail("admin token", rv);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	ao.server     = url;
	ao.token_file = token;
	if ((rv = ax_api_client_new(&ao, &c)) != AX_OK)
		return ax_bench_fail("API client", rv);
	/* ax-api listens once its start-up is done: wait for /healthz */
	for (int i = 0; i < 100; i++) {
		ax_api_reply rep = { 0 };
		rv = ax_api_client_call(c, "GET", "/api/v1/healthz", NULL,
		                        NULL, 0, NULL, &rep);
		ax_api_reply_fini(&rep);
		if (rv == AX_OK)
			break;
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	}
	ax_bench_say(&b->r,
	             "API (%d requests each, one connection):", SCALE_REQS);
	snprintf(dag, sizeof(dag), "bench.scale.%07d", b->o.dags / 2);
	for (size_t i = 0; rc == 0 && i < sizeof(gets) / sizeof(gets[0]);
	     i++) {
		snprintf(path, sizeof(path), "%s%s", gets[i].path,
		         gets[i].dag ? dag : "");
		rc = time_get(b, c, gets[i].key, path);
	}
	ax_api_client_free(c);
	return rc;
}

int
ax_bench_run_scale(ax_bench *b)
{
	double first = -1, again = -1, rss, hwm;
	int    port = free_port();

	fprintf(stderr, "scale: %d DAGs, %ld instances of history\n",
	        b->o.dags, (long) (b->o.history / 10) * 10);
	if (port <= 0)
		return ax_bench_fail(
		    "port", ax_err_set(AX_EIO, "no free TCP port for ax-api"));
	if (build_dags(b) ||
	    ax_bench_build_history(b, b->o.history, b->o.dags, 1))
		return 1;
	if (first_fire(b, port, "first start (writes every schedules row)",
	               &first)) {
		ax_bench_stop_stack(b);
		return 1;
	}
	ax_bench_stop_stack(b);
	if (first_fire(b, port, "restart", &again)) {
		ax_bench_stop_stack(b);
		return 1;
	}
	rss = stable_rss(b);
	hwm = ax_bench_rss_mb(b->st.axd.pid, "VmHWM:");
	fprintf(stderr, "scale: axd RSS %.1f MB (peak %.1f MB)\n", rss, hwm);
	ax_bench_put(&b->r, "dags", b->o.dags);
	ax_bench_put(&b->r, "history_instances",
	             (double) ((long) (b->o.history / 10) * 10));
	ax_bench_put(&b->r, "first_fire_first_start_s", first);
	ax_bench_put(&b->r, "first_fire_restart_s", again);
	ax_bench_put(&b->r, "axd_rss_mb", rss);
	ax_bench_say(&b->r,
	             "scale (%d DAGs, %ld instances of history): exec -> "
	             "first on-time fire %.2f s (first start), %.2f s "
	             "(restart); axd RSS %.1f MB, peak %.1f MB",
	             b->o.dags, (long) (b->o.history / 10) * 10, first, again,
	             rss, hwm);
	if (measure_api(b, port)) {
		ax_bench_stop_stack(b);
		return 1;
	}
	ax_bench_stop_stack(b);
	return 0;
}
