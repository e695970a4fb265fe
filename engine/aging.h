/*
 * aging.h - the aging key: the order of waiting work by its static
 * priority improved by the time it has waited, as a pure function.
 *
 * Role: the queue service orders its heaps (per channel and worker
 * group, per worker) by this key; the resource detector orders its
 * admission lanes by the same function, of the tier priority below, so
 * that admission and dispatch agree on who goes first (DESIGN.md 6b: one
 * aging function).
 *
 * Policy: the effective priority of an item is
 *     priority + waited / aging_interval
 * (waiting one interval is worth one priority step, continuously, not in
 * whole steps). It exists so that a steady flow of high-priority work
 * cannot starve low-priority work forever; too short an interval erases
 * priorities (everything old wins), too long lets low tiers wait for
 * hours under load. An interval <= 0 turns aging off: the key is the
 * priority alone.
 *
 * Key: waited = now - enqueued for every item alike, so comparing
 * effective priorities at any instant is comparing
 *     priority - enqueued / aging_interval,
 * a key that does not change with time: a heap ordered by it stays valid
 * without re-sorting. A larger key goes first; equal keys are for the
 * caller to break (the queue: arrival order).
 *
 * Clock: enqueued and now are microseconds on one clock (the queue uses
 * the monotonic clock); only differences and ratios matter. Priorities
 * are the task's static priority (larger runs first; any int32 value).
 * Threads: pure functions, any thread.
 */
#ifndef AX_AGING_H
#define AX_AGING_H

#include <stdint.h>

/*
 * The ordering key of an item of static priority enqueued at enqueued_us,
 * with aging_us the aging interval (<= 0: no aging). For any instant now,
 * key(a) > key(b) exactly when a's effective priority at now is higher
 * than b's (up to double rounding, which the key never has to redo: the
 * key is computed once, at enqueue). A re-queued item keeps its key.
 */
double ax_aging_key(int64_t priority, int64_t enqueued_us, int64_t aging_us);

/*
 * The effective priority at now_us of the same item: priority + (now_us -
 * enqueued_us) / aging_us (priority alone when aging_us <= 0). For
 * reports and thresholds (how far aging has lifted an item); order items
 * by ax_aging_key, which needs no now.
 */
double ax_aging_effective(int64_t priority, int64_t enqueued_us,
                          int64_t now_us, int64_t aging_us);

/*
 * Tiers (DESIGN.md 6b): a DAG's impact P0..P3 is its tier; the task's
 * priority (0..100, higher first) orders it inside the tier. Admission
 * orders waiting instances of every tier by one aging key of the
 * priority below, so that under contention a higher tier goes first
 * (any priority of it beats any priority of the next tier at an equal
 * wait) and aging still lifts a waiting lower tier over a fresh higher
 * one after AX_TIER_STEP aging intervals per tier (50 minutes with the
 * default 30 s): a steady flow of P0 work delays P3 work, it cannot
 * starve it. A smaller step would let a high priority of a lower tier
 * pass a low priority of a higher one at once; a larger one only
 * lengthens the wait before aging crosses a tier.
 */
#define AX_TIER_COUNT 4   /* P0 .. P3 */
#define AX_TIER_STEP  101 /* priority steps per tier: the range 0..100 */

/*
 * The static priority that ax_aging_key and ax_aging_effective take for
 * an instance of tier (0 = P0 .. 3 = P3; outside: P3) and priority
 * (clamped to 0..100, the range the DAG format allows):
 *     (AX_TIER_COUNT - 1 - tier) * AX_TIER_STEP + priority.
 */
int64_t ax_aging_tier_priority(int tier, int64_t priority);

#endif /* AX_AGING_H */
