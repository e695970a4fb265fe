/*
 * run_life.c - the life of a DAG run in the dependency detector: a run
 * created from a due event (or a backfill, or the rebuild), its states
 * (held by upstream DAGs or by concurrency, active, finished), its plan
 * to the instance generator, its finish (SUCCESS or FAILED), drop and
 * supersede, and run-level concurrency per DAG: max_active_runs, the
 * overlap policy (serial / parallel / discard / replace) and the serial
 * backfill queue.
 *
 * A run is in memory while it is held or active, and dropped when it
 * finishes, is discarded or superseded; its DAG's queue (dq) lists its
 * active runs oldest first and its held ones in logical order. What a
 * new run does while others are active is ax_overlap_decide's answer
 * (overlap.h); axdd_gate applies it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dependency_internal.h"
#include "overlap.h"

/* --- runs and DAG queues ------------------------------------------------
 */

void
axdd_dq_free(void *p)
{
	dq *q = p;
	if (q == NULL)
		return;
	free(q->dag);
	free(q);
}

static dq *
dq_get(dd *d, const char *dag)
{
	dq *q = ax_strmap_get(d->dqs, dag);
	if (q != NULL)
		return q;
	if ((q = calloc(1, sizeof(*q))) == NULL ||
	    (q->dag = strdup(dag)) == NULL ||
	    ax_strmap_put(d->dqs, dag, q) != AX_OK) {
		axdd_dq_free(q);
		return NULL;
	}
	return q;
}

void
axdd_run_free_mem(void *p)
{
	drun *r = p;
	if (r == NULL)
		return;
	free(r->dep_met);
	free(r->unmet);
	free(r->ist);
	free(r->iid);
	free(r);
}

/* Forgets r (not linked anywhere any more). */
void
axdd_run_drop(dd *d, drun *r)
{
	dver *v = r->v;
	ax_strmap_del(d->runs, r->key);
	axdd_run_free_mem(r);
	v->refs--;
	axdd_dver_unused(d, v);
}

drun *
axdd_run_new(dd *d, int64_t id, dver *v, int64_t logical_us, int64_t due_us,
             const char *trace)
{
	drun *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->id = id;
	snprintf(r->key, sizeof(r->key), "%lld", (long long) id);
	r->v          = v;
	r->logical_us = logical_us;
	r->due_us     = due_us;
	snprintf(r->trace, sizeof(r->trace), "%s", trace ? trace : "");
	r->q       = dq_get(d, v->e->dag->name);
	r->dep_met = calloc(v->e->dag->n_deps + 1, 1);
	if (r->q == NULL || r->dep_met == NULL ||
	    ax_strmap_put(d->runs, r->key, r) != AX_OK) {
		axdd_run_free_mem(r);
		axdd_dver_unused(d, v);
		return NULL;
	}
	v->refs++;
	return r;
}

void
axdd_link_active(drun *r)
{
	dq *q = r->q;
	ax_list_append(&q->active, &r->qn);
	q->nactive++;
}

void
axdd_unlink_active(drun *r)
{
	dq *q = r->q;
	ax_list_remove(&q->active, &r->qn);
	q->nactive--;
	if (q->bf_run == r)
		q->bf_run = NULL;
}

static int
logical_before(const ax_list_node *a, const ax_list_node *b)
{
	return AX_LIST_ENTRY(a, drun, qn)->logical_us <
	    AX_LIST_ENTRY(b, drun, qn)->logical_us;
}

/* r joins q's held runs, after those of an equal or earlier date. */
static void
held_insert(dq *q, drun *r)
{
	ax_list_insert_sorted(&q->held, &r->qn, logical_before);
	q->nheld++;
}

/* The first held run of q (which has one) leaves the list. */
static drun *
held_pop(dq *q)
{
	q->nheld--;
	return AX_LIST_ENTRY(ax_list_pop(&q->held), drun, qn);
}

/* The serial backfill queue of q, as the held runs. */
static void
bf_insert(dq *q, drun *r)
{
	ax_list_insert_sorted(&q->bf, &r->qn, logical_before);
	q->nbf++;
}

static drun *
bf_pop(dq *q)
{
	q->nbf--;
	return AX_LIST_ENTRY(ax_list_pop(&q->bf), drun, qn);
}

/* --- plans --------------------------------------------------------------
 */

