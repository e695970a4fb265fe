/*
 * capacity.c - capacity and fit per worker group and pool for the
 * resource detector (see resource_internal.h for its files): what the
 * workers of a group offer (slots, the P0 reserve, cpu, memory; from the
 * queue's WorkerCapacity, per worker or as one aggregate), the pools
 * table (read once at start), the limits that follow (overcommit, the
 * unreserved share for P1..P3), the fit check of a lane head
 * (axrd_lane_hold) and the release of what an admitted item used.
 *
 * Invariant: group->used and pool->used are the sums of the slots of
 * ADMITTED items, used_low those of the P1..P3 ones (and used_cpu,
 * used_mem what they declare); they change only on admit (detector.c),
 * axrd_unuse (SlotReleased, AttemptHeld, a retry) and nowhere else.
 * Every check is O(1): counters, no scan.
 */
#include "resource_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "store.h"

rd_group *
axrd_group_get(rd_state *st, const char *name)
{
	rd_group *g = ax_strmap_get(st->groups, name);
	if (g != NULL)
		return g;
	if ((g = calloc(1, sizeof(*g))) == NULL ||
	    (g->name = strdup(name)) == NULL) {
		free(g);
		return NULL;
	}
	g->agg  = -1;
	g->cost = ax_res_get(&st->costs, name);
	if (g->cost <= 0)
		g->cost = 100;
	if (ax_strmap_put(st->groups, name, g) != AX_OK) {
		axrd_group_free(g);
		return NULL;
	}
	st->group_gen++; /* a selector may match it once it reports */
	return g;
}

void
axrd_group_free(void *p)
{
	rd_group *g = p;
	if (g == NULL)
		return;
	free(g->labels);
	free(g->name);
	free(g);
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
int64_t
axrd_group_limit(const rd_state *st, const rd_group *g)
{
	if (g->agg >= 0)
		return g->agg * st->overcommit;
	if (g->nworker > 0)
		return g->workers * st->overcommit;
	return st->default_group;
}

rd_pool *
axrd_pool_get(rd_state *st, const char *name)
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
 * (axrd_group_limit). Without a P0 reserve: all of lim. With one: the slots
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
 * may go: "cpu" / "memory" / the name of a named resource such as "gpu"
 * (the group's workers offer too little of what it declares beside the
 * admitted items; a named resource none of them offers never fits), or
 * "pressure" (a P1..P3 item while a water level pushed for its group or
 * pool is at shaving.pressure_hold or above),
 * "group_slots" / "pool_slots" (all taken), "reserved_p0" / "pool_reserved_p0"
 * (what is left is the P0 reserve; P1..P3 never take it, even on an idle
 * group). An item larger than its whole group or pool still runs when that is
 * idle (never stuck forever).
 */
const char *
axrd_lane_hold(const rd_state *st, const rd_lane *l, const rd_item *it)
{
	rd_group *g;
	return axrd_lane_pick(st, l, it, &g);
}

/* What keeps it from its admission to group g through lane l (the
 * holds of axrd_lane_hold, for one group), or NULL. */
const char *
axrd_group_hold(const rd_state *st, const rd_lane *l, const rd_group *g,
                const rd_item *it)
{
	const rd_pool *p      = l->pool;
	int64_t        lim    = axrd_group_limit(st, g);
	int64_t        pslots = p != NULL ? p->slots : 0, cs = -1;
	const char    *named;

	/* a pushed water level at the hold: no P1..P3 (see shave.c) */
	if (!l->p0 && st->hold_pct > 0 && st->npressure > 0 &&
	    axrd_group_level(st, g, p, ax_clock_utc_us()) >= st->hold_pct)
		return "pressure";
	if (g->used + it->slots > lim && !(g->used == 0 && lim > 0))
		return "group_slots";
	/* a capacity calendar's window in force: a group's lowers what its
	 * workers offer, a pool's replaces its slots (engine/calendar.h);
	 * 0 slots admits nothing, not even on an idle group */
	if (g->cal != NULL &&
	    (cs = ax_calendar_slots_at(g->cal, ax_clock_utc_us())) >= 0 &&
	    g->used + it->slots > cs && !(g->used == 0 && cs > 0))
		return "calendar_slots";
	if (p != NULL && p->cal != NULL &&
	    (cs = ax_calendar_slots_at(p->cal, ax_clock_utc_us())) >= 0)
		pslots = cs;
	if (!res_fits(it->cpu, g->used_cpu,
	              g->agg >= 0 ? g->agg_cpu : g->workers_cpu))
		return "cpu";
	if (!res_fits(it->mem, g->used_mem,
	              g->agg >= 0 ? g->agg_mem : g->workers_mem))
		return "memory";
	if (it->nneed > 0 &&
	    (named = ax_res_short(it->need, it->nneed,
	                          g->agg >= 0 ? &g->agg_res : &g->workers_res,
	                          &g->used_res)) != NULL)
		return named;
	if (p != NULL && p->used + it->slots > pslots &&
	    !(p->used == 0 && pslots > 0))
		return p->cal != NULL && pslots != p->slots ? "calendar_slots"
		                                            : "pool_slots";
	if (l->p0)
		return NULL;
	if (g->used_low + it->slots > group_low_limit(g, lim))
		return "reserved_p0";
	if (p != NULL && p->reserve_p0 > 0 &&
	    p->used_low + it->slots > pslots - p->reserve_p0)
		return "pool_reserved_p0";
	return NULL;
}

void
axrd_unuse(rd_item *it)
{
	rd_group *g = it->group;

	if (it->state != RD_ADMITTED || g == NULL)
		return;
	g->used -= it->slots;
	g->used_cpu -= it->cpu;
	g->used_mem -= it->mem;
	for (int i = 0; i < it->nneed; i++) /* removes: cannot fail */
		(void) ax_res_add(&g->used_res, it->need[i].name,
		                  -it->need[i].amount);
	if (it->lane->pool != NULL)
		it->lane->pool->used -= it->slots;
	it->group = NULL;
	if (!it->lane->p0) {
		g->used_low -= it->slots;
		if (it->lane->pool != NULL)
			it->lane->pool->used_low -= it->slots;
	}
}

/*
 * The first named resource it declares that no worker of its group
 * offers at all, or NULL (also before the group's first report: the
 * cold-start default admits, see axrd_group_limit). Such an item cannot
 * be placed until a worker offering it joins; as a lane head it would
 * hold every item behind it, so it is blocked (WAIT_RESOURCE
 * unoffered=<name>) and checked again with the blocked items.
 */
static const char *
group_unoffered(const rd_group *g, const rd_item *it)
{
	if (it->nneed == 0 || (g->agg < 0 && g->nworker == 0))
		return NULL;
	const ax_res_set *offer = g->agg >= 0 ? &g->agg_res : &g->workers_res;
	for (int i = 0; i < it->nneed; i++)
		if (ax_res_get(offer, it->need[i].name) <= 0)
			return it->need[i].name;
	return NULL;
}

/*
 * The same for a lane of several groups: NULL when one of them may offer
 * all it declares; "worker_group" when none of them has capacity (a
 * label selector no group's workers match yet), else the first resource
 * the first group lacks.
 */
const char *
axrd_unoffered(const rd_state *st, const rd_lane *l, const rd_item *it)
{
	const char *first = NULL;

	(void) st;
	if (l->spec == NULL)
		return group_unoffered(l->group, it);
	if (l->ncand == 0)
		return "worker_group";
	for (size_t i = 0; i < l->ncand; i++) {
		const char *r = group_unoffered(l->cand[i], it);
		if (r == NULL)
			return NULL;
		if (first == NULL)
			first = r;
	}
	return first;
}

/* The named resources of a capacity report (none when it is not alive;
 * beyond AX_RES_MAX names, the rest are not offered). */
static void
res_from(ax_res_set *out, const Ax__WorkerCapacity *wc)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; wc->alive && i < wc->n_resources; i++)
		if (wc->resources[i]->key != NULL &&
		    ax_res_name_ok(wc->resources[i]->key))
			(void) ax_res_add(out, wc->resources[i]->key,
			                  wc->resources[i]->value);
}

