/*
 * bench_store_fence.c - what the lease-epoch fence (store.h, "Fencing")
 * costs a transaction.
 *
 * A throwaway cluster (tests/pg_harness.h, fsync off, so the numbers are
 * CPU and round trips, not disk). Each row runs N small transactions
 * (BEGIN, one INSERT, COMMIT) on one connection, the rows interleaved in
 * rounds, and prints the median and P99 microseconds per transaction.
 * "raw" rows send the SQL with plain libpq calls, so they compare the
 * server's work alone:
 *   raw plain             BEGIN
 *   raw fenced            BEGIN; LOCK TABLE scheduler_lease IN ROW SHARE
 *                         MODE; EXECUTE ax_store_fence (what a fenced
 *                         store sends)
 *   raw for-share         BEGIN; SELECT ... FOR SHARE on the lease row
 *                         (the alternative not taken: a row lock writes
 *                         WAL and, with several writers, a MultiXact)
 *   raw relaxed, 2 trips  BEGIN, then SET LOCAL synchronous_commit TO off
 *                         in a second round trip (the former relaxed
 *                         BEGIN; now both go in one message)
 * and the store's own path (ax_store_tx, with its connection probe):
 *   store plain / store fenced / store relaxed fenced
 * then raw plain / fenced / for-share with 2 threads writing at once
 * (transactions per second; noisy on a shared 2-core machine).
 *
 * Usage: bench_store_fence [--quick]. Bounded to ~30 s.
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "pg_harness.h"
#include "store.h"
#include "store_sched.h"

enum {
	V_RAW_PLAIN,
	V_RAW_FENCED,
	V_RAW_FORSHARE,
	V_RAW_RELAXED2,
	V_PLAIN,
	V_FENCED,
	V_RELAXED,
	V_COUNT
};

static const char *const labels[] = {
	"raw plain",
	"raw fenced",
	"raw for-share",
	"raw relaxed, 2 trips",
	"store plain",
	"store fenced",
	"store relaxed fenced",
};

static const char *dsn;
static char       *fenced_dsn;
static int64_t     epoch;

static ax_err
insert_one(ax_store *s, void *arg)
{
	(void) arg;
	return ax_store_exec(s, "INSERT INTO bench_fence (v) VALUES (1)", 0,
	                     NULL);
}

/* One raw transaction of the variants the store does not implement. */
static int
raw_tx(PGconn *c, int variant)
{
	char      begin[160];
	PGresult *r;
	int       ok;

	if (variant == V_RAW_FORSHARE)
		snprintf(begin, sizeof(begin),
		         "BEGIN; SELECT 1 FROM scheduler_lease WHERE epoch = "
		         "%lld FOR SHARE",
		         (long long) epoch);
	else if (variant == V_RAW_FENCED)
		snprintf(
		    begin, sizeof(begin),
		    "BEGIN; LOCK TABLE scheduler_lease IN ROW SHARE MODE; "
		    "EXECUTE ax_store_fence");
	else
		snprintf(begin, sizeof(begin), "BEGIN");
	r  = PQexec(c, begin);
	ok = PQresultStatus(r) == PGRES_TUPLES_OK ||
	    PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	if (variant == V_RAW_RELAXED2) {
		r = PQexec(c, "SET LOCAL synchronous_commit TO off");
		PQclear(r);
	}
	r = PQexecParams(c, "INSERT INTO bench_fence (v) VALUES (1)", 0, NULL,
	                 NULL, NULL, NULL, 0);
	ok &= PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	r = PQexec(c, "COMMIT");
	ok &= PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	return ok;
}

static int
one_tx(ax_store *s, int variant)
{
	switch (variant) {
	case V_PLAIN:
	case V_FENCED:
		return ax_store_tx(s, insert_one, NULL) == AX_OK;
	case V_RELAXED:
		return ax_store_tx_relaxed(s, insert_one, NULL) == AX_OK;
	default:
		return raw_tx(ax_store_conn(s), variant);
	}
}

static ax_store *
open_for(int variant)
{
	int fenced = variant == V_FENCED || variant == V_RELAXED ||
	    variant == V_RAW_FENCED;
	ax_store *s = NULL;

	if (ax_store_open(fenced ? fenced_dsn : dsn, &s) != AX_OK ||
	    (fenced && ax_store_tx(s, insert_one, NULL) != AX_OK)) {
		fprintf(stderr, "open: %s\n", ax_err_detail());
		exit(1);
	}
	return s; /* fenced: ax_store_fence is prepared by now */
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
	return x < y ? -1 : x > y;
}

