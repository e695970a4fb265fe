/*
 * bench_throughput.c - `axctl bench --scenario throughput`: instances per
 * second to a persisted SUCCESS.
 *
 * One DAG "bench.tp" of independent tasks with up to 1000 shards each
 * (one run holds all N instances: a single trigger, no per-run overhead
 * in the measure), triggered through the control channel (NOTIFY
 * ax_control {"op":"trigger"}); instances per second = N / (last
 * instance SUCCESS persisted - run created). The CPU every process of
 * the machine used meanwhile, divided by N, is cpu_us_per_instance; the
 * part of it axd and the workers used themselves (the rest is
 * PostgreSQL, the kernel and the bench) is ax_cpu_us_per_instance.
 *
 * With --history H, H instances of history (runs of bench.tp one a
 * minute back in time, each with its attempts and events:
 * ax_bench_build_history) are written and analyzed before axd starts:
 * the same run on top of a database that has been in use, which is what
 * a platform sees. Every figure counts the triggered run's rows only.
 *
 * What the run wrote (ax_bench_writes, counted by PostgreSQL from before
 * axd starts to after it stopped, so its start and stop are in them too):
 * WAL bytes, row versions per table and updates not HOT, per instance.
 */
#include <stdlib.h>

#include "bench_run.h"
#include "clock.h"

static void
write_tp(FILE *f, void *arg)
{
	const ax_bench *b = arg;
	ax_bench_yaml_throughput(f, b->o.instances, b->o.process);
}

int
ax_bench_run_throughput(ax_bench *b)
{
	char            q[256];
	int64_t         deadline;
	double          done = 0, secs, cpu0, cpu1 = -1, run0;
	double          ax0, ax1 = -1; /* axd's and the workers' own */
	long            hist = b->o.history_set ? b->o.history : 0;
	ax_bench_writes w0, w1;
	int             counted; /* the writes' first count was read */

	fprintf(stderr, "throughput: %d instances\n", b->o.instances);
	if (ax_bench_fresh_tables(b) ||
	    ax_bench_load(b, "throughput", write_tp, b) ||
	    (hist > 0 && ax_bench_build_history(b, hist, 1, 1440)))
		return 1;
	/* the runs of the history have ids up to run0 */
	run0 =
	    ax_bench_sql_num(b, "SELECT coalesce(max(id), 0) FROM dag_runs");
	/* a count that cannot be read (another session left open on the
	 * home's database) leaves the write figures out, not the run */
	counted = run0 >= 0 && ax_bench_writes_read(b, &w0) == 0;
	if (run0 < 0 || ax_bench_start_stack(b, b->o.workers)) {
		ax_bench_stop_stack(b);
		return 1;
	}
	if (hist > 0)
		ax_bench_put(&b->r, "history_instances", (double) hist);
	cpu0 = ax_bench_machine_cpu_us();
	ax0  = ax_bench_stack_cpu_us(b);
	if (ax_bench_trigger(b, "bench.tp")) {
		ax_bench_stop_stack(b);
		return 1;
	}
	/* Generous: 50 instances/s at least, 60 s minimum. */
	deadline =
	    ax_clock_mono_us() + (60 + b->o.instances / 50) * AX_USEC_PER_SEC;
	while (done < b->o.instances) {
		if (ax_bench_children_dead(b) ||
		    ax_clock_mono_us() > deadline) {
			if (ax_clock_mono_us() > deadline)
				fprintf(
				    stderr,
				    "axctl bench: only %.0f of %d instances "
				    "succeeded in time\n",
				    done, b->o.instances);
			ax_bench_stop_stack(b);
			return 1;
		}
		ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
		/* The run ends after its last instance: poll that one row.
		 * Counting SUCCESS rows at every poll scanned the whole table
		 * (about 100 ms a poll at 60,000 rows, seen with auto_explain)
		 * and slowed down what it measured. */
		snprintf(q, sizeof(q),
		         "SELECT count(*) FROM dag_runs WHERE id > %.0f AND "
		         "state IN ('SUCCESS', 'FAILED', 'CANCELED')",
		         run0);
		if (ax_bench_sql_num(b, q) < 1)
			continue;
		cpu1 = ax_bench_machine_cpu_us();
		ax1  = ax_bench_stack_cpu_us(b);
		snprintf(
		    q, sizeof(q),
		    "SELECT count(*) FROM task_instances_all WHERE dag_run_id "
		    "> %.0f AND state = 'SUCCESS'",
		    run0);
		done = ax_bench_sql_num(b, q);
		if (done < b->o.instances) {
			fprintf(stderr,
			        "axctl bench: the run ended with %.0f of %d "
			        "instances succeeded\n",
			        done, b->o.instances);
			ax_bench_stop_stack(b);
			return 1;
		}
	}
	ax_bench_stop_stack(b);
	if (counted && ax_bench_writes_read(b, &w1) == 0)
		ax_bench_writes_put(b, "", &w0, &w1, b->o.instances);
	snprintf(q, sizeof(q),
	         "SELECT extract(epoch FROM (SELECT max(ended_at) FROM "
	         "task_instances_all WHERE dag_run_id > %.0f) - (SELECT "
	         "min(created_at) FROM dag_runs WHERE id > %.0f))",
	         run0, run0);
	secs = ax_bench_sql_num(b, q);
	if (secs > 0)
		b->r.throughput_per_s = b->o.instances / secs;
	if (cpu0 >= 0 && cpu1 >= cpu0)
		b->r.cpu_us_per_instance = (cpu1 - cpu0) / b->o.instances;
	if (ax0 >= 0 && ax1 >= ax0)
		ax_bench_put(&b->r, "ax_cpu_us_per_instance",
		             (ax1 - ax0) / b->o.instances);
	fprintf(stderr, "throughput: %d instances in %.2f s\n", b->o.instances,
	        secs);
	return 0;
}
