/*
 * bench_util.c - options, percentiles, YAML and JSON of `axctl bench`
 * (see bench_util.h).
 */
#include "bench_util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	int         in_all;
} scenarios[AX_BENCH_N_SCENARIOS] = {
	[AX_BENCH_ALL]        = { "all", 0 },
	[AX_BENCH_LATENCY]    = { "latency", 1 },
	[AX_BENCH_THROUGHPUT] = { "throughput", 1 },
	[AX_BENCH_CHAIN]      = { "chain", 1 },
	[AX_BENCH_LAYERED]    = { "layered", 1 },
	[AX_BENCH_TIMERS]     = { "timers", 0 },
	[AX_BENCH_SCALE]      = { "scale", 0 },
	[AX_BENCH_STORM]      = { "storm", 0 },
};

const char *
ax_bench_scenario_name(ax_bench_scenario s)
{
	return (int) s >= 0 && s < AX_BENCH_N_SCENARIOS ? scenarios[s].name
	                                                : NULL;
}

int
ax_bench_in_all(ax_bench_scenario s)
{
	return (int) s >= 0 && s < AX_BENCH_N_SCENARIOS && scenarios[s].in_all;
}

void
ax_bench_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axctl bench [--home DIR] [--scenario S] [--schedules N]\n"
	    "                   [--instances N] [--runs N] [--length N]\n"
	    "                   [--layers N] [--width N] [--timers N]\n"
	    "                   [--timer-specs N] [--dags N] [--history N]\n"
	    "                   [--duration S]\n"
	    "                   [--executor noop|process] [--workers N]\n"
	    "                   [--slots N] [--json]\n"
	    "\n"
	    "Measures the scheduler on this machine with its own PostgreSQL,\n"
	    "axd and workers. Every figure comes from the timestamps the\n"
	    "pipeline persisted (attempts, task_instances, dag_runs).\n"
	    "\n"
	    "  --scenario S     all (default: latency, throughput, chain,\n"
	    "                   layered) | latency | throughput | chain |\n"
	    "                   layered | timers | scale | storm\n"
	    "      latency:     N seconds-level schedules (`S * * * * ?`, "
	    "spread\n"
	    "                   over the minute) run for --duration; "
	    "scheduling\n"
	    "                   latency started_at - due_at (P50, P99, max),\n"
	    "                   decision dispatched_at - due_at and "
	    "env-ready\n"
	    "                   started_at - dispatched_at (P99)\n"
	    "      throughput:  one triggered run of N independent "
	    "instances;\n"
	    "                   instances per second to a persisted SUCCESS;\n"
	    "                   with --history, on top of that history\n"
	    "      chain:       one DAG of --length tasks in a line, "
	    "triggered\n"
	    "                   --runs times one after the other; per edge\n"
	    "                   the upstream's SUCCESS persisted to the\n"
	    "                   downstream's start (P50, P99, max) and the\n"
	    "                   run's makespan\n"
	    "      layered:     one DAG of --layers layers of --width\n"
	    "                   instances, each waiting for every instance\n"
	    "                   of the layer before (Dask's fully connected\n"
	    "                   layers); instances per second over the run\n"
	    "                   and the ratio to Dask's 707/s\n"
	    "      timers:      N monthly schedules armed, each at its own\n"
	    "                   instant; time to arm them and RSS of axd\n"
	    "      scale:       --dags DAGs and --history instances of\n"
	    "                   history built in SQL; axd exec -> first\n"
	    "                   on-time fire (first start and restart), its\n"
	    "                   RSS, ax-api list pages and /metrics (P50,\n"
	    "                   P99 of 40 requests each)\n"
	    "      storm:       a P0 stream (1/s, 20 s) plus a burst of 20x\n"
	    "                   as many preemptible P3 instances on one\n"
	    "                   worker of at most 8 slots, alone, with\n"
	    "                   preemption off, on, on with shaving:\n"
	    "                   due->start per tier,\n"
	    "                   the burst's makespan, preemptions, "
	    "starving\n");
	fprintf(
	    f,
	    "  --schedules N    latency schedules (default 10000)\n"
	    "  --instances N    throughput instances (default 20000)\n"
	    "  --runs N         chain runs (default 1)\n"
	    "  --length N       chain tasks (default 100)\n"
	    "  --layers N       layered layers (default 100)\n"
	    "  --width N        layered instances per layer, 1-1024 "
	    "(default\n"
	    "                   100)\n"
	    "  --timers N       armed timers (default 1000000)\n"
	    "  --timer-specs N  distinct schedules among the timers (timer g\n"
	    "                   uses schedule g mod N); 0: every timer its\n"
	    "                   own (default)\n"
	    "  --dags N         scale: DAGs (default 100000)\n"
	    "  --history N      scale: task instances of history, each with\n"
	    "                   an attempt and an event (default 10000000;\n"
	    "                   rounded down to a multiple of 10; 0: none);\n"
	    "                   throughput: as many built before the run\n"
	    "                   (default none)\n"
	    "  --duration S     seconds of the latency run (default 120)\n"
	    "  --executor E     noop (in the worker, default) or process\n"
	    "                   (/bin/true through bash); every scenario\n"
	    "                   but timers\n"
	    "  --workers N      ax-worker processes (default 2)\n"
	    "  --slots N        slots per worker (default 64)\n"
	    "  --home DIR       AX home to use (default: a temp dir, "
	    "removed)\n"
	    "  --json           print one JSON object: p50_ms, p99_ms, "
	    "max_ms,\n"
	    "                   decision_p99_ms, env_ready_p99_ms\n"
	    "                   (latency), throughput_per_s,\n"
	    "                   cpu_us_per_instance (CPU of the whole\n"
	    "                   machine per instance in the throughput run),\n"
	    "                   ax_cpu_us_per_instance (the part axd and\n"
	    "                   the workers used themselves),\n"
	    "                   its writes per instance counted by\n"
	    "                   PostgreSQL (wal_bytes_, ti_versions_,\n"
	    "                   attempt_versions_, event_rows_,\n"
	    "                   run_versions_, nonhot_updates_per_instance:\n"
	    "                   figures that do not drift with the\n"
	    "                   machine's speed),\n"
	    "                   rss_mb (axd's peak), samples; then\n"
	    "                   chain_edge_p50_ms, chain_edge_p99_ms,\n"
	    "                   chain_edge_max_ms, chain_edges,\n"
	    "                   chain_makespan_ms (median over the runs),\n"
	    "                   chain_makespan_max_ms; layered_per_s,\n"
	    "                   layered_makespan_s, layered_instances,\n"
	    "                   layered_vs_dask (layered_per_s / 707) when\n"
	    "                   those ran; null: not measured\n"
	    "\n"
	    "Exit status: 0 measured, 1 failure or interrupted, 2 usage "
	    "error.\n");
}

