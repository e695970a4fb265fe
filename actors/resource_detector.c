/*
 * resource_detector.c - admission of ready instances against worker-group
 * slots, named pools, the P0 reserves, paused DAGs and Allow/Block rules,
 * in tier order with aging, and the starvation gauge (see
 * resource_detector.h).
 *
 * Invariants:
 * - An instance key is in `items` from its first InstanceReady until the
 *   SlotReleased of its attempt: a duplicate InstanceReady meanwhile is
 *   ignored, so a replay never admits twice.
 * - group->used and pool->used are the sums of the slots of ADMITTED
 *   items, used_low those of the P1..P3 ones; they only change on admit,
 *   SlotReleased and AttemptHeld.
 * - A waiting item is in its lane heap and in rd_state.waiting (in order
 *   of since_us); the items before starve_edge are exactly those counted
 *   in rd_state.starving.
 * - Waiting items sit in exactly one lane heap; blocked ones in `blocked`.
 * - A blocked item's task_instances row shows its block reason
 *   (DAG_PAUSED, or "RULE_BLOCKED rule=12" for an item an Allow/Block
 *   rule holds, engine/rule.h), so `axctl instance list` and the API say
 *   why it waits; when it is released the row gets back the reason it had
 *   (WAIT_RESOURCE while PENDING, none once admitted). `rewrite` lists the
 *   items whose row still needs that write; after a handler call it holds
 *   only blocked items whose row did not exist yet (retried every
 *   recheck).
 * - Rules: the rules table is read before the first batch and before the
 *   batch after a ControlOp "rules" (the control thread forwards ax-api's
 *   NOTIFY). An arriving item is checked against them; the items already
 *   waiting or blocked are checked again only when the verdicts may have
 *   changed: after a reload, or when a rule's window opens or closes or
 *   it expires (a signature of the rules in force, computed after every
 *   batch and every second while a rule is timed). Admitted items are
 *   not recalled: a rule holds what has not been admitted yet.
 *
 * Workload: thousands of decisions per second; each is O(log n) in its
 * lane plus O(lanes) to pick the best lane head (a handful of lanes).
 * No database access after start on the admission path: only blocks and
 * their release write (one batched statement per handler call), and the
 * rules table is read once per change of it. A rule naming tier, owner or
 * tag reads the DAG's definition from the registry (memory; a miss costs
 * the registry's one round trip).
 */
#include "resource_detector.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aging.h"
#include "buf.h"
#include "clock.h"
#include "dag_registry.h"
#include "flow_util.h"
#include "heap.h"
#include "hmap.h"
#include "list.h"
#include "rule.h"
#include "store.h"
#include "store_rules.h"
#include "store_stats.h"

#define COMP AX_A_RESOURCE_DETECTOR

/* Stop admitting while this many items wait in our outbox to the
 * instance generator: it is not keeping up, and admitting more only moves
 * the queue into its inbox where nothing can reorder it. */
#define RD_BACKPRESSURE_ITEMS 16384
#define RD_BACKPRESSURE_RETRY (5 * AX_USEC_PER_MSEC)
/* Paused DAGs are re-checked this often (the registry is memory: cheap). */
#define RD_PAUSE_RECHECK AX_USEC_PER_SEC
/* A block reason whose row has not appeared after this many rechecks is
 * given up (the plan that writes the row was lost): the row keeps the
 * reason the plan gives it. */
#define RD_REASON_TRIES 60
/* Reason writes give up on an unreachable database quickly and pause for
 * a recheck period: admissions never wait on a display. */
#define RD_REASON_RECONNECT (200 * AX_USEC_PER_MSEC)
/* The starvation gauge is published this often at most. */
#define RD_STATS_PERIOD AX_USEC_PER_SEC

enum { RD_R_NONE = 0, RD_R_BLOCK, RD_R_RESTORE }; /* rd_item.reason_write */

enum { RD_WAITING = 0, RD_ADMITTED, RD_BLOCKED };

typedef struct rd_group rd_group;
typedef struct rd_pool  rd_pool;
typedef struct rd_lane  rd_lane;

typedef struct rd_item {
	Ax__InstanceReady *ready;     /* owned (protobuf-c unpacked) */
	char              *trace;     /* owned; may be NULL */
	uint64_t           seq;       /* arrival order: FIFO among equals */
	int                state;     /* RD_* */
	int                announced; /* a DELAY/BLOCK event was sent */
	int32_t            slots;
	int8_t             tier;     /* 0 = P0 .. 3 = P3 (see item_profile) */
	int64_t            cpu;      /* millicores it declares (0: none) */
	int64_t            mem;      /* bytes it declares (0: none) */
	uint8_t            starving; /* counted in rd_state.starving */
	double             akey; /* aging key, set when it starts waiting */
	int64_t            since_us; /* mono: it started waiting (lane_push) */
	rd_lane           *lane;
	ax_heap_node       hn;   /* in lane->heap while RD_WAITING */
	ax_list_node       wn;   /* in rd_state.waiting while RD_WAITING */
	uint8_t            held; /* blocked once admitted: READY */
	uint8_t            reason_write; /* RD_R_*: a row write to make */
	uint8_t            reason_on;    /* block_reason is on its row */
	uint8_t            in_rewrite;   /* listed in rd_state.rewrite */
	uint8_t            reason_tries; /* writes that found no row */
	int64_t            rule_id;      /* the rule holding it; 0: none */
	char               block_reason[48];
	char               key[]; /* instance key */
} rd_item;

struct rd_group {
	int64_t agg;     /* group total from an aggregate report, -1: none */
	int64_t agg_p0;  /* of agg, slots reserved for P0 */
	int64_t workers; /* sum of per-worker totals */
	int64_t workers_p0;       /* sum of per-worker P0 reserves */
	int     nworker;          /* workers reported alive */
	int64_t used;             /* slots of admitted items */
	int64_t used_low;         /* of used, slots of admitted P1..P3 items */
	int64_t agg_cpu, agg_mem; /* offered, from the aggregate report */
	int64_t workers_cpu, workers_mem; /* sums of per-worker reports */
	int64_t used_cpu, used_mem;       /* declared by admitted items */
};

struct rd_pool {
	int64_t slots;
	int64_t reserve_p0; /* of slots, kept for P0 (pools.reserve_p0) */
	int64_t used;
	int64_t used_low; /* of used, by P1..P3 items */
};

/* A lane holds the waiting items of one (group, pool) and one side of
 * the P0 reserve: P0 items in one lane, P1..P3 in another, so that a
 * lower-tier head the reserve holds back never blocks a P0 item that
 * may use the reserve. */
struct rd_lane {
	rd_group *group;
	rd_pool  *pool; /* NULL: no pool */
	int       p0;   /* holds P0 items (may use the reserves) */
	char     *gname, *pname;
	ax_heap   heap; /* waiting items, best first (item_before) */
	rd_lane  *next; /* all lanes */
};

