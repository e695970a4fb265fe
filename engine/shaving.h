/*
 * shaving.h - peak shaving: the pure decision whether an instance that
 * arrives at admission is delayed, and for how long (DESIGN.md 6b).
 *
 * Why: a top-of-the-hour burst of low-tier work admitted at once hits the
 * databases its tasks use all at once; delaying the lowest tier present
 * by a bounded, jittered amount spreads it out while higher tiers go on.
 * A wrong setting costs either nothing shaved (thresholds too high: the
 * burst lands at once) or low-tier work late by up to its largest delay
 * per arrival for no reason (thresholds too low, delays too long); P0 is
 * never delayed, whatever the setting.
 *
 * The resource detector (actors/resource/shave.c) applies it: on arrival
 * it asks ax_shave_delay; it releases a delayed instance at its instant,
 * or earlier as soon as ax_shave_overloaded says the group drained.
 * Pure functions: no I/O, no clock, any thread.
 */
#ifndef AX_SHAVING_H
#define AX_SHAVING_H

#include <stdint.h>

#include "aging.h"

typedef struct ax_shave_policy {
	int     enabled;
	int64_t backlog; /* waiting instances of a group that start
	                    shaving; <= 0: the backlog never does */
	int level_pct;   /* water level (percent of capacity) that starts
	                    shaving; <= 0: the level never does */
	int64_t max_delay_us[AX_TIER_COUNT]; /* per tier; [0] is ignored */
} ax_shave_policy;

typedef struct ax_shave_load {
	int64_t backlog;   /* instances of the group waiting for admission */
	int     level_pct; /* the group's water level, 0..100 (0: none) */
	int     lowest;    /* lowest tier present (highest number), 0..3 */
} ax_shave_load;

/* 1 when load passes a threshold of p (and p is enabled), else 0. */
int ax_shave_overloaded(const ax_shave_policy *p, const ax_shave_load *load);

/*
 * How long an arriving instance of tier (0 = P0 .. 3 = P3) is delayed,
 * in microseconds; 0: not delayed. Delayed only when p is enabled, load
 * is overloaded, tier is not P0, tier is the lowest present
 * (load->lowest, which the caller computes including this instance) and
 * its largest delay is positive. The delay lies in [max/2, max] of its
 * tier, jittered by seed (any value; the same seed gives the same
 * delay), so a burst is spread over half of the largest delay and never
 * waits longer than it.
 */
int64_t ax_shave_delay(const ax_shave_policy *p, const ax_shave_load *load,
                       int tier, uint64_t seed);

#endif /* AX_SHAVING_H */
