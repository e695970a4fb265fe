/*
 * queue_workers.c - the queue's workers and worker groups: registration
 * (and the reconciliation of a restarted session), heartbeats, leases
 * and their lapse, lost workers and their attempts (UNKNOWN), the
 * reports a worker sends (Started, Result, Deregister), the group's
 * members and consistent-hash ring, the capacity sent per group to the
 * resource detector and the workers table in PostgreSQL. State in
 * queue_internal.h; the queue's overview and invariants are at the top
 * of queue.c.
 *
 * Leases: any request of a live session renews its worker's lease; a
 * live worker is on the lease FIFO (renewal moves it to the tail), so
 * the next lapse is its head. A lease ends only after lease +
 * queue.lease_grace (lease_touch): the worker fences itself (kills its
 * tasks) within its lease, so when its attempts go UNKNOWN and are
 * retried elsewhere, nothing of them still runs.
 *
 * Workload: per request O(1) (hash maps, list moves) plus the worker's
 * own attempts for a heartbeat or a restart; capacity is summed over a
 * group's members once per batch (cap_flush), worker rows are written in
 * one upsert at most once per heartbeat interval unless a state changed.
 */
#include "queue_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "routing.h"
#include "store_workers.h"
#include "worker.pb-c.h"

/* --------------------------------------------------------------- groups */

qgroup *
axq_group_get(ax_queue *q, const char *name)
{
	qgroup *g = ax_hmap_get(&q->groups, name);
	if (g != NULL)
		return g;
	if ((g = calloc(1, sizeof(*g))) == NULL ||
	    (g->name = strdup(name)) == NULL ||
	    ax_hmap_put(&q->groups, g->name, g, NULL) != AX_OK) {
		if (g)
			free(g->name);
		free(g);
		ax_err_set(AX_ENOMEM, "queue: worker group %s", name);
		return NULL;
	}
	ax_routing_state_init(&g->rs);
	for (int ch = 0; ch < AX_QUEUE_NCHANNELS; ch++)
		axq_heap_init(&g->heaps[ch]);
	axq_heap_init(&g->unrouted);
	return g;
}

void
axq_cap_mark(ax_queue *q, qgroup *g)
{
	if (g != NULL && !g->cap_dirty) {
		g->cap_dirty = 1;
		ax_list_prepend(&q->cap_dirty, &g->cn);
	}
}

/* Whether two sums of named resources hold the same amounts. */
static int
res_same(const ax_res_set *a, const ax_res_set *b)
{
	if (a->n != b->n)
		return 0;
	for (int i = 0; i < a->n; i++)
		if (ax_res_get(b, a->v[i].name) != a->v[i].amount)
			return 0;
	return 1;
}

/*
 * The labels every live, not draining member of g carries with the same
 * value, as canonical text (engine/group_spec.h) in buf: what a task's
 * label selector is matched against, so that any member the queue hands
 * its attempt to satisfies it. "" when g has no such member.
 */
static const char *
common_labels(const qgroup *g, char *buf, size_t len)
{
	ax_label have[AX_LABELS_MAX];
	size_t   n = 0, first = 1;

	for (ax_list_node *m = g->members.head; m != NULL; m = m->next) {
		const qworker *w = QWORKER(m, gn);
		if (w->draining)
			continue;
		if (first) {
			n = w->nlabels < AX_LABELS_MAX ? w->nlabels
			                               : AX_LABELS_MAX;
			if (n > 0) /* labels is NULL without any */
				memcpy(have, w->labels, n * sizeof(have[0]));
			first = 0;
			continue;
		}
		for (size_t i = 0; i < n;) /* keeps those w has too */
			if (ax_labels_match(&have[i], 1, w->labels,
			                    w->nlabels))
				i++;
			else
				have[i] = have[--n];
	}
	return ax_labels_text(have, n, buf, len);
}

/* Sends WorkerCapacity for every group whose totals changed in this
 * batch (coalesced: one per group per batch). */
