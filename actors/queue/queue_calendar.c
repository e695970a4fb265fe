/*
 * queue_calendar.c - capacity calendars that preempt, in the queue
 * service: while a window with "preempt": true holds (engine/calendar.h),
 * the running attempts of the worker group and of the pool of the
 * calendar's name are brought down to the window's slots by stopping
 * running attempts of preemptible tasks, and the group's workers are
 * given no more than the window allows.
 *
 * Why: the resource detector applies a calendar at admission only, so at
 * 08:00, when a GPU calendar drops batch work from 7 slots to 1, the six
 * attempts beyond it would run on for hours. An operator who sets
 * preempt expects them stopped at once; the task's `preemptible: true`
 * is the task owner's consent. A wrong stop costs the victim's work so
 * far (the most recently started go first, so the least); a victim
 * requeues PREEMPTED like any preemption victim and the detector then
 * holds it until the window gives a slot, so no storm follows and the
 * tier guards of engine/preempt.h (preemption.enabled, max_runtime,
 * per_worker_per_minute, the window) do not apply: the calendar's flag
 * is the opt-in and the stop is one per window turn, not one per
 * winner. The victims still count in their worker's preemptions of the
 * minute and in the preemption window, so tier preemption is not piled
 * on top of them. The kill goes out with preemption.grace.
 *
 * The dispatch gate (axq_calendar_room): work admitted before the window
 * turned may still wait in the group's heaps; without the gate a
 * victim's slot would go to one of them at once, which the next scan
 * would stop again. When the gate gives room again (a slot freed, the
 * window turned or was removed) the scan answers the group's parked
 * Pulls at once rather than at their long poll's end. Pools: their slots
 * are not gated at dispatch (an attempt of a full pool at the top of a
 * heap would hold the group's other work), so there such leftovers may
 * start and are stopped by the next scan.
 *
 * How: the calendars with a preempting window are read from
 * capacity_calendars at the start and after a ControlOp "calendar"
 * (a failed read keeps those in force and is tried again each scan);
 * axq_calendar_scan runs from the timers every CAL_SCAN_US while one is
 * loaded and applies ax_calendar_victims per group and per pool whose
 * window in force preempts. One attempt.preempted event per victim names
 * the calendar and its slots in force. Cost per scan: O(groups + the
 * attempts in flight) per calendar in force; nothing when none is loaded.
 * Thread: the queue actor's only.
 */
#include "queue_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "store_calendars.h"

#define CAL_SCAN_US (500 * 1000) /* between two scans; the reload retry */

/* One calendar with a window that preempts. Owned by q->cals. */
struct qcal {
	char       *name; /* the group's and the pool's */
	ax_calendar cal;
	int64_t     slots; /* the preempting window in force, last scan;
	                      -1: none */
};

static void
cals_free(ax_queue *q)
{
	ax_hmap_iter it;
	qgroup      *g;

	ax_hmap_iter_init(&it, &q->groups);
	while ((g = ax_hmap_iter_next(&it)) != NULL)
		g->cal = NULL;
	for (size_t i = 0; i < q->ncal; i++) {
		ax_calendar_fini(&q->cals[i].cal);
		free(q->cals[i].name);
	}
	free(q->cals);
	q->cals = NULL;
	q->ncal = 0;
}

void
axq_calendar_init(ax_queue *q)
{
	q->cal_reload = q->store != NULL;
}

void
axq_calendar_fini(ax_queue *q)
{
	cals_free(q);
}

void
axq_calendar_reload(ax_queue *q)
{
	q->cal_reload = q->store != NULL;
	q->cal_next   = 0;
}

/* Reads capacity_calendars; keeps the calendars with a window that
 * preempts. A row that does not parse (ax-api validates what it stores:
 * only a hand-written one) is logged and skipped. */
