/*
 * preempt.h - preemption eligibility: which running attempt, if any, may
 * be stopped so that a waiting instance of a higher tier finds a slot.
 *
 * Pure functions without I/O (the queue service applies them, see
 * actors/queue/queue_preempt.c), and the recovery of the victims: their
 * jittered delay and the throttle that lets them back in tier order
 * (the result handler applies them). Why the guards exist: preemption in
 * production turns into storms when a victim restarts, is preempted
 * again, and loses its work over and over; each rule below bounds one
 * way that happens. A wrong "yes" costs the victim's work so far plus
 * its restart; a wrong "no" leaves the higher tier waiting for a slot
 * to free by itself.
 *
 * The rules, in the order they are checked (ax_preempt_check):
 *   1. only attempts of tasks marked `preemptible: true`;
 *   2. only attempts whose user code has started (a dispatch not yet
 *      running frees nothing sooner than its start);
 *   3. only for a winner at least one tier above the victim (P0 is tier
 *      0, P3 tier 3);
 *   4. a victim preempted before (inside preemption.window) only for a
 *      winner at least two tiers above it;
 *   5. never an attempt that has run longer than preemption.max_runtime;
 *   6. at most preemption.per_worker_per_minute preemptions on the
 *      victim's worker in any minute.
 */
#ifndef AX_PREEMPT_H
#define AX_PREEMPT_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "heap.h"

typedef struct ax_preempt_policy {
	int64_t max_runtime_us;     /* rule 5; <= 0: no limit */
	int     per_worker_per_min; /* rule 6; <= 0: no preemption at all */
} ax_preempt_policy;

/* One running attempt that might be stopped. */
typedef struct ax_preempt_cand {
	int     preemptible;      /* the task's flag */
	int     tier;             /* 0 = P0 .. 3 = P3 */
	int     priority;         /* static priority, higher first */
	int64_t runtime_us;       /* since its start; < 0: not started */
	int     preempted_before; /* preempted inside the window */
	int     worker_recent;    /* its worker's preemptions, last minute */
} ax_preempt_cand;

/* The verdict on one candidate; a larger refusal passed more rules. */
typedef enum ax_preempt_verdict {
	AX_PREEMPT_NO_CANDIDATE = 0, /* nothing runs there */
	AX_PREEMPT_NOT_PREEMPTIBLE,
	AX_PREEMPT_NOT_STARTED,
	AX_PREEMPT_TIER_NOT_LOWER,
	AX_PREEMPT_NEEDS_TWO_TIERS,
	AX_PREEMPT_RUNTIME_EXCEEDED,
	AX_PREEMPT_WORKER_LIMIT,
	AX_PREEMPT_OK, /* may be stopped */
} ax_preempt_verdict;

/* The stable reason code of v ("NOT_PREEMPTIBLE", ..., "PREEMPTED" for
 * AX_PREEMPT_OK). */
const char *ax_preempt_reason(ax_preempt_verdict v);

/* The verdict on stopping c for a winner of winner_tier under p. */
ax_preempt_verdict ax_preempt_check(const ax_preempt_policy *p,
                                    int winner_tier, const ax_preempt_cand *c);

/*
 * The victim for a winner of winner_tier among c[0..n): the index of the
 * eligible candidate of the lowest tier, then the lowest priority, then
 * the shortest runtime (the least work lost); -1 when none is eligible.
 * *why (may be NULL) gets AX_PREEMPT_OK, or the refusal of the candidate
 * that came closest (AX_PREEMPT_NO_CANDIDATE when n is 0).
 */
long ax_preempt_choose(const ax_preempt_policy *p, int winner_tier,
                       const ax_preempt_cand *c, size_t n,
                       ax_preempt_verdict *why);

/*
 * The recovery of preempted instances: a victim is ready again after a
 * jittered delay, then passes a throttle that lets at most rate_per_s
 * victims through in any second, the highest tier first. Why: victims
 * stopped together and requeued together would come back as one burst,
 * take the slots the winners just got, and be preempted again (a
 * storm); the jitter spreads them, the throttle bounds what any second
 * sees, and the tier order lets the work that matters most back first
 * when more are due than the throttle passes. Too long a delay costs
 * the victims latency; too short a one brings the storm back; too low
 * a rate leaves victims waiting behind the throttle.
 */
