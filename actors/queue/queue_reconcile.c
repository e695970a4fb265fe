/*
 * queue_reconcile.c - the queue service's record of dispatches and its
 * reconciliation after a start or takeover (state in queue_internal.h;
 * the queue's overview and invariants are at the top of queue.c).
 *
 * Role: every dispatch is written (attempt DISPATCHED, worker_id) before
 * it is sent; a queue that starts reads back the DISPATCHED and RUNNING
 * attempts and keeps each with the worker that was sent it (ST_DOUBT on
 * that worker's in-doubt list) until the worker registers and reports its
 * running set, or its lease plus queue.lease_grace has passed on the
 * database clock. Nothing of a worker's in-doubt set is ever handed to
 * another worker before one of the two.
 *
 * Reconciliation (with a database): every dispatch is recorded (attempt
 * DISPATCHED, worker_id) before it is sent, so after a start or takeover
 * the attempts a worker may hold are known: they are loaded before
 * anything is dispatched and wait (ST_DOUBT) for that worker, not the
 * first one that registers. When it registers, its running set settles
 * them (doubt_resolve: adopted, sent again to it alone, or UNKNOWN);
 * when it does not come back within its lease, taken from the database
 * clock, plus queue.lease_grace, it has fenced itself and they go
 * UNKNOWN (retried per policy under a new run_id). A worker's live lease
 * also ends only after lease + grace (lease_touch in queue_workers.c),
 * for the same reason.
 * During a database outage nothing new is dispatched (nothing could be
 * recorded; resends need no record), the store gives up reconnecting
 * quickly and its statements time out (statement_timeout), so the
 * workers' leases are never starved by a blocked actor.
 *
 * Invariants: an in-doubt attempt is on exactly one worker's list, and
 * that worker is on the doubt deadline list (sorted) until it registers
 * or lapses; a settled attempt that must go back to its worker only
 * carries bound until that worker acknowledges it.
 *
 * Workload: one batched UPDATE per handler batch for all the Pulls it
 * answers (up to DISPATCH_MAX rows each), or per Pull answered alone; one
 * SELECT at a start (the attempts in flight, a few thousand at
 * most); settling costs O(attempts of the worker + its running set).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "queue_internal.h"
#include "store_attempts.h"

/*
 * Records the dispatches of the fills f[0..k) before they are sent, in
 * one statement for every worker of the batch (one commit, however many
 * Pulls it answers), so that whoever runs the queue next knows which
 * worker may hold each (see "Reconciliation" in the file comment). On a
 * database error nothing is sent: the attempts go back to the heaps they
 * came from (from[]), dispatching pauses for DB_RETRY_US and 0 is
 * returned. An attempt the database no longer has waiting (RUNNING,
 * ended or UNKNOWN there: e.g. its worker's Started was committed while
 * it waited to be sent to that worker again after a start) is not sent
 * and is retired; each f[i].n is what is left of that fill.
 */
int
axq_record_dispatches(ax_queue *q, qfill *f, size_t k)
{
	ax_store_dispatch_row  one[DISPATCH_MAX];
	ax_store_dispatch_row *rows  = one;
	size_t                 total = 0, r = 0;
	uint64_t               relaxed = q->relaxed; /* before the commit */
	ax_err                 rv;

	if (q->store == NULL)
		return 1;
	for (size_t i = 0; i < k; i++)
		total += f[i].n;
	if (total == 0)
		return 1;
	if (total > DISPATCH_MAX &&
	    (rows = calloc(total, sizeof(*rows))) == NULL)
		rv = ax_err_set(AX_ENOMEM, "%zu dispatch rows", total);
	else {
		for (size_t i = 0; i < k; i++)
			for (size_t j = 0; j < f[i].n; j++) {
				qatt *a   = f[i].batch[j];
				rows[r++] = (ax_store_dispatch_row) {
					.run_id    = a->run_id,
					.worker_id = f[i].w->id,
					.dispatched_at_us =
					    a->dispatched_at_us,
					.command =
					    a->ar ? a->ar->command : NULL,
				};
			}
		rv = ax_store_record_dispatches(q->store, rows, total);
	}
	/* A commit that wrote a row waited for its flush, and so took the
	 * results committed relaxed before it to disk (axq_results_durable);
	 * one that wrote nothing (every row refused) did not flush. */
	for (size_t i = 0; rv == AX_OK && i < total; i++)
		if (rows[i].recorded) {
			axq_results_durable(q, relaxed);
			break;
		}
	if (rv != AX_OK) {
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "DB_ERROR", NULL,
		        "%zu dispatches to %zu worker(s) (%s first) not "
		        "recorded, so not sent (kept queued): %s",
		        total, k, f[0].w->id, ax_err_detail());
		for (size_t i = 0; i < k; i++) {
			for (size_t j = 0; j < f[i].n; j++) {
				qatt *a = f[i].batch[j];
				axq_att_unlink_worker(q, a);
				a->state = ST_QUEUED;
				if (axq_heap_push(f[i].from[j], a) == AX_OK)
					STAT(q, st_depth[a->ch], 1);
			}
			f[i].n = 0;
		}
		q->db_down_until = ax_clock_mono_us() + DB_RETRY_US;
		if (rows != one)
			free(rows);
		return 0;
	}
	r = 0;
	for (size_t i = 0; i < k; i++) {
		size_t kept = 0;
		for (size_t j = 0; j < f[i].n; j++, r++) {
			if (rows[r].recorded) {
				f[i].batch[kept]  = f[i].batch[j];
				f[i].from[kept++] = f[i].from[j];
				continue;
			}
			ax_log_ids ids = axq_att_ids(f[i].batch[j]);
			ax_logf(AX_LOG_WARN, AX_A_QUEUE, "NOT_DISPATCHED",
			        &ids,
			        "the database has this attempt no longer "
			        "waiting for a worker (started, ended or "
			        "lost): not sent to %s",
			        f[i].w->id);
			axq_att_retire(q, f[i].batch[j]);
		}
		f[i].n = kept;
	}
	if (rows != one)
		free(rows);
	return 1;
}

