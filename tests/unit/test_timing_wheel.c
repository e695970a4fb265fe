/*
 * test_timing_wheel.c - the hierarchical timing wheel: order, ties,
 * cancel, re-arm, far and past deadlines, cascades at level boundaries,
 * next_deadline, id mode, errors, and a randomised comparison against a
 * plain reference model.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "timing_wheel.h"

#define T0 1000000000000LL /* wheel origin, an arbitrary positive time */

/* Records what fired. */
typedef struct rec {
	uint64_t cookie[8192];
	int64_t  deadline[8192];
	size_t   n;
} rec;

static void
record(void *arg, ax_wheel_timer *t)
{
	rec *r = arg;
	cr_assert_lt(r->n, 8192);
	r->cookie[r->n]   = t->cookie;
	r->deadline[r->n] = t->deadline_us;
	r->n++;
}

static ax_wheel *
mk(int64_t now)
{
	ax_wheel *w = NULL;
	cr_assert_eq(ax_wheel_new(now, &w), AX_OK, "%s", ax_err_detail());
	return w;
}

static size_t
adv(ax_wheel *w, int64_t now, rec *r)
{
	size_t n = 0;
	cr_assert_eq(ax_wheel_advance(w, now, record, r, &n), AX_OK, "%s",
	             ax_err_detail());
	return n;
}

Test(timing_wheel, fires_in_deadline_order)
{
	static const int64_t offs[] = {
		5000000, 3, 70000, 64, 1, 4096, 2000000000, 999, 262144, 63
	};
	enum { N = sizeof(offs) / sizeof(offs[0]) };
	ax_wheel_timer t[N];
	rec            r = { .n = 0 };
	ax_wheel      *w = mk(T0);

	memset(t, 0, sizeof(t));
	for (int i = 0; i < N; i++)
		cr_assert_eq(
		    ax_wheel_add(w, T0 + offs[i], (uint64_t) i, &t[i]), AX_OK);
	cr_assert_eq(ax_wheel_count(w), N);
	cr_assert_eq(adv(w, T0 + 3000000000LL, &r), N);
	for (size_t i = 1; i < r.n; i++)
		cr_assert_lt(r.deadline[i - 1], r.deadline[i]);
	cr_assert_eq(r.deadline[0], T0 + 1);
	cr_assert_eq(ax_wheel_count(w), 0);
	cr_assert_eq(ax_wheel_now(w), T0 + 3000000000LL);
	for (int i = 0; i < N; i++)
		cr_assert_not(ax_wheel_timer_armed(&t[i]));
	ax_wheel_free(w);
}

/*
 * Equal deadlines fire in insertion order, even when the first was armed
 * far ahead (high level, cascaded down) and the second close to the
 * deadline (straight into a low level).
 */
Test(timing_wheel, ties_fire_in_insertion_order)
{
	ax_wheel_timer a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };
	rec            r = { .n = 0 };
	ax_wheel      *w = mk(T0);
	int64_t        D = T0 + 10 * 1000000LL + 123;

	cr_assert_eq(ax_wheel_add(w, D, 1, &a), AX_OK);
	adv(w, D - 5000, &r);
	cr_assert_eq(ax_wheel_add(w, D, 2, &b), AX_OK);
	adv(w, D - 3, &r);
	cr_assert_eq(ax_wheel_add(w, D, 3, &c), AX_OK);
	cr_assert_eq(ax_wheel_add(w, D - 1, 4, &d), AX_OK);
	cr_assert_eq(r.n, 0);
	cr_assert_eq(adv(w, D, &r), 4);
	cr_assert_eq(r.cookie[0], 4);
	cr_assert_eq(r.cookie[1], 1);
	cr_assert_eq(r.cookie[2], 2);
	cr_assert_eq(r.cookie[3], 3);
	ax_wheel_free(w);
}