typedef struct rd_worker {
	rd_group *group;
	int64_t   total;
	int64_t   reserve_p0;
	int64_t   cpu, mem;
} rd_worker;

typedef struct rd_state {
	const ax_pipeline_ctx *ctx;
	int64_t                overcommit;
	int64_t                default_group;
	int64_t                default_pool;
	int64_t                aging_us; /* scheduler.aging_interval */
	int64_t       starve_after_us;   /* scheduler.starvation_after */
	ax_list       waiting;           /* RD_WAITING items by since_us */
	size_t        nwaiting;
	ax_list_node *starve_edge;          /* first waiting item not counted
	                                       starving; NULL: none */
	int64_t    starving[AX_TIER_COUNT]; /* per tier */
	int64_t    stats_due;               /* mono: next component_stats */
	int64_t    last_stats[AX_TIER_COUNT + 1];
	int        stats_written;
	ax_strmap *items;   /* key -> rd_item */
	ax_strmap *groups;  /* name -> rd_group */
	ax_strmap *pools;   /* name -> rd_pool */
	ax_strmap *lanes;   /* group\x1fpool -> rd_lane */
	ax_strmap *workers; /* group\x1fworker -> rd_worker */
	rd_lane   *lane_list;
	rd_item  **blocked;
	size_t     nblocked, capblocked;
	rd_item  **fresh; /* arrived in this batch */
	size_t     nfresh, capfresh;
	rd_item  **rewrite; /* rows whose reason must change */
	size_t     nrewrite, caprewrite;
	ax_store  *store;             /* opened on the first reason write */
	int64_t    reason_retry_at;   /* mono: missing rows */
	int64_t    reason_down_until; /* mono: after a failure */
	uint64_t   seq;
	int        backpressured;
	ax_rule   *rules; /* the rules table, parsed */
	size_t     nrules;
	int        rules_dag;    /* a rule names tier/owner/tag */
	int        rules_timed;  /* a rule has a window/expiry */
	int        rules_reload; /* read the table before use */
	int        rules_dirty;  /* verdicts may have changed */
	uint64_t   rules_gen;    /* loads so far */
	uint64_t   rules_sig;    /* rules_signature() last seen */
	uint64_t   admitted, delayed, blocked_count, ignored; /* counters */
} rd_state;

/* ---------------------------------------------------------------------- */
/* helpers */

