/*
 * aging.c - the aging key (see aging.h for the policy and the contract).
 *
 * The key is the expression the queue service has always used, in the
 * same operations and order, so that the dispatch order does not move
 * by a rounding: (double) priority - (double) enqueued / (double) aging.
 * The tier priority folds a tier and a priority into that one priority.
 */
#include "aging.h"

double
ax_aging_key(int64_t priority, int64_t enqueued_us, int64_t aging_us)
{
	double key = (double) priority;
	if (aging_us > 0)
		key -= (double) enqueued_us / (double) aging_us;
	return key;
}

double
ax_aging_effective(int64_t priority, int64_t enqueued_us, int64_t now_us,
                   int64_t aging_us)
{
	double eff = (double) priority;
	if (aging_us > 0)
		eff += (double) (now_us - enqueued_us) / (double) aging_us;
	return eff;
}

int64_t
ax_aging_tier_priority(int tier, int64_t priority)
{
	if (tier < 0 || tier >= AX_TIER_COUNT)
		tier = AX_TIER_COUNT - 1;
	if (priority < 0)
		priority = 0;
	if (priority > AX_TIER_STEP - 1)
		priority = AX_TIER_STEP - 1;
	return (int64_t) (AX_TIER_COUNT - 1 - tier) * AX_TIER_STEP + priority;
}