/*
 * Latency of every variant, interleaved in rounds so that the load of a
 * shared machine drifts over all of them alike.
 */
static void
latency_rows(size_t n)
{
	enum { NV = V_COUNT, ROUNDS = 10 };
	ax_store *s[NV];
	int64_t  *lat[NV];
	size_t    bad[NV] = { 0 }, k = 0;

	for (int v = 0; v < NV; v++) {
		s[v]   = open_for(v);
		lat[v] = malloc(sizeof(int64_t) * n);
		for (size_t i = 0; i < 50; i++) /* warm up */
			(void) one_tx(s[v], v);
	}
	for (int r = 0; r < ROUNDS; r++, k += n / ROUNDS)
		for (int v = 0; v < NV; v++)
			for (size_t i = k; i < k + n / ROUNDS; i++) {
				int64_t t0 = ax_clock_mono_us();
				bad[v] += !one_tx(s[v], v);
				lat[v][i] = ax_clock_mono_us() - t0;
			}
	for (int v = 0; v < NV; v++) {
		qsort(lat[v], k, sizeof(int64_t), cmp_i64);
		printf("%-24s n=%-6zu median %5lld us  p99 %5lld us%s\n",
		       labels[v], k, (long long) lat[v][k / 2],
		       (long long) lat[v][(size_t) ((double) k * 0.99)],
		       bad[v] ? "  (FAILED transactions!)" : "");
		free(lat[v]);
		ax_store_close(s[v]);
	}
}

typedef struct worker {
	int       variant;
	int64_t   until;
	size_t    done, bad;
	ax_store *s;
} worker;

static void *
work(void *arg)
{
	worker *w = arg;
	while (ax_clock_mono_us() < w->until) {
		w->bad += !one_tx(w->s, w->variant);
		w->done++;
	}
	return NULL;
}

static void
throughput_row(int variant, int64_t secs_us)
{
	worker    w[2];
	pthread_t th[2];

	for (int i = 0; i < 2; i++) {
		w[i] = (worker) { .variant = variant, .s = open_for(variant) };
		w[i].until = ax_clock_mono_us() + secs_us;
	}
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, work, &w[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	printf("%-24s 2 threads: %7.0f tx/s%s\n", labels[variant],
	       (double) (w[0].done + w[1].done) * AX_USEC_PER_SEC /
	           (double) secs_us,
	       w[0].bad + w[1].bad ? "  (FAILED transactions!)" : "");
	for (int i = 0; i < 2; i++)
		ax_store_close(w[i].s);
}

int
main(int argc, char **argv)
{
	int         quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	size_t      n     = quick ? 500 : 4000;
	int64_t     secs  = (quick ? 1 : 3) * AX_USEC_PER_SEC;
	ax_test_pg *pg;
	ax_store   *s;

	ax_log_init(AX_LOG_ERROR, 2);
	if (ax_test_pg_start_migrated(&pg) != AX_OK) {
		fprintf(stderr, "cluster: %s\n", ax_err_detail());
		return 1;
	}
	dsn = ax_test_pg_dsn(pg);
	if (ax_store_open(dsn, &s) != AX_OK ||
	    ax_store_exec(s, "CREATE TABLE bench_fence (v int)", 0, NULL) !=
	        AX_OK ||
	    ax_store_sched_lease_take(s, "bench", 3600 * AX_USEC_PER_SEC,
	                              &epoch) != AX_OK ||
	    ax_store_dsn_fenced(dsn, epoch, &fenced_dsn) != AX_OK) {
		fprintf(stderr, "setup: %s\n", ax_err_detail());
		return 1;
	}
	printf("per transaction (BEGIN, INSERT, COMMIT; one connection):\n");
	latency_rows(n);
	printf("throughput:\n");
	for (int v = V_RAW_PLAIN; v <= V_RAW_FORSHARE; v++)
		throughput_row(v, secs);
	free(fenced_dsn);
	ax_store_close(s);
	ax_test_pg_stop(pg);
	return 0;
}