static void
item_free(void *p)
{
	rd_item *it = p;
	if (it == NULL)
		return;
	ax__instance_ready__free_unpacked(it->ready, NULL);
	free(it->trace);
	free(it);
}

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
static ax_err
lane_push(rd_state *st, rd_lane *l, rd_item *it)
{
	it->since_us = ax_clock_mono_us();
	it->akey =
	    ax_aging_key(ax_aging_tier_priority(it->tier, it->ready->priority),
	                 it->since_us, st->aging_us);
	if (ax_heap_push(&l->heap, &it->hn) != AX_OK)
		return ax_err_set(AX_ENOMEM, COMP ": out of memory");
	it->lane  = l;
	it->state = RD_WAITING;
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
static void
lane_remove(rd_state *st, rd_item *it)
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
static void
starve_advance(rd_state *st, int64_t now)
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

static ax_err
ptr_push(rd_item ***v, size_t *n, size_t *cap, rd_item *it)
{
	if (ax_grow((void **) v, cap, *n + 1, sizeof(**v)) != AX_OK)
		return ax_err_set(AX_ENOMEM, COMP ": out of memory");
	(*v)[(*n)++] = it;
	return AX_OK;
}

static rd_group *
group_get(rd_state *st, const char *name)
{
	rd_group *g = ax_strmap_get(st->groups, name);
	if (g != NULL)
		return g;
	if ((g = calloc(1, sizeof(*g))) == NULL)
		return NULL;
	g->agg = -1;
	if (ax_strmap_put(st->groups, name, g) != AX_OK) {
		free(g);
		return NULL;
	}
	return g;
}

/*
 * How many slots the group may have admitted at once. Overcommit: the
 * queue should already hold the next attempt when a worker pulls, or the
 * worker idles for a round trip through the pipeline; too high a factor
 * only lengthens the queue (work admitted long before it can run ties up
 * nothing but memory and makes priorities apply later). The default, 4,
 * is Celery's prefetch multiplier too. With short tasks the admitted
 * window is also the pipeline's batch: `axctl bench --scenario
 * throughput` (2 workers x 64 slots, noop) used about 380 us of CPU per
 * instance at 2 and about 340 us at 4, as each actor and transaction
 * handled twice the items per call.
 *
 * Cold start: the queue reports capacity only after workers register,
 * which may be after the first schedules fire. Admitting nothing until
 * then would stall the pipeline on a message that may come late (and
 * with no workers ever, the work would wait silently); admitting a
 * bounded default lets the first attempts reach the queue, where they
 * wait for the first pull. Cost of a wrong guess: at most that many
 * attempts queued for a group that turns out smaller.
 */
static int64_t
group_limit(const rd_state *st, const rd_group *g)
{
	if (g->agg >= 0)
		return g->agg * st->overcommit;
	if (g->nworker > 0)
		return g->workers * st->overcommit;
	return st->default_group;
}

static rd_pool *
pool_get(rd_state *st, const char *name)
{
	rd_pool *p = ax_strmap_get(st->pools, name);
	if (p != NULL)
		return p;
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	p->slots = st->default_pool;
	if (ax_strmap_put(st->pools, name, p) != AX_OK) {
		free(p);
		return NULL;
	}
	return p;
}

/*
 * How many slots P1..P3 items of g may have admitted at once, out of lim
 * (group_limit). Without a P0 reserve: all of lim. With one: the slots
 * of the group's workers less the reserve, without overcommit, because
 * the queue does not know tiers: lower-tier work admitted beyond the
 * unreserved slots would wait in the queue and be dispatched into the
 * reserved slots as they free. The cost is the prefetch of lower tiers
 * (a round trip through the pipeline per slot that frees); the benefit is
 * that a P0 instance always finds the reserve free on arrival.
 */
static int64_t
group_low_limit(const rd_group *g, int64_t lim)
{
	int64_t total = g->agg >= 0 ? g->agg : g->workers;
	int64_t res =
	    g->agg >= 0 ? g->agg_p0 : (g->nworker > 0 ? g->workers_p0 : 0);
	if (res <= 0)
		return lim;
	return total > res ? total - res : 0;
}

/*
 * Whether the cpu or memory it declares (need) fits a group offering
 * total (0: not reported, no limit) of which used are declared by
 * admitted items. Like slots, an item larger than the whole group goes
 * when nothing that declares that resource is admitted.
 */
static int
res_fits(int64_t need, int64_t used, int64_t total)
{
	return need <= 0 || total <= 0 || used + need <= total || used == 0;
}

/*
 * What keeps the head it of lane l from its admission, or NULL when it
 * may go: "cpu" / "memory" (the group's workers offer too little of what
 * it declares beside the admitted items), or "group_slots" / "pool_slots" (all
 * taken), "reserved_p0" / "pool_reserved_p0" (what is left is the P0 reserve;
 * P1..P3 never take it, even on an idle group). An item larger than its whole
 * group or pool still runs when that is idle (never stuck forever).
 */
static const char *
lane_hold(const rd_state *st, const rd_lane *l, const rd_item *it)
{
	const rd_group *g   = l->group;
	const rd_pool  *p   = l->pool;
	int64_t         lim = group_limit(st, g);

	if (g->used + it->slots > lim && !(g->used == 0 && lim > 0))
		return "group_slots";
	if (!res_fits(it->cpu, g->used_cpu,
	              g->agg >= 0 ? g->agg_cpu : g->workers_cpu))
		return "cpu";
	if (!res_fits(it->mem, g->used_mem,
	              g->agg >= 0 ? g->agg_mem : g->workers_mem))
		return "memory";
	if (p != NULL && p->used + it->slots > p->slots &&
	    !(p->used == 0 && p->slots > 0))
		return "pool_slots";
	if (l->p0)
		return NULL;
	if (g->used_low + it->slots > group_low_limit(g, lim))
		return "reserved_p0";
	if (p != NULL && p->reserve_p0 > 0 &&
	    p->used_low + it->slots > p->slots - p->reserve_p0)
		return "pool_reserved_p0";
	return NULL;
}

static rd_lane *
lane_get(rd_state *st, const char *group, const char *pool, int p0)
{
	char     key[600];
	rd_lane *l;

	snprintf(key, sizeof(key), "%s\x1f%s\x1f%d", group, pool, p0);
	if ((l = ax_strmap_get(st->lanes, key)) != NULL)
		return l;
	if ((l = calloc(1, sizeof(*l))) == NULL ||
	    (l->gname = strdup(group)) == NULL ||
	    (l->pname = strdup(pool)) == NULL ||
	    (l->group = group_get(st, group)) == NULL ||
	    (pool[0] != '\0' && (l->pool = pool_get(st, pool)) == NULL) ||
	    ax_strmap_put(st->lanes, key, l) != AX_OK) {
		if (l != NULL) {
			free(l->gname);
			free(l->pname);
		}
		free(l);
		return NULL;
	}
	ax_heap_init(&l->heap, node_before);
	l->p0         = p0;
	l->next       = st->lane_list;
	st->lane_list = l;
	return l;
}

static int
dag_paused(const rd_state *st, const char *dag)
{
	return st->ctx->registry != NULL &&
	    ax_dag_registry_paused(st->ctx->registry, dag);
}

/* ---------------------------------------------------------------------- */
/* decisions */

static void
emit(ax_actor *self, const rd_item *it, const char *type, const char *reason,
     const char *payload)
{
	ax_flow_event e;
	ax_flow_event_init(&e, ax_actor_name(self), type, reason,
	                   it->ready->instance, NULL, 0, it->trace, payload);
	(void) ax_flow_event_send(self, &e, 0);
}

/*
 * JSON payload describing why an item waits: its tier, what holds it
 * (lane_hold; "queue_order" when there is room but items ahead of it
 * took it first, "backpressure" when the instance generator lags) and
 * the counters behind that.
 */
static void
why_payload(const rd_state *st, const rd_item *it, char *buf, size_t len,
            const char **reason)
{
	const rd_lane *l = it->lane;
	const char    *by;
	char           g[300], p[300];

	g[0] = p[0] = '\0';
	ax_json_escape(g, 0, sizeof(g), l->gname);
	ax_json_escape(p, 0, sizeof(p), l->pname);
	*reason = st->backpressured ? "BACKPRESSURE_DELAYED" : "WAIT_RESOURCE";
	by      = st->backpressured ? "backpressure" : lane_hold(st, l, it);
	snprintf(buf, len,
	         "{\"tier\":\"%s\",\"held_by\":\"%s\",\"group\":\"%s\","
	         "\"group_used\":%lld,\"group_used_low\":%lld,"
	         "\"group_limit\":%lld,\"pool\":\"%s\",\"pool_used\":%lld,"
	         "\"pool_slots\":%lld,\"pool_reserve_p0\":%lld,\"slots\":%d,"
	         "\"cpu_milli\":%lld,\"group_cpu_used\":%lld,"
	         "\"memory_bytes\":%lld,\"group_memory_used\":%lld}",
	         ax_impact_name((ax_impact) it->tier),
	         by != NULL ? by : "queue_order", g,
	         (long long) l->group->used, (long long) l->group->used_low,
	         (long long) group_limit(st, l->group), p,
	         (long long) (l->pool ? l->pool->used : 0),
	         (long long) (l->pool ? l->pool->slots : 0),
	         (long long) (l->pool ? l->pool->reserve_p0 : 0), it->slots,
	         (long long) it->cpu, (long long) l->group->used_cpu,
	         (long long) it->mem, (long long) l->group->used_mem);
}

static ax_err
admit(ax_actor *self, rd_state *st, rd_item *it)
{
	Ax__Command   cmd = AX__COMMAND__INIT;
	Ax__Admission adm = AX__ADMISSION__INIT;

	adm.instance      = it->ready->instance;
	adm.decision      = AX__ADMISSION_DECISION__ADMIT;
	adm.ready         = it->ready;
	adm.decided_at_us = ax_clock_utc_us();
	cmd.body_case     = AX__COMMAND__BODY_ADMISSION;
	cmd.admission     = &adm;
	cmd.issued_at_us  = adm.decided_at_us;
	if (it->trace != NULL)
		cmd.trace_id = it->trace;
	ax_err rv = ax_pipeline_send(self, AX_A_INSTANCE_GENERATOR, &cmd);
	if (rv != AX_OK)
		return rv;
	it->state = RD_ADMITTED;
	it->lane->group->used += it->slots;
	it->lane->group->used_cpu += it->cpu;
	it->lane->group->used_mem += it->mem;
	if (it->lane->pool != NULL)
		it->lane->pool->used += it->slots;
	if (!it->lane->p0) {
		it->lane->group->used_low += it->slots;
		if (it->lane->pool != NULL)
			it->lane->pool->used_low += it->slots;
	}
	st->admitted++;
	/* No event here: the instance generator writes the one row of this
	 * decision (instance.admitted) in the transaction that moves the
	 * instance to READY. Two rows for one decision were a sixth of the
	 * event_log writes of a run. */
	return AX_OK;
}

static ax_err block_item(ax_actor *self, rd_state *st, rd_item *it,
                         const char *reason);

/*
 * Admits waiting items, best lane head first, while their group and pool
 * have room and the generator keeps up. An item larger than its whole
 * group still runs when the group is idle (never stuck forever).
 */
static ax_err
drain(ax_actor *self, rd_state *st)
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
			while (lane_top(l) != NULL &&
			       dag_paused(st,
			                  lane_top(l)->ready->instance->dag)) {
				rd_item *it = lane_pop(st, l);
				if ((rv = block_item(self, st, it,
				                     "DAG_PAUSED")) != AX_OK)
					return rv;
			}
			if (lane_top(l) == NULL ||
			    lane_hold(st, l, lane_top(l)) != NULL)
				continue;
			if (best == NULL ||
			    item_before(lane_top(l), lane_top(best)))
				best = l;
		}
		if (best == NULL)
			return AX_OK;
		if ((rv = admit(self, st, lane_pop(st, best))) != AX_OK)
			return rv;
	}
}