void
axq_doubt_unlink(qatt *a)
{
	qworker *w = a->holder;
	if (w == NULL)
		return;
	ax_list_remove(&w->doubt, &a->xn);
	a->holder = NULL;
}

static void
doubt_link(qworker *w, qatt *a)
{
	a->holder = w;
	ax_list_prepend(&w->doubt, &a->xn);
}

static void
dl_remove(ax_queue *q, qworker *w)
{
	if (!w->on_dl)
		return;
	ax_list_remove(&q->doubt_dl, &w->dln);
	w->on_dl = 0;
}

static int
dl_before(const ax_list_node *a, const ax_list_node *b)
{
	return QWORKER(a, dln)->doubt_deadline <
	    QWORKER(b, dln)->doubt_deadline;
}

/* Puts w on the doubt deadline list, sorted by doubt_deadline. */
static void
dl_insert(ax_queue *q, qworker *w)
{
	ax_list_insert_sorted(&q->doubt_dl, &w->dln, dl_before);
	w->on_dl = 1;
}

/*
 * Settles one in-doubt attempt of w, whose session just reported its
 * running set (is_listed: a is in it) or registered before the doubts
 * were loaded. same: the session is the process that was sent a (same
 * pid and host as recorded). The worker lists what it still runs, so:
 *  - listed: it runs there; adopted as RUNNING, never sent again;
 *  - DISPATCHED, not listed, same process: never received, or finished
 *    with its result still in the worker's outbox: sent again to w
 *    only (bound), where a copy it already ran is acknowledged and not
 *    run again, and its result arrives in its next report;
 *  - RUNNING, not listed, same process: it ended and the result comes in
 *    a report, or it is lost: adopted with verify, and UNKNOWN at a
 *    heartbeat that does not list it once a report had time to come;
 *  - not listed by a new process: its previous life may have started it
 *    and is gone (fenced): UNKNOWN, retried per policy under a new
 *    run_id.
 */
static void
doubt_resolve(ax_queue *q, qworker *w, qatt *a, int is_listed, int same)
{
	if (is_listed || (a->doubt == 2 && same)) {
		axq_doubt_unlink(a);
		axq_att_link_worker(q, a, w);
		ax_list_remove(&q->unacked, &a->un);
		a->state = ST_RUNNING;
		/* its result may be in a report the worker re-sends only
		 * after its retry interval (twice: one timed out) */
		if (!is_listed)
			a->verify = ax_clock_mono_us() +
			    2 * q->ack_timeout_us + q->hb_us;
		return;
	}
	if (!same || a->doubt == 2) {
		axq_att_lost(q, a, w->id, "WORKER_RESTARTED");
		return;
	}
	if (a->kill) {
		axq_att_cancel_now(q, a);
		return;
	}
	a->bound = w;
	if (a->ar != NULL) {
		axq_doubt_unlink(a);
		axq_att_enqueue(q, a);
	} /* else it waits on w->doubt for its rendered attempt */
}

