/*
 * queue_preempt.c - preemption in the queue service: when an attempt of
 * a higher tier waits in a worker group with no free slot, one running
 * preemptible attempt of a lower tier is stopped so that it gets the
 * slot (the rules: engine/preempt.h; the queue applies them here).
 *
 * Why: the resource detector admits up to resources.overcommit times a
 * group's slots, so a P0 attempt can wait in the queue behind the running
 * work of a P3 burst for as long as that work runs. Preemption bounds
 * that wait by the victim's kill (its worker's next heartbeat, then
 * SIGTERM, then SIGKILL after the task's kill grace). A wrong stop costs
 * the victim's work so far; every guard of engine/preempt.h bounds how
 * often that can happen, so that preemption never turns into a storm.
 *
 * How: axq_preempt_scan runs from the queue's timers, at most once every
 * PRE_SCAN_US and only while preemption.enabled. Per group without a free
 * slot it takes the waiting attempts of tiers P0..P2 (best tier first),
 * counts one winner as served per victim already being stopped, and for
 * each further winner asks ax_preempt_choose among the group's running
 * attempts. The victim is marked kill (reason PREEMPTED): the worker is
 * told in its next HeartbeatReply (cancel_run_ids), stops it, and reports
 * CANCELED; axq_forward carries the reason, and the result handler puts
 * the instance back to PENDING for a jittered, throttled requeue.
 *
 * State: the instances preempted inside preemption.window (qpre, FIFO by
 * time and a map by instance id), and per worker the instants of its
 * last preemptions (qworker.pre_at). Cost: O(queued + running) of the
 * groups that are full, per scan; nothing on the dispatch path.
 * Thread: the queue actor's only.
 */
#include "queue_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aging.h"
#include "clock.h"
#include "config.h"
#include "preempt.h"

#define PRE_SCAN_US     (200 * 1000) /* between two scans */
#define PRE_WINNERS_MAX 32           /* winners looked at per group */
#define PRE_MINUTE_US   (60 * AX_USEC_PER_SEC)

/* One instance preempted at `at` (mono us). */
typedef struct qpre {
	ax_list_node n; /* q->pre_fifo */
	int64_t      at;
	char         key[24]; /* instance id text */
} qpre;

void
axq_preempt_init(ax_queue *q)
{
	const ax_config *cfg = q->pctx->cfg;

	q->pre_on = ax_config_bool(cfg, "preemption.enabled");
	q->pre_pol.max_runtime_us =
	    ax_config_duration_us(cfg, "preemption.max_runtime");
	q->pre_pol.per_worker_per_min =
	    (int) ax_config_int(cfg, "preemption.per_worker_per_minute");
	if (q->pre_pol.per_worker_per_min > AXQ_PRE_RING)
		q->pre_pol.per_worker_per_min = AXQ_PRE_RING;
	q->pre_window_us = ax_config_duration_us(cfg, "preemption.window");
	q->pre_grace_ms =
	    ax_config_duration_us(cfg, "preemption.grace") / AX_USEC_PER_MSEC;
	if (q->pre_on && ax_strmap_new(&q->pre_hist) != AX_OK)
		q->pre_on = 0;
}

void
axq_preempt_fini(ax_queue *q)
{
	ax_strmap_free(q->pre_hist, free);
	q->pre_hist = NULL;
}

/* The tier of an attempt's impact text ("P0".."P3"; anything else P2,
 * the DAG default). */
int
axq_tier_of(const char *impact)
{
	if (impact != NULL && impact[0] == 'P' && impact[1] >= '0' &&
	    impact[1] <= '3' && impact[2] == '\0')
		return impact[1] - '0';
	return 2;
}

/* Forgets the preemptions older than the window (now: mono us). */
static void
hist_prune(ax_queue *q, int64_t now)
{
	qpre *p;
	while ((p = AX_LIST_ENTRY(q->pre_fifo.head, qpre, n)) != NULL &&
	       p->at + q->pre_window_us <= now) {
		ax_list_remove(&q->pre_fifo, &p->n);
		(void) ax_strmap_del(q->pre_hist, p->key);
		free(p);
	}
}

/* 1 when the instance of a was preempted inside the window. */
static int
preempted_before(const ax_queue *q, const qatt *a)
{
	return a->inst_key[0] && ax_strmap_get(q->pre_hist, a->inst_key);
}

