/*
 * shave.c - peak shaving and pushed water levels for the resource
 * detector (see resource_internal.h for its files).
 *
 * Shaving (engine/shaving.h has the decision and why it exists): an item
 * arriving while its group's backlog (items waiting in its lanes) or
 * water level passes a threshold, and whose tier is the lowest present
 * (waiting or delayed) in the group and not P0, is delayed by a bounded,
 * jittered amount: it waits in its lane's `delayed` heap, announced once
 * as instance.delayed BACKPRESSURE_DELAYED with the instant until which.
 * After every batch and tick (settle), delayed items go back to their
 * lane at their instant, or earlier as soon as the group is no longer
 * overloaded (a slot freed, the backlog drained, the level fell): the
 * delay is an upper bound, never a wait on idle capacity.
 *
 * Water levels (pool_pressure, PUT /api/v1/pools/{name}/pressure): a
 * level pushed for a name applies to the pool and to the worker group of
 * that name until it expires. It counts as the group's water level for
 * shaving, and at shaving.pressure_hold or above the P1..P3 lanes of the
 * group or pool admit nothing (axrd_lane_hold "pressure"); P0 lanes go on
 * within their reserve. The table is read before the first batch and
 * after a ControlOp "pressure" (ax-api's NOTIFY), like the rules.
 *
 * Cost: O(1) per arrival (counters per group), O(log n) per delay and
 * release; settle looks at the head of each lane's delayed heap (a
 * handful of lanes). No database access but the table's read per change.
 */
#include "resource_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dag.h"
#include "hash.h"
#include "log.h"

/* Earliest instant first, then arrival. */
static int
delayed_before(const ax_heap_node *a, const ax_heap_node *b)
{
	const rd_item *x = AX_HEAP_ENTRY(a, rd_item, hn);
	const rd_item *y = AX_HEAP_ENTRY(b, rd_item, hn);
	if (x->until_us != y->until_us)
		return x->until_us < y->until_us;
	return x->seq < y->seq;
}

void
axrd_lane_delayed_init(rd_lane *l)
{
	ax_heap_init(&l->delayed, delayed_before);
}

/* Reads the shaving.* keys. */
void
axrd_shave_init(rd_state *st)
{
	static const char *const keys[AX_TIER_COUNT] = {
		NULL,
		"shaving.max_delay_p1",
		"shaving.max_delay_p2",
		"shaving.max_delay_p3",
	};
	const ax_config *cfg = st->ctx->cfg;

	st->shave.enabled   = ax_config_bool(cfg, "shaving.enabled");
	st->shave.backlog   = ax_config_int(cfg, "shaving.backlog");
	st->shave.level_pct = (int) ax_config_int(cfg, "shaving.level");
	for (int t = 1; t < AX_TIER_COUNT; t++)
		st->shave.max_delay_us[t] =
		    ax_config_duration_us(cfg, keys[t]);
	st->hold_pct = (int) ax_config_int(cfg, "shaving.pressure_hold");
	st->pressure_reload = 1;
}

void
axrd_shave_fini(rd_state *st)
{
	for (size_t i = 0; i < st->npressure; i++)
		free(st->pressure_names[i]);
	free(st->pressure_names);
}

/*
 * The water level (percent) of lane l at now (utc): the higher of the
 * levels pushed for its group and its pool that have not expired; 0
 * when none is in force.
 */
int
axrd_level(const rd_state *st, const rd_lane *l, int64_t now)
{
	return axrd_group_level(st, l->group, l->pool, now);
}

/* The same for group g and pool p (NULL: none). */
int
axrd_group_level(const rd_state *st, const rd_group *g, const rd_pool *p,
                 int64_t now)
{
	int lv = 0;

	if (st->npressure == 0)
		return 0;
	if (g->pressure_until_us > now)
		lv = g->pressure_pct;
	if (p != NULL && p->pressure_until_us > now && p->pressure_pct > lv)
		lv = p->pressure_pct;
	return lv;
}

/* When the level axrd_level gives for l at now expires (utc; 0: none). */
int64_t
axrd_level_until(const rd_state *st, const rd_lane *l, int64_t now)
{
	int     lv = axrd_level(st, l, now);
	int64_t u  = 0;

	if (lv == 0)
		return 0;
	if (l->group->pressure_until_us > now && l->group->pressure_pct == lv)
		u = l->group->pressure_until_us;
	if (l->pool != NULL && l->pool->pressure_until_us > now &&
	    l->pool->pressure_pct == lv && l->pool->pressure_until_us > u)
		u = l->pool->pressure_until_us;
	return u;
}