/* Asks for the reason write "what" on its row (see rd_state.rewrite). */
static ax_err
want_reason(rd_state *st, rd_item *it, int what)
{
	it->reason_write = (uint8_t) what;
	if (what == RD_R_NONE || it->in_rewrite)
		return AX_OK;
	ax_err rv = ptr_push(&st->rewrite, &st->nrewrite, &st->caprewrite, it);
	it->in_rewrite = rv == AX_OK;
	return rv;
}

/*
 * Announces why blocked item it waits (reason: its row's text, e.g.
 * "RULE_BLOCKED rule=12"; the event gets the code before the space and
 * the rule id in its payload) and asks for the row write.
 */
static ax_err
mark_blocked(ax_actor *self, rd_state *st, rd_item *it, const char *reason)
{
	char code[48], payload[64];

	snprintf(code, sizeof(code), "%.*s", (int) strcspn(reason, " "),
	         reason);
	snprintf(payload, sizeof(payload), "{\"rule_id\":%lld}",
	         (long long) it->rule_id);
	emit(self, it, "instance.blocked", code,
	     it->rule_id != 0 ? payload : NULL);
	it->announced = 1;
	if (it->reason_on && strcmp(it->block_reason, reason) == 0)
		return want_reason(st, it, RD_R_NONE); /* already shown */
	snprintf(it->block_reason, sizeof(it->block_reason), "%s", reason);
	it->reason_tries = 0;
	return want_reason(st, it, RD_R_BLOCK);
}

static ax_err
block_item(ax_actor *self, rd_state *st, rd_item *it, const char *reason)
{
	ax_err rv = ptr_push(&st->blocked, &st->nblocked, &st->capblocked, it);
	if (rv != AX_OK)
		return rv;
	it->state = RD_BLOCKED;
	st->blocked_count++;
	return mark_blocked(self, st, it, reason);
}

/* ---------------------------------------------------------------------- */
/* Allow/Block rules (engine/rule.h) */

/*
 * Reads the rules table into st, replacing the rules in force. A failure
 * keeps them and asks for another read at the next recheck (a second):
 * a rule change is never lost, only late while the database is away.
 */
static void
rules_load(rd_state *st)
{
	ax_rule *v;
	size_t   n;

	st->rules_reload = 1;
	if (st->ctx->dsn == NULL) {
		st->rules_reload = 0;
		return;
	}
	if (st->store == NULL &&
	    ax_store_open(st->ctx->dsn, &st->store) == AX_OK)
		ax_store_set_reconnect_timeout(st->store, RD_REASON_RECONNECT);
	if (st->store == NULL ||
	    ax_store_rules_load(st->store, 0, &v, &n, NULL) != AX_OK) {
		ax_logf(AX_LOG_WARN, COMP, "DB_ERROR", NULL,
		        "rules not read (the rules in force stay; next try in "
		        "%lld ms): %s",
		        (long long) (RD_PAUSE_RECHECK / AX_USEC_PER_MSEC),
		        ax_err_detail());
		return;
	}
	ax_rules_free(st->rules, st->nrules);
	st->rules        = v;
	st->nrules       = n;
	st->rules_reload = 0;
	st->rules_gen++;
	st->rules_dag = st->rules_timed = 0;
	for (size_t i = 0; i < n; i++) {
		st->rules_dag |= ax_rule_needs_dag(&v[i]);
		st->rules_timed |= ax_rule_timed(&v[i]);
	}
	ax_logf(AX_LOG_INFO, COMP, NULL, NULL, "%zu rules loaded (load %llu)",
	        n, (unsigned long long) st->rules_gen);
}

/* Which rules are in force at now, with the load they came from: when
 * it changes, verdicts may have changed. */
static uint64_t
rules_signature(const rd_state *st, int64_t now)
{
	uint64_t h =
	    1469598103934665603ULL ^ (st->rules_gen * 0x9e3779b97f4a7c15ULL);

	for (size_t i = 0; i < st->nrules; i++)
		if (ax_rule_applies(&st->rules[i], now))
			h = (h ^ (uint64_t) st->rules[i].id) *
			    1099511628211ULL;
	return h;
}

/* The rule holding it at now, or NULL; *reason (may be NULL) gets its
 * code. The DAG's impact, owner and tags come from the registry only
 * when a rule names them. */
static const ax_rule *
rule_hold(rd_state *st, const rd_item *it, int64_t now, const char **reason)
{
	const Ax__InstanceReady *r = it->ready;
	ax_dag_entry            *e = NULL;
	const ax_rule           *rule;
	ax_rule_target           t = {
		          .channel      = r->channel,
		          .impact       = -1,
		          .priority     = r->priority,
		          .dag          = r->instance->dag,
		          .worker_group = r->worker_group,
	};

	if (st->nrules == 0)
		return NULL;
	if (st->rules_dag && st->ctx->registry != NULL &&
	    (e = ax_dag_registry_current(st->ctx->registry, t.dag)) != NULL) {
		t.impact = (int) e->dag->impact;
		t.owner  = e->dag->owner;
		t.tags   = (const char *const *) e->dag->tags;
		t.n_tags = e->dag->n_tags;
	}
	rule = ax_rules_decide(st->rules, st->nrules, &t, now, reason);
	ax_dag_entry_release(e);
	return rule;
}

/* Why it must not be admitted at now ("DAG_PAUSED", or "RULE_BLOCKED
 * rule=12" written into buf), or NULL; sets it->rule_id. */
static const char *
hold_reason(rd_state *st, rd_item *it, int64_t now, char *buf, size_t len)
{
	const char    *code = "RULE_BLOCKED";
	const ax_rule *r;

	it->rule_id = 0;
	if (dag_paused(st, it->ready->instance->dag))
		return "DAG_PAUSED";
	if ((r = rule_hold(st, it, now, &code)) == NULL)
		return NULL;
	it->rule_id = r->id;
	snprintf(buf, len, "%s rule=%lld", code, (long long) r->id);
	return buf;
}

