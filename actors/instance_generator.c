/*
 * instance_generator.c - plans -> PENDING rows, admissions -> READY +
 * attempt rows, one transaction per batch, then each new attempt rendered
 * and passed through the pre hooks as function calls and sent to the
 * queue (see instance_generator.h).
 *
 * Failure handling: when PostgreSQL is unreachable (the store already
 * retried and reconnected for its timeout) the commands of the batch are
 * kept, in order, and the batch is run again from a tick one second
 * later; nothing is acknowledged downstream before its commit, and the
 * replay is harmless because every write is idempotent.
 *
 * Workload: batches of up to 1000 admissions; a batch costs about
 * five round trips (instance lookup, lock, move with attempt insert,
 * events, commit; an insert for rows a plan has not written yet) plus one
 * dag_runs read for runs the renderer has not cached, whatever its size;
 * then a few microseconds of rendering per attempt.
 */
#include "instance_generator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dag_registry.h"
#include "flow_util.h"
#include "group_spec.h"
#include "hooks.h"
#include "renderer.h"
#include "store.h"
#include "store_attempts.h"
#include "store_events.h"
#include "store_instances.h"
#include "store_runs.h"

#define COMP           AX_A_INSTANCE_GENERATOR
#define IG_RETRY_US    AX_USEC_PER_SEC
#define IG_PENDING_MAX 100000 /* commands kept while the DB is down */

typedef struct ig_state {
	const ax_pipeline_ctx *ctx;
	ax_store              *store;
	ax_flow_pending        pending; /* failed commands, kept in order */
	ax_renderer           *rn;      /* renders the new attempts */
	ax_hooks              *hk;      /* pre hooks: paused, canceled */
	uint64_t               created, replayed, skipped, dropped, planned;
	uint64_t               passed, held, hook_dropped; /* pre hooks */
} ig_state;

/* One admission of the batch being written. */
typedef struct ig_adm {
	Ax__Admission     *adm;
	const char        *trace;
	ax_dag_entry      *entry; /* ref, released after the batch */
	const ax_task     *task;
	int                ok;    /* resolved: dag and run known */
	int64_t            id_in; /* the instance id it came with; 0: none */
	ax_store_ti_row    ti;
	ax_store_admit_row ad;
	ax_flow_event      ev;
	char               payload[128];
} ig_adm;

typedef struct ig_batch {
	ig_adm             *a;
	size_t              n;
	ax_store_admit_row *ad;    /* the resolved admissions */
	size_t             *ad_of; /* ad[k] is the admission a[ad_of[k]] */
	size_t              nad;
	size_t             *miss;  /* indexes into ad not found by key */
	ax_store_ti_row    *mrows; /* their rows, for the insert */
	ax_store_admit_row *mad;   /* and their admission after it */
	ax_store_event_row *evrows;
	int64_t            *runs; /* dag_run_id per admission, for renders */
} ig_batch;

/* ---------------------------------------------------------------------- */

static ax_err
ensure_store(ig_state *st)
{
	if (st->store != NULL)
		return AX_OK;
	return ax_store_open(st->ctx->dsn, &st->store);
}

/* The registry entry of the instance's DAG version (loaded on demand). */
static ax_dag_entry *
entry_of(ig_state *st, const Ax__InstanceRef *ref)
{
	ax_dag_registry *reg = st->ctx->registry;
	ax_dag_entry    *e   = NULL;

	if (reg == NULL)
		return NULL;
	if (ref->dag_version_id != 0) {
		e = ax_dag_registry_version(reg, ref->dag_version_id);
		if (e == NULL && ensure_store(st) == AX_OK &&
		    ax_dag_registry_load_version(reg, st->store,
		                                 ref->dag_version_id) == AX_OK)
			e = ax_dag_registry_version(reg, ref->dag_version_id);
	}
	if (e == NULL)
		e = ax_dag_registry_current(reg, ref->dag);
	return e;
}

