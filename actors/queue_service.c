/*
 * queue_service.c - the actor "queue": channels, priority queues with
 * aging, routing, worker leases, and the worker endpoint (nng REP).
 *
 * Role: stage "exec" of the pipeline (DESIGN.md 2 and 4). AttemptRendered
 * arrives from pre_hook; workers pull over proto/worker.proto; STARTED and
 * terminal results go to post_hook as AttemptResult; per-group capacity
 * goes to resource_detector.
 *
 * Threading (the one design decision of this file): ALL state is owned by
 * the actor thread; nothing is shared with nng's threads except a small
 * hand-off list under `mu`. Each REP context (qctx) receives on an nng
 * callback; the callback appends the context to the hand-off list and,
 * when the list was not already announced, sends one empty "wake" item to
 * the actor's own inbox through an ax_actor_client (never blocking: on
 * AX_EAGAIN the inbox is full, so the handler runs anyway; before the
 * system starts a 5 ms nng sleep retries the wake). The handler (and the
 * tick) drains the list and answers or parks each context. So: no lock
 * around the state, requests are handled in batches (one inbox hop for
 * many requests under load), and callbacks never block an nng thread.
 * The context is parked (long poll) by simply not answering it yet; more
 * contexts are opened when parked ones leave fewer than QCTX_SPARE free.
 *
 * Acknowledgement rule: a Started/Result/Report is acknowledged only
 * once the result handler has committed what it carried: each forwarded
 * AttemptResult gets a sequence number (queue_seq), the result handler
 * answers ResultsCommitted(up_to_seq) after each transaction, and the
 * reply waits in the deferred list until the watermark passes the last
 * result of its report. So a result is never lost between the ack and
 * PostgreSQL (axd killed in between: the worker sends it again). A reply
 * not released within DEFER_MAX_US (database down) is dropped unanswered
 * and the worker re-sends the report; duplicates are harmless by run_id.
 * While we hold a worker's report it cannot send the next one, so the
 * Started of its newer dispatches waits in its outbox: its dispatches'
 * ack timeouts start over meanwhile (timers()).
 *
 * Ownership of a dispatch: an attempt dispatched to a worker belongs to
 * that worker until the worker acknowledges it, reports it, or is lost.
 * An ack timeout while its session lives sends the same dispatch to the
 * same worker again (resend, in its next Pull reply; the worker
 * acknowledges a run_id it already holds and does not run it again);
 * no timer hands it to the heap or another worker. When the worker is
 * lost (lease + grace lapsed, or a new process of it registers without
 * listing it), an unacknowledged dispatch may have started there and
 * died with it: UNKNOWN like a running one (retried per policy under a
 * new run_id), never re-queued under the same run_id. Only a dispatch
 * known never to have left is re-queued: its record could not be written
 * (axq_record_dispatches), or the process that was sent it says it does
 * not hold it (re-register of the same process, Deregister).
 * The actor sends without blocking (send_nonblock): resource_detector is
 * upstream of us, so a blocking send could close a cycle of full inboxes.
 *
 * Reconciliation (with a database; queue_reconcile.c, sharing the state
 * of queue_internal.h): every dispatch is recorded (attempt
 * DISPATCHED, worker_id) before it is sent, so after a start or takeover
 * the attempts a worker may hold are known: they are loaded before
 * anything is dispatched and wait (ST_DOUBT) for that worker, not the
 * first one that registers. When it registers, its running set settles
 * them (doubt_resolve: adopted, sent again to it alone, or UNKNOWN);
 * when it does not come back within its lease, taken from the database
 * clock, plus queue.lease_grace, it has fenced itself and they go
 * UNKNOWN (retried per policy under a new run_id). A worker's live lease
 * also ends only after lease + grace (lease_touch), for the same reason.
 * During a database outage nothing new is dispatched (nothing could be
 * recorded; resends need no record), the store gives up reconnecting
 * quickly and its statements time out (statement_timeout), so the
 * workers' leases are never starved by a blocked actor.
 *
 * Order in a channel: a binary heap per (channel, group) and one per
 * worker (sticky attempts: consistent_hash, pinned). Aging: the effective
 * priority is priority + waited / aging_interval. It exists so that a
 * steady flow of high-priority work cannot starve low-priority work
 * forever; too short an interval erases priorities (everything old wins),
 * too long lets low tiers wait for hours under load. Because waited =
 * now - enqueued for every item alike, comparing effective priorities at
 * any instant is comparing priority - enqueued / aging_interval, a key
 * that does not change with time: the heap stays valid without
 * re-sorting (the aging is continuous rather than in whole steps). P0
 * always goes before the other channels (reserved for critical links);
 * the others compete by that key. A re-queued attempt keeps its enqueue
 * time.
 *
 * Prepared attempts: an attempt whose due_at is still ahead (the time
 * detector prepares runs scheduler.prepare_ahead early) waits on the held
 * list, sorted by due instant, and is queued when the instant comes: the
 * actor's deadline includes the list's head, so a release is as punctual
 * as any timer here. A held attempt can be canceled like a queued one.
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
#include <nng/protocol/reqrep0/rep.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"
#include "hash.h"
#include "routing.h"
#include "store.h"
#include "store_attempts.h"
#include "store_workers.h"
#include "worker.pb-c.h"
#include "worker_proto.h"

#define ITEM_WAKE       (AX_ITEM_USER + 50) /* empty: "drain the hand-off" */
#define QCTX_INITIAL    8
#define QCTX_SPARE      4    /* contexts kept receiving beyond parked ones */
#define QCTX_MAX        4096 /* contexts at most */
#define POLL_MAX_US     (60 * AX_USEC_PER_SEC)
#define DEFER_MAX_US    (10 * AX_USEC_PER_SEC) /* see reply_ack_deferred */
#define HOLD_MIN_US     200 /* due sooner than this: queue it now */
#define HOLD_MAX_US     (2 * 60 * AX_USEC_PER_SEC) /* see att_hold_or_enqueue */
#define DB_RECONNECT_US (200 * AX_USEC_PER_MSEC)   /* keeps the actor live */
#define DB_STMT_MAX_MS  3000 /* statement_timeout: see queue_add */

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

/* ---------------------------------------------------------------- heap */

static int
att_before(const qatt *a, const qatt *b)
{
	if (a->rank != b->rank)
		return a->rank > b->rank;
	if (a->key != b->key)
		return a->key > b->key;
	return a->seq < b->seq;
}

static int
node_before(const ax_heap_node *a, const ax_heap_node *b)
{
	return att_before(AX_HEAP_ENTRY(a, qatt, hn),
	                  AX_HEAP_ENTRY(b, qatt, hn));
}

void
axq_heap_init(qheap *h)
{
	ax_heap_init(h, node_before);
}

ax_err
axq_heap_push(qheap *h, qatt *a)
{
	if (ax_heap_push(h, &a->hn) != AX_OK)
		return ax_err_set(AX_ENOMEM, "queue heap");
	a->heap = h;
	return AX_OK;
}

void
axq_heap_remove(qatt *a)
{
	if (a->heap == NULL)
		return;
	ax_heap_remove(a->heap, &a->hn);
	a->heap = NULL;
}

qatt *
axq_heap_top(const qheap *h)
{
	return AX_HEAP_ENTRY(ax_heap_top(h), qatt, hn);
}

qatt *
axq_heap_at(const qheap *h, size_t i)
{
	return AX_HEAP_ENTRY(ax_heap_at(h, i), qatt, hn);
}

/* ------------------------------------------------------------- helpers */

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
static void
send_cmd(ax_queue *q, const char *dest, Ax__Command *cmd)
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
 * run_id, e.g. a late report after a restart) to post_hook.
 */
static void
forward(ax_queue *q, const qatt *a, const char *run_id, int status,
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
	send_cmd(q, AX_A_POST_HOOK, &cmd);
	if (status == AX__ATTEMPT_STATUS__ATTEMPT_STARTED)
		STAT(q, st_started, 1);
	else
		STAT(q, st_results, 1);
}

/* -------------------------------------------------------------- groups */

static qgroup *
group_get(ax_queue *q, const char *name)
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

static void
cap_mark(ax_queue *q, qgroup *g)
{
	if (g != NULL && !g->cap_dirty) {
		g->cap_dirty = 1;
		g->dnext     = q->cap_dirty;
		q->cap_dirty = g;
	}
}

/* Sends WorkerCapacity for every group whose totals changed in this
 * batch (coalesced: one per group per batch). */
