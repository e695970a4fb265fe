/*
 * queue.c - the actor "queue": channels, priority queues with aging,
 * routing, worker leases, and the worker endpoint (nng REP); this file is
 * its glue: the actor's definition table (queue_def: a handler per
 * command kind, batch hooks, the wake item, tick, fini), its configuration
 * and start (ax_queue_add), the timers that drive every deadline, the
 * shared helpers that send to other actors, and the public API of
 * queue_service.h.
 *
 * Role: stage "exec" of the pipeline (DESIGN.md 2 and 4). AttemptRendered
 * arrives from instance_generator; workers pull over proto/worker.proto;
 * STARTED and terminal results go to result_handler as AttemptResult
 * (the post hooks run there); per-group capacity
 * goes to resource_detector.
 *
 * The queue by concept (actors/queue/, state in queue_internal.h):
 *  - queue.c           this file: actor glue, timers, public API;
 *  - queue_endpoint.c  the worker endpoint: REP contexts, the hand-off
 *                      list, requests, the Pull long poll, deferred acks
 *                      and the ResultsCommitted watermark;
 *  - queue_workers.c   workers and groups: registration, heartbeats,
 *                      leases and their lapse, lost workers, reports;
 *  - queue_dispatch.c  attempts and dispatch: priority heaps per channel
 *                      with aging, held attempts, routing, Pull replies,
 *                      ack timeouts and resends;
 *  - queue_reconcile.c the record of dispatches and the reconciliation
 *                      after a start or takeover;
 *  - queue_stats.c     its metrics: latency histograms, depth and slots
 *                      per group, lease losses, published in
 *                      component_stats for /metrics;
 *  - queue_preempt.c   preemption for a waiting higher tier;
 *  - queue_calendar.c  capacity calendars that preempt: running work
 *                      beyond a window's slots is stopped, dispatch is
 *                      gated by them.
 *
 * The actor sends without blocking (send_nonblock): resource_detector is
 * upstream of us, so a blocking send could close a cycle of full inboxes.
 *
 * Invariants:
 *  - an attempt (by run_id) is in exactly one place: the held list
 *    (HELD), a heap (QUEUED), a
 *    worker's in-flight list (DISPATCHED until acknowledged, RUNNING), a
 *    worker's in-doubt list (DOUBT, since a start), or
 *    the retired FIFO (DONE: kept a while so late and duplicate reports
 *    still carry the instance, then freed);
 *  - an attempt bound to a worker (settled from doubt, or its ack timed
 *    out; not acknowledged since) is dispatched to that worker only, and
 *    never re-queued for another: it goes UNKNOWN if that worker's
 *    session ends;
 *  - a DISPATCHED attempt is also on the unacked FIFO (constant timeout,
 *    so FIFO = deadline order); a live worker is on the lease FIFO
 *    (renewal moves it to the tail); a worker with in-doubt attempts is
 *    on the doubt deadline list (sorted; few entries, after a start
 *    only); so every timer is O(1) to find and
 *    the actor's one deadline is the minimum of a few list heads;
 *  - a worker has at most one parked Pull; a newer Pull answers the older
 *    one empty.
 *
 * Workload: thousands of attempts per second through a few to hundreds of
 * workers; per message work is O(log n) (heaps) or O(1) (hash maps); the
 * O(workers of a group) loops run once per batch (capacity) or once per
 * routing decision (candidates are the group's waiting workers).
 */
#include "queue_internal.h"

#include <inttypes.h>
#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "flow_util.h"
#include "hash.h"
#include "routing.h"
#include "store.h"
#include "store_attempts.h"

#define DB_RECONNECT_US (200 * AX_USEC_PER_MSEC) /* keeps the actor live */
#define DB_STMT_MAX_MS  3000 /* statement_timeout: see ax_queue_add */

/* ------------------------------------------------------------ hash maps */

static uint64_t
run_hash(const void *e)
{
	return ax_hash_str(((const qatt *) e)->run_id);
}

static int
run_match(const void *e, const void *k)
{
	return strcmp(((const qatt *) e)->run_id, k) == 0;
}

static uint64_t
inst_hash(const void *e)
{
	return ax_hash_str(((const qatt *) e)->inst_key);
}

