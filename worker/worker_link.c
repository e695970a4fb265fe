/*
 * worker_link.c - ax-worker's link to the queue: the REQ socket, a
 * context per request kind, and its replacement when it goes silent (see
 * worker_internal.h and the comment on wlink).
 */
#include <errno.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "worker_internal.h"
#include "worker_proto.h"

/* --------------------------------------------------------------- nng */

void
axw_wake(ax_worker *w)
{
	uint64_t one = 1;
	if (write(w->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		ax_log_warn(COMP, "eventfd: %s", strerror(errno));
}

/* nng thread: send done -> receive; receive done -> wake the loop. */
static void
axw_rq_cb(void *arg)
{
	wreq      *r  = arg;
	int        rv = nng_aio_result(r->aio);
	ax_worker *w;

	if (atomic_load(&r->phase) == PH_SEND && rv == 0) {
		atomic_store(&r->phase, PH_RECV);
		nng_aio_set_timeout(r->aio, (nng_duration) r->timeout);
		nng_ctx_recv(r->ctx, r->aio);
		return;
	}
	if (atomic_load(&r->phase) == PH_SEND && rv != 0) {
		nng_msg_free(nng_aio_get_msg(r->aio)); /* given back */
		nng_aio_set_msg(r->aio, NULL);
	}
	r->rv      = rv;
	r->done_at = ax_clock_mono_us(); /* published by the store below */
	atomic_store(&r->phase, PH_DONE);
	if ((w = atomic_load(&r->w)) != NULL)
		axw_wake(w);
}

/* Sends m on request context k; the reply arrives through rq_cb. */
void
axw_rq_send(ax_worker *w, int k, int kind, Ax__WorkerMessage *m,
            int64_t timeout_us)
{
	wreq    *r = &w->rq[k];
	nng_msg *msg;
	size_t   len;

	m->worker_id = w->id;
	m->session   = w->session;
	m->seq       = ++w->seq;
	len          = ax__worker_message__get_packed_size(m);
	if (nng_msg_alloc(&msg, len) != 0) {
		r->rv = NNG_ENOMEM;
		atomic_store(&r->phase, PH_DONE);
		axw_wake(w);
		return;
	}
	ax__worker_message__pack(m, nng_msg_body(msg));
	r->kind    = kind;
	r->timeout = timeout_us / 1000;
	r->sent_at = ax_clock_mono_us();
	r->session = w->session;
	atomic_store(&r->phase, PH_SEND);
	nng_aio_set_msg(r->aio, msg);
	nng_aio_set_timeout(r->aio, (nng_duration) r->timeout);
	nng_ctx_send(r->ctx, r->aio);
}

/* The reply of a finished request (NULL on a transport error or a reply
 * that does not parse). Free with ax__queue_message__free_unpacked. */
Ax__QueueMessage *
axw_rq_reply(ax_worker *w, int k)
{
	wreq             *r = &w->rq[k];
	nng_msg          *msg;
	Ax__QueueMessage *m;

	atomic_store(&r->phase, PH_IDLE);
	if (r->rv != 0) {
		if (r->rv != NNG_ETIMEDOUT && r->rv != NNG_ECANCELED)
			ax_logf(AX_LOG_DEBUG, COMP, NULL, NULL,
			        "request %d: %s", r->kind,
			        nng_strerror(r->rv));
		return NULL;
	}
	w->last_answer = ax_clock_mono_us();
	msg            = nng_aio_get_msg(r->aio);
	nng_aio_set_msg(r->aio, NULL);
	if (ax_wproto_queue_msg(nng_msg_body(msg), nng_msg_len(msg), &m) !=
	    AX_OK)
		ax_logf(AX_LOG_WARN, COMP, "BAD_REPLY", NULL,
		        "reply from the queue ignored: %s", ax_err_detail());
	nng_msg_free(msg);
	return m;
}

int
axw_rq_idle(const ax_worker *w, int k)
{
	return atomic_load(&((ax_worker *) w)->rq[k].phase) == PH_IDLE;
}

/* ------------------------------------------------------------- link */

/* A link's requests stop before its socket closes: rq_cb may be about to
 * receive on its context, and nng 1.5 can deadlock a receive on a context
 * its socket is closing (the callback thread and the closer wait on each
 * other). nng_aio_stop() waits for a running callback, and a stopped aio
 * refuses the callback's receive. Any thread; l is freed. */
void
axw_link_free(wlink *l)
{
	if (l == NULL)
		return;
	for (int k = 0; k < NRQ; k++)
		if (l->rq[k].aio)
			nng_aio_stop(l->rq[k].aio);
	if (l->open)
		nng_close(l->sock);
	/* what an aio still holds (a reply never read, a request the stop
	 * gave back) is ours: the callback and rq_reply take theirs off */
	for (int k = 0; k < NRQ; k++)
		if (l->rq[k].aio) {
			nng_msg *m = nng_aio_get_msg(l->rq[k].aio);
			if (m != NULL)
				nng_msg_free(m);
			nng_aio_free(l->rq[k].aio);
		}
	free(l);
}

static void *
axw_link_free_main(void *arg)
{
	wlink      *l    = arg;
	atomic_int *live = l->live;

	axw_link_free(l);
	atomic_fetch_sub(live, 1);
	return NULL;
}

void
axw_link_wait_retired(ax_worker *w, int64_t max_us)
{
	int64_t end = ax_clock_mono_us() + max_us;

	while (atomic_load(&w->retiring) > 0 && ax_clock_mono_us() < end)
		ax_clock_sleep_us(10 * AX_USEC_PER_MSEC);
}

/* A new link dialing w->o.server (without waiting for the connection). */
ax_err
axw_link_new(ax_worker *w, wlink **out)
{
	wlink *l = calloc(1, sizeof(*l));
	int    rv;
	ax_err e;

	*out = NULL;
	if (l == NULL)
		return ax_err_set(AX_ENOMEM, "worker: out of memory");
	if ((rv = nng_req0_open(&l->sock)) != 0) {
		free(l);
		return ax_err_set(AX_ENNG, "worker: REQ socket: %s",
		                  nng_strerror(rv));
	}
	l->open = 1;
	/* our own retry logic re-sends; nng's must not duplicate */
	nng_socket_set_ms(l->sock, NNG_OPT_REQ_RESENDTIME,
	                  NNG_DURATION_INFINITE);
	nng_socket_set_size(l->sock, NNG_OPT_RECVMAXSZ, 64 << 20);
	nng_socket_set_ms(l->sock, NNG_OPT_RECONNMINT, 50);
	nng_socket_set_ms(l->sock, NNG_OPT_RECONNMAXT, 1000);
	for (int k = 0; k < NRQ; k++) {
		atomic_store(&l->rq[k].w, w);
		if ((rv =
		         nng_aio_alloc(&l->rq[k].aio, axw_rq_cb, &l->rq[k])) ||
		    (rv = nng_ctx_open(&l->rq[k].ctx, l->sock))) {
			axw_link_free(l);
			return ax_err_set(AX_ENNG, "worker: REQ context: %s",
			                  nng_strerror(rv));
		}
	}
	if ((rv = nng_dial(l->sock, w->o.server, NULL, NNG_FLAG_NONBLOCK))) {
		e = ax_err_set(rv == NNG_EADDRINVAL || rv == NNG_ENOTSUP
		                   ? AX_EINVAL
		                   : AX_ENNG,
		               "worker: dial %s: %s; use tcp://HOST:PORT or "
		               "ipc:///PATH",
		               w->o.server, nng_strerror(rv));
		axw_link_free(l);
		return e;
	}
	*out = l;
	return AX_OK;
}

/* How long a link may go unanswered while we are not registered before
 * it is replaced: a lease, at least 10 s (a restarting axd takes its
 * lease over in about that). */
int64_t
axw_relink_us(const ax_worker *w)
{
	return w->lease_ttl_us > 10 * AX_USEC_PER_SEC ? w->lease_ttl_us
	                                              : 10 * AX_USEC_PER_SEC;
}

/*
 * Replaces the link (see wlink): the requests in flight on the old one
 * are dropped (they belong to the old session or are sent again), and
 * it is closed on a detached thread. Loop thread. On failure the old
 * link stays and the next attempt is relink_us later.
 */
void
axw_link_reset(ax_worker *w, const char *why)
{
	wlink    *n, *old = w->link;
	pthread_t t;

	w->link_since = ax_clock_mono_us();
	if (axw_link_new(w, &n) != AX_OK) {
		ax_logf(AX_LOG_WARN, COMP, "QUEUE_RECONNECT", NULL,
		        "%s; a new connection failed: %s", why,
		        ax_err_detail());
		return;
	}
	ax_logf(AX_LOG_WARN, COMP, "QUEUE_RECONNECT", NULL,
	        "%s; connecting to %s again", why, w->o.server);
	for (int k = 0; k < NRQ; k++)
		atomic_store(&old->rq[k].w, NULL);
	old->live = &w->retiring;
	atomic_fetch_add(&w->retiring, 1);
	if (pthread_create(&t, NULL, axw_link_free_main, old) == 0) {
		pthread_detach(t);
	} else { /* left open: it only costs its memory and a connection */
		atomic_fetch_sub(&w->retiring, 1);
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "could not start a thread to close the old "
		        "connection: left open");
	}
	w->link = n;
	w->rq   = n->rq;
	w->reconnects++;
}