Test(timing_wheel, cancel_and_readd)
{
	ax_wheel_timer a = { 0 }, b = { 0 };
	rec            r = { .n = 0 };
	ax_wheel      *w = mk(T0);

	cr_assert_eq(ax_wheel_add(w, T0 + 100, 1, &a), AX_OK);
	cr_assert_eq(ax_wheel_add(w, T0 + 200, 2, &b), AX_OK);
	cr_assert_eq(ax_wheel_add(w, T0 + 300, 9, &a), AX_EBUSY);
	cr_assert(strlen(ax_err_detail()) > 0);
	cr_assert_eq(ax_wheel_cancel(w, &a), AX_OK);
	cr_assert_eq(ax_wheel_cancel(w, &a), AX_ENOENT);
	cr_assert_eq(ax_wheel_count(w), 1);
	cr_assert_eq(adv(w, T0 + 1000, &r), 1);
	cr_assert_eq(r.cookie[0], 2);
	cr_assert_eq(ax_wheel_cancel(w, &b), AX_ENOENT);

	/* Re-add both after firing / cancelling. */
	cr_assert_eq(ax_wheel_add(w, T0 + 2000, 3, &a), AX_OK);
	cr_assert_eq(ax_wheel_add(w, T0 + 1500, 4, &b), AX_OK);
	cr_assert_eq(ax_wheel_reschedule(w, &a, T0 + 1200, 5), AX_OK);
	cr_assert_eq(ax_wheel_count(w), 2);
	cr_assert_eq(adv(w, T0 + 1999, &r), 2);
	cr_assert_eq(r.cookie[1], 5);
	cr_assert_eq(r.deadline[1], T0 + 1200);
	cr_assert_eq(r.cookie[2], 4);
	ax_wheel_free(w);
}

/* A yearly cron: more than a year ahead, fires exactly at its instant. */
Test(timing_wheel, far_future)
{
	ax_wheel_timer a = { 0 }, b = { 0 };
	rec            r    = { .n = 0 };
	ax_wheel      *w    = mk(T0);
	int64_t        year = 366LL * 86400 * 1000000;
	int64_t        D    = T0 + 2 * year + 777;
	int64_t        nd;

	cr_assert_eq(ax_wheel_add(w, D, 1, &a), AX_OK);
	cr_assert_eq(ax_wheel_add(w, INT64_MAX - 1, 2, &b), AX_OK);
	cr_assert_eq(ax_wheel_next_deadline(w, &nd), AX_OK);
	cr_assert_eq(nd, D);
	cr_assert_eq(adv(w, T0 + year, &r), 0);
	cr_assert_eq(adv(w, D - 1, &r), 0);
	cr_assert_eq(ax_wheel_next_deadline(w, &nd), AX_OK);
	cr_assert_eq(nd, D);
	cr_assert_eq(adv(w, D, &r), 1);
	cr_assert_eq(r.cookie[0], 1);
	cr_assert_eq(ax_wheel_next_deadline(w, &nd), AX_OK);
	cr_assert_eq(nd, INT64_MAX - 1);
	cr_assert_eq(adv(w, INT64_MAX - 2, &r), 0);
	cr_assert_eq(adv(w, INT64_MAX - 1, &r), 1);
	cr_assert_eq(r.cookie[1], 2);
	ax_wheel_free(w);
}

/* Deadlines at or before the wheel's time fire at the next advance, in
 * deadline order, even an advance to the same instant. */
Test(timing_wheel, past_deadlines_fire_at_next_advance)
{
	ax_wheel_timer t[5];
	rec            r = { .n = 0 };
	ax_wheel      *w = mk(T0);
	int64_t        nd;

	memset(t, 0, sizeof(t));
	adv(w, T0 + 500, &r);
	cr_assert_eq(ax_wheel_add(w, T0 + 400, 0, &t[0]), AX_OK);
	cr_assert_eq(ax_wheel_add(w, 5, 1, &t[1]), AX_OK); /* before origin */
	cr_assert_eq(ax_wheel_add(w, T0 + 500, 2, &t[2]), AX_OK); /* == now */
	cr_assert_eq(ax_wheel_add(w, T0 + 400, 3, &t[3]), AX_OK); /* tie */
	cr_assert_eq(ax_wheel_add(w, -7, 4, &t[4]), AX_OK);
	cr_assert_eq(ax_wheel_next_deadline(w, &nd), AX_OK);
	cr_assert_eq(nd, -7);
	cr_assert_eq(ax_wheel_cancel(w, &t[1]), AX_OK);
	cr_assert_eq(ax_wheel_next_deadline(w, &nd), AX_OK);
	cr_assert_eq(nd, -7);
	cr_assert_eq(adv(w, T0 + 500, &r), 4);
	cr_assert_eq(r.cookie[0], 4);
	cr_assert_eq(r.cookie[1], 0);
	cr_assert_eq(r.cookie[2], 3);
	cr_assert_eq(r.cookie[3], 2);
	ax_wheel_free(w);
}