/* Blocks the waiting items the rules in force hold (after a change). */
static ax_err
rules_sweep(ax_actor *self, rd_state *st, int64_t now)
{
	rd_item **hit = NULL;
	size_t    n = 0, cap = 0;
	ax_err    rv = AX_OK;
	char      buf[48];

	for (rd_lane *l = st->lane_list; l != NULL && rv == AX_OK; l = l->next)
		for (size_t i = 0; rv == AX_OK && i < ax_heap_count(&l->heap);
		     i++) {
			rd_item *it = AX_HEAP_ENTRY(ax_heap_at(&l->heap, i),
			                            rd_item, hn);
			if (rule_hold(st, it, now, NULL) != NULL)
				rv = ptr_push(&hit, &n, &cap, it);
		}
	for (size_t i = 0; rv == AX_OK && i < n; i++) {
		const char *why =
		    hold_reason(st, hit[i], now, buf, sizeof(buf));
		lane_remove(st, hit[i]);
		if ((rv = block_item(self, st, hit[i], why)) != AX_OK)
			(void) lane_push(st, hit[i]->lane, hit[i]);
	}
	free(hit);
	return rv;
}

/*
 * Reads the rules when asked, and notices a change of the rules in force
 * (a reload, a window opening or closing, an expiry): then the waiting
 * items are checked again here, the blocked ones by the next
 * recheck_blocked. One signature per call: a few compares per rule.
 */
static ax_err
rules_refresh(ax_actor *self, rd_state *st)
{
	int64_t  now = ax_clock_utc_us();
	uint64_t sig;

	if (st->rules_reload)
		rules_load(st);
	if ((sig = rules_signature(st, now)) == st->rules_sig)
		return AX_OK;
	st->rules_sig   = sig;
	st->rules_dirty = 1;
	return rules_sweep(self, st, now);
}

static void unuse(rd_item *it);

/*
 * The tier and declared resources of it, from its ready: as sent when
 * the sender knew them (impact set), else from its DAG in the registry
 * (retries and held attempts come from senders that do not know them;
 * the DAG of a live instance is cached, a miss costs one read), else P2,
 * the DAG format's default impact, and no resources.
 */
static void
item_profile(const rd_state *st, rd_item *it)
{
	const Ax__InstanceReady *ready = it->ready;
	const char              *s     = ready->impact;

	it->tier = AX_IMPACT_P2;
	it->cpu = it->mem = 0;
	if (s != NULL && s[0] == 'P' && s[1] >= '0' && s[1] <= '3' &&
	    s[2] == '\0') {
		it->tier = (int8_t) (s[1] - '0');
		it->cpu  = ready->cpu_milli > 0 ? ready->cpu_milli : 0;
		it->mem  = ready->memory_bytes > 0 ? ready->memory_bytes : 0;
		return;
	}
	if (st->ctx->registry == NULL)
		return;
	ax_dag_entry *e =
	    ax_dag_registry_current(st->ctx->registry, ready->instance->dag);
	if (e == NULL)
		return;
	const ax_task *k = ax_dag_entry_task(e, ready->instance->task);
	it->tier         = (int8_t) e->dag->impact;
	if (k != NULL) {
		it->cpu = k->eff.cpu_milli;
		it->mem = k->eff.memory_bytes;
	}
	ax_dag_entry_release(e);
}

/*
 * Creates the item of ready (owned from now on, freed on failure) and
 * indexes it by key; NULL with *dup = 1 when the key is already known.
 */
static rd_item *
item_new(ax_actor *self, rd_state *st, Ax__InstanceReady *ready,
         const char *trace, int *dup)
{
	char     key[AX_FLOW_KEY_MAX];
	rd_item *it;

	*dup = 0;
	if (ready->instance == NULL || ready->instance->dag[0] == '\0' ||
	    ready->instance->task[0] == '\0') {
		ax_log_warn(ax_actor_name(self),
		            "dropped an InstanceReady without an instance");
		ax__instance_ready__free_unpacked(ready, NULL);
		return NULL;
	}
	ax_flow_key(ready->instance, key, sizeof(key));
	if ((it = ax_strmap_get(st->items, key)) != NULL &&
	    it->state == RD_ADMITTED && ready->after_attempt > 0 &&
	    ready->after_attempt >= it->ready->after_attempt + 1) {
		/* A retry after the attempt this admission produced: that
		 * attempt has ended, and its SlotReleased (sent by the result
		 * handler, which is not this message's sender) has not arrived
		 * yet. The admission is over: free its slot now; the late
		 * SlotReleased is then recognised as stale. */
		unuse(it);
		ax_strmap_del(st->items, key);
		item_free(it);
		it = NULL;
	}
	if (it != NULL) {
		*dup = 1;
		ax__instance_ready__free_unpacked(ready, NULL);
		return NULL;
	}
	size_t kl = strlen(key);
	if ((it = calloc(1, sizeof(*it) + kl + 1)) == NULL) {
		ax__instance_ready__free_unpacked(ready, NULL);
		return NULL;
	}
	memcpy(it->key, key, kl + 1);
	it->ready = ready;
	it->trace = trace != NULL && trace[0] != '\0' ? strdup(trace) : NULL;
	it->seq   = st->seq++;
	it->slots = ready->slots > 0 ? ready->slots : 1;
	item_profile(st, it);
	it->lane = lane_get(
	    st, ready->worker_group[0] ? ready->worker_group : "default",
	    ready->pool, it->tier == AX_IMPACT_P0);
	if (it->lane == NULL ||
	    ax_strmap_put(st->items, it->key, it) != AX_OK) {
		item_free(it);
		return NULL;
	}
	return it;
}

/* Takes ownership of ready. */
static ax_err
on_ready(ax_actor *self, rd_state *st, Ax__InstanceReady *ready,
         const char *trace)
{
	int      dup;
	rd_item *it = item_new(self, st, ready, trace, &dup);
	ax_err   rv;

	if (it == NULL) {
		if (!dup)
			return AX_OK;
		st->ignored++;
		ax_logf(AX_LOG_DEBUG, ax_actor_name(self), "DUPLICATE", NULL,
		        "InstanceReady ignored: the instance is already "
		        "admitted or waiting");
		return AX_OK;
	}
	char        buf[48];
	const char *why =
	    hold_reason(st, it, ax_clock_utc_us(), buf, sizeof(buf));
	if (why != NULL)
		return block_item(self, st, it, why);
	if ((rv = lane_push(st, it->lane, it)) != AX_OK)
		return rv;
	return ptr_push(&st->fresh, &st->nfresh, &st->capfresh, it);
}

static void
unuse(rd_item *it)
{
	if (it->state != RD_ADMITTED)
		return;
	it->lane->group->used -= it->slots;
	it->lane->group->used_cpu -= it->cpu;
	it->lane->group->used_mem -= it->mem;
	if (it->lane->pool != NULL)
		it->lane->pool->used -= it->slots;
	if (!it->lane->p0) {
		it->lane->group->used_low -= it->slots;
		if (it->lane->pool != NULL)
			it->lane->pool->used_low -= it->slots;
	}
}