/* Fills the instance row of an admission from the message and the DAG. */
static void
resolve(ig_state *st, ig_adm *x)
{
	const Ax__InstanceRef   *ref = x->adm->instance;
	const Ax__InstanceReady *rd  = x->adm->ready;

	x->entry = entry_of(st, ref);
	if (x->entry != NULL)
		x->task = ax_dag_entry_task(x->entry, ref->task);
	if (x->entry == NULL || x->task == NULL || ref->dag_run_id == 0) {
		ax_logf(AX_LOG_ERROR, COMP, "UNKNOWN_DAG", NULL,
		        "admission of %s.%s (version %lld, run %lld) dropped: "
		        "%s",
		        ref->dag, ref->task, (long long) ref->dag_version_id,
		        (long long) ref->dag_run_id,
		        ref->dag_run_id == 0
		            ? "no dag_run id"
		            : "DAG version or task not loaded");
		return;
	}
	x->ok = 1;
	x->ti = (ax_store_ti_row) {
		.dag_run_id      = ref->dag_run_id,
		.dag_id          = x->entry->dag_id,
		.task            = ref->task,
		.logical_time_us = ref->logical_time_us,
		.shard           = ref->shard_index,
		.shard_total     = ref->shard_total > 0 ? ref->shard_total : 1,
		.priority = rd != NULL ? rd->priority : x->task->eff.priority,
		.channel = ax_flow_db_channel(rd != NULL ? rd->channel : NULL),
		.worker_group = rd != NULL && rd->worker_group[0]
		    ? rd->worker_group
		    : x->task->eff.worker_group,
		.pool         = rd != NULL && rd->pool[0] ? rd->pool : NULL,
		.max_tries    = 1 +
		    (x->task->eff.retries.count > 0
		         ? x->task->eff.retries.count
		         : 0),
		.state  = AX_TI_PENDING,
		.reason = "WAIT_RESOURCE",
	};
	x->id_in              = ref->instance_id;
	x->ad.instance_id     = ref->instance_id;
	x->ad.dag_id          = x->ti.dag_id;
	x->ad.task            = x->ti.task;
	x->ad.logical_time_us = x->ti.logical_time_us;
	x->ad.shard           = x->ti.shard;
	x->ad.due_at_us       = rd != NULL && rd->due_at_us != 0
	          ? rd->due_at_us
	          : x->adm->decided_at_us;
	x->ad.admitted_at_us  = x->adm->decided_at_us != 0
	     ? x->adm->decided_at_us
	     : ax_clock_utc_us();
	/* a task of several groups: its row names the one it was admitted
	 * to (what the queue's rebuild reads after a restart) */
	x->ad.worker_group = rd != NULL && rd->worker_group[0] &&
	        !ax_group_spec_multi(rd->worker_group) &&
	        ax_group_spec_multi(x->task->eff.worker_group)
	    ? rd->worker_group
	    : NULL;
}

/* The admissions that the lock did not find by key, their plan still in
 * flight or lost: their rows are inserted, guarded like a plan's, and
 * admitted. */
static ax_err
admit_missing(ax_store *s, ig_batch *b)
{
	size_t nmiss = 0;
	ax_err rv;

	for (size_t k = 0; k < b->nad; k++)
		if (b->ad[k].action == AX_ADMIT_MISSING &&
		    b->a[b->ad_of[k]].id_in == 0) {
			b->mrows[nmiss]  = b->a[b->ad_of[k]].ti;
			b->miss[nmiss++] = k;
		}
	if (nmiss == 0)
		return AX_OK;
	if ((rv = ax_store_insert_instances(s, b->mrows, nmiss, NULL)) !=
	        AX_OK ||
	    (rv = ax_store_runs_guard(s, b->runs, b->n, NULL)) != AX_OK)
		return rv;
	for (size_t m = 0; m < nmiss; m++) {
		b->mad[m]             = b->ad[b->miss[m]];
		b->mad[m].instance_id = b->mrows[m].instance_id;
	}
	if ((rv = ax_store_admit(s, b->mad, nmiss)) != AX_OK)
		return rv;
	for (size_t m = 0; m < nmiss; m++)
		b->ad[b->miss[m]] = b->mad[m];
	return AX_OK;
}

/*
 * The admission's transaction: two round trips when the plan stored the
 * instances (the guard and the lock with the BEGIN; the attempts, the
 * moves and the events with the COMMIT).
 */
