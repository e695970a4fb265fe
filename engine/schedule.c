/*
 * schedule.c - cron / every / at / none schedules and their data
 * intervals (periods); see schedule.h for the semantics.
 *
 * Role: the one place that knows how a DAG's `schedule`, `start`, `end`
 * and `catchup` turn into runs; the time detector and the API (listing
 * future runs) call it.
 *
 * Invariants: a period's start <= end; periods returned in sequence have
 * strictly increasing ends, so every loop here makes progress. Instants
 * beyond the cron year limit simply end the sequence (AX_ENOENT).
 *
 * Workload: a few calls per DAG per fire; each is one or two cron
 * searches (microseconds) or integer arithmetic.
 */
#include "schedule.h"

#include <stdlib.h>

struct ax_schedule {
	ax_sched_kind kind;
	ax_cron      *cron;  /* CRON: owned */
	const ax_tz  *tz;    /* CRON: borrowed, never NULL */
	int64_t       every; /* EVERY: period, > 0 */
	int64_t       at;    /* AT */
	int64_t       start; /* AX_SCHED_NO_START when unbounded */
	int64_t       end;   /* AX_SCHED_NO_END when unbounded */
	int           catchup;
};

static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

ax_err
ax_schedule_new(const ax_sched_spec *spec, ax_schedule **out, ax_cron_err *err)
{
	ax_schedule *s;
	ax_err       rv;

	*out = NULL;
	if (spec->kind == AX_SCHED_EVERY && spec->every_us <= 0)
		return ax_err_set(AX_EINVAL,
		                  "schedule every: the period must be "
		                  "positive, e.g. 30m");
	if (spec->start_us != AX_SCHED_NO_START &&
	    spec->end_us != AX_SCHED_NO_END && spec->end_us < spec->start_us)
		return ax_err_set(AX_EINVAL,
		                  "schedule end is before its start");
	if (spec->kind == AX_SCHED_CRON && spec->cron == NULL)
		return ax_err_set(AX_EINVAL,
		                  "schedule cron: missing "
		                  "expression");
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return ax_err_set(AX_ENOMEM, "out of memory");
	s->kind    = spec->kind;
	s->tz      = spec->tz ? spec->tz : ax_tz_utc();
	s->every   = spec->every_us;
	s->at      = spec->at_us;
	s->start   = spec->start_us;
	s->end     = spec->end_us;
	s->catchup = spec->catchup != 0;
	if (s->kind == AX_SCHED_CRON &&
	    (rv = ax_cron_parse(spec->cron, &s->cron, err)) != AX_OK) {
		free(s);
		return rv;
	}
	*out = s;
	return AX_OK;
}

void
ax_schedule_free(ax_schedule *s)
{
	if (s == NULL)
		return;
	ax_cron_free(s->cron);
	free(s);
}

ax_sched_kind
ax_schedule_kind(const ax_schedule *s)
{
	return s->kind;
}

int
ax_schedule_catchup(const ax_schedule *s)
{
	return s->catchup;
}

static ax_err
none(void)
{
	return ax_err_set(AX_ENOENT, "the schedule has no such run");
}

static ax_period
mk(int64_t start, int64_t end)
{
	return (ax_period) { start, end, start };
}

/* ---- cron ---- */

/* The first fire time at or after the schedule's start. */
static ax_err
cron_first(const ax_schedule *s, int64_t *s0)
{
	if (s->start == AX_SCHED_NO_START) {
		*s0 = INT64_MIN;
		return AX_OK;
	}
	return ax_cron_next(s->cron, s->tz, s->start - 1, s0);
}

