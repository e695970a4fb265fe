/*
 * bench_timing_wheel.c - cost of the timing wheel at the time detector's
 * scale: N armed timers (default 1,000,000) with deadlines spread over one
 * hour (microsecond-random, like schedules at their own second plus
 * retries and timeouts), then
 *   add      N embedded timers, in batches of BATCH
 *   next     ax_wheel_next_deadline after an add (cached answer)
 *   cancel   BATCH random armed timers per batch, then re-added
 *   advance  the whole hour in 1 ms steps (one OS-timer wake-up each),
 *            every timer fires; ns per fired timer and per advance call
 *   add_id   N id-mode timers (pool allocated)
 *   cron     10,000 and 100,000 schedules each firing once a minute and
 *            re-armed from the callback, advanced every ms for 3 minutes
 * Prints median and P99 nanoseconds per operation over batches, and VmRSS
 * (from /proc/self/status) before and after arming N timers, including the
 * caller's 40-byte nodes. Bounded: a few seconds. Not a pass/fail test.
 *   build/tests/bench_timing_wheel [N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing_wheel.h"

#define BATCH 1000
#define HOUR  (3600LL * 1000000LL)
#define T0    1000000000LL

static int64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int
cmpd(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;
	return (x > y) - (x < y);
}

/* Median and P99 of n per-op samples (sorts them). */
static void
report(const char *what, double *ns, size_t n, const char *unit)
{
	if (n == 0) {
		printf("%-28s (no samples)\n", what);
		return;
	}
	qsort(ns, n, sizeof(*ns), cmpd);
	printf(
	    "%-28s median %8.1f  p99 %8.1f  max %9.1f ns/%s  (%zu batches)\n",
	    what, ns[n / 2], ns[(n * 99) / 100], ns[n - 1], unit, n);
}

/* VmRSS of this process in kB, -1 when unknown. */
static long
rss_kb(void)
{
	char  line[256];
	long  kb = -1;
	FILE *f  = fopen("/proc/self/status", "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "VmRSS:", 6) == 0) {
			kb = strtol(line + 6, NULL, 10);
			break;
		}
	fclose(f);
	return kb;
}

static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Cron scenario: every timer re-arms itself one minute later. */
static void
on_fire_rearm(void *arg, ax_wheel_timer *t)
{
	ax_wheel **w = arg;
	ax_wheel_add(*w, t->deadline_us + 60000000LL, t->cookie, t);
}

/*
 * The latency scenario of issue 4: ncron schedules, each firing once a
 * minute at its own instant, re-armed from the callback; the wheel is
 * advanced every millisecond for `minutes` simulated minutes. Prints the
 * cost of each advance call (median, P99, max: the max is a cascade).
 */
static void
bench_cron(size_t ncron, int minutes, uint64_t *seed)
{
	ax_wheel       *w     = NULL;
	ax_wheel_timer *t     = calloc(ncron, sizeof(*t));
	size_t          steps = (size_t) minutes * 60000, k = 0;
	double         *ns = malloc(steps * sizeof(*ns));
	char            what[64];

	if (t == NULL || ns == NULL || ax_wheel_new(T0, &w) != AX_OK) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < ncron; i++)
		ax_wheel_add(w, T0 + 1 + (int64_t) (rnd(seed) % 60000000ULL),
		             i, &t[i]);
	for (size_t st = 1; st <= steps; st++) {
		int64_t a = now_ns();
		ax_wheel_advance(w, T0 + (int64_t) st * 1000, on_fire_rearm,
		                 &w, NULL);
		ns[k++] = (double) (now_ns() - a);
	}
	snprintf(what, sizeof(what), "advance, %zu crons/min", ncron);
	report(what, ns, k, "call");
	ax_wheel_free(w);
	free(t);
	free(ns);
}

typedef struct fire_ctx {
	size_t  fired;
	int64_t last;
	int     disorder;
} fire_ctx;

static void
on_fire(void *arg, ax_wheel_timer *t)
{
	fire_ctx *c = arg;
	if (t->deadline_us < c->last)
		c->disorder++;
	c->last = t->deadline_us;
	c->fired++;
}