static ax_err
admit_tx(ax_store *s, void *arg)
{
	ig_batch *b   = arg;
	size_t    nev = 0;
	ax_err    rv;

	/* a run superseded or canceled since it released these: their
	 * instances are canceled first, and ax_store_admit skips them */
	if ((rv = ax_store_runs_guard(s, b->runs, b->n, NULL)) != AX_OK)
		return rv;
	b->nad = 0;
	for (size_t i = 0; i < b->n; i++)
		if (b->a[i].ok) { /* as it came: this may be a retry */
			b->ad_of[b->nad]            = i;
			b->ad[b->nad]               = b->a[i].ad;
			b->ad[b->nad++].instance_id = b->a[i].id_in;
		}
	if ((rv = ax_store_admit(s, b->ad, b->nad)) != AX_OK ||
	    (rv = admit_missing(s, b)) != AX_OK)
		return rv;
	for (size_t i = 0, k = 0; i < b->n; i++) {
		ig_adm *x = &b->a[i];
		if (!x->ok)
			continue;
		x->ad = b->ad[k++];
		if (x->ad.action != AX_ADMIT_NEW)
			continue;
		x->adm->instance->instance_id = x->ad.instance_id;
		snprintf(x->payload, sizeof(x->payload),
		         "{\"from\":\"%s\",\"to\":\"READY\","
		         "\"decided_at_us\":%lld}",
		         ax_state_name(x->ad.state_before),
		         (long long) x->adm->decided_at_us);
		ax_flow_event_init(&x->ev, COMP, "instance.admitted", NULL,
		                   x->adm->instance, x->ad.run_id,
		                   x->ad.attempt, x->trace, x->payload);
		ax_flow_event_row(&x->ev.ev, &b->evrows[nev++]);
	}
	return ax_store_insert_events(s, b->evrows, nev, NULL, NULL);
}

static void
send_release(ax_actor *self, ig_adm *x)
{
	Ax__Command              cmd = AX__COMMAND__INIT;
	Ax__SlotReleased         sr  = AX__SLOT_RELEASED__INIT;
	const Ax__InstanceReady *rd  = x->adm->ready;

	sr.instance       = x->adm->instance;
	sr.run_id         = x->ad.run_id;
	sr.attempt        = x->ad.attempt;
	sr.worker_group   = rd != NULL ? rd->worker_group : "";
	sr.pool           = rd != NULL ? rd->pool : "";
	sr.slots          = rd != NULL ? rd->slots : 1;
	sr.state          = (char *) ax_state_name(x->ad.state_before);
	cmd.body_case     = AX__COMMAND__BODY_SLOT_RELEASED;
	cmd.slot_released = &sr;
	cmd.issued_at_us  = ax_clock_utc_us();
	if (x->trace != NULL)
		cmd.trace_id = (char *) x->trace;
	(void) ax_pipeline_send(self, AX_A_RESOURCE_DETECTOR, &cmd);
}

/* The attempt cannot be rendered: it fails with RENDER_ERROR. The log
 * line and the event name the renderer, as the component that failed. */
static void
render_failed(ax_actor *self, const Ax__AttemptCreated *ac, const char *trace,
              const char *msg)
{
	Ax__Command       c   = AX__COMMAND__INIT;
	Ax__AttemptResult res = AX__ATTEMPT_RESULT__INIT;
	ax_flow_event     e;
	char              payload[700], esc[600];

	esc[0] = '\0';
	ax_json_escape(esc, 0, sizeof(esc), msg);
	snprintf(payload, sizeof(payload), "{\"error\":\"%s\"}", esc);
	ax_logf(AX_LOG_ERROR, "renderer", "RENDER_ERROR",
	        &(ax_log_ids) { .dag      = ac->instance->dag,
	                        .run      = ac->instance->dag_run_id,
	                        .instance = ac->instance->instance_id,
	                        .run_id   = ac->run_id,
	                        .attempt  = ac->attempt },
	        "%s", msg);
	res.instance    = ac->instance;
	res.run_id      = ac->run_id;
	res.attempt     = ac->attempt;
	res.status      = AX__ATTEMPT_STATUS__ATTEMPT_FAILED;
	res.ended_at_us = ax_clock_utc_us();
	res.reason      = "RENDER_ERROR";
	res.error       = (char *) msg;
	c.body_case     = AX__COMMAND__BODY_RESULT;
	c.result        = &res;
	if (trace != NULL)
		c.trace_id = (char *) trace;
	c.issued_at_us = res.ended_at_us;
	(void) ax_pipeline_send(self, AX_A_RESULT_HANDLER, &c);
	ax_flow_event_init(&e, "renderer", "attempt.render_failed",
	                   "RENDER_ERROR", ac->instance, ac->run_id,
	                   ac->attempt, trace, payload);
	(void) ax_flow_event_send(self, &e, 0);
}