/* w registered (r): settles every attempt it may hold since a start. */
void
axq_doubt_settle(ax_queue *q, qworker *w, const Ax__Register *r)
{
	qatt *a;
	int   same = w->doubt_pid == 0 ||
	    (w->doubt_pid == r->pid &&
	     (w->doubt_host == NULL || *w->doubt_host == '\0' ||
	      (r->hostname != NULL &&
	       strcmp(w->doubt_host, r->hostname) == 0)));
	size_t n = 0;

	if (!w->on_dl)
		return;
	dl_remove(q, w);
	for (size_t i = 0; i < r->n_running_run_ids; i++) {
		a = ax_hmap_get(&q->runs, r->running_run_ids[i]);
		if (a != NULL && a->state == ST_DOUBT && a->holder == w &&
		    a->bound == NULL) {
			doubt_resolve(q, w, a, 1, same);
			n++;
		}
	}
	for (ax_list_node *x = w->doubt.head, *next; x != NULL; x = next) {
		next = x->next;
		a    = QATT(x, xn);
		if (a->bound == NULL) {
			doubt_resolve(q, w, a, 0, same);
			n++;
		}
	}
	ax_logf(AX_LOG_INFO, AX_A_QUEUE, NULL, NULL,
	        "worker %s is back (%s process): %zu attempts it may hold "
	        "reconciled against its running set",
	        w->id, same ? "same" : "a new", n);
}

/* w did not come back within its lease + grace after a start: it has
 * fenced itself, its attempts are lost. */
void
axq_doubt_lapse(ax_queue *q, qworker *w)
{
	char json[300];

	dl_remove(q, w);
	ax_logf(AX_LOG_WARN, AX_A_QUEUE, "TIMEOUT_HEARTBEAT", NULL,
	        "worker %s did not come back within its lease: the attempts "
	        "it may hold go UNKNOWN",
	        w->id);
	for (ax_list_node *x = w->doubt.head, *next; x != NULL; x = next) {
		next = x->next;
		axq_att_lost(q, QATT(x, xn), w->id, "TIMEOUT_HEARTBEAT");
	}
	STAT(q, st_lease_losses, 1);
	snprintf(json, sizeof(json), "{\"worker\":\"%.200s\"}", w->id);
	axq_emit(q, "worker.lost", "TIMEOUT_HEARTBEAT", json);
}

/*
 * Loads what the previous axd may have left running (DISPATCHED and
 * RUNNING attempts with their worker) before anything is dispatched.
 * Each attempt waits for its worker (axq_doubt_settle) or for the worker's
 * lease to lapse, measured on the database clock from the lease the
 * previous axd last wrote, plus one heartbeat interval (it writes a
 * worker at most that often) plus queue.lease_grace (axq_doubt_lapse). A
 * failure is retried a second later; dispatching waits.
 */
void
axq_reconcile_load(ax_queue *q)
{
	ax_store_in_doubt *v;
	size_t             n, held = 0;
	int64_t            now = ax_clock_mono_us();

	if (ax_store_load_in_doubt(q->store, &v, &n) != AX_OK) {
		ax_logf(AX_LOG_WARN, AX_A_QUEUE, "DB_ERROR", NULL,
		        "attempts in flight not read (nothing is dispatched "
		        "until they are): %s",
		        ax_err_detail());
		q->reconcile_at = now + DB_RETRY_US;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		qatt    *a = ax_hmap_get(&q->runs, v[i].run_id);
		qworker *w = axq_worker_get(q, v[i].worker_id);
		if (w == NULL)
			break;
		if (a == NULL) {
			if ((a = calloc(1, sizeof(*a))) == NULL ||
			    (a->run_id = strdup(v[i].run_id)) == NULL ||
			    ax_hmap_put(&q->runs, a->run_id, a, NULL) !=
			        AX_OK) {
				if (a != NULL)
					free(a->run_id);
				free(a);
				break;
			}
			a->slots = 1;
			a->seq   = ++q->seq;
		} else if (a->state == ST_QUEUED) {
			axq_heap_remove(a);
			STAT(q, st_depth[a->ch], -1);
		} else if (a->state == ST_HELD) {
			ax_list_remove(&q->held, &a->heln);
		} else {
			continue; /* already with a worker */
		}
		a->state = ST_DOUBT;
		a->doubt = strcmp(v[i].state, "RUNNING") == 0 ? 2 : 1;
		doubt_link(w, a);
		held++;
		if (w->alive) { /* registered before we could read this */
			doubt_resolve(q, w, a, 0,
			              v[i].worker_pid == 0 ||
			                  v[i].worker_pid == w->pid);
			continue;
		}
		if (w->on_dl)
			continue;
		int64_t left      = !v[i].has_lease ? q->lease_us
		         : v[i].lease_left_us > 0   ? v[i].lease_left_us
		                                    : 0;
		w->doubt_deadline = now + left + q->hb_us + q->lease_grace_us;
		w->doubt_pid      = v[i].worker_pid;
		free(w->doubt_host);
		w->doubt_host = strdup(v[i].hostname);
		dl_insert(q, w);
	}
	free(v);
	q->reconciled   = 1;
	q->fill_blocked = 1; /* parked Pulls may be served now */
	ax_logf(AX_LOG_INFO, AX_A_QUEUE, NULL, NULL,
	        "%zu attempts may be running on workers: they wait for their "
	        "worker's running set or lease",
	        held);
}
