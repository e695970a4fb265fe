/*
 * bench_util.h - the pure parts of `axctl bench`: options, percentiles,
 * generated DAG YAML and the JSON report. Kept apart from cmd_bench.c so
 * they are unit-tested without processes or a database
 * (tests/unit/test_bench_util.c).
 *
 * Invariants: no I/O except into the caller's FILE / buffer; nothing
 * global.
 */
#ifndef AX_BENCH_UTIL_H
#define AX_BENCH_UTIL_H

#include <stddef.h>
#include <stdio.h>

typedef enum ax_bench_scenario {
	AX_BENCH_ALL = 0,    /* latency, then throughput */
	AX_BENCH_LATENCY,    /* N seconds-level schedules */
	AX_BENCH_THROUGHPUT, /* N independent instances */
	AX_BENCH_TIMERS,     /* N monthly schedules armed: axd RSS */
} ax_bench_scenario;

typedef struct ax_bench_opts {
	const char       *home; /* NULL: a temp dir, removed after */
	ax_bench_scenario scenario;
	int               schedules; /* latency: armed schedules */
	int               instances; /* throughput: instances */
	int               timers;    /* timers: armed schedules */
	int timer_specs; /* timers: distinct schedules among them; 0: every
	                    timer its own */
	int duration;    /* latency: seconds measured */
	int process;     /* 1: bash /bin/true; 0: noop */
	int workers;
	int slots; /* slots per worker */
	int json;
} ax_bench_opts;

/*
 * Parses argv[1..argc) (argv[0] is "bench") into o, starting from the
 * defaults: scenario all, 10000 schedules, 20000 instances, 1000000
 * timers, 120 s, noop, 2 workers x 64 slots. Returns 0, 1 after --help
 * (usage printed on out), 2 on a usage error (message on err, naming the
 * option and the accepted values).
 */
int ax_bench_parse(int argc, char **argv, ax_bench_opts *o, FILE *out,
                   FILE *err);

/* Usage text of `axctl bench`. */
void ax_bench_usage(FILE *f);

/*
 * The p-th percentile (0 < p <= 100) of sorted (ascending, n > 0 values)
 * by the nearest-rank method: the smallest value with at least p% of the
 * values at or below it. Returns 0 when n is 0.
 */
double ax_bench_percentile(const double *sorted, size_t n, double p);

/* Sorts v[0..n) ascending in place. */
void ax_bench_sort(double *v, size_t n);

/* Second of the minute (0-59) at which latency schedule i of n fires:
 * spread evenly, about n/60 per second. */
int ax_bench_second(int i, int n);

/*
 * YAML of latency DAG i of n ("bench.lat.NNNNNNN": one task `t`, cron
 * "S * * * * ?" in UTC with S = ax_bench_second(i, n), concurrency
 * parallel so a slow run never holds the next one). process selects
 * bash /bin/true instead of noop. Returns the length written (as
 * snprintf: >= len means truncated).
 */
int ax_bench_yaml_latency(char *buf, size_t len, int i, int n, int process);

/*
 * YAML of the throughput DAG "bench.tp": independent tasks t0, t1, ...
 * with up to 1000 shards each, instances in total, no schedule (it is
 * triggered). Writes into f; returns the number of tasks.
 */
int ax_bench_yaml_throughput(FILE *f, int instances, int process);

/* The measurements; negative: not measured (printed as null). */
typedef struct ax_bench_result {
	double p50_ms, p99_ms, max_ms;
	double decision_p99_ms, env_ready_p99_ms;
	double throughput_per_s;
	double rss_mb;
	double cpu_us_per_instance; /* whole machine, throughput run */
	long   samples;             /* latency samples (attempts) */
} ax_bench_result;

/* Sets every measurement to "not measured". */
void ax_bench_result_init(ax_bench_result *r);

/* One JSON object with the keys p50_ms, p99_ms, max_ms, decision_p99_ms,
 * env_ready_p99_ms, throughput_per_s, rss_mb, cpu_us_per_instance
 * (numbers or null), plus samples, and a newline. */
void ax_bench_json(FILE *f, const ax_bench_result *r);

#endif /* AX_BENCH_UTIL_H */