static int
inst_match(const void *e, const void *k)
{
	return strcmp(((const qatt *) e)->inst_key, k) == 0;
}

static uint64_t
worker_hash(const void *e)
{
	return ax_hash_str(((const qworker *) e)->id);
}

static int
worker_match(const void *e, const void *k)
{
	return strcmp(((const qworker *) e)->id, k) == 0;
}

static uint64_t
group_hash(const void *e)
{
	return ax_hash_str(((const qgroup *) e)->name);
}

static int
group_match(const void *e, const void *k)
{
	return strcmp(((const qgroup *) e)->name, k) == 0;
}

static const ax_hmap_ops runs_ops  = { ax_hmap_hash_str, run_hash, run_match };
static const ax_hmap_ops insts_ops = { ax_hmap_hash_str, inst_hash,
	                               inst_match };
static const ax_hmap_ops workers_ops = { ax_hmap_hash_str, worker_hash,
	                                 worker_match };
static const ax_hmap_ops groups_ops  = { ax_hmap_hash_str, group_hash,
	                                 group_match };

/* -------------------------------------------------------------- helpers */

int
ax_queue_channel(const char *name)
{
	if (name == NULL || *name == '\0' || strcasecmp(name, "px") == 0 ||
	    strcasecmp(name, "p1") == 0 || strcasecmp(name, "p2") == 0 ||
	    strcasecmp(name, "p3") == 0)
		return AX_QUEUE_PX;
	if (strcasecmp(name, "p0") == 0)
		return AX_QUEUE_P0;
	if (strcasecmp(name, "k8s") == 0)
		return AX_QUEUE_K8S;
	if (strcasecmp(name, "biz") == 0 || strncasecmp(name, "biz:", 4) == 0)
		return AX_QUEUE_BIZ;
	return -1;
}

ax_log_ids
axq_att_ids(const qatt *a)
{
	ax_log_ids ids = { 0 };
	ids.run_id     = a->run_id;
	if (a->ar != NULL && a->ar->instance != NULL) {
		ids.dag      = a->ar->instance->dag;
		ids.run      = a->ar->instance->dag_run_id;
		ids.instance = a->ar->instance->instance_id;
		ids.attempt  = a->ar->attempt;
	}
	return ids;
}

/* Sends cmd to dest; a missing destination (a composition without it)
 * is not an error of the queue. */
void
axq_send_cmd(ax_queue *q, const char *dest, Ax__Command *cmd)
{
	ax_err rv = ax_pipeline_send(q->self, dest, cmd);
	if (rv != AX_OK && rv != AX_ENOENT)
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "SEND_FAILED", NULL,
		        "to %s: %s: %s", dest, ax_strerror(rv),
		        ax_err_detail());
}

void
axq_emit(ax_queue *q, const char *type, const char *reason, const char *json)
{
	ax_err rv = ax_pipeline_event(q->self, type, reason, NULL, json, 0);
	if (rv != AX_OK && rv != AX_ENOENT)
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "SEND_FAILED", NULL,
		        "event %s: %s", type, ax_err_detail());
}

/*
 * Forwards what happened to attempt run_id (a may be NULL: unknown
 * run_id, e.g. a late report after a restart) to result_handler.
 */
