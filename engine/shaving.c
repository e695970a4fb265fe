/*
 * shaving.c - peak shaving decisions (see shaving.h): thresholds, the
 * lowest tier present, and a bounded jittered delay. Pure: no I/O.
 */
#include "shaving.h"

#include "hash.h"

int
ax_shave_overloaded(const ax_shave_policy *p, const ax_shave_load *load)
{
	if (!p->enabled)
		return 0;
	if (p->backlog > 0 && load->backlog >= p->backlog)
		return 1;
	return p->level_pct > 0 && load->level_pct >= p->level_pct;
}

int64_t
ax_shave_delay(const ax_shave_policy *p, const ax_shave_load *load, int tier,
               uint64_t seed)
{
	if (tier <= 0 || tier >= AX_TIER_COUNT || tier < load->lowest ||
	    !ax_shave_overloaded(p, load))
		return 0;
	int64_t max = p->max_delay_us[tier];
	if (max <= 0)
		return 0;
	/* 53 bits of the mixed seed: a uniform fraction in [0, 1) */
	double  u = (double) (ax_hash_u64(seed) >> 11) / 9007199254740992.0;
	int64_t d = max / 2 + (int64_t) ((double) (max - max / 2) * u);
	return d > 0 ? d : 1;
}
