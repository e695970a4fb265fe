/*
 * order.c - admission order for the resource detector (see
 * resource_internal.h for its files): the lanes of waiting items, one per
 * (group, pool, P0 or not), each a heap by the aging key of the tier
 * priority; the drain that admits the best lane head that fits, while
 * the instance generator keeps up; and the starvation gauge (instances
 * waiting longer than scheduler.starvation_after, per tier) with its
 * publication in component_stats.
 *
 * Invariants: a waiting item is in exactly one lane heap and in
 * rd_state.waiting (in order of since_us); the items before starve_edge
 * are exactly those counted in rd_state.starving. Cost: O(log n) per
 * push or pop in a lane, O(lanes) to pick the best head.
 */
#include "resource_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aging.h"
#include "clock.h"
#include "store_stats.h"

/*
 * Admission order: the aging key of the tier priority (engine/aging.h),
 * the one function the queue orders its heaps by, then arrival. Under
 * contention a higher tier goes first; aging lets a lower tier that has
 * waited long enough through, so that a steady flow of P0 work cannot
 * starve P3 work (a wrong interval costs either erased tiers or hours of
 * waiting, see aging.h).
 */
static int
item_before(const rd_item *a, const rd_item *b)
{
	if (a->akey != b->akey)
		return a->akey > b->akey;
	return a->seq < b->seq;
}

static int
node_before(const ax_heap_node *a, const ax_heap_node *b)
{
	return item_before(AX_HEAP_ENTRY(a, rd_item, hn),
	                   AX_HEAP_ENTRY(b, rd_item, hn));
}

/* The best waiting item of l, or NULL. */
static rd_item *
lane_top(const rd_lane *l)
{
	return AX_HEAP_ENTRY(ax_heap_top(&l->heap), rd_item, hn);
}

/*
 * it starts waiting in l: its wait (for the aging key and the starvation
 * gauge) counts from now. Time spent blocked (paused DAG) does not count:
 * that wait is an operator's choice, not a lack of capacity.
 */
ax_err
axrd_lane_push(rd_state *st, rd_lane *l, rd_item *it)
{
	it->since_us = ax_clock_mono_us();
	it->akey =
	    ax_aging_key(ax_aging_tier_priority(it->tier, it->ready->priority),
	                 it->since_us, st->aging_us);
	if (ax_heap_push(&l->heap, &it->hn) != AX_OK)
		return ax_err_set(AX_ENOMEM, COMP ": out of memory");
	it->lane  = l;
	it->state = RD_WAITING;
	l->group->nwait++;
	l->group->present[it->tier]++;
	ax_list_append(&st->waiting, &it->wn);
	st->nwaiting++;
	if (st->starve_edge == NULL)
		st->starve_edge = &it->wn;
	return AX_OK;
}

/* it, out of its lane heap, stops waiting (the gauge forgets it). */
static void
wait_leave(rd_state *st, rd_item *it)
{
	if (st->starve_edge == &it->wn)
		st->starve_edge = it->wn.next;
	if (it->starving) {
		st->starving[it->tier]--;
		it->starving = 0;
	}
	ax_list_remove(&st->waiting, &it->wn);
	st->nwaiting--;
	it->lane->group->nwait--;
	it->lane->group->present[it->tier]--;
}

/* The best waiting item of l leaves the lane (NULL when empty). */
static rd_item *
lane_pop(rd_state *st, rd_lane *l)
{
	rd_item *it = AX_HEAP_ENTRY(ax_heap_pop(&l->heap), rd_item, hn);
	if (it != NULL)
		wait_leave(st, it);
	return it;
}

/* The waiting item it leaves its lane. */
void
axrd_lane_remove(rd_state *st, rd_item *it)
{
	ax_heap_remove(&it->lane->heap, &it->hn);
	wait_leave(st, it);
}

/*
 * Counts the waiting items that have waited starve_after or longer. The
 * waiting list is in order of since_us (appended as items start to
 * wait), so the counted ones are a prefix and each item is counted once:
 * O(1) per item over its life, nothing scanned per call.
 */
void
axrd_starve_advance(rd_state *st, int64_t now)
{
	while (st->starve_edge != NULL) {
		rd_item *it = AX_LIST_ENTRY(st->starve_edge, rd_item, wn);
		if (now - it->since_us < st->starve_after_us)
			return;
		it->starving = 1;
		st->starving[it->tier]++;
		st->starve_edge = it->wn.next;
	}
}

