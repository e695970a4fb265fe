/*
 * bench_latency.c - `axctl bench --scenario latency`: scheduling latency
 * of seconds-level schedules on the real processes.
 *
 * N DAGs, one task each, cron `S * * * * ?` with S spread over the
 * minute (bench_util.c), loaded as YAML files of 1000 documents through
 * the code of `axctl dag load`. After --duration seconds the attempts
 * due at least 2 s after axd took the lease give started_at - due_at
 * (P50 / P99 / max), dispatched_at - due_at and started_at -
 * dispatched_at (P99). --executor noop (default) completes inside the
 * worker; --executor process runs /bin/true through bash as the task
 * user, so env-ready includes a fork and exec. The queue sends these
 * attempts queue.dispatch_ahead before their instant to a worker that
 * holds them for it: their dispatched_at is that instant, so decision is
 * about 0 and env-ready is the worker's start after it (the dispatch
 * record and the reply were done before).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_run.h"
#include "clock.h"

static int
write_latency_dags(ax_bench *b, const char *dir)
{
	char  path[PATH_MAX + 64], doc[512];
	FILE *f = NULL;

	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return ax_bench_fail(
		    "mkdir",
		    ax_err_set(AX_EIO, "%s: %s", dir, strerror(errno)));
	for (int i = 0; i < b->o.schedules; i++) {
		if (i % 1000 == 0) {
			if (f != NULL)
				fclose(f);
			snprintf(path, sizeof(path), "%s/lat-%04d.yaml", dir,
			         i / 1000);
			if ((f = fopen(path, "w")) == NULL)
				return ax_bench_fail(
				    "write",
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

static int
measure_latency(ax_bench *b, int64_t from_us)
{
	char      q[512];
	PGresult *r;
	size_t    n;
	double   *v;

	snprintf(q, sizeof(q),
	         "SELECT ax_us(started_at) - ax_us(due_at), "
	         "ax_us(dispatched_at) - ax_us(due_at), "
	         "ax_us(started_at) - ax_us(dispatched_at) FROM attempts_all "
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
	if ((v = ax_bench_fetch_sorted(r, 0, &n)) != NULL && n > 0) {
		b->r.p50_ms = ax_bench_percentile(v, n, 50) / 1000.0;
		b->r.p99_ms = ax_bench_percentile(v, n, 99) / 1000.0;
		b->r.max_ms = v[n - 1] / 1000.0;
	}
	free(v);
	if ((v = ax_bench_fetch_sorted(r, 1, &n)) != NULL && n > 0)
		b->r.decision_p99_ms = ax_bench_percentile(v, n, 99) / 1000.0;
	free(v);
	if ((v = ax_bench_fetch_sorted(r, 2, &n)) != NULL && n > 0)
		b->r.env_ready_p99_ms = ax_bench_percentile(v, n, 99) / 1000.0;
	free(v);
	PQclear(r);
	return 0;
}

int
ax_bench_run_latency(ax_bench *b)
{
	char    dir[PATH_MAX + 32];
	int64_t t0, from;
	double  expected;

	fprintf(stderr, "latency: generating and loading %d schedules...\n",
	        b->o.schedules);
	snprintf(dir, sizeof(dir), "%s/bench-latency", b->h.home);
	if (ax_bench_fresh_tables(b) || write_latency_dags(b, dir))
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
	if (ax_bench_start_stack(b, b->o.workers)) {
		ax_bench_stop_stack(b);
		return 1;
	}
	from = (int64_t) ax_bench_sql_num(b, "SELECT ax_us(now())") +
	    2 * AX_USEC_PER_SEC;
	fprintf(stderr, "latency: measuring for %d s\n", b->o.duration);
	for (int s = 0; s < b->o.duration; s++) {
		if (ax_bench_children_dead(b)) {
			ax_bench_stop_stack(b);
			return 1;
		}
		ax_clock_sleep_us(AX_USEC_PER_SEC);
	}
	/* Attempts due in the last seconds may still be on their way. */
	ax_clock_sleep_us(2 * AX_USEC_PER_SEC);
	ax_bench_stop_stack(b);
	if (measure_latency(b, from))
		return 1;
	expected = (double) b->o.schedules * (b->o.duration - 2) / 60.0;
	fprintf(stderr,
	        "latency: %ld attempts measured (about %.0f fires "
	        "expected)\n",
	        b->r.samples, expected);
	return 0;
}
