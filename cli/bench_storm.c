/*
 * bench_storm.c - `axctl bench --scenario storm`: a steady P0 stream plus
 * a top-of-the-hour burst of 20 times as many P3 instances on the same
 * worker group, with preemption off and on, against the P0 stream alone.
 *
 * Shape: one worker of at most 8 slots (--slots, capped so that the
 * burst does not fit), bash tasks. The P0 DAG fires every second for
 * STORM_STREAM_S seconds (one instance each, `true`); 5 s in, one manual
 * run of the P3 DAG creates 20 x STORM_STREAM_S instances at once (one
 * sharded task, `sleep 0.5`, preemptible). Each mode is a fresh stack
 * and fresh tables; preemption is switched by AX_PREEMPTION_ENABLED in
 * the children's environment, with preemption.requeue_delay 5 s and a
 * jitter of 5 s (the defaults, 60-120 s, would stretch the run by
 * minutes; the guards are the defaults).
 *
 * Figures per mode (prefix base_, off_, on_, shave_): P0 and P3 due->start P50
 * / P99 / max in ms (first attempts; P0 only those due after the burst), the
 * burst's makespan (first due to last end), the preemptions (attempt.preempted
 * events) and the instances whose first start came later than
 * scheduler.starvation_after (10 min) after their due time. All from what the
 * pipeline persisted.
 *
 * A fourth mode turns peak shaving on as well (AX_SHAVING_ENABLED,
 * shaving.* at their defaults, actors/resource/). A fifth keeps one of
 * the worker's slots for P0 (worker.reserve_p0 = 1, preemption off):
 * P1..P3 are never admitted into it, so a P0 instance finds it free.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench_run.h"
#include "clock.h"

#define P0_DAG         "bench.storm.p0"
#define P3_DAG         "bench.storm.p3"
#define STORM_STREAM_S 20 /* seconds of the P0 stream */
#define STORM_BURST_AT 5  /* seconds into the stream */
#define STORM_FACTOR   20 /* P3 instances per P0 instance */
#define STORM_SLOTS    8  /* most slots of the one worker */

typedef struct storm_mode {
	const char *prefix;  /* of its figures */
	const char *name;    /* in the human report */
	int         burst;   /* the P3 burst runs */
	const char *preempt; /* AX_PREEMPTION_ENABLED */
	const char *shaving; /* AX_SHAVING_ENABLED */
	const char *reserve; /* AX_WORKER_RESERVE_P0 */
} storm_mode;

static const storm_mode modes[] = {
	{ "base", "P0 stream alone", 0, "false", "false", "0" },
	{ "off", "storm, preemption off", 1, "false", "false", "0" },
	{ "on", "storm, preemption on", 1, "true", "false", "0" },
	{ "shave", "storm, preemption+shaving", 1, "true", "true", "0" },
	{ "reserve", "storm, 1 slot reserved for P0", 1, "false", "false",
	  "1" },
};

static void
write_storm(FILE *f, void *arg)
{
	(void) arg;
	fprintf(f,
	        "kind: DAG\nname: " P0_DAG "\nimpact: P0\n"
	        "schedule: {cron: \"* * * * * ?\", timezone: UTC}\n"
	        "concurrency: {max_active_runs: 10, policy: parallel}\n"
	        "tasks:\n  - {name: t, command: \"true\"}\n"
	        "---\n"
	        "kind: DAG\nname: " P3_DAG "\nimpact: P3\n"
	        "tasks:\n  - {name: t, command: \"sleep 0.5\", "
	        "preemptible: true, shards: %d}\n",
	        STORM_FACTOR * STORM_STREAM_S);
}

/* P50 / P99 / max (ms) of the first attempts' due->start of dag due at
 * or after from_us, into <prefix>_<tier>_*; 0 or 1. */
static int
measure_tier(ax_bench *b, const char *prefix, const char *tier,
             const char *dag, int64_t from_us)
{
	char      q[640], key[64];
	PGresult *r;
	size_t    n;
	double   *v;

	snprintf(q, sizeof(q),
	         "SELECT ax_us(a.started_at) - ax_us(a.due_at) "
	         "FROM attempts_all a JOIN task_instances_all i "
	         "ON i.id = a.instance_id JOIN dags d "
	         "ON d.id = i.dag_id WHERE d.name = '%s' AND a.number = 1 AND "
	         "a.due_at >= ax_ts(%" PRId64 ") AND a.started_at IS NOT NULL",
	         dag, from_us);
	r = PQexec(b->db, q);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "axctl bench: %s", PQerrorMessage(b->db));
		PQclear(r);
		return 1;
	}
	if ((v = ax_bench_fetch_sorted(r, 0, &n)) != NULL && n > 0) {
		snprintf(key, sizeof(key), "%s_%s_p50_ms", prefix, tier);
		ax_bench_put(&b->r, key, ax_bench_percentile(v, n, 50) / 1e3);
		snprintf(key, sizeof(key), "%s_%s_p99_ms", prefix, tier);
		ax_bench_put(&b->r, key, ax_bench_percentile(v, n, 99) / 1e3);
		snprintf(key, sizeof(key), "%s_%s_max_ms", prefix, tier);
		ax_bench_put(&b->r, key, v[n - 1] / 1e3);
		snprintf(key, sizeof(key), "%s_%s_samples", prefix, tier);
		ax_bench_put(&b->r, key, (double) n);
	}
	free(v);
	PQclear(r);
	return 0;
}

static double
fig(const ax_bench *b, const char *prefix, const char *what)
{
	char key[64];
	snprintf(key, sizeof(key), "%s_%s", prefix, what);
	return ax_bench_get(&b->r, key);
}