static void
cals_load(ax_queue *q)
{
	ax_store_calendar *rows;
	size_t             n;

	if (ax_store_calendars_load(q->store, AX_A_QUEUE, &rows, &n) !=
	    AX_OK) {
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "DB_ERROR", NULL,
		        "capacity calendars not read (those in force stay; "
		        "next try in %d ms): %s",
		        (int) (CAL_SCAN_US / AX_USEC_PER_MSEC),
		        ax_err_detail());
		return;
	}
	cals_free(q);
	if (n > 0 && (q->cals = calloc(n, sizeof(*q->cals))) == NULL) {
		ax_store_calendars_free(rows, n);
		return; /* tried again at the next scan */
	}
	/* only the calendars that preempt matter here: take them */
	for (size_t i = 0; i < n; i++) {
		qcal *c = &q->cals[q->ncal];
		if (!rows[i].cal.any_preempt)
			continue;
		c->name      = rows[i].name;
		c->cal       = rows[i].cal;
		c->slots     = -1;
		rows[i].name = NULL;
		memset(&rows[i].cal, 0, sizeof(rows[i].cal));
		q->ncal++;
	}
	ax_store_calendars_free(rows, n);
	q->cal_reload = 0;
	ax_log_info(AX_A_QUEUE, "%zu capacity calendars that preempt",
	            q->ncal);
}

static qcal *
cal_find(ax_queue *q, const char *name)
{
	for (size_t i = 0; i < q->ncal; i++)
		if (strcmp(q->cals[i].name, name) == 0)
			return &q->cals[i];
	return NULL;
}

/* Whether a counts under c: in c's group (by_pool 0) or c's pool. */
static int
under(const qcal *c, const qatt *a, int by_pool)
{
	if (!by_pool)
		return a->group != NULL &&
		    strcmp(a->group->name, c->name) == 0;
	return a->ar != NULL && a->ar->pool != NULL &&
	    strcmp(a->ar->pool, c->name) == 0;
}

/* Stops v for calendar c (its window's slots, held: the slots in flight
 * before the decision); one event names both (now: mono us). */
static void
stop(ax_queue *q, qatt *v, const qcal *c, int by_pool, int64_t held,
     int64_t now)
{
	char        json[800];
	ax_log_ids  ids = axq_att_ids(v);
	const char *dag = v->ar && v->ar->instance ? v->ar->instance->dag : "";
	const char *task =
	    v->ar && v->ar->instance ? v->ar->instance->task : "";

	axq_preempt_mark(q, v, now);
	snprintf(json, sizeof(json),
	         "{\"victim\":\"%.64s\",\"victim_tier\":\"P%d\","
	         "\"victim_instance\":\"%s\",\"victim_dag\":\"%.100s\","
	         "\"victim_task\":\"%.100s\",\"worker\":\"%.100s\","
	         "\"group\":\"%.100s\",\"calendar\":\"%.100s\","
	         "\"calendar_of\":\"%s\",\"calendar_slots\":%lld,"
	         "\"held_slots\":%lld}",
	         v->run_id, v->tier, v->inst_key, dag, task, v->worker->id,
	         v->group ? v->group->name : "", c->name,
	         by_pool ? "pool" : "group", (long long) c->slots,
	         (long long) held);
	ax_logf(AX_LOG_INFO, AX_A_QUEUE, "PREEMPTED", &ids,
	        "stopping it on %s: the capacity calendar of %s %s gives %lld "
	        "slots, %lld run",
	        v->worker->id, by_pool ? "pool" : "group", c->name,
	        (long long) c->slots, (long long) held);
	ax_err rv = ax_pipeline_event(q->self, "attempt.preempted",
	                              "PREEMPTED", &ids, json, 0);
	if (rv != AX_OK && rv != AX_ENOENT)
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "SEND_FAILED", &ids,
		        "event attempt.preempted: %s", ax_err_detail());
}

/* The attempts in flight under c on the live workers of g (g NULL: of
 * every group) into v[0..max) and their candidates into k. */
static size_t
cands_of(ax_queue *q, const qgroup *g, const qcal *c, int by_pool,
         ax_calendar_cand *k, qatt **v, size_t max)
{
	ax_hmap_iter it;
	qworker     *w;
	size_t       n = 0;

	ax_hmap_iter_init(&it, &q->workers);
	while ((w = ax_hmap_iter_next(&it)) != NULL) {
		if (!w->alive || (g != NULL && w->group != g))
			continue;
		for (ax_list_node *x = w->att.head; x != NULL && n < max;
		     x               = x->next) {
			qatt *a = QATT(x, wn);
			/* held for its instant, not started: queued work,
			 * asked back (withdraw_due), not a victim */
			if (!under(c, a, by_pool) || axq_att_unstarted(a))
				continue;
			k[n] = (ax_calendar_cand) {
				.preemptible = a->preemptible,
				.tier        = a->tier,
				.slots =
				    a->slots > w->slots ? w->slots : a->slots,
				.started_at_us = a->state == ST_RUNNING
				    ? a->started_at_us
				    : 0,
				.stopping      = a->kill,
			};
			v[n++] = a;
		}
	}
	return n;
}

