/*
 * queue_endpoint.c - the queue's worker endpoint: the nng REP socket and
 * its contexts, the hand-off list to the actor thread, the handling of
 * each worker request, the Pull long poll (parking), and the replies,
 * among them the acks deferred until the results they acknowledge are
 * committed (the ResultsCommitted watermark). State in queue_internal.h;
 * the queue's overview and invariants are at the top of queue.c.
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
 * once what it carried is committed and on disk: each forwarded
 * AttemptResult gets a sequence number (queue_seq), the result handler
 * answers ResultsCommitted(up_to_seq) after each transaction, and the
 * reply waits in the deferred list until the durable watermark passes
 * the last result of its report. The result handler commits without
 * waiting for the WAL flush (relaxed), so the watermark becomes durable
 * with the queue's next durable commit (a dispatch record, the flush of
 * which takes every earlier commit to disk) or, when none comes within
 * RESULTS_FLUSH_WAIT_US, a flush of its own (axq_results_flush). So a
 * result is never lost between the ack and PostgreSQL (axd or
 * PostgreSQL killed in between: the worker sends it again). A reply
 * not released within DEFER_MAX_US (database down) is dropped unanswered
 * and the worker re-sends the report; duplicates are harmless by run_id.
 * While we hold a worker's report it cannot send the next one, so the
 * Started of its newer dispatches waits in its outbox: its dispatches'
 * ack timeouts start over meanwhile (axq_ack_timeouts).
 */
#include "queue_internal.h"

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "clock.h"
#include "worker.pb-c.h"
#include "worker_proto.h"

#define QCTX_INITIAL 8
#define QCTX_SPARE   4    /* contexts kept receiving beyond parked ones */
#define QCTX_MAX     4096 /* contexts at most */
#define POLL_MAX_US  (60 * AX_USEC_PER_SEC)
#define DEFER_MAX_US (10 * AX_USEC_PER_SEC) /* see reply_ack_deferred */

/* -------------------------------------------------------------- replies */

/* Packs m and sends it on c (the request is answered). */
void
axq_reply_now(ax_queue *q, qctx *c, const Ax__QueueMessage *m)
{
	nng_msg *msg;
	size_t   len = ax__queue_message__get_packed_size(m);
	int      rv;

	if ((rv = nng_msg_alloc(&msg, len)) != 0) {
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "NNG_ERROR", NULL,
		        "reply of %zu bytes: %s", len, nng_strerror(rv));
		axq_ctx_recv(c);
		return;
	}
	ax__queue_message__pack(m, nng_msg_body(msg));
	c->op = OP_SEND;
	nng_aio_set_msg(c->aio, msg);
	nng_ctx_send(c->ctx, c->aio);
}

void
axq_reply_ack(ax_queue *q, qctx *c, uint64_t seq)
{
	Ax__QueueMessage m   = AX__QUEUE_MESSAGE__INIT;
	Ax__Ack          ack = AX__ACK__INIT;
	m.reply_to_seq       = seq;
	m.body_case          = AX__QUEUE_MESSAGE__BODY_ACK;
	m.ack                = &ack;
	ack.acked_seq        = seq;
	axq_reply_now(q, c, &m);
}

void
axq_reply_error(ax_queue *q, qctx *c, uint64_t seq, const char *code,
                const char *text)
{
	Ax__QueueMessage m = AX__QUEUE_MESSAGE__INIT;
	Ax__Error        e = AX__ERROR__INIT;
	m.reply_to_seq     = seq;
	m.body_case        = AX__QUEUE_MESSAGE__BODY_ERROR;
	m.error            = &e;
	e.code             = (char *) code;
	e.message          = (char *) text;
	axq_reply_now(q, c, &m);
}

/* An Ack that may leave only once the results it acknowledges are
 * committed (see the file comment). w (NULL: not a valid session) is the
 * worker whose report it answers: while we hold it, that worker cannot
 * send its next report, so the Started of its newer dispatches waits in
 * its outbox (see held in axq_ack_timeouts). */