void
axq_cap_flush(ax_queue *q)
{
	qgroup *g;

	while ((g = QGROUP(ax_list_pop(&q->cap_dirty), cn)) != NULL) {
		int32_t    total = 0, free_ = 0, p0 = 0;
		int64_t    cpu = 0, mem = 0;
		ax_res_set res = { .n = 0 };
		g->cap_dirty   = 0;
		for (ax_list_node *n = g->members.head; n != NULL;
		     n               = n->next) {
			qworker *w = QWORKER(n, gn);
			if (w->draining)
				continue;
			total += w->slots;
			p0 += w->reserve_p0;
			cpu += w->cpu_milli;
			mem += w->memory_bytes;
			for (int i = 0; i < w->res.n; i++) /* full: dropped */
				(void) ax_res_add(&res, w->res.v[i].name,
				                  w->res.v[i].amount);
			free_ += w->slots > w->used ? w->slots - w->used : 0;
		}
		char        ltext[AX_LABELS_MAX * (2 * AX_LABEL_MAX + 2) + 1];
		const char *labels = common_labels(g, ltext, sizeof(ltext));
		if (g->cap_sent && total == g->sent_total &&
		    free_ == g->sent_free && p0 == g->sent_p0 &&
		    cpu == g->sent_cpu && mem == g->sent_mem &&
		    res_same(&res, &g->sent_res) &&
		    strcmp(labels, g->sent_labels ? g->sent_labels : "") == 0)
			continue;
		Ax__Command        cmd = AX__COMMAND__INIT;
		Ax__WorkerCapacity wc  = AX__WORKER_CAPACITY__INIT;
		cmd.issued_at_us       = ax_clock_utc_us();
		cmd.body_case          = AX__COMMAND__BODY_WORKER_CAPACITY;
		cmd.worker_capacity    = &wc;
		wc.worker_group        = g->name;
		wc.slots_total         = total;
		wc.slots_free          = free_;
		wc.reserved_p0         = p0;
		wc.cpu_milli           = cpu;
		wc.memory_bytes        = mem;
		wc.alive               = total > 0;
		Ax__WorkerCapacity__ResourcesEntry  ev[AX_RES_MAX];
		Ax__WorkerCapacity__ResourcesEntry *ep[AX_RES_MAX];
		for (int i = 0; i < res.n; i++) {
			Ax__WorkerCapacity__ResourcesEntry e =
			    AX__WORKER_CAPACITY__RESOURCES_ENTRY__INIT;
			e.key   = res.v[i].name;
			e.value = res.v[i].amount;
			ev[i]   = e;
			ep[i]   = &ev[i];
		}
		wc.n_resources = (size_t) res.n;
		wc.resources   = ep;
		ax_label                         lab[AX_LABELS_MAX];
		Ax__WorkerCapacity__LabelsEntry  lv[AX_LABELS_MAX];
		Ax__WorkerCapacity__LabelsEntry *lp[AX_LABELS_MAX];
		size_t                           nl = 0;
		(void) ax_labels_parse(labels, "labels", lab, AX_LABELS_MAX,
		                       &nl);
		for (size_t i = 0; i < nl; i++) {
			Ax__WorkerCapacity__LabelsEntry e =
			    AX__WORKER_CAPACITY__LABELS_ENTRY__INIT;
			e.key   = lab[i].key;
			e.value = lab[i].value;
			lv[i]   = e;
			lp[i]   = &lv[i];
		}
		wc.n_labels = nl;
		wc.labels   = lp;
		axq_send_cmd(q, AX_A_RESOURCE_DETECTOR, &cmd);
		if (strcmp(labels, g->sent_labels ? g->sent_labels : "") !=
		    0) {
			char *t = strdup(labels);
			if (t != NULL) { /* else: sent again next flush */
				free(g->sent_labels);
				g->sent_labels = t;
			}
		}
		g->cap_sent   = 1;
		g->sent_total = total;
		g->sent_free  = free_;
		g->sent_p0    = p0;
		g->sent_cpu   = cpu;
		g->sent_mem   = mem;
		g->sent_res   = res;
	}
}

/* -------------------------------------------------------------- workers */

/* w's labels from its Register (checked: at most AX_WPROTO_LABELS_MAX;
 * a label that is not a valid key=value pair, or past AX_LABELS_MAX, is
 * left out: it can only make a selector match fewer groups). */
static void
labels_set(qworker *w, const Ax__Register *r)
{
	free(w->labels);
	w->labels  = NULL;
	w->nlabels = 0;
	if (r->n_labels == 0 ||
	    (w->labels = calloc(r->n_labels < AX_LABELS_MAX ? r->n_labels
	                                                    : AX_LABELS_MAX,
	                        sizeof(ax_label))) == NULL)
		return;
	for (size_t i = 0; i < r->n_labels && w->nlabels < AX_LABELS_MAX;
	     i++) {
		char   t[2 * AX_LABEL_MAX + 4];
		size_t n;
		if (r->labels[i]->key == NULL || r->labels[i]->value == NULL ||
		    strchr(r->labels[i]->key, ',') != NULL ||
		    strchr(r->labels[i]->value, ',') != NULL)
			continue;
		snprintf(t, sizeof(t), "%s=%s", r->labels[i]->key,
		         r->labels[i]->value);
		if (ax_labels_parse(t, "labels", &w->labels[w->nlabels], 1,
		                    &n) == AX_OK &&
		    n == 1)
			w->nlabels++;
	}
}