/* Pre hook verdict HOLD: back to the resource detector. */
static void
send_held(ax_actor *self, const Ax__AttemptRendered *r, const char *trace,
          const char *reason)
{
	Ax__Command       c   = AX__COMMAND__INIT;
	Ax__AttemptHeld   h   = AX__ATTEMPT_HELD__INIT;
	Ax__InstanceReady rdy = AX__INSTANCE_READY__INIT;

	rdy.instance     = r->instance;
	rdy.priority     = r->priority;
	rdy.channel      = r->channel;
	rdy.worker_group = r->worker_group;
	rdy.pool         = r->pool;
	rdy.due_at_us    = r->due_at_us;
	rdy.slots        = r->slots;
	h.ready          = &rdy;
	h.run_id         = r->run_id;
	h.attempt        = r->attempt;
	h.reason         = (char *) reason;
	c.body_case      = AX__COMMAND__BODY_ATTEMPT_HELD;
	c.attempt_held   = &h;
	if (trace != NULL)
		c.trace_id = (char *) trace;
	c.issued_at_us = ax_clock_utc_us();
	(void) ax_pipeline_send(self, AX_A_RESOURCE_DETECTOR, &c);
}

/* Pre hook verdict DROP: never dispatched, reported CANCELED. */
static void
send_dropped(ax_actor *self, const Ax__AttemptRendered *r, const char *trace,
             const char *reason)
{
	Ax__Command       c   = AX__COMMAND__INIT;
	Ax__AttemptResult res = AX__ATTEMPT_RESULT__INIT;

	res.instance    = r->instance;
	res.run_id      = r->run_id;
	res.attempt     = r->attempt;
	res.status      = AX__ATTEMPT_STATUS__ATTEMPT_CANCELED;
	res.ended_at_us = ax_clock_utc_us();
	res.reason      = (char *) reason;
	res.error       = "canceled before dispatch";
	c.body_case     = AX__COMMAND__BODY_RESULT;
	c.result        = &res;
	if (trace != NULL)
		c.trace_id = (char *) trace;
	c.issued_at_us = res.ended_at_us;
	(void) ax_pipeline_send(self, AX_A_RESULT_HANDLER, &c);
}

/* Runs the pre hooks on r and sends it where their verdict says. The
 * events of a hold or drop name pre_hook, the component that decided. */
static void
pre_hooks(ax_actor *self, ig_state *st, const Ax__AttemptRendered *r,
          const char *trace)
{
	const char     *reason, *by;
	ax_hook_verdict v = ax_hooks_pre(st->hk, r, &reason, &by);

	if (v == AX_HOOK_PASS) {
		Ax__Command c      = AX__COMMAND__INIT;
		c.body_case        = AX__COMMAND__BODY_ATTEMPT_RENDERED;
		c.attempt_rendered = (Ax__AttemptRendered *) r;
		if (trace != NULL)
			c.trace_id = (char *) trace;
		c.issued_at_us = ax_clock_utc_us();
		(void) ax_pipeline_send(self, AX_A_QUEUE, &c);
		st->passed++;
		return;
	}
	ax_flow_event e;
	char          pl[128];
	snprintf(pl, sizeof(pl), "{\"hook\":\"%s\"}", by);
	ax_flow_event_init(
	    &e, "pre_hook",
	    v == AX_HOOK_HOLD ? "attempt.held" : "attempt.dropped", reason,
	    r->instance, r->run_id, r->attempt, trace, pl);
	(void) ax_flow_event_send(self, &e, 0);
	if (v == AX_HOOK_HOLD) {
		st->held++;
		send_held(self, r, trace, reason);
	} else {
		st->hook_dropped++;
		send_dropped(self, r, trace, reason);
	}
}