static void
on_released(ax_actor *self, rd_state *st, const Ax__SlotReleased *sr)
{
	char     key[AX_FLOW_KEY_MAX];
	rd_item *it;

	if (sr->instance == NULL)
		return;
	ax_flow_key(sr->instance, key, sizeof(key));
	it = ax_strmap_get(st->items, key);
	if (it != NULL && sr->attempt > 0 &&
	    sr->attempt <= it->ready->after_attempt) {
		/* the release of an attempt older than this admission: its
		 * slot was freed when the retry arrived (see item_new) */
		return;
	}
	if (it == NULL || it->state != RD_ADMITTED) {
		ax_logf(AX_LOG_DEBUG, ax_actor_name(self), NULL, NULL,
		        "SlotReleased for %s.%s: not admitted here, ignored",
		        sr->instance->dag, sr->instance->task);
		return;
	}
	unuse(it);
	ax_strmap_del(st->items, key);
	item_free(it);
}

static void
on_capacity(rd_state *st, const Ax__WorkerCapacity *wc)
{
	const char *gname = wc->worker_group[0] ? wc->worker_group : "default";
	rd_group   *g     = group_get(st, gname);
	char        key[600];

	if (g == NULL)
		return;
	if (wc->worker_id[0] == '\0') {
		g->agg = wc->alive ? wc->slots_total : 0;
		g->agg_p0 =
		    wc->alive && wc->reserved_p0 > 0 ? wc->reserved_p0 : 0;
		g->agg_cpu =
		    wc->alive && wc->cpu_milli > 0 ? wc->cpu_milli : 0;
		g->agg_mem =
		    wc->alive && wc->memory_bytes > 0 ? wc->memory_bytes : 0;
		return;
	}
	snprintf(key, sizeof(key), "%s\x1f%s", gname, wc->worker_id);
	rd_worker *w = ax_strmap_get(st->workers, key);
	if (w != NULL) {
		g->workers -= w->total;
		g->workers_p0 -= w->reserve_p0;
		g->workers_cpu -= w->cpu;
		g->workers_mem -= w->mem;
		g->nworker--;
		if (!wc->alive) {
			free(ax_strmap_del(st->workers, key));
			return;
		}
	} else {
		if (!wc->alive || (w = calloc(1, sizeof(*w))) == NULL)
			return;
		if (ax_strmap_put(st->workers, key, w) != AX_OK) {
			free(w);
			return;
		}
	}
	w->group      = g;
	w->total      = wc->slots_total > 0 ? wc->slots_total : 0;
	w->reserve_p0 = wc->reserved_p0 > 0 ? wc->reserved_p0 : 0;
	if (w->reserve_p0 > w->total)
		w->reserve_p0 = w->total;
	g->workers += w->total;
	g->workers_p0 += w->reserve_p0;
	w->cpu = wc->cpu_milli > 0 ? wc->cpu_milli : 0;
	w->mem = wc->memory_bytes > 0 ? wc->memory_bytes : 0;
	g->workers_cpu += w->cpu;
	g->workers_mem += w->mem;
	g->nworker++;
}

/* Takes ownership of held->ready. */
static ax_err
on_held(ax_actor *self, rd_state *st, Ax__AttemptHeld *held)
{
	char     key[AX_FLOW_KEY_MAX];
	rd_item *it;

	if (held->ready == NULL || held->ready->instance == NULL)
		return AX_OK;
	ax_flow_key(held->ready->instance, key, sizeof(key));
	it = ax_strmap_get(st->items, key);
	if (it == NULL) {
		int dup;
		it          = item_new(self, st, held->ready, NULL, &dup);
		held->ready = NULL; /* owned by the item (or freed) */
		if (it == NULL)
			return AX_OK;
		it->held = 1; /* admitted, though not known here */
	} else if (it->state == RD_ADMITTED) {
		unuse(it);
		it->held = 1;
	} else {
		return AX_OK; /* already waiting or blocked */
	}
	it->announced = 0;
	it->rule_id   = 0;
	return block_item(self, st, it,
	                  held->reason[0] ? held->reason : "DAG_PAUSED");
}

/*
 * Moves blocked items back to their lane once nothing holds them: their
 * DAG is no longer paused and no rule holds them. Items a rule holds are
 * checked again only after the rules in force changed (rules_dirty); one
 * that another rule now holds keeps waiting under that rule's reason.
 */
static ax_err
recheck_blocked(ax_actor *self, rd_state *st)
{
	size_t  k     = 0;
	int     dirty = st->rules_dirty;
	int64_t now   = ax_clock_utc_us();
	char    buf[48];

	st->rules_dirty = 0;
	for (size_t i = 0; i < st->nblocked; i++) {
		rd_item    *it = st->blocked[i];
		const char *why;
		ax_err      rv = AX_OK;
		if (dag_paused(st, it->ready->instance->dag) ||
		    (it->rule_id != 0 && !dirty)) {
			st->blocked[k++] = it;
			continue;
		}
		if ((why = hold_reason(st, it, now, buf, sizeof(buf))) !=
		    NULL) {
			st->blocked[k++] = it;
			if (strcmp(why, it->block_reason) != 0)
				rv = mark_blocked(self, st, it, why);
			if (rv == AX_OK)
				continue;
			for (size_t j = i + 1; j < st->nblocked; j++)
				st->blocked[k++] = st->blocked[j];
			st->nblocked = k;
			return rv;
		}
		it->announced = 0;
		rv            = lane_push(st, it->lane, it);
		if (rv == AX_OK)
			rv = ptr_push(&st->fresh, &st->nfresh, &st->capfresh,
			              it);
		if (rv == AX_OK) /* best effort: the row is only a display */
			(void) want_reason(
			    st, it, it->reason_on ? RD_R_RESTORE : RD_R_NONE);
		if (rv != AX_OK) {
			st->blocked[k++] = it;
			for (size_t j = i + 1; j < st->nblocked; j++)
				st->blocked[k++] = st->blocked[j];
			st->nblocked = k;
			return rv;
		}
	}
	st->nblocked = k;
	return AX_OK;
}

/* Ends a write pass: keeps only the blocks whose row is still missing. */
static void
rewrite_compact(rd_state *st)
{
	size_t k = 0;
	for (size_t i = 0; i < st->nrewrite; i++) {
		rd_item *it = st->rewrite[i];
		if (it->reason_write == RD_R_BLOCK &&
		    it->state == RD_BLOCKED) {
			st->rewrite[k++] = it;
			continue;
		}
		it->reason_write = RD_R_NONE;
		it->in_rewrite   = 0;
	}
	st->nrewrite = k;
}