static void
db_mark(ax_queue *q, qworker *w, const char *state, int urgent)
{
	w->db_state = state;
	if (urgent)
		w->db_urgent = 1;
	if (!w->db_dirty) {
		w->db_dirty = 1;
		ax_list_prepend(&q->dirty, &w->dn);
	}
}

/* Writes dirty workers in one upsert: at once after a state change,
 * else at most once per heartbeat interval. A failure is logged and the
 * rows stay dirty for the next round. */
void
axq_db_flush(ax_queue *q, int64_t now)
{
	ax_store_worker_row rows[512];
	size_t              n      = 0;
	int                 urgent = 0;
	qworker            *w;

	if (ax_list_empty(&q->dirty))
		return;
	for (ax_list_node *x = q->dirty.head; x != NULL; x = x->next)
		urgent |= QWORKER(x, dn)->db_urgent;
	if (q->store == NULL) {
		while ((w = QWORKER(ax_list_pop(&q->dirty), dn)) != NULL)
			w->db_dirty = w->db_urgent = 0;
		return;
	}
	if (!urgent && now - q->db_last < q->hb_us)
		return;
	for (ax_list_node *x = q->dirty.head; x != NULL && n < 512;
	     x               = x->next) {
		ax_store_worker_row *r = &rows[n++];
		w                      = QWORKER(x, dn);
		r->id                  = w->id;
		r->worker_group        = w->group ? w->group->name : "default";
		r->slots               = w->slots;
		r->used_slots          = w->used;
		r->hostname            = w->hostname;
		r->pid                 = w->pid;
		r->state               = w->db_state ? w->db_state : "ACTIVE";
		r->registered_at_us    = w->registered_at_us;
		r->heartbeat_at_us     = w->heartbeat_at_us;
		r->lease_expires_at_us = w->heartbeat_at_us + q->lease_us;
		r->has_usage           = w->has_usage;
		r->load_x100           = w->load_x100 > 0 ? w->load_x100 : 0;
		r->cpus                = w->cpus;
		r->mem_total_kb        = w->mem_total_kb;
		r->mem_available_kb    = w->mem_available_kb;
		r->tasks_cpu_milli     = w->tasks_cpu_milli;
		r->tasks_rss_kb        = w->tasks_rss_kb;
	}
	q->db_last = now;
	if (ax_store_workers_upsert(q->store, rows, n) != AX_OK) {
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "DB_ERROR", NULL,
		        "workers upsert of %zu rows: %s", n, ax_err_detail());
		return;
	}
	for (size_t i = 0;
	     i < n && (w = QWORKER(ax_list_pop(&q->dirty), dn)) != NULL; i++)
		w->db_dirty = w->db_urgent = 0;
}

qworker *
axq_worker_get(ax_queue *q, const char *id)
{
	qworker *w = ax_hmap_get(&q->workers, id);
	if (w != NULL)
		return w;
	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (w->id = strdup(id)) == NULL ||
	    ax_hmap_put(&q->workers, w->id, w, NULL) != AX_OK) {
		if (w)
			free(w->id);
		free(w);
		ax_err_set(AX_ENOMEM, "queue: worker %s", id);
		return NULL;
	}
	axq_heap_init(&w->personal);
	return w;
}

/* ----------------------------------------------------- worker lifecycle */

static void
group_join(ax_queue *q, qworker *w, qgroup *g)
{
	w->group  = g;
	w->joined = 1;
	ax_list_prepend(&g->members, &w->gn);
	ax_routing_ring_add(&g->ring, w->id);
	/* consistent_hash attempts that had nobody to go to */
	while (ax_heap_count(&g->unrouted) > 0) {
		qatt *a = axq_heap_top(&g->unrouted);
		axq_heap_remove(a);
		STAT(q, st_depth[a->ch], -1);
		axq_att_enqueue(q, a);
	}
	axq_cap_mark(q, g);
}

