/*
 * queue_dispatch.c - the queue's attempts and their dispatch: an
 * attempt's arrival (AttemptRendered) and cancel, the held list of
 * attempts prepared ahead of their due instant, the priority heaps per
 * (channel, group) and per worker with aging, routing to a waiting
 * worker, the Pull reply that carries the dispatches, ack timeouts and
 * resends, and the retired FIFO. State in queue_internal.h; the queue's
 * overview and invariants are at the top of queue.c.
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
 * re-sorting (the aging is continuous rather than in whole steps). The
 * key is ax_aging_key (engine/aging.h), the one aging function of the
 * scheduler, of the tier priority (ax_aging_tier_priority: the DAG's
 * impact, then the task's priority), as the resource detector's lanes:
 * a P1 attempt goes before a burst of P3 attempts queued at the same
 * time. P0 always goes before the other channels (reserved for critical
 * links); the others compete by that key. A re-queued attempt keeps its
 * enqueue time.
 *
 * Prepared attempts: an attempt whose due_at is still ahead (the time
 * detector prepares runs scheduler.prepare_ahead early) waits on the held
 * list, sorted by due instant, and is queued queue.dispatch_ahead before
 * the instant: the actor's deadline includes the list's head, so a
 * release is as punctual as any timer here. A worker that said it holds
 * a dispatch for its instant (Register.start_after) is then sent it at
 * once with the time left (Dispatch.start_after_us), so the dispatch
 * record's commit and the reply are behind it when the instant comes and
 * the start waits only for the worker's own timer; the attempt's slot is
 * taken that much sooner, and its dispatched_at is the instant it may
 * start. A worker that cannot hold one is sent it only once it is due.
 * A held attempt can be canceled like a queued one. When an instant has
 * more attempts due than the group has free slots, a worker that says so
 * (Register.prefetch) takes the rest beyond its slots and starts them as
 * its slots free (fill_prefetch); those not started queue.prefetch_wait
 * after their instant are asked back (queue_workers.c, withdraw_due).
 */
#include "queue_internal.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aging.h"
#include "clock.h"
#include "routing.h"
#include "worker.pb-c.h"

#define HOLD_MIN_US 200 /* due sooner than this: queue it now */
#define HOLD_MAX_US (2 * 60 * AX_USEC_PER_SEC) /* see att_hold_or_enqueue */

/* ----------------------------------------------------------------- heap */

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

/* ----------------------------------------------------------------- fill */

/* The cpu (thousandths of a core) and memory an attempt declares. */
static int64_t
att_cpu(const qatt *a)
{
	return a->ar != NULL && a->ar->cpu_milli > 0 ? a->ar->cpu_milli : 0;
}

static int64_t
att_mem(const qatt *a)
{
	return a->ar != NULL && a->ar->memory_bytes > 0 ? a->ar->memory_bytes
	                                                : 0;
}

/*
 * Whether a fits w beside the attempts w runs, by the cpu and memory
 * they declare (`resources` of the task) against what w offers
 * (worker.cpu_milli, worker.memory_mb; 0: not declared, no limit). An
 * idle worker takes anything, so an attempt larger than every worker
 * still runs.
 */
static int
att_fits(const qworker *w, const qatt *a)
{
	int64_t c = att_cpu(a), m = att_mem(a);

	if (w->used == 0)
		return 1;
	return (c == 0 || w->cpu_milli <= 0 ||
	        w->used_cpu + c <= w->cpu_milli) &&
	    (m == 0 || w->memory_bytes <= 0 ||
	     w->used_mem + m <= w->memory_bytes);
}

/* How deep into each heap a worker looks for work that fits it when the
 * best does not (placement by resources): bounded, the heaps are not
 * sorted past their top. */
#define FIT_SCAN 32
/* How long the best attempt may be passed over for smaller work that
 * fits: after that the workers without room for it take nothing more
 * from its heap until one has room (a steady stream of small attempts
 * would otherwise keep a large one waiting forever). */
