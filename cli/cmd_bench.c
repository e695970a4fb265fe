/*
 * cmd_bench.c - `axctl bench`: scheduling latency, throughput and memory
 * of the real processes on this machine (issue 4 item 10).
 *
 * Role: brings up a PostgreSQL (the embedded one of --home, or of a temp
 * home), then per scenario: empties the DAG tables, loads generated DAGs,
 * starts axd and workers (cli/stack.h), measures from the tables, stops
 * them. Numbers come from what the pipeline persisted (attempts and
 * task_instances), never from the pipeline's own claims.
 *
 * - latency: N DAGs, one task each, cron `S * * * * ?` with S spread over
 *   the minute (bench_util.c), loaded as YAML files of 1000 documents
 *   through the code of `axctl dag load`. After --duration seconds the
 *   attempts due at least 2 s after axd took the lease give started_at -
 *   due_at (P50 / P99 / max), dispatched_at - due_at and started_at -
 *   dispatched_at (P99).
 * - throughput: one DAG "bench.tp" of independent tasks with up to 1000
 *   shards each (one run holds all N instances: a single trigger, no
 *   per-run overhead in the measure), triggered through the control
 *   channel (NOTIFY ax_control {"op":"trigger"}); instances per second =
 *   N / (last instance SUCCESS persisted - run created).
 * - timers: one DAG with a monthly cron loaded normally, then cloned N-1
 *   times with one INSERT ... SELECT generate_series per table (a million
 *   YAML submissions would take an hour). Clone g fires monthly,
 *   `S M H D * ?` with S, M, H, D taken from k = g mod --timer-specs (g
 *   by default: distinct for the first 2,419,200), so by default the
 *   wheel holds N distinct deadlines and no two schedules share a
 *   compiled cron: the worst case for memory. axd
 *   starts twice: first over the bare versions (it writes every
 *   schedules row), then again (nothing to write: an ordinary restart).
 *   Each start prints the time from exec to every schedule armed (the
 *   time detector's "loader pass complete" line) and axd's RSS once it is
 *   stable for 5 s; the peak RSS (VmHWM) is the reported rss_mb.
 * The peak RSS of axd is read from /proc/PID/status before each stop.
 *
 * Progress goes to stderr; stdout holds the result only (one JSON object
 * with --json).
 */
#include "cmd_bench.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"
#include "clock.h"
#include "cmd_dag.h"
#include "cmd_db.h"
#include "log.h"
#include "stack.h"

typedef struct bench {
	ax_bench_opts   o;
	ax_stack_home   h; /* h.home, h.w.dsn */
	PGconn         *db;
	ax_stack        st;
	ax_bench_result r;
	const char     *log_level; /* of the children; NULL: warn */
} bench;

static int
fail(const char *what, ax_err rv)
{
	const char *d = ax_err_detail();
	fprintf(stderr, "axctl bench: %s: %s\n", what,
	        d[0] != '\0' ? d : ax_strerror(rv));
	return 1;
}

static int
sql(bench *b, const char *q)
{
	PGresult *r  = PQexec(b->db, q);
	int       ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
	    PQresultStatus(r) == PGRES_TUPLES_OK;
	if (!ok)
		fprintf(stderr, "axctl bench: %s\n%s\n", PQerrorMessage(b->db),
		        q);
	PQclear(r);
	return ok ? 0 : 1;
}

static double
sql_num(bench *b, const char *q)
{
	PGresult *r = PQexec(b->db, q);
	double    v = -1;
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 &&
	    !PQgetisnull(r, 0, 0))
		v = strtod(PQgetvalue(r, 0, 0), NULL);
	PQclear(r);
	return v;
}

/* VmHWM or VmRSS of pid in MB; -1 when unreadable. */
static double
rss_mb(pid_t pid, const char *key)
{
	char  path[64], line[256];
	FILE *f;
	long  kb = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, strlen(key)) == 0)
			kb = strtol(line + strlen(key) + 1, NULL, 10);
	fclose(f);
	return kb < 0 ? -1 : (double) kb / 1024.0;
}

