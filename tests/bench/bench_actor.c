/*
 * bench_actor.c - throughput and per-hop latency of the actor runtime.
 *
 * A chain of 10 actors (stage0 -> ... -> stage9) in one process over
 * inproc://. A client feeds stage0; every stage re-stamps each item and
 * forwards it; each stage records the hop latency (time from the previous
 * stage's send to this stage's handler). Two runtime settings:
 *   batch=1  every actor handles one item per call (max_batch = 1), so
 *            every item costs one nng hop per stage;
 *   drained  actors drain their inbox (max_batch = 1024) and forward one
 *            envelope per drain.
 * and two loads: "idle" (one item in the chain at a time: pure hop
 * latency) and "flood" (the client sends as fast as the chain accepts:
 * throughput, and latency including queueing). The client sends one item
 * per envelope unless the row says client batch 64.
 *
 * Usage: bench_actor [--quick]. Prints a table; bounded to ~20 s.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actor.h"
#include "clock.h"
#include "log.h"

#define STAGES 10

typedef struct item {
	int64_t  stamp; /* mono us when the previous stage sent it */
	uint32_t seq;
} item;

typedef struct stage {
	char             next[16]; /* "" for the last stage */
	int32_t         *lat;      /* hop latencies, us */
	size_t           nlat, cap;
	_Atomic uint64_t done; /* items handled */
} stage;

static ax_err
stage_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	stage  *s   = state;
	int64_t now = ax_clock_mono_us();
	for (size_t i = 0; i < n; i++) {
		item it;
		memcpy(&it, items[i].data, sizeof(it));
		if (s->nlat < s->cap)
			s->lat[s->nlat++] = (int32_t) (now - it.stamp);
		if (s->next[0] != '\0') {
			it.stamp  = ax_clock_mono_us();
			ax_err rv = ax_actor_send(self, s->next, AX_ITEM_USER,
			                          &it, sizeof(it));
			if (rv != AX_OK)
				return rv;
		}
	}
	atomic_fetch_add(&s->done, n);
	return AX_OK;
}

static int
cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
	return (x > y) - (x < y);
}

typedef struct result {
	double  per_s;
	int32_t p50, p99;
	double  avg_batch;
	int     complete;
} result;

/*
 * Runs one configuration: n items, client batch cb, max_batch mb, idle
 * (one at a time) or flood. Stops waiting after limit_us.
 */
