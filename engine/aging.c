/*
 * aging.c - the aging key (see aging.h for the policy and the contract).
 *
 * The key is the expression the queue service has always used, in the
 * same operations and order, so that the dispatch order does not move
 * by a rounding: (double) priority - (double) enqueued / (double) aging.
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