static void
cap_flush(ax_queue *q)
{
	while (q->cap_dirty != NULL) {
		qgroup *g     = q->cap_dirty;
		int32_t total = 0, free_ = 0;
		q->cap_dirty = g->dnext;
		g->cap_dirty = 0;
		for (qworker *w = g->members; w != NULL; w = w->gnext) {
			if (w->draining)
				continue;
			total += w->slots;
			free_ += w->slots > w->used ? w->slots - w->used : 0;
		}
		if (g->cap_sent && total == g->sent_total &&
		    free_ == g->sent_free)
			continue;
		Ax__Command        cmd = AX__COMMAND__INIT;
		Ax__WorkerCapacity wc  = AX__WORKER_CAPACITY__INIT;
		cmd.issued_at_us       = ax_clock_utc_us();
		cmd.body_case          = AX__COMMAND__BODY_WORKER_CAPACITY;
		cmd.worker_capacity    = &wc;
		wc.worker_group        = g->name;
		wc.slots_total         = total;
		wc.slots_free          = free_;
		wc.alive               = total > 0;
		send_cmd(q, AX_A_RESOURCE_DETECTOR, &cmd);
		g->cap_sent   = 1;
		g->sent_total = total;
		g->sent_free  = free_;
	}
}

/* ------------------------------------------------------------- workers */

static void
db_mark(ax_queue *q, qworker *w, const char *state, int urgent)
{
	w->db_state = state;
	if (urgent)
		w->db_urgent = 1;
	if (!w->db_dirty) {
		w->db_dirty = 1;
		w->dnext    = q->dirty;
		q->dirty    = w;
	}
}

/* Writes dirty workers in one upsert: at once after a state change,
 * else at most once per heartbeat interval. A failure is logged and the
 * rows stay dirty for the next round. */
static void
db_flush(ax_queue *q, int64_t now)
{
	ax_store_worker_row rows[512];
	size_t              n      = 0;
	int                 urgent = 0;

	if (q->dirty == NULL)
		return;
	for (qworker *w = q->dirty; w != NULL; w = w->dnext)
		urgent |= w->db_urgent;
	if (q->store == NULL) {
		while (q->dirty) {
			qworker *w  = q->dirty;
			q->dirty    = w->dnext;
			w->db_dirty = w->db_urgent = 0;
		}
		return;
	}
	if (!urgent && now - q->db_last < q->hb_us)
		return;
	for (qworker *w = q->dirty; w != NULL && n < 512; w = w->dnext) {
		ax_store_worker_row *r = &rows[n++];
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
	}
	q->db_last = now;
	if (ax_store_workers_upsert(q->store, rows, n) != AX_OK) {
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "DB_ERROR", NULL,
		        "workers upsert of %zu rows: %s", n, ax_err_detail());
		return;
	}
	for (size_t i = 0; i < n && q->dirty; i++) {
		qworker *w  = q->dirty;
		q->dirty    = w->dnext;
		w->db_dirty = w->db_urgent = 0;
	}
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

/* Unlinked singly-headed (no tail) lists use a dummy tail variable. */
static void
glist_add(qworker **head, qworker *w, int members)
{
	if (members) {
		w->gprev = NULL;
		w->gnext = *head;
		if (*head)
			(*head)->gprev = w;
		*head = w;
	} else {
		w->pkprev = NULL;
		w->pknext = *head;
		if (*head)
			(*head)->pkprev = w;
		*head = w;
	}
}

static void
glist_del(qworker **head, qworker *w, int members)
{
	if (members) {
		if (w->gprev)
			w->gprev->gnext = w->gnext;
		else
			*head = w->gnext;
		if (w->gnext)
			w->gnext->gprev = w->gprev;
		w->gnext = w->gprev = NULL;
	} else {
		if (w->pkprev)
			w->pkprev->pknext = w->pknext;
		else
			*head = w->pknext;
		if (w->pknext)
			w->pknext->pkprev = w->pkprev;
		w->pknext = w->pkprev = NULL;
	}
}

/* ------------------------------------------------------------- replies */

static void ctx_recv(qctx *c);

/* Packs m and sends it on c (the request is answered). */
static void
reply_now(ax_queue *q, qctx *c, const Ax__QueueMessage *m)
{
	nng_msg *msg;
	size_t   len = ax__queue_message__get_packed_size(m);
	int      rv;

	if ((rv = nng_msg_alloc(&msg, len)) != 0) {
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "NNG_ERROR", NULL,
		        "reply of %zu bytes: %s", len, nng_strerror(rv));
		ctx_recv(c);
		return;
	}
	ax__queue_message__pack(m, nng_msg_body(msg));
	c->op = OP_SEND;
	nng_aio_set_msg(c->aio, msg);
	nng_ctx_send(c->ctx, c->aio);
}

static void
reply_ack(ax_queue *q, qctx *c, uint64_t seq)
{
	Ax__QueueMessage m   = AX__QUEUE_MESSAGE__INIT;
	Ax__Ack          ack = AX__ACK__INIT;
	m.reply_to_seq       = seq;
	m.body_case          = AX__QUEUE_MESSAGE__BODY_ACK;
	m.ack                = &ack;
	ack.acked_seq        = seq;
	reply_now(q, c, &m);
}

static void
reply_error(ax_queue *q, qctx *c, uint64_t seq, const char *code,
            const char *text)
{
	Ax__QueueMessage m = AX__QUEUE_MESSAGE__INIT;
	Ax__Error        e = AX__ERROR__INIT;
	m.reply_to_seq     = seq;
	m.body_case        = AX__QUEUE_MESSAGE__BODY_ERROR;
	m.error            = &e;
	e.code             = (char *) code;
	e.message          = (char *) text;
	reply_now(q, c, &m);
}

/* An Ack that may leave only once the results it acknowledges are
 * committed (see the file comment). w (NULL: not a valid session) is the
 * worker whose report it answers: while we hold it, that worker cannot
 * send its next report, so the Started of its newer dispatches waits in
 * its outbox (see held in timers()). */
static void
reply_ack_deferred(ax_queue *q, qctx *c, uint64_t seq, qworker *w)
{
	Ax__QueueMessage m   = AX__QUEUE_MESSAGE__INIT;
	Ax__Ack          ack = AX__ACK__INIT;
	nng_msg         *msg;
	size_t           len;

	if (atomic_load(&q->drop_acks) > 0) {
		atomic_fetch_sub(&q->drop_acks, 1);
		ctx_recv(c); /* the request is dropped unanswered */
		return;
	}
	m.reply_to_seq = seq;
	m.body_case    = AX__QUEUE_MESSAGE__BODY_ACK;
	m.ack          = &ack;
	ack.acked_seq  = seq;
	len            = ax__queue_message__get_packed_size(&m);
	if (nng_msg_alloc(&msg, len) != 0) {
		ctx_recv(c);
		return;
	}
	ax__queue_message__pack(&m, nng_msg_body(msg));
	c->deferred  = msg;
	c->need_seq  = q->fwd_seq;
	c->def_until = ax_clock_mono_us() + DEFER_MAX_US;
	c->dworker   = w;
	c->dnext     = NULL;
	if (w != NULL)
		w->held++;
	if (q->def_tail)
		q->def_tail->dnext = c;
	else
		q->def_head = c;
	q->def_tail = c;
	q->ndeferred++;
}

/* Sends deferred acks once post_hook's outbox is empty. */
static void
deferred_flush(ax_queue *q)
{
	int64_t now = ax_clock_mono_us();

	if (q->def_head == NULL)
		return;
	ax_actor_flush(q->self, AX_ACTOR_NONBLOCK);
	/* FIFO: need_seq and def_until grow along the list */
	while (q->def_head != NULL &&
	       (q->def_head->need_seq <= q->committed ||
	        q->def_head->def_until <= now)) {
		qctx *c     = q->def_head;
		q->def_head = c->dnext;
		q->ndeferred--;
		if (c->dworker != NULL) {
			/* the worker's next report may take its retry
			 * interval to come (it may have given up on this
			 * one): its dispatches' timers wait that long too */
			c->dworker->held--;
			c->dworker->held_until = now + 2 * q->ack_timeout_us;
			c->dworker             = NULL;
		}
		if (c->need_seq > q->committed) {
			/* not committed in time (database down?): no ack, so
			 * the worker sends the same results again */
			nng_msg_free(c->deferred);
			c->deferred = NULL;
			ctx_recv(c);
			continue;
		}
		c->op = OP_SEND;
		nng_aio_set_msg(c->aio, c->deferred);
		c->deferred = NULL;
		nng_ctx_send(c->ctx, c->aio);
	}
	if (q->def_head == NULL)
		q->def_tail = NULL;
}

/* ------------------------------------------------------- parking, fill */