static int
int_val(const char *name, const char *v, int lo, int hi, int *out, FILE *err)
{
	char *end;
	long  n;

	errno = 0;
	n     = strtol(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || n < lo || n > hi) {
		fprintf(err,
		        "axctl bench: %s must be an integer from %d to %d, "
		        "not '%s'\n",
		        name, lo, hi, v);
		return -1;
	}
	*out = (int) n;
	return 0;
}

/* Sets o from option name=value; 0 ok, 2 usage error. */
static int
set_opt(ax_bench_opts *o, const char *name, const char *v, FILE *err)
{
	if (strcmp(name, "--home") == 0) {
		o->home = v;
	} else if (strcmp(name, "--scenario") == 0) {
		for (int k = 0; k < AX_BENCH_N_SCENARIOS; k++)
			if (strcmp(v, scenarios[k].name) == 0) {
				o->scenario = (ax_bench_scenario) k;
				return 0;
			}
		fprintf(err, "axctl bench: --scenario must be");
		for (int k = 1; k < AX_BENCH_N_SCENARIOS; k++)
			fprintf(err, "%s %s", k == 1 ? "" : ",",
			        scenarios[k].name);
		fprintf(err, " or all, not '%s'\n", v);
		return 2;
	} else if (strcmp(name, "--executor") == 0) {
		if (strcmp(v, "noop") != 0 && strcmp(v, "process") != 0) {
			fprintf(err,
			        "axctl bench: --executor must be noop or "
			        "process, not '%s'\n",
			        v);
			return 2;
		}
		o->process = v[0] == 'p';
	} else if (strcmp(name, "--schedules") == 0) {
		return int_val(name, v, 1, 1000000, &o->schedules, err) ? 2
		                                                        : 0;
	} else if (strcmp(name, "--instances") == 0) {
		return int_val(name, v, 1, 5000000, &o->instances, err) ? 2
		                                                        : 0;
	} else if (strcmp(name, "--timers") == 0) {
		return int_val(name, v, 1, 10000000, &o->timers, err) ? 2 : 0;
	} else if (strcmp(name, "--timer-specs") == 0) {
		return int_val(name, v, 0, 10000000, &o->timer_specs, err) ? 2
		                                                           : 0;
	} else if (strcmp(name, "--dags") == 0) {
		return int_val(name, v, 1, 10000000, &o->dags, err) ? 2 : 0;
	} else if (strcmp(name, "--history") == 0) {
		o->history_set = 1;
		return int_val(name, v, 0, 200000000, &o->history, err) ? 2
		                                                        : 0;
	} else if (strcmp(name, "--duration") == 0) {
		return int_val(name, v, 1, 86400, &o->duration, err) ? 2 : 0;
	} else if (strcmp(name, "--runs") == 0) {
		return int_val(name, v, 1, 10000, &o->runs, err) ? 2 : 0;
	} else if (strcmp(name, "--length") == 0) {
		/* a DAG holds at most 5000 tasks (dag.h max_tasks) */
		return int_val(name, v, 2, 5000, &o->length, err) ? 2 : 0;
	} else if (strcmp(name, "--layers") == 0) {
		return int_val(name, v, 2, 5000, &o->layers, err) ? 2 : 0;
	} else if (strcmp(name, "--width") == 0) {
		/* a task has at most 1024 shards (docs/dag-format.md) */
		return int_val(name, v, 1, 1024, &o->width, err) ? 2 : 0;
	} else if (strcmp(name, "--workers") == 0) {
		return int_val(name, v, 1, 64, &o->workers, err) ? 2 : 0;
	} else if (strcmp(name, "--slots") == 0) {
		return int_val(name, v, 1, 100000, &o->slots, err) ? 2 : 0;
	} else {
		fprintf(err,
		        "axctl bench: unknown option '%s'; run `axctl bench "
		        "--help`\n",
		        name);
		return 2;
	}
	return 0;
}