/* The committed attempt of x: rendered, through the pre hooks, out. */
static void
send_attempt(ax_actor *self, ig_state *st, ig_adm *x)
{
	Ax__AttemptCreated  ac = AX__ATTEMPT_CREATED__INIT;
	Ax__AttemptRendered r  = AX__ATTEMPT_RENDERED__INIT;
	ax_render_out      *o  = NULL;
	const char         *err;

	x->adm->instance->instance_id = x->ad.instance_id;
	ac.instance                   = x->adm->instance;
	ac.run_id                     = x->ad.run_id;
	ac.attempt                    = x->ad.attempt;
	ac.ready                      = x->adm->ready;
	ac.admitted_at_us             = x->ad.admitted_at_us;
	if (ax_renderer_render(st->rn, &ac, x->entry->dag, x->task, &r, &o,
	                       &err) == 0)
		pre_hooks(self, st, &r, x->trace);
	else
		render_failed(self, &ac, x->trace, err);
	ax_render_out_free(o);
}

/* After the commit: messages and events for every admission. */
static void
admit_after(ax_actor *self, ig_state *st, ig_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		ig_adm *x = &b->a[i];
		if (!x->ok) {
			st->dropped++;
			send_release(self, x);
			continue;
		}
		switch (x->ad.action) {
		case AX_ADMIT_NEW:
			st->created++;
			(void) ax_flow_event_send(self, &x->ev, 1);
			send_attempt(self, st, x);
			break;
		case AX_ADMIT_REPLAY:
			st->replayed++;
			send_attempt(self, st, x);
			break;
		default: {
			ax_flow_event e;
			char          pl[64];
			snprintf(pl, sizeof(pl), "{\"state\":\"%s\"}",
			         x->ad.action == AX_ADMIT_MISSING
			             ? "MISSING"
			             : ax_state_name(x->ad.state_before));
			ax_flow_event_init(
			    &e, ax_actor_name(self), "admission.skipped", NULL,
			    x->adm->instance, NULL, 0, x->trace, pl);
			(void) ax_flow_event_send(self, &e, 0);
			st->skipped++;
			send_release(self, x);
		}
		}
	}
}

/* Writes a batch of ADMIT admissions. */
static ax_err
do_admissions(ax_actor *self, ig_state *st, Ax__Command **cmds, size_t n)
{
	ig_batch b;
	ax_err   rv = AX_ENOMEM;

	memset(&b, 0, sizeof(b));
	b.a      = calloc(n, sizeof(*b.a));
	b.ad     = calloc(n, sizeof(*b.ad));
	b.ad_of  = calloc(n, sizeof(*b.ad_of));
	b.miss   = calloc(n, sizeof(*b.miss));
	b.mrows  = calloc(n, sizeof(*b.mrows));
	b.mad    = calloc(n, sizeof(*b.mad));
	b.evrows = calloc(n, sizeof(*b.evrows));
	b.runs   = calloc(n, sizeof(*b.runs));
	if (b.a == NULL || b.ad == NULL || b.ad_of == NULL || b.miss == NULL ||
	    b.mrows == NULL || b.mad == NULL || b.evrows == NULL ||
	    b.runs == NULL)
		goto out;
	b.n = n;
	for (size_t i = 0; i < n; i++) {
		ig_adm *x = &b.a[i];
		x->adm    = cmds[i]->admission;
		x->trace  = cmds[i]->trace_id[0] ? cmds[i]->trace_id : NULL;
		resolve(st, x);
	}
	/* the renderer's data intervals first: a failure keeps the batch
	 * before anything is written */
	for (size_t i = 0; i < n; i++)
		b.runs[i] = b.a[i].ok ? b.a[i].ti.dag_run_id : 0;
	if ((rv = ensure_store(st)) == AX_OK &&
	    (rv = ax_renderer_load_runs(st->rn, st->store, b.runs, n)) ==
	        AX_OK)
		/* relaxed: no worker acts on an admission before the
		 * queue's dispatch record, a durable commit after it in
		 * the WAL (ax_store_tx_relaxed); one lost in a crash is
		 * made again from its PENDING row by the rebuild */
		rv = ax_store_tx_relaxed(st->store, admit_tx, &b);
	if (rv == AX_OK)
		admit_after(self, st, &b);
out:
	if (b.a != NULL)
		for (size_t i = 0; i < b.n; i++)
			ax_dag_entry_release(b.a[i].entry);
	free(b.a);
	free(b.ad);
	free(b.ad_of);
	free(b.miss);
	free(b.mrows);
	free(b.mad);
	free(b.evrows);
	free(b.runs);
	if (rv == AX_ENOMEM && ax_err_detail()[0] == '\0')
		ax_err_set(rv, COMP ": out of memory");
	return rv;
}