/* The load of it's group at now, as ax_shave_delay takes it. */
static ax_shave_load
group_load(const rd_state *st, const rd_lane *l, int tier, int64_t now)
{
	ax_shave_load load = { .backlog   = l->group->nwait,
		               .level_pct = axrd_level(st, l, now),
		               .lowest    = tier };
	for (int t = AX_TIER_COUNT - 1; t > load.lowest; t--)
		if (l->group->present[t] > 0) {
			load.lowest = t;
			break;
		}
	return load;
}

/* Announces a delayed item: instance.delayed BACKPRESSURE_DELAYED with
 * the instant until which, and the load that decided it. */
static void
announce(ax_actor *self, const rd_state *st, rd_item *it,
         const ax_shave_load *load, int64_t now)
{
	char payload[900], g[300], p[300], until[40];

	g[0] = p[0] = '\0';
	ax_json_escape(g, 0, sizeof(g), it->lane->gname);
	ax_json_escape(p, 0, sizeof(p), it->lane->pname);
	ax_clock_fmt_utc(it->until_us, until, sizeof(until));
	snprintf(payload, sizeof(payload),
	         "{\"tier\":\"%s\",\"held_by\":\"shaving\",\"group\":\"%s\","
	         "\"pool\":\"%s\",\"until\":\"%s\",\"until_us\":%lld,"
	         "\"delay_ms\":%lld,\"backlog\":%lld,"
	         "\"backlog_threshold\":%lld,\"level_pct\":%d,"
	         "\"level_threshold_pct\":%d,\"lowest_tier\":\"%s\"}",
	         ax_impact_name((ax_impact) it->tier), g, p, until,
	         (long long) it->until_us,
	         (long long) ((it->until_us - now) / AX_USEC_PER_MSEC),
	         (long long) load->backlog, (long long) st->shave.backlog,
	         load->level_pct, st->shave.level_pct,
	         ax_impact_name((ax_impact) load->lowest));
	axrd_emit(self, it, "instance.delayed", "BACKPRESSURE_DELAYED",
	          payload);
	it->announced = 1;
}

/*
 * Delays the arriving item it (not yet in a lane, nothing holds it) when
 * shaving says so: it goes to its lane's delayed heap and is announced.
 * Returns 1 when delayed, 0 when the caller puts it in its lane (also
 * when the heap cannot grow: admitting it undelayed is the safe side).
 */
int
axrd_shave(ax_actor *self, rd_state *st, rd_item *it)
{
	int64_t       now = ax_clock_utc_us();
	ax_shave_load load;
	int64_t       d;

	if (!st->shave.enabled || it->tier == AX_IMPACT_P0)
		return 0;
	load = group_load(st, it->lane, it->tier, now);
	d    = ax_shave_delay(&st->shave, &load, it->tier,
	                      ax_hash_str(it->key) ^ it->seq);
	if (d == 0)
		return 0;
	it->until_us = now + d;
	if (ax_heap_push(&it->lane->delayed, &it->hn) != AX_OK)
		return 0;
	it->state = RD_DELAYED;
	it->lane->group->present[it->tier]++;
	st->ndelayed++;
	st->shaved++;
	announce(self, st, it, &load, now);
	return 1;
}

/* The delayed head of l goes back to its lane, or to the blocked list
 * when a rule or a pause now holds it. */
static ax_err
release_head(ax_actor *self, rd_state *st, rd_lane *l, int64_t now)
{
	char     buf[AX_RD_REASON_MAX];
	rd_item *it = AX_HEAP_ENTRY(ax_heap_pop(&l->delayed), rd_item, hn);

	l->group->present[it->tier]--;
	st->ndelayed--;
	const char *why = axrd_hold_reason(st, it, now, buf, sizeof(buf));
	if (why != NULL)
		return axrd_block_item(self, st, it, why);
	return axrd_lane_push(st, l, it);
}

/*
 * Releases delayed items whose instant has come, and those of groups no
 * longer overloaded (earliest first, until the group is overloaded
 * again); *released counts them. Runs in settle before each drain, so a
 * slot that frees lets a delayed item in at once.
 */