/* The figures of mode m, measured after its stack stopped (start_us:
 * the mode's start; event_log is not emptied between modes). */
static int
measure_mode(ax_bench *b, const storm_mode *m, int64_t start_us,
             int64_t from_us)
{
	char key[64], q[256];

	if (measure_tier(b, m->prefix, "p0", P0_DAG, from_us) ||
	    (m->burst && measure_tier(b, m->prefix, "p3", P3_DAG, 0)))
		return 1;
	snprintf(key, sizeof(key), "%s_preemptions", m->prefix);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM event_log WHERE type = "
	         "'attempt.preempted' AND time >= ax_ts(%" PRId64 ")",
	         start_us);
	ax_bench_put(&b->r, key, ax_bench_sql_num(b, q));
	snprintf(key, sizeof(key), "%s_starving", m->prefix);
	ax_bench_put(&b->r, key,
	             ax_bench_sql_num(b,
	                              "SELECT count(*) FROM attempts_all "
	                              "WHERE number = 1 AND "
	                              "coalesce(started_at, now()) - due_at > "
	                              "interval '10 minutes'"));
	if (m->burst) {
		snprintf(key, sizeof(key), "%s_makespan_s", m->prefix);
		ax_bench_put(
		    &b->r, key,
		    ax_bench_sql_num(
		        b,
		        "SELECT extract(epoch FROM max(i.ended_at) - "
		        "min(a.due_at)) FROM attempts_all a "
		        "JOIN task_instances_all i ON i.id = a.instance_id "
		        "JOIN dags d ON d.id = "
		        "i.dag_id WHERE d.name = '" P3_DAG "'"));
	}
	ax_bench_say(
	    &b->r,
	    "storm %-22s P0 due->start P50 %.0f P99 %.0f max %.0f ms"
	    " (%.0f); P3 P50 %.0f P99 %.0f max %.0f ms; makespan "
	    "%.1f s; preemptions %.0f; starving %.0f",
	    m->name, fig(b, m->prefix, "p0_p50_ms"),
	    fig(b, m->prefix, "p0_p99_ms"), fig(b, m->prefix, "p0_max_ms"),
	    fig(b, m->prefix, "p0_samples"), fig(b, m->prefix, "p3_p50_ms"),
	    fig(b, m->prefix, "p3_p99_ms"), fig(b, m->prefix, "p3_max_ms"),
	    fig(b, m->prefix, "makespan_s"), fig(b, m->prefix, "preemptions"),
	    fig(b, m->prefix, "starving"));
	return 0;
}

/* One mode: fresh tables and stack, the stream (and the burst), the
 * figures. */
static int
run_mode(ax_bench *b, const storm_mode *m)
{
	int64_t start, from;

	fprintf(stderr, "storm: %s\n", m->name);
	setenv("AX_PREEMPTION_ENABLED", m->preempt, 1);
	setenv("AX_SHAVING_ENABLED", m->shaving, 1);
	setenv("AX_WORKER_RESERVE_P0", m->reserve, 1);
	if (ax_bench_begin(b, "storm", write_storm, NULL))
		return 1;
	start = (int64_t) ax_bench_sql_num(b, "SELECT ax_us(now())");
	from  = start + STORM_BURST_AT * AX_USEC_PER_SEC;
	for (int s = 0; s < STORM_STREAM_S; s++) {
		if (ax_bench_children_dead(b)) {
			ax_bench_stop_stack(b);
			return 1;
		}
		if (s == STORM_BURST_AT && m->burst &&
		    ax_bench_trigger(b, P3_DAG)) {
			ax_bench_stop_stack(b);
			return 1;
		}
		ax_clock_sleep_us(AX_USEC_PER_SEC);
	}
	if (m->burst && ax_bench_wait_runs(b, P3_DAG, 1, 600, 200)) {
		ax_bench_stop_stack(b);
		return 1;
	}
	ax_clock_sleep_us(AX_USEC_PER_SEC); /* the last P0 fires */
	ax_bench_stop_stack(b);
	return measure_mode(b, m, start, from);
}

int
ax_bench_run_storm(ax_bench *b)
{
	int slots = b->o.slots, workers = b->o.workers, process = b->o.process,
	    rc = 0;

	b->o.slots   = slots < STORM_SLOTS ? slots : STORM_SLOTS;
	b->o.workers = 1;
	b->o.process = 1;
	setenv("AX_PREEMPTION_REQUEUE_DELAY", "5s", 1);
	setenv("AX_PREEMPTION_REQUEUE_JITTER", "5s", 1);
	fprintf(stderr,
	        "storm: 1 worker x %d slots; P0 1/s for %d s; a burst of %d "
	        "P3 (sleep 0.5, preemptible) at %d s\n",
	        b->o.slots, STORM_STREAM_S, STORM_FACTOR * STORM_STREAM_S,
	        STORM_BURST_AT);
	for (size_t i = 0; rc == 0 && i < sizeof(modes) / sizeof(modes[0]);
	     i++)
		rc = run_mode(b, &modes[i]);
	if (rc == 0 && fig(b, "base", "p0_p99_ms") > 0) {
		ax_bench_put(&b->r, "on_p0_p99_vs_base",
		             fig(b, "on", "p0_p99_ms") /
		                 fig(b, "base", "p0_p99_ms"));
		ax_bench_put(&b->r, "reserve_p0_p99_vs_base",
		             fig(b, "reserve", "p0_p99_ms") /
		                 fig(b, "base", "p0_p99_ms"));
	}
	b->o.slots   = slots;
	b->o.workers = workers;
	b->o.process = process;
	return rc;
}
