/*
 * bench_run.h - what every `axctl bench` scenario shares while it runs:
 * the context (options, home, database connection, the running stack,
 * the result), the PostgreSQL helpers, starting and stopping axd and the
 * workers, loading generated DAGs, triggering a run and waiting for runs
 * to end. The pure parts (options, percentiles, YAML, JSON) are in
 * bench_util.h.
 *
 * Role: one file per scenario (bench_latency.c, bench_throughput.c,
 * bench_timers.c, bench_chain.c, bench_layered.c, bench_scale.c, ...)
 * implements `int ax_bench_run_NAME(ax_bench *b)` with these helpers;
 * cmd_bench.c dispatches to it by ax_bench_scenario. A new scenario is a new
 * file, a declaration below and one line of cmd_bench.c's dispatch table.
 *
 * Rule of every scenario: numbers come from what the pipeline persisted
 * (attempts, task_instances, dag_runs), never from the pipeline's own
 * claims; progress goes to stderr, results into b->r.
 *
 * Threads: the main thread of axctl only. SIGINT / SIGTERM set
 * b->stop (through the handler of cmd_bench.c); every wait below returns
 * at once then, so the caller tears everything down.
 */
#ifndef AX_BENCH_RUN_H
#define AX_BENCH_RUN_H

#include <libpq-fe.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "ax_err.h"
#include "bench_util.h"
#include "stack.h"

typedef struct ax_bench {
	ax_bench_opts          o;
	ax_stack_home          h; /* h.home, h.w.dsn */
	PGconn                *db;
	ax_stack               st;
	ax_bench_result        r;
	const char            *log_level; /* of the children; NULL: warn */
	volatile sig_atomic_t *stop;      /* non-zero: SIGINT / SIGTERM seen;
	                                     never NULL once setup ran */
} ax_bench;

/* Prints "axctl bench: what: detail" on stderr; returns 1. */
int ax_bench_fail(const char *what, ax_err rv);

/* Runs q; 0 when it succeeded, else 1 (the error and q on stderr). */
int ax_bench_sql(ax_bench *b, const char *q);

/* The first column of the first row of q as a number; -1 on an error,
 * no row or NULL. */
double ax_bench_sql_num(ax_bench *b, const char *q);

/* VmHWM or VmRSS (key with its colon) of pid in MB; -1 when unreadable. */
double ax_bench_rss_mb(pid_t pid, const char *key);

/* CPU time every process of the machine has used (/proc/stat: user, nice,
 * system, irq, softirq, steal), in microseconds; -1 when unreadable. */
double ax_bench_machine_cpu_us(void);

/* CPU time (user and system, /proc/<pid>/stat) axd and the ax-worker
 * processes of the bench's stack have used, in microseconds; -1 when one
 * of them cannot be read (it exited). Their children (tasks of the
 * process executor) are not in it. */
double ax_bench_stack_cpu_us(const ax_bench *b);

/* Empties the DAG tables (cascades to versions, schedules, runs,
 * instances and attempts). 0 or 1. */
int ax_bench_fresh_tables(ax_bench *b);

/*
 * Writes $home/bench-SUBDIR/NAME.yaml with write(f, arg) and loads that
 * folder through the code of `axctl dag load`. 0, or 1 said on stderr.
 */
int ax_bench_load(ax_bench *b, const char                 *subdir,
                  void (*write)(FILE *f, void *arg), void *arg);

/*
 * History in SQL, in bulk, for the DAGs loaded (all but the scale
 * scenario's probe; ndags of them): instances / 10 past runs (1 %
 * FAILED), a run of every DAG per round and per_day rounds a day (per_day
 * 1: one run a day per DAG, at a second of the day that differs by DAG),
 * days further back as the rounds go, 10 instances each (shards of task
 * t), one attempt and one event_log row per instance, in the event_log
 * month partitions of their times (created first); then ANALYZE.
 * Empties event_log first (a re-run on the same --home). Puts
 * history_build_s into b->r.
 */
int ax_bench_build_history(ax_bench *b, long instances, int ndags,
                           int per_day);