rd_lane *
axrd_lane_get(rd_state *st, const char *group, const char *pool, int p0)
{
	char     key[600];
	rd_lane *l;

	snprintf(key, sizeof(key), "%s\x1f%s\x1f%d", group, pool, p0);
	if ((l = ax_strmap_get(st->lanes, key)) != NULL)
		return l;
	if ((l = calloc(1, sizeof(*l))) == NULL ||
	    (l->gname = strdup(group)) == NULL ||
	    (l->pname = strdup(pool)) == NULL ||
	    (l->group = axrd_group_get(st, group)) == NULL ||
	    (pool[0] != '\0' && (l->pool = axrd_pool_get(st, pool)) == NULL) ||
	    ax_strmap_put(st->lanes, key, l) != AX_OK) {
		if (l != NULL) {
			free(l->gname);
			free(l->pname);
		}
		free(l);
		return NULL;
	}
	ax_heap_init(&l->heap, node_before);
	axrd_lane_delayed_init(l);
	if (axrd_lane_spec(st, l, group) != AX_OK) {
		ax_strmap_del(st->lanes, key);
		axrd_lane_free(l);
		return NULL;
	}
	l->p0         = p0;
	l->next       = st->lane_list;
	st->lane_list = l;
	return l;
}

void
axrd_lane_free(rd_lane *l)
{
	ax_heap_fini(&l->heap);
	ax_heap_fini(&l->delayed);
	free(l->spec);
	free(l->cand);
	free(l->gname);
	free(l->pname);
	free(l);
}

/*
 * Blocks the heads of l that must not wait in it: a paused DAG's, and
 * one needing a named resource no worker of its group offers (it would
 * hold the lane until such a worker joins; blocked, it is checked again
 * every recheck).
 */
static ax_err
unplaceable_heads(ax_actor *self, rd_state *st, rd_lane *l)
{
	rd_item    *it;
	const char *res;
	char        buf[AX_RD_REASON_MAX];
	ax_err      rv;

	while ((it = lane_top(l)) != NULL) {
		const char *why = NULL;
		if (axrd_dag_paused(st, it->ready->instance->dag))
			why = "DAG_PAUSED";
		else if ((res = axrd_unoffered(st, l, it)) != NULL) {
			snprintf(buf, sizeof(buf),
			         "WAIT_RESOURCE unoffered=%s", res);
			why = buf;
		}
		if (why == NULL)
			return AX_OK;
		(void) lane_pop(st, l);
		if ((rv = axrd_block_item(self, st, it, why)) != AX_OK)
			return rv;
	}
	return AX_OK;
}

/*
 * Admits waiting items, best lane head first, while their group and pool
 * have room and the generator keeps up. An item larger than its whole
 * group still runs when the group is idle (never stuck forever).
 */
ax_err
axrd_drain(ax_actor *self, rd_state *st)
{
	ax_err rv;

	st->backpressured = 0;
	for (;;) {
		if (ax_actor_outbox_pending(self, AX_A_INSTANCE_GENERATOR) >=
		    RD_BACKPRESSURE_ITEMS) {
			st->backpressured = 1;
			return AX_OK;
		}
		rd_lane *best = NULL;
		for (rd_lane *l = st->lane_list; l != NULL; l = l->next) {
			axrd_lane_cands(st, l);
			if ((rv = unplaceable_heads(self, st, l)) != AX_OK)
				return rv;
			if (lane_top(l) == NULL ||
			    axrd_lane_hold(st, l, lane_top(l)) != NULL)
				continue;
			if (best == NULL ||
			    item_before(lane_top(l), lane_top(best)))
				best = l;
		}
		if (best == NULL)
			return AX_OK;
		if ((rv = axrd_admit(self, st, lane_pop(st, best))) != AX_OK)
			return rv;
	}
}

/*
 * Publishes the starvation gauge (instances waiting for admission longer
 * than scheduler.starvation_after, per tier) and the number waiting in
 * component_stats, for ax-api's /metrics: memory counters, one upsert
 * every RD_STATS_PERIOD at most and only when a value changed, never a
 * scan. A failure is logged at debug level; the next period tries again.
 */
void
axrd_stats_persist(rd_state *st, int64_t now)
{
	static const char *const keys[AX_TIER_COUNT + 1] = {
		"starving.P0", "starving.P1", "starving.P2",
		"starving.P3", "waiting",
	};
	ax_store_stat rows[AX_TIER_COUNT + 1];
	int           changed = !st->stats_written;

	if (st->ctx->dsn == NULL || now < st->stats_due)
		return;
	st->stats_due = now + RD_STATS_PERIOD;
	for (int i = 0; i <= AX_TIER_COUNT; i++) {
		int64_t v = i < AX_TIER_COUNT ? st->starving[i]
		                              : (int64_t) st->nwaiting;
		rows[i]   = (ax_store_stat) { .component = "resource_detector",
			                      .key       = keys[i],
			                      .value     = v };
		changed |= v != st->last_stats[i];
	}
	if (!changed || now < st->reason_down_until)
		return;
	if (axrd_store(st) == NULL)
		return;
	if (ax_store_stats_put(st->store, rows, AX_TIER_COUNT + 1) != AX_OK) {
		ax_logf(AX_LOG_DEBUG, "resource_detector", NULL, NULL,
		        "component_stats not written: %s", ax_err_detail());
		return;
	}
	for (int i = 0; i <= AX_TIER_COUNT; i++)
		st->last_stats[i] = rows[i].value;
	st->stats_written = 1;
}
