/*
 * bench_executor.c - what the worker's executors cost.
 *
 * Runs N attempts with at most C in flight through the local executor
 * (`/bin/true` by argv, and `bash -c true`) and through the noop executor,
 * driving them like ax-worker's loop. Prints, per mode, the start latency
 * (ax_exec_start: fork, exec and the exec-confirmation pipe; the
 * "environment ready" part of scheduling latency) as median / P99 / max,
 * and attempts per second to a reaped result.
 *
 * usage: bench_executor [N [C]]   (defaults 1000 8; bounded to ~1 min)
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "executor.h"

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
	return (x > y) - (x < y);
}

/* Waits for and collects results; returns how many ended. */
static size_t
collect(ax_exec *ex, int block)
{
	ax_exec_result r[64];
	size_t         n = 0;
	if (block) {
		int64_t       dl = ax_exec_next_deadline(ex);
		int64_t       to = dl == INT64_MAX ? 1000 * AX_USEC_PER_MSEC
		                                   : dl - ax_clock_mono_us();
		struct pollfd p  = { .fd = ax_exec_fd(ex), .events = POLLIN };
		poll(&p, 1, to < 0 ? 0 : (int) (to / 1000) + 1);
	}
	if (ax_exec_poll(ex, ax_clock_mono_us(), r, 64, &n) != AX_OK)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (r[i].status != AX_EXEC_SUCCESS)
			fprintf(stderr, "%s ended %s\n", r[i].run_id,
			        ax_exec_status_name(r[i].status));
	return n;
}

static int
run(const char *label, const ax_exec_ops *ops, const char *command,
    char *const *argv, size_t n, size_t conc)
{
	ax_exec *ex;
	int64_t *lat     = calloc(n, sizeof(*lat));
	size_t   started = 0, ended = 0;
	char     id[32];

	if (lat == NULL || ax_exec_new(ops, &ex) != AX_OK) {
		fprintf(stderr, "%s: setup failed: %s\n", label,
		        ax_err_detail());
		free(lat);
		return 1;
	}
	int64_t t0    = ax_clock_mono_us();
	int64_t limit = t0 + 60 * AX_USEC_PER_SEC;
	while (ended < n && ax_clock_mono_us() < limit) {
		while (started < n && started - ended < conc) {
			snprintf(id, sizeof(id), "bench-%zu", started);
			ax_exec_spec s = {
				.run_id  = id,
				.attempt = 1,
				.command = command,
				.argv    = argv,
			};
			int64_t a = ax_clock_mono_us();
			if (ax_exec_start(ex, &s) != AX_OK) {
				fprintf(stderr, "%s: start: %s\n", label,
				        ax_err_detail());
				ax_exec_free(ex);
				free(lat);
				return 1;
			}
			lat[started++] = ax_clock_mono_us() - a;
		}
		ended += collect(ex, started - ended >= conc || started == n);
	}
	double secs = (double) (ax_clock_mono_us() - t0) / 1e6;
	ax_exec_free(ex);
	qsort(lat, started, sizeof(*lat), cmp_i64);
	printf("%-14s n=%zu conc=%zu start_us median=%lld p99=%lld "
	       "max=%lld  throughput=%.0f/s\n",
	       label, ended, conc, (long long) lat[started / 2],
	       (long long) lat[started * 99 / 100],
	       (long long) lat[started - 1], (double) ended / secs);
	free(lat);
	return ended == n ? 0 : 1;
}

int
main(int argc, char **argv)
{
	size_t      n     = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
	size_t      conc  = argc > 2 ? strtoul(argv[2], NULL, 10) : 8;
	char *const tru[] = { "/bin/true", NULL };
	int         rc    = 0;

	if (n == 0 || conc == 0) {
		fprintf(stderr, "usage: bench_executor [N [C]]\n");
		return 2;
	}
	rc |= run("local argv", &ax_exec_local_ops, NULL, tru, n, conc);
	rc |= run("local bash -c", &ax_exec_local_ops, "true", NULL, n, conc);
	rc |= run("noop", &ax_exec_noop_ops, NULL, tru, n * 100, conc);
	return rc;
}