typedef struct ax_preempt_recovery {
	int64_t delay_us;  /* the least delay */
	int64_t jitter_us; /* added: 0 .. jitter_us, from the hash */
} ax_preempt_recovery;

/*
 * The instant (now_us's clock) a victim preempted at now_us is due
 * again: now_us + delay + (h % (jitter + 1)). h: any hash of the victim
 * (its run_id), so that the jitter is stable for one victim. Pure.
 */
int64_t ax_preempt_recovery_at(const ax_preempt_recovery *r, int64_t now_us,
                               uint64_t h);

/*
 * One victim waiting for its recovery, embedded by its owner (who owns
 * it; the throttle only links it). The caller fills id .. due_us before
 * ax_preempt_throttle_add and changes nothing while it is in.
 */
typedef struct ax_preempt_victim {
	ax_heap_node node;     /* the throttle's */
	int64_t      id;       /* the caller's key (the instance id) */
	int          tier;     /* 0 = P0 .. 3 = P3 */
	int          priority; /* static priority, higher first */
	int64_t      due_us;   /* ready again from then (the jittered
	                          instant); the throttle's clock */
	uint64_t seq;          /* the throttle's: order of the adds */
	int      is_due;       /* the throttle's: in due (1) or waiting */
} ax_preempt_victim;

/*
 * The throttle: victims not yet due wait by due instant; once due they
 * are released one at a time, the lowest tier number first, then the
 * higher priority, then the earliest due, then the first added, at most
 * one every ceil(1 s / rate_per_s), so that no window of one second ever
 * holds more than rate_per_s releases (spacing, not a bucket: a burst
 * never builds up while it is idle). rate_per_s <= 0: no throttle, every
 * due victim is released at once (still in that order).
 *
 * Invariants: 1. a victim is in exactly one of waiting (due_us > the
 * last instant given to ax_preempt_throttle_pop) and due; 2. two
 * releases are at least gap_us apart (rate_per_s > 0); 3. a victim
 * released is gone: one due later, of any tier, comes after it.
 *
 * Cost: add, remove, pop O(log n); 16 bytes a victim in the heaps'
 * arrays beside the caller's victim. One thread (the owner's); no I/O,
 * no clock: the caller gives every instant.
 */
typedef struct ax_preempt_throttle {
	ax_heap  waiting;    /* not due yet, earliest due first */
	ax_heap  due;        /* due, in release order */
	int      rate_per_s; /* <= 0: no throttle */
	int64_t  gap_us;     /* least time between two releases */
	int64_t  next_us;    /* no release before this instant */
	uint64_t seq;        /* adds so far */
} ax_preempt_throttle;

/* An empty throttle releasing at most rate_per_s per second (<= 0: no
 * limit). Allocates nothing. */
void ax_preempt_throttle_init(ax_preempt_throttle *t, int rate_per_s);

/* Frees the heaps' arrays (not the victims). Safe on zeroed memory. */
void ax_preempt_throttle_fini(ax_preempt_throttle *t);

/* Adds v (in no throttle; id .. due_us filled). AX_ENOMEM (t
 * unchanged). */
ax_err ax_preempt_throttle_add(ax_preempt_throttle *t, ax_preempt_victim *v);

/* Takes v (in t) out without releasing it. */
void ax_preempt_throttle_remove(ax_preempt_throttle *t, ax_preempt_victim *v);

/*
 * The victim released at now_us (removed from t; the caller owns it
 * again), or NULL when none is due or the throttle holds them until
 * ax_preempt_throttle_next_us. Call it again until NULL: one release a
 * call. now_us must not go backwards between calls.
 */
ax_preempt_victim *ax_preempt_throttle_pop(ax_preempt_throttle *t,
                                           int64_t              now_us);

/* The earliest instant at which pop may release one (a due victim once
 * the gap has passed, or the first due of those waiting); INT64_MAX when
 * t is empty. */
int64_t ax_preempt_throttle_next_us(const ax_preempt_throttle *t);

/* Victims in t, due and not yet due. */
size_t ax_preempt_throttle_count(const ax_preempt_throttle *t);

/* Of those, the ones due but held by the throttle as of the last pop. */
size_t ax_preempt_throttle_held(const ax_preempt_throttle *t);

#endif