/* CPU time every process of the machine has used (/proc/stat: user, nice,
 * system, irq, softirq, steal), in microseconds; -1 when unreadable. */
static double
machine_cpu_us(void)
{
	unsigned long long v[8] = { 0 };
	FILE              *f    = fopen("/proc/stat", "r");
	int                n;
	long               hz = sysconf(_SC_CLK_TCK);

	if (f == NULL)
		return -1;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
	           &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n != 8 || hz <= 0)
		return -1;
	/* v[3] idle and v[4] iowait are not work */
	return (double) (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * 1e6 /
	    (double) hz;
}

static int
fresh_tables(bench *b)
{
	/* Cascades to versions, schedules, runs, instances and attempts. */
	return sql(b, "TRUNCATE dags, task_templates CASCADE");
}

static int
start_stack(bench *b, int workers)
{
	ax_stack_opts so = {
		.home         = b->h.home,
		.dsn          = b->h.w.dsn,
		.workers      = workers,
		.worker_slots = b->o.slots,
		.log_level    = b->log_level ? b->log_level : "warn",
	};
	ax_err rv;

	if ((rv = ax_stack_init(&b->st, &so)) != AX_OK)
		return fail("home", rv);
	if ((rv = ax_stack_start_axd(&b->st, 120 * AX_USEC_PER_SEC)) != AX_OK)
		return fail("axd", rv);
	if ((rv = ax_stack_start_workers(&b->st)) != AX_OK)
		return fail("workers", rv);
	return 0;
}

static void
stop_stack(bench *b)
{
	double hwm = rss_mb(b->st.axd.pid, "VmHWM:");
	if (hwm > b->r.rss_mb)
		b->r.rss_mb = hwm;
	ax_stack_stop(&b->st, 10 * AX_USEC_PER_SEC);
	ax_stack_fini(&b->st);
}

/* 0 while every child runs; 1 (reported) when one died. */
static int
children_dead(bench *b)
{
	ax_proc *p = ax_stack_check(&b->st);
	char     how[96], tail[2048];

	if (p == NULL)
		return 0;
	fprintf(stderr, "axctl bench: %s %s; end of %s:\n%s\n", p->name,
	        ax_proc_describe(p, how, sizeof(how)), p->log_path,
	        ax_proc_log_tail(p->log_path, 15, tail, sizeof(tail)));
	return 1;
}

/* ---- latency ------------------------------------------------------------
 */

static int
write_latency_dags(bench *b, const char *dir)
{
	char  path[PATH_MAX + 64], doc[512];
	FILE *f = NULL;

	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return fail(
		    "mkdir",
		    ax_err_set(AX_EIO, "%s: %s", dir, strerror(errno)));
	for (int i = 0; i < b->o.schedules; i++) {
		if (i % 1000 == 0) {
			if (f != NULL)
				fclose(f);
			snprintf(path, sizeof(path), "%s/lat-%04d.yaml", dir,
			         i / 1000);
			if ((f = fopen(path, "w")) == NULL)
				return fail("write",
				            ax_err_set(AX_EIO, "%s: %s", path,
				                       strerror(errno)));
		} else {
			fputs("---\n", f);
		}
		ax_bench_yaml_latency(doc, sizeof(doc), i, b->o.schedules,
		                      b->o.process);
		fputs(doc, f);
	}
	if (f != NULL)
		fclose(f);
	return 0;
}

/* Reads one column of ms values into a sorted array. */
static double *
fetch_ms(PGresult *r, int col, size_t *n)
{
	double *v = malloc(((size_t) PQntuples(r) + 1) * sizeof(double));
	*n        = 0;
	if (v == NULL)
		return NULL;
	for (int i = 0; i < PQntuples(r); i++)
		if (!PQgetisnull(r, i, col))
			v[(*n)++] = strtod(PQgetvalue(r, i, col), NULL);
	ax_bench_sort(v, *n);
	return v;
}