static void
reply_ack_deferred(ax_queue *q, qctx *c, uint64_t seq, qworker *w)
{
	Ax__QueueMessage m   = AX__QUEUE_MESSAGE__INIT;
	Ax__Ack          ack = AX__ACK__INIT;
	nng_msg         *msg;
	size_t           len;

	if (atomic_load(&q->drop_acks) > 0) {
		atomic_fetch_sub(&q->drop_acks, 1);
		axq_ctx_recv(c); /* the request is dropped unanswered */
		return;
	}
	m.reply_to_seq = seq;
	m.body_case    = AX__QUEUE_MESSAGE__BODY_ACK;
	m.ack          = &ack;
	ack.acked_seq  = seq;
	len            = ax__queue_message__get_packed_size(&m);
	if (nng_msg_alloc(&msg, len) != 0) {
		axq_ctx_recv(c);
		return;
	}
	ax__queue_message__pack(&m, nng_msg_body(msg));
	c->deferred  = msg;
	c->need_seq  = q->fwd_seq;
	c->def_until = ax_clock_mono_us() + DEFER_MAX_US;
	c->dworker   = w;
	if (w != NULL)
		w->held++;
	ax_list_append(&q->deferred, &c->dn);
	q->ndeferred++;
}

/* Sends deferred acks once result_handler's outbox is empty. */
void
axq_deferred_flush(ax_queue *q)
{
	int64_t now = ax_clock_mono_us();
	qctx   *c;

	if (ax_list_empty(&q->deferred))
		return;
	ax_actor_flush(q->self, AX_ACTOR_NONBLOCK);
	/* FIFO: need_seq and def_until grow along the list */
	while ((c = QCTX(q->deferred.head, dn)) != NULL &&
	       (c->need_seq <= q->committed || c->def_until <= now)) {
		ax_list_remove(&q->deferred, &c->dn);
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
			axq_ctx_recv(c);
			continue;
		}
		c->op = OP_SEND;
		nng_aio_set_msg(c->aio, c->deferred);
		c->deferred = NULL;
		nng_ctx_send(c->ctx, c->aio);
	}
}

/* ------------------------------------------------- results made durable */

/* How long results committed relaxed wait for a durable commit of the
 * queue's own (the next dispatch record, due soon while work flows)
 * before the queue flushes the WAL for them: their workers' next reports
 * wait behind the deferred acks meanwhile. */
#define RESULTS_FLUSH_WAIT_US (2 * AX_USEC_PER_MSEC)

void
axq_results_committed(ax_queue *q, uint64_t seq, int relaxed)
{
	if (seq > q->fwd_seq)
		return;
	if (!relaxed) {
		axq_results_durable(q, seq);
		return;
	}
	if (seq <= q->relaxed)
		return;
	q->relaxed = seq;
	if (q->relaxed_since == 0 && seq > q->committed)
		q->relaxed_since = ax_clock_mono_us();
}

/* The result handler's relaxed commit ended before it sent the watermark,
 * and the queue took the watermark before it began its own transaction:
 * that commit's record follows theirs in the WAL, so its flush (and,
 * under synchronous replication, the standby's confirmation) covers
 * them (engine/store.h, ax_store_tx_relaxed). */
void
axq_results_durable(ax_queue *q, uint64_t seq)
{
	if (seq <= q->committed) /* nothing new on disk: the wait goes on */
		return;
	q->committed = seq;
	/* those committed after seq wait from now on */
	q->relaxed_since = q->relaxed > seq ? ax_clock_mono_us() : 0;
}

int64_t
axq_results_flush(ax_queue *q, int64_t now)
{
	if (q->relaxed <= q->committed)
		return INT64_MAX;
	if (q->store == NULL) /* no database: nothing to flush them */
		return INT64_MAX;
	if (now < q->relaxed_since + RESULTS_FLUSH_WAIT_US)
		return q->relaxed_since + RESULTS_FLUSH_WAIT_US;
	uint64_t seq = q->relaxed;
	if (ax_store_flush_commits(q->store) != AX_OK) {
		/* the acks wait (at most DEFER_MAX_US: then the workers
		 * send their reports again) */
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "DB_ERROR", NULL,
		        "results up to %llu not flushed to disk, so not "
		        "acknowledged yet: %s",
		        (unsigned long long) seq, ax_err_detail());
		q->relaxed_since = now + DB_RETRY_US;
		return q->relaxed_since + RESULTS_FLUSH_WAIT_US;
	}
	axq_results_durable(q, seq);
	return q->relaxed > q->committed
	    ? q->relaxed_since + RESULTS_FLUSH_WAIT_US
	    : INT64_MAX;
}