ax_err
axrd_shave_release(ax_actor *self, rd_state *st, int *released)
{
	int64_t now = ax_clock_utc_us();
	ax_err  rv;

	*released = 0;
	if (st->ndelayed == 0)
		return AX_OK;
	for (rd_lane *l = st->lane_list; l != NULL; l = l->next) {
		rd_item *it;
		while ((it = AX_HEAP_ENTRY(ax_heap_top(&l->delayed), rd_item,
		                           hn)) != NULL) {
			ax_shave_load load = group_load(st, l, 0, now);
			if (it->until_us > now &&
			    ax_shave_overloaded(&st->shave, &load))
				break;
			if ((rv = release_head(self, st, l, now)) != AX_OK)
				return rv;
			(*released)++;
		}
	}
	return AX_OK;
}

/*
 * The next instant (utc) at which something here changes by time alone:
 * the earliest delayed item's, or the next expiry of a pushed level; 0
 * when none.
 */
int64_t
axrd_shave_next(const rd_state *st)
{
	int64_t next = 0, now = ax_clock_utc_us();

	for (const rd_lane *l = st->lane_list; st->ndelayed > 0 && l != NULL;
	     l                = l->next) {
		const rd_item *it = AX_HEAP_ENTRY(
		    ax_heap_top((ax_heap *) &l->delayed), rd_item, hn);
		if (it != NULL && (next == 0 || it->until_us < next))
			next = it->until_us;
	}
	for (size_t i = 0; i < st->npressure; i++) {
		const rd_group *g =
		    ax_strmap_get(st->groups, st->pressure_names[i]);
		const rd_pool *p =
		    ax_strmap_get(st->pools, st->pressure_names[i]);
		int64_t u = g != NULL ? g->pressure_until_us : 0;
		if (p != NULL && p->pressure_until_us > u)
			u = p->pressure_until_us;
		if (u > now && (next == 0 || u < next))
			next = u;
	}
	return next;
}

/* Forgets the levels in force (before a read replaces them). */
static void
pressure_clear(rd_state *st)
{
	for (size_t i = 0; i < st->npressure; i++) {
		rd_group *g = ax_strmap_get(st->groups, st->pressure_names[i]);
		rd_pool  *p = ax_strmap_get(st->pools, st->pressure_names[i]);
		if (g != NULL)
			g->pressure_pct = 0, g->pressure_until_us = 0;
		if (p != NULL)
			p->pressure_pct = 0, p->pressure_until_us = 0;
		free(st->pressure_names[i]);
	}
	free(st->pressure_names);
	st->pressure_names = NULL;
	st->npressure      = 0;
}

/*
 * Reads the levels in force from pool_pressure into the groups and pools
 * of their names (created on first use). A failure keeps the levels in
 * force and asks for another read at the next recheck (a second).
 */
void
axrd_pressure_load(rd_state *st)
{
	PGresult *r;

	st->pressure_reload = 1;
	if (st->ctx->dsn == NULL) {
		st->pressure_reload = 0;
		return;
	}
	if (axrd_store(st) == NULL ||
	    ax_store_query(st->store,
	                   "SELECT name, ceil(level * 100)::int, "
	                   "ax_us(expires_at) FROM pool_pressure "
	                   "WHERE expires_at > now()",
	                   0, NULL, &r) != AX_OK) {
		ax_logf(AX_LOG_WARN, COMP, "DB_ERROR", NULL,
		        "pool pressure not read (the levels in force stay; "
		        "next try in %lld ms): %s",
		        (long long) (RD_PAUSE_RECHECK / AX_USEC_PER_MSEC),
		        ax_err_detail());
		return;
	}
	pressure_clear(st);
	int n = PQntuples(r);
	if (n > 0 &&
	    (st->pressure_names = calloc((size_t) n, sizeof(char *))) ==
	        NULL) {
		PQclear(r);
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *name = PQgetvalue(r, i, 0);
		rd_group   *g    = axrd_group_get(st, name);
		rd_pool    *p    = axrd_pool_get(st, name);
		int         pct  = atoi(PQgetvalue(r, i, 1));
		int64_t     u    = strtoll(PQgetvalue(r, i, 2), NULL, 10);
		char       *dup  = strdup(name);
		if (g == NULL || p == NULL || dup == NULL) {
			free(dup);
			continue;
		}
		g->pressure_pct = p->pressure_pct = pct;
		g->pressure_until_us = p->pressure_until_us = u;
		st->pressure_names[st->npressure++]         = dup;
	}
	PQclear(r);
	st->pressure_reload = 0;
	ax_logf(AX_LOG_INFO, COMP, NULL, NULL, "%zu pool pressures loaded",
	        st->npressure);
}