static void
hist_add(ax_queue *q, const qatt *a, int64_t now)
{
	qpre *p;
	if (!a->inst_key[0] || q->pre_hist == NULL)
		return; /* no history while preemption.enabled is off */
	if ((p = ax_strmap_del(q->pre_hist, a->inst_key)) != NULL) {
		ax_list_remove(&q->pre_fifo, &p->n);
		free(p);
	}
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return;
	p->at = now;
	snprintf(p->key, sizeof(p->key), "%s", a->inst_key);
	if (ax_strmap_put(q->pre_hist, p->key, p) != AX_OK) {
		free(p);
		return;
	}
	ax_list_append(&q->pre_fifo, &p->n);
}

/* w's preemptions in the last minute (now: mono us). */
static int
worker_recent(const qworker *w, int64_t now)
{
	int k = 0;
	for (int i = 0; i < AXQ_PRE_RING; i++)
		if (w->pre_at[i] != 0 && w->pre_at[i] + PRE_MINUTE_US > now)
			k++;
	return k;
}

/* Free slots of g's live, not draining workers, and (*stopping) the
 * victims already being stopped there. */
static int32_t
group_free(const qgroup *g, int *stopping)
{
	int32_t free_ = 0;
	*stopping     = 0;
	for (ax_list_node *x = g->members.head; x != NULL; x = x->next) {
		const qworker *w = QWORKER(x, gn);
		if (!w->alive || w->draining)
			continue;
		free_ += w->slots > w->used ? w->slots - w->used : 0;
		for (ax_list_node *n = w->att.head; n != NULL; n = n->next) {
			const qatt *a = QATT(n, wn);
			if (a->kill &&
			    strcmp(a->kill_reason, "PREEMPTED") == 0)
				(*stopping)++;
		}
	}
	return free_;
}

/* Winner order: the higher tier first, then the heap order's key. */
static int
winner_before(const qatt *a, const qatt *b)
{
	if (a->tier != b->tier)
		return a->tier < b->tier;
	if (a->key != b->key)
		return a->key > b->key;
	return a->seq < b->seq;
}

/* The best waiting attempts of g of tiers P0..P2 into w[0..max), best
 * first; returns how many. */
static size_t
group_winners(qgroup *g, qatt **w, size_t max)
{
	size_t n = 0;
	for (int ch = 0; ch < AX_QUEUE_NCHANNELS; ch++)
		for (size_t i = 0; i < g->heaps[ch].n; i++) {
			qatt  *a = axq_heap_at(&g->heaps[ch], i);
			size_t j;
			if (a->tier >= AX_TIER_COUNT - 1)
				continue;
			if (n == max && !winner_before(a, w[n - 1]))
				continue;
			if (n < max)
				n++;
			for (j = n - 1; j > 0 && winner_before(a, w[j - 1]);
			     j--)
				w[j] = w[j - 1];
			w[j] = a;
		}
	return n;
}

/* The running attempts of g as candidates (c[i] describes v[i]); returns
 * how many (at most max). now: mono us, utc: UTC us. */
static size_t
group_cands(const ax_queue *q, const qgroup *g, ax_preempt_cand *c, qatt **v,
            size_t max, int64_t now, int64_t utc)
{
	size_t n = 0;
	for (ax_list_node *x = g->members.head; x != NULL; x = x->next) {
		const qworker *w = QWORKER(x, gn);
		if (!w->alive)
			continue;
		int recent = worker_recent(w, now);
		for (ax_list_node *y = w->att.head; y != NULL && n < max;
		     y               = y->next) {
			qatt *a = QATT(y, wn);
			/* sent beyond the slots and not started: it holds
			 * no slot to free (withdraw_due gives it back) */
			if (a->state != ST_RUNNING || a->kill ||
			    a->ar == NULL ||
			    (a->prefetched && axq_att_unstarted(a)))
				continue;
			c[n] = (ax_preempt_cand) {
				.preemptible      = a->preemptible,
				.tier             = a->tier,
				.priority         = a->ar->priority,
				.runtime_us       = a->started_at_us > 0
				          ? utc - a->started_at_us
				          : -1,
				.preempted_before = preempted_before(q, a),
				.worker_recent    = recent,
			};
			v[n++] = a;
		}
	}
	return n;
}

void
axq_preempt_mark(ax_queue *q, qatt *v, int64_t now)
{
	qworker *w = v->worker;

	v->kill          = 1;
	v->kill_grace_ms = q->pre_grace_ms;
	snprintf(v->kill_reason, sizeof(v->kill_reason), "PREEMPTED");
	w->pre_at[w->pre_i] = now;
	w->pre_i            = (w->pre_i + 1) % AXQ_PRE_RING;
	hist_add(q, v, now);
	STAT(q, st_preemptions, 1);
}

