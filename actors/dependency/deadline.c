/*
 * deadline.c - the deadlines of runs (docs/dag-format.md#deadlines): the
 * timers the dependency detector arms for them, and the miss it records
 * when one fires before the run (or the task) succeeded.
 *
 * Arming: when a run enters memory (a Due, the rebuild at start or
 * takeover, a reload after a control op), one TimerSet (TIMER_DEADLINE)
 * per declared deadline goes to the time detector: key "RUN" for the
 * DAG's deadline, "RUN/TASK" for a task's; arming the same key again
 * replaces the timer, so a rebuild re-arms without doubling. Backfill
 * runs are not armed (rebuild.c): they re-do old periods on purpose. A
 * deadline already past (axd was down) fires at the time detector's next pass.
 * A run that succeeds cancels its timers; one that fails keeps them (it
 * did not succeed by the deadline either).
 *
 * Firing: the miss is judged against PostgreSQL in a transaction of its
 * own (ax_store_deadline_check locks the run row and looks for the event
 * already written), and the event run.deadline_missed /
 * instance.deadline_missed (reason DEADLINE_MISSED) is written in that
 * same transaction: exactly once per run and deadline, across restarts
 * and takeovers. Deadlines are rare next to instances (at most one per
 * run and task that declares one): this costs one TimerSet per deadline
 * at run start, one TimerCancel on success and one short transaction
 * per deadline that passes unmet; nothing per instance.
 *
 * Threads: the detector's actor thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "deadline.h"
#include "dependency_internal.h"
#include "store_events.h"
#include "tz.h"

/* The zone of g's schedule (UTC when it cannot be loaded). */
static const ax_tz *
zone(dd *d, const ax_dag *g)
{
	const ax_tz *tz = NULL;
	const char  *n  = g->schedule.timezone;

	if (n == NULL || strcmp(n, "UTC") == 0)
		return ax_tz_utc();
	if (d->tzc == NULL && ax_tz_cache_new(&d->tzc) != AX_OK)
		return ax_tz_utc();
	if (ax_tz_cache_get(d->tzc, n, &tz) != AX_OK)
		return ax_tz_utc();
	return tz;
}

static void
timer_key(char *buf, size_t len, int64_t run, const char *task)
{
	snprintf(buf, len, "%lld%s%s", (long long) run, task ? "/" : "",
	         task ? task : "");
}

static void
arm_one(dd *d, const drun *r, const char *task, const ax_deadline_spec *s,
        const ax_tz *tz)
{
	Ax__Command     cmd = AX__COMMAND__INIT;
	Ax__TimerSet    ts  = AX__TIMER_SET__INIT;
	Ax__InstanceRef ref = AX__INSTANCE_REF__INIT;
	char            key[320];
	int64_t         at;

	if (ax_deadline_instant(s, r->iv_start_us, r->iv_end_us, tz, &at) !=
	    AX_OK)
		return;
	timer_key(key, sizeof(key), r->id, task);
	ref.dag             = (char *) r->v->e->dag->name;
	ref.dag_version_id  = r->v->e->version_id;
	ref.dag_run_id      = r->id;
	ref.task            = (char *) (task ? task : "");
	ref.logical_time_us = r->logical_us;
	ts.kind             = AX__TIMER_KIND__TIMER_DEADLINE;
	ts.key              = key;
	ts.fire_at_us       = at;
	ts.notify           = COMP;
	ts.instance         = &ref;
	cmd.body_case       = AX__COMMAND__BODY_TIMER_SET;
	cmd.timer_set       = &ts;
	axdd_send_cmd(d, AX_A_TIME_DETECTOR, &cmd, r->trace);
}

void
axdd_deadline_arm(dd *d, const drun *r)
{
	const ax_dag *g  = r->v->e->dag;
	const ax_tz  *tz = NULL;

	if (g->deadline.spec.kind != AX_DEADLINE_NONE) {
		tz = zone(d, g);
		arm_one(d, r, NULL, &g->deadline.spec, tz);
	}
	for (size_t i = 0; i < g->n_tasks; i++) {
		const ax_task *t = &g->tasks[i];
		if (t->deadline.spec.kind == AX_DEADLINE_NONE)
			continue;
		if (tz == NULL)
			tz = zone(d, g);
		arm_one(d, r, t->name, &t->deadline.spec, tz);
	}
}

static void
cancel_one(dd *d, int64_t run, const char *task)
{
	Ax__Command     cmd = AX__COMMAND__INIT;
	Ax__TimerCancel tc  = AX__TIMER_CANCEL__INIT;
	char            key[320];

	timer_key(key, sizeof(key), run, task);
	tc.kind          = AX__TIMER_KIND__TIMER_DEADLINE;
	tc.key           = key;
	cmd.body_case    = AX__COMMAND__BODY_TIMER_CANCEL;
	cmd.timer_cancel = &tc;
	axdd_send_cmd(d, AX_A_TIME_DETECTOR, &cmd, NULL);
}