void
axq_forward(ax_queue *q, const qatt *a, const char *run_id, int status,
            const char *worker, const Ax__Result *r, int64_t started_at,
            const char *reason)
{
	Ax__Command       cmd = AX__COMMAND__INIT;
	Ax__AttemptResult res = AX__ATTEMPT_RESULT__INIT;

	cmd.issued_at_us = ax_clock_utc_us();
	cmd.body_case    = AX__COMMAND__BODY_RESULT;
	cmd.result       = &res;
	res.run_id       = (char *) run_id;
	res.status       = (Ax__AttemptStatus) status;
	if (worker != NULL)
		res.worker_id = (char *) worker;
	if (a != NULL && a->cmd != NULL) {
		cmd.trace_id = a->cmd->trace_id;
		if (a->ar != NULL) {
			res.instance = a->ar->instance;
			res.attempt  = a->ar->attempt;
			res.log_path = a->ar->log_path;
		}
	}
	if (a != NULL) {
		res.dispatched_at_us = a->dispatched_at_us;
		res.started_at_us    = a->started_at_us;
	}
	if (started_at)
		res.started_at_us = started_at;
	if (r != NULL) {
		res.exit_code   = r->exit_code;
		res.term_signal = r->term_signal;
		if (r->started_at_us)
			res.started_at_us = r->started_at_us;
		res.ended_at_us = r->ended_at_us;
		if (r->error && *r->error)
			res.error = r->error;
		if (r->log_path && *r->log_path)
			res.log_path = r->log_path;
	}
	if (status != AX__ATTEMPT_STATUS__ATTEMPT_STARTED &&
	    res.ended_at_us == 0)
		res.ended_at_us = ax_clock_utc_us();
	if (reason != NULL)
		res.reason = (char *) reason;
	res.queue_seq = ++q->fwd_seq;
	axq_send_cmd(q, AX_A_RESULT_HANDLER, &cmd);
	if (status == AX__ATTEMPT_STATUS__ATTEMPT_STARTED)
		STAT(q, st_started, 1);
	else
		STAT(q, st_results, 1);
}

/* ---------------------------------------------------------------- actor */

/* Timers: ack timeouts, lapsed leases, expired long polls, retired
 * attempts; then the next deadline. */
static void
timers(ax_queue *q)
{
	int64_t  now = ax_clock_mono_us(), next = INT64_MAX, t;
	qatt    *a;
	qworker *w;
	qctx    *c;

	axq_held_release(q, now);
	axq_ack_timeouts(q, now);
	while ((w = QWORKER(q->leases.head, ln)) != NULL &&
	       w->lease_mono <= now)
		axq_worker_lost(q, w);
	while ((w = QWORKER(q->doubt_dl.head, dln)) != NULL &&
	       w->doubt_deadline <= now)
		axq_doubt_lapse(q, w);
	if (q->store != NULL && !q->reconciled && now >= q->reconcile_at)
		axq_reconcile_load(q);
	if (q->fill_blocked && axq_dispatch_open(q)) {
		/* Pulls that waited for the database or the reconciliation */
		q->fill_blocked = 0;
		for (ax_list_node *n = q->park_dl.head, *nx; n != NULL;
		     n               = nx) {
			nx = n->next;
			axq_try_fill(q, QWORKER(n, pdn));
		}
	}
	while ((w = QWORKER(q->park_dl.head, pdn)) != NULL &&
	       w->park_deadline <= now)
		axq_park_answer_empty(q, w, 0);
	axq_retired_free(q, now);
	axq_cap_flush(q);
	axq_db_flush(q, now);
	int64_t flush_next = axq_results_flush(q, now);
	axq_deferred_flush(q);

	if ((a = QATT(q->held.head, heln)) != NULL)
		next = a->release_mono;
	if (q->early_retry != 0 && q->early_retry < next)
		next = q->early_retry;
	if ((a = QATT(q->unacked.head, un)) != NULL && a->ack_deadline < next)
		next = a->ack_deadline;
	if ((w = QWORKER(q->leases.head, ln)) != NULL && w->lease_mono < next)
		next = w->lease_mono;
	if ((w = QWORKER(q->park_dl.head, pdn)) != NULL &&
	    w->park_deadline < next)
		next = w->park_deadline;
	if ((a = QATT(q->retired.head, rn)) != NULL && a->retire_at < next)
		next = a->retire_at;
	if (!ax_list_empty(&q->dirty) && q->db_last + q->hb_us < next)
		next = q->db_last + q->hb_us;
	if ((c = QCTX(q->deferred.head, dn)) != NULL && c->def_until < next)
		next = c->def_until;
	if ((w = QWORKER(q->doubt_dl.head, dln)) != NULL &&
	    w->doubt_deadline < next)
		next = w->doubt_deadline;
	if (q->store != NULL && !q->reconciled && q->reconcile_at < next)
		next = q->reconcile_at;
	if (q->fill_blocked && q->db_down_until < next)
		next = q->db_down_until;
	if ((t = axq_stats_publish(q, now)) < next)
		next = t;
	if ((t = axq_preempt_scan(q, now)) < next)
		next = t;
	if ((t = axq_calendar_scan(q, now)) < next)
		next = t;
	if (flush_next < next)
		next = flush_next;
	ax_actor_set_deadline(q->self, next == INT64_MAX ? 0 : next);
}

