/*
 * resource_internal.h - the resource detector's state, shared by its
 * files (private to actors/resource/; the public API is
 * actors/resource_detector.h, which also says what the actor receives
 * and sends, and by which rules it decides).
 *
 * Files, by concept:
 *  - detector.c: the actor (its definition table: handlers, tick, batch
 *    begin and end, init, fini) and the flow of one instance: its item
 *    from InstanceReady or AttemptHeld, its tier and declared resources,
 *    the admission sent to the instance generator, its release, and the
 *    DELAY events after a batch (settle). The invariants of the state
 *    are at the top of detector.c.
 *  - capacity.c: capacity and fit per worker group and pool: what the
 *    workers offer (WorkerCapacity), the pools table, group and pool
 *    limits with overcommit and the P0 reserves, what holds a lane head
 *    (lane_hold), and the accounting of admitted items.
 *  - order.c: admission order: lanes of waiting items (tier and aging,
 *    engine/aging.h), the drain that admits best lane head first, and
 *    the starvation gauge.
 *  - rules.c: paused DAGs and the Allow/Block rules (engine/rule.h):
 *    what holds an item, the rules table and its changes.
 *  - blocks.c: blocked items: blocking, the recheck that releases them,
 *    and the block reasons written on their task_instances rows.
 *  - groups.c: where a task may run when its worker_group lists several
 *    groups or selects them by label (engine/group_spec.h): the
 *    candidates of a lane, their water levels and cost weights
 *    (resources.group_cost), and the pick of the group an item is
 *    admitted to.
 *  - shave.c: peak shaving (engine/shaving.h) and the water levels
 *    pushed per pool or group (the pool_pressure table): delaying the
 *    lowest tier present on arrival, releasing delayed items as the
 *    backlog drains or at their instant, and the pressure hold.
 *
 * Everything here runs on the resource detector's actor thread only.
 */
#ifndef AX_RESOURCE_INTERNAL_H
#define AX_RESOURCE_INTERNAL_H

#include <stdint.h>

#include "aging.h"
#include "calendar.h"
#include "group_spec.h"
#include "heap.h"
#include "hmap.h"
#include "list.h"
#include "resource_detector.h"
#include "resources.h"
#include "rule.h"
#include "shaving.h"
#include "store.h"
#include "store_calendars.h"

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
/* Longest block reason shown on a row ("RULE_BLOCKED rule=12",
 * "WAIT_RESOURCE unoffered=<resource name>"). */
#define AX_RD_REASON_MAX 96

enum { RD_R_NONE = 0, RD_R_BLOCK, RD_R_RESTORE }; /* rd_item.reason_write */

enum { RD_WAITING = 0, RD_ADMITTED, RD_BLOCKED, RD_DELAYED };

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
	int8_t             tier;  /* 0 = P0 .. 3 = P3 (see item_profile) */
	int64_t            cpu;   /* millicores it declares (0: none) */
	int64_t            mem;   /* bytes it declares (0: none) */
	ax_res            *need;  /* named resources it declares (owned) */
	rd_group          *group; /* ADMITTED: the group it was admitted to */
	uint8_t            nneed; /* entries of need (0..AX_RES_MAX) */
	uint8_t            starving; /* counted in rd_state.starving */
	double             akey; /* aging key, set when it starts waiting */
	int64_t            since_us; /* mono: it started waiting (lane_push) */
	rd_lane           *lane;
	ax_heap_node       hn;     /* in lane->heap while RD_WAITING, in
	                              lane->delayed while RD_DELAYED */
	int64_t      until_us;     /* utc: RD_DELAYED until then */
	ax_list_node wn;           /* in rd_state.waiting while RD_WAITING */
	uint8_t      held;         /* blocked once admitted: READY */
	uint8_t      reason_write; /* RD_R_*: a row write to make */
	uint8_t      reason_on;    /* block_reason is on its row */
	uint8_t      in_rewrite;   /* listed in rd_state.rewrite */
	uint8_t      reason_tries; /* writes that found no row */
	int64_t      rule_id;      /* the rule holding it; 0: none */
	char         block_reason[AX_RD_REASON_MAX];
	char         key[]; /* instance key */
} rd_item;

struct rd_group {
	char     *name;   /* owned */
	int64_t   cost;   /* resources.group_cost, percent (100: none) */
	ax_label *labels; /* its workers' common labels (aggregate report;
	                     owned) */
	size_t     nlabels;
	int64_t    agg;    /* group total from an aggregate report, -1: none */
	int64_t    agg_p0; /* of agg, slots reserved for P0 */
	int64_t    workers;    /* sum of per-worker totals */
	int64_t    workers_p0; /* sum of per-worker P0 reserves */
	int        nworker;    /* workers reported alive */
	int64_t    used;       /* slots of admitted items */
	int64_t    used_low;   /* of used, slots of admitted P1..P3 items */
	int64_t    agg_cpu, agg_mem; /* offered, from the aggregate report */
	int64_t    workers_cpu, workers_mem; /* sums of per-worker reports */
	int64_t    used_cpu, used_mem;       /* declared by admitted items */
	ax_res_set agg_res;     /* named, from the aggregate report */
	ax_res_set workers_res; /* named, sums of per-worker reports */
	ax_res_set used_res;    /* named, declared by admitted items */
	int64_t    nwait;       /* items waiting in its lanes (backlog) */
	int64_t    present[AX_TIER_COUNT]; /* waiting or delayed, per tier */
	int        pressure_pct;           /* pushed water level, 0..100 */
	int64_t    pressure_until_us;      /* utc: the push expires then */
	const ax_calendar *cal; /* capacity_calendars row (st->cals); NULL */
};