/*
 * Timers on both sides of every level boundary (64^L) fire exactly when
 * the time reaches them, whether time moves one microsecond at a time or
 * jumps straight onto the boundary.
 */
Test(timing_wheel, cascades_at_level_boundaries)
{
	enum { L = 6, PER = 3 };
	ax_wheel_timer t[L * PER];
	int64_t        dl[L * PER];
	int            n = 0;
	rec            r = { .n = 0 };
	ax_wheel      *w = mk(T0);

	memset(t, 0, sizeof(t));
	for (int l = 1; l <= L; l++) {
		int64_t b = 1LL << (6 * l);
		for (int k = -1; k <= 1; k++) {
			dl[n] = T0 + b + k;
			cr_assert_eq(
			    ax_wheel_add(w, dl[n], (uint64_t) n, &t[n]),
			    AX_OK);
			n++;
		}
	}
	for (int i = 0; i < n; i++) {
		size_t before = r.n;
		/* step up to one before, then micro-steps across */
		cr_assert_eq(adv(w, dl[i] - 1, &r), 0, "early fire near %lld",
		             (long long) (dl[i] - T0));
		cr_assert_eq(adv(w, dl[i], &r), 1, "missed %lld",
		             (long long) (dl[i] - T0));
		cr_assert_eq(r.deadline[before], dl[i]);
		cr_assert_eq(r.cookie[before], (uint64_t) i);
	}
	ax_wheel_free(w);
}

/* Jumping exactly onto a boundary from far away fires what is due. */
Test(timing_wheel, jump_onto_boundary)
{
	ax_wheel_timer a = { 0 }, b = { 0 }, c = { 0 };
	rec            r = { .n = 0 };
	ax_wheel      *w = mk(0);

	cr_assert_eq(ax_wheel_add(w, 4096, 1, &a), AX_OK);
	cr_assert_eq(ax_wheel_add(w, 4097, 2, &b), AX_OK);
	cr_assert_eq(ax_wheel_add(w, 262144, 3, &c), AX_OK);
	cr_assert_eq(adv(w, 4095, &r), 0);
	cr_assert_eq(adv(w, 4096, &r), 1);
	cr_assert_eq(adv(w, 262143, &r), 1);
	cr_assert_eq(adv(w, 262144, &r), 1);
	cr_assert_eq(r.cookie[2], 3);
	ax_wheel_free(w);
}

Test(timing_wheel, next_deadline_is_exact)
{
	ax_wheel_timer t[4];
	rec            r = { .n = 0 };
	ax_wheel      *w = mk(T0);
	int64_t        nd;

	memset(t, 0, sizeof(t));
	cr_assert_eq(ax_wheel_next_deadline(w, &nd), AX_ENOENT);
	cr_assert_eq(ax_wheel_add(w, T0 + 59000000, 0, &t[0]), AX_OK);
	cr_assert_eq(ax_wheel_add(w, T0 + 58500001, 1, &t[1]), AX_OK);
	cr_assert_eq(ax_wheel_next_deadline(w, &nd), AX_OK);
	cr_assert_eq(nd, T0 + 58500001);
	cr_assert_eq(ax_wheel_add(w, T0 + 30, 2, &t[2]), AX_OK);
	cr_assert_eq(ax_wheel_next_deadline(w, &nd), AX_OK);
	cr_assert_eq(nd, T0 + 30);
	cr_assert_eq(ax_wheel_cancel(w, &t[2]), AX_OK);
	cr_assert_eq(ax_wheel_next_deadline(w, &nd), AX_OK);
	cr_assert_eq(nd, T0 + 58500001);
	cr_assert_eq(adv(w, T0 + 20000000, &r), 0);
	cr_assert_eq(ax_wheel_next_deadline(w, &nd), AX_OK);
	cr_assert_eq(nd, T0 + 58500001);
	cr_assert_eq(ax_wheel_cancel(w, &t[1]), AX_OK);
	cr_assert_eq(ax_wheel_next_deadline(w, &nd), AX_OK);
	cr_assert_eq(nd, T0 + 59000000);
	cr_assert_eq(adv(w, nd, &r), 1);
	cr_assert_eq(ax_wheel_next_deadline(w, &nd), AX_ENOENT);
	ax_wheel_free(w);
}

/* ---- callbacks that touch the wheel ----------------------------------- */

typedef struct rearm_ctx {
	ax_wheel      *w;
	int64_t        period;
	int            fires;
	int64_t        last;
	ax_wheel_timer victim;
	int            adv_rv;
} rearm_ctx;

