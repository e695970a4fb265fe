/*
 * bench_util.h - the pure parts of `axctl bench`: options, the scenario
 * names, percentiles, generated DAG YAML and the JSON report. Kept apart
 * from the scenarios (bench_run.h and its bench_*.c) so they are
 * unit-tested without processes or a database
 * (tests/unit/test_bench_util.c).
 *
 * Invariants: no I/O except into the caller's FILE / buffer; nothing
 * global.
 */
#ifndef AX_BENCH_UTIL_H
#define AX_BENCH_UTIL_H

#include <stddef.h>
#include <stdio.h>

/* The scenarios, in the order `all` runs them; ax_bench_scenario_name()
 * and ax_bench_in_all() say their name and whether `all` runs them. */
typedef enum ax_bench_scenario {
	AX_BENCH_ALL = 0,    /* every scenario ax_bench_in_all() selects */
	AX_BENCH_LATENCY,    /* N seconds-level schedules */
	AX_BENCH_THROUGHPUT, /* N independent instances */
	AX_BENCH_CHAIN,      /* one DAG of tasks in a line */
	AX_BENCH_LAYERED,    /* layers x width, each layer on the previous */
	AX_BENCH_TIMERS,     /* N monthly schedules armed: axd RSS */
	AX_BENCH_SCALE,      /* many DAGs and history: start-up, API */
	AX_BENCH_STORM,      /* P0 stream + P3 burst, preemption off/on */
	AX_BENCH_N_SCENARIOS
} ax_bench_scenario;

/* "all", "latency", ...; NULL for an unknown value. */
const char *ax_bench_scenario_name(ax_bench_scenario s);

/* 1 when `--scenario all` runs s (not timers nor scale: minutes and a
 * lot of memory of their own). */
int ax_bench_in_all(ax_bench_scenario s);

typedef struct ax_bench_opts {
	const char       *home; /* NULL: a temp dir, removed after */
	ax_bench_scenario scenario;
	int               schedules; /* latency: armed schedules */
	int               instances; /* throughput: instances */
	int               timers;    /* timers: armed schedules */
	int timer_specs; /* timers: distinct schedules among them; 0: every
	                    timer its own */
	int dags;        /* scale: DAGs */
	int history;     /* scale: task instances of history */
	int history_set; /* 1: --history given (throughput builds it only
	                    then) */
	int duration;    /* latency: seconds measured */
	int runs;        /* chain: runs triggered one after the other */
	int length;      /* chain: tasks in the line */
	int layers;      /* layered: layers */
	int width;       /* layered: instances per layer */
	int process;     /* 1: bash /bin/true; 0: noop */
	int workers;
	int slots; /* slots per worker */
	int json;
} ax_bench_opts;

/*
 * Parses argv[1..argc) (argv[0] is "bench") into o, starting from the
 * defaults: scenario all, 10000 schedules, 20000 instances, 1000000
 * timers, 120 s, chain of 100 tasks run once, 100 layers of 100, noop,
 * 2 workers x 64 slots. Returns 0, 1 after --help
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

/*
 * YAML of the chain DAG "bench.chain": tasks t1 .. t<length>, t<k+1>
 * depending on t<k>, no schedule (it is triggered), max_active_runs 1.
 * Writes into f.
 */
void ax_bench_yaml_chain(FILE *f, int length, int process);

/*
 * YAML of the layered DAG "bench.layered": tasks l1 .. l<layers> of
 * `width` shards each, l<k+1> depending on l<k>; a task waits for every
 * shard of its upstream, so each instance of a layer waits for every
 * instance of the layer before (width x width edges per layer). No
 * schedule. Writes into f.
 */
void ax_bench_yaml_layered(FILE *f, int layers, int width, int process);

#define AX_BENCH_EXTRA_MAX 96 /* storm: 5 modes of up to 14 figures */

/* The measurements; negative: not measured (printed as null). Scenarios
 * beyond the first ones add named figures with ax_bench_put(). */
typedef struct ax_bench_result {
	double p50_ms, p99_ms, max_ms;
	double decision_p99_ms, env_ready_p99_ms;
	double throughput_per_s;
	double rss_mb;
	double cpu_us_per_instance; /* whole machine, throughput run */
	long   samples;             /* latency samples (attempts) */
	struct {
		char   key[48]; /* a JSON key: [a-z0-9_] */
		double v;       /* negative: not measured */
	} extra[AX_BENCH_EXTRA_MAX];
	int  n_extra;
	char human[2048]; /* lines of the text report of those scenarios */
} ax_bench_result;

/* Sets every measurement to "not measured". */
void ax_bench_result_init(ax_bench_result *r);

/* Sets figure key (replacing an earlier value of the same key) to v.
 * Returns 0, or -1 when the table is full or key is not 1-47 characters
 * of [a-z0-9_] (the figure is dropped). */
int ax_bench_put(ax_bench_result *r, const char *key, double v);

/* The figure key put before, or -1 when there is none. */
double ax_bench_get(const ax_bench_result *r, const char *key);

/* Appends one line (printf format; a newline is added) to r->human,
 * truncated when it is full. */
void ax_bench_say(ax_bench_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One JSON object with the keys p50_ms, p99_ms, max_ms, decision_p99_ms,
 * env_ready_p99_ms, throughput_per_s, rss_mb, cpu_us_per_instance
 * (numbers or null), samples, then every figure of ax_bench_put() in
 * the order first put, and a newline. */
void ax_bench_json(FILE *f, const ax_bench_result *r);

#endif /* AX_BENCH_UTIL_H */