/*
 * What the pipeline wrote, counted by PostgreSQL: row versions (inserts
 * and updates, pg_stat_user_tables) of task_instances, attempts,
 * event_log (its partitions) and dag_runs, the updates among them that
 * were not HOT (each of those adds an entry to every index of its
 * table), and the WAL position. Unlike a rate these do not drift with
 * the machine's speed: the figures of "fewer writes".
 */
typedef struct ax_bench_writes {
	double ti, att, ev, runs; /* row versions */
	double nonhot;            /* updates of the four that were not HOT */
	double wal;               /* pg_current_wal_insert_lsn, bytes */
} ax_bench_writes;

/*
 * Reads the counters into *w once every other session of the cluster
 * has ended (a session reports its counts when it ends, so call it with
 * axd and the workers stopped, or before they start; waits up to 10 s).
 * 0, or 1 said on stderr ("writes not counted"): the caller leaves the
 * write figures out and still reports the rest.
 */
int ax_bench_writes_read(ax_bench *b, ax_bench_writes *w);

/*
 * Puts the writes between w0 and w1 per instance (n instances):
 * <prefix>_wal_bytes_per_instance, _ti_versions_per_instance,
 * _attempt_versions_per_instance, _event_rows_per_instance,
 * _run_versions_per_instance, _nonhot_updates_per_instance (prefix ""
 * drops the underscore), and one line of the text report.
 */
void ax_bench_writes_put(ax_bench *b, const char *prefix,
                         const ax_bench_writes *w0, const ax_bench_writes *w1,
                         double n);

/* Seconds since t0 (ax_clock_mono_us). */
double ax_bench_secs_since(int64_t t0);

/*
 * The start of most scenarios: empties the tables, writes and loads
 * $home/bench-SUBDIR/SUBDIR.yaml (ax_bench_load) and starts axd and
 * b->o.workers workers. 0, or 1 said on stderr with nothing left
 * running.
 */
int ax_bench_begin(ax_bench *b, const char                 *subdir,
                   void (*write)(FILE *f, void *arg), void *arg);

/*
 * Starts axd (waits until it holds the lease) and `workers` workers of
 * b->o.slots slots each. 0, or 1 said on stderr; on 1 the caller still
 * calls ax_bench_stop_stack.
 */
int ax_bench_start_stack(ax_bench *b, int workers);

/* Records axd's peak RSS into b->r.rss_mb, stops every child, frees the
 * stack. Safe after a failed start. */
void ax_bench_stop_stack(ax_bench *b);

/* 0 while every child runs and no stop was asked; 1 (reported on stderr
 * when a child died) otherwise. */
int ax_bench_children_dead(ax_bench *b);

/* Asks axd for one manual run of dag now (NOTIFY ax_control trigger, as
 * the API's command rows do). 0 or 1. */
int ax_bench_trigger(ax_bench *b, const char *dag);

/*
 * Waits until at least n runs of dag have ended (SUCCESS, FAILED or
 * CANCELED), polling every poll_ms; gives up after timeout_s seconds
 * (said on stderr), when a child died or a stop was asked. Returns 0
 * when they ended, else 1.
 */
int ax_bench_wait_runs(ax_bench *b, const char *dag, int n, int timeout_s,
                       int poll_ms);

/*
 * Checks that every instance of dag succeeded and that there are
 * `expected` of them; 0, or 1 with what is missing on stderr.
 */
int ax_bench_check_success(ax_bench *b, const char *dag, long expected);

/* Column col of r as a sorted array of numbers (NULLs skipped; *n
 * values); NULL when out of memory. The caller frees it. */
double *ax_bench_fetch_sorted(PGresult *r, int col, size_t *n);

/* The scenarios: each returns 0 (measured into b->r) or 1 (said on
 * stderr). The caller opened the home and b->db and tears them down. */
int ax_bench_run_latency(ax_bench *b);
int ax_bench_run_throughput(ax_bench *b);
int ax_bench_run_timers(ax_bench *b);
int ax_bench_run_chain(ax_bench *b);
int ax_bench_run_layered(ax_bench *b);
int ax_bench_run_scale(ax_bench *b);
int ax_bench_run_storm(ax_bench *b);

#endif /* AX_BENCH_RUN_H */
