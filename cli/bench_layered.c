/*
 * bench_layered.c - `axctl bench --scenario layered`: instances per
 * second through a wide, deep DAG, in the shape of Dask's benchmark.
 *
 * Shape: Dask's own benchmark suite (dask-benchmarks, benchmarks/
 * order.py) builds "fully_connected_layers(width, height)": height
 * layers of width tasks, each task depending on every task of the layer
 * before, width x width edges per layer (10,000 at 100 x 100). That is
 * the shape matched here, rather than one upstream per task: it is the
 * one the peer's figure (707 instances/s for 100 x 100 with the
 * distributed scheduler, in memory) is quoted for, and it is the harder
 * case for a scheduler that counts unmet upstreams. A layer is one task
 * of --width shards ("bench.layered", tasks l1 .. l<layers>, l<k+1>
 * depending on l<k>): AX makes a task wait for every shard of its
 * upstream, which is exactly "every instance of the layer before", and a
 * DAG holds at most 5000 tasks, so 100 x 100 separate tasks would not
 * load.
 *
 * One triggered run; instances per second = layers x width / (last
 * SUCCESS persisted - run created), from task_instances and dag_runs.
 * Unlike Dask's in-memory graph every instance here is durable: an
 * instance row, an attempt row and its events.
 *
 * Figures: layered_per_s, layered_makespan_s, layered_instances,
 * layered_vs_dask (layered_per_s / 707).
 */
#include "bench_run.h"

#define DAG          "bench.layered"
#define DASK_PER_SEC 707.0 /* Dask distributed, 100 x 100, in memory */

static void
write_layered(FILE *f, void *arg)
{
	const ax_bench *b = arg;
	ax_bench_yaml_layered(f, b->o.layers, b->o.width, b->o.process);
}

int
ax_bench_run_layered(ax_bench *b)
{
	long   n = (long) b->o.layers * b->o.width;
	double secs;
	/* Generous: 20 instances/s at least, a minute minimum. */
	int timeout_s = 60 + (int) (n / 20);

	fprintf(stderr,
	        "layered: %d layers of %d instances (%ld), each on every "
	        "instance of the layer before, %s\n",
	        b->o.layers, b->o.width, n, b->o.process ? "process" : "noop");
	if (ax_bench_begin(b, "layered", write_layered, b))
		return 1;
	if (ax_bench_trigger(b, DAG) ||
	    ax_bench_wait_runs(b, DAG, 1, timeout_s, 100)) {
		ax_bench_stop_stack(b);
		return 1;
	}
	ax_bench_stop_stack(b);
	if (ax_bench_check_success(b, DAG, n))
		return 1;
	secs = ax_bench_sql_num(
	    b,
	    "SELECT extract(epoch FROM max(i.ended_at) - r.created_at) "
	    "FROM dag_runs r JOIN dags g ON g.id = r.dag_id JOIN "
	    "task_instances_all i ON i.dag_run_id = r.id WHERE g.name = "
	    "'" DAG "' GROUP BY r.id, r.created_at");
	if (secs <= 0) {
		fprintf(stderr,
		        "axctl bench: layered: no makespan measured\n");
		return 1;
	}
	ax_bench_put(&b->r, "layered_per_s", (double) n / secs);
	ax_bench_put(&b->r, "layered_makespan_s", secs);
	ax_bench_put(&b->r, "layered_instances", (double) n);
	ax_bench_put(&b->r, "layered_vs_dask",
	             (double) n / secs / DASK_PER_SEC);
	ax_bench_say(&b->r,
	             "layered (%d x %d, %s): %.0f instances/s over %.2f s; "
	             "%.2fx Dask distributed's 707/s (in memory)",
	             b->o.layers, b->o.width,
	             b->o.process ? "process" : "noop", (double) n / secs,
	             secs, (double) n / secs / DASK_PER_SEC);
	return 0;
}