/* Takes w out of its group: re-routes its consistent_hash attempts (its
 * pinned ones keep waiting for it). */
static void
group_leave(ax_queue *q, qworker *w)
{
	qgroup *g = w->group;
	if (g == NULL || !w->joined)
		return;
	if (w->parked)
		axq_park_answer_empty(q, w, 0);
	w->joined = 0;
	ax_list_remove(&g->members, &w->gn);
	ax_routing_ring_remove(&g->ring, w->id);
	axq_cap_mark(q, g);
	for (size_t i = 0; i < ax_heap_count(&w->personal);) {
		qatt *a = axq_heap_at(&w->personal, i);
		if (a->route == &ax_routing_consistent_hash &&
		    a->bound == NULL) {
			axq_heap_remove(a);
			STAT(q, st_depth[a->ch], -1);
			axq_att_enqueue(q, a);
			i = 0; /* the heap changed under us */
		} else {
			i++;
		}
	}
}

/* Reports a UNKNOWN with reason (worker wid may hold it; its late
 * reports are still forwarded) and retires it: the result handler
 * retries it per policy under a new run_id. */
void
axq_att_lost(ax_queue *q, qatt *a, const char *wid, const char *reason)
{
	ax_log_ids ids = axq_att_ids(a);
	ax_logf(AX_LOG_WARN, AX_A_QUEUE, reason, &ids,
	        "worker %s: attempt outcome unknown", wid);
	axq_forward(q, a, a->run_id, AX__ATTEMPT_STATUS__ATTEMPT_UNKNOWN, wid,
	            NULL, 0, reason);
	axq_att_retire(q, a);
}

static int
listed(char **ids, size_t n, const char *run_id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ids[i], run_id) == 0)
			return 1;
	return 0;
}

/*
 * Ends w's session: running attempts are reported UNKNOWN with reason,
 * except run_ids in keep[0..nkeep). So are unacknowledged dispatches,
 * which w may have started (its Started lost with it), unless told_all:
 * the process that was sent them says what it holds (keep: a re-register
 * of the same process, or a Deregister after its reports) and did not
 * start them, so they are re-queued. Attempts bound to w (sent again to
 * it after an ack timeout or a start, see doubt_resolve) are never handed
 * to another worker: w may hold them, so they go UNKNOWN unless kept.
 */
static void
session_end(ax_queue *q, qworker *w, const char *reason, const char *state,
            char **keep, size_t nkeep, int told_all)
{
	qatt         *a;
	ax_list_node *n, *next;
	if (w->parked) /* nothing may be dispatched to it meanwhile */
		axq_park_answer_empty(q, w, 0);
	for (n = w->att.head; n != NULL; n = next) {
		next = n->next;
		a    = QATT(n, wn);
		if (listed(keep, nkeep, a->run_id))
			continue;
		if (a->state == ST_DISPATCHED && a->bound == NULL &&
		    told_all) {
			axq_att_requeue(q, a);
			continue;
		}
		axq_att_lost(q, a, w->id, reason);
	}
	for (n = w->doubt.head; n != NULL;
	     n = next) { /* bound, not rendered */
		next = n->next;
		a    = QATT(n, xn);
		if (!listed(keep, nkeep, a->run_id)) {
			axq_att_lost(q, a, w->id, reason);
			continue;
		}
		axq_doubt_unlink(a);
		axq_att_link_worker(q, a, w);
		ax_list_remove(&q->unacked, &a->un);
		a->state = ST_RUNNING;
	}
	for (size_t i = 0; i < ax_heap_count(&w->personal);) {
		a = axq_heap_at(&w->personal, i);
		if (a->bound != w) {
			i++;
			continue;
		}
		axq_att_lost(q, a, w->id, reason);
		i = 0; /* the heap changed under us */
	}
	if (state != NULL) {
		if (w->alive) {
			ax_list_remove(&q->leases, &w->ln);
			STAT(q, st_workers, -1);
		}
		group_leave(q, w);
		w->alive = 0;
		db_mark(q, w, state, 1);
	}
}

void
axq_worker_lost(ax_queue *q, qworker *w)
{
	char json[300];
	ax_logf(AX_LOG_WARN, AX_A_QUEUE, "TIMEOUT_HEARTBEAT", NULL,
	        "worker %s: lease lapsed", w->id);
	STAT(q, st_lease_losses, 1);
	session_end(q, w, "TIMEOUT_HEARTBEAT", "LOST", NULL, 0, 0);
	snprintf(json, sizeof(json), "{\"worker\":\"%.200s\"}", w->id);
	axq_emit(q, "worker.lost", "TIMEOUT_HEARTBEAT", json);
}

