/*
 * timing_wheel.h - hierarchical timing wheel: every armed schedule, retry
 * delay and timeout of the time detector.
 *
 * Role: the time detector (DESIGN.md 2) keeps one wheel and one OS timer.
 * It arms timers with ax_wheel_add(), sets its OS timer to
 * ax_wheel_next_deadline(), and on wake-up calls ax_wheel_advance() with the
 * current time, which fires every due timer in deadline order.
 *
 * Clock: the wheel is clock-agnostic; deadlines and "now" are int64
 * microseconds on one clock chosen by the owner, and "now" must never go
 * back. Use the monotonic clock (ax_clock_mono_us). Retry delays and
 * timeouts are durations and map directly; a schedule due at a UTC instant
 * is armed at mono_now + (utc_due - utc_now). When the wall clock jumps
 * (the UTC-minus-monotonic offset moves by more than 2 s), the time
 * detector logs the jump and re-arms its schedule timers from their UTC
 * instants with ax_wheel_reschedule() (O(1) each); timers on durations stay
 * correct untouched. A UTC deadline computed before the jump that is now in
 * the past simply fires at the next advance.
 *
 * Cost: add, cancel and reschedule are O(1); advance is amortised O(1) per
 * fired timer (a timer moves down at most 10 levels in its life) plus
 * O(levels) per call; next_deadline is O(1) while its cached answer holds
 * (see its contract for when it scans one slot). The one bulk step is a
 * cascade: when time enters a level-L slot (every 64^L us) its timers move
 * down in one go. With 10,000 once-a-minute schedules that is about 0.3 ms
 * every 16.8 s; with 1,000,000 timers spread over an hour, one advance in
 * 18 minutes pays about 0.1 s (tests/bench/bench_timing_wheel.c).
 *
 * Memory: the caller embeds an ax_wheel_timer (40 bytes) in its own object;
 * the wheel allocates nothing per timer. The id mode (ax_wheel_add_id)
 * allocates nodes from an internal pool of 256 KiB chunks (POOL_CHUNK_BYTES
 * in timing_wheel.c), 6,552 nodes of 40 bytes each, one chunk at a time
 * and never returned before ax_wheel_free. 1,000,000 timers take about
 * 40 MB, which is why the time detector puts only the schedules due soon
 * on the wheel.
 *
 * Threads: a wheel is owned by one thread (the time detector actor); no
 * function here locks.
 */
#ifndef AX_TIMING_WHEEL_H
#define AX_TIMING_WHEEL_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"

typedef struct ax_wheel ax_wheel;

/*
 * A timer node, embedded by the caller (intrusive: no allocation per timer).
 * Zeroed memory (or ax_wheel_timer_init) is an idle timer. While armed the
 * node belongs to the wheel: the caller must not move, free or overwrite it
 * until it fired or was cancelled. Fields are read-only for the caller.
 */
typedef struct ax_wheel_timer {
	struct ax_wheel_timer *next; /* list links, owned by the wheel */
	struct ax_wheel_timer *prev;
	int64_t                deadline_us; /* as given to ax_wheel_add */
	uint64_t               cookie;      /* as given to ax_wheel_add */
	uint32_t               state; /* 0 idle, else where it is linked */
	uint32_t               gen;   /* id mode: generation of this node */
} ax_wheel_timer;

/*
 * Called by ax_wheel_advance once per due timer, in deadline order (ties in
 * insertion order). The timer is idle when called: the callback may re-arm
 * it (ax_wheel_add on the same node), add or cancel other timers, query
 * next_deadline and count, and free the object embedding t. It must not
 * call ax_wheel_advance or ax_wheel_free. A timer the callback adds with a
 * deadline at or before the instant being fired fires at the next advance,
 * not in this one (a callback re-arming "now" cannot loop forever).
 * For an id-mode timer, t is returned to the pool after the callback unless
 * the callback re-armed it.
 */
typedef void (*ax_wheel_fire_fn)(void *arg, ax_wheel_timer *t);

