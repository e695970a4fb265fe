/*
 * preempt.c - preemption eligibility and the choice of a victim (see
 * preempt.h for the rules and why each exists).
 *
 * No I/O, no clock, no state: the caller gives the facts (runtime, the
 * victim's history, its worker's recent preemptions) and applies the
 * answer. Cost: O(n) in the candidates of one worker group.
 */
#include "preempt.h"

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
ax_preempt_recovery_at(ax_preempt_recovery *r, int64_t now_us, uint64_t h)
{
	int64_t d  = r->delay_us > 0 ? r->delay_us : 0;
	int64_t j  = r->jitter_us > 0 ? r->jitter_us : 0;
	int64_t at = now_us + d + (int64_t) (h % (uint64_t) (j + 1));

	if (r->rate_per_s <= 0)
		return at;
	/* a token every 1/rate s: the turns are spaced, so no second holds
	 * more than rate of them */
	if (at < r->next_us)
		at = r->next_us;
	r->next_us = at + 1000000 / r->rate_per_s;
	return at;
}