static int
known(const char *name)
{
	static const char *names[] = {
		"--home",      "--scenario", "--executor",    "--schedules",
		"--instances", "--timers",   "--timer-specs", "--duration",
		"--workers",   "--slots",    "--runs",        "--length",
		"--layers",    "--width",    "--dags",        "--history"
	};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		if (strcmp(name, names[k]) == 0)
			return 1;
	return 0;
}

int
ax_bench_parse(int argc, char **argv, ax_bench_opts *o, FILE *out, FILE *err)
{
	memset(o, 0, sizeof(*o));
	o->scenario  = AX_BENCH_ALL;
	o->schedules = 10000;
	o->instances = 20000;
	o->timers    = 1000000;
	o->dags      = 100000;
	o->history   = 10000000;
	o->duration  = 120;
	o->runs      = 1;
	o->length    = 100;
	o->layers    = 100;
	o->width     = 100;
	o->workers   = 2;
	o->slots     = 64;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq, *v = NULL;
		char        name[32];
		int         rc;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			ax_bench_usage(out);
			return 1;
		}
		if (strcmp(a, "--json") == 0) {
			o->json = 1;
			continue;
		}
		eq = strchr(a, '=');
		if (strncmp(a, "--", 2) != 0 ||
		    (size_t) (eq != NULL ? eq - a : (long) strlen(a)) >=
		        sizeof(name)) {
			fprintf(err,
			        "axctl bench: unexpected argument '%s'; run "
			        "`axctl bench --help`\n",
			        a);
			return 2;
		}
		snprintf(name, sizeof(name), "%.*s",
		         (int) (eq != NULL ? eq - a : (long) strlen(a)), a);
		if (eq != NULL)
			v = eq + 1;
		else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
			v = argv[++i];
		if (v == NULL || v[0] == '\0') {
			if (!known(name))
				return set_opt(o, name, "", err);
			fprintf(err, "axctl bench: %s needs a value\n", name);
			return 2;
		}
		if ((rc = set_opt(o, name, v, err)) != 0)
			return rc;
	}
	return 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;
	return (x > y) - (x < y);
}

void
ax_bench_sort(double *v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof(double), cmp_double);
}

double
ax_bench_percentile(const double *sorted, size_t n, double p)
{
	double rank;
	size_t k;

	if (n == 0)
		return 0;
	if (p <= 0)
		return sorted[0];
	rank = ceil(p / 100.0 * (double) n - 1e-9);
	k    = rank < 1 ? 1 : (size_t) rank;
	if (k > n)
		k = n;
	return sorted[k - 1];
}

int
ax_bench_second(int i, int n)
{
	if (n <= 0)
		return 0;
	return (int) (((long long) i * 60) / n) % 60;
}

int
ax_bench_yaml_latency(char *buf, size_t len, int i, int n, int process)
{
	return snprintf(
	    buf, len,
	    "kind: DAG\nname: bench.lat.%07d\n"
	    "schedule: {cron: \"%d * * * * ?\", timezone: UTC}\n"
	    "concurrency: {max_active_runs: 10, policy: parallel}\n"
	    "tasks:\n  - {name: t, type: %s, command: \"/bin/true\"}\n",
	    i, ax_bench_second(i, n), process ? "bash" : "noop");
}