/* Before each batch (also one a wake item runs: the hand-off list of the
 * worker endpoint): the record of dispatches is read first, then every
 * Pull of the batch is answered once, at its end. */
static void
queue_batch_begin(ax_actor *self, void *state, size_t n)
{
	ax_queue *q = state;
	(void) self;
	(void) n;

	if (q->store != NULL && !q->reconciled &&
	    ax_clock_mono_us() >= q->reconcile_at)
		axq_reconcile_load(q); /* before anything can be dispatched */
	q->batching = 1; /* one reply per worker for the whole batch */
}

/* Keeps the command: it is the attempt's now (axq_on_attempt_rendered
 * takes it and frees it with the attempt). */
static ax_err
on_rendered(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	ax_pipeline_keep(m);
	axq_on_attempt_rendered(state, m->cmd);
	return AX_OK;
}

static ax_err
on_cancel(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	axq_on_cancel(state, m->cmd->cancel_instance);
	return AX_OK;
}

/* The result handler's watermark: results up to it are in PostgreSQL. */
static ax_err
on_committed(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	const Ax__ResultsCommitted *rc = m->cmd->results_committed;
	(void) self;

	axq_results_committed(state, rc->up_to_seq, rc->relaxed);
	return AX_OK;
}

/* ControlOp "calendar" (the control thread forwards ax-api's NOTIFY,
 * and one after its reconnect): capacity_calendars changed. */
static ax_err
on_control(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	if (strcmp(m->cmd->control->op, "calendar") == 0)
		axq_calendar_reload(state);
	return AX_OK;
}

static ax_err
queue_batch_end(ax_actor *self, void *state)
{
	ax_queue *q = state;
	(void) self;

	axq_fill_flush(q);
	axq_drain_requests(q);
	timers(q);
	return AX_OK;
}

static ax_err
queue_tick(ax_actor *self, void *state, int64_t now)
{
	ax_queue *q = state;
	(void) self;
	(void) now;
	axq_drain_requests(q);
	timers(q);
	return AX_OK;
}

/* Frees what the state holds (the pipeline frees the state); safe on a
 * state init left half-filled (the mutex is its first field set). */
static void
queue_fini(void *state)
{
	ax_queue *q  = state;
	size_t    nq = 0;

	pthread_mutex_lock(&q->mu);
	q->closing = 1;
	pthread_mutex_unlock(&q->mu);
	if (q->sock_open)
		nng_close(q->sock);
	for (size_t i = 0; i < q->nctx; i++) {
		nng_aio_stop(q->ctxs[i]->aio);
		nng_aio_free(q->ctxs[i]->aio);
		if (q->ctxs[i]->req)
			nng_msg_free(q->ctxs[i]->req);
		if (q->ctxs[i]->deferred)
			nng_msg_free(q->ctxs[i]->deferred);
		free(q->ctxs[i]);
	}
	free(q->ctxs);
	if (q->wake_aio) {
		nng_aio_stop(q->wake_aio);
		nng_aio_free(q->wake_aio);
	}
	ax_actor_client_free(q->client);
	axq_preempt_fini(q);
	axq_calendar_fini(q);
	for (int ch = 0; ch < AX_QUEUE_NCHANNELS; ch++)
		nq += atomic_load(&q->st_depth[ch]);
	ax_logf(AX_LOG_INFO, AX_A_QUEUE, NULL, NULL,
	        "stopped: depth P0=%" PRIu64 " Px=%" PRIu64 " k8s=%" PRIu64
	        " biz=%" PRIu64 " dispatches=%" PRIu64 " resends=%" PRIu64
	        " lease_losses=%" PRIu64 " started=%" PRIu64
	        " results=%" PRIu64 " cancels=%" PRIu64,
	        (uint64_t) q->st_depth[0], (uint64_t) q->st_depth[1],
	        (uint64_t) q->st_depth[2], (uint64_t) q->st_depth[3],
	        (uint64_t) q->st_dispatches, (uint64_t) q->st_resends,
	        (uint64_t) q->st_lease_losses, (uint64_t) q->st_started,
	        (uint64_t) q->st_results, (uint64_t) q->st_cancels);
	(void) nq;
	{
		ax_hmap_iter it;
		qatt        *a;
		qworker     *w;
		qgroup      *g;
		ax_hmap_iter_init(&it, &q->runs);
		while ((a = ax_hmap_iter_next(&it)) != NULL)
			axq_att_free(a);
		ax_hmap_iter_init(&it, &q->workers);
		while ((w = ax_hmap_iter_next(&it)) != NULL) {
			ax_heap_fini(&w->personal);
			free(w->doubt_host);
			free(w->labels);
			free(w->hostname);
			free(w->id);
			free(w);
		}
		ax_hmap_iter_init(&it, &q->groups);
		while ((g = ax_hmap_iter_next(&it)) != NULL) {
			for (int ch = 0; ch < AX_QUEUE_NCHANNELS; ch++)
				ax_heap_fini(&g->heaps[ch]);
			ax_heap_fini(&g->unrouted);
			ax_routing_ring_fini(&g->ring);
			free(g->sent_labels);
			free(g->name);
			free(g);
		}
	}
	ax_hmap_fini(&q->runs);
	ax_hmap_fini(&q->insts);
	ax_hmap_fini(&q->workers);
	ax_hmap_fini(&q->groups);
	ax_store_close(q->store);
	pthread_mutex_destroy(&q->mu);
}