static void
unpark(ax_queue *q, qworker *w)
{
	if (w->parked == NULL)
		return;
	w->parked = NULL;
	q->nparked--;
	LIST_UNLINK(q->pd_head, q->pd_tail, w, pdnext, pdprev);
	if (w->group != NULL)
		glist_del(&w->group->parked, w, 0);
}

/* Answers w's parked Pull with no dispatch. */
static void
park_answer_empty(ax_queue *q, qworker *w, uint64_t seq)
{
	qctx             *c = w->parked;
	Ax__QueueMessage  m = AX__QUEUE_MESSAGE__INIT;
	Ax__DispatchBatch b = AX__DISPATCH_BATCH__INIT;
	if (c == NULL)
		return;
	unpark(q, w);
	m.reply_to_seq = seq;
	m.body_case    = AX__QUEUE_MESSAGE__BODY_DISPATCH;
	m.dispatch     = &b;
	reply_now(q, c, &m);
}

static qatt *
best_for(qworker *w)
{
	qatt *best = axq_heap_top(&w->personal);
	if (w->group == NULL)
		return best;
	for (int ch = 0; ch < AX_QUEUE_NCHANNELS; ch++) {
		qatt *t = axq_heap_top(&w->group->heaps[ch]);
		if (t != NULL && (best == NULL || att_before(t, best)))
			best = t;
	}
	return best;
}

/* Room for the worker-read env sources of a batch's dispatches. */
typedef struct qsrc {
	Ax__Dispatch__EnvFromFileEntry *f, **fp;
	Ax__Dispatch__EnvFromEnvEntry  *e, **ep;
	size_t                          nf, ne; /* used so far */
} qsrc;

/* The run_as and env sources of ar into d (strings stay ar's). */
static void
fill_sources(const Ax__AttemptRendered *ar, Ax__Dispatch *d, qsrc *src)
{
	d->run_as        = ar->run_as;
	d->env_from_file = src->fp + src->nf;
	d->env_from_env  = src->ep + src->ne;
	for (size_t i = 0; i < ar->n_env_from_file; i++, src->nf++) {
		ax__dispatch__env_from_file_entry__init(&src->f[src->nf]);
		src->f[src->nf].key   = ar->env_from_file[i]->key;
		src->f[src->nf].value = ar->env_from_file[i]->value;
		src->fp[src->nf]      = &src->f[src->nf];
	}
	for (size_t i = 0; i < ar->n_env_from_env; i++, src->ne++) {
		ax__dispatch__env_from_env_entry__init(&src->e[src->ne]);
		src->e[src->ne].key   = ar->env_from_env[i]->key;
		src->e[src->ne].value = ar->env_from_env[i]->value;
		src->ep[src->ne]      = &src->e[src->ne];
	}
	d->n_env_from_file = ar->n_env_from_file;
	d->n_env_from_env  = ar->n_env_from_env;
}

static void
fill_dispatch(ax_queue *q, const qatt *a, Ax__Dispatch *d,
              Ax__Dispatch__EnvEntry *env, Ax__Dispatch__EnvEntry **envp,
              qsrc *src)
{
	const Ax__AttemptRendered *ar = a->ar;
	ax__dispatch__init(d);
	d->queue_seq        = ++q->qseq;
	d->run_id           = a->run_id;
	d->dispatched_at_us = a->dispatched_at_us;
	d->slots            = a->slots;
	if (ar == NULL)
		return;
	if (ar->instance != NULL) {
		d->dag             = ar->instance->dag;
		d->task            = ar->instance->task;
		d->dag_run_id      = ar->instance->dag_run_id;
		d->instance_id     = ar->instance->instance_id;
		d->logical_time_us = ar->instance->logical_time_us;
		d->shard_index     = ar->instance->shard_index;
		d->shard_total     = ar->instance->shard_total;
	}
	d->attempt       = ar->attempt;
	d->task_type     = ar->task_type;
	d->command       = ar->command;
	d->timeout_ms    = ar->timeout_us / 1000;
	d->kill_grace_ms = ar->kill_grace_us / 1000;
	d->log_path      = ar->log_path;
	d->priority      = ar->priority;
	d->due_at_us     = ar->due_at_us;
	d->trace_id      = a->cmd->trace_id;
	for (size_t i = 0; i < ar->n_env; i++) {
		ax__dispatch__env_entry__init(&env[i]);
		env[i].key   = ar->env[i]->key;
		env[i].value = ar->env[i]->value;
		envp[i]      = &env[i];
	}
	d->n_env = ar->n_env;
	d->env   = envp;
	fill_sources(ar, d, src);
}

/* 1 when a dispatch may leave now: with a database, only once the
 * in-doubt attempts are loaded and while dispatches can be recorded. */
static int
dispatch_open(const ax_queue *q)
{
	return q->store == NULL ||
	    (q->reconciled && ax_clock_mono_us() >= q->db_down_until);
}

/*
 * Answers w's parked Pull with up to its free slots of the best work
 * for it (personal heap and its group's channel heaps), plus the
 * dispatches to w whose ack timed out (resend: sent again as they are,
 * not recorded again, so also while the database is down; their slots
 * are still counted as w's). Returns the number of dispatches (0:
 * nothing fit or nothing may leave now; the Pull stays parked).
 */
static size_t
try_fill(ax_queue *q, qworker *w)
{
	qatt   *batch[DISPATCH_MAX];
	qheap  *from[DISPATCH_MAX];
	size_t  n = 0, nenv = 0, nf = 0, ne = 0;
	int32_t free_ = w->pull_free;

	/* a quota (batching): what routing gave w in this batch */
	if (w->quota > 0 && w->quota < free_)
		free_ = w->quota;
	w->quota = 0;
	if (w->parked == NULL || !w->alive || w->draining)
		return 0;
	if (!dispatch_open(q)) {
		q->fill_blocked = 1;
		free_           = 0; /* only the resends may go */
	}
	/* w's free slots may still count a resend it never received */
	for (qatt *a = w->nresend > 0 ? w->att : NULL; a != NULL; a = a->wnext)
		if (a->resend)
			free_ -= a->slots > w->slots ? w->slots : a->slots;
	while (free_ > 0 && n < DISPATCH_MAX) {
		qatt   *a = best_for(w);
		int32_t s;
		if (a == NULL)
			break;
		s = a->slots > w->slots ? w->slots : a->slots;
		if (s > free_)
			break;
		free_ -= s;
		from[n] = a->heap;
		axq_heap_remove(a);
		STAT(q, st_depth[a->ch], -1);
		axq_att_link_worker(q, a, w);
		batch[n++] = a;
	}
	if (n > 0 && !axq_record_dispatches(q, w, batch, from, &n))
		n = 0; /* not recorded: back in their heaps */
	for (qatt *a                          = w->nresend > 0 ? w->att : NULL;
	     a != NULL && n < DISPATCH_MAX; a = a->wnext)
		if (a->resend) {
			a->resend = 0;
			w->nresend--;
			batch[n++] = a;
		}
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (batch[i]->ar != NULL) {
			nenv += batch[i]->ar->n_env;
			nf += batch[i]->ar->n_env_from_file;
			ne += batch[i]->ar->n_env_from_env;
		}
	qsrc src = {
		.f  = calloc(nf + 1, sizeof(*src.f)),
		.fp = calloc(nf + 1, sizeof(*src.fp)),
		.e  = calloc(ne + 1, sizeof(*src.e)),
		.ep = calloc(ne + 1, sizeof(*src.ep)),
	};

	Ax__Dispatch            *ds   = calloc(n, sizeof(*ds));
	Ax__Dispatch           **dp   = calloc(n, sizeof(*dp));
	Ax__Dispatch__EnvEntry  *env  = calloc(nenv + 1, sizeof(*env));
	Ax__Dispatch__EnvEntry **envp = calloc(nenv + 1, sizeof(*envp));
	Ax__QueueMessage         m    = AX__QUEUE_MESSAGE__INIT;
	Ax__DispatchBatch        b    = AX__DISPATCH_BATCH__INIT;
	qctx                    *c    = w->parked;
	size_t                   e    = 0;

	unpark(q, w);
	if (ds == NULL || dp == NULL || env == NULL || envp == NULL ||
	    src.f == NULL || src.fp == NULL || src.e == NULL ||
	    src.ep == NULL) {
		/* the dispatches stay unacked and are re-sent later */
		ax_logf(AX_LOG_ERROR, AX_A_QUEUE, "NOMEM", NULL,
		        "dispatch batch of %zu", n);
		ctx_recv(c);
	} else {
		for (size_t i = 0; i < n; i++) {
			fill_dispatch(q, batch[i], &ds[i], &env[e], &envp[e],
			              &src);
			if (batch[i]->ar != NULL)
				e += batch[i]->ar->n_env;
			dp[i] = &ds[i];
		}
		m.body_case    = AX__QUEUE_MESSAGE__BODY_DISPATCH;
		m.dispatch     = &b;
		b.n_dispatches = n;
		b.dispatches   = dp;
		reply_now(q, c, &m);
	}
	free(ds);
	free(dp);
	free(env);
	free(envp);
	free(src.f);
	free(src.fp);
	free(src.e);
	free(src.ep);
	STAT(q, st_dispatches, n);
	return n;
}