struct rd_pool {
	int64_t slots;
	int64_t reserve_p0; /* of slots, kept for P0 (pools.reserve_p0) */
	int64_t used;
	int64_t used_low;          /* of used, by P1..P3 items */
	int     pressure_pct;      /* pushed water level, 0..100 */
	int64_t pressure_until_us; /* utc: the push expires then */
	const ax_calendar *cal; /* capacity_calendars row (st->cals); NULL */
};

/* A lane holds the waiting items of one (group, pool) and one side of
 * the P0 reserve: P0 items in one lane, P1..P3 in another, so that a
 * lower-tier head the reserve holds back never blocks a P0 item that
 * may use the reserve. */
struct rd_lane {
	rd_group *group;     /* its group; for a multi-group lane (spec set) a
	                        group of the spec's text that only counts its
	                        backlog: admissions go to one of cand */
	ax_group_spec *spec; /* several groups or a selector; NULL: one */
	rd_group     **cand; /* spec's groups with capacity (owned array) */
	size_t         ncand;
	uint64_t       cand_gen; /* st->group_gen when cand was made */
	rd_pool       *pool;     /* NULL: no pool */
	int            p0;       /* holds P0 items (may use the reserves) */
	char          *gname, *pname;
	ax_heap        heap;    /* waiting items, best first (item_before) */
	ax_heap        delayed; /* RD_DELAYED items, earliest until_us first */
	rd_lane       *next;    /* all lanes */
};

typedef struct rd_worker {
	rd_group  *group;
	int64_t    total;
	int64_t    reserve_p0;
	int64_t    cpu, mem;
	ax_res_set res; /* named resources it offers */
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
	ax_list_node *starve_edge; /* first waiting item not counted
	                              starving; NULL: none */
	int64_t            starving[AX_TIER_COUNT]; /* per tier */
	int64_t            stats_due; /* mono: next component_stats */
	int64_t            last_stats[AX_TIER_COUNT + 1];
	int                stats_written;
	ax_strmap         *items;     /* key -> rd_item */
	ax_strmap         *groups;    /* name -> rd_group */
	uint64_t           group_gen; /* groups or their labels changed */
	ax_res_set         costs;     /* resources.group_cost */
	ax_strmap         *pools;     /* name -> rd_pool */
	ax_strmap         *lanes;     /* group\x1fpool -> rd_lane */
	ax_strmap         *workers;   /* group\x1fworker -> rd_worker */
	rd_lane           *lane_list;
	rd_item          **blocked;
	size_t             nblocked, capblocked;
	rd_item          **fresh; /* arrived in this batch */
	size_t             nfresh, capfresh;
	rd_item          **rewrite; /* rows whose reason must change */
	size_t             nrewrite, caprewrite;
	ax_store          *store; /* opened on the first reason write */
	int64_t            reason_retry_at;   /* mono: missing rows */
	int64_t            reason_down_until; /* mono: after a failure */
	uint64_t           seq;
	int                backpressured;
	ax_rule           *rules; /* the rules table, parsed */
	size_t             nrules;
	int                rules_dag;    /* a rule names tier/owner/tag */
	int                rules_timed;  /* a rule has a window/expiry */
	int                rules_reload; /* read the table before use */
	int                rules_dirty;  /* verdicts may have changed */
	uint64_t           rules_gen;    /* loads so far */
	uint64_t           rules_sig;    /* rules_signature() last seen */
	ax_shave_policy    shave;        /* shaving.* */
	int                hold_pct;     /* shaving.pressure_hold (percent) */
	int                pressure_reload; /* read pool_pressure before use */
	int                calendar_reload; /* read capacity_calendars first */
	ax_store_calendar *cals; /* the calendars in force (owned) */
	size_t             ncals;
	char             **pressure_names; /* names with a pressure in force */
	size_t             npressure;
	int64_t            pressure_next; /* utc: the next expiry; 0: none */
	size_t             ndelayed;      /* RD_DELAYED items */
	uint64_t           shaved;        /* delays so far */
	uint64_t admitted, delayed, blocked_count, ignored; /* counters */
} rd_state;