static result
run(size_t n, uint32_t mb, size_t cb, int idle, int64_t limit_us)
{
	ax_actor_system *sys = NULL;
	ax_actor_client *c   = NULL;
	stage            st[STAGES];
	ax_actor        *act[STAGES];
	result           r = { 0 };
	int64_t          t0, t1;
	size_t           sent = 0;

	memset(st, 0, sizeof(st));
	ax_actor_system_new(&sys);
	for (int i = 0; i < STAGES; i++) {
		char            name[16];
		ax_actor_config cfg = { .name = name, .max_batch = mb };
		snprintf(name, sizeof(name), "stage%d", i);
		if (i + 1 < STAGES)
			snprintf(st[i].next, sizeof(st[i].next), "stage%d",
			         i + 1);
		st[i].cap                     = n;
		st[i].lat                     = malloc(n * sizeof(int32_t));
		static const ax_actor_ops ops = { .handle = stage_handle };
		if (ax_actor_system_add(sys, &cfg, &ops, &st[i], &act[i]) !=
		    AX_OK)
			fprintf(stderr, "add: %s\n", ax_err_detail());
	}
	if (ax_actor_system_start(sys) != AX_OK ||
	    ax_actor_client_new(sys, "feeder", &c) != AX_OK) {
		fprintf(stderr, "start: %s\n", ax_err_detail());
		exit(1);
	}
	_Atomic uint64_t *last = &st[STAGES - 1].done;
	ax_actor_item    *its  = calloc(cb, sizeof(*its));
	item             *buf  = calloc(cb, sizeof(*buf));
	t0                     = ax_clock_mono_us();
	while (sent < n && ax_clock_mono_us() - t0 < limit_us) {
		size_t k = n - sent < cb ? n - sent : cb;
		for (size_t j = 0; j < k; j++) {
			buf[j].stamp = ax_clock_mono_us();
			buf[j].seq   = (uint32_t) (sent + j);
			its[j]       = (ax_actor_item) { .type = AX_ITEM_USER,
				                         .len  = sizeof(item),
				                         .data = &buf[j] };
		}
		if (ax_actor_client_send(c, "stage0", its, k, 0) != AX_OK) {
			fprintf(stderr, "send: %s\n", ax_err_detail());
			break;
		}
		sent += k;
		if (idle)
			while (atomic_load(last) < sent &&
			       ax_clock_mono_us() - t0 < limit_us)
				ax_clock_sleep_us(
				    50); /* leave the CPU to the chain */
	}
	while (atomic_load(last) < sent && ax_clock_mono_us() - t0 < limit_us)
		ax_clock_sleep_us(200);
	t1         = ax_clock_mono_us();
	r.complete = atomic_load(last) == n;
	r.per_s    = (double) atomic_load(last) * 1e6 / (double) (t1 - t0);

	uint64_t batches = 0, items = 0;
	for (int i = 0; i < STAGES; i++) {
		ax_actor_stats s;
		ax_actor_stats_get(act[i], &s);
		batches += s.batches;
		items += s.items_in;
	}
	r.avg_batch = batches ? (double) items / (double) batches : 0;
	ax_actor_client_free(c);
	ax_actor_system_stop(sys, AX_USEC_PER_SEC, NULL);

	/* Hop latencies of every stage (stage0's include the client hop). */
	size_t   total = 0;
	int32_t *all;
	for (int i = 0; i < STAGES; i++)
		total += st[i].nlat;
	all   = malloc((total ? total : 1) * sizeof(int32_t));
	total = 0;
	for (int i = 0; i < STAGES; i++) {
		memcpy(all + total, st[i].lat, st[i].nlat * sizeof(int32_t));
		total += st[i].nlat;
	}
	qsort(all, total, sizeof(int32_t), cmp_i32);
	if (total > 0) {
		r.p50 = all[total / 2];
		r.p99 = all[(size_t) ((double) total * 0.99)];
	}
	free(all);
	free(its);
	free(buf);
	ax_actor_system_free(sys);
	for (int i = 0; i < STAGES; i++)
		free(st[i].lat);
	return r;
}

int
main(int argc, char **argv)
{
	int    quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	size_t scale = quick ? 10 : 1;
	struct {
		const char *label;
		uint32_t    max_batch;
		size_t      client_batch;
		int         idle;
		size_t      n;
	} rows[] = {
		{ "batch=1  idle   ", 1, 1, 1, 2000 },
		{ "drained  idle   ", 1024, 1, 1, 2000 },
		{ "batch=1  flood  ", 1, 1, 0, 20000 },
		{ "drained  flood  ", 1024, 1, 0, 60000 },
		{ "drained  flood64", 1024, 64, 0, 300000 },
	};

	ax_log_init(AX_LOG_WARN, 2);
	printf("actor chain: %d actors over inproc://, 1 item = %zu bytes\n",
	       STAGES, sizeof(item));
	printf("%-17s %9s %12s %9s %9s %10s\n", "mode", "items", "items/s",
	       "hop P50", "hop P99", "avg batch");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		size_t n = rows[i].n / scale;
		result r = run(n, rows[i].max_batch, rows[i].client_batch,
		               rows[i].idle, 4 * AX_USEC_PER_SEC);
		printf("%-17s %9zu %12.0f %7dus %7dus %10.1f%s\n",
		       rows[i].label, n, r.per_s, r.p50, r.p99, r.avg_batch,
		       r.complete ? "" : "  (time limit hit)");
		fflush(stdout);
	}
	return 0;
}