static ax_err
cron_after(const ax_schedule *s, int64_t after, ax_period *p)
{
	int64_t s0, e, st;
	ax_err  rv;

	if ((rv = cron_first(s, &s0)) != AX_OK)
		return rv;
	if ((rv = ax_cron_next(s->cron, s->tz, after > s0 ? after : s0, &e)) !=
	    AX_OK)
		return rv;
	if (s0 == INT64_MIN && ax_cron_prev(s->cron, s->tz, e, &st) != AX_OK) {
		/* e is the very first fire time there is: it opens a period */
		st = e;
		if ((rv = ax_cron_next(s->cron, s->tz, st, &e)) != AX_OK)
			return rv;
	} else if (s0 != INT64_MIN &&
	           (rv = ax_cron_prev(s->cron, s->tz, e, &st)) != AX_OK) {
		return rv;
	}
	*p = mk(st, e);
	return AX_OK;
}

/* The last period that starts at or before x. */
static ax_err
cron_starting_le(const ax_schedule *s, int64_t x, ax_period *p)
{
	int64_t s0, st, e;
	ax_err  rv;

	if ((rv = cron_first(s, &s0)) != AX_OK)
		return rv;
	if (x == INT64_MAX)
		return none();
	if ((rv = ax_cron_prev(s->cron, s->tz, x + 1, &st)) != AX_OK)
		return rv;
	if (st < s0)
		return none();
	if ((rv = ax_cron_next(s->cron, s->tz, st, &e)) != AX_OK)
		return rv;
	*p = mk(st, e);
	return AX_OK;
}

/* The last period that ends at or before x. */
static ax_err
cron_ending_le(const ax_schedule *s, int64_t x, ax_period *p)
{
	int64_t s0, st, e;
	ax_err  rv;

	if ((rv = cron_first(s, &s0)) != AX_OK)
		return rv;
	if (x == INT64_MAX)
		return none();
	if ((rv = ax_cron_prev(s->cron, s->tz, x + 1, &e)) != AX_OK ||
	    (rv = ax_cron_prev(s->cron, s->tz, e, &st)) != AX_OK)
		return rv;
	if (st < s0)
		return none();
	*p = mk(st, e);
	return AX_OK;
}

/* ---- every ---- */

static int64_t
every_anchor(const ax_schedule *s)
{
	return s->start == AX_SCHED_NO_START ? 0 : s->start;
}

/* Index k of the period of every containing x (saturating). */
static int64_t
every_index(const ax_schedule *s, int64_t x)
{
	int64_t d;
	if (__builtin_sub_overflow(x, every_anchor(s), &d))
		d = x < 0 ? INT64_MIN : INT64_MAX;
	return floor_div(d, s->every);
}

static ax_err
every_k(const ax_schedule *s, int64_t k, ax_period *p)
{
	int64_t a = every_anchor(s);
	if (s->start != AX_SCHED_NO_START && k < 0)
		return none();
	/* keep a + (k + 1) * every inside int64 */
	if (k > (INT64_MAX - 1 - (a > 0 ? a : 0)) / s->every - 1 ||
	    k < (INT64_MIN + 1 - (a < 0 ? a : 0)) / s->every + 1)
		return none();
	*p = mk(a + k * s->every, a + (k + 1) * s->every);
	return AX_OK;
}

/* ---- kind dispatch, before the end bound ---- */

static ax_err
raw_after(const ax_schedule *s, int64_t after, ax_period *p)
{
	switch (s->kind) {
	case AX_SCHED_CRON:
		return cron_after(s, after, p);
	case AX_SCHED_EVERY: {
		int64_t k = every_index(s, after);
		if (s->start != AX_SCHED_NO_START && k < 0)
			k = 0;
		return every_k(s, k, p);
	}
	case AX_SCHED_AT:
		if (s->at <= after ||
		    (s->start != AX_SCHED_NO_START && s->at < s->start))
			return none();
		*p = mk(s->at, s->at);
		return AX_OK;
	default:
		return none();
	}
}