static int
measure_latency(bench *b, int64_t from_us)
{
	char      q[512];
	PGresult *r;
	size_t    n;
	double   *v;

	snprintf(q, sizeof(q),
	         "SELECT ax_us(started_at) - ax_us(due_at), "
	         "ax_us(dispatched_at) - ax_us(due_at), "
	         "ax_us(started_at) - ax_us(dispatched_at) FROM attempts "
	         "WHERE due_at >= ax_ts(%" PRId64 ") AND started_at IS NOT "
	         "NULL",
	         from_us);
	r = PQexec(b->db, q);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "axctl bench: %s", PQerrorMessage(b->db));
		PQclear(r);
		return 1;
	}
	b->r.samples = PQntuples(r);
	if ((v = fetch_ms(r, 0, &n)) != NULL && n > 0) {
		b->r.p50_ms = ax_bench_percentile(v, n, 50) / 1000.0;
		b->r.p99_ms = ax_bench_percentile(v, n, 99) / 1000.0;
		b->r.max_ms = v[n - 1] / 1000.0;
	}
	free(v);
	if ((v = fetch_ms(r, 1, &n)) != NULL && n > 0)
		b->r.decision_p99_ms = ax_bench_percentile(v, n, 99) / 1000.0;
	free(v);
	if ((v = fetch_ms(r, 2, &n)) != NULL && n > 0)
		b->r.env_ready_p99_ms = ax_bench_percentile(v, n, 99) / 1000.0;
	free(v);
	PQclear(r);
	return 0;
}

static int
run_latency(bench *b)
{
	char    dir[PATH_MAX + 32];
	int64_t t0, from;
	double  expected;

	fprintf(stderr, "latency: generating and loading %d schedules...\n",
	        b->o.schedules);
	snprintf(dir, sizeof(dir), "%s/bench-latency", b->h.home);
	if (fresh_tables(b) || write_latency_dags(b, dir))
		return 1;
	t0 = ax_clock_mono_us();
	if (ax_stack_load_dags(dir, b->h.w.dsn) != 0) {
		fprintf(stderr, "axctl bench: loading %s failed\n", dir);
		return 1;
	}
	fprintf(stderr,
	        "latency: loaded in %.1f s; starting axd and %d "
	        "workers\n",
	        (double) (ax_clock_mono_us() - t0) / 1e6, b->o.workers);
	if (start_stack(b, b->o.workers)) {
		stop_stack(b);
		return 1;
	}
	from =
	    (int64_t) sql_num(b, "SELECT ax_us(now())") + 2 * AX_USEC_PER_SEC;
	fprintf(stderr, "latency: measuring for %d s\n", b->o.duration);
	for (int s = 0; s < b->o.duration; s++) {
		if (children_dead(b)) {
			stop_stack(b);
			return 1;
		}
		ax_clock_sleep_us(AX_USEC_PER_SEC);
	}
	/* Attempts due in the last seconds may still be on their way. */
	ax_clock_sleep_us(2 * AX_USEC_PER_SEC);
	stop_stack(b);
	if (measure_latency(b, from))
		return 1;
	expected = (double) b->o.schedules * (b->o.duration - 2) / 60.0;
	fprintf(stderr,
	        "latency: %ld attempts measured (about %.0f fires "
	        "expected)\n",
	        b->r.samples, expected);
	return 0;
}

/* ---- throughput ---------------------------------------------------------
 */