/*
 * Any request of w's live session extends its lease. The worker fences
 * itself (kills its tasks) lease after the send time of its last
 * answered request; we count from the receipt of its last request,
 * which is later, and add queue.lease_grace for clock rates and
 * scheduling: so when axq_worker_lost hands its attempts elsewhere, its
 * tasks are gone.
 */
void
axq_lease_touch(ax_queue *q, qworker *w)
{
	w->lease_mono = ax_clock_mono_us() + q->lease_us + q->lease_grace_us;
	ax_list_remove(&q->leases, &w->ln);
	ax_list_append(&q->leases, &w->ln);
}

static void
lease_renew(ax_queue *q, qworker *w)
{
	w->heartbeat_at_us = ax_clock_utc_us();
	axq_lease_touch(q, w);
}

/* Adopts a run_id a worker runs that the queue does not know (a queue
 * restart): its reports will be forwarded with the run_id only. */
static void
adopt(ax_queue *q, qworker *w, const char *run_id)
{
	qatt *a = calloc(1, sizeof(*a));
	if (a == NULL || (a->run_id = strdup(run_id)) == NULL) {
		free(a);
		return;
	}
	a->slots = 1;
	a->seq   = ++q->seq;
	if (ax_hmap_put(&q->runs, a->run_id, a, NULL) != AX_OK) {
		axq_att_free(a);
		return;
	}
	axq_att_link_worker(q, a, w);
	ax_list_remove(&q->unacked, &a->un);
	a->state = ST_RUNNING;
}

/*
 * Acknowledges the dispatch of run_id to w. An attempt back in a queue
 * that w acknowledges late (re-queued after a start, or handed back) is
 * taken back from the queue (it runs on w; dispatching it again would
 * run it twice).
 */
void
axq_ack_dispatch(ax_queue *q, qworker *w, const char *run_id)
{
	qatt   *a = ax_hmap_get(&q->runs, run_id);
	int64_t dispatched;
	if (a == NULL)
		return;
	if (a->state == ST_QUEUED && w->alive) {
		dispatched = a->dispatched_at_us;
		axq_heap_remove(a);
		STAT(q, st_depth[a->ch], -1);
		axq_att_link_worker(q, a, w);
		a->dispatched_at_us = dispatched;
	}
	if (a->worker != w || a->state != ST_DISPATCHED)
		return;
	ax_list_remove(&q->unacked, &a->un);
	a->state = ST_RUNNING;
	a->bound = NULL; /* w has it: from now on like any attempt */
	if (a->resend) {
		a->resend = 0;
		w->nresend--;
	}
}

/* 1 when r comes from the process w's session was (same pid, host). */
static int
same_process(const qworker *w, const Ax__Register *r)
{
	return w->pid == r->pid && w->hostname != NULL &&
	    r->hostname != NULL && strcmp(w->hostname, r->hostname) == 0;
}