static void
rearm(void *arg, ax_wheel_timer *t)
{
	rearm_ctx *c = arg;
	c->fires++;
	c->last = t->deadline_us;
	cr_assert_eq(
	    ax_wheel_add(c->w, t->deadline_us + c->period, t->cookie, t),
	    AX_OK);
}

/* A cron-like re-arm from the callback fires every period in one advance
 * that covers several periods. */
Test(timing_wheel, rearm_from_callback)
{
	ax_wheel_timer t = { 0 };
	rearm_ctx      c = { .period = 1000000 };

	c.w = mk(T0);
	cr_assert_eq(ax_wheel_add(c.w, T0 + 1000000, 7, &t), AX_OK);
	cr_assert_eq(ax_wheel_advance(c.w, T0 + 10000000, rearm, &c, NULL),
	             AX_OK);
	cr_assert_eq(c.fires, 10);
	cr_assert_eq(c.last, T0 + 10000000);
	cr_assert(ax_wheel_timer_armed(&t));
	ax_wheel_free(c.w);
}

static void
add_now(void *arg, ax_wheel_timer *t)
{
	rearm_ctx *c = arg;
	c->fires++;
	if (c->fires == 1)
		cr_assert_eq(ax_wheel_add(c->w, t->deadline_us, 0, t), AX_OK);
	c->adv_rv =
	    ax_wheel_advance(c->w, t->deadline_us + 5, add_now, c, NULL);
}

/* Re-arming at the instant being fired waits for the next advance (no
 * endless loop); advancing from a callback is refused. */
Test(timing_wheel, rearm_now_waits_and_no_reentry)
{
	ax_wheel_timer t = { 0 };
	rearm_ctx      c = { .period = 0 };

	c.w = mk(T0);
	cr_assert_eq(ax_wheel_add(c.w, T0 + 10, 0, &t), AX_OK);
	cr_assert_eq(ax_wheel_advance(c.w, T0 + 10, add_now, &c, NULL), AX_OK);
	cr_assert_eq(c.fires, 1);
	cr_assert_eq(c.adv_rv, AX_ESTATE);
	cr_assert_eq(ax_wheel_count(c.w), 1);
	cr_assert_eq(ax_wheel_advance(c.w, T0 + 10, add_now, &c, NULL), AX_OK);
	cr_assert_eq(c.fires, 2);
	cr_assert_eq(ax_wheel_count(c.w), 0);
	ax_wheel_free(c.w);
}

static void
cancel_victim(void *arg, ax_wheel_timer *t)
{
	rearm_ctx *c = arg;
	c->fires++;
	cr_assert_eq(ax_wheel_cancel(c->w, &c->victim), AX_OK);
	cr_assert_eq(ax_wheel_cancel(c->w, t), AX_ENOENT); /* already idle */
}

/* A callback cancels a timer due at the same instant: it does not fire. */
Test(timing_wheel, cancel_from_callback)
{
	ax_wheel_timer t = { 0 };
	rearm_ctx      c = { .period = 0 };

	c.w = mk(T0);
	cr_assert_eq(ax_wheel_add(c.w, T0 + 100, 0, &t), AX_OK);
	cr_assert_eq(ax_wheel_add(c.w, T0 + 100, 1, &c.victim), AX_OK);
	cr_assert_eq(ax_wheel_advance(c.w, T0 + 100, cancel_victim, &c, NULL),
	             AX_OK);
	cr_assert_eq(c.fires, 1);
	cr_assert_eq(ax_wheel_count(c.w), 0);
	ax_wheel_free(c.w);
}

Test(timing_wheel, id_mode)
{
	rec       r = { .n = 0 };
	ax_wheel *w = mk(T0);
	uint64_t  a, b, c;

	cr_assert_eq(ax_wheel_add_id(w, T0 + 10, 1, &a), AX_OK);
	cr_assert_eq(ax_wheel_add_id(w, T0 + 20, 2, &b), AX_OK);
	cr_assert_neq(a, 0);
	cr_assert_neq(a, b);
	cr_assert_eq(ax_wheel_cancel_id(w, b), AX_OK);
	cr_assert_eq(ax_wheel_cancel_id(w, b), AX_ENOENT);
	cr_assert_eq(ax_wheel_cancel_id(w, 0), AX_ENOENT);
	cr_assert_eq(ax_wheel_cancel_id(w, 12345), AX_ENOENT);
	cr_assert_eq(adv(w, T0 + 30, &r), 1);
	cr_assert_eq(r.cookie[0], 1);
	cr_assert_eq(ax_wheel_cancel_id(w, a), AX_ENOENT);
	/* A reused node gets a new id; the stale one cancels nothing. */
	cr_assert_eq(ax_wheel_add_id(w, T0 + 40, 3, &c), AX_OK);
	cr_assert_neq(c, a);
	cr_assert_neq(c, b);
	cr_assert_eq(ax_wheel_cancel_id(w, a), AX_ENOENT);
	cr_assert_eq(ax_wheel_cancel_id(w, b), AX_ENOENT);
	cr_assert_eq(ax_wheel_count(w), 1);
	cr_assert_eq(adv(w, T0 + 40, &r), 1);
	cr_assert_eq(r.cookie[1], 3);
	ax_wheel_free(w);
}