/* Reads the configuration, opens the aio of the wake-ups, the client
 * they are sent with and the store (with its timeouts). */
/* The dispatch record (ax_flow_store_warm). */
static const ax_flow_prepare_fn queue_prepare[] = {
	ax_store_dispatches_prepare,
};

static ax_err
queue_init(void *state, const ax_pipeline_ctx *ctx, void *arg)
{
	ax_queue        *q   = state;
	ax_actor_system *sys = arg; /* for the wake-ups' client */
	ax_err           rv;

	pthread_mutex_init(&q->mu, NULL);
	ax_hmap_init(&q->runs, &runs_ops);
	ax_hmap_init(&q->insts, &insts_ops);
	ax_hmap_init(&q->workers, &workers_ops);
	ax_hmap_init(&q->groups, &groups_ops);
	q->pctx = ctx;
	q->aging_us =
	    ax_config_duration_us(ctx->cfg, "scheduler.aging_interval");
	q->ack_timeout_us =
	    ax_config_duration_us(ctx->cfg, "queue.ack_timeout");
	q->lease_us = ax_config_duration_us(ctx->cfg, "worker.lease");
	q->lease_grace_us =
	    ax_config_duration_us(ctx->cfg, "queue.lease_grace");
	if (q->lease_grace_us < 0)
		q->lease_grace_us = 0;
	q->hb_us     = ax_config_duration_us(ctx->cfg, "worker.heartbeat");
	q->hand_back = ax_config_bool(ctx->cfg, "queue.drain_hand_back");
	axq_preempt_init(q);
	q->dispatch_ahead_us =
	    ax_config_duration_us(ctx->cfg, "queue.dispatch_ahead");
	q->prefetch_wait_us =
	    ax_config_duration_us(ctx->cfg, "queue.prefetch_wait");
	if (q->ack_timeout_us <= 0)
		q->ack_timeout_us = 2 * AX_USEC_PER_SEC;
	/* held on a worker longer than half the ack timeout, a dispatch
	 * would be sent again before its Started could answer it */
	if (q->dispatch_ahead_us > q->ack_timeout_us / 2)
		q->dispatch_ahead_us = q->ack_timeout_us / 2;
	if (q->dispatch_ahead_us < 0)
		q->dispatch_ahead_us = 0;
	if (q->lease_us <= 0)
		q->lease_us = 10 * AX_USEC_PER_SEC;
	if (q->hb_us <= 0)
		q->hb_us = 2 * AX_USEC_PER_SEC;
	q->retain_us = 10 * q->lease_us;
	if (q->retain_us < 60 * AX_USEC_PER_SEC)
		q->retain_us = 60 * AX_USEC_PER_SEC;
	snprintf(q->addr, sizeof(q->addr), "%s",
	         ax_config_str(ctx->cfg, "queue.address"));
	if ((rv = nng_aio_alloc(&q->wake_aio, axq_wake_cb, q)) != 0)
		return ax_err_set(AX_ENNG, "queue: aio: %s", nng_strerror(rv));
	if ((rv = ax_actor_client_new(sys, "queue.rep", &q->client)) != AX_OK)
		return rv;
	if (ctx->dsn != NULL && *ctx->dsn &&
	    (rv = ax_store_open(ctx->dsn, &q->store)) != AX_OK)
		return rv;
	if (q->store != NULL) {
		/* never stall the workers' leases on it: a statement the
		 * server does not finish (a lock wait, a stalled server)
		 * fails within DB_STMT_MAX_MS, or half a lease when that is
		 * shorter, and a failed write pauses dispatching */
		int64_t ms = q->lease_us / 2 / AX_USEC_PER_MSEC;
		if (ms > DB_STMT_MAX_MS || ms < 1)
			ms = DB_STMT_MAX_MS;
		ax_store_set_reconnect_timeout(q->store, DB_RECONNECT_US);
		if ((rv = ax_store_set_statement_timeout(q->store, ms)) !=
		    AX_OK)
			return rv;
		ax_flow_store_warm(&q->store, ctx->dsn, AX_A_QUEUE,
		                   queue_prepare, 1);
	}
	axq_calendar_init(q);
	return AX_OK;
}