/*
 * Creates a wheel whose time starts at now_us (>= 0; both AX clocks are).
 * Returns AX_EINVAL for a NULL out or negative now_us, AX_ENOMEM.
 */
ax_err ax_wheel_new(int64_t now_us, ax_wheel **out);

/* Frees the wheel and its id-mode pool. Armed embedded timers are simply
 * forgotten (their memory is the caller's). Accepts NULL. */
void ax_wheel_free(ax_wheel *w);

/* Makes t an idle timer (same as zeroing it). */
void ax_wheel_timer_init(ax_wheel_timer *t);

/* Whether t is armed (added and not yet fired or cancelled). */
int ax_wheel_timer_armed(const ax_wheel_timer *t);

/*
 * Arms t to fire at deadline_us (any value: a deadline at or before the
 * wheel's time fires at the next advance). cookie is handed back through
 * t->cookie. O(1), no allocation.
 * Returns AX_EINVAL for NULL w or t, AX_EBUSY when t is already armed.
 */
ax_err ax_wheel_add(ax_wheel *w, int64_t deadline_us, uint64_t cookie,
                    ax_wheel_timer *t);

/*
 * Disarms t. O(1). Returns AX_OK when t was armed, AX_ENOENT when it was
 * idle (already fired or cancelled: harmless for callers racing a fire),
 * AX_EINVAL for NULL arguments.
 */
ax_err ax_wheel_cancel(ax_wheel *w, ax_wheel_timer *t);

/*
 * Moves t to a new deadline whether or not it is armed (cancel + add; it
 * counts as a new insertion for tie order). O(1). AX_EINVAL for NULLs.
 */
ax_err ax_wheel_reschedule(ax_wheel *w, ax_wheel_timer *t, int64_t deadline_us,
                           uint64_t cookie);

/*
 * Id mode: arms a pool-allocated timer and returns its id (never 0) in
 * *id_out, for callers that have no object to embed a node in. The
 * callback sees the node with t->cookie == cookie. Returns AX_EINVAL for
 * NULLs, AX_ENOMEM.
 */
ax_err ax_wheel_add_id(ax_wheel *w, int64_t deadline_us, uint64_t cookie,
                       uint64_t *id_out);

/*
 * Cancels an id-mode timer. Returns AX_OK, AX_ENOENT when the id already
 * fired, was cancelled or never existed (ids are generation-checked, so a
 * stale id never cancels a newer timer), AX_EINVAL for a NULL w.
 */
ax_err ax_wheel_cancel_id(ax_wheel *w, uint64_t id);

/*
 * Fires, through cb(arg, t), every armed timer whose deadline <= now_us,
 * in deadline order, ties in insertion order, then sets the wheel's time
 * to now_us. Returns AX_OK; AX_EINVAL when now_us is before the wheel's
 * time (the clock went back: use a monotonic clock) or cb is NULL, with
 * nothing fired; AX_ESTATE when called from inside a callback.
 * *fired_out (may be NULL) receives the number of timers fired.
 */
ax_err ax_wheel_advance(ax_wheel *w, int64_t now_us, ax_wheel_fire_fn cb,
                        void *arg, size_t *fired_out);

/*
 * The earliest deadline among armed timers, exact, into *out (for the one
 * OS timer; a value <= now means "advance now"). Returns AX_ENOENT when no
 * timer is armed. The answer is cached: O(1) until the earliest timer is
 * cancelled or the wheel advances; then one recomputation costs O(1) when
 * the earliest timer is within 64 us of the wheel's time and otherwise one
 * walk of the single wheel slot that holds it (the slot the next advance
 * will cascade anyway), never a walk of the whole wheel.
 */
ax_err ax_wheel_next_deadline(ax_wheel *w, int64_t *out);

/* Number of armed timers (both modes). */
size_t ax_wheel_count(const ax_wheel *w);

/* The wheel's time: the last now_us given to advance (or to new). */
int64_t ax_wheel_now(const ax_wheel *w);

#endif /* AX_TIMING_WHEEL_H */