static int
run_throughput(bench *b)
{
	char    dir[PATH_MAX + 32], path[PATH_MAX + 64], q[256];
	FILE   *f;
	int64_t deadline;
	double  done = 0, secs, cpu0, cpu1 = -1;

	fprintf(stderr, "throughput: %d instances\n", b->o.instances);
	snprintf(dir, sizeof(dir), "%s/bench-throughput", b->h.home);
	snprintf(path, sizeof(path), "%s/tp.yaml", dir);
	if (fresh_tables(b))
		return 1;
	if ((mkdir(dir, 0755) != 0 && errno != EEXIST) ||
	    (f = fopen(path, "w")) == NULL)
		return fail(
		    "write",
		    ax_err_set(AX_EIO, "%s: %s", path, strerror(errno)));
	ax_bench_yaml_throughput(f, b->o.instances, b->o.process);
	fclose(f);
	if (ax_stack_load_dags(dir, b->h.w.dsn) != 0)
		return 1;
	if (start_stack(b, b->o.workers)) {
		stop_stack(b);
		return 1;
	}
	cpu0 = machine_cpu_us();
	if (sql(b,
	        "SELECT pg_notify('ax_control', "
	        "'{\"op\":\"trigger\",\"dag\":\"bench.tp\"}')")) {
		stop_stack(b);
		return 1;
	}
	/* Generous: 50 instances/s at least, 60 s minimum. */
	deadline =
	    ax_clock_mono_us() + (60 + b->o.instances / 50) * AX_USEC_PER_SEC;
	while (done < b->o.instances) {
		if (children_dead(b) || ax_clock_mono_us() > deadline) {
			if (ax_clock_mono_us() > deadline)
				fprintf(
				    stderr,
				    "axctl bench: only %.0f of %d instances "
				    "succeeded in time\n",
				    done, b->o.instances);
			stop_stack(b);
			return 1;
		}
		ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
		/* The run ends after its last instance: poll that one row.
		 * Counting SUCCESS rows at every poll scanned the whole table
		 * (about 100 ms a poll at 60,000 rows, seen with auto_explain)
		 * and slowed down what it measured. */
		if (sql_num(b,
		            "SELECT count(*) FROM dag_runs WHERE state IN "
		            "('SUCCESS', 'FAILED', 'CANCELED')") < 1)
			continue;
		cpu1 = machine_cpu_us();
		done = sql_num(b,
		               "SELECT count(*) FROM task_instances WHERE "
		               "state = 'SUCCESS'");
		if (done < b->o.instances) {
			fprintf(stderr,
			        "axctl bench: the run ended with %.0f of %d "
			        "instances succeeded\n",
			        done, b->o.instances);
			stop_stack(b);
			return 1;
		}
	}
	stop_stack(b);
	snprintf(q, sizeof(q),
	         "SELECT extract(epoch FROM (SELECT max(ended_at) FROM "
	         "task_instances) - (SELECT min(created_at) FROM dag_runs))");
	secs = sql_num(b, q);
	if (secs > 0)
		b->r.throughput_per_s = b->o.instances / secs;
	if (cpu0 >= 0 && cpu1 >= cpu0)
		b->r.cpu_us_per_instance = (cpu1 - cpu0) / b->o.instances;
	fprintf(stderr, "throughput: %d instances in %.2f s\n", b->o.instances,
	        secs);
	return 0;
}

/* ---- timers -------------------------------------------------------------
 */

/*
 * Waits until axd's log holds needle (appended after offset); returns the
 * seconds since t0, or -1 when axd died or deadline passed.
 */
static double
wait_log(bench *b, const char *needle, long offset, int64_t t0,
         int64_t deadline)
{
	char line[4096];

	while (ax_clock_mono_us() < deadline) {
		FILE *f   = fopen(b->st.axd.log_path, "r");
		int   hit = 0;
		if (f != NULL) {
			if (fseek(f, offset, SEEK_SET) == 0)
				while (!hit && fgets(line, sizeof(line), f))
					hit = strstr(line, needle) != NULL;
			fclose(f);
		}
		if (hit)
			return (double) (ax_clock_mono_us() - t0) / 1e6;
		if (children_dead(b))
			return -1;
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	}
	fprintf(stderr, "axctl bench: no '%s' in %s in time\n", needle,
	        b->st.axd.log_path);
	return -1;
}

static long
file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (long) sb.st_size : 0;
}