Test(timing_wheel, bad_input)
{
	ax_wheel      *w = NULL;
	ax_wheel_timer t = { 0 };
	rec            r = { .n = 0 };
	int64_t        nd;
	uint64_t       id;

	cr_assert_eq(ax_wheel_new(-1, &w), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "negative") != NULL);
	cr_assert_null(w);
	cr_assert_eq(ax_wheel_new(0, NULL), AX_EINVAL);
	w = mk(T0);
	cr_assert_eq(ax_wheel_add(NULL, 1, 0, &t), AX_EINVAL);
	cr_assert_eq(ax_wheel_add(w, 1, 0, NULL), AX_EINVAL);
	cr_assert_eq(ax_wheel_cancel(w, NULL), AX_EINVAL);
	cr_assert_eq(ax_wheel_cancel(NULL, &t), AX_EINVAL);
	cr_assert_eq(ax_wheel_reschedule(w, NULL, 1, 0), AX_EINVAL);
	cr_assert_eq(ax_wheel_add_id(w, 1, 0, NULL), AX_EINVAL);
	cr_assert_eq(ax_wheel_add_id(NULL, 1, 0, &id), AX_EINVAL);
	cr_assert_eq(ax_wheel_cancel_id(NULL, 1), AX_EINVAL);
	cr_assert_eq(ax_wheel_next_deadline(w, NULL), AX_EINVAL);
	cr_assert_eq(ax_wheel_next_deadline(NULL, &nd), AX_EINVAL);
	cr_assert_eq(ax_wheel_advance(w, T0, NULL, NULL, NULL), AX_EINVAL);
	cr_assert_eq(ax_wheel_advance(NULL, T0, record, &r, NULL), AX_EINVAL);
	adv(w, T0 + 100, &r);
	cr_assert_eq(ax_wheel_add(w, T0 + 50, 0, &t), AX_OK);
	cr_assert_eq(ax_wheel_advance(w, T0 + 99, record, &r, NULL),
	             AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "monotonic") != NULL);
	cr_assert_eq(r.n, 0); /* nothing fired by the refused call */
	cr_assert_eq(ax_wheel_now(w), T0 + 100);
	cr_assert_eq(ax_wheel_count(NULL), 0);
	ax_wheel_free(w);
	ax_wheel_free(NULL);
}

/* ---- randomised comparison with a reference model --------------------- */

enum { RN = 2048 };

typedef struct model {
	ax_wheel      *w;
	ax_wheel_timer t[RN];
	int            armed[RN]; /* reference: armed? */
	int64_t        dl[RN];    /* reference: deadline */
	uint64_t       seq[RN];   /* reference: insertion sequence */
	uint64_t       ids[RN];   /* id-mode handle, 0 for embedded */
	uint64_t       nseq;
	int64_t        now;
	uint64_t       fired[RN]; /* slots fired by the last advance */
	size_t         nfired;
	uint64_t       rng;
} model;

static uint64_t
rnd(model *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return m->rng;
}

static void
model_fire(void *arg, ax_wheel_timer *t)
{
	model *m = arg;
	cr_assert_lt(m->nfired, RN);
	m->fired[m->nfired++] = t->cookie;
}

static int64_t
random_deadline(model *m)
{
	static const int64_t spans[] = {
		1, 64, 4096, 300000, 60000000, 3600000000LL, 40000000000000LL
	};
	int64_t span = spans[rnd(m) % 7];
	int64_t off  = (int64_t) (rnd(m) % (uint64_t) span);
	if (rnd(m) % 20 == 0)
		return m->now - off; /* in the past */
	return m->now + off;
}