/*
 * The functions the files share. Each one's contract is at its
 * definition; all run on the actor thread. Those without one there:
 *  - axrd_emit sends one event about it (best effort, never fails).
 *  - axrd_admit sends its Admission and counts its use; on a send
 *    failure nothing changed.
 *  - axrd_ptr_push appends it to a growable array (AX_ENOMEM).
 *  - axrd_store returns the detector's connection, opened on first use
 *    with a short reconnect timeout (NULL: cannot connect now; the
 *    detail says why).
 *  - axrd_group_get / axrd_pool_get return the group or pool of that
 *    name, created on first use (NULL: out of memory).
 *  - axrd_unuse gives back what an ADMITTED item used (no-op otherwise).
 *  - axrd_on_capacity applies one WorkerCapacity (a worker's report or
 *    the group aggregate; alive = 0 forgets it).
 *  - axrd_lane_get returns the lane of (group, pool, p0), created on
 *    first use (NULL: out of memory).
 *  - axrd_lane_free frees a lane (its items are not its own).
 *  - axrd_dag_paused says whether the registry has dag paused.
 *  - axrd_block_item moves it to the blocked list with reason.
 *  - axrd_shave_init reads the shaving.* keys; axrd_shave_fini frees the
 *    pressure names; axrd_lane_delayed_init sets up l->delayed.
 */

/* detector.c: the actor and the flow of one instance */
void      axrd_emit(ax_actor *self, const rd_item *it, const char *type,
                    const char *reason, const char *payload);
ax_err    axrd_admit(ax_actor *self, rd_state *st, rd_item *it);
ax_err    axrd_ptr_push(rd_item ***v, size_t *n, size_t *cap, rd_item *it);
ax_store *axrd_store(rd_state *st);
/* capacity.c: capacity and fit per worker group and pool */
rd_group   *axrd_group_get(rd_state *st, const char *name);
int64_t     axrd_group_limit(const rd_state *st, const rd_group *g);
rd_pool    *axrd_pool_get(rd_state *st, const char *name);
const char *axrd_lane_hold(const rd_state *st, const rd_lane *l,
                           const rd_item *it);
void        axrd_unuse(rd_item *it);
void        axrd_on_capacity(rd_state *st, const Ax__WorkerCapacity *wc);
void        axrd_load_pools(rd_state *st);
void        axrd_calendars_load(rd_state *st);
int64_t     axrd_calendar_slots(const rd_lane *l, int64_t now_utc);
void        axrd_calendars_free(rd_state *st);
const char *axrd_unoffered(const rd_state *st, const rd_lane *l,
                           const rd_item *it);
const char *axrd_group_hold(const rd_state *st, const rd_lane *l,
                            const rd_group *g, const rd_item *it);
void        axrd_group_free(void *g);

/* groups.c: the choice among several groups */
ax_err      axrd_lane_spec(rd_state *st, rd_lane *l, const char *text);
void        axrd_lane_cands(rd_state *st, rd_lane *l);
const char *axrd_lane_pick(const rd_state *st, const rd_lane *l,
                           const rd_item *it, rd_group **out);
int axrd_water_pct(const rd_state *st, const rd_lane *l, const rd_group *g,
                   const rd_item *it);

/* order.c: admission order, lanes and the starvation gauge */
ax_err   axrd_lane_push(rd_state *st, rd_lane *l, rd_item *it);
void     axrd_lane_remove(rd_state *st, rd_item *it);
void     axrd_starve_advance(rd_state *st, int64_t now);
rd_lane *axrd_lane_get(rd_state *st, const char *group, const char *pool,
                       int p0);
void     axrd_lane_free(rd_lane *l);
ax_err   axrd_drain(ax_actor *self, rd_state *st);
void     axrd_stats_persist(rd_state *st, int64_t now);

/* rules.c: paused DAGs and Allow/Block rules */
int         axrd_dag_paused(const rd_state *st, const char *dag);
void        axrd_rules_load(rd_state *st);
const char *axrd_hold_reason(rd_state *st, rd_item *it, int64_t now, char *buf,
                             size_t len);
ax_err      axrd_rules_refresh(ax_actor *self, rd_state *st);

/* shave.c: peak shaving and pushed water levels */
int axrd_level(const rd_state *st, const rd_lane *l, int64_t now);
int axrd_group_level(const rd_state *st, const rd_group *g, const rd_pool *p,
                     int64_t now);
int64_t axrd_level_until(const rd_state *st, const rd_lane *l, int64_t now);
int     axrd_shave(ax_actor *self, rd_state *st, rd_item *it);
ax_err  axrd_shave_release(ax_actor *self, rd_state *st, int *released);
int64_t axrd_shave_next(const rd_state *st);
void    axrd_pressure_load(rd_state *st);
void    axrd_shave_init(rd_state *st);
void    axrd_lane_delayed_init(rd_lane *l);
void    axrd_shave_fini(rd_state *st);

/* blocks.c: blocked items and their row reasons */
ax_err axrd_block_item(ax_actor *self, rd_state *st, rd_item *it,
                       const char *reason);
ax_err axrd_recheck_blocked(ax_actor *self, rd_state *st);
void   axrd_write_reasons(ax_actor *self, rd_state *st);

#endif /* AX_RESOURCE_INTERNAL_H */