/* ---------------------------------------------------------------------- */
/* actor */

static int
is_admit(const Ax__Command *c)
{
	return c->body_case == AX__COMMAND__BODY_ADMISSION &&
	    c->admission->instance != NULL &&
	    c->admission->decision == AX__ADMISSION_DECISION__ADMIT;
}

static void
keep_pending(ig_state *st, Ax__Command **cmds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ax_flow_pending_keep(&st->pending, cmds[i]);
}

typedef struct plan_rows {
	ax_store_ti_row *rows;
	size_t           n, inserted;
	const int64_t   *runs; /* the plans' runs */
	size_t           nruns;
} plan_rows;

static ax_err
insert_plan(ax_store *s, void *arg)
{
	plan_rows *pr = arg;
	ax_err     rv = AX_OK;

	pr->inserted = 0;
	/* in slices: a store call takes at most AX_STORE_BATCH_MAX rows */
	for (size_t off = 0; rv == AX_OK && off < pr->n; off += 5000) {
		size_t m = pr->n - off < 5000 ? pr->n - off : 5000, c = 0;
		rv = ax_store_insert_instances(s, pr->rows + off, m, &c);
		pr->inserted += c;
	}
	/* a run superseded or canceled while its plan was on its way: the
	 * rows just written are canceled with it (ax_store_runs_guard) */
	if (rv == AX_OK)
		rv = ax_store_runs_guard(s, pr->runs, pr->nruns, NULL);
	return rv;
}