int
ax_bench_yaml_throughput(FILE *f, int instances, int process)
{
	int shards = instances < 1000 ? instances : 1000;
	int tasks  = (instances + shards - 1) / shards;

	fprintf(f,
	        "kind: DAG\nname: bench.tp\n"
	        "concurrency: {max_active_runs: 1, policy: parallel}\n"
	        "defaults: {type: %s}\ntasks:\n",
	        process ? "bash" : "noop");
	for (int t = 0; t < tasks; t++) {
		int left = instances - t * shards;
		fprintf(
		    f, "  - {name: t%d, command: \"/bin/true\", shards: %d}\n",
		    t, left < shards ? left : shards);
	}
	return tasks;
}

void
ax_bench_yaml_chain(FILE *f, int length, int process)
{
	fprintf(f,
	        "kind: DAG\nname: bench.chain\n"
	        "concurrency: {max_active_runs: 1, policy: parallel}\n"
	        "defaults: {type: %s}\ntasks:\n",
	        process ? "bash" : "noop");
	fprintf(f, "  - {name: t1, command: \"/bin/true\"}\n");
	for (int t = 2; t <= length; t++)
		fprintf(f,
		        "  - {name: t%d, command: \"/bin/true\", depends_on: "
		        "[t%d]}\n",
		        t, t - 1);
}

void
ax_bench_yaml_layered(FILE *f, int layers, int width, int process)
{
	fprintf(f,
	        "kind: DAG\nname: bench.layered\n"
	        "concurrency: {max_active_runs: 1, policy: parallel}\n"
	        "defaults: {type: %s}\ntasks:\n",
	        process ? "bash" : "noop");
	fprintf(f, "  - {name: l1, command: \"/bin/true\", shards: %d}\n",
	        width);
	for (int l = 2; l <= layers; l++)
		fprintf(f,
		        "  - {name: l%d, command: \"/bin/true\", shards: %d, "
		        "depends_on: [l%d]}\n",
		        l, width, l - 1);
}

void
ax_bench_result_init(ax_bench_result *r)
{
	r->p50_ms = r->p99_ms = r->max_ms = -1;
	r->decision_p99_ms = r->env_ready_p99_ms = -1;
	r->throughput_per_s = r->rss_mb = -1;
	r->cpu_us_per_instance          = -1;
	r->samples                      = 0;
	r->n_extra                      = 0;
	r->human[0]                     = '\0';
}

int
ax_bench_put(ax_bench_result *r, const char *key, double v)
{
	size_t len = strlen(key);
	int    k;

	if (len == 0 || len >= sizeof(r->extra[0].key) ||
	    strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789_") != len)
		return -1;
	for (k = 0; k < r->n_extra; k++)
		if (strcmp(r->extra[k].key, key) == 0)
			break;
	if (k == r->n_extra) {
		if (k == AX_BENCH_EXTRA_MAX)
			return -1;
		memcpy(r->extra[k].key, key, len + 1);
		r->n_extra++;
	}
	r->extra[k].v = v;
	return 0;
}

double
ax_bench_get(const ax_bench_result *r, const char *key)
{
	for (int k = 0; k < r->n_extra; k++)
		if (strcmp(r->extra[k].key, key) == 0)
			return r->extra[k].v;
	return -1;
}

void
ax_bench_say(ax_bench_result *r, const char *fmt, ...)
{
	size_t  used = strlen(r->human), room = sizeof(r->human) - used;
	va_list ap;
	int     n;

	if (room < 2)
		return;
	va_start(ap, fmt);
	n = vsnprintf(r->human + used, room - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		r->human[used] = '\0';
	else
		strcat(r->human, "\n");
}

static void
num(FILE *f, const char *key, double v, int last)
{
	if (v < 0)
		fprintf(f, "\"%s\": null%s", key, last ? "" : ", ");
	else
		fprintf(f, "\"%s\": %.3f%s", key, v, last ? "" : ", ");
}

void
ax_bench_json(FILE *f, const ax_bench_result *r)
{
	fputc('{', f);
	num(f, "p50_ms", r->p50_ms, 0);
	num(f, "p99_ms", r->p99_ms, 0);
	num(f, "max_ms", r->max_ms, 0);
	num(f, "decision_p99_ms", r->decision_p99_ms, 0);
	num(f, "env_ready_p99_ms", r->env_ready_p99_ms, 0);
	num(f, "throughput_per_s", r->throughput_per_s, 0);
	num(f, "rss_mb", r->rss_mb, 0);
	num(f, "cpu_us_per_instance", r->cpu_us_per_instance, 0);
	fprintf(f, "\"samples\": %ld", r->samples);
	for (int k = 0; k < r->n_extra; k++) {
		fputs(", ", f);
		num(f, r->extra[k].key, r->extra[k].v, 1);
	}
	fputs("}\n", f);
}