#define FIT_WAIT_US (30 * AX_USEC_PER_SEC)

/* The best attempt for w among h's top and, when it does not fit w (and
 * has not waited FIT_WAIT_US), the first FIT_SCAN entries of h; NULL
 * when none fits. */
static qatt *
best_fit_in(const qheap *h, const qworker *w, int64_t now)
{
	qatt  *best = axq_heap_top(h), *t;
	size_t n    = ax_heap_count(h);

	if (best == NULL || att_fits(w, best))
		return best;
	if (now - best->queued_mono >= FIT_WAIT_US)
		return NULL;
	best = NULL;
	for (size_t i = 1; i < n && i < FIT_SCAN; i++)
		if ((t = axq_heap_at(h, i)) != NULL && att_fits(w, t) &&
		    (best == NULL || att_before(t, best)))
			best = t;
	return best;
}

static qatt *
best_for(qworker *w)
{
	int64_t now  = ax_clock_mono_us();
	qatt   *best = best_fit_in(&w->personal, w, now);
	if (w->group == NULL)
		return best;
	for (int ch = 0; ch < AX_QUEUE_NCHANNELS; ch++) {
		qatt *t = best_fit_in(&w->group->heaps[ch], w, now);
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
int
axq_dispatch_open(const ax_queue *q)
{
	return q->store == NULL ||
	    (q->reconciled && ax_clock_mono_us() >= q->db_down_until);
}

/* Takes a (the best work for w, in its heap) into w's fill f. */
static void
fill_take(ax_queue *q, qworker *w, qfill *f, qatt *a, int64_t now)
{
	f->from[f->n] = a->heap;
	axq_heap_remove(a);
	STAT(q, st_depth[a->ch], -1);
	axq_att_link_worker(q, a, w);
	if (a->start_mono > now) { /* the instant it may start */
		a->dispatched_at_us += a->start_mono - now;
		if (a->ar != NULL && a->dispatched_at_us < a->ar->due_at_us)
			a->dispatched_at_us = a->ar->due_at_us;
	}
	f->batch[f->n++] = a;
}

/*
 * Picks for w's parked Pull up to its free slots of the best work for it
 * (personal heap and its group's channel heaps) into f, taken out of
 * their heaps and linked to w; nothing when no dispatch may leave now.
 * Returns 0 when w cannot be answered (no parked Pull, lost, draining).
 */
static int
fill_pick(ax_queue *q, qworker *w, qfill *f)
{
	int32_t free_ = w->pull_free, s;
	int64_t now   = ax_clock_mono_us();

	f->w = w;
	f->n = 0;
	/* a quota (batching): what routing gave w in this batch */
	if (w->quota > 0 && w->quota < free_)
		free_ = w->quota;
	w->quota = 0;
	if (w->parked == NULL || !w->alive || w->draining)
		return 0;
	if (!axq_dispatch_open(q)) {
		q->fill_blocked = 1;
		free_           = 0; /* only the resends may go */
	}
	/* w's free slots may still count a resend it never received */
	for (ax_list_node *x = w->nresend > 0 ? w->att.head : NULL; x != NULL;
	     x               = x->next) {
		qatt *a = QATT(x, wn);
		if (a->resend)
			free_ -= a->slots > w->slots ? w->slots : a->slots;
	}
	/* a capacity calendar that preempts: no more than its window's
	 * slots in the group (queue_calendar.c; the resends are counted in
	 * what the group holds) */
	if ((s = axq_calendar_room(w->group, free_)) < free_) {
		free_             = s;
		w->group->cal_cut = 1; /* see axq_calendar_scan */
	}
	while (free_ > 0 && f->n < DISPATCH_MAX) {
		qatt *a = best_for(w);
		if (a == NULL)
			break;
		if (a->start_mono > now && !w->start_after) {
			/* sent ahead (see "Prepared attempts"), but w would
			 * start it at once: w takes nothing before it is due,
			 * a wait of at most queue.dispatch_ahead */
			if (q->early_retry == 0 ||
			    a->start_mono < q->early_retry)
				q->early_retry = a->start_mono;
			break;
		}
		s = a->slots > w->slots ? w->slots : a->slots;
		if (s > free_)
			break;
		free_ -= s;
		fill_take(q, w, f, a, now);
	}
	return 1;
}

/*
 * Prefetch: attempts due at an instant ahead that no worker has a free
 * slot for. Without it they wait in the queue until a worker's task
 * ends, its Pull arrives and their dispatch is recorded: at an instant
 * with more work due than slots (a whole fleet of crons on the same
 * second), the rest started 4-9 ms after it. A worker that takes them
 * beyond its free slots (Register.prefetch) starts each one the moment
 * a slot frees after its instant. What a wrong bet costs: an attempt
 * waits behind a long task while another worker frees first; so only
 * attempts held for a later instant go (work due now waits for a free
 * slot as before), only once every fill of this batch has its free
 * slots' share, round the workers one attempt at a time, and the queue
 * takes back those not started queue.prefetch_wait after their instant
 * (axq_on_heartbeat). Adds to the fills f[0..k), at most budget
 * attempts (the batch's room in one transaction).
 */
static void
fill_prefetch(ax_queue *q, qfill *f, size_t k, size_t budget)
{
	int64_t now  = ax_clock_mono_us();
	int     more = 1;

	if (!axq_dispatch_open(q))
		return;
	while (more && budget > 0) {
		more = 0;
		for (size_t i = 0; i < k && budget > 0; i++) {
			qworker *w = f[i].w;
			qatt    *a;
			int32_t  s;
			if (w->prefetch <= 0 || f[i].n >= DISPATCH_MAX ||
			    w->parked == NULL || !w->alive || w->draining ||
			    (a = best_for(w)) == NULL || a->start_mono <= now)
				continue;
			s = a->slots > w->slots ? w->slots : a->slots;
			if (w->used + s > w->slots + w->prefetch ||
			    axq_calendar_room(w->group, s) < s)
				continue;
			fill_take(q, w, &f[i], a, now);
			a->prefetched = 1;
			budget--;
			more = 1;
		}
	}
}

/*
 * Answers f's worker's parked Pull with f's recorded dispatches plus the
 * dispatches to it whose ack timed out (resend: sent again as they are,
 * not recorded again, so also while the database is down; their slots
 * are still counted as the worker's). Returns the number of dispatches
 * (0: nothing to send; the Pull stays parked).
 */
static size_t
fill_send(ax_queue *q, qfill *f)
{
	qworker *w     = f->w;
	qatt   **batch = f->batch;
	size_t   n = f->n, nenv = 0, nf = 0, ne = 0;

	for (ax_list_node *x = w->nresend > 0 ? w->att.head : NULL;
	     x != NULL && n < DISPATCH_MAX; x = x->next) {
		qatt *a = QATT(x, wn);
		if (a->resend) {
			a->resend = 0;
			w->nresend--;
			batch[n++] = a;
		}
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
	int64_t                  now;

	axq_unpark(q, w);
	if (ds == NULL || dp == NULL || env == NULL || envp == NULL ||
	    src.f == NULL || src.fp == NULL || src.e == NULL ||
	    src.ep == NULL) {
		/* the dispatches stay unacked and are re-sent later */
		ax_logf(AX_LOG_ERROR, AX_A_QUEUE, "NOMEM", NULL,
		        "dispatch batch of %zu", n);
		axq_ctx_recv(c);
	} else {
		for (size_t i = 0; i < n; i++) {
			fill_dispatch(q, batch[i], &ds[i], &env[e], &envp[e],
			              &src);
			if (batch[i]->ar != NULL)
				e += batch[i]->ar->n_env;
			dp[i] = &ds[i];
		}
		/* counted from the send (the record's commit and the
		 * building of the reply are behind): the transit only makes
		 * the start later, never earlier */
		now = ax_clock_mono_us();
		for (size_t i = 0; w->start_after && i < n; i++)
			if (batch[i]->start_mono > now)
				ds[i].start_after_us =
				    batch[i]->start_mono - now;
		m.body_case    = AX__QUEUE_MESSAGE__BODY_DISPATCH;
		m.dispatch     = &b;
		b.n_dispatches = n;
		b.dispatches   = dp;
		axq_reply_now(q, c, &m);
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
 * Answers w's parked Pull with up to its free slots of the best work for
 * it, recorded in a transaction of its own, plus its resends (see
 * fill_pick and fill_send). Returns the number of dispatches (0: nothing
 * fit or nothing may leave now; the Pull stays parked).
 */
size_t
axq_try_fill(ax_queue *q, qworker *w)
{
	qfill f;

	if (!fill_pick(q, w, &f))
		return 0;
	fill_prefetch(q, &f, 1, AX_STORE_BATCH_MAX - f.n);
	if (f.n > 0)
		(void) axq_record_dispatches(q, &f, 1); /* 0: f.n is 0 */
	return fill_send(q, &f);
}

/*
 * Hands slots attempt slots to w's parked Pull: at once, or, while a
 * batch is being handled (q->batching), as a quota answered by
 * axq_fill_flush() so that one reply carries all the batch routed to w
 * (answering each attempt alone would cost the worker a round trip per
 * attempt).
 */
static void
want_fill(ax_queue *q, qworker *w, int32_t slots)
{
	if (!q->batching) {
		axq_try_fill(q, w);
		return;
	}
	if (w->quota == 0)
		ax_list_prepend(&q->fill, &w->fn);
	w->quota += slots;
}

/* Adds the prefetch to the fills f[0..k) of rows attempts, records them
 * in one transaction, then sends each. */
static void
fill_commit(ax_queue *q, qfill *f, size_t k, size_t rows)
{
	if (k == 0)
		return;
	fill_prefetch(q, f, k, AX_STORE_BATCH_MAX - rows);
	(void) axq_record_dispatches(q, f, k); /* 0: every n is 0 */
	for (size_t i = 0; i < k; i++)
		fill_send(q, &f[i]);
}

/*
 * The Pulls routed work in this batch are answered together: every
 * worker's part is picked first and all of them are recorded in one
 * transaction (sliced at AX_STORE_BATCH_MAX rows), so the last worker
 * answered waits for one commit like the first, instead of one commit
 * per worker before it (attempts due at the same instant and spread
 * over the workers leave together).
 */
void
axq_fill_flush(ax_queue *q)
{
	qworker *w;
	qfill   *f;
	size_t   nw = 0, k = 0, rows = 0;

	q->batching = 0;
	for (ax_list_node *x = q->fill.head; x != NULL; x = x->next)
		nw++;
	if (nw <= 1 || (f = malloc(nw * sizeof(*f))) == NULL) {
		/* one worker (or no memory): one fill at a time */
		while ((w = QWORKER(ax_list_pop(&q->fill), fn)) != NULL) {
			if (w->quota > 0)
				axq_try_fill(q, w);
		}
		return;
	}
	while ((w = QWORKER(ax_list_pop(&q->fill), fn)) != NULL) {
		if (w->quota <= 0 || !fill_pick(q, w, &f[k]))
			continue;
		if (rows + f[k].n > AX_STORE_BATCH_MAX) {
			fill_commit(q, f, k, rows);
			f[0] = f[k];
			k    = 0;
			rows = 0;
		}
		rows += f[k++].n;
	}
	fill_commit(q, f, k, rows);
	free(f);
}

/* ------------------------------------------------------------- attempts */

void
axq_att_link_worker(ax_queue *q, qatt *a, qworker *w)
{
	a->state  = ST_DISPATCHED;
	a->worker = w;
	ax_list_prepend(&w->att, &a->wn);
	w->used += a->slots > w->slots ? w->slots : a->slots;
	w->used_cpu += att_cpu(a);
	w->used_mem += att_mem(a);
	a->dispatched_at_us = ax_clock_utc_us();
	a->ack_deadline     = ax_clock_mono_us() + q->ack_timeout_us;
	ax_list_append(&q->unacked, &a->un);
	axq_cap_mark(q, w->group);
}

void
axq_att_unlink_worker(ax_queue *q, qatt *a)
{
	qworker *w = a->worker;
	if (w == NULL)
		return;
	if (a->state == ST_DISPATCHED)
		ax_list_remove(&q->unacked, &a->un);
	if (a->resend) {
		a->resend = 0;
		w->nresend--;
	}
	ax_list_remove(&w->att, &a->wn);
	a->prefetched  = 0;
	a->withdrawing = 0;
	w->used -= a->slots > w->slots ? w->slots : a->slots;
	if (w->used < 0)
		w->used = 0;
	w->used_cpu -= att_cpu(a);
	w->used_mem -= att_mem(a);
	if (att_cpu(a) > 0 || att_mem(a) > 0)
		w->refit = 1; /* queued work may fit it now (axq_refit) */
	if (w->used_cpu < 0 || w->used == 0)
		w->used_cpu = 0;
	if (w->used_mem < 0 || w->used == 0)
		w->used_mem = 0;
	a->worker = NULL;
	axq_cap_mark(q, w->group);
}

int
axq_att_unstarted(const qatt *a)
{
	return (a->state == ST_RUNNING || a->state == ST_DISPATCHED) &&
	    a->started_at_us == 0 && a->start_mono > 0 && a->ar != NULL;
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
		ax_list_remove(&q->held, &a->heln);
	if (a->state == ST_DOUBT)
		axq_doubt_unlink(a);
	axq_att_unlink_worker(q, a);
	if (a->inst_key[0])
		ax_hmap_remove(&q->insts, a);
	a->state     = ST_DONE;
	a->retire_at = ax_clock_mono_us() + q->retain_us;
	ax_list_append(&q->retired, &a->rn);
}

void
axq_att_free(qatt *a)
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
	if (!ax_list_empty(&g->parked)) {
		ax_routing_cand cands[64];
		qworker        *cw[64];
		size_t          n  = 0;
		int32_t         sl = a->slots;
		for (ax_list_node *x = g->parked.head; x != NULL && n < 64;
		     x               = x->next) {
			qworker *p    = QWORKER(x, pkn);
			int32_t  need = sl > p->slots ? p->slots : sl;
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

/* Order of the held list (equal instants keep arrival order). */
static int
held_before(const ax_list_node *a, const ax_list_node *b)
{
	return QATT(a, heln)->release_mono < QATT(b, heln)->release_mono;
}

/*
 * An attempt prepared ahead of its due instant (scheduler.prepare_ahead)
 * waits on the held list until queue.dispatch_ahead before it, and
 * remembers the instant (start_mono); any other goes to its queue now.
 * The list is sorted by release time; attempts arrive almost in that
 * order, so the insertion walks back from the tail a step or two.
 */
static void
att_hold_or_enqueue(ax_queue *q, qatt *a)
{
	int64_t utc = ax_clock_utc_us(), wait = a->ar->due_at_us - utc;
	int64_t mono = ax_clock_mono_us();

	if (wait > HOLD_MAX_US)
		wait = HOLD_MAX_US; /* a clock step: never hold for long */
	a->start_mono = wait >= HOLD_MIN_US ? mono + wait : 0;
	if (wait - q->dispatch_ahead_us < HOLD_MIN_US) {
		axq_att_enqueue(q, a);
		return;
	}
	a->state        = ST_HELD;
	a->release_mono = mono + wait - q->dispatch_ahead_us;
	ax_list_insert_sorted(&q->held, &a->heln, held_before);
}

/* Reports a QUEUED or unacknowledged attempt as canceled. */
void
axq_att_cancel_now(ax_queue *q, qatt *a)
{
	axq_forward(q, a, a->run_id, AX__ATTEMPT_STATUS__ATTEMPT_CANCELED,
	            NULL, NULL, 0,
	            a->kill_reason[0] ? a->kill_reason : "CANCELED");
	axq_att_retire(q, a);
}

/* Back to the queue: a dispatch known never to have run (see "Ownership
 * of a dispatch" in the file comment). */
void
axq_att_requeue(ax_queue *q, qatt *a)
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
	    (a->group = axq_group_get(
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
		axq_forward(q, a, a->run_id,
		            AX__ATTEMPT_STATUS__ATTEMPT_FAILED, NULL, &r, 0,
		            "BAD_ATTEMPT");
		axq_att_retire(q, a);
		return -1;
	}
	a->ch    = ch;
	a->rank  = ch == AX_QUEUE_P0;
	a->route = route;
	/* enqueued now (see "Order in a channel" in the file comment) */
	a->tier        = axq_tier_of(ar->impact);
	a->preemptible = ar->preemptible;
	a->queued_mono = ax_clock_mono_us();
	a->key = ax_aging_key(ax_aging_tier_priority(a->tier, ar->priority),
	                      a->queued_mono, q->aging_us);
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

void
axq_on_attempt_rendered(ax_queue *q, Ax__Command *cmd)
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
		axq_att_free(a);
		ax__command__free_unpacked(cmd, NULL);
		return;
	}
	if (att_setup(q, a, cmd) == 0)
		att_hold_or_enqueue(q, a);
}

void
axq_on_cancel(ax_queue *q, const Ax__CancelInstance *ci)
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

/* ------------------------------------------------------------- timers */

/* Queues the held attempts whose release came (now, mono us: their due
 * instant less queue.dispatch_ahead) and answers the Pulls they were
 * routed to. The timers run it first. */
void
axq_held_release(ax_queue *q, int64_t now)
{
	/* first: a held attempt's due instant is its start latency; the
	 * attempts due together leave in one reply per worker */
	q->batching = 1;
	qatt *a;

	while ((a = QATT(q->held.head, heln)) != NULL &&
	       a->release_mono <= now) {
		ax_list_remove(&q->held, &a->heln);
		axq_att_enqueue(q, a);
	}
	if (q->early_retry != 0 && q->early_retry <= now) {
		/* a worker that cannot hold a dispatch passed over one not
		 * due yet (fill_pick): the parked Pulls try again now */
		q->early_retry = 0;
		for (ax_list_node *x = q->park_dl.head; x != NULL;
		     x               = x->next) {
			qworker *w = QWORKER(x, pdn);
			if (w->pull_free > w->quota)
				want_fill(q, w, w->pull_free - w->quota);
		}
	}
	axq_fill_flush(q);
}

/* Dispatches whose ack deadline passed (now, mono us): sent again to the
 * same worker (resend) or, with its session over, UNKNOWN. */
void
axq_ack_timeouts(ax_queue *q, int64_t now)
{
	qatt *a;

	while ((a = QATT(q->unacked.head, un)) != NULL &&
	       a->ack_deadline <= now) {
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
		ax_list_remove(&q->unacked, &a->un);
		a->ack_deadline = now + q->ack_timeout_us;
		ax_list_append(&q->unacked, &a->un);
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
			axq_try_fill(q, w);
	}
}

/* Frees the retired attempts whose retention passed (now, mono us). */
void
axq_retired_free(ax_queue *q, int64_t now)
{
	qatt *a;

	while ((a = QATT(q->retired.head, rn)) != NULL &&
	       a->retire_at <= now) {
		ax_list_remove(&q->retired, &a->rn);
		ax_hmap_remove(&q->runs, a);
		axq_att_free(a);
	}
}

/*
 * A parked Pull that nothing fitted by cpu or memory (att_fits) is
 * looked at again once an attempt of that worker that declared them has
 * ended: the worker does not send another Pull while one is parked.
 * Called after each worker message (queue_endpoint.c).
 */
void
axq_refit(ax_queue *q, qworker *w)
{
	if (w == NULL || !w->refit)
		return;
	w->refit = 0;
	if (w->parked != NULL && w->pull_free > w->quota)
		want_fill(q, w, w->pull_free - w->quota);
}