/* Stops victim v for winner win: the kill goes out in v's worker's next
 * HeartbeatReply; one event names both (now: mono us). */
static void
preempt(ax_queue *q, qatt *v, const qatt *win, int64_t now)
{
	qworker   *w = v->worker;
	char       json[600];
	ax_log_ids ids = axq_att_ids(v);

	axq_preempt_mark(q, v, now);
	snprintf(json, sizeof(json),
	         "{\"victim\":\"%.64s\",\"victim_tier\":\"P%d\","
	         "\"victim_instance\":\"%s\",\"winner\":\"%.64s\","
	         "\"winner_tier\":\"P%d\",\"winner_instance\":\"%s\","
	         "\"winner_dag\":\"%.100s\",\"winner_task\":\"%.100s\","
	         "\"worker\":\"%.100s\",\"group\":\"%.100s\"}",
	         v->run_id, v->tier, v->inst_key, win->run_id, win->tier,
	         win->inst_key,
	         win->ar && win->ar->instance ? win->ar->instance->dag : "",
	         win->ar && win->ar->instance ? win->ar->instance->task : "",
	         w->id, v->group ? v->group->name : "");
	ax_logf(AX_LOG_INFO, AX_A_QUEUE, "PREEMPTED", &ids,
	        "stopping it on %s for %s (P%d over P%d)", w->id, win->run_id,
	        win->tier, v->tier);
	ax_err rv = ax_pipeline_event(q->self, "attempt.preempted",
	                              "PREEMPTED", &ids, json, 0);
	if (rv != AX_OK && rv != AX_ENOENT)
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "SEND_FAILED", &ids,
		        "event attempt.preempted: %s", ax_err_detail());
}

/* Preemption for the full group g (now: mono us, utc: UTC us); returns 1
 * when a winner is still waiting without a victim (scan again soon). */
static int
group_scan(ax_queue *q, qgroup *g, int64_t now, int64_t utc)
{
	qatt  *win[PRE_WINNERS_MAX];
	int    stopping;
	size_t nw, nc = 0, cap = 0;

	if (group_free(g, &stopping) > 0)
		return 0; /* a worker will pull the winners */
	if ((nw = group_winners(g, win, PRE_WINNERS_MAX)) <= (size_t) stopping)
		return 0; /* the victims being stopped make room for them */
	for (ax_list_node *x = g->members.head; x != NULL; x = x->next)
		cap += (size_t) QWORKER(x, gn)->slots;
	ax_preempt_cand *c       = calloc(cap + 1, sizeof(*c));
	qatt           **v       = calloc(cap + 1, sizeof(*v));
	int              waiting = 0;
	if (c == NULL || v == NULL)
		goto out;
	nc = group_cands(q, g, c, v, cap, now, utc);
	for (size_t i = (size_t) stopping; i < nw; i++) {
		ax_preempt_verdict why;
		long               k =
		    ax_preempt_choose(&q->pre_pol, win[i]->tier, c, nc, &why);
		if (k < 0) {
			waiting = 1;
			continue;
		}
		preempt(q, v[k], win[i], now);
		/* the victim leaves the candidates; its worker's count grows
		 */
		qworker *vw = v[k]->worker;
		c[k]        = c[--nc];
		v[k]        = v[nc];
		for (size_t j = 0; j < nc; j++)
			if (v[j]->worker == vw)
				c[j].worker_recent++;
	}
out:
	free(c);
	free(v);
	return waiting;
}

int64_t
axq_preempt_scan(ax_queue *q, int64_t now)
{
	ax_hmap_iter it;
	qgroup      *g;
	int          again = 0;

	if (!q->pre_on)
		return INT64_MAX;
	if (now < q->pre_next)
		return q->pre_next;
	q->pre_next = now + PRE_SCAN_US;
	hist_prune(q, now);
	int64_t utc = ax_clock_utc_us();
	ax_hmap_iter_init(&it, &q->groups);
	while ((g = ax_hmap_iter_next(&it)) != NULL)
		again |= group_scan(q, g, now, utc);
	/* while a winner waits, every scan period (a running victim may
	 * become eligible: a worker's minute passes); else at the next
	 * event that runs the timers */
	return again ? q->pre_next : INT64_MAX;
}