void
axq_on_register(ax_queue *q, qctx *c, const Ax__WorkerMessage *m)
{
	const Ax__Register *r       = m->register_;
	Ax__QueueMessage    out     = AX__QUEUE_MESSAGE__INIT;
	Ax__RegisterReply   rr      = AX__REGISTER_REPLY__INIT;
	char              **cancel  = NULL;
	size_t              ncancel = 0;
	qworker            *w;
	qgroup             *g;
	char                json[400];

	STAT(q, st_registers, 1);
	if (r->worker_id == NULL || !*r->worker_id || r->slots < 1 ||
	    r->slots > 100000) {
		axq_reply_error(
		    q, c, m->seq, "BAD_REQUEST",
		    "Register needs a worker_id and 1..100000 slots");
		return;
	}
	g = axq_group_get(q, *r->worker_group ? r->worker_group : "default");
	if (g == NULL || (w = axq_worker_get(q, r->worker_id)) == NULL) {
		axq_reply_error(q, c, m->seq, "INTERNAL", "out of memory");
		return;
	}
	if (w->alive) /* a restart: reconcile the old session */
		session_end(q, w, "WORKER_RESTARTED", NULL, r->running_run_ids,
		            r->n_running_run_ids, same_process(w, r));
	if (w->joined && w->group != g)
		group_leave(q, w);
	if (!w->alive) {
		STAT(q, st_workers, 1);
		ax_list_append(&q->leases, &w->ln);
	}
	w->alive        = 1;
	w->draining     = 0;
	w->slots        = r->slots;
	w->reserve_p0   = r->reserve_p0;
	w->start_after  = r->start_after;
	w->prefetch     = !r->start_after ? 0
	        : r->prefetch < 0         ? 0
	        : r->prefetch > 100000    ? 100000
	                                  : r->prefetch;
	w->cpu_milli    = r->cpu_milli;
	w->memory_bytes = r->memory_bytes;
	memset(&w->res, 0, sizeof(w->res));
	for (size_t i = 0; i < r->n_resources; i++) /* checked: <= max */
		(void) ax_res_add(&w->res, r->resources[i]->key,
		                  r->resources[i]->value);
	labels_set(w, r);
	w->session = ++q->session_ctr ^ ((uint64_t) ax_clock_utc_us() << 20);
	if (w->session == 0)
		w->session = 1;
	if (w->ordinal == 0)
		w->ordinal = ++q->ordinal;
	free(w->hostname);
	w->hostname         = r->hostname ? strdup(r->hostname) : NULL;
	w->pid              = r->pid;
	w->registered_at_us = ax_clock_utc_us();
	lease_renew(q, w);
	if (!w->joined)
		group_join(q, w, g);
	axq_cap_mark(q, g);
	db_mark(q, w, "ACTIVE", 1);
	axq_doubt_settle(q, w, r);
	if ((cancel = calloc(r->n_running_run_ids + 1, sizeof(*cancel))) ==
	    NULL) {
		axq_reply_error(q, c, m->seq, "INTERNAL", "out of memory");
		return;
	}
	for (size_t i = 0; i < r->n_running_run_ids; i++) {
		qatt *a = ax_hmap_get(&q->runs, r->running_run_ids[i]);
		if (a == NULL)
			adopt(q, w, r->running_run_ids[i]);
		else if (a->state == ST_DONE && a->kill)
			cancel[ncancel++] = a->run_id;
	}
	out.reply_to_seq         = m->seq;
	out.body_case            = AX__QUEUE_MESSAGE__BODY_REGISTER_REPLY;
	out.register_reply       = &rr;
	rr.session               = w->session;
	rr.heartbeat_interval_ms = (int32_t) (q->hb_us / 1000);
	rr.lease_ttl_ms          = (int32_t) (q->lease_us / 1000);
	rr.retry_interval_ms     = (int32_t) (q->ack_timeout_us / 1000);
	rr.n_cancel_run_ids      = ncancel;
	rr.cancel_run_ids        = cancel;
	axq_reply_now(q, c, &out);
	free(cancel);
	ax_logf(AX_LOG_INFO, AX_A_QUEUE, NULL, NULL,
	        "worker %s registered in group %s with %d slots", w->id,
	        g->name, (int) w->slots);
	snprintf(json, sizeof(json),
	         "{\"worker\":\"%.200s\",\"group\":\"%.100s\",\"slots\":%d}",
	         w->id, g->name, (int) w->slots);
	axq_emit(q, "worker.registered", NULL, json);
}

/* The live usage of hb (a worker that sends none keeps has_usage 0). */
static void
usage_take(ax_queue *q, qworker *w, const Ax__Heartbeat *hb)
{
	int64_t cpu = 0, rss = 0;

	if (hb->cpus <= 0 && hb->mem_total_kb <= 0 && hb->n_tasks == 0)
		return;
	for (size_t i = 0; i < hb->n_tasks; i++) {
		const Ax__TaskUsage *u = hb->tasks[i];
		qatt *a = u->run_id ? ax_hmap_get(&q->runs, u->run_id) : NULL;
		int32_t c = u->cpu_milli > 0 ? u->cpu_milli : 0;
		int64_t r = u->rss_kb > 0 ? u->rss_kb : 0;
		if (a == NULL || a->worker != w)
			continue; /* not its attempt (any more) */
		a->cpu_milli = c;
		a->rss_kb    = r;
		cpu += c;
		rss += r;
	}
	w->has_usage    = 1;
	w->cpus         = hb->cpus > 0 ? hb->cpus : 0;
	w->mem_total_kb = hb->mem_total_kb > 0 ? hb->mem_total_kb : 0;
	w->mem_available_kb =
	    hb->mem_available_kb > 0 ? hb->mem_available_kb : 0;
	w->tasks_cpu_milli = cpu > INT32_MAX ? INT32_MAX : (int32_t) cpu;
	w->tasks_rss_kb    = rss;
}