/* Once the actor is in the system: binds the worker endpoint, so a bad or
 * busy address fails ax_queue_add, and with a store asks for a first
 * batch (the in-doubt attempts are read, and their workers' leases start
 * to count, even if nothing arrives). */
static ax_err
queue_added(ax_actor *self, void *state)
{
	ax_queue *q = state;
	ax_err    rv;

	q->self = self;
	if ((rv = axq_endpoint_listen(q)) != AX_OK)
		return rv;
	if (q->store != NULL) {
		pthread_mutex_lock(&q->mu);
		q->wake_start = 1;
		axq_wake_locked(q);
		pthread_mutex_unlock(&q->mu);
	}
	return AX_OK;
}

/*
 * The actor sends without blocking: resource_detector is upstream of it,
 * so a blocking send could close a cycle of full inboxes. Threads of the
 * worker endpoint wake it with ITEM_WAKE (the hand-off list is read in
 * batch_end).
 */
static const ax_pipeline_def queue_def = {
	.name        = AX_A_QUEUE,
	.state_size  = sizeof(ax_queue),
	.init        = queue_init,
	.added       = queue_added,
	.fini        = queue_fini,
	.tick        = queue_tick,
	.nonblock    = 1,
	.batch_begin = queue_batch_begin,
	.batch_end   = queue_batch_end,
	.wake_type   = ITEM_WAKE,
	.on = {
		[AX__COMMAND__BODY_ATTEMPT_RENDERED]   = on_rendered,
		[AX__COMMAND__BODY_CANCEL_INSTANCE]    = on_cancel,
		[AX__COMMAND__BODY_RESULTS_COMMITTED]  = on_committed,
		[AX__COMMAND__BODY_CONTROL]            = on_control,
	},
};

ax_err
ax_queue_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx, ax_queue **out)
{
	void  *st = NULL;
	ax_err rv = ax_pipeline_add(sys, ctx, &queue_def, sys, &st);

	if (out != NULL)
		*out = st;
	return rv;
}

void
ax_queue_stats_get(const ax_queue *q, ax_queue_stats *o)
{
	ax_queue *m = (ax_queue *) q;
	for (int ch = 0; ch < AX_QUEUE_NCHANNELS; ch++)
		o->depth[ch] = atomic_load(&m->st_depth[ch]);
	o->dispatches   = atomic_load(&m->st_dispatches);
	o->resends      = atomic_load(&m->st_resends);
	o->lease_losses = atomic_load(&m->st_lease_losses);
	o->started      = atomic_load(&m->st_started);
	o->results      = atomic_load(&m->st_results);
	o->cancels      = atomic_load(&m->st_cancels);
	o->workers      = atomic_load(&m->st_workers);
	o->registers    = atomic_load(&m->st_registers);
	o->preemptions  = atomic_load(&m->st_preemptions);
}

void
ax_queue_fault_drop_acks(ax_queue *q, int n)
{
	atomic_store(&q->drop_acks, n);
}