/* Writes the PENDING rows of the plans among cmds (one transaction). */
static ax_err
do_plans(ax_actor *self, ig_state *st, Ax__Command **cmds, size_t n)
{
	size_t           rows = 0, k = 0, ins = 0;
	ax_store_ti_row *ti;
	int64_t         *runs = NULL;
	ax_err           rv;

	for (size_t i = 0; i < n; i++)
		rows += cmds[i]->run_plan->n_instances;
	if (rows == 0)
		return AX_OK;
	if ((ti = calloc(rows, sizeof(*ti))) == NULL ||
	    (runs = calloc(n, sizeof(*runs))) == NULL) {
		free(ti);
		return ax_err_set(AX_ENOMEM, COMP ": out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		const Ax__RunPlan *p = cmds[i]->run_plan;
		runs[i]              = p->dag_run_id;
		for (size_t j = 0; j < p->n_instances; j++) {
			const Ax__PlannedInstance *x = p->instances[j];
			ax_ti_state                s = AX_TI_PENDING;
			if (x->state[0] != '\0' &&
			    ax_state_parse(x->state, &s) != AX_OK)
				s = AX_TI_PENDING;
			ti[k++] = (ax_store_ti_row) {
				.dag_run_id      = p->dag_run_id,
				.dag_id          = p->dag_id,
				.task            = x->task,
				.logical_time_us = p->logical_time_us,
				.shard           = x->shard_index,
				.shard_total =
				    x->shard_total > 0 ? x->shard_total : 1,
				.priority     = x->priority,
				.channel      = ax_flow_db_channel(x->channel),
				.worker_group = x->worker_group[0]
				    ? x->worker_group
				    : NULL,
				.pool         = x->pool[0] ? x->pool : NULL,
				.max_tries =
				    x->max_tries > 0 ? x->max_tries : 1,
				.state  = s,
				.reason = x->reason[0] ? x->reason : NULL,
			};
		}
	}
	if ((rv = ensure_store(st)) == AX_OK) {
		plan_rows pr = { ti, rows, 0, runs, n };
		/* PENDING rows are re-planned after a restart, so their
		 * commit need not wait for the WAL flush */
		rv  = ax_store_tx_relaxed(st->store, insert_plan, &pr);
		ins = pr.inserted;
	}
	free(ti);
	free(runs);
	if (rv == AX_OK)
		for (size_t i = 0; i < n; i++) {
			const Ax__RunPlan *p   = cmds[i]->run_plan;
			Ax__InstanceRef    ref = AX__INSTANCE_REF__INIT;
			ax_flow_event      e;
			char               pl[96];
			ref.dag             = p->dag;
			ref.dag_version_id  = p->dag_version_id;
			ref.dag_run_id      = p->dag_run_id;
			ref.logical_time_us = p->logical_time_us;
			ref.task            = "";
			snprintf(pl, sizeof(pl), "{\"instances\":%zu}",
			         p->n_instances);
			ax_flow_event_init(&e, ax_actor_name(self),
			                   "run.planned", NULL, &ref, NULL, 0,
			                   cmds[i]->trace_id, pl);
			(void) ax_flow_event_send(self, &e, 0);
		}
	st->planned += ins;
	return rv;
}

/* Runs cmds (owned: Admissions and RunPlans, the kinds ig_def collects);
 * on a database failure keeps them for the tick. */
static ax_err
run_cmds(ax_actor *self, ig_state *st, Ax__Command **cmds, size_t n)
{
	size_t        k = 0, np = 0;
	ax_err        rv;
	Ax__Command **plans = calloc(n + 1, sizeof(*plans));

	if (plans == NULL)
		return ax_err_set(AX_ENOMEM, COMP ": out of memory");
	for (size_t i = 0; i < n; i++) {
		if (is_admit(cmds[i])) {
			cmds[k++] = cmds[i];
			continue;
		}
		if (cmds[i]->body_case == AX__COMMAND__BODY_RUN_PLAN) {
			plans[np++] = cmds[i];
			continue;
		}
		/* an Admission that admits nothing */
		ax__command__free_unpacked(cmds[i], NULL);
	}
	/* Admissions first, and their AttemptCreated sent at once: they lie
	 * on the path from a schedule's due instant to its task's start.
	 * Plans (PENDING rows) are bookkeeping: an admission that comes first
	 * upserts its own row, and a plan never overwrites a row. */
	rv = k > 0 ? do_admissions(self, st, cmds, k) : AX_OK;
	if (rv == AX_OK) {
		(void) ax_actor_flush(self, AX_ACTOR_NONBLOCK);
		rv = do_plans(self, st, plans, np);
		if (ax_flow_db_transient(rv)) {
			ax_logf(AX_LOG_WARN, ax_actor_name(self), NULL, NULL,
			        "%zu plans kept for a retry: %s", np,
			        ax_err_detail());
			keep_pending(st, plans, np);
			np = 0;
			ax_actor_set_deadline(
			    self, ax_clock_mono_us() + IG_RETRY_US);
			rv = AX_OK;
		}
	} else if (ax_flow_db_transient(rv)) {
		ax_logf(AX_LOG_WARN, ax_actor_name(self), NULL, NULL,
		        "%zu plans and %zu admissions kept for a retry: %s",
		        np, k, ax_err_detail());
		keep_pending(st, plans, np);
		keep_pending(st, cmds, k);
		free(plans);
		ax_actor_set_deadline(self, ax_clock_mono_us() + IG_RETRY_US);
		return AX_OK;
	}
	for (size_t i = 0; i < np; i++)
		ax__command__free_unpacked(plans[i], NULL);
	for (size_t i = 0; i < k; i++)
		ax__command__free_unpacked(cmds[i], NULL);
	free(plans);
	return rv;
}

/* Runs cmds in slices of 1000, so one call stays one batch-sized
 * transaction; once a slice is kept for a retry, the rest queue behind. */
static ax_err
run_sliced(ax_actor *self, void *arg, Ax__Command **cmds, size_t n)
{
	ig_state *st = arg;
	ax_err    rv = AX_OK;

	for (size_t i = 0; i < n; i += 1000) {
		size_t m = n - i < 1000 ? n - i : 1000;
		if (st->pending.n > 0) {
			keep_pending(st, cmds + i, m);
			continue;
		}
		ax_err r = run_cmds(self, st, cmds + i, m);
		if (r != AX_OK && rv == AX_OK)
			rv = r;
	}
	return rv;
}

/*
 * Cancels are applied at once, even while a batch waits for the database:
 * remembered for the pre hooks of attempts not sent yet, and forwarded to
 * the queue for those queued or running.
 */
static ax_err
on_cancel(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	ig_state *st = state;

	if (m->cmd->cancel_instance->instance == NULL) {
		ax_log_warn(COMP,
		            "dropped a CancelInstance without an instance");
		return AX_OK;
	}
	ax_hooks_cancel(st->hk,
	                m->cmd->cancel_instance->instance->instance_id);
	(void) ax_pipeline_send(self, AX_A_QUEUE, m->cmd);
	return AX_OK;
}

/* Admissions and plans run in arrival order, in one transaction per batch
 * (ig_batch_end), behind kept commands if any. */
static ax_err
on_collect(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	ig_state *st = state;
	(void) self;
	return ax_flow_pending_collect(&st->pending, m);
}

static ax_err
ig_batch_end(ax_actor *self, void *state)
{
	ig_state *st = state;
	return ax_flow_pending_run(self, st, &st->pending, run_sliced);
}

static ax_err
ig_tick(ax_actor *self, void *state, int64_t now)
{
	ig_state *st = state;
	(void) now;
	return ax_flow_pending_retry(self, st, &st->pending, run_sliced);
}

/* Frees what the state holds (the pipeline frees the state); safe on a
 * state init left half-filled. */
static void
ig_fini(void *state)
{
	ig_state *st = state;
	uint64_t  rendered, failed;
	ax_renderer_counts(st->rn, &rendered, &failed);
	ax_log_info(
	    COMP,
	    "stopped: %llu instances planned, %llu attempts created, "
	    "%llu replayed, %llu skipped, %llu dropped, %zu pending; "
	    "%llu rendered, %llu render errors; pre hooks: %llu "
	    "passed, %llu held, %llu dropped",
	    (unsigned long long) st->planned, (unsigned long long) st->created,
	    (unsigned long long) st->replayed,
	    (unsigned long long) st->skipped,
	    (unsigned long long) (st->dropped + st->pending.dropped),
	    st->pending.n, (unsigned long long) rendered,
	    (unsigned long long) failed, (unsigned long long) st->passed,
	    (unsigned long long) st->held,
	    (unsigned long long) st->hook_dropped);
	ax_flow_pending_fini(&st->pending);
	ax_renderer_free(st->rn);
	ax_hooks_free(st->hk);
	ax_store_close(st->store);
}

/* What a batch of admissions and plans runs (ax_flow_store_warm). */
static const ax_flow_prepare_fn ig_prepare[] = {
	ax_store_runs_guard_prepare,
	ax_store_admit_prepare,
	ax_store_insert_instances_prepare,
	ax_store_events_prepare,
};

static ax_err
ig_init(void *state, const ax_pipeline_ctx *ctx, void *arg)
{
	ig_state *st = state;
	ax_err    rv;

	(void) arg;
	st->ctx         = ctx;
	st->pending.max = IG_PENDING_MAX;
	if ((rv = ax_renderer_new(ctx, &st->rn)) != AX_OK)
		return rv;
	ax_flow_store_warm(&st->store, ctx->dsn, AX_A_INSTANCE_GENERATOR,
	                   ig_prepare,
	                   sizeof(ig_prepare) / sizeof(ig_prepare[0]));
	return ax_hooks_new(ctx, &st->hk);
}

/* Non-blocking sends: the AttemptHeld of its pre hooks goes back to the
 * resource detector, which sends it admissions. */
static const ax_pipeline_def ig_def = {
	.name       = AX_A_INSTANCE_GENERATOR,
	.state_size = sizeof(ig_state),
	.init       = ig_init,
	.fini       = ig_fini,
	.tick       = ig_tick,
	.nonblock   = 1,
	.batch_end  = ig_batch_end,
	.on = {
		[AX__COMMAND__BODY_ADMISSION]       = on_collect,
		[AX__COMMAND__BODY_RUN_PLAN]        = on_collect,
		[AX__COMMAND__BODY_CANCEL_INSTANCE] = on_cancel,
	},
};

ax_err
ax_instance_generator_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx)
{
	return ax_pipeline_add(sys, ctx, &ig_def, NULL, NULL);
}