void
axdd_deadline_cancel(dd *d, const drun *r)
{
	const ax_dag *g = r->v->e->dag;

	if (g->deadline.spec.kind != AX_DEADLINE_NONE)
		cancel_one(d, r->id, NULL);
	for (size_t i = 0; i < g->n_tasks; i++)
		if (g->tasks[i].deadline.spec.kind != AX_DEADLINE_NONE)
			cancel_one(d, r->id, g->tasks[i].name);
}

/* What one firing writes (fire_fn) and sends after the commit. */
typedef struct miss {
	const Ax__InstanceRef *ref;
	const char            *task; /* NULL: the run's deadline */
	int64_t                at_us;
	const char            *text; /* the deadline as written */
	const ax_dag          *g;
	char                   state[32];
	char                  *payload; /* owned */
	ax_flow_event          e;
	Ax__InstanceRef        eref;
} miss;

/* The payload of the event (docs/events.md), a new string or NULL. */
static char *
miss_payload(const miss *m)
{
	char    at[40];
	json_t *o = json_pack(
	    "{s:s, s:s, s:I, s:s, s:s, s:o}", "deadline", m->text,
	    "deadline_at", ax_clock_fmt_utc(m->at_us, at, sizeof(at)),
	    "deadline_at_us", (json_int_t) m->at_us, "state", m->state,
	    "impact", ax_impact_name(m->g->impact), "owner",
	    m->g->owner ? json_string(m->g->owner) : json_null());
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return s;
}

static ax_err
fire_fn(ax_store *s, void *arg)
{
	miss              *m = arg;
	ax_store_event_row row;
	ax_err             rv;

	free(m->payload);
	m->payload = NULL;
	if ((rv = ax_store_deadline_check(s, m->ref->dag_run_id, m->task,
	                                  m->at_us, m->state,
	                                  sizeof(m->state))) != AX_OK ||
	    m->state[0] == '\0')
		return rv;
	if ((m->payload = miss_payload(m)) == NULL)
		return ax_err_set(AX_ENOMEM, "%s: out of memory", COMP);
	m->eref             = *m->ref;
	m->eref.instance_id = 0;
	ax_flow_event_init(
	    &m->e, COMP,
	    m->task ? "instance.deadline_missed" : "run.deadline_missed",
	    "DEADLINE_MISSED", &m->eref, NULL, 0, NULL, m->payload);
	ax_flow_event_row(&m->e.ev, &row);
	return ax_store_insert_events(s, &row, 1, NULL, NULL);
}

void
axdd_deadline_fired(dd *d, const Ax__TimerFired *tf)
{
	const Ax__InstanceRef  *ref = tf->instance;
	ax_dag_entry           *e;
	miss                    m = { 0 };
	char                    text[AX_DEADLINE_TEXT_LEN];
	const ax_deadline_spec *spec;

	if (ref == NULL || ref->dag_run_id <= 0)
		return;
	e = ax_dag_registry_version(d->ctx->registry, ref->dag_version_id);
	if (e == NULL &&
	    ax_dag_registry_load_version(d->ctx->registry, d->store,
	                                 ref->dag_version_id) == AX_OK)
		e = ax_dag_registry_version(d->ctx->registry,
		                            ref->dag_version_id);
	if (e == NULL) {
		ax_logf(AX_LOG_ERROR, COMP, "UNKNOWN_DAG", NULL,
		        "deadline of run %lld: DAG version %lld cannot be "
		        "loaded: %s",
		        (long long) ref->dag_run_id,
		        (long long) ref->dag_version_id, ax_err_detail());
		return;
	}
	m.g    = e->dag;
	m.task = ref->task && ref->task[0] ? ref->task : NULL;
	spec   = &m.g->deadline.spec;
	if (m.task != NULL) {
		const ax_task *t = ax_dag_entry_task(e, m.task);
		spec             = t ? &t->deadline.spec : NULL;
	}
	if (spec == NULL || spec->kind == AX_DEADLINE_NONE) {
		ax_dag_entry_release(e); /* the version dropped it */
		return;
	}
	m.ref   = ref;
	m.at_us = tf->fire_at_us;
	m.text =
	    ax_deadline_text(spec, m.g->schedule.timezone, text, sizeof(text));
	if (ax_store_tx(d->store, fire_fn, &m) != AX_OK) {
		ax_logf(
		    AX_LOG_ERROR, COMP, NULL,
		    &(ax_log_ids) { .dag = ref->dag, .run = ref->dag_run_id },
		    "deadline miss not recorded (a restart judges it "
		    "again): %s",
		    ax_err_detail());
	} else if (m.payload != NULL) {
		(void) ax_flow_event_send(d->self, &m.e, 1);
		d->stats->deadlines_missed++;
		ax_logf(
		    AX_LOG_WARN, COMP, "DEADLINE_MISSED",
		    &(ax_log_ids) { .dag = ref->dag, .run = ref->dag_run_id },
		    "%s%s missed its deadline (%s): %s",
		    m.task ? "task " : "run", m.task ? m.task : "", text,
		    m.state);
	}
	free(m.payload);
	ax_dag_entry_release(e);
}
