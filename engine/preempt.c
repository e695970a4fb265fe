/*
 * preempt.c - preemption eligibility, the choice of a victim, and the
 * victims' recovery throttle (see preempt.h for the rules and why each
 * exists).
 *
 * No I/O, no clock: the caller gives the facts (runtime, the victim's
 * history, its worker's recent preemptions, every instant) and applies
 * the answer. The choice holds no state and costs O(n) in the
 * candidates of one worker group; the throttle's state is its two heaps
 * (O(log n) an operation).
 */
#include "preempt.h"

#include "clock.h"

static const char *const reasons[] = {
	[AX_PREEMPT_NO_CANDIDATE]     = "NO_CANDIDATE",
	[AX_PREEMPT_NOT_PREEMPTIBLE]  = "NOT_PREEMPTIBLE",
	[AX_PREEMPT_NOT_STARTED]      = "NOT_STARTED",
	[AX_PREEMPT_TIER_NOT_LOWER]   = "TIER_NOT_LOWER",
	[AX_PREEMPT_NEEDS_TWO_TIERS]  = "PREEMPTED_BEFORE",
	[AX_PREEMPT_RUNTIME_EXCEEDED] = "RUNTIME_EXCEEDED",
	[AX_PREEMPT_WORKER_LIMIT]     = "WORKER_LIMIT",
	[AX_PREEMPT_OK]               = "PREEMPTED",
};

const char *
ax_preempt_reason(ax_preempt_verdict v)
{
	if ((unsigned) v > AX_PREEMPT_OK)
		return "INVALID";
	return reasons[v];
}

ax_preempt_verdict
ax_preempt_check(const ax_preempt_policy *p, int winner_tier,
                 const ax_preempt_cand *c)
{
	if (!c->preemptible)
		return AX_PREEMPT_NOT_PREEMPTIBLE;
	if (c->runtime_us < 0)
		return AX_PREEMPT_NOT_STARTED;
	if (c->tier - winner_tier < 1)
		return AX_PREEMPT_TIER_NOT_LOWER;
	if (c->preempted_before && c->tier - winner_tier < 2)
		return AX_PREEMPT_NEEDS_TWO_TIERS;
	if (p->max_runtime_us > 0 && c->runtime_us > p->max_runtime_us)
		return AX_PREEMPT_RUNTIME_EXCEEDED;
	if (p->per_worker_per_min <= 0 ||
	    c->worker_recent >= p->per_worker_per_min)
		return AX_PREEMPT_WORKER_LIMIT;
	return AX_PREEMPT_OK;
}

/* 1 when a is a better victim than b (both eligible). */
static int
better(const ax_preempt_cand *a, const ax_preempt_cand *b)
{
	if (a->tier != b->tier)
		return a->tier > b->tier;
	if (a->priority != b->priority)
		return a->priority < b->priority;
	return a->runtime_us < b->runtime_us;
}

long
ax_preempt_choose(const ax_preempt_policy *p, int winner_tier,
                  const ax_preempt_cand *c, size_t n, ax_preempt_verdict *why)
{
	ax_preempt_verdict best = AX_PREEMPT_NO_CANDIDATE;
	long               pick = -1;

	for (size_t i = 0; i < n; i++) {
		ax_preempt_verdict v = ax_preempt_check(p, winner_tier, &c[i]);
		if (v == AX_PREEMPT_OK) {
			if (pick < 0 || better(&c[i], &c[pick]))
				pick = (long) i;
		}
		if (v > best)
			best = v;
	}
	if (why != NULL)
		*why = best;
	return pick;
}

int64_t
ax_preempt_recovery_at(const ax_preempt_recovery *r, int64_t now_us,
                       uint64_t h)
{
	int64_t d = r->delay_us > 0 ? r->delay_us : 0;
	int64_t j = r->jitter_us > 0 ? r->jitter_us : 0;

	return now_us + d + (int64_t) (h % (uint64_t) (j + 1));
}