/* -------------------------------------------------------------- parking */

/* Order of the park deadline list (equal deadlines keep arrival order). */
static int
park_before(const ax_list_node *a, const ax_list_node *b)
{
	return QWORKER(a, pdn)->park_deadline < QWORKER(b, pdn)->park_deadline;
}

void
axq_unpark(ax_queue *q, qworker *w)
{
	if (w->parked == NULL)
		return;
	w->parked = NULL;
	q->nparked--;
	ax_list_remove(&q->park_dl, &w->pdn);
	if (w->group != NULL)
		ax_list_remove(&w->group->parked, &w->pkn);
}

/* Answers w's parked Pull with no dispatch. */
void
axq_park_answer_empty(ax_queue *q, qworker *w, uint64_t seq)
{
	qctx             *c = w->parked;
	Ax__QueueMessage  m = AX__QUEUE_MESSAGE__INIT;
	Ax__DispatchBatch b = AX__DISPATCH_BATCH__INIT;
	if (c == NULL)
		return;
	axq_unpark(q, w);
	m.reply_to_seq = seq;
	m.body_case    = AX__QUEUE_MESSAGE__BODY_DISPATCH;
	m.dispatch     = &b;
	axq_reply_now(q, c, &m);
}

static void
on_pull(ax_queue *q, qctx *c, qworker *w, const Ax__WorkerMessage *m)
{
	int64_t wait = (int64_t) m->pull->wait_ms * AX_USEC_PER_MSEC;

	if (w->parked != NULL)
		axq_park_answer_empty(q, w, 0); /* superseded by this one */
	w->parked    = c;
	w->pull_free = m->pull->free_slots;
	q->nparked++;
	if (wait > POLL_MAX_US)
		wait = POLL_MAX_US;
	if (wait < 0)
		wait = 0;
	w->park_deadline = ax_clock_mono_us() + wait;
	/* keep the deadline list sorted (equal waits append at the tail) */
	ax_list_insert_sorted(&q->park_dl, &w->pdn, park_before);
	if (w->group != NULL)
		ax_list_prepend(&w->group->parked, &w->pkn);
	if (axq_try_fill(q, w) == 0 && (wait == 0 || w->draining))
		axq_park_answer_empty(q, w, m->seq);
}

/* ------------------------------------------------------------- requests */