/* One start of axd over the timers: time to all armed, stable RSS. */
static int
timers_start(bench *b, const char *what)
{
	char    log[PATH_MAX + 32];
	double  armed, last = -1, cur;
	int     stable = 0;
	long    off;
	int64_t t0;

	snprintf(log, sizeof(log), "%s/logs/axd.log", b->h.home);
	off = file_size(log);
	t0  = ax_clock_mono_us();
	if (start_stack(b, 0)) {
		stop_stack(b);
		return 1;
	}
	armed = wait_log(b, "loader pass complete", off, t0,
	                 t0 + 900 * AX_USEC_PER_SEC);
	if (armed < 0) {
		stop_stack(b);
		return 1;
	}
	/* then until the RSS is flat (the registry warms up meanwhile) */
	for (int s = 0; s < 300 && stable < 5; s++) {
		if (children_dead(b)) {
			stop_stack(b);
			return 1;
		}
		ax_clock_sleep_us(AX_USEC_PER_SEC);
		cur    = rss_mb(b->st.axd.pid, "VmRSS:");
		stable = (last > 0 && cur >= 0 && cur < last * 1.01 &&
		          cur > last * 0.99)
		    ? stable + 1
		    : 0;
		last   = cur;
	}
	fprintf(stderr,
	        "timers: %s: %d schedules armed %.1f s after axd started; "
	        "axd RSS %.1f MB, peak %.1f MB\n",
	        what, b->o.timers, armed, last,
	        rss_mb(b->st.axd.pid, "VmHWM:"));
	stop_stack(b);
	return 0;
}

static int
run_timers(bench *b)
{
	char    dir[PATH_MAX + 32], path[PATH_MAX + 64], q[4096];
	FILE   *f;
	int64_t t0;

	if (b->o.timer_specs > 0)
		fprintf(stderr,
		        "timers: arming %d monthly schedules over %d distinct "
		        "instants\n",
		        b->o.timers, b->o.timer_specs);
	else
		fprintf(stderr,
		        "timers: arming %d schedules, each monthly at its own "
		        "instant\n",
		        b->o.timers);
	snprintf(dir, sizeof(dir), "%s/bench-timers", b->h.home);
	snprintf(path, sizeof(path), "%s/timer.yaml", dir);
	if (fresh_tables(b))
		return 1;
	if ((mkdir(dir, 0755) != 0 && errno != EEXIST) ||
	    (f = fopen(path, "w")) == NULL)
		return fail(
		    "write",
		    ax_err_set(AX_EIO, "%s: %s", path, strerror(errno)));
	fputs("kind: DAG\nname: bench.timer.0000000\n"
	      "schedule: {cron: \"0 0 0 1 * ?\", timezone: UTC}\n"
	      "tasks:\n  - {name: t, type: noop, command: \"/bin/true\"}\n",
	      f);
	fclose(f);
	if (ax_stack_load_dags(dir, b->h.w.dsn) != 0)
		return 1;
	t0 = ax_clock_mono_us();
	/* clone g: cron "S M H D * ?" from k = g mod --timer-specs (g when
	 * 0), in the YAML and the JSON */
	snprintf(
	    q, sizeof(q),
	    "BEGIN;"
	    "INSERT INTO dags (name) SELECT 'bench.timer.' || "
	    "lpad(g::text, 7, '0') FROM generate_series(1, %d) g;"
	    "INSERT INTO dag_versions (dag_id, version, content_hash, yaml, "
	    "definition, source) SELECT d.id, 1, "
	    "encode(sha256(convert_to(d.name, 'UTF8')), 'hex'), "
	    "replace(replace(v.yaml, 'bench.timer.0000000', d.name), "
	    "'0 0 0 1 * ?', c.cron), "
	    "jsonb_set(jsonb_set(v.definition, '{name}', to_jsonb(d.name)), "
	    "'{schedule,cron}', to_jsonb(c.cron)), 'bench' "
	    "FROM dags d CROSS JOIN LATERAL (SELECT substr(d.name, 13)::int "
	    "%% %d AS g) n CROSS JOIN LATERAL (SELECT format('%%s %%s %%s %%s "
	    "* ?', "
	    "n.g %% 60, n.g / 60 %% 60, n.g / 3600 %% 24, "
	    "1 + n.g / 86400 %% 28) AS cron) c, "
	    "dag_versions v JOIN dags d0 ON d0.active_version_id "
	    "= v.id AND d0.name = 'bench.timer.0000000' "
	    "WHERE d.active_version_id IS NULL;"
	    "UPDATE dags d SET active_version_id = v.id FROM dag_versions v "
	    "WHERE v.dag_id = d.id AND d.active_version_id IS NULL;"
	    "COMMIT;",
	    b->o.timers - 1,
	    b->o.timer_specs > 0 ? b->o.timer_specs : b->o.timers);
	if (sql(b, q))
		return 1;
	fprintf(stderr,
	        "timers: %d DAGs inserted in %.1f s (%.0f distinct crons); "
	        "starting axd\n",
	        b->o.timers, (double) (ax_clock_mono_us() - t0) / 1e6,
	        sql_num(b,
	                "SELECT count(DISTINCT schedule_expr) FROM "
	                "dag_versions"));
	b->log_level = "info"; /* the time detector's pass line */
	if (timers_start(b, "first start (writes every schedules row)") ||
	    timers_start(b, "restart"))
		return 1;
	fprintf(stderr,
	        "timers: %.0f schedules rows, %.0f distinct next fire "
	        "instants\n",
	        sql_num(b, "SELECT count(*) FROM schedules"),
	        sql_num(b,
	                "SELECT count(DISTINCT next_fire_at) FROM "
	                "schedules"));
	return 0;
}