/*
 * The attempts w holds for their instant and has not started, that it
 * has acknowledged (so no copy of their dispatch is still on its way to
 * w), and that are due back: those it took beyond its free slots
 * (fill_prefetch) queue.prefetch_wait after their instant, and all of
 * them while a capacity calendar that preempts is in force on w's group
 * (queued work that the calendar's gate holds, axq_att_unstarted;
 * they go in the same reply as the calendar's victims, so w drops them
 * before those free a slot). Asked back in this heartbeat's reply, into
 * out (room for w->slots + w->prefetch). Until w answers
 * (Report.withdrawn_run_ids) or starts one, each stays w's and is asked
 * again at each heartbeat (a lost reply); a start wins over the
 * withdraw.
 */
static size_t
withdraw_due(ax_queue *q, qworker *w, char **out)
{
	int64_t now = ax_clock_mono_us();
	size_t  n = 0, max = (size_t) w->slots + (size_t) w->prefetch;
	int     cut = axq_calendar_in_force(w->group);

	for (ax_list_node *x = w->att.head; x != NULL && n < max;
	     x               = x->next) {
		qatt *a = QATT(x, wn);
		if (a->state == ST_RUNNING && axq_att_unstarted(a) &&
		    (cut ||
		     (a->prefetched &&
		      now >= a->start_mono + q->prefetch_wait_us))) {
			a->withdrawing = 1;
			out[n++]       = a->run_id;
		}
	}
	return n;
}

/* w dropped run_id without starting it, as asked (withdraw_due): queued
 * again for any worker, under the same run_id (it never ran). */
void
axq_on_withdrawn(ax_queue *q, qworker *w, const char *run_id)
{
	qatt *a = w != NULL ? ax_hmap_get(&q->runs, run_id) : NULL;

	if (a == NULL || a->worker != w || !a->withdrawing ||
	    a->started_at_us != 0 || a->state != ST_RUNNING)
		return;
	if (axq_calendar_in_force(w->group))
		ax_logf(AX_LOG_INFO, AX_A_QUEUE, NULL, NULL,
		        "%s: taken back from %s unstarted (a capacity "
		        "calendar that preempts holds group %s)",
		        a->run_id, w->id, w->group ? w->group->name : "");
	else
		ax_logf(AX_LOG_INFO, AX_A_QUEUE, NULL, NULL,
		        "%s: taken back from %s (not started %lld ms after "
		        "its instant: no slot free there)",
		        a->run_id, w->id,
		        (long long) (q->prefetch_wait_us / 1000));
	axq_att_requeue(q, a);
}

void
axq_on_heartbeat(ax_queue *q, qctx *c, qworker *w, const Ax__WorkerMessage *m)
{
	const Ax__Heartbeat *hb  = m->heartbeat;
	Ax__QueueMessage     out = AX__QUEUE_MESSAGE__INIT;
	Ax__HeartbeatReply   hr  = AX__HEARTBEAT_REPLY__INIT;
	size_t               nk = 0, nu = 0, nw = 0;
	char               **kill, **unknown, **withdraw;
	int64_t             *grace;

	lease_renew(q, w);
	w->load_x100 = hb->load_x100;
	usage_take(q, w, hb);
	db_mark(q, w, hb->draining ? "DRAINING" : "ACTIVE",
	        hb->draining && !w->draining);
	if (hb->draining && !w->draining) {
		w->draining = 1;
		axq_cap_mark(q, w->group);
		if (w->parked)
			axq_park_answer_empty(q, w, 0);
	}
	kill     = calloc(w->slots + 1, sizeof(*kill));
	grace    = calloc(w->slots + 1, sizeof(*grace));
	unknown  = calloc(hb->n_running_run_ids + 1, sizeof(*unknown));
	withdraw = calloc((size_t) w->slots + (size_t) w->prefetch + 1,
	                  sizeof(*withdraw));
	if (kill == NULL || grace == NULL || unknown == NULL ||
	    withdraw == NULL) {
		free(kill);
		free(grace);
		free(unknown);
		free(withdraw);
		axq_reply_error(q, c, m->seq, "INTERNAL", "out of memory");
		return;
	}
	for (ax_list_node *n                        = w->att.head;
	     n != NULL && nk < (size_t) w->slots; n = n->next)
		if (QATT(n, wn)->kill) {
			grace[nk]  = QATT(n, wn)->kill_grace_ms;
			kill[nk++] = QATT(n, wn)->run_id;
		}
	for (size_t i = 0; i < hb->n_running_run_ids; i++) {
		qatt *a = ax_hmap_get(&q->runs, hb->running_run_ids[i]);
		if (a == NULL) {
			unknown[nu++] = hb->running_run_ids[i];
			adopt(q, w, hb->running_run_ids[i]);
		} else {
			if (a->worker == w)
				a->verify = 0;
			axq_ack_dispatch(q, w, a->run_id);
		}
	}
	for (ax_list_node *n = w->att.head, *next; n != NULL; n = next) {
		qatt *a = QATT(n, wn);
		next    = n->next;
		if (a->verify != 0 && a->verify <= ax_clock_mono_us())
			axq_att_lost(q, a, w->id, "WORKER_RESTARTED");
	}
	nw                     = withdraw_due(q, w, withdraw);
	out.reply_to_seq       = m->seq;
	out.body_case          = AX__QUEUE_MESSAGE__BODY_HEARTBEAT_REPLY;
	out.heartbeat_reply    = &hr;
	hr.acked_seq           = m->seq;
	hr.lease_expires_at_us = w->heartbeat_at_us + q->lease_us;
	hr.n_cancel_run_ids    = nk;
	hr.cancel_run_ids      = kill;
	hr.n_cancel_grace_ms   = nk;
	hr.cancel_grace_ms     = grace;
	hr.n_unknown_run_ids   = nu;
	hr.unknown_run_ids     = unknown;
	hr.hand_back           = w->draining && q->hand_back;
	hr.n_withdraw_run_ids  = nw;
	hr.withdraw_run_ids    = withdraw;
	axq_reply_now(q, c, &out);
	free(kill);
	free(grace);
	free(unknown);
	free(withdraw);
}

