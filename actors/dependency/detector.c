/*
 * detector.c - the dependency detector actor: its definition table
 * (dd_def: one handler per command kind, the tick), its start (which
 * rebuilds runs from PostgreSQL on the first tick) and stop, and the
 * batch.
 *
 * The batch: the handlers of a batch collect its run changes, reason
 * updates, supersedes and events (axdd_chg, axdd_emit, ...), and flush()
 * (batch_end) writes them in ONE transaction at its end; the events,
 * the cancels of superseded instances and RunCompleted (to itself) leave
 * only after that commit. A failed write is logged; a restart rebuilds
 * the runs from what PostgreSQL holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "dependency_internal.h"
#include "store_deps.h"

/* --- the batch ----------------------------------------------------------
 */

void
axdd_oom(const char *what)
{
	ax_logf(AX_LOG_ERROR, COMP, NULL, NULL, "out of memory (%s)", what);
}

void
axdd_chg(dd *d, int64_t run, const char *state, const char *reason)
{
	if (AX_GROW(d->chg, d->capchg, d->nchg + 1) != AX_OK) {
		axdd_oom("run change");
		return;
	}
	d->chg[d->nchg++] = (ax_store_run_change) { .run_id = run,
		                                    .state  = state,
		                                    .reason = reason };
}

/* Queues an event of run r (task NULL: a run event). */
void
axdd_emit(dd *d, const drun *r, const char *type, const char *reason,
          const char *task, int32_t shard, int64_t iid, const char *payload)
{
	pev *p = calloc(1, sizeof(*p));
	if (p == NULL || AX_GROW(d->evs, d->capev, d->nev + 1) != AX_OK) {
		free(p);
		axdd_oom("event");
		return;
	}
	snprintf(p->dag, sizeof(p->dag), "%s", r->v->e->dag->name);
	snprintf(p->task, sizeof(p->task), "%s", task ? task : "");
	snprintf(p->payload, sizeof(p->payload), "%s",
	         payload ? payload : "{}");
	snprintf(p->trace, sizeof(p->trace), "%s", r->trace);
	p->ref                 = (Ax__InstanceRef) AX__INSTANCE_REF__INIT;
	p->ref.dag             = p->dag;
	p->ref.dag_version_id  = r->v->e->version_id;
	p->ref.dag_run_id      = r->id;
	p->ref.task            = p->task;
	p->ref.instance_id     = iid;
	p->ref.logical_time_us = r->logical_us;
	p->ref.shard_index     = shard;
	ax_flow_event_init(&p->e, COMP, type, reason, &p->ref, NULL, 0,
	                   p->trace[0] ? p->trace : NULL, p->payload);
	d->evs[d->nev++] = p;
}

void
axdd_wait_reason(dd *d, int64_t run, const char *task)
{
	char *name = strdup(task);
	if (name == NULL ||
	    AX_GROW(d->wr_run, d->capwr, d->nwr + 1) != AX_OK ||
	    AX_GROW(d->wr_task, d->capwr2, d->nwr + 1) != AX_OK) {
		free(name);
		axdd_oom("wait reason");
		return;
	}
	d->wr_run[d->nwr]  = run;
	d->wr_task[d->nwr] = name;
	d->nwr++;
}

void
axdd_completed(dd *d, const drun *r, int ok)
{
	if (AX_GROW(d->dn, d->capdn, d->ndn + 1) == AX_OK) {
		done *x = &d->dn[d->ndn++];
		snprintf(x->dag, sizeof(x->dag), "%s", r->v->e->dag->name);
		x->run        = r->id;
		x->logical_us = r->logical_us;
		x->ok         = ok;
	}
}

void
axdd_supersede_rows(dd *d, int64_t run)
{
	if (AX_GROW(d->sup, d->capsup, d->nsup + 1) == AX_OK)
		d->sup[d->nsup++] = run;
}

/* --- sending ------------------------------------------------------------
 */

void
axdd_send_cmd(dd *d, const char *dest, Ax__Command *c, const char *trace)
{
	c->issued_at_us = ax_clock_utc_us();
	if (trace != NULL && trace[0] != '\0')
		c->trace_id = (char *) trace;
	if (ax_pipeline_send(d->self, dest, c) != AX_OK)
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL, "send to %s: %s", dest,
		        ax_err_detail());
}

/* --- the batch's transaction --------------------------------------------
 */

static ax_err
batch_fn(ax_store *s, void *arg)
{
	dd                 *d = arg;
	ax_store_event_row *rows;
	ax_err              rv;

	PQclear(d->live);
	d->live = NULL;
	if ((rv = ax_store_deps_runs_update(s, d->chg, d->nchg)) != AX_OK ||
	    (rv = ax_store_deps_wait_reason(
	         s, d->wr_run, (const char *const *) d->wr_task, d->nwr,
	         "WAIT_DEPENDENCY", NULL)) != AX_OK)
		return rv;
	if (d->nsup > 0 &&
	    (rv = ax_store_deps_supersede(s, d->sup, d->nsup, &d->live)) !=
	        AX_OK)
		return rv;
	if ((rows = calloc(d->nev + 1, sizeof(*rows))) == NULL)
		return ax_err_set(AX_ENOMEM, "%s: out of memory", COMP);
	for (size_t i = 0; i < d->nev; i++)
		ax_flow_event_row(&d->evs[i]->e.ev, &rows[i]);
	rv = ax_store_insert_events(s, rows, d->nev, NULL, NULL);
	free(rows);
	return rv;
}