/* The common labels of an aggregate report (a bad one is left out: it
 * can only make a selector match fewer groups); a change makes the
 * selectors look again (st->group_gen). */
static void
labels_from(rd_state *st, rd_group *g, const Ax__WorkerCapacity *wc)
{
	size_t    n   = wc->alive ? wc->n_labels : 0;
	ax_label *lab = n > 0 ? calloc(n, sizeof(*lab)) : NULL;
	size_t    k   = 0;

	for (size_t i = 0; lab != NULL && i < n; i++) {
		char   t[2 * AX_LABEL_MAX + 4];
		size_t one;
		if (wc->labels[i]->key == NULL ||
		    wc->labels[i]->value == NULL ||
		    strchr(wc->labels[i]->key, ',') != NULL ||
		    strchr(wc->labels[i]->value, ',') != NULL)
			continue;
		snprintf(t, sizeof(t), "%s=%s", wc->labels[i]->key,
		         wc->labels[i]->value);
		if (ax_labels_parse(t, "labels", &lab[k], 1, &one) == AX_OK &&
		    one == 1)
			k++;
	}
	int same = k == g->nlabels;
	for (size_t i = 0; same && i < k; i++)
		same = ax_labels_match(&lab[i], 1, g->labels, g->nlabels);
	if (same) {
		free(lab);
		return;
	}
	free(g->labels);
	g->labels  = lab;
	g->nlabels = k;
	st->group_gen++;
}

