/*
 * preempt.h - preemption eligibility: which running attempt, if any, may
 * be stopped so that a waiting instance of a higher tier finds a slot.
 *
 * Pure functions without I/O (the queue service applies them, see
 * actors/queue/queue_preempt.c). Why the guards exist: preemption in
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
 * jittered delay, and at most rate_per_s victims become ready in any
 * second. Why: victims stopped together and requeued together would
 * come back as one burst, take the slots the winners just got, and be
 * preempted again (a storm); the jitter spreads them, the throttle
 * bounds what any second sees. Too long a delay costs the victims
 * latency; too short a one brings the storm back.
 */
typedef struct ax_preempt_recovery {
	int64_t delay_us;   /* the least delay */
	int64_t jitter_us;  /* added: 0 .. jitter_us, from the hash */
	int     rate_per_s; /* <= 0: no throttle */
	int64_t next_us;    /* state: the earliest instant still free */
} ax_preempt_recovery;

/*
 * The instant (now_us's clock) a victim preempted at now_us is ready
 * again: now_us + delay + (h % (jitter + 1)), moved later when that
 * instant's turn under the throttle is taken; advances r->next_us.
 * Victims are given instants in the order of the calls (the order of
 * their preemptions). h: any hash of the victim (its run_id), so that
 * the jitter is stable for one victim. Pure but for r's state; one
 * thread (the result handler's).
 */
int64_t ax_preempt_recovery_at(ax_preempt_recovery *r, int64_t now_us,
                               uint64_t h);

#endif