static void
send_cancels(dd *d)
{
	for (int row = 0; d->live != NULL && row < PQntuples(d->live); row++) {
		Ax__Command        cmd = AX__COMMAND__INIT;
		Ax__CancelInstance ci  = AX__CANCEL_INSTANCE__INIT;
		Ax__InstanceRef    ref = AX__INSTANCE_REF__INIT;
		ref.instance_id        = ax_store_cell_i64(d->live, row, 0);
		ref.dag_run_id         = ax_store_cell_i64(d->live, row, 1);
		ref.task               = PQgetvalue(d->live, row, 2);
		ref.shard_index = (int32_t) ax_store_cell_i64(d->live, row, 3);
		ref.shard_total = (int32_t) ax_store_cell_i64(d->live, row, 4);
		ci.instance     = &ref;
		ci.reason       = "SUPERSEDED";
		cmd.body_case   = AX__COMMAND__BODY_CANCEL_INSTANCE;
		cmd.cancel_instance = &ci;
		axdd_send_cmd(d, AX_A_INSTANCE_GENERATOR, &cmd, NULL);
	}
	PQclear(d->live);
	d->live = NULL;
}

/* Frees the batch's wait-reason list. */
static void
wr_clear(dd *d)
{
	for (size_t i = 0; i < d->nwr; i++)
		free(d->wr_task[i]);
	d->nwr = 0;
}

/* Writes what the handler collected, then sends what depends on it. */
static void
flush(dd *d)
{
	ax_err rv = AX_OK;

	if (d->nchg + d->nwr + d->nsup + d->nev > 0)
		rv = ax_store_tx_relaxed(d->store, batch_fn, d);
	if (rv != AX_OK)
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
		        "%zu run change(s) not written (a restart rebuilds "
		        "them): %s",
		        d->nchg, ax_err_detail());
	for (size_t i = 0; i < d->nev; i++) {
		(void) ax_flow_event_send(d->self, &d->evs[i]->e, rv == AX_OK);
		free(d->evs[i]);
	}
	if (rv == AX_OK)
		send_cancels(d);
	for (size_t i = 0; i < d->ndn; i++) {
		Ax__Command      cmd = AX__COMMAND__INIT;
		Ax__RunCompleted rc  = AX__RUN_COMPLETED__INIT;
		rc.dag               = d->dn[i].dag;
		rc.dag_run_id        = d->dn[i].run;
		rc.logical_time_us   = d->dn[i].logical_us;
		rc.state             = d->dn[i].ok ? "SUCCESS" : "FAILED";
		rc.ended_at_us       = ax_clock_utc_us();
		cmd.body_case        = AX__COMMAND__BODY_RUN_COMPLETED;
		cmd.run_completed    = &rc;
		axdd_send_cmd(d, AX_A_DEPENDENCY_DETECTOR, &cmd, NULL);
	}
	PQclear(d->live);
	d->live = NULL;
	wr_clear(d);
	d->nchg = d->nsup = d->nev = d->ndn = 0;
}

/* --- actor --------------------------------------------------------------
 */

/* Before each batch: the releases spilled by the last one go first, and
 * the rebuild when it has not succeeded yet. */
static void
dd_batch_begin(ax_actor *self, void *state, size_t n)
{
	dd *d = state;
	(void) n;

	axdd_spill_drain(d); /* older releases go first */
	if (!d->started && axdd_startup(d) != AX_OK) {
		/* PostgreSQL unreachable: the tick tries again */
		d->started = 0;
		ax_actor_set_deadline(self,
		                      ax_clock_mono_us() + AX_USEC_PER_SEC);
	}
}

/* The handlers of the detector's commands: each collects what its batch
 * writes (flushed in dd_batch_end). */
static ax_err
on_due(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	axdd_on_due(state, m->cmd);
	return AX_OK;
}

static ax_err
on_succeeded(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	axdd_on_succeeded(state, m->cmd->instance_succeeded);
	return AX_OK;
}

static ax_err
on_finished(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	axdd_on_finished(state, m->cmd->instance_finished);
	return AX_OK;
}

static ax_err
on_run_completed(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	axdd_on_run_completed(state, m->cmd->run_completed);
	return AX_OK;
}

static ax_err
on_control(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	axdd_on_control(state, m->cmd->control);
	return AX_OK;
}

static ax_err
on_timer(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	axdd_on_timer(state, m->cmd->timer_fired);
	return AX_OK;
}