/* Handles one worker request on c; the request message is consumed. */
static void
on_request(ax_queue *q, qctx *c)
{
	Ax__WorkerMessage *m;
	qworker           *w     = NULL;
	int                valid = 0;
	nng_msg           *msg   = c->req;
	ax_err             rv;

	c->req = NULL;
	rv     = ax_wproto_worker_msg(nng_msg_body(msg), nng_msg_len(msg), &m);
	nng_msg_free(msg);
	if (rv != AX_OK) {
		/* the seq of a refused message is not trusted: 0 */
		axq_reply_error(q, c, 0, "BAD_REQUEST", ax_err_detail());
		return;
	}
	if (m->body_case == AX__WORKER_MESSAGE__BODY_REGISTER) {
		axq_on_register(q, c, m);
		goto done;
	}
	if (m->worker_id && *m->worker_id)
		w = ax_hmap_get(&q->workers, m->worker_id);
	valid = w != NULL && w->alive && w->session == m->session;
	if (valid)
		axq_lease_touch(q, w);
	if (valid && m->ack != NULL)
		for (size_t i = 0; i < m->ack->n_acked_run_ids; i++)
			axq_ack_dispatch(q, w, m->ack->acked_run_ids[i]);
	switch (m->body_case) {
	case AX__WORKER_MESSAGE__BODY_STARTED:
		axq_on_started(q, valid ? w : NULL, m->worker_id, m->started);
		reply_ack_deferred(q, c, m->seq, valid ? w : NULL);
		goto done;
	case AX__WORKER_MESSAGE__BODY_RESULT:
		axq_on_result(q, valid ? w : NULL, m->worker_id, m->result);
		reply_ack_deferred(q, c, m->seq, valid ? w : NULL);
		goto done;
	case AX__WORKER_MESSAGE__BODY_REPORT:
		for (size_t i = 0; i < m->report->n_started; i++)
			axq_on_started(q, valid ? w : NULL, m->worker_id,
			               m->report->started[i]);
		for (size_t i = 0; i < m->report->n_results; i++)
			axq_on_result(q, valid ? w : NULL, m->worker_id,
			              m->report->results[i]);
		for (size_t i = 0; i < m->report->n_withdrawn_run_ids; i++)
			axq_on_withdrawn(q, valid ? w : NULL,
			                 m->report->withdrawn_run_ids[i]);
		if (m->report->n_started + m->report->n_results > 0)
			reply_ack_deferred(q, c, m->seq, valid ? w : NULL);
		else
			axq_reply_ack(q, c, m->seq);
		goto done;
	case AX__WORKER_MESSAGE__BODY_ACK_ONLY:
		if (valid)
			for (size_t i = 0; i < m->ack_only->n_acked_run_ids;
			     i++)
				axq_ack_dispatch(
				    q, w, m->ack_only->acked_run_ids[i]);
		axq_reply_ack(q, c, m->seq);
		goto done;
	case AX__WORKER_MESSAGE__BODY_PULL:
	case AX__WORKER_MESSAGE__BODY_HEARTBEAT:
	case AX__WORKER_MESSAGE__BODY_DEREGISTER:
		break;
	default:
		axq_reply_error(q, c, m->seq, "UNSUPPORTED",
		                "unknown WorkerMessage body");
		goto done;
	}
	if (w == NULL || !w->alive) {
		axq_reply_error(q, c, m->seq, "UNKNOWN_WORKER",
		                "register first (unknown or lapsed worker)");
		goto done;
	}
	if (!valid) {
		axq_reply_error(q, c, m->seq, "STALE_SESSION",
		                "this session was replaced; register again");
		goto done;
	}
	if (m->body_case == AX__WORKER_MESSAGE__BODY_PULL)
		on_pull(q, c, w, m);
	else if (m->body_case == AX__WORKER_MESSAGE__BODY_HEARTBEAT)
		axq_on_heartbeat(q, c, w, m);
	else
		axq_on_deregister(q, c, w, m);
done:
	if (valid)
		axq_refit(q, w);
	ax__worker_message__free_unpacked(m, NULL);
}

/* -------------------------------------------------------- nng callbacks */

/* Under q->mu: makes sure the actor will drain the hand-off list. */
void
axq_wake_locked(ax_queue *q)
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

void
axq_wake_cb(void *arg)
{
	ax_queue *q = arg;
	pthread_mutex_lock(&q->mu);
	q->wake_retry = 0;
	if ((!ax_list_empty(&q->ready) || q->wake_start) &&
	    nng_aio_result(q->wake_aio) == 0)
		axq_wake_locked(q);
	pthread_mutex_unlock(&q->mu);
}

void
axq_ctx_recv(qctx *c)
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
		axq_ctx_recv(c);
		return;
	}
	if (rv != 0) {
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED || q->closing) {
			c->op = OP_IDLE;
			return;
		}
		axq_ctx_recv(c);
		return;
	}
	c->req = nng_aio_get_msg(c->aio);
	c->op  = OP_HANDED;
	pthread_mutex_lock(&q->mu);
	ax_list_append(&q->ready, &c->rn);
	axq_wake_locked(q);
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
	axq_ctx_recv(c);
	return AX_OK;
}

/* Drains the hand-off list and handles every request on it. */
void
axq_drain_requests(ax_queue *q)
{
	ax_list l;
	pthread_mutex_lock(&q->mu);
	l        = q->ready; /* taken whole: its nodes keep their links */
	q->ready = (ax_list) { 0 };
	q->woken = 0;
	pthread_mutex_unlock(&q->mu);
	for (ax_list_node *n = l.head, *nx; n != NULL; n = nx) {
		nx = n->next; /* before c can be handed again */
		on_request(q, QCTX(n, rn));
	}
	while (q->nctx < QCTX_MAX &&
	       q->nctx < q->nparked + q->ndeferred + QCTX_SPARE)
		if (ctx_open(q) != AX_OK) {
			ax_logf(AX_LOG_WARN, AX_A_QUEUE, "NNG_ERROR", NULL,
			        "%s", ax_err_detail());
			break;
		}
}

ax_err
axq_endpoint_listen(ax_queue *q)
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