/* What the row of it gets: its block reason, or the one it had back. */
static void
reason_row(const rd_item *it, ax_store_ti_reason *r)
{
	const Ax__InstanceRef *ref = it->ready->instance;
	int                    blk = it->reason_write == RD_R_BLOCK;

	*r = (ax_store_ti_reason) {
		.dag             = ref->dag,
		.task            = ref->task,
		.logical_time_us = ref->logical_time_us,
		.shard           = ref->shard_index,
		.reason          = blk  ? it->block_reason
		             : it->held ? NULL
		                        : "WAIT_RESOURCE",
		.only_if         = blk ? NULL : it->block_reason,
	};
}

/* Records the outcome of row r of item it. */
static void
reason_done(ax_actor *self, rd_item *it, const ax_store_ti_reason *r)
{
	if (it->reason_write == RD_R_RESTORE) {
		it->reason_on    = 0;
		it->reason_write = RD_R_NONE;
	} else if (r->applied) {
		it->reason_on    = 1;
		it->reason_write = RD_R_NONE;
	} else if (++it->reason_tries >= RD_REASON_TRIES) {
		ax_logf(AX_LOG_WARN, ax_actor_name(self), NULL, NULL,
		        "%s.%s: no task_instances row to show %s on after %d "
		        "tries; given up",
		        r->dag, r->task, r->reason, RD_REASON_TRIES);
		it->reason_write = RD_R_NONE;
	}
}

/*
 * Writes the reasons asked by want_reason, one statement per call. The
 * admissions of this call go out first (a restore and the instance
 * generator's move to READY, which clears the reason, may land in either
 * order: only_if keeps the restore off a row that moved on). A failure
 * is logged: blocks are tried again at the next recheck, restores
 * dropped (the move to READY clears the reason anyway). A block whose
 * row was missing is tried again at most once per recheck period.
 */
static void
write_reasons(ax_actor *self, rd_state *st)
{
	size_t              n = st->nrewrite, m = 0;
	ax_store_ti_reason *rows  = NULL;
	rd_item           **its   = NULL;
	ax_err              rv    = AX_OK;
	int64_t             now   = ax_clock_mono_us();
	int                 retry = now >= st->reason_retry_at;

	if (n == 0 || st->ctx->dsn == NULL || now < st->reason_down_until)
		goto out;
	rows = calloc(n, sizeof(*rows));
	its  = calloc(n, sizeof(*its));
	if (rows == NULL || its == NULL)
		rv = ax_err_set(AX_ENOMEM, "out of memory");
	for (size_t i = 0; rv == AX_OK && i < n; i++) {
		rd_item *it = st->rewrite[i];
		if (it->reason_write == RD_R_NONE ||
		    (it->reason_write == RD_R_BLOCK && it->reason_tries > 0 &&
		     !retry))
			continue;
		its[m] = it;
		reason_row(it, &rows[m++]);
	}
	if (retry)
		st->reason_retry_at = now + RD_PAUSE_RECHECK;
	if (m > 0)
		(void) ax_actor_flush(self, AX_ACTOR_NONBLOCK);
	if (rv == AX_OK && m > 0 && st->store == NULL &&
	    (rv = ax_store_open(st->ctx->dsn, &st->store)) == AX_OK)
		ax_store_set_reconnect_timeout(st->store, RD_REASON_RECONNECT);
	for (size_t off = 0; rv == AX_OK && off < m;
	     off += AX_STORE_BATCH_MAX) {
		size_t c = m - off < AX_STORE_BATCH_MAX ? m - off
		                                        : AX_STORE_BATCH_MAX;
		rv = ax_store_set_reasons(st->store, rows + off, c, NULL);
		for (size_t i = off; rv == AX_OK && i < off + c; i++)
			reason_done(self, its[i], &rows[i]);
	}
	if (rv != AX_OK) {
		ax_logf(AX_LOG_WARN, ax_actor_name(self), "DB_ERROR", NULL,
		        "reasons of blocked or released instances not "
		        "written (next try in %lld ms): %s",
		        (long long) (RD_PAUSE_RECHECK / AX_USEC_PER_MSEC),
		        ax_err_detail());
		st->reason_down_until = now + RD_PAUSE_RECHECK;
	}
out:
	free(rows);
	free(its);
	rewrite_compact(st);
}

/*
 * Publishes the starvation gauge (instances waiting for admission longer
 * than scheduler.starvation_after, per tier) and the number waiting in
 * component_stats, for ax-api's /metrics: memory counters, one upsert
 * every RD_STATS_PERIOD at most and only when a value changed, never a
 * scan. A failure is logged at debug level; the next period tries again.
 */
static void
stats_persist(rd_state *st, int64_t now)
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
	if (st->store == NULL) {
		if (ax_store_open(st->ctx->dsn, &st->store) != AX_OK)
			return;
		ax_store_set_reconnect_timeout(st->store, RD_REASON_RECONNECT);
	}
	if (ax_store_stats_put(st->store, rows, AX_TIER_COUNT + 1) != AX_OK) {
		ax_logf(AX_LOG_DEBUG, "resource_detector", NULL, NULL,
		        "component_stats not written: %s", ax_err_detail());
		return;
	}
	for (int i = 0; i <= AX_TIER_COUNT; i++)
		st->last_stats[i] = rows[i].value;
	st->stats_written = 1;
}

/* After a batch: drain, then one DELAY event per item that must wait. */
static ax_err
settle(ax_actor *self, rd_state *st)
{
	ax_err rv = drain(self, st);
	for (size_t i = 0; i < st->nfresh; i++) {
		rd_item *it = st->fresh[i];
		if (it->state != RD_WAITING || it->announced)
			continue;
		char        payload[800];
		const char *reason;
		why_payload(st, it, payload, sizeof(payload), &reason);
		emit(self, it, "instance.delayed", reason, payload);
		it->announced = 1;
		st->delayed++;
	}
	st->nfresh = 0;
	write_reasons(self, st);
	int64_t next = 0, now = ax_clock_mono_us();
	starve_advance(st, now);
	stats_persist(st, now);
	if (st->backpressured)
		next = now + RD_BACKPRESSURE_RETRY;
	else if (st->nblocked > 0 || st->rules_timed || st->rules_reload)
		next = now + RD_PAUSE_RECHECK;
	/* the gauge moves with time alone: come back while anything waits,
	 * or until a drop to zero is written */
	if (st->ctx->dsn != NULL &&
	    (st->nwaiting > 0 || !st->stats_written ||
	     st->last_stats[AX_TIER_COUNT] != 0) &&
	    (next == 0 || st->stats_due < next))
		next = st->stats_due;
	ax_actor_set_deadline(self, next);
	return rv;
}

/* ---------------------------------------------------------------------- */
/* actor */

/* The handlers of the resource detector's commands. A batch's decisions
 * are taken once its items are in (rd_batch_end). */
