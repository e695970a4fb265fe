/*
 * bench_store_events.c - what one event_log row costs
 * (ax_store_insert_events, the batched insert every actor uses in its
 * state-change transactions).
 *
 * A throwaway cluster (tests/pg_harness.h, fsync off: CPU and round
 * trips, not disk). Each round inserts a batch of B events (instance
 * events with dag, task, logical time, a payload object) in one
 * transaction; prints the median and P99 microseconds per row over the
 * rounds, for B = 1, 100 and 1000.
 *
 * Usage: bench_store_events [--quick]. Bounded to ~20 s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "pg_harness.h"
#include "store.h"
#include "store_attempts.h"
#include "uuid.h"

typedef struct batch {
	ax_store_event_row *rows;
	size_t              n;
} batch;

static ax_err
insert_fn(ax_store *st, void *arg)
{
	batch *b = arg;
	return ax_store_insert_events(st, b->rows, b->n, NULL, NULL);
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	static const size_t sizes[] = { 1, 100, 1000 };
	int         quick        = argc > 1 && strcmp(argv[1], "--quick") == 0;
	int         rounds       = quick ? 20 : 100;
	ax_test_pg *pg           = NULL;
	ax_store   *st           = NULL;
	char(*ids)[AX_UUID_LEN]  = calloc(1000, AX_UUID_LEN);
	ax_store_event_row *rows = calloc(1000, sizeof(*rows));
	int64_t            *us   = calloc((size_t) rounds, sizeof(*us));
	int64_t             dag_id = 0;

	ax_log_init(AX_LOG_ERROR, 2);
	if (ids == NULL || rows == NULL || us == NULL ||
	    ax_test_pg_start_migrated(&pg) != AX_OK ||
	    ax_store_open(ax_test_pg_dsn(pg), &st) != AX_OK ||
	    ax_store_query_int64(st,
	                         "INSERT INTO dags (name) VALUES ('bench.ev') "
	                         "RETURNING id",
	                         0, NULL, &dag_id) != AX_OK) {
		fprintf(stderr, "bench_store_events: %s\n", ax_err_detail());
		return 1;
	}
	printf("event_log insert, us per row (median / P99 over %d rounds)\n",
	       rounds);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t b = sizes[k];
		for (int r = 0; r < rounds; r++) {
			for (size_t i = 0; i < b; i++) {
				ax_uuid_v7(ids[i]);
				rows[i] = (ax_store_event_row) {
					.event_id    = ids[i],
					.type        = "instance.running",
					.time_us     = ax_clock_utc_us(),
					.dag         = "bench.ev",
					.dag_run_id  = 1,
					.instance_id = (int64_t) i + 1,
					.attempt     = 1,
					.trace_id =
					    "0123456789abcdef0123456789abcdef",
					.source          = "bench",
					.task            = "t",
					.logical_time_us = 1700000000000000LL,
					.shard_total     = 1,
					.payload_json =
					    "{\"worker\":\"w1\",\"exit\":0}",
				};
			}
			batch   bt = { rows, b };
			int64_t t0 = ax_clock_mono_us();
			if (ax_store_tx_relaxed(st, insert_fn, &bt) != AX_OK) {
				fprintf(stderr, "bench_store_events: %s\n",
				        ax_err_detail());
				return 1;
			}
			us[r] = (ax_clock_mono_us() - t0) * 1000 / (int64_t) b;
		}
		qsort(us, (size_t) rounds, sizeof(*us), cmp_i64);
		printf("  batch %4zu: %7.1f / %7.1f\n", b,
		       (double) us[rounds / 2] / 1000.0,
		       (double) us[(rounds * 99) / 100] / 1000.0);
	}
	ax_store_close(st);
	ax_test_pg_stop(pg);
	free(ids);
	free(rows);
	free(us);
	return 0;
}