/* Instances per RunPlan command (about 50 bytes each packed). */
#define PLAN_CHUNK 2000

void
axdd_send_plan(dd *d, drun *r)
{
	const ax_dag         *g = r->v->e->dag;
	size_t                n = r->v->ninst, i = 0;
	Ax__Command           cmd = AX__COMMAND__INIT;
	Ax__RunPlan           p   = AX__RUN_PLAN__INIT;
	Ax__PlannedInstance  *pi  = calloc(n + 1, sizeof(*pi));
	Ax__PlannedInstance **pp  = calloc(n + 1, sizeof(*pp));

	if (pi == NULL || pp == NULL) {
		free(pi);
		free(pp);
		axdd_oom("plan");
		return;
	}
	for (size_t t = 0; t < r->v->ntask; t++) {
		const ax_task *k = &g->tasks[t];
		for (int32_t j = 0; j < r->v->shards[t]; j++, i++) {
			Ax__PlannedInstance *x = &pi[i];
			*x = (Ax__PlannedInstance) AX__PLANNED_INSTANCE__INIT;
			x->task        = (char *) k->name;
			x->shard_index = j;
			x->shard_total = r->v->shards[t];
			x->priority    = k->eff.priority;
			x->channel     = (char *) ax_flow_db_channel(
			        ax_channel_name(k->eff.channel));
			x->worker_group =
			    (char *) (k->eff.worker_group ? k->eff.worker_group
			                                  : "default");
			x->pool = (char *) (k->eff.pool ? k->eff.pool : "");
			x->max_tries = r->v->tries[t];
			x->state     = "PENDING";
			x->reason    = k->n_depends > 0 ? "WAIT_DEPENDENCY"
			                                : "WAIT_RESOURCE";
			pp[i]        = x;
		}
	}
	p.dag             = (char *) g->name;
	p.dag_id          = r->v->e->dag_id;
	p.dag_version_id  = r->v->e->version_id;
	p.dag_run_id      = r->id;
	p.logical_time_us = r->logical_us;
	p.due_at_us       = r->due_us;
	cmd.body_case     = AX__COMMAND__BODY_RUN_PLAN;
	cmd.run_plan      = &p;
	/* A run of many tasks x shards is planned in several commands, so
	 * each stays far below the runtime's envelope limit; the generator's
	 * plan insert is idempotent per instance, so chunks compose. */
	for (size_t off = 0; off < n; off += PLAN_CHUNK) {
		p.n_instances = n - off < PLAN_CHUNK ? n - off : PLAN_CHUNK;
		p.instances   = pp + off;
		axdd_send_cmd(d, AX_A_INSTANCE_GENERATOR, &cmd, r->trace);
	}
	free(pi);
	free(pp);
}

/* --- run life -----------------------------------------------------------
 */

static void start(dd *d, drun *r);

/* Starts held runs while the DAG has room. */
static void
pump(dd *d, dq *q)
{
	if (q->bf_run == NULL && q->nbf > 0) {
		drun *r   = bf_pop(q);
		q->bf_run = r;
		start(d, r);
	}
	while (q->nheld > 0) {
		const ax_dag *g =
		    AX_LIST_ENTRY(q->held.head, drun, qn)->v->e->dag;
		size_t max =
		    g->max_active_runs > 0 ? (size_t) g->max_active_runs : 1;
		if (q->nactive >= max)
			break;
		start(d, held_pop(q));
	}
}

static void
finish(dd *d, drun *r)
{
	int  ok = r->n_ok == r->v->ninst;
	char pl[128];
	dq  *q = r->q;

	axdd_chg(d, r->id, ok ? "SUCCESS" : "FAILED", NULL);
	snprintf(pl, sizeof(pl),
	         "{\"instances\":%zu,\"succeeded\":%zu,\"failed\":%zu}",
	         r->v->ninst, r->n_ok, r->n_fail);
	axdd_emit(d, r, ok ? "run.succeeded" : "run.failed", NULL, NULL, 0, 0,
	          pl);
	if (ok)
		axdd_deadline_cancel(d, r);
	axdd_completed(d, r, ok);
	if (ok)
		d->stats->succeeded++;
	else
		d->stats->failed++;
	axdd_unlink_active(r);
	axdd_run_drop(d, r);
	pump(d, q);
}

void
axdd_check_done(dd *d, drun *r)
{
	if (r->phase == R_ACTIVE && r->n_sent == 0)
		finish(d, r);
}