static ax_err
dd_batch_end(ax_actor *self, void *state)
{
	(void) self;
	flush(state);
	return AX_OK;
}

static ax_err
dd_tick(ax_actor *self, void *state, int64_t now_mono_us)
{
	dd *d = state;
	(void) self;

	axdd_spill_drain(d);
	if (d->started)
		return AX_OK;
	if (axdd_startup(d) != AX_OK) {
		/* PostgreSQL unreachable: try again in a second */
		d->started = 0;
		ax_actor_set_deadline(d->self, now_mono_us + AX_USEC_PER_SEC);
	}
	flush(d);
	return AX_OK;
}

static void
run_free_any(void *p)
{
	axdd_run_free_mem(p);
}

/* Frees what the state holds (the pipeline frees the state); safe on a
 * state init left half-filled. */
static void
dd_fini(void *state)
{
	dd *d = state;
	ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
	        "stopped: %llu runs planned, %llu succeeded, %llu failed, "
	        "%llu held, %llu discarded, %llu superseded, %llu rebuilt, "
	        "%llu instances released, %zu runs in memory",
	        (unsigned long long) d->stats->planned,
	        (unsigned long long) d->stats->succeeded,
	        (unsigned long long) d->stats->failed,
	        (unsigned long long) d->stats->held,
	        (unsigned long long) d->stats->discarded,
	        (unsigned long long) d->stats->superseded,
	        (unsigned long long) d->stats->rebuilt,
	        (unsigned long long) d->stats->released,
	        d->runs ? ax_strmap_count(d->runs) : 0);
	if (d->spill_head < d->nspill)
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "%zu instance releases not sent at stop: the next "
		        "start finds them PENDING and releases them",
		        d->nspill - d->spill_head);
	for (size_t i = d->spill_head; i < d->nspill; i++)
		free(d->spill[i].data);
	free(d->spill);
	ax_strmap_free(d->runs, run_free_any);
	ax_strmap_free(d->dqs, axdd_dq_free);
	ax_strmap_free(d->waiters, axdd_rvec_free);
	ax_strmap_free(d->vers, axdd_dver_free);
	ax_strmap_free(d->rebuilt, NULL);
	ax_tz_cache_free(d->tzc);
	for (size_t i = 0; i < d->nev; i++)
		free(d->evs[i]);
	wr_clear(d);
	PQclear(d->live);
	free(d->evs);
	free(d->chg);
	free(d->wr_run);
	free(d->wr_task);
	free(d->sup);
	free(d->dn);
	ax_store_close(d->store);
}

static ax_err
dd_init(void *state, const ax_pipeline_ctx *ctx, void *arg)
{
	dd                           *d     = state;
	ax_dependency_detector_stats *stats = arg;
	ax_err                        rv;

	d->ctx   = ctx;
	d->stats = stats ? stats : &d->own;
	memset(d->stats, 0, sizeof(*d->stats));
	if ((rv = ax_strmap_new(&d->vers)) != AX_OK ||
	    (rv = ax_strmap_new(&d->runs)) != AX_OK ||
	    (rv = ax_strmap_new(&d->dqs)) != AX_OK ||
	    (rv = ax_strmap_new(&d->waiters)) != AX_OK ||
	    (rv = ax_store_open(ctx->dsn, &d->store)) != AX_OK)
		return rv;
	return AX_OK;
}

static ax_err
dd_added(ax_actor *self, void *state)
{
	dd *d   = state;
	d->self = self;
	return AX_OK;
}

/*
 * Non-blocking sends: RunCompleted goes to itself; InstanceReady is a
 * forward edge but shares the outbox. The rebuild runs as the first tick
 * (or before the first batch).
 */
static const ax_pipeline_def dd_def = {
	.name          = AX_A_DEPENDENCY_DETECTOR,
	.state_size    = sizeof(dd),
	.init          = dd_init,
	.added         = dd_added,
	.fini          = dd_fini,
	.tick          = dd_tick,
	.tick_at_start = 1,
	.nonblock      = 1,
	.batch_begin   = dd_batch_begin,
	.batch_end     = dd_batch_end,
	.on = {
		[AX__COMMAND__BODY_DUE]                = on_due,
		[AX__COMMAND__BODY_INSTANCE_SUCCEEDED] = on_succeeded,
		[AX__COMMAND__BODY_INSTANCE_FINISHED]  = on_finished,
		[AX__COMMAND__BODY_RUN_COMPLETED]      = on_run_completed,
		[AX__COMMAND__BODY_CONTROL]            = on_control,
		[AX__COMMAND__BODY_TIMER_FIRED]        = on_timer,
	},
};

ax_err
ax_dependency_detector_add_ex(ax_actor_system *sys, const ax_pipeline_ctx *ctx,
                              ax_dependency_detector_stats *stats)
{
	return ax_pipeline_add(sys, ctx, &dd_def, stats, NULL);
}

ax_err
ax_dependency_detector_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx)
{
	return ax_dependency_detector_add_ex(sys, ctx, NULL);
}