void
axq_on_started(ax_queue *q, qworker *w, const char *wid, const Ax__Started *s)
{
	qatt *a;
	if (s->run_id == NULL || !*s->run_id)
		return;
	a = ax_hmap_get(&q->runs, s->run_id);
	if (a != NULL && w != NULL)
		axq_ack_dispatch(q, w, a->run_id);
	if (a != NULL && a->state != ST_DONE) {
		a->prefetched  = 0; /* started: no longer to withdraw */
		a->withdrawing = 0;
		if (a->started_at_us == 0) /* its first start, not a re-send */
			axq_lat_observe(q, a, s->started_at_us);
		a->started_at_us = s->started_at_us;
	}
	axq_forward(q, a, s->run_id, AX__ATTEMPT_STATUS__ATTEMPT_STARTED, wid,
	            NULL, s->started_at_us, NULL);
}

void
axq_on_result(ax_queue *q, qworker *w, const char *wid, const Ax__Result *r)
{
	static const char *const reasons[] = { NULL, NULL, NULL,
		                               "TIMEOUT_EXEC", NULL };
	qatt                    *a;
	int                      st = r->status;

	if (r->run_id == NULL || !*r->run_id)
		return;
	if (st < AX__ATTEMPT_STATUS__ATTEMPT_SUCCESS ||
	    st > AX__ATTEMPT_STATUS__ATTEMPT_CANCELED)
		st = AX__ATTEMPT_STATUS__ATTEMPT_FAILED;
	a = ax_hmap_get(&q->runs, r->run_id);
	axq_forward(q, a, r->run_id, st, wid, r, 0,
	            st == AX__ATTEMPT_STATUS__ATTEMPT_CANCELED && a && a->kill
	                ? a->kill_reason
	                : reasons[st]);
	if (a != NULL && a->state != ST_DONE)
		axq_att_retire(q, a);
}

void
axq_on_deregister(ax_queue *q, qctx *c, qworker *w, const Ax__WorkerMessage *m)
{
	const Ax__Deregister *d = m->deregister;
	char                  json[300];
	if (d->hand_back)
		for (size_t i = 0; i < d->n_running_run_ids; i++) {
			qatt *a = ax_hmap_get(&q->runs, d->running_run_ids[i]);
			if (a != NULL && a->worker == w && a->ar != NULL)
				axq_att_requeue(q, a);
		}
	session_end(q, w, "WORKER_LEFT", "GONE", NULL, 0, 1);
	snprintf(json, sizeof(json), "{\"worker\":\"%.200s\"}", w->id);
	axq_emit(q, "worker.left", NULL, json);
	axq_reply_ack(q, c, m->seq);
}