/* Allocates the counters of an active run (every instance WAIT). */
int
axdd_alloc_counters(drun *r)
{
	dver *v  = r->v;
	r->unmet = malloc((v->ntask + 1) * sizeof(*r->unmet));
	r->ist   = calloc(v->ninst + 1, 1);
	r->iid   = calloc(v->ninst + 1, sizeof(*r->iid));
	if (r->unmet == NULL || r->ist == NULL || r->iid == NULL)
		return -1;
	memcpy(r->unmet, v->unmet0, v->ntask * sizeof(*r->unmet));
	return 0;
}

/* Plans r and releases its roots. */
static void
start(dd *d, drun *r)
{
	if (axdd_alloc_counters(r) != 0) {
		axdd_oom("run counters");
		axdd_run_drop(d, r);
		return;
	}
	r->phase = R_ACTIVE;
	axdd_link_active(r);
	axdd_chg(d, r->id, "RUNNING", NULL);
	axdd_send_plan(d, r);
	d->stats->planned++;
	for (size_t t = 0; t < r->v->ntask; t++)
		if (r->unmet[t] == 0)
			axdd_release_task(d, r, t);
	axdd_check_done(d, r);
}

void
axdd_hold(dd *d, drun *r, const char *reason, const char *type)
{
	r->phase = reason[0] == 'W' ? R_HELD_DEP : R_HELD_CONC;
	axdd_chg(d, r->id, "QUEUED", reason);
	axdd_emit(d, r, type, reason, NULL, 0, 0, NULL);
	d->stats->held++;
}

/* Cancels the active run old to make room (policy replace). */
static void
supersede(dd *d, drun *old)
{
	axdd_chg(d, old->id, "CANCELED", "SUPERSEDED");
	axdd_emit(d, old, "run.superseded", "SUPERSEDED", NULL, 0, 0, NULL);
	axdd_supersede_rows(d, old->id);
	d->stats->superseded++;
	axdd_unlink_active(old);
	axdd_run_drop(d, old);
}

/*
 * Holds r, prepared ahead of its due instant (scheduler.prepare_ahead),
 * until the instant (AX_ACT_DEFER): a TIMER_GATE from the time detector
 * brings it back to axdd_gate(), which decides again. The overlap is
 * judged at the due instant, as without preparing ahead (the active run
 * may end in the meantime, and then the held run simply starts).
 */
static void
defer_gate(dd *d, drun *r)
{
	Ax__Command  cmd = AX__COMMAND__INIT;
	Ax__TimerSet ts  = AX__TIMER_SET__INIT;

	held_insert(r->q, r);
	axdd_hold(d, r, "CONCURRENCY_BLOCKED", "run.held");
	ts.kind       = AX__TIMER_KIND__TIMER_GATE;
	ts.key        = r->key;
	ts.fire_at_us = r->due_us;
	ts.notify     = AX_A_DEPENDENCY_DETECTOR;
	cmd.body_case = AX__COMMAND__BODY_TIMER_SET;
	cmd.timer_set = &ts;
	axdd_send_cmd(d, AX_A_TIME_DETECTOR, &cmd, r->trace);
}

/* TIMER_GATE: the due instant of a run defer_gate() held. */
void
axdd_on_timer(dd *d, const Ax__TimerFired *tf)
{
	drun *r;

	if (tf->kind == AX__TIMER_KIND__TIMER_DEADLINE) {
		axdd_deadline_fired(d, tf);
		return;
	}
	if (tf->kind != AX__TIMER_KIND__TIMER_GATE || tf->key == NULL ||
	    (r = ax_strmap_get(d->runs, tf->key)) == NULL ||
	    r->phase != R_HELD_CONC || r->backfill != 0)
		return;                      /* started meanwhile, or gone */
	ax_list_remove(&r->q->held, &r->qn); /* on held: see drun.qn */
	r->q->nheld--;
	r->due_gated = 1; /* the wheel may fire a fraction of a ms early */
	axdd_gate(d, r);
}