void
axrd_on_capacity(rd_state *st, const Ax__WorkerCapacity *wc)
{
	const char *gname = wc->worker_group[0] ? wc->worker_group : "default";
	rd_group   *g     = axrd_group_get(st, gname);
	char        key[600];

	if (g == NULL)
		return;
	if (wc->worker_id[0] == '\0') {
		if ((g->agg > 0) != (wc->alive && wc->slots_total > 0))
			st->group_gen++; /* a selector's candidates change */
		g->agg = wc->alive ? wc->slots_total : 0;
		g->agg_p0 =
		    wc->alive && wc->reserved_p0 > 0 ? wc->reserved_p0 : 0;
		g->agg_cpu =
		    wc->alive && wc->cpu_milli > 0 ? wc->cpu_milli : 0;
		g->agg_mem =
		    wc->alive && wc->memory_bytes > 0 ? wc->memory_bytes : 0;
		res_from(&g->agg_res, wc);
		labels_from(st, g, wc);
		return;
	}
	snprintf(key, sizeof(key), "%s\x1f%s", gname, wc->worker_id);
	rd_worker *w = ax_strmap_get(st->workers, key);
	if (w != NULL) {
		g->workers -= w->total;
		g->workers_p0 -= w->reserve_p0;
		g->workers_cpu -= w->cpu;
		g->workers_mem -= w->mem;
		for (int i = 0; i < w->res.n; i++)
			(void) ax_res_add(&g->workers_res, w->res.v[i].name,
			                  -w->res.v[i].amount);
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
	res_from(&w->res, wc);
	for (int i = 0; i < w->res.n; i++) /* full: that one is not offered */
		(void) ax_res_add(&g->workers_res, w->res.v[i].name,
		                  w->res.v[i].amount);
	g->nworker++;
}

/* Reads the pools table once; a failure leaves the defaults. */
void
axrd_load_pools(rd_state *st)
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
		rd_pool *p = axrd_pool_get(st, PQgetvalue(r, i, 0));
		if (p == NULL)
			continue;
		p->slots      = strtoll(PQgetvalue(r, i, 1), NULL, 10);
		p->reserve_p0 = strtoll(PQgetvalue(r, i, 2), NULL, 10);
	}
	ax_log_info(COMP, "%d pools loaded", PQntuples(r));
	PQclear(r);
	ax_store_close(s);
}

/* Forgets the calendars: every group and pool back to its own
 * capacity. */
static void
cal_unlink(void *arg, const char *key, void *val)
{
	(void) arg;
	(void) key;
	((rd_group *) val)->cal = NULL;
}

static void
cal_unlink_pool(void *arg, const char *key, void *val)
{
	(void) arg;
	(void) key;
	((rd_pool *) val)->cal = NULL;
}

void
axrd_calendars_free(rd_state *st)
{
	if (st->groups != NULL)
		ax_strmap_each(st->groups, cal_unlink, NULL);
	if (st->pools != NULL)
		ax_strmap_each(st->pools, cal_unlink_pool, NULL);
	ax_store_calendars_free(st->cals, st->ncals);
	st->cals  = NULL;
	st->ncals = 0;
}

/*
 * Reads the capacity_calendars table (at start, and after a ControlOp
 * "calendar"): each calendar applies to the pool and the worker group of
 * its name. A failure keeps the calendars in force and tries again at
 * the next recheck; a row that does not parse (ax-api validates what it
 * stores, so only a hand-written one) is logged and skipped.
 */
void
axrd_calendars_load(rd_state *st)
{
	ax_store_calendar *rows;
	size_t             n;

	st->calendar_reload = 1;
	if (st->ctx->dsn == NULL) {
		st->calendar_reload = 0;
		return;
	}
	if (axrd_store(st) == NULL ||
	    ax_store_calendars_load(st->store, COMP, &rows, &n) != AX_OK) {
		ax_logf(AX_LOG_WARN, COMP, "DB_ERROR", NULL,
		        "capacity calendars not read (those in force stay; "
		        "next try in %lld ms): %s",
		        (long long) (RD_PAUSE_RECHECK / AX_USEC_PER_MSEC),
		        ax_err_detail());
		return;
	}
	axrd_calendars_free(st);
	st->cals  = rows; /* owned; not moved again until the next load */
	st->ncals = n;
	for (size_t i = 0; i < n; i++) {
		rd_group *g = axrd_group_get(st, rows[i].name);
		rd_pool  *p = axrd_pool_get(st, rows[i].name);
		if (g != NULL)
			g->cal = &rows[i].cal;
		if (p != NULL)
			p->cal = &rows[i].cal;
	}
	st->calendar_reload = 0;
	ax_log_info(COMP, "%zu capacity calendars in force", st->ncals);
}

/* The slots a capacity calendar gives l's pool (first) or group at now
 * (utc), or -1 when none is in force: what explain says holds it. */
int64_t
axrd_calendar_slots(const rd_lane *l, int64_t now)
{
	int64_t cs;

	if (l->pool != NULL && l->pool->cal != NULL &&
	    (cs = ax_calendar_slots_at(l->pool->cal, now)) >= 0)
		return cs;
	if (l->group->cal != NULL)
		return ax_calendar_slots_at(l->group->cal, now);
	return -1;
}
