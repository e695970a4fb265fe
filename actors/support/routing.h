/*
 * routing.h - how the queue service picks a worker of a group for an
 * attempt: the routing plug-in point (const ops table per strategy).
 *
 * Role: the queue service (actors/queue/) keeps, per channel and worker
 * group, a priority queue of attempts; workers pull. A strategy decides
 * either WHICH of the workers ready to take work right now gets an attempt
 * (round_robin, random, least_load, failover: `choose`), or that the
 * attempt is BOUND to one worker and waits for it (consistent_hash,
 * pinned: `sticky` = 1, target resolved with the group's ring or the
 * pinned name).
 *
 * Invariants: strategies are pure functions of their inputs plus the small
 * per-group ax_routing_state; nothing here allocates except the ring.
 * Ring points and keys hash with ax_hash_str (engine/hash.h), the same in
 * every process and version, so a key keeps its worker across restarts.
 * The ring holds AX_ROUTING_VNODES virtual nodes per worker, so a worker
 * joining or leaving moves about 1/n of the keys and the rest stay.
 *
 * Workload: called once per dispatch decision; candidates are the workers
 * of one group waiting with a Pull (tens), the ring lookup is a binary
 * search over workers x AX_ROUTING_VNODES points.
 */
#ifndef AX_ROUTING_H
#define AX_ROUTING_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"

#define AX_ROUTING_VNODES 64 /* virtual nodes per worker on the ring */

/* One worker able to take the attempt now. */
typedef struct ax_routing_cand {
	const char *worker_id;
	uint64_t    ordinal;     /* stable rank in the group (join order) */
	int32_t     slots_total; /* slots of the worker */
	int32_t     slots_used;  /* slots of attempts in flight on it */
	int32_t     load_x100;   /* host load average x100 (heartbeats) */
} ax_routing_cand;

/* Per-group mutable state of the non-sticky strategies. */
typedef struct ax_routing_state {
	uint64_t rr_last; /* ordinal chosen last by round_robin */
	uint64_t rng;     /* xorshift64 state of random; never 0 */
} ax_routing_state;

/* Consistent-hash ring of the live workers of one group. */
typedef struct ax_routing_ring {
	struct ax_ring_point *points; /* sorted by hash */
	size_t                npoints;
	char                **ids; /* worker ids on the ring (owned) */
	size_t                nids;
} ax_routing_ring;

typedef struct ax_routing_ops {
	const char *name;   /* "round_robin", ... */
	int         sticky; /* 1: the attempt waits for its target worker */
	/*
	 * Non-sticky: index in cands[0..n) (n >= 1) of the worker to get
	 * the attempt; key is the attempt's routing key (may be "").
	 */
	size_t (*choose)(ax_routing_state *st, const ax_routing_cand *cands,
	                 size_t n, const char *key);
	/*
	 * Sticky: the worker id the attempt is bound to, or NULL when none
	 * can be named (empty ring). For pinned it is `pinned` itself.
	 * The result points into ring or pinned.
	 */
	const char *(*target)(const ax_routing_ring *ring, const char *key,
	                      const char *pinned);
} ax_routing_ops;

extern const ax_routing_ops ax_routing_round_robin;
extern const ax_routing_ops ax_routing_random;
extern const ax_routing_ops ax_routing_least_load;
extern const ax_routing_ops ax_routing_failover;
extern const ax_routing_ops ax_routing_consistent_hash;
extern const ax_routing_ops ax_routing_pinned;

/*
 * The strategy named name ("" or NULL: round_robin). AX_EINVAL with a
 * detail listing the strategies when the name is unknown.
 */
ax_err ax_routing_find(const char *name, const ax_routing_ops **out);

/* Seeds st (random seed from getrandom, rr at the start). */
void ax_routing_state_init(ax_routing_state *st);

/* Ring lifecycle: init on zeroed memory; fini frees, safe twice. */
void ax_routing_ring_fini(ax_routing_ring *r);

/*
 * Adds / removes a worker id (copied) and rebuilds the ring. Adding an id
 * already there and removing an absent one are no-ops. AX_ENOMEM.
 */
ax_err ax_routing_ring_add(ax_routing_ring *r, const char *worker_id);
ax_err ax_routing_ring_remove(ax_routing_ring *r, const char *worker_id);

/* The worker owning key on the ring; NULL when the ring is empty. */
const char *ax_routing_ring_lookup(const ax_routing_ring *r, const char *key);

#endif /* AX_ROUTING_H */