/*
 * Hands slots attempt slots to w's parked Pull: at once, or, while a
 * batch is being handled (q->batching), as a quota answered by
 * fill_flush() so that one reply carries all the batch routed to w
 * (answering each attempt alone would cost the worker a round trip per
 * attempt).
 */
static void
want_fill(ax_queue *q, qworker *w, int32_t slots)
{
	if (!q->batching) {
		try_fill(q, w);
		return;
	}
	if (w->quota == 0) {
		w->fnext     = q->fill_head;
		q->fill_head = w;
	}
	w->quota += slots;
}

static void
fill_flush(ax_queue *q)
{
	q->batching = 0;
	while (q->fill_head != NULL) {
		qworker *w   = q->fill_head;
		q->fill_head = w->fnext;
		w->fnext     = NULL;
		if (w->quota > 0)
			try_fill(q, w);
	}
}

/* ------------------------------------------------------------ attempts */

void
axq_att_link_worker(ax_queue *q, qatt *a, qworker *w)
{
	a->state  = ST_DISPATCHED;
	a->worker = w;
	a->wprev  = NULL;
	a->wnext  = w->att;
	if (w->att)
		w->att->wprev = a;
	w->att = a;
	w->used += a->slots > w->slots ? w->slots : a->slots;
	a->dispatched_at_us = ax_clock_utc_us();
	a->ack_deadline     = ax_clock_mono_us() + q->ack_timeout_us;
	LIST_APPEND(q->un_head, q->un_tail, a, unext, uprev);
	cap_mark(q, w->group);
}

void
axq_att_unlink_worker(ax_queue *q, qatt *a)
{
	qworker *w = a->worker;
	if (w == NULL)
		return;
	if (a->state == ST_DISPATCHED)
		LIST_UNLINK(q->un_head, q->un_tail, a, unext, uprev);
	if (a->resend) {
		a->resend = 0;
		w->nresend--;
	}
	if (a->wprev)
		a->wprev->wnext = a->wnext;
	else
		w->att = a->wnext;
	if (a->wnext)
		a->wnext->wprev = a->wprev;
	a->wnext = a->wprev = NULL;
	w->used -= a->slots > w->slots ? w->slots : a->slots;
	if (w->used < 0)
		w->used = 0;
	a->worker = NULL;
	cap_mark(q, w->group);
}

/* Moves a to the retired FIFO: it keeps answering late reports for a
 * while, then is freed by the tick. */
void
axq_att_retire(ax_queue *q, qatt *a)
{
	if (a->state == ST_DONE)
		return;
	if (a->state == ST_QUEUED) {
		axq_heap_remove(a);
		STAT(q, st_depth[a->ch], -1);
	}
	if (a->state == ST_HELD)
		LIST_UNLINK(q->held_head, q->held_tail, a, hnext, hprev);
	if (a->state == ST_DOUBT)
		axq_doubt_unlink(a);
	axq_att_unlink_worker(q, a);
	if (a->inst_key[0])
		ax_hmap_remove(&q->insts, a);
	a->state     = ST_DONE;
	a->retire_at = ax_clock_mono_us() + q->retain_us;
	a->rnext     = NULL;
	if (q->ret_tail)
		q->ret_tail->rnext = a;
	else
		q->ret_head = a;
	q->ret_tail = a;
}

static void
att_free(qatt *a)
{
	if (a->cmd != NULL)
		ax__command__free_unpacked(a->cmd, NULL);
	free(a->run_id);
	free(a);
}

/*
 * Puts a (QUEUED from now) where its route says and tries to hand it to
 * a waiting worker at once.
 */
void
axq_att_enqueue(ax_queue *q, qatt *a)
{
	qgroup  *g = a->group;
	qworker *w = NULL;
	qheap   *h;

	a->state = ST_QUEUED;
	STAT(q, st_depth[a->ch], 1);
	if (a->bound != NULL) { /* see doubt_resolve */
		w = a->bound;
		if (axq_heap_push(&w->personal, a) != AX_OK)
			goto nomem;
		if (w->parked != NULL)
			want_fill(q, w,
			          a->slots > w->slots ? w->slots : a->slots);
		return;
	}
	if (a->route->sticky) {
		const char *key = a->ar ? a->ar->routing_key : "";
		const char *pin = a->ar ? a->ar->pinned_worker : "";
		const char *t   = a->route->target(&g->ring, key, pin);
		w               = t != NULL ? axq_worker_get(q, t) : NULL;
		h               = w != NULL ? &w->personal : &g->unrouted;
		if (axq_heap_push(h, a) != AX_OK)
			goto nomem;
		if (w != NULL && w->parked != NULL)
			want_fill(q, w,
			          a->slots > w->slots ? w->slots : a->slots);
		return;
	}
	if (axq_heap_push(&g->heaps[a->ch], a) != AX_OK)
		goto nomem;
	if (g->parked != NULL) {
		ax_routing_cand cands[64];
		qworker        *cw[64];
		size_t          n  = 0;
		int32_t         sl = a->slots;
		for (qworker *p = g->parked; p != NULL && n < 64;
		     p          = p->pknext) {
			int32_t need = sl > p->slots ? p->slots : sl;
			if (p->pull_free - p->quota < need)
				continue;
			cands[n].worker_id   = p->id;
			cands[n].ordinal     = p->ordinal;
			cands[n].slots_total = p->slots;
			cands[n].slots_used  = p->used + p->quota;
			cands[n].load_x100   = p->load_x100;
			cw[n++]              = p;
		}
		if (n > 0) {
			qworker *c = cw[a->route->choose(
			    &g->rs, cands, n,
			    a->ar ? a->ar->routing_key : "")];
			want_fill(q, c, sl > c->slots ? c->slots : sl);
		}
	}
	return;
nomem:
	STAT(q, st_depth[a->ch], -1);
	a->state = 0;
	ax_logf(AX_LOG_ERROR, AX_A_QUEUE, "NOMEM", NULL,
	        "attempt %s could not be queued", a->run_id);
}

/*
 * An attempt prepared ahead of its due instant (scheduler.prepare_ahead)
 * waits on the held list until then; any other goes to its queue now.
 * The list is sorted by release time; attempts arrive almost in that
 * order, so the insertion walks back from the tail a step or two.
 */
static void
att_hold_or_enqueue(ax_queue *q, qatt *a)
{
	int64_t utc = ax_clock_utc_us(), wait = a->ar->due_at_us - utc;

	if (wait < HOLD_MIN_US) {
		axq_att_enqueue(q, a);
		return;
	}
	if (wait > HOLD_MAX_US)
		wait = HOLD_MAX_US; /* a clock step: never hold for long */
	a->state        = ST_HELD;
	a->release_mono = ax_clock_mono_us() + wait;
	LIST_INSERT_SORTED(q->held_head, q->held_tail, a, hnext, hprev,
	                   release_mono);
}

/* Reports a QUEUED or unacknowledged attempt as canceled. */
void
axq_att_cancel_now(ax_queue *q, qatt *a)
{
	forward(q, a, a->run_id, AX__ATTEMPT_STATUS__ATTEMPT_CANCELED, NULL,
	        NULL, 0, a->kill_reason[0] ? a->kill_reason : "CANCELED");
	axq_att_retire(q, a);
}

/* Back to the queue: a dispatch known never to have run (see "Ownership
 * of a dispatch" in the file comment). */
static void
att_requeue(ax_queue *q, qatt *a)
{
	axq_att_unlink_worker(q, a);
	if (a->kill) {
		axq_att_cancel_now(q, a);
		return;
	}
	axq_att_enqueue(q, a);
}

/*
 * Gives a its rendered attempt (a takes cmd): slots, channel, group,
 * route and heap key. Returns 0, or -1 for an attempt that cannot be
 * queued (bad channel or routing), which is then reported FAILED and
 * retired.
 */