static ax_err
raw_ending_le(const ax_schedule *s, int64_t x, ax_period *p)
{
	switch (s->kind) {
	case AX_SCHED_CRON:
		return cron_ending_le(s, x, p);
	case AX_SCHED_EVERY:
		if (every_index(s, x) == INT64_MIN)
			return none();
		return every_k(s, every_index(s, x) - 1, p);
	case AX_SCHED_AT:
		if (s->at > x ||
		    (s->start != AX_SCHED_NO_START && s->at < s->start))
			return none();
		*p = mk(s->at, s->at);
		return AX_OK;
	default:
		return none();
	}
}

static ax_err
raw_starting_le(const ax_schedule *s, int64_t x, ax_period *p)
{
	switch (s->kind) {
	case AX_SCHED_CRON:
		return cron_starting_le(s, x, p);
	case AX_SCHED_EVERY:
		return every_k(s, every_index(s, x), p);
	default:
		return raw_ending_le(s, x, p); /* at: start == end */
	}
}

/* ---- public ---- */

ax_err
ax_schedule_next_period(const ax_schedule *s, int64_t after_us, ax_period *p)
{
	ax_err rv = raw_after(s, after_us, p);
	if (rv != AX_OK)
		return rv == AX_ENOENT ? none() : rv;
	if (p->start_us > s->end)
		return none();
	return AX_OK;
}

ax_err
ax_schedule_latest_period(const ax_schedule *s, int64_t at_us, ax_period *p)
{
	ax_err rv = raw_ending_le(s, at_us, p);
	if (rv != AX_OK)
		return rv == AX_ENOENT ? none() : rv;
	if (p->start_us > s->end) {
		/* the last period that still starts by `end` */
		rv = raw_starting_le(s, s->end, p);
		if (rv != AX_OK)
			return rv == AX_ENOENT ? none() : rv;
	}
	return AX_OK;
}

ax_err
ax_schedule_next_fire(const ax_schedule *s, int64_t after_us, int64_t *fire)
{
	ax_period p;
	ax_err    rv = ax_schedule_next_period(s, after_us, &p);
	if (rv == AX_OK)
		*fire = p.end_us;
	return rv;
}

ax_err
ax_schedule_prev_fire(const ax_schedule *s, int64_t before_us, int64_t *fire)
{
	ax_period p;
	ax_err    rv;
	if (before_us == INT64_MIN)
		return none();
	if ((rv = ax_schedule_latest_period(s, before_us - 1, &p)) == AX_OK)
		*fire = p.end_us;
	return rv;
}

ax_err
ax_schedule_periods(const ax_schedule *s, int64_t from_us, int64_t to_us,
                    ax_period *out, size_t max, size_t *n, int *more)
{
	ax_period p;
	int64_t   cur = from_us;
	ax_err    rv;

	*n = 0;
	if (more != NULL)
		*more = 0;
	for (;;) {
		rv = ax_schedule_next_period(s, cur, &p);
		if (rv == AX_ENOENT || (rv == AX_OK && p.end_us > to_us))
			return AX_OK;
		if (rv != AX_OK)
			return rv;
		if (*n == max) {
			if (more != NULL)
				*more = 1;
			return AX_OK;
		}
		out[(*n)++] = p;
		cur         = p.end_us;
	}
}

ax_err
ax_schedule_due(const ax_schedule *s, int64_t last_end_us, int64_t now_us,
                ax_period *out, size_t max, size_t *n, int *more)
{
	ax_period p;
	ax_err    rv;

	if (s->catchup)
		return ax_schedule_periods(s, last_end_us, now_us, out, max, n,
		                           more);
	*n = 0;
	if (more != NULL)
		*more = 0;
	rv = ax_schedule_latest_period(s, now_us, &p);
	if (rv == AX_ENOENT)
		return AX_OK;
	if (rv != AX_OK)
		return rv;
	if (p.end_us <= last_end_us)
		return AX_OK;
	if (max == 0) {
		if (more != NULL)
			*more = 1;
		return AX_OK;
	}
	out[(*n)++] = p;
	return AX_OK;
}