/* Applies c's window in force to its group g (NULL: to its pool). */
static void
fit(ax_queue *q, qgroup *g, const qcal *c, int64_t now)
{
	size_t            max  = 0, n, nv;
	int64_t           held = 0, over;
	ax_hmap_iter      it;
	qworker          *w;
	ax_calendar_cand *k;
	qatt            **v;
	size_t           *out;

	ax_hmap_iter_init(&it, &q->workers);
	while ((w = ax_hmap_iter_next(&it)) != NULL)
		if (w->alive && (g == NULL || w->group == g))
			max += (size_t) (w->used > 0 ? w->used : 0);
	if ((int64_t) max <= c->slots)
		return; /* every attempt holds a slot at least: they fit */
	k   = calloc(max, sizeof(*k));
	v   = calloc(max, sizeof(*v));
	out = calloc(max, sizeof(*out));
	if (k != NULL && v != NULL && out != NULL) {
		n = cands_of(q, g, c, g == NULL, k, v, max);
		for (size_t i = 0; i < n; i++)
			held += k[i].stopping ? 0 : k[i].slots;
		nv = ax_calendar_victims(c->slots, k, n, out, &over);
		for (size_t i = 0; i < nv; i++)
			stop(q, v[out[i]], c, g == NULL, held, now);
	}
	free(k);
	free(v);
	free(out);
}

/* The gate cut g's Pulls and gives room again (a slot freed, the window
 * turned or went): the parked Pulls are answered now, not at their
 * long poll's end. */
static void
refill(ax_queue *q, qgroup *g)
{
	g->cal_cut = 0;
	for (ax_list_node *n = g->parked.head, *nx; n != NULL; n = nx) {
		nx = n->next;
		axq_try_fill(q, QWORKER(n, pkn));
	}
}

int64_t
axq_calendar_scan(ax_queue *q, int64_t now)
{
	ax_hmap_iter it;
	qgroup      *g;
	int64_t      utc;

	if (!q->cal_reload && q->ncal == 0)
		return INT64_MAX;
	if (now < q->cal_next)
		return q->cal_next;
	q->cal_next = now + CAL_SCAN_US;
	if (q->cal_reload)
		cals_load(q);
	utc = ax_clock_utc_us();
	for (size_t i = 0; i < q->ncal; i++) {
		qcal *c  = &q->cals[i];
		long  wi = ax_calendar_window_at(&c->cal, utc);
		c->slots =
		    wi >= 0 && c->cal.preempt[wi] ? c->cal.slots[wi] : -1;
	}
	ax_hmap_iter_init(&it, &q->groups);
	while ((g = ax_hmap_iter_next(&it)) != NULL) {
		g->cal = q->ncal > 0 ? cal_find(q, g->name) : NULL;
		if (g->cal != NULL && g->cal->slots >= 0)
			fit(q, g, g->cal, now);
		if (g->cal_cut && axq_calendar_room(g, INT32_MAX) > 0)
			refill(q, g);
	}
	for (size_t i = 0; i < q->ncal; i++)
		if (q->cals[i].slots >= 0)
			fit(q, NULL, &q->cals[i], now);
	return q->ncal > 0 || q->cal_reload ? q->cal_next : INT64_MAX;
}

int
axq_calendar_in_force(const qgroup *g)
{
	return g != NULL && g->cal != NULL && g->cal->slots >= 0;
}

int32_t
axq_calendar_room(const qgroup *g, int32_t free_)
{
	int64_t held = 0;

	if (g == NULL || g->cal == NULL || g->cal->slots < 0)
		return free_;
	for (ax_list_node *x = g->members.head; x != NULL; x = x->next) {
		const qworker *w = QWORKER(x, gn);
		if (w->alive)
			held += w->used;
	}
	if (held >= g->cal->slots)
		return 0;
	return g->cal->slots - held < free_ ? (int32_t) (g->cal->slots - held)
	                                    : free_;
}