static int
att_setup(ax_queue *q, qatt *a, Ax__Command *cmd)
{
	Ax__AttemptRendered  *ar    = cmd->attempt_rendered;
	const ax_routing_ops *route = NULL;
	int                   ch;

	a->cmd   = cmd;
	a->ar    = ar;
	a->slots = ar->slots > 0 ? ar->slots : 1;
	ch       = ax_queue_channel(ar->channel);
	if (ch >= 0 && ax_routing_find(ar->routing, &route) == AX_OK &&
	    route == &ax_routing_pinned && !*ar->pinned_worker) {
		ax_err_set(AX_EINVAL, "routing pinned needs a pinned_worker");
		route = NULL;
	}
	if (ch < 0 || route == NULL ||
	    (a->group = group_get(
	         q, *ar->worker_group ? ar->worker_group : "default")) ==
	        NULL) {
		char       err[256];
		Ax__Result r = AX__RESULT__INIT;
		if (ch < 0)
			snprintf(err, sizeof(err),
			         "unknown channel '%s'; use P0, Px (P1..P3), "
			         "k8s or biz[:name]",
			         ar->channel);
		else
			snprintf(err, sizeof(err), "%s", ax_err_detail());
		r.error        = err;
		ax_log_ids ids = axq_att_ids(a);
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "BAD_ATTEMPT", &ids, "%s",
		        err);
		forward(q, a, a->run_id, AX__ATTEMPT_STATUS__ATTEMPT_FAILED,
		        NULL, &r, 0, "BAD_ATTEMPT");
		axq_att_retire(q, a);
		return -1;
	}
	a->ch    = ch;
	a->rank  = ch == AX_QUEUE_P0;
	a->route = route;
	/* key = priority - enqueued / aging (see the file comment) */
	a->key = (double) ar->priority;
	if (q->aging_us > 0)
		a->key -= (double) ax_clock_mono_us() / (double) q->aging_us;
	if (ar->instance != NULL && ar->instance->instance_id != 0) {
		snprintf(a->inst_key, sizeof(a->inst_key), "%" PRId64,
		         ar->instance->instance_id);
		(void) ax_hmap_put(&q->insts, a->inst_key, a, NULL);
	}
	return 0;
}

/*
 * The rendered attempt of a run_id the queue already knows without it:
 * in doubt since a start, or adopted from a worker's running set. It
 * completes that entry (reports are then forwarded with the instance);
 * an in-doubt attempt keeps waiting for its worker, one already settled
 * to go back to it is queued for it now. Takes cmd.
 */
static void
att_complete(ax_queue *q, qatt *a, Ax__Command *cmd)
{
	int32_t slots = a->slots;

	if (a->state == ST_DONE) {
		ax__command__free_unpacked(cmd, NULL);
		return;
	}
	if (att_setup(q, a, cmd) != 0)
		return;
	if (a->worker != NULL)
		a->slots = slots; /* its worker counted it so */
	if (a->state == ST_DOUBT && a->bound != NULL) {
		axq_doubt_unlink(a);
		axq_att_enqueue(q, a);
	}
}

static void
on_attempt_rendered(ax_queue *q, Ax__Command *cmd)
{
	Ax__AttemptRendered *ar = cmd->attempt_rendered;
	qatt                *a;

	if (ar->run_id == NULL || *ar->run_id == '\0') {
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "BAD_MESSAGE", NULL,
		        "AttemptRendered without run_id dropped");
		ax__command__free_unpacked(cmd, NULL);
		return;
	}
	if ((a = ax_hmap_get(&q->runs, ar->run_id)) != NULL) {
		if (a->cmd == NULL) {
			att_complete(q, a, cmd);
			return;
		}
		/* at-least-once upstream: the same run_id again */
		ax__command__free_unpacked(cmd, NULL);
		return;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL ||
	    (a->run_id = strdup(ar->run_id)) == NULL) {
		free(a);
		ax__command__free_unpacked(cmd, NULL);
		ax_logf(AX_LOG_ERROR, AX_A_QUEUE, "NOMEM", NULL,
		        "attempt %s dropped", ar->run_id);
		return;
	}
	a->seq = ++q->seq;
	if (ax_hmap_put(&q->runs, a->run_id, a, NULL) != AX_OK) {
		att_free(a);
		ax__command__free_unpacked(cmd, NULL);
		return;
	}
	if (att_setup(q, a, cmd) == 0)
		att_hold_or_enqueue(q, a);
}

static void
on_cancel(ax_queue *q, const Ax__CancelInstance *ci)
{
	qatt *a = NULL;
	char  k[24];

	STAT(q, st_cancels, 1);
	if (ci->run_id != NULL && *ci->run_id)
		a = ax_hmap_get(&q->runs, ci->run_id);
	if (a == NULL && ci->instance != NULL &&
	    ci->instance->instance_id != 0) {
		snprintf(k, sizeof(k), "%" PRId64, ci->instance->instance_id);
		a = ax_hmap_get(&q->insts, k);
	}
	if (a == NULL || a->state == ST_DONE)
		return; /* not here (or already over): nothing to kill */
	a->kill = 1;
	snprintf(a->kill_reason, sizeof(a->kill_reason), "%s",
	         ci->reason && *ci->reason ? ci->reason : "CANCELED");
	if (a->state == ST_QUEUED || a->state == ST_HELD)
		axq_att_cancel_now(q, a);
	/* dispatched or running: in the worker's next HeartbeatReply */
}

/* ----------------------------------------------------- worker lifecycle */

static void
group_join(ax_queue *q, qworker *w, qgroup *g)
{
	w->group  = g;
	w->joined = 1;
	glist_add(&g->members, w, 1);
	ax_routing_ring_add(&g->ring, w->id);
	/* consistent_hash attempts that had nobody to go to */
	while (ax_heap_count(&g->unrouted) > 0) {
		qatt *a = axq_heap_top(&g->unrouted);
		axq_heap_remove(a);
		STAT(q, st_depth[a->ch], -1);
		axq_att_enqueue(q, a);
	}
	cap_mark(q, g);
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
		park_answer_empty(q, w, 0);
	w->joined = 0;
	glist_del(&g->members, w, 1);
	ax_routing_ring_remove(&g->ring, w->id);
	cap_mark(q, g);
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
	forward(q, a, a->run_id, AX__ATTEMPT_STATUS__ATTEMPT_UNKNOWN, wid,
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
	qatt *a, *next;
	if (w->parked) /* nothing may be dispatched to it meanwhile */
		park_answer_empty(q, w, 0);
	for (a = w->att; a != NULL; a = next) {
		next = a->wnext;
		if (listed(keep, nkeep, a->run_id))
			continue;
		if (a->state == ST_DISPATCHED && a->bound == NULL &&
		    told_all) {
			att_requeue(q, a);
			continue;
		}
		axq_att_lost(q, a, w->id, reason);
	}
	for (a = w->doubt; a != NULL; a = next) { /* bound, not rendered */
		next = a->xnext;
		if (!listed(keep, nkeep, a->run_id)) {
			axq_att_lost(q, a, w->id, reason);
			continue;
		}
		axq_doubt_unlink(a);
		axq_att_link_worker(q, a, w);
		LIST_UNLINK(q->un_head, q->un_tail, a, unext, uprev);
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
			LIST_UNLINK(q->lease_head, q->lease_tail, w, lnext,
			            lprev);
			STAT(q, st_workers, -1);
		}
		group_leave(q, w);
		w->alive = 0;
		db_mark(q, w, state, 1);
	}
}

static void
worker_lost(ax_queue *q, qworker *w)
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
 * scheduling: so when worker_lost hands its attempts elsewhere, its
 * tasks are gone.
 */
static void
lease_touch(ax_queue *q, qworker *w)
{
	w->lease_mono = ax_clock_mono_us() + q->lease_us + q->lease_grace_us;
	LIST_UNLINK(q->lease_head, q->lease_tail, w, lnext, lprev);
	LIST_APPEND(q->lease_head, q->lease_tail, w, lnext, lprev);
}

static void
lease_renew(ax_queue *q, qworker *w)
{
	w->heartbeat_at_us = ax_clock_utc_us();
	lease_touch(q, w);
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
		att_free(a);
		return;
	}
	axq_att_link_worker(q, a, w);
	LIST_UNLINK(q->un_head, q->un_tail, a, unext, uprev);
	a->state = ST_RUNNING;
}

/*
 * Acknowledges the dispatch of run_id to w. An attempt back in a queue
 * that w acknowledges late (re-queued after a start, or handed back) is
 * taken back from the queue (it runs on w; dispatching it again would
 * run it twice).
 */