static int
due_before(const ax_heap_node *a, const ax_heap_node *b)
{
	const ax_preempt_victim *x = AX_HEAP_ENTRY(a, ax_preempt_victim, node);
	const ax_preempt_victim *y = AX_HEAP_ENTRY(b, ax_preempt_victim, node);

	if (x->due_us != y->due_us)
		return x->due_us < y->due_us;
	return x->seq < y->seq;
}

/* The release order: tier, priority, due instant, arrival. */
static int
release_before(const ax_heap_node *a, const ax_heap_node *b)
{
	const ax_preempt_victim *x = AX_HEAP_ENTRY(a, ax_preempt_victim, node);
	const ax_preempt_victim *y = AX_HEAP_ENTRY(b, ax_preempt_victim, node);

	if (x->tier != y->tier)
		return x->tier < y->tier;
	if (x->priority != y->priority)
		return x->priority > y->priority;
	return due_before(a, b);
}

void
ax_preempt_throttle_init(ax_preempt_throttle *t, int rate_per_s)
{
	ax_heap_init(&t->waiting, due_before);
	ax_heap_init(&t->due, release_before);
	t->rate_per_s = rate_per_s;
	/* rounded up: a gap a little short would let rate + 1 through in
	 * some second (3 a second at 333,333 us fit 4 into one) */
	t->gap_us  = rate_per_s > 0
	     ? (AX_USEC_PER_SEC + rate_per_s - 1) / rate_per_s
	     : 0;
	t->next_us = INT64_MIN;
	t->seq     = 0;
}

void
ax_preempt_throttle_fini(ax_preempt_throttle *t)
{
	ax_heap_fini(&t->waiting);
	ax_heap_fini(&t->due);
}

ax_err
ax_preempt_throttle_add(ax_preempt_throttle *t, ax_preempt_victim *v)
{
	v->seq    = t->seq++;
	v->is_due = 0;
	return ax_heap_push(&t->waiting, &v->node);
}

void
ax_preempt_throttle_remove(ax_preempt_throttle *t, ax_preempt_victim *v)
{
	ax_heap_remove(v->is_due ? &t->due : &t->waiting, &v->node);
}

ax_preempt_victim *
ax_preempt_throttle_pop(ax_preempt_throttle *t, int64_t now_us)
{
	ax_preempt_victim *v;

	/* every victim due by now competes, whenever it became due */
	while ((v = AX_HEAP_ENTRY(ax_heap_top(&t->waiting), ax_preempt_victim,
	                          node)) != NULL &&
	       v->due_us <= now_us) {
		(void) ax_heap_pop(&t->waiting);
		v->is_due = 1;
		if (ax_heap_push(&t->due, &v->node) != AX_OK) {
			/* no room to sort it: it goes now, out of order,
			 * rather than be lost */
			v->is_due = 0;
			return v;
		}
	}
	if (now_us < t->next_us)
		return NULL;
	v = AX_HEAP_ENTRY(ax_heap_pop(&t->due), ax_preempt_victim, node);
	if (v == NULL)
		return NULL;
	v->is_due = 0;
	if (t->gap_us > 0)
		t->next_us = now_us + t->gap_us;
	return v;
}

int64_t
ax_preempt_throttle_next_us(const ax_preempt_throttle *t)
{
	const ax_preempt_victim *w =
	    AX_HEAP_ENTRY(ax_heap_top(&t->waiting), ax_preempt_victim, node);
	int64_t at = INT64_MAX;

	if (ax_heap_count(&t->due) > 0)
		at = t->next_us;
	if (w != NULL && w->due_us < at)
		at = w->due_us;
	if (at != INT64_MAX && at < t->next_us)
		at = t->next_us;
	return at;
}

size_t
ax_preempt_throttle_count(const ax_preempt_throttle *t)
{
	return ax_heap_count(&t->waiting) + ax_heap_count(&t->due);
}

size_t
ax_preempt_throttle_held(const ax_preempt_throttle *t)
{
	return ax_heap_count(&t->due);
}