static ax_err
on_ready_cmd(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	Ax__Command *cmd = m->cmd;
	ax_err rv = on_ready(self, state, cmd->instance_ready, cmd->trace_id);
	cmd->instance_ready = NULL; /* owned by the item now */
	cmd->body_case      = AX__COMMAND__BODY__NOT_SET;
	return rv;
}

static ax_err
on_released_cmd(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	on_released(self, state, m->cmd->slot_released);
	return AX_OK;
}

static ax_err
on_capacity_cmd(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	on_capacity(state, m->cmd->worker_capacity);
	return AX_OK;
}

static ax_err
on_held_cmd(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	return on_held(self, state, m->cmd->attempt_held);
}

/* "rules": the rules table changed; read before the next batch. */
static ax_err
on_control_cmd(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	rd_state *st = state;
	(void) self;
	if (strcmp(m->cmd->control->op, "rules") == 0)
		st->rules_reload = 1;
	return AX_OK;
}

/* Before a batch: the rules, read when asked (at the first batch, after
 * a change), so the batch's items meet the rules in force. */
static void
rd_batch_begin(ax_actor *self, void *state, size_t n)
{
	rd_state *st = state;
	(void) self;
	(void) n;
	if (st->rules_reload)
		rules_load(st);
}

/* After every batch: a change of the rules in force checks the waiting
 * items again; blocked items nothing holds any more go back to their
 * lane; then the batch's decisions. */
static ax_err
rd_batch_end(ax_actor *self, void *state)
{
	rd_state *st = state;
	ax_err    rv = rules_refresh(self, st);
	ax_err    r  = recheck_blocked(self, st);
	if (rv == AX_OK)
		rv = r;
	r = settle(self, st);
	return rv != AX_OK ? rv : r;
}

static ax_err
rd_tick(ax_actor *self, void *state, int64_t now)
{
	rd_state *st = state;
	ax_err    rv = rules_refresh(self, st);
	ax_err    r  = recheck_blocked(self, st);
	(void) now;
	if (rv == AX_OK)
		rv = r;
	r = settle(self, st);
	return rv != AX_OK ? rv : r;
}

static void
lane_free(rd_lane *l)
{
	ax_heap_fini(&l->heap);
	free(l->gname);
	free(l->pname);
	free(l);
}

/* Frees what the state holds (the pipeline frees the state); safe on a
 * state init left half-filled. */
static void
rd_fini(void *state)
{
	rd_state *st = state;
	ax_log_info(COMP,
	            "stopped: %llu admitted, %llu delayed, %llu blocked, "
	            "%llu duplicates ignored, %zu instances held",
	            (unsigned long long) st->admitted,
	            (unsigned long long) st->delayed,
	            (unsigned long long) st->blocked_count,
	            (unsigned long long) st->ignored,
	            st->items ? ax_strmap_count(st->items) : 0);
	ax_strmap_free(st->items, item_free);
	ax_strmap_free(st->groups, free);
	ax_strmap_free(st->pools, free);
	ax_strmap_free(st->workers, free);
	ax_strmap_free(st->lanes, NULL);
	for (rd_lane *l = st->lane_list, *nx; l != NULL; l = nx) {
		nx = l->next;
		lane_free(l);
	}
	free(st->blocked);
	free(st->fresh);
	free(st->rewrite);
	ax_rules_free(st->rules, st->nrules);
	ax_store_close(st->store);
}

/* Reads the pools table once; a failure leaves the defaults. */
static void
load_pools(rd_state *st)
{
	ax_store *s;
	PGresult *r;

	if (st->ctx->dsn == NULL)
		return;
	if (ax_store_open(st->ctx->dsn, &s) != AX_OK ||
	    ax_store_query(s, "SELECT name, slots, reserve_p0 FROM pools", 0,
	                   NULL, &r) != AX_OK) {
		ax_logf(
		    AX_LOG_WARN, COMP, NULL, NULL,
		    "cannot read the pools table (%s); every pool gets %lld "
		    "slots",
		    ax_err_detail(), (long long) st->default_pool);
		ax_store_close(s == NULL ? NULL : s);
		return;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		rd_pool *p = pool_get(st, PQgetvalue(r, i, 0));
		if (p == NULL)
			continue;
		p->slots      = strtoll(PQgetvalue(r, i, 1), NULL, 10);
		p->reserve_p0 = strtoll(PQgetvalue(r, i, 2), NULL, 10);
	}
	ax_log_info(COMP, "%d pools loaded", PQntuples(r));
	PQclear(r);
	ax_store_close(s);
}

static ax_err
rd_init(void *state, const ax_pipeline_ctx *ctx, void *arg)
{
	rd_state *st = state;

	(void) arg;
	st->ctx          = ctx;
	st->rules_reload = 1; /* read before the first batch */
	st->overcommit   = ax_config_int(ctx->cfg, "resources.overcommit");
	st->default_group =
	    ax_config_int(ctx->cfg, "resources.default_group_slots");
	st->default_pool =
	    ax_config_int(ctx->cfg, "resources.default_pool_slots");
	if (st->overcommit < 1)
		st->overcommit = 1;
	st->aging_us =
	    ax_config_duration_us(ctx->cfg, "scheduler.aging_interval");
	st->starve_after_us =
	    ax_config_duration_us(ctx->cfg, "scheduler.starvation_after");
	if (ax_strmap_new(&st->items) != AX_OK ||
	    ax_strmap_new(&st->groups) != AX_OK ||
	    ax_strmap_new(&st->pools) != AX_OK ||
	    ax_strmap_new(&st->lanes) != AX_OK ||
	    ax_strmap_new(&st->workers) != AX_OK)
		return ax_err_set(AX_ENOMEM, COMP ": out of memory");
	load_pools(st);
	return AX_OK;
}

/* The tick is the recheck of blocked items and the retry after
 * backpressure: the same as after a batch (settle sets the deadline). */
static const ax_pipeline_def rd_def = {
	.name       = AX_A_RESOURCE_DETECTOR,
	.state_size = sizeof(rd_state),
	.init       = rd_init,
	.fini       = rd_fini,
	.tick       = rd_tick,
	.batch_begin = rd_batch_begin,
	.batch_end  = rd_batch_end,
	.on = {
		[AX__COMMAND__BODY_INSTANCE_READY]   = on_ready_cmd,
		[AX__COMMAND__BODY_SLOT_RELEASED]    = on_released_cmd,
		[AX__COMMAND__BODY_WORKER_CAPACITY]  = on_capacity_cmd,
		[AX__COMMAND__BODY_ATTEMPT_HELD]     = on_held_cmd,
		[AX__COMMAND__BODY_CONTROL]          = on_control_cmd,
	},
};

ax_err
ax_resource_detector_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx)
{
	return ax_pipeline_add(sys, ctx, &rd_def, NULL, NULL);
}