static void
ack_dispatch(ax_queue *q, qworker *w, const char *run_id)
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
	LIST_UNLINK(q->un_head, q->un_tail, a, unext, uprev);
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

static void
on_register(ax_queue *q, qctx *c, const Ax__WorkerMessage *m)
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
		reply_error(q, c, m->seq, "BAD_REQUEST",
		            "Register needs a worker_id and 1..100000 slots");
		return;
	}
	g = group_get(q, *r->worker_group ? r->worker_group : "default");
	if (g == NULL || (w = axq_worker_get(q, r->worker_id)) == NULL) {
		reply_error(q, c, m->seq, "INTERNAL", "out of memory");
		return;
	}
	if (w->alive) /* a restart: reconcile the old session */
		session_end(q, w, "WORKER_RESTARTED", NULL, r->running_run_ids,
		            r->n_running_run_ids, same_process(w, r));
	if (w->joined && w->group != g)
		group_leave(q, w);
	if (!w->alive) {
		STAT(q, st_workers, 1);
		w->lprev = w->lnext = NULL;
		LIST_APPEND(q->lease_head, q->lease_tail, w, lnext, lprev);
	}
	w->alive    = 1;
	w->draining = 0;
	w->slots    = r->slots;
	w->session  = ++q->session_ctr ^ ((uint64_t) ax_clock_utc_us() << 20);
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
	cap_mark(q, g);
	db_mark(q, w, "ACTIVE", 1);
	axq_doubt_settle(q, w, r);
	if ((cancel = calloc(r->n_running_run_ids + 1, sizeof(*cancel))) ==
	    NULL) {
		reply_error(q, c, m->seq, "INTERNAL", "out of memory");
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
	reply_now(q, c, &out);
	free(cancel);
	ax_logf(AX_LOG_INFO, AX_A_QUEUE, NULL, NULL,
	        "worker %s registered in group %s with %d slots", w->id,
	        g->name, (int) w->slots);
	snprintf(json, sizeof(json),
	         "{\"worker\":\"%.200s\",\"group\":\"%.100s\",\"slots\":%d}",
	         w->id, g->name, (int) w->slots);
	axq_emit(q, "worker.registered", NULL, json);
}

static void
on_heartbeat(ax_queue *q, qctx *c, qworker *w, const Ax__WorkerMessage *m)
{
	const Ax__Heartbeat *hb  = m->heartbeat;
	Ax__QueueMessage     out = AX__QUEUE_MESSAGE__INIT;
	Ax__HeartbeatReply   hr  = AX__HEARTBEAT_REPLY__INIT;
	size_t               nk = 0, nu = 0;
	char               **kill, **unknown;

	lease_renew(q, w);
	w->load_x100 = hb->load_x100;
	db_mark(q, w, hb->draining ? "DRAINING" : "ACTIVE",
	        hb->draining && !w->draining);
	if (hb->draining && !w->draining) {
		w->draining = 1;
		cap_mark(q, w->group);
		if (w->parked)
			park_answer_empty(q, w, 0);
	}
	kill    = calloc(w->slots + 1, sizeof(*kill));
	unknown = calloc(hb->n_running_run_ids + 1, sizeof(*unknown));
	if (kill == NULL || unknown == NULL) {
		free(kill);
		free(unknown);
		reply_error(q, c, m->seq, "INTERNAL", "out of memory");
		return;
	}
	for (qatt *a = w->att; a != NULL && nk < (size_t) w->slots;
	     a       = a->wnext)
                if (a->kill)
                        kill[nk++] = a->run_id;
	for (size_t i = 0; i < hb->n_running_run_ids; i++) {
		qatt *a = ax_hmap_get(&q->runs, hb->running_run_ids[i]);
		if (a == NULL) {
			unknown[nu++] = hb->running_run_ids[i];
			adopt(q, w, hb->running_run_ids[i]);
		} else {
			if (a->worker == w)
				a->verify = 0;
			ack_dispatch(q, w, a->run_id);
		}
	}
	for (qatt *a = w->att, *next; a != NULL; a = next) {
		next = a->wnext;
		if (a->verify != 0 && a->verify <= ax_clock_mono_us())
			axq_att_lost(q, a, w->id, "WORKER_RESTARTED");
	}
	out.reply_to_seq       = m->seq;
	out.body_case          = AX__QUEUE_MESSAGE__BODY_HEARTBEAT_REPLY;
	out.heartbeat_reply    = &hr;
	hr.acked_seq           = m->seq;
	hr.lease_expires_at_us = w->heartbeat_at_us + q->lease_us;
	hr.n_cancel_run_ids    = nk;
	hr.cancel_run_ids      = kill;
	hr.n_unknown_run_ids   = nu;
	hr.unknown_run_ids     = unknown;
	hr.hand_back           = w->draining && q->hand_back;
	reply_now(q, c, &out);
	free(kill);
	free(unknown);
}

static void
on_pull(ax_queue *q, qctx *c, qworker *w, const Ax__WorkerMessage *m)
{
	int64_t wait = (int64_t) m->pull->wait_ms * AX_USEC_PER_MSEC;

	if (w->parked != NULL)
		park_answer_empty(q, w, 0); /* superseded by this one */
	w->parked    = c;
	w->pull_free = m->pull->free_slots;
	q->nparked++;
	if (wait > POLL_MAX_US)
		wait = POLL_MAX_US;
	if (wait < 0)
		wait = 0;
	w->park_deadline = ax_clock_mono_us() + wait;
	/* keep the deadline list sorted (equal waits append at the tail) */
	LIST_INSERT_SORTED(q->pd_head, q->pd_tail, w, pdnext, pdprev,
	                   park_deadline);
	if (w->group != NULL)
		glist_add(&w->group->parked, w, 0);
	if (try_fill(q, w) == 0 && (wait == 0 || w->draining))
		park_answer_empty(q, w, m->seq);
}

static void
on_started(ax_queue *q, qworker *w, const char *wid, const Ax__Started *s)
{
	qatt *a;
	if (s->run_id == NULL || !*s->run_id)
		return;
	a = ax_hmap_get(&q->runs, s->run_id);
	if (a != NULL && w != NULL)
		ack_dispatch(q, w, a->run_id);
	if (a != NULL && a->state != ST_DONE)
		a->started_at_us = s->started_at_us;
	forward(q, a, s->run_id, AX__ATTEMPT_STATUS__ATTEMPT_STARTED, wid,
	        NULL, s->started_at_us, NULL);
}

static void
on_result(ax_queue *q, qworker *w, const char *wid, const Ax__Result *r)
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
	forward(q, a, r->run_id, st, wid, r, 0,
	        st == AX__ATTEMPT_STATUS__ATTEMPT_CANCELED && a && a->kill
	            ? a->kill_reason
	            : reasons[st]);
	if (a != NULL && a->state != ST_DONE)
		axq_att_retire(q, a);
}

static void
on_deregister(ax_queue *q, qctx *c, qworker *w, const Ax__WorkerMessage *m)
{
	const Ax__Deregister *d = m->deregister;
	char                  json[300];
	if (d->hand_back)
		for (size_t i = 0; i < d->n_running_run_ids; i++) {
			qatt *a = ax_hmap_get(&q->runs, d->running_run_ids[i]);
			if (a != NULL && a->worker == w && a->ar != NULL)
				att_requeue(q, a);
		}
	session_end(q, w, "WORKER_LEFT", "GONE", NULL, 0, 1);
	snprintf(json, sizeof(json), "{\"worker\":\"%.200s\"}", w->id);
	axq_emit(q, "worker.left", NULL, json);
	reply_ack(q, c, m->seq);
}