static int
cmp_slot(const void *a, const void *b, void *arg)
{
	const model *m = arg;
	int          x = *(const int *) a, y = *(const int *) b;
	if (m->dl[x] != m->dl[y])
		return m->dl[x] < m->dl[y] ? -1 : 1;
	return m->seq[x] < m->seq[y] ? -1 : 1;
}

static void
model_check_next(model *m)
{
	int64_t min = INT64_MAX, nd;
	int     any = 0;
	for (int i = 0; i < RN; i++)
		if (m->armed[i] && (!any || m->dl[i] < min)) {
			min = m->dl[i];
			any = 1;
		}
	if (!any) {
		cr_assert_eq(ax_wheel_next_deadline(m->w, &nd), AX_ENOENT);
		return;
	}
	cr_assert_eq(ax_wheel_next_deadline(m->w, &nd), AX_OK);
	cr_assert_eq(nd, min, "next_deadline %lld, reference %lld",
	             (long long) nd, (long long) min);
}

static void
model_advance(model *m, int64_t now)
{
	static int due[RN];
	int        n = 0;

	for (int i = 0; i < RN; i++)
		if (m->armed[i] && m->dl[i] <= now)
			due[n++] = i;
	qsort_r(due, (size_t) n, sizeof(int), cmp_slot, m);
	m->nfired = 0;
	cr_assert_eq(ax_wheel_advance(m->w, now, model_fire, m, NULL), AX_OK);
	cr_assert_eq(m->nfired, (size_t) n, "fired %zu, reference %d at %lld",
	             m->nfired, n, (long long) now);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(m->fired[i], (uint64_t) due[i],
		             "fire %d: slot %llu, reference %d", i,
		             (unsigned long long) m->fired[i], due[i]);
		m->armed[due[i]] = 0;
	}
	m->now = now;
}

static void
model_step(model *m)
{
	int      i  = (int) (rnd(m) % RN);
	unsigned op = (unsigned) (rnd(m) % 100);

	if (op < 45) { /* add or re-add */
		if (m->armed[i])
			return;
		m->dl[i]  = random_deadline(m);
		m->seq[i] = m->nseq++;
		if (i % 4 == 0) {
			cr_assert_eq(ax_wheel_add_id(m->w, m->dl[i],
			                             (uint64_t) i, &m->ids[i]),
			             AX_OK);
		} else {
			cr_assert_eq(ax_wheel_add(m->w, m->dl[i], (uint64_t) i,
			                          &m->t[i]),
			             AX_OK);
		}
		m->armed[i] = 1;
	} else if (op < 70) { /* cancel */
		ax_err want = m->armed[i] ? AX_OK : AX_ENOENT;
		if (i % 4 == 0) {
			if (m->ids[i] != 0)
				cr_assert_eq(
				    ax_wheel_cancel_id(m->w, m->ids[i]), want);
		} else {
			cr_assert_eq(ax_wheel_cancel(m->w, &m->t[i]), want);
		}
		m->armed[i] = 0;
	} else if (op < 75 && m->armed[i] && i % 4 != 0) { /* reschedule */
		m->dl[i]  = random_deadline(m);
		m->seq[i] = m->nseq++;
		cr_assert_eq(ax_wheel_reschedule(m->w, &m->t[i], m->dl[i],
		                                 (uint64_t) i),
		             AX_OK);
	} else { /* advance by a random span, sometimes onto a deadline */
		int64_t to = m->now;
		if (op < 80 && m->armed[i])
			to = m->dl[i] > m->now ? m->dl[i] : m->now;
		else
			to = m->now +
			    (int64_t) (rnd(m) %
			               ((op % 3 == 0) ? 100000000000ULL
			                              : 5000ULL));
		model_advance(m, to);
	}
	size_t want = 0;
	for (int k = 0; k < RN; k++)
		want += (size_t) m->armed[k];
	cr_assert_eq(ax_wheel_count(m->w), want);
	model_check_next(m);
}

Test(timing_wheel, random_against_reference, .timeout = 60)
{
	static model m;

	memset(&m, 0, sizeof(m));
	m.rng = 0x9e3779b97f4a7c15ULL;
	m.now = T0;
	m.w   = mk(T0);
	for (int k = 0; k < 100000; k++)
		model_step(&m);
	model_advance(&m, INT64_MAX - 1);
	cr_assert_eq(ax_wheel_count(m.w), 0);
	ax_wheel_free(m.w);
}