/* ---- main -----------------------------------------------------------------
 */

static int
setup(bench *b)
{
	ax_err rv;

	fprintf(stderr, "bench: starting PostgreSQL\n");
	if ((rv = ax_stack_home_open(&b->h, b->o.home, "bench")) != AX_OK)
		return fail("database", rv);
	fprintf(stderr, "bench: home %s\n", b->h.home);
	b->db = PQconnectdb(b->h.w.dsn);
	if (PQstatus(b->db) != CONNECTION_OK) {
		fprintf(stderr, "axctl bench: %s", PQerrorMessage(b->db));
		return 1;
	}
	return sql(b, "SET client_min_messages = warning");
}

static void
teardown(bench *b)
{
	PQfinish(b->db);
	ax_stack_home_close(&b->h);
}

static void
print_human(const bench *b)
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
	if (r->rss_mb >= 0)
		printf("axd peak RSS: %.1f MB\n", r->rss_mb);
}

int
ax_cmd_bench(int argc, char **argv)
{
	bench b;
	int   rc;

	memset(&b, 0, sizeof(b));
	if ((rc = ax_bench_parse(argc, argv, &b.o, stdout, stderr)) != 0)
		return rc == 1 ? 0 : 2;
	ax_log_init(AX_LOG_WARN, 2);
	signal(SIGPIPE, SIG_IGN);
	ax_bench_result_init(&b.r);
	rc = setup(&b);
	if (rc == 0 &&
	    (b.o.scenario == AX_BENCH_ALL || b.o.scenario == AX_BENCH_LATENCY))
		rc = run_latency(&b);
	if (rc == 0 &&
	    (b.o.scenario == AX_BENCH_ALL ||
	     b.o.scenario == AX_BENCH_THROUGHPUT))
		rc = run_throughput(&b);
	if (rc == 0 && b.o.scenario == AX_BENCH_TIMERS)
		rc = run_timers(&b);
	teardown(&b);
	if (rc != 0)
		return 1;
	if (b.o.json)
		ax_bench_json(stdout, &b.r);
	else
		print_human(&b);
	return 0;
}