/* Handles one worker request on c; the request message is consumed. */
static void
on_request(ax_queue *q, qctx *c)
{
	Ax__WorkerMessage *m;
	qworker           *w = NULL;
	int                valid;
	nng_msg           *msg = c->req;
	ax_err             rv;

	c->req = NULL;
	rv     = ax_wproto_worker_msg(nng_msg_body(msg), nng_msg_len(msg), &m);
	nng_msg_free(msg);
	if (rv != AX_OK) {
		/* the seq of a refused message is not trusted: 0 */
		reply_error(q, c, 0, "BAD_REQUEST", ax_err_detail());
		return;
	}
	if (m->body_case == AX__WORKER_MESSAGE__BODY_REGISTER) {
		on_register(q, c, m);
		goto done;
	}
	if (m->worker_id && *m->worker_id)
		w = ax_hmap_get(&q->workers, m->worker_id);
	valid = w != NULL && w->alive && w->session == m->session;
	if (valid)
		lease_touch(q, w);
	if (valid && m->ack != NULL)
		for (size_t i = 0; i < m->ack->n_acked_run_ids; i++)
			ack_dispatch(q, w, m->ack->acked_run_ids[i]);
	switch (m->body_case) {
	case AX__WORKER_MESSAGE__BODY_STARTED:
		on_started(q, valid ? w : NULL, m->worker_id, m->started);
		reply_ack_deferred(q, c, m->seq, valid ? w : NULL);
		goto done;
	case AX__WORKER_MESSAGE__BODY_RESULT:
		on_result(q, valid ? w : NULL, m->worker_id, m->result);
		reply_ack_deferred(q, c, m->seq, valid ? w : NULL);
		goto done;
	case AX__WORKER_MESSAGE__BODY_REPORT:
		for (size_t i = 0; i < m->report->n_started; i++)
			on_started(q, valid ? w : NULL, m->worker_id,
			           m->report->started[i]);
		for (size_t i = 0; i < m->report->n_results; i++)
			on_result(q, valid ? w : NULL, m->worker_id,
			          m->report->results[i]);
		if (m->report->n_started + m->report->n_results > 0)
			reply_ack_deferred(q, c, m->seq, valid ? w : NULL);
		else
			reply_ack(q, c, m->seq);
		goto done;
	case AX__WORKER_MESSAGE__BODY_ACK_ONLY:
		if (valid)
			for (size_t i = 0; i < m->ack_only->n_acked_run_ids;
			     i++)
				ack_dispatch(q, w,
				             m->ack_only->acked_run_ids[i]);
		reply_ack(q, c, m->seq);
		goto done;
	case AX__WORKER_MESSAGE__BODY_PULL:
	case AX__WORKER_MESSAGE__BODY_HEARTBEAT:
	case AX__WORKER_MESSAGE__BODY_DEREGISTER:
		break;
	default:
		reply_error(q, c, m->seq, "UNSUPPORTED",
		            "unknown WorkerMessage body");
		goto done;
	}
	if (w == NULL || !w->alive) {
		reply_error(q, c, m->seq, "UNKNOWN_WORKER",
		            "register first (unknown or lapsed worker)");
		goto done;
	}
	if (!valid) {
		reply_error(q, c, m->seq, "STALE_SESSION",
		            "this session was replaced; register again");
		goto done;
	}
	if (m->body_case == AX__WORKER_MESSAGE__BODY_PULL)
		on_pull(q, c, w, m);
	else if (m->body_case == AX__WORKER_MESSAGE__BODY_HEARTBEAT)
		on_heartbeat(q, c, w, m);
	else
		on_deregister(q, c, w, m);
done:
	ax__worker_message__free_unpacked(m, NULL);
}

/* ------------------------------------------------------ nng callbacks */

/* Under q->mu: makes sure the actor will drain the hand-off list. */
static void
wake_locked(ax_queue *q)
{
	ax_actor_item it = { .type = ITEM_WAKE, .len = 0, .data = "" };
	ax_err        rv;
	if (q->woken || q->closing)
		return;
	rv = ax_actor_client_send(q->client, AX_A_QUEUE, &it, 1,
	                          AX_ACTOR_NONBLOCK);
	if (rv == AX_OK || rv == AX_EAGAIN) {
		/* EAGAIN: the inbox is full, so the handler runs anyway */
		q->woken      = 1;
		q->wake_start = 0;
		return;
	}
	if (rv == AX_ESTATE && !q->wake_retry) { /* not started yet */
		q->wake_retry = 1;
		nng_sleep_aio(5, q->wake_aio);
	}
}

static void
wake_cb(void *arg)
{
	ax_queue *q = arg;
	pthread_mutex_lock(&q->mu);
	q->wake_retry = 0;
	if ((q->ready_head != NULL || q->wake_start) &&
	    nng_aio_result(q->wake_aio) == 0)
		wake_locked(q);
	pthread_mutex_unlock(&q->mu);
}

static void
ctx_recv(qctx *c)
{
	c->op = OP_RECV;
	nng_ctx_recv(c->ctx, c->aio);
}

static void
ctx_cb(void *arg)
{
	qctx     *c  = arg;
	ax_queue *q  = c->q;
	int       rv = nng_aio_result(c->aio);

	if (c->op == OP_SEND) {
		if (rv != 0)
			nng_msg_free(nng_aio_get_msg(c->aio));
		if (rv == NNG_ECLOSED || q->closing) {
			c->op = OP_IDLE;
			return;
		}
		ctx_recv(c);
		return;
	}
	if (rv != 0) {
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED || q->closing) {
			c->op = OP_IDLE;
			return;
		}
		ctx_recv(c);
		return;
	}
	c->req        = nng_aio_get_msg(c->aio);
	c->op         = OP_HANDED;
	c->ready_next = NULL;
	pthread_mutex_lock(&q->mu);
	if (q->ready_tail)
		q->ready_tail->ready_next = c;
	else
		q->ready_head = c;
	q->ready_tail = c;
	wake_locked(q);
	pthread_mutex_unlock(&q->mu);
}

static ax_err
ctx_open(ax_queue *q)
{
	qctx **v;
	qctx  *c;
	int    rv;

	if (q->nctx >= QCTX_MAX)
		return AX_OK;
	if ((v = realloc(q->ctxs, (q->nctx + 1) * sizeof(*v))) == NULL)
		return ax_err_set(AX_ENOMEM, "queue: REP context");
	q->ctxs = v;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return ax_err_set(AX_ENOMEM, "queue: REP context");
	c->q = q;
	if ((rv = nng_aio_alloc(&c->aio, ctx_cb, c)) != 0 ||
	    (rv = nng_ctx_open(&c->ctx, q->sock)) != 0) {
		nng_aio_free(c->aio);
		free(c);
		return ax_err_set(AX_ENNG, "queue: REP context: %s",
		                  nng_strerror(rv));
	}
	q->ctxs[q->nctx++] = c;
	ctx_recv(c);
	return AX_OK;
}

/* ------------------------------------------------------------- actor */

/* Drains the hand-off list and handles every request on it. */
static void
drain_requests(ax_queue *q)
{
	qctx *c;
	pthread_mutex_lock(&q->mu);
	c             = q->ready_head;
	q->ready_head = q->ready_tail = NULL;
	q->woken                      = 0;
	pthread_mutex_unlock(&q->mu);
	while (c != NULL) {
		qctx *next = c->ready_next;
		on_request(q, c);
		c = next;
	}
	while (q->nctx < QCTX_MAX &&
	       q->nctx < q->nparked + q->ndeferred + QCTX_SPARE)
		if (ctx_open(q) != AX_OK) {
			ax_logf(AX_LOG_WARN, AX_A_QUEUE, "NNG_ERROR", NULL,
			        "%s", ax_err_detail());
			break;
		}
}

/* Timers: ack timeouts, lapsed leases, expired long polls, retired
 * attempts; then the next deadline. */