/* The overlap decision's inputs for r, from its DAG queue. */
static ax_overlap_in
overlap_in(const drun *r)
{
	const dq     *q = r->q;
	const ax_dag *g = r->v->e->dag;

	return (ax_overlap_in) {
		.policy          = g->policy,
		.max_active_runs = g->max_active_runs,
		.kind          = r->backfill == 1 ? AX_RUN_KIND_BACKFILL_SERIAL
		             : r->backfill == 2 ? AX_RUN_KIND_BACKFILL_PARALLEL
		                                : AX_RUN_KIND_DUE,
		.nactive       = q->nactive,
		.nheld         = q->nheld,
		.oldest_active = q->active.head
		    ? AX_LIST_ENTRY(q->active.head, drun, qn)->id
		    : 0,
		.backfill_active = q->bf_run ? q->bf_run->id : 0,
		.early = !r->due_gated && r->due_us > ax_clock_utc_us(),
	};
}

/*
 * Run-level concurrency: r, ready to start (its upstream DAGs met),
 * starts, is held, deferred, discarded, or replaces the oldest active
 * runs, as ax_overlap_decide (overlap.h) says.
 */
void
axdd_gate(dd *d, drun *r)
{
	dq            *q  = r->q;
	ax_overlap_in  in = overlap_in(r);
	ax_overlap_out o  = ax_overlap_decide(&in);

	if (o.act == AX_ACT_HOLD || o.act == AX_ACT_QUEUE_BACKFILL)
		ax_logf(
		    AX_LOG_DEBUG, COMP, "CONCURRENCY_BLOCKED",
		    &(ax_log_ids) { .dag = r->v->e->dag->name, .run = r->id },
		    "run %s behind run %lld (%zu active, %zu held)",
		    ax_overlap_act_name(o.act), (long long) o.behind,
		    in.nactive, in.nheld);
	switch (o.act) {
	case AX_ACT_START:
		if (r->backfill == 1)
			q->bf_run = r;
		start(d, r);
		return;
	case AX_ACT_QUEUE_BACKFILL:
		bf_insert(q, r);
		axdd_hold(d, r, "CONCURRENCY_BLOCKED", "run.held");
		return;
	case AX_ACT_HOLD:
		held_insert(q, r);
		axdd_hold(d, r, "CONCURRENCY_BLOCKED", "run.held");
		return;
	case AX_ACT_DEFER:
		defer_gate(d, r);
		return;
	case AX_ACT_DISCARD:
		axdd_chg(d, r->id, "CANCELED", "CONCURRENCY_BLOCKED");
		axdd_emit(d, r, "run.discarded", "CONCURRENCY_BLOCKED", NULL,
		          0, 0, NULL);
		d->stats->discarded++;
		axdd_run_drop(d, r);
		return;
	case AX_ACT_REPLACE:
		for (size_t i = 0; i < o.nsupersede && q->active.head; i++)
			supersede(d, AX_LIST_ENTRY(q->active.head, drun, qn));
		start(d, r);
		return;
	}
}

void
axdd_on_due(dd *d, const Ax__Command *cmd)
{
	const Ax__Due *due = cmd->due;
	char           key[24];
	dver          *v;
	drun          *r;

	if (due->dag_run_id <= 0)
		return;
	snprintf(key, sizeof(key), "%lld", (long long) due->dag_run_id);
	if (ax_strmap_get(d->runs, key) != NULL)
		return; /* a replay */
	if (d->rebuilt != NULL && ax_clock_mono_us() > d->rebuilt_until_us) {
		ax_strmap_free(d->rebuilt, NULL);
		d->rebuilt = NULL;
	}
	if (d->rebuilt != NULL && ax_strmap_get(d->rebuilt, key) != NULL) {
		ax_logf(
		    AX_LOG_DEBUG, COMP, NULL,
		    &(ax_log_ids) { .dag = due->dag, .run = due->dag_run_id },
		    "Due of a run the start-up rebuild read: a replay");
		return;
	}
	if ((v = axdd_dver_get(d, due->dag_version_id)) == NULL)
		return;
	r = axdd_run_new(d, due->dag_run_id, v, due->logical_time_us,
	                 due->due_at_us, cmd->trace_id);
	if (r == NULL) {
		axdd_oom("run");
		return;
	}
	/* a sender without the interval (older): the logical time */
	r->iv_start_us = due->interval_start_us ? due->interval_start_us
	                                        : due->logical_time_us;
	r->iv_end_us =
	    due->interval_end_us ? due->interval_end_us : r->iv_start_us;
	axdd_deadline_arm(d, r);
	axdd_admit(d, r);
}