int
main(int argc, char **argv)
{
	size_t          n    = argc > 1 ? (size_t) atol(argv[1]) : 1000000;
	size_t          nb   = n / BATCH;
	uint64_t        seed = 0x2545f4914f6cdd1dULL;
	ax_wheel       *w    = NULL;
	ax_wheel_timer *t    = NULL;
	int64_t        *dl   = NULL;
	double         *add = NULL, *cancel = NULL, *next = NULL;
	double         *advs  = NULL;
	size_t          nadv  = (size_t) (HOUR / 1000) + 1;
	size_t          nnext = 0, nadvs = 0;
	fire_ctx        fc = { 0 };
	long            rss0, rss1;
	int64_t         a, b, nd;

	if (n < BATCH || n % BATCH != 0) {
		fprintf(stderr, "N must be a multiple of %d\n", BATCH);
		return 2;
	}
	dl     = malloc(n * sizeof(*dl));
	add    = malloc(nb * sizeof(*add));
	cancel = malloc(nb * sizeof(*cancel));
	next   = malloc(nb * sizeof(*next));
	advs   = malloc(nadv * sizeof(*advs));
	if (!dl || !add || !cancel || !next || !advs) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		dl[i] = T0 + 1 + (int64_t) (rnd(&seed) % (uint64_t) HOUR);

	rss0 = rss_kb();
	t    = calloc(n, sizeof(*t)); /* the callers' embedded nodes */
	if (t == NULL || ax_wheel_new(T0, &w) != AX_OK) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (size_t bi = 0; bi < nb; bi++) {
		a = now_ns();
		for (size_t i = bi * BATCH; i < (bi + 1) * BATCH; i++)
			ax_wheel_add(w, dl[i], i, &t[i]);
		b       = now_ns();
		add[bi] = (double) (b - a) / BATCH;
		a       = now_ns();
		ax_wheel_next_deadline(w, &nd);
		next[nnext++] = (double) (now_ns() - a);
	}
	rss1 = rss_kb();
	printf("timing wheel, %zu timers over one hour, batches of %d\n", n,
	       BATCH);
	printf("RSS before %ld kB, after arming %ld kB: %.1f MB for %zu "
	       "timers = %.1f bytes/timer (incl. caller's nodes)\n",
	       rss0, rss1, (double) (rss1 - rss0) / 1024.0, n,
	       (double) (rss1 - rss0) * 1024.0 / (double) n);
	report("add", add, nb, "op");
	report("next_deadline (cached)", next, nnext, "call");

	for (size_t bi = 0; bi < nb; bi++) {
		size_t idx[BATCH];
		for (int k = 0; k < BATCH; k++)
			idx[k] = (size_t) (rnd(&seed) % n);
		a = now_ns();
		for (int k = 0; k < BATCH; k++)
			ax_wheel_cancel(w, &t[idx[k]]);
		b          = now_ns();
		cancel[bi] = (double) (b - a) / BATCH;
		for (int k = 0; k < BATCH; k++)
			if (!ax_wheel_timer_armed(&t[idx[k]]))
				ax_wheel_add(w, dl[idx[k]], idx[k],
				             &t[idx[k]]);
	}
	report("cancel (random timer)", cancel, nb, "op");

	int64_t total0 = now_ns();
	nnext          = 0;
	for (int64_t now = T0 + 1000; now <= T0 + HOUR + 1000; now += 1000) {
		size_t before = fc.fired;
		a             = now_ns();
		ax_wheel_advance(w, now, on_fire, &fc, NULL);
		b             = now_ns();
		advs[nadvs++] = (double) (b - a);
		if (fc.fired > before && nnext < nb) {
			a = now_ns();
			ax_wheel_next_deadline(w, &nd);
			next[nnext++] = (double) (now_ns() - a);
		}
	}
	int64_t total = now_ns() - total0;
	printf("advance over one hour in 1 ms steps: %zu fired, %d out of "
	       "order, %.1f ns per fired timer overall\n",
	       fc.fired, fc.disorder, (double) total / (double) fc.fired);
	report("advance (1 ms step)", advs, nadvs, "call");
	report("next_deadline after fire", next, nnext, "call");

	ax_wheel_free(w);
	free(t);

	/* Id mode: pool-allocated nodes. */
	uint64_t id;
	rss0 = rss_kb();
	if (ax_wheel_new(T0, &w) != AX_OK)
		return 1;
	for (size_t bi = 0; bi < nb; bi++) {
		a = now_ns();
		for (size_t i = bi * BATCH; i < (bi + 1) * BATCH; i++)
			ax_wheel_add_id(w, dl[i], i, &id);
		add[bi] = (double) (now_ns() - a) / BATCH;
	}
	rss1 = rss_kb();
	report("add_id (pool)", add, nb, "op");
	printf(
	    "id mode RSS growth %.1f MB for %zu timers = %.1f bytes/timer\n",
	    (double) (rss1 - rss0) / 1024.0, n,
	    (double) (rss1 - rss0) * 1024.0 / (double) n);
	ax_wheel_free(w);
	bench_cron(10000, 3, &seed);
	bench_cron(100000, 3, &seed);
	free(dl);
	free(add);
	free(cancel);
	free(next);
	free(advs);
	return fc.disorder == 0 && fc.fired == n ? 0 : 1;
}