static void
timers(ax_queue *q)
{
	int64_t now = ax_clock_mono_us(), next = INT64_MAX;

	/* first: a held attempt's due instant is its start latency; the
	 * attempts due together leave in one reply per worker */
	q->batching = 1;
	while (q->held_head != NULL && q->held_head->release_mono <= now) {
		qatt *a = q->held_head;
		LIST_UNLINK(q->held_head, q->held_tail, a, hnext, hprev);
		axq_att_enqueue(q, a);
	}
	fill_flush(q);
	while (q->un_head != NULL && q->un_head->ack_deadline <= now) {
		qatt      *a   = q->un_head;
		qworker   *w   = a->worker;
		ax_log_ids ids = axq_att_ids(a);
		if (w == NULL || !w->alive) { /* not reached: session_end */
			axq_att_lost(q, a, w ? w->id : "?", "ACK_TIMEOUT");
			continue;
		}
		/* w may have it (started, its Started lost or late) or not:
		 * it stays w's, DISPATCHED, until w acknowledges, reports
		 * or is lost, and never goes to another worker. The timer
		 * starts over (the deadline is the latest, so the FIFO
		 * stays in order). */
		LIST_UNLINK(q->un_head, q->un_tail, a, unext, uprev);
		a->ack_deadline = now + q->ack_timeout_us;
		LIST_APPEND(q->un_head, q->un_tail, a, unext, uprev);
		if (w->held > 0 || w->held_until > now)
			continue; /* its Started may wait behind a report
			             whose ack we hold for a commit: silence
			             we cause, no sign of a lost dispatch */
		ax_logf(AX_LOG_INFO, AX_A_QUEUE, "ACK_TIMEOUT", &ids,
		        "dispatch to %s not acknowledged; sent to it again "
		        "(a copy it holds is acknowledged, not rerun)",
		        w->id);
		STAT(q, st_resends, 1);
		a->bound = w; /* its session's end loses it (UNKNOWN) */
		if (!a->resend) {
			a->resend = 1;
			w->nresend++;
		}
		if (w->parked != NULL)
			try_fill(q, w);
	}
	while (q->lease_head != NULL && q->lease_head->lease_mono <= now)
		worker_lost(q, q->lease_head);
	while (q->dl_head != NULL && q->dl_head->doubt_deadline <= now)
		axq_doubt_lapse(q, q->dl_head);
	if (q->store != NULL && !q->reconciled && now >= q->reconcile_at)
		axq_reconcile_load(q);
	if (q->fill_blocked && dispatch_open(q)) {
		/* Pulls that waited for the database or the reconciliation */
		q->fill_blocked = 0;
		for (qworker *w = q->pd_head, *nx; w != NULL; w = nx) {
			nx = w->pdnext;
			try_fill(q, w);
		}
	}
	while (q->pd_head != NULL && q->pd_head->park_deadline <= now)
		park_answer_empty(q, q->pd_head, 0);
	while (q->ret_head != NULL && q->ret_head->retire_at <= now) {
		qatt *a     = q->ret_head;
		q->ret_head = a->rnext;
		if (q->ret_head == NULL)
			q->ret_tail = NULL;
		ax_hmap_remove(&q->runs, a);
		att_free(a);
	}
	cap_flush(q);
	db_flush(q, now);
	deferred_flush(q);

	if (q->held_head)
		next = q->held_head->release_mono;
	if (q->un_head && q->un_head->ack_deadline < next)
		next = q->un_head->ack_deadline;
	if (q->lease_head && q->lease_head->lease_mono < next)
		next = q->lease_head->lease_mono;
	if (q->pd_head && q->pd_head->park_deadline < next)
		next = q->pd_head->park_deadline;
	if (q->ret_head && q->ret_head->retire_at < next)
		next = q->ret_head->retire_at;
	if (q->dirty && q->db_last + q->hb_us < next)
		next = q->db_last + q->hb_us;
	if (q->def_head && q->def_head->def_until < next)
		next = q->def_head->def_until;
	if (q->dl_head && q->dl_head->doubt_deadline < next)
		next = q->dl_head->doubt_deadline;
	if (q->store != NULL && !q->reconciled && q->reconcile_at < next)
		next = q->reconcile_at;
	if (q->fill_blocked && q->db_down_until < next)
		next = q->db_down_until;
	ax_actor_set_deadline(q->self, next == INT64_MAX ? 0 : next);
}

static ax_err
queue_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	ax_queue *q = state;

	q->self = self;
	if (q->store != NULL && !q->reconciled &&
	    ax_clock_mono_us() >= q->reconcile_at)
		axq_reconcile_load(q); /* before anything can be dispatched */
	q->batching = 1; /* one reply per worker for the whole batch */
	for (size_t i = 0; i < n; i++) {
		Ax__Command *cmd;
		if (items[i].type == ITEM_WAKE)
			continue;
		if (items[i].type != AX_ITEM_COMMAND ||
		    (cmd = ax_pipeline_unpack(self, &items[i])) == NULL)
			continue;
		if (cmd->body_case == AX__COMMAND__BODY_ATTEMPT_RENDERED) {
			on_attempt_rendered(q, cmd); /* takes cmd */
			continue;
		}
		if (cmd->body_case == AX__COMMAND__BODY_CANCEL_INSTANCE)
			on_cancel(q, cmd->cancel_instance);
		else if (cmd->body_case ==
		         AX__COMMAND__BODY_RESULTS_COMMITTED) {
			if (cmd->results_committed->up_to_seq > q->committed &&
			    cmd->results_committed->up_to_seq <= q->fwd_seq)
				q->committed =
				    cmd->results_committed->up_to_seq;
		} else
			ax_logf(AX_LOG_WARN, AX_A_QUEUE, "BAD_MESSAGE", NULL,
			        "command %d from %s is not for the queue",
			        (int) cmd->body_case, items[i].from);
		ax__command__free_unpacked(cmd, NULL);
	}
	fill_flush(q);
	drain_requests(q);
	timers(q);
	return AX_OK;
}

static ax_err
queue_tick(ax_actor *self, void *state, int64_t now)
{
	ax_queue *q = state;
	q->self     = self;
	drain_requests(q);
	timers(q);
	return AX_OK;
}

static void
queue_fini(void *state)
{
	ax_queue *q  = state;
	size_t    nq = 0;

	if (q == NULL)
		return;
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
			att_free(a);
		ax_hmap_iter_init(&it, &q->workers);
		while ((w = ax_hmap_iter_next(&it)) != NULL) {
			ax_heap_fini(&w->personal);
			free(w->doubt_host);
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
	free(q);
}

static const ax_actor_ops queue_ops = {
	.handle = queue_handle,
	.tick   = queue_tick,
	.fini   = queue_fini,
};

static ax_err
listen_workers(ax_queue *q)
{
	int rv;
	if ((rv = nng_rep0_open(&q->sock)) != 0)
		return ax_err_set(AX_ENNG, "queue: REP socket: %s",
		                  nng_strerror(rv));
	q->sock_open = 1;
	nng_socket_set_size(q->sock, NNG_OPT_RECVMAXSZ, 16 << 20);
	if ((rv = nng_listen(q->sock, q->addr, NULL, 0)) != 0)
		return ax_err_set(rv == NNG_EADDRINUSE       ? AX_EEXIST
		                      : rv == NNG_EADDRINVAL ? AX_EINVAL
		                                             : AX_ENNG,
		                  "queue: listen on %s (queue.address): %s%s",
		                  q->addr, nng_strerror(rv),
		                  rv == NNG_EADDRINUSE
		                      ? "; another axd may be running"
		                      : "");
	for (int i = 0; i < QCTX_INITIAL; i++)
		if ((rv = ctx_open(q)) != AX_OK)
			return rv;
	return AX_OK;
}

ax_err
ax_queue_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx, ax_queue **out)
{
	ax_actor_config ac = { 0 };
	ax_queue       *q;
	ax_err          rv;
	char            inbox[256];

	if ((q = calloc(1, sizeof(*q))) == NULL)
		return ax_err_set(AX_ENOMEM, "queue");
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
	if (q->ack_timeout_us <= 0)
		q->ack_timeout_us = 2 * AX_USEC_PER_SEC;
	if (q->lease_us <= 0)
		q->lease_us = 10 * AX_USEC_PER_SEC;
	if (q->hb_us <= 0)
		q->hb_us = 2 * AX_USEC_PER_SEC;
	q->retain_us = 10 * q->lease_us;
	if (q->retain_us < 60 * AX_USEC_PER_SEC)
		q->retain_us = 60 * AX_USEC_PER_SEC;
	snprintf(q->addr, sizeof(q->addr), "%s",
	         ax_config_str(ctx->cfg, "queue.address"));
	ac.name = AX_A_QUEUE;
	ac.url =
	    ax_config_actor_addr(ctx->cfg, AX_A_QUEUE, inbox, sizeof(inbox));
	ac.send_nonblock = 1;
	if ((rv = nng_aio_alloc(&q->wake_aio, wake_cb, q)) != 0) {
		queue_fini(q);
		return ax_err_set(AX_ENNG, "queue: aio: %s", nng_strerror(rv));
	}
	if ((rv = ax_actor_client_new(sys, "queue.rep", &q->client)) !=
	    AX_OK) {
		queue_fini(q);
		return rv;
	}
	if (ctx->dsn != NULL && *ctx->dsn &&
	    (rv = ax_store_open(ctx->dsn, &q->store)) != AX_OK) {
		queue_fini(q);
		return rv;
	}
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
		    AX_OK) {
			queue_fini(q);
			return rv;
		}
	}
	if ((rv = ax_actor_system_add(sys, &ac, &queue_ops, q, NULL)) != AX_OK)
		return rv; /* q freed by the system (fini) */
	if ((rv = listen_workers(q)) != AX_OK)
		return rv; /* q is the system's: freed with it */
	if (q->store != NULL) {
		/* the in-doubt attempts are read, and their workers' leases
		 * start to count, even if nothing arrives */
		pthread_mutex_lock(&q->mu);
		q->wake_start = 1;
		wake_locked(q);
		pthread_mutex_unlock(&q->mu);
	}
	if (out != NULL)
		*out = q;
	return AX_OK;
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
}

void
ax_queue_fault_drop_acks(ax_queue *q, int n)
{
	atomic_store(&q->drop_acks, n);
}
