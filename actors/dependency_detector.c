/*
 * dependency_detector.c - DAG runs: plans, counters of unmet upstreams,
 * releases, run completion, DAG-to-DAG waits, run-level concurrency,
 * restart rebuild, clear / mark / backfill (see dependency_detector.h).
 *
 * State (memory; PostgreSQL is the truth, rebuilt from it at start):
 *  - vers: DAG version id -> dver, the graph of one version computed once
 *    (shards and instance offsets per task, downstream lists in CSR form,
 *    the initial unmet count of each task, its try budget). A dver holds
 *    a registry reference, so the version outlives DAG changes while runs
 *    use it; it is freed with the last run in memory that uses it, so a
 *    million DAGs firing now and then do not pin a million versions.
 *  - runs: dag_run id -> drun; a run is in memory while it is held or
 *    active, and dropped when it finishes.
 *  - dqs: DAG name -> dq: the DAG's active runs (a list, oldest first),
 *    its runs held by concurrency (by logical date) and its serial
 *    backfill queue.
 *  - waiters: upstream DAG name -> the runs waiting for it
 *    (depends_on_dags).
 *
 * Counters: unmet[t] = upstream instances of task t not in SUCCESS; an
 * instance is WAIT (not released), SENT (released or in flight), OK or
 * FAIL. A run with no SENT instance left is finished.
 *
 * Writes: every handler call collects its run changes, reason updates,
 * supersedes and events, and writes them in ONE transaction at the end;
 * RunCompleted (to itself) leaves only after that commit.
 */
#include "dependency_detector.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "dag_registry.h"
#include "flow_util.h"
#include "hmap.h"
#include "store.h"
#include "store_attempts.h"
#include "store_commands.h"
#include "store_deps.h"

#define COMP "dependency_detector"

#define DD_TRACE_LEN 33 /* a trace id (32 hex digits) and its NUL */

enum { I_WAIT = 0, I_SENT, I_OK, I_FAIL };
enum { R_NEW = 0, R_HELD_DEP, R_HELD_CONC, R_ACTIVE };
enum { M_RESTART = 0, M_RELOAD, M_BACKFILL_SERIAL, M_BACKFILL_PARALLEL };

/* The graph of one DAG version. */
typedef struct dver {
	ax_dag_entry *e; /* reference held */
	size_t        ntask, ninst;
	int32_t      *shards; /* per task, >= 1 */
	size_t       *off;    /* per task: index of its shard 0 */
	size_t       *doff;   /* ntask + 1: downstreams of t are */
	size_t       *down;   /*   down[doff[t] .. doff[t+1]) */
	int32_t      *unmet0; /* per task: upstream instances */
	int32_t      *tries;  /* per task: 1 + retries */
	size_t        refs;   /* runs in memory using it */
	char          key[24];
} dver;

typedef struct dq   dq;
typedef struct drun drun;

struct drun {
	int64_t  id;
	char     key[24];
	dver    *v;
	dq      *q;
	int64_t  logical_us, due_us;
	char     trace[DD_TRACE_LEN];
	int      phase;     /* R_* */
	int      backfill;  /* 0, 1 serial, 2 parallel */
	int      due_gated; /* its TIMER_GATE fired: judge it now */
	uint8_t *dep_met;   /* per depends_on_dags entry */
	size_t   ndep_wait;
	int32_t *unmet; /* per task */
	uint8_t *ist;   /* per instance: I_* */
	int64_t *iid;   /* per instance: task_instances.id, 0 unknown */
	size_t   n_sent, n_ok, n_fail;
	drun    *prev, *next; /* q's active list */
};

struct dq {
	char  *dag;
	drun  *head, *tail; /* active runs, oldest start first */
	size_t nactive;
	drun **held; /* held by concurrency, by logical date */
	size_t nheld, capheld;
	drun **bf; /* serial backfill queue, by logical date */
	size_t nbf, capbf;
	drun  *bf_run; /* the serial backfill run now active */
};

typedef struct rvec {
	drun **v;
	size_t n, cap;
} rvec;

/* An event written in the batch's transaction. It owns every string it
 * carries (see "the batch" in dd): e.ev points only into this struct
 * and at string literals. */
typedef struct pev {
	ax_flow_event   e;
	Ax__InstanceRef ref;
	char            dag[256];
	char            task[256];
	char            payload[192];
	char            trace[DD_TRACE_LEN];
} pev;

typedef struct done {
	char    dag[256];
	int64_t run, logical_us;
	int     ok;
} done;

typedef struct dd_packed {
	uint8_t *data;
	size_t   len;
} dd_packed;

typedef struct dd {
	const ax_pipeline_ctx        *ctx;
	ax_actor                     *self;
	ax_store                     *store;
	ax_strmap                    *vers, *runs, *dqs, *waiters;
	int                           started;
	ax_dependency_detector_stats *stats, own;
	/*
	 * The batch: what one handler call writes in flush(). The batch owns
	 * everything it holds (copies, ids, string literals), never a pointer
	 * into a drun, its dver or the DAG: the call that queues an item may
	 * drop the run before flush() (finish, supersede, discard), and the
	 * last run of a version frees the version's graph and releases its
	 * DAG entry.
	 */
	ax_store_run_change *chg; /* state and reason: string literals */
	size_t               nchg, capchg;
	int64_t             *wr_run;
	char               **wr_task; /* owned copies */
	size_t               nwr, capwr, capwr2;
	int64_t             *sup;
	size_t               nsup, capsup;
	pev                **evs;
	size_t               nev, capev;
	done                *dn;
	size_t               ndn, capdn;
	PGresult            *live; /* supersede: instances to cancel */
	/* InstanceReady commands past the outbox budget, packed, in order */
	dd_packed *spill;
	size_t     nspill, spill_head, capspill;
} dd;

/* --- small helpers ------------------------------------------------------
 */

static void
oom(const char *what)
{
	ax_logf(AX_LOG_ERROR, COMP, NULL, NULL, "out of memory (%s)", what);
}

static void
chg(dd *d, int64_t run, const char *state, const char *reason)
{
	if (AX_GROW(d->chg, d->capchg, d->nchg + 1) != AX_OK) {
		oom("run change");
		return;
	}
	d->chg[d->nchg++] = (ax_store_run_change) { .run_id = run,
		                                    .state  = state,
		                                    .reason = reason };
}

/* Queues an event of run r (task NULL: a run event). */
static void
emit(dd *d, const drun *r, const char *type, const char *reason,
     const char *task, int32_t shard, int64_t iid, const char *payload)
{
	pev *p = calloc(1, sizeof(*p));
	if (p == NULL || AX_GROW(d->evs, d->capev, d->nev + 1) != AX_OK) {
		free(p);
		oom("event");
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

/* --- DAG versions -------------------------------------------------------
 */

static void
dver_free(void *p)
{
	dver *v = p;
	if (v == NULL)
		return;
	ax_dag_entry_release(v->e);
	free(v->shards);
	free(v->off);
	free(v->doff);
	free(v->down);
	free(v->unmet0);
	free(v->tries);
	free(v);
}

/* Builds the graph of e (reference passes to the dver). */
static dver *
dver_build(ax_dag_entry *e)
{
	const ax_dag *g = e->dag;
	size_t        n = g->n_tasks, nedge = 0;
	dver         *v = calloc(1, sizeof(*v));

	if (v == NULL) {
		ax_dag_entry_release(e);
		return NULL;
	}
	v->e     = e;
	v->ntask = n;
	for (size_t t = 0; t < n; t++)
		nedge += g->tasks[t].n_depends;
	v->shards = calloc(n + 1, sizeof(*v->shards));
	v->off    = calloc(n + 1, sizeof(*v->off));
	v->doff   = calloc(n + 2, sizeof(*v->doff));
	v->down   = calloc(nedge + 1, sizeof(*v->down));
	v->unmet0 = calloc(n + 1, sizeof(*v->unmet0));
	v->tries  = calloc(n + 1, sizeof(*v->tries));
	if (!v->shards || !v->off || !v->doff || !v->down || !v->unmet0 ||
	    !v->tries) {
		dver_free(v);
		return NULL;
	}
	for (size_t t = 0; t < n; t++) {
		const ax_task *k = &g->tasks[t];
		v->shards[t]     = k->eff.shards > 0 ? k->eff.shards : 1;
		v->off[t]        = v->ninst;
		v->ninst += (size_t) v->shards[t];
		v->tries[t] =
		    1 + (k->eff.retries.count > 0 ? k->eff.retries.count : 0);
	}
	/* CSR of downstreams: count, prefix, fill */
	for (size_t t = 0; t < n; t++)
		for (size_t k = 0; k < g->tasks[t].n_depends; k++)
			v->doff[g->tasks[t].deps[k] + 1]++;
	for (size_t t = 0; t < n; t++)
		v->doff[t + 1] += v->doff[t];
	size_t *fill = calloc(n + 1, sizeof(*fill));
	if (fill == NULL) {
		dver_free(v);
		return NULL;
	}
	for (size_t t = 0; t < n; t++)
		for (size_t k = 0; k < g->tasks[t].n_depends; k++) {
			size_t u                        = g->tasks[t].deps[k];
			v->down[v->doff[u] + fill[u]++] = t;
			v->unmet0[t] += v->shards[u];
		}
	free(fill);
	return v;
}

/* The graph of version_id (loaded into the registry when needed). */
static dver *
dver_get(dd *d, int64_t version_id)
{
	char          key[24];
	dver         *v;
	ax_dag_entry *e;

	snprintf(key, sizeof(key), "%lld", (long long) version_id);
	if ((v = ax_strmap_get(d->vers, key)) != NULL)
		return v;
	e = ax_dag_registry_version(d->ctx->registry, version_id);
	if (e == NULL &&
	    ax_dag_registry_load_version(d->ctx->registry, d->store,
	                                 version_id) == AX_OK)
		e = ax_dag_registry_version(d->ctx->registry, version_id);
	if (e == NULL) {
		ax_logf(AX_LOG_ERROR, COMP, "UNKNOWN_DAG", NULL,
		        "DAG version %lld cannot be loaded: %s",
		        (long long) version_id, ax_err_detail());
		return NULL;
	}
	if ((v = dver_build(e)) != NULL)
		snprintf(v->key, sizeof(v->key), "%s", key);
	if (v == NULL || ax_strmap_put(d->vers, key, v) != AX_OK) {
		dver_free(v);
		oom("DAG version");
		return NULL;
	}
	d->stats->versions++;
	return v;
}

/* --- runs and DAG queues ------------------------------------------------
 */

static void
dq_free(void *p)
{
	dq *q = p;
	if (q == NULL)
		return;
	free(q->dag);
	free(q->held);
	free(q->bf);
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
		dq_free(q);
		return NULL;
	}
	return q;
}

static void
run_free_mem(void *p)
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
/* Frees v once no run in memory uses it (the registry keeps the DAG). */
static void
dver_unused(dd *d, dver *v)
{
	if (v == NULL || v->refs > 0)
		return;
	ax_strmap_del(d->vers, v->key);
	dver_free(v);
	d->stats->versions--;
}

static void
run_drop(dd *d, drun *r)
{
	dver *v = r->v;
	ax_strmap_del(d->runs, r->key);
	run_free_mem(r);
	v->refs--;
	dver_unused(d, v);
}

static drun *
run_new(dd *d, int64_t id, dver *v, int64_t logical_us, int64_t due_us,
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
		run_free_mem(r);
		dver_unused(d, v);
		return NULL;
	}
	v->refs++;
	return r;
}

static void
link_active(drun *r)
{
	dq *q   = r->q;
	r->prev = q->tail;
	r->next = NULL;
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
	q->nactive++;
}

static void
unlink_active(drun *r)
{
	dq *q = r->q;
	if (r->prev)
		r->prev->next = r->next;
	else
		q->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		q->tail = r->prev;
	r->prev = r->next = NULL;
	q->nactive--;
	if (q->bf_run == r)
		q->bf_run = NULL;
}

/* Inserts r into a logical-date-ordered array. */
static int
insert_sorted(drun ***arr, size_t *n, size_t *cap, drun *r)
{
	if (ax_grow((void **) arr, cap, *n + 1, sizeof(**arr)) != AX_OK)
		return -1;
	size_t i = *n;
	while (i > 0 && (*arr)[i - 1]->logical_us > r->logical_us) {
		(*arr)[i] = (*arr)[i - 1];
		i--;
	}
	(*arr)[i] = r;
	(*n)++;
	return 0;
}

/* Removes r from arr when it is there. */
static void
remove_from(drun **arr, size_t *n, const drun *r)
{
	for (size_t i = 0; i < *n; i++)
		if (arr[i] == r) {
			memmove(arr + i, arr + i + 1,
			        (*n - i - 1) * sizeof(*arr));
			(*n)--;
			return;
		}
}

static drun *
pop_first(drun **arr, size_t *n)
{
	drun *r = arr[0];
	memmove(arr, arr + 1, (*n - 1) * sizeof(*arr));
	(*n)--;
	return r;
}

/* --- sending ------------------------------------------------------------
 */

static void
fill_ref(const drun *r, size_t t, int32_t j, Ax__InstanceRef *ref)
{
	const ax_dag *g      = r->v->e->dag;
	*ref                 = (Ax__InstanceRef) AX__INSTANCE_REF__INIT;
	ref->dag             = (char *) g->name;
	ref->dag_version_id  = r->v->e->version_id;
	ref->dag_run_id      = r->id;
	ref->task            = (char *) g->tasks[t].name;
	ref->instance_id     = r->iid ? r->iid[r->v->off[t] + (size_t) j] : 0;
	ref->logical_time_us = r->logical_us;
	ref->shard_index     = j;
	ref->shard_total     = r->v->shards[t];
}

static void
send_cmd(dd *d, const char *dest, Ax__Command *c, const char *trace)
{
	c->issued_at_us = ax_clock_utc_us();
	if (trace != NULL && trace[0] != '\0')
		c->trace_id = (char *) trace;
	if (ax_pipeline_send(d->self, dest, c) != AX_OK)
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL, "send to %s: %s", dest,
		        ax_err_detail());
}

/*
 * A run of many instances releases them all at once (100,000 shards of
 * one task, say), more than the runtime buffers for one destination
 * (outbox_max, 65,536): the excess was refused and lost, so those
 * instances never ran. Past DD_READY_BURST items waiting in the outbox to
 * the resource detector, InstanceReady commands are kept here, packed and
 * in order, and sent from the tick as the outbox drains.
 */
#define DD_READY_BURST 16384
#define DD_SPILL_RETRY (2 * AX_USEC_PER_MSEC)

static void
spill_push(dd *d, const Ax__Command *c)
{
	size_t   len = ax__command__get_packed_size(c);
	uint8_t *buf = malloc(len + 1);
	if (buf == NULL ||
	    AX_GROW(d->spill, d->capspill, d->nspill + 1) != AX_OK) {
		free(buf);
		oom("release queue");
		return;
	}
	ax__command__pack(c, buf);
	d->spill[d->nspill++] = (dd_packed) { .data = buf, .len = len };
	ax_actor_set_deadline(d->self, ax_clock_mono_us() + DD_SPILL_RETRY);
}

/* Sends queued releases while the outbox has room; the tick continues. */
static void
spill_drain(dd *d)
{
	while (d->spill_head < d->nspill &&
	       ax_actor_outbox_pending(d->self, AX_A_RESOURCE_DETECTOR) <
	           DD_READY_BURST) {
		dd_packed *b = &d->spill[d->spill_head];
		if (ax_actor_send(d->self, AX_A_RESOURCE_DETECTOR,
		                  AX_ITEM_COMMAND, b->data, b->len) != AX_OK)
			break; /* stopping, or full after all: next tick */
		free(b->data);
		d->spill_head++;
	}
	if (d->spill_head < d->nspill) {
		ax_actor_set_deadline(d->self,
		                      ax_clock_mono_us() + DD_SPILL_RETRY);
		return;
	}
	d->nspill = d->spill_head = 0;
}

static void
send_ready(dd *d, drun *r, size_t t, int32_t j)
{
	const ax_task    *k   = &r->v->e->dag->tasks[t];
	Ax__Command       cmd = AX__COMMAND__INIT;
	Ax__InstanceReady rd  = AX__INSTANCE_READY__INIT;
	Ax__InstanceRef   ref;

	fill_ref(r, t, j, &ref);
	rd.instance = &ref;
	rd.priority = k->eff.priority;
	rd.channel =
	    (char *) ax_flow_db_channel(ax_channel_name(k->eff.channel));
	rd.worker_group =
	    (char *) (k->eff.worker_group ? k->eff.worker_group : "default");
	rd.pool            = (char *) (k->eff.pool ? k->eff.pool : "");
	rd.due_at_us       = r->due_us;
	rd.slots           = 1;
	cmd.body_case      = AX__COMMAND__BODY_INSTANCE_READY;
	cmd.instance_ready = &rd;
	if (d->spill_head < d->nspill ||
	    ax_actor_outbox_pending(d->self, AX_A_RESOURCE_DETECTOR) >=
	        DD_READY_BURST) {
		cmd.issued_at_us = ax_clock_utc_us();
		if (r->trace[0] != '\0')
			cmd.trace_id = (char *) r->trace;
		spill_push(d, &cmd);
	} else
		send_cmd(d, AX_A_RESOURCE_DETECTOR, &cmd, r->trace);
	d->stats->released++;
}

/* Instances per RunPlan command (about 50 bytes each packed). */
#define PLAN_CHUNK 2000

static void
send_plan(dd *d, drun *r)
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
		oom("plan");
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
		send_cmd(d, AX_A_INSTANCE_GENERATOR, &cmd, r->trace);
	}
	free(pi);
	free(pp);
}

/* --- run life -----------------------------------------------------------
 */

static void gate(dd *d, drun *r);
static void start(dd *d, drun *r);

/* Releases every WAIT shard of task t. */
static void
release_task(dd *d, drun *r, size_t t)
{
	for (int32_t j = 0; j < r->v->shards[t]; j++) {
		size_t i = r->v->off[t] + (size_t) j;
		if (r->ist[i] != I_WAIT)
			continue;
		r->ist[i] = I_SENT;
		r->n_sent++;
		send_ready(d, r, t, j);
	}
}

/* Starts held runs while the DAG has room. */
static void
pump(dd *d, dq *q)
{
	if (q->bf_run == NULL && q->nbf > 0) {
		drun *r   = pop_first(q->bf, &q->nbf);
		q->bf_run = r;
		start(d, r);
	}
	while (q->nheld > 0) {
		const ax_dag *g = q->held[0]->v->e->dag;
		size_t        max =
                    g->max_active_runs > 0 ? (size_t) g->max_active_runs : 1;
		if (q->nactive >= max)
			break;
		start(d, pop_first(q->held, &q->nheld));
	}
}

static void
finish(dd *d, drun *r)
{
	int  ok = r->n_ok == r->v->ninst;
	char pl[128];
	dq  *q = r->q;

	chg(d, r->id, ok ? "SUCCESS" : "FAILED", NULL);
	snprintf(pl, sizeof(pl),
	         "{\"instances\":%zu,\"succeeded\":%zu,\"failed\":%zu}",
	         r->v->ninst, r->n_ok, r->n_fail);
	emit(d, r, ok ? "run.succeeded" : "run.failed", NULL, NULL, 0, 0, pl);
	if (AX_GROW(d->dn, d->capdn, d->ndn + 1) == AX_OK) {
		done *x = &d->dn[d->ndn++];
		snprintf(x->dag, sizeof(x->dag), "%s", r->v->e->dag->name);
		x->run        = r->id;
		x->logical_us = r->logical_us;
		x->ok         = ok;
	}
	if (ok)
		d->stats->succeeded++;
	else
		d->stats->failed++;
	unlink_active(r);
	run_drop(d, r);
	pump(d, q);
}

static void
check_done(dd *d, drun *r)
{
	if (r->phase == R_ACTIVE && r->n_sent == 0)
		finish(d, r);
}

/* Allocates the counters of an active run (every instance WAIT). */
static int
alloc_counters(drun *r)
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
	if (alloc_counters(r) != 0) {
		oom("run counters");
		run_drop(d, r);
		return;
	}
	r->phase = R_ACTIVE;
	link_active(r);
	chg(d, r->id, "RUNNING", NULL);
	send_plan(d, r);
	d->stats->planned++;
	for (size_t t = 0; t < r->v->ntask; t++)
		if (r->unmet[t] == 0)
			release_task(d, r, t);
	check_done(d, r);
}

static void
hold(dd *d, drun *r, const char *reason, const char *type)
{
	r->phase = reason[0] == 'W' ? R_HELD_DEP : R_HELD_CONC;
	chg(d, r->id, "QUEUED", reason);
	emit(d, r, type, reason, NULL, 0, 0, NULL);
	d->stats->held++;
}

/* Cancels the active run old to make room (policy replace). */
static void
supersede(dd *d, drun *old)
{
	chg(d, old->id, "CANCELED", "SUPERSEDED");
	emit(d, old, "run.superseded", "SUPERSEDED", NULL, 0, 0, NULL);
	if (AX_GROW(d->sup, d->capsup, d->nsup + 1) == AX_OK)
		d->sup[d->nsup++] = old->id;
	d->stats->superseded++;
	unlink_active(old);
	run_drop(d, old);
}

/*
 * A run prepared ahead of its due instant (scheduler.prepare_ahead) that
 * finds the DAG full under policy discard or replace is held until the
 * instant, when gate() decides again: the overlap is judged at the due
 * instant, as without preparing ahead (the active run may end in the
 * meantime, and then the held run simply starts).
 */
static int
defer_gate(dd *d, drun *r)
{
	Ax__Command  cmd = AX__COMMAND__INIT;
	Ax__TimerSet ts  = AX__TIMER_SET__INIT;
	dq          *q   = r->q;

	if (r->due_gated || r->due_us <= ax_clock_utc_us() ||
	    insert_sorted(&q->held, &q->nheld, &q->capheld, r) != 0)
		return 0;
	hold(d, r, "CONCURRENCY_BLOCKED", "run.held");
	ts.kind       = AX__TIMER_KIND__TIMER_GATE;
	ts.key        = r->key;
	ts.fire_at_us = r->due_us;
	ts.notify     = AX_A_DEPENDENCY_DETECTOR;
	cmd.body_case = AX__COMMAND__BODY_TIMER_SET;
	cmd.timer_set = &ts;
	send_cmd(d, AX_A_TIME_DETECTOR, &cmd, r->trace);
	return 1;
}

/* TIMER_GATE: the due instant of a run defer_gate() held. */
static void
on_timer(dd *d, const Ax__TimerFired *tf)
{
	drun *r;

	if (tf->kind != AX__TIMER_KIND__TIMER_GATE || tf->key == NULL ||
	    (r = ax_strmap_get(d->runs, tf->key)) == NULL ||
	    r->phase != R_HELD_CONC || r->backfill != 0)
		return; /* started meanwhile, or gone */
	remove_from(r->q->held, &r->q->nheld, r);
	r->due_gated = 1; /* the wheel may fire a fraction of a ms early */
	gate(d, r);
}

/* Run-level concurrency: start, hold, discard or replace. */
static void
gate(dd *d, drun *r)
{
	dq           *q = r->q;
	const ax_dag *g = r->v->e->dag;
	size_t max = g->max_active_runs > 0 ? (size_t) g->max_active_runs : 1;

	if (r->backfill == 1) {
		if (q->bf_run == NULL) {
			q->bf_run = r;
			start(d, r);
		} else if (insert_sorted(&q->bf, &q->nbf, &q->capbf, r) == 0)
			hold(d, r, "CONCURRENCY_BLOCKED", "run.held");
		else
			run_drop(d, r);
		return;
	}
	if (r->backfill == 2) {
		/* parallel backfill: up to max_active_runs at once, the rest
		 * held (never discarded nor replacing a run) */
		if (q->nactive < max)
			start(d, r);
		else if (insert_sorted(&q->held, &q->nheld, &q->capheld, r) ==
		         0)
			hold(d, r, "CONCURRENCY_BLOCKED", "run.held");
		else
			run_drop(d, r);
		return;
	}
	if (q->nactive < max && q->nheld == 0) {
		start(d, r);
		return;
	}
	if ((g->policy == AX_OVERLAP_DISCARD ||
	     g->policy == AX_OVERLAP_REPLACE) &&
	    defer_gate(d, r))
		return;
	switch (g->policy) {
	case AX_OVERLAP_DISCARD:
		chg(d, r->id, "CANCELED", "CONCURRENCY_BLOCKED");
		emit(d, r, "run.discarded", "CONCURRENCY_BLOCKED", NULL, 0, 0,
		     NULL);
		d->stats->discarded++;
		run_drop(d, r);
		return;
	case AX_OVERLAP_REPLACE:
		while (q->nactive >= max && q->head != NULL)
			supersede(d, q->head);
		start(d, r);
		return;
	default:
		if (insert_sorted(&q->held, &q->nheld, &q->capheld, r) != 0) {
			oom("held run");
			run_drop(d, r);
			return;
		}
		hold(d, r, "CONCURRENCY_BLOCKED", "run.held");
	}
}

static rvec *
waiters_of(dd *d, const char *dag)
{
	rvec *w = ax_strmap_get(d->waiters, dag);
	if (w != NULL)
		return w;
	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    ax_strmap_put(d->waiters, dag, w) != AX_OK) {
		free(w);
		return NULL;
	}
	return w;
}

static void
rvec_free(void *p)
{
	rvec *w = p;
	if (w != NULL)
		free(w->v);
	free(w);
}

/* depends_on_dags: checks PostgreSQL once, waits or goes to the gate. */
static void
admit(dd *d, drun *r)
{
	const ax_dag          *g = r->v->e->dag;
	ax_store_dagdep_check *c;

	if (g->n_deps == 0) {
		gate(d, r);
		return;
	}
	if ((c = calloc(g->n_deps, sizeof(*c))) == NULL) {
		oom("dag deps");
		run_drop(d, r);
		return;
	}
	for (size_t k = 0; k < g->n_deps; k++) {
		c[k].upstream    = g->deps[k].dag;
		c[k].same_period = g->deps[k].mode == AX_DEP_SAME_PERIOD;
		c[k].logical_us  = r->logical_us;
	}
	if (ax_store_deps_check_dags(d->store, c, g->n_deps) != AX_OK)
		ax_logf(AX_LOG_ERROR, COMP, "WAIT_DEPENDENCY",
		        &(ax_log_ids) { .dag = g->name, .run = r->id },
		        "upstream DAG check failed, waiting for their "
		        "completion: %s",
		        ax_err_detail());
	r->ndep_wait = 0;
	for (size_t k = 0; k < g->n_deps; k++) {
		rvec *w;
		r->dep_met[k] = (uint8_t) c[k].met;
		if (c[k].met)
			continue;
		if ((w = waiters_of(d, g->deps[k].dag)) == NULL ||
		    AX_GROW(w->v, w->cap, w->n + 1) != AX_OK) {
			oom("waiter");
			continue;
		}
		/* once per (run, upstream DAG) */
		if (w->n == 0 || w->v[w->n - 1] != r)
			w->v[w->n++] = r;
		r->ndep_wait++;
	}
	free(c);
	if (r->ndep_wait > 0)
		hold(d, r, "WAIT_DEPENDENCY", "run.waiting");
	else
		gate(d, r);
}

/* RunCompleted: releases the runs waiting for that upstream run. */
static void
on_run_completed(dd *d, const Ax__RunCompleted *rc)
{
	rvec  *w = ax_strmap_get(d->waiters, rc->dag);
	drun **go;
	size_t ngo = 0, keep = 0;

	if (w == NULL || w->n == 0 || strcmp(rc->state, "SUCCESS") != 0)
		return;
	if ((go = calloc(w->n, sizeof(*go))) == NULL) {
		oom("waiters");
		return;
	}
	for (size_t i = 0; i < w->n; i++) {
		drun         *r   = w->v[i];
		const ax_dag *g   = r->v->e->dag;
		int           met = 0;
		for (size_t k = 0; k < g->n_deps; k++) {
			if (r->dep_met[k] || strcmp(g->deps[k].dag, rc->dag))
				continue;
			if (g->deps[k].mode == AX_DEP_LATEST_SUCCESS ||
			    r->logical_us == rc->logical_time_us) {
				r->dep_met[k] = 1;
				met           = 1;
			}
		}
		int still = 0;
		for (size_t k = 0; k < g->n_deps; k++)
			if (!r->dep_met[k] &&
			    strcmp(g->deps[k].dag, rc->dag) == 0)
				still = 1;
		if (still || !met) {
			w->v[keep++] = r;
			continue;
		}
		if (--r->ndep_wait == 0)
			go[ngo++] = r;
	}
	w->n = keep;
	for (size_t i = 0; i < ngo; i++) {
		ax_logf(AX_LOG_INFO, COMP, NULL,
		        &(ax_log_ids) { .dag = go[i]->v->e->dag->name,
		                        .run = go[i]->id },
		        "upstream DAGs met");
		gate(d, go[i]);
	}
	free(go);
}

/* --- instance results ---------------------------------------------------
 */

/* The run and instance index of ref, or NULL. */
static drun *
locate(dd *d, const Ax__InstanceRef *ref, size_t *t_out, size_t *i_out)
{
	char  key[24];
	drun *r;
	long  t;

	if (ref == NULL)
		return NULL;
	snprintf(key, sizeof(key), "%lld", (long long) ref->dag_run_id);
	r = ax_strmap_get(d->runs, key);
	if (r == NULL || r->phase != R_ACTIVE)
		return NULL;
	t = ax_dag_entry_task_index(r->v->e, ref->task);
	if (t < 0 || ref->shard_index < 0 ||
	    ref->shard_index >= r->v->shards[t])
		return NULL;
	*t_out = (size_t) t;
	*i_out = r->v->off[t] + (size_t) ref->shard_index;
	if (ref->instance_id != 0)
		r->iid[*i_out] = ref->instance_id;
	return r;
}

static void
on_succeeded(dd *d, const Ax__InstanceSucceeded *s)
{
	size_t t, i;
	drun  *r = locate(d, s->instance, &t, &i);

	if (r == NULL || r->ist[i] == I_OK)
		return;
	if (r->ist[i] == I_SENT)
		r->n_sent--;
	else if (r->ist[i] == I_FAIL)
		r->n_fail--;
	r->ist[i] = I_OK;
	r->n_ok++;
	for (size_t k = r->v->doff[t]; k < r->v->doff[t + 1]; k++) {
		size_t dn = r->v->down[k];
		if (--r->unmet[dn] == 0)
			release_task(d, r, dn);
	}
	check_done(d, r);
}

/* Records WAIT_DEPENDENCY on every waiting transitive downstream of t. */
static void
mark_waiting(dd *d, drun *r, size_t t)
{
	size_t   n = r->v->ntask, head = 0, tail = 0;
	size_t  *que  = malloc((n + 1) * sizeof(*que));
	uint8_t *seen = calloc(n + 1, 1);

	if (que == NULL || seen == NULL) {
		free(que);
		free(seen);
		return;
	}
	que[tail++] = t;
	seen[t]     = 1;
	while (head < tail) {
		size_t u = que[head++];
		for (size_t k = r->v->doff[u]; k < r->v->doff[u + 1]; k++) {
			size_t dn = r->v->down[k];
			if (seen[dn])
				continue;
			seen[dn]    = 1;
			que[tail++] = dn;
			char *name  = strdup(r->v->e->dag->tasks[dn].name);
			if (name == NULL ||
			    AX_GROW(d->wr_run, d->capwr, d->nwr + 1) !=
			        AX_OK ||
			    AX_GROW(d->wr_task, d->capwr2, d->nwr + 1) !=
			        AX_OK) {
				free(name);
				oom("wait reason");
				continue;
			}
			d->wr_run[d->nwr]  = r->id;
			d->wr_task[d->nwr] = name;
			d->nwr++;
		}
	}
	free(que);
	free(seen);
}

static void
on_finished(dd *d, const Ax__InstanceFinished *f)
{
	size_t t, i;
	drun  *r = locate(d, f->instance, &t, &i);

	if (r == NULL || r->ist[i] == I_OK || r->ist[i] == I_FAIL)
		return;
	if (r->ist[i] == I_SENT)
		r->n_sent--;
	r->ist[i] = I_FAIL;
	r->n_fail++;
	ax_logf(AX_LOG_INFO, COMP, "WAIT_DEPENDENCY",
	        &(ax_log_ids) { .dag      = r->v->e->dag->name,
	                        .run      = r->id,
	                        .instance = f->instance->instance_id },
	        "%s ended %s: its downstreams wait", f->instance->task,
	        f->state);
	mark_waiting(d, r, t);
	check_done(d, r);
}

/* --- rebuild from PostgreSQL --------------------------------------------
 */

enum { X_MISSING = 0, X_PENDING, X_RETRY, X_READY, X_LIVE, X_OK, X_FAIL };

/* Rebuilds the active run r from its instance rows [from, to). */
static void
rebuild_active(dd *d, drun *r, PGresult *res, int from, int to, int mode)
{
	dver    *v       = r->v;
	uint8_t *x       = calloc(v->ninst + 1, 1);
	int      missing = 0;

	if (x == NULL || alloc_counters(r) != 0) {
		free(x);
		oom("rebuild");
		run_drop(d, r);
		return;
	}
	for (int row = from; row < to; row++) {
		const char *task = ax_store_cell(res, row, AX_DEPS_C_TASK);
		const char *st   = ax_store_cell(res, row, AX_DEPS_C_TI_STATE);
		const char *why = ax_store_cell(res, row, AX_DEPS_C_TI_REASON);
		long    t  = task ? ax_dag_entry_task_index(v->e, task) : -1;
		int64_t sh = ax_store_cell_i64(res, row, AX_DEPS_C_SHARD);
		ax_ti_state s;
		if (t < 0 || sh < 0 || sh >= v->shards[t] || st == NULL ||
		    ax_state_parse(st, &s) != AX_OK)
			continue;
		size_t i  = v->off[t] + (size_t) sh;
		r->iid[i] = ax_store_cell_i64(res, row, AX_DEPS_C_TI_ID);
		switch (s) {
		case AX_TI_SUCCESS:
			x[i] = X_OK;
			break;
		case AX_TI_PENDING:
			x[i] = why && strcmp(why, "RETRY_SCHEDULED") == 0
			    ? X_RETRY
			    : X_PENDING;
			break;
		case AX_TI_READY:
			x[i] = X_READY;
			break;
		case AX_TI_RUNNING:
		case AX_TI_UNKNOWN:
			x[i] = X_LIVE;
			break;
		default:
			x[i] = X_FAIL;
		}
	}
	/* SUCCESS counts as met */
	for (size_t t = 0; t < v->ntask; t++)
		for (int32_t j = 0; j < v->shards[t]; j++)
			if (x[v->off[t] + (size_t) j] == X_OK)
				for (size_t k = v->doff[t]; k < v->doff[t + 1];
				     k++)
					r->unmet[v->down[k]]--;
	r->phase = R_ACTIVE;
	link_active(r);
	for (size_t t = 0; t < v->ntask; t++) {
		for (int32_t j = 0; j < v->shards[t]; j++) {
			size_t i     = v->off[t] + (size_t) j;
			int    free_ = r->unmet[t] == 0;
			int    send  = 0;
			switch (x[i]) {
			case X_OK:
				r->ist[i] = I_OK;
				r->n_ok++;
				continue;
			case X_FAIL:
				r->ist[i] = I_FAIL;
				r->n_fail++;
				continue;
			case X_LIVE:
				r->ist[i] = I_SENT;
				break;
			case X_READY:
				r->ist[i] = I_SENT;
				send      = mode == M_RESTART;
				break;
			case X_RETRY:
				/* the retry timer lives in the time detector,
				 * lost only by a restart */
				r->ist[i] = free_ ? I_SENT : I_WAIT;
				send      = free_ && mode == M_RESTART;
				break;
			default: /* PENDING or missing */
				if (x[i] == X_MISSING)
					missing = 1;
				r->ist[i] = free_ ? I_SENT : I_WAIT;
				send      = free_;
			}
			if (r->ist[i] == I_SENT)
				r->n_sent++;
			if (send)
				send_ready(d, r, t, j);
		}
	}
	free(x);
	if (missing)
		send_plan(d, r); /* idempotent on the instance keys */
	d->stats->rebuilt++;
	check_done(d, r);
}

/*
 * Rebuilds or plans the runs of res (rows grouped by run, in logical
 * order): runs with instances are rebuilt first (so they count against
 * max_active_runs), then runs without any are planned like a Due.
 */
static void
build(dd *d, PGresult *res, int mode)
{
	int    nrow   = PQntuples(res);
	drun **fresh  = calloc((size_t) nrow + 1, sizeof(*fresh));
	size_t nfresh = 0;

	if (fresh == NULL) {
		oom("rebuild");
		return;
	}
	for (int row = 0; row < nrow;) {
		int64_t     id  = ax_store_cell_i64(res, row, AX_DEPS_C_RUN);
		int         end = row + 1;
		const char *state =
		    ax_store_cell(res, row, AX_DEPS_C_RUN_STATE);
		int   has = ax_store_cell(res, row, AX_DEPS_C_TASK) != NULL;
		char  key[24];
		drun *r;
		dver *v;

		while (end < nrow &&
		       ax_store_cell_i64(res, end, AX_DEPS_C_RUN) == id)
			end++;
		snprintf(key, sizeof(key), "%lld", (long long) id);
		r = ax_strmap_get(d->runs, key);
		if (state != NULL && strcmp(state, "CANCELED") == 0)
			goto next;
		if (r != NULL) {
			if (mode != M_RELOAD || r->phase != R_ACTIVE)
				goto next;
			unlink_active(r);
			run_drop(d, r);
		}
		if (mode == M_RELOAD && !has)
			goto next;
		v = dver_get(d,
		             ax_store_cell_i64(res, row, AX_DEPS_C_VERSION));
		if (v == NULL)
			goto next;
		r = run_new(d, id, v,
		            ax_store_cell_i64(res, row, AX_DEPS_C_LOGICAL),
		            ax_store_cell_i64(res, row, AX_DEPS_C_DUE), NULL);
		if (r == NULL) {
			oom("run");
			goto next;
		}
		if (has) {
			if (state == NULL || strcmp(state, "RUNNING") != 0)
				chg(d, id, "RUNNING", NULL);
			rebuild_active(d, r, res, row, end, mode);
		} else {
			r->backfill     = mode == M_BACKFILL_SERIAL ? 1
			        : mode == M_BACKFILL_PARALLEL       ? 2
			                                            : 0;
			fresh[nfresh++] = r;
		}
	next:
		row = end;
	}
	for (size_t i = 0; i < nfresh; i++)
		admit(d, fresh[i]);
	free(fresh);
}

static ax_err
startup(dd *d)
{
	PGresult *res = NULL;
	ax_err    rv;

	d->started = 1;
	if ((rv = ax_store_deps_load_runs(d->store, NULL, 0, &res)) != AX_OK) {
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
		        "rebuild of unfinished runs failed: %s",
		        ax_err_detail());
		return rv;
	}
	build(d, res, M_RESTART);
	ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
	        "rebuilt %llu active run(s) from %d row(s); %zu in memory",
	        (unsigned long long) d->stats->rebuilt, PQntuples(res),
	        ax_strmap_count(d->runs));
	PQclear(res);
	return AX_OK;
}

/* Reloads the runs of ids from PostgreSQL (mode M_*). */
static void
reload(dd *d, const int64_t *ids, size_t n, int mode)
{
	PGresult *res = NULL;

	if (ax_store_deps_load_runs(d->store, ids, n, &res) != AX_OK) {
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
		        "reading %zu run(s) failed: %s", n, ax_err_detail());
		return;
	}
	build(d, res, mode);
	PQclear(res);
}

/* --- control ops --------------------------------------------------------
 */

/*
 * Durable commands (engine/store_commands.h): a clear marks its
 * control_command row applied in the clear's own transaction, and rolls
 * back when the row is no longer pending (forwarded twice: already
 * applied); mark and backfill, whose rows the API wrote, claim theirs
 * before the run is re-read. A command that names no instance is
 * rejected.
 */
static int
cmd_finish(dd *d, ax_store *s, int64_t id, ax_cmd_status st,
           const char *result, const char *reason)
{
	ax_store_cmd_done c = {
		.id = id, .status = st, .result_json = result, .reason = reason
	};

	if (id <= 0)
		return 1;
	if (ax_store_commands_finish(s ? s : d->store, &c, 1, NULL) != AX_OK) {
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "command %lld: outcome not written (sent again "
		        "later): %s",
		        (long long) id, ax_err_detail());
		return 0;
	}
	if (!c.claimed)
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
		        "command %lld was applied already: skipped",
		        (long long) id);
	return c.claimed;
}

/* Rejects command id when the instance of op does not exist. */
static void
cmd_no_instance(dd *d, const Ax__ControlOp *op)
{
	char why[160];

	snprintf(why, sizeof(why),
	         "no task instance %lld (or it belongs to no run)",
	         (long long) op->instance_id);
	(void) cmd_finish(d, NULL, op->command_id, AX_CMD_REJECTED, NULL, why);
}

typedef struct clear_tx {
	int64_t  run;
	int64_t *ids;
	int32_t *base;
	size_t   n, cleared;
	pev    **evs;
	size_t   nev;
	int64_t  command_id; /* 0: none */
	int      dup;        /* out: the command was applied already */
} clear_tx;

static ax_err
clear_fn(ax_store *s, void *arg)
{
	clear_tx           *c  = arg;
	ax_store_run_change rc = { .run_id = c->run, .state = "RUNNING" };
	ax_store_event_row *rows;
	ax_err              rv;

	if ((rv = ax_store_deps_clear(s, c->ids, c->base, c->n,
	                              &c->cleared)) != AX_OK ||
	    (rv = ax_store_deps_runs_update(s, &rc, 1)) != AX_OK)
		return rv;
	if ((rows = calloc(c->nev + 1, sizeof(*rows))) == NULL)
		return ax_err_set(AX_ENOMEM, "%s: out of memory", COMP);
	for (size_t i = 0; i < c->nev; i++)
		ax_flow_event_row(&c->evs[i]->e.ev, &rows[i]);
	rv = ax_store_insert_events(s, rows, c->nev, NULL, NULL);
	free(rows);
	if (rv == AX_OK && c->command_id > 0) {
		ax_store_cmd_done cd = { .id     = c->command_id,
			                 .status = AX_CMD_APPLIED };
		char              res[96];
		snprintf(res, sizeof(res), "{\"run_id\":%lld,\"cleared\":%zu}",
		         (long long) c->run, c->cleared);
		cd.result_json = res;
		c->dup         = 0;
		if ((rv = ax_store_commands_finish(s, &cd, 1, NULL)) ==
		        AX_OK &&
		    !cd.claimed) {
			c->dup = 1; /* roll the second clear back */
			rv     = ax_err_set(AX_EEXIST,
			                    "command %lld was applied already",
			                    (long long) c->command_id);
		}
	}
	return rv;
}

/*
 * Clear: the instance (and its transitive downstreams when asked) back to
 * PENDING with MANUAL_CLEAR and a fresh try budget, in one transaction;
 * then the run is rebuilt and what is ready is released.
 */
static void
do_clear(dd *d, const Ax__ControlOp *op)
{
	int64_t   run;
	PGresult *res = NULL;
	clear_tx  c   = { 0 };
	dver     *v   = NULL;
	drun      tmp;

	ax_err rv =
	    ax_store_deps_instance_run(d->store, op->instance_id, &run);
	if (rv == AX_ENOENT)
		cmd_no_instance(d, op);
	if (rv != AX_OK ||
	    ax_store_deps_load_runs(d->store, &run, 1, &res) != AX_OK) {
		ax_logf(AX_LOG_WARN, COMP, NULL,
		        &(ax_log_ids) { .instance = op->instance_id },
		        "clear dropped: %s", ax_err_detail());
		return;
	}
	int nrow = PQntuples(res);
	if (nrow == 0 ||
	    (v = dver_get(d, ax_store_cell_i64(res, 0, AX_DEPS_C_VERSION))) ==
	        NULL)
		goto out;
	v->refs++; /* pinned while reload() below may drop the run */
	uint8_t *sel = calloc(v->ntask + 1, 1);
	size_t  *que = calloc(v->ntask + 1, sizeof(*que));
	c.ids        = calloc((size_t) nrow + 1, sizeof(*c.ids));
	c.base       = calloc((size_t) nrow + 1, sizeof(*c.base));
	c.evs        = calloc((size_t) nrow + 1, sizeof(*c.evs));
	if (!sel || !que || !c.ids || !c.base || !c.evs) {
		oom("clear");
		free(sel);
		free(que);
		goto out;
	}
	/* the target task, then its downstream closure when asked */
	long    tt = -1;
	int64_t ts = 0;
	for (int row = 0; row < nrow; row++)
		if (ax_store_cell_i64(res, row, AX_DEPS_C_TI_ID) ==
		    op->instance_id) {
			const char *task =
			    ax_store_cell(res, row, AX_DEPS_C_TASK);
			tt = ax_dag_entry_task_index(v->e, task ? task : "");
			ts = ax_store_cell_i64(res, row, AX_DEPS_C_SHARD);
		}
	if (tt >= 0 && op->downstream) {
		size_t head = 0, tail = 0;
		que[tail++] = (size_t) tt;
		while (head < tail) {
			size_t u = que[head++];
			for (size_t k = v->doff[u]; k < v->doff[u + 1]; k++)
				if (!sel[v->down[k]]) {
					sel[v->down[k]] = 1;
					que[tail++]     = v->down[k];
				}
		}
	}
	memset(&tmp, 0, sizeof(tmp));
	tmp.id         = run;
	tmp.v          = v;
	tmp.logical_us = ax_store_cell_i64(res, 0, AX_DEPS_C_LOGICAL);
	for (int row = 0; tt >= 0 && row < nrow; row++) {
		const char *task = ax_store_cell(res, row, AX_DEPS_C_TASK);
		long    t  = task ? ax_dag_entry_task_index(v->e, task) : -1;
		int64_t sh = ax_store_cell_i64(res, row, AX_DEPS_C_SHARD);
		if (t < 0 || !((t == tt && sh == ts) || sel[t]))
			continue;
		c.ids[c.n]  = ax_store_cell_i64(res, row, AX_DEPS_C_TI_ID);
		c.base[c.n] = v->tries[t];
		emit(d, &tmp, "instance.cleared", "MANUAL_CLEAR", task,
		     (int32_t) sh, c.ids[c.n], NULL);
		c.evs[c.nev++] = d->evs[d->nev - 1];
		d->nev--; /* written in the clear's own transaction */
		c.n++;
	}
	free(sel);
	free(que);
	c.run        = run;
	c.command_id = op->command_id;
	if (c.n == 0) {
		ax_logf(AX_LOG_WARN, COMP, NULL,
		        &(ax_log_ids) { .instance = op->instance_id },
		        "clear: instance not found in its run");
		cmd_no_instance(d, op);
		goto out;
	}
	if (ax_store_tx(d->store, clear_fn, &c) != AX_OK) {
		ax_logf(c.dup ? AX_LOG_INFO : AX_LOG_ERROR, COMP, NULL,
		        &(ax_log_ids) { .instance = op->instance_id },
		        "clear %s: %s", c.dup ? "skipped" : "failed",
		        ax_err_detail());
		goto out;
	}
	for (size_t i = 0; i < c.nev; i++)
		(void) ax_flow_event_send(d->self, &c.evs[i]->e, 1);
	d->stats->cleared += c.cleared;
	ax_logf(AX_LOG_INFO, COMP, "MANUAL_CLEAR",
	        &(ax_log_ids) { .dag      = v->e->dag->name,
	                        .run      = run,
	                        .instance = op->instance_id },
	        "cleared %zu instance(s)%s", c.cleared,
	        op->downstream ? " with downstreams" : "");
	reload(d, &run, 1, M_RELOAD);
out:
	if (v != NULL) {
		v->refs--;
		dver_unused(d, v);
	}
	for (size_t i = 0; i < c.nev; i++)
		free(c.evs[i]);
	free(c.evs);
	free(c.ids);
	free(c.base);
	PQclear(res);
}

static void
do_mark(dd *d, const Ax__ControlOp *op)
{
	int64_t run;

	char   res[96];
	ax_err rv =
	    ax_store_deps_instance_run(d->store, op->instance_id, &run);
	if (rv == AX_ENOENT)
		cmd_no_instance(d, op);
	if (rv != AX_OK) {
		ax_logf(AX_LOG_WARN, COMP, NULL,
		        &(ax_log_ids) { .instance = op->instance_id },
		        "mark dropped: %s", ax_err_detail());
		return;
	}
	snprintf(res, sizeof(res), "{\"run_id\":%lld,\"state\":\"%s\"}",
	         (long long) run, op->state ? op->state : "");
	if (!cmd_finish(d, NULL, op->command_id, AX_CMD_APPLIED, res, NULL))
		return;
	ax_logf(AX_LOG_INFO, COMP, NULL,
	        &(ax_log_ids) { .run = run, .instance = op->instance_id },
	        "instance marked %s: run re-read", op->state);
	reload(d, &run, 1, M_RELOAD);
}

static void
on_control(dd *d, const Ax__ControlOp *op)
{
	if (strcmp(op->op, "clear") == 0)
		do_clear(d, op);
	else if (strcmp(op->op, "mark") == 0)
		do_mark(d, op);
	else if (strcmp(op->op, "backfill") == 0) {
		/* result: {"run_ids":[...]}, the runs the API created */
		char  *res = malloc(op->n_run_ids * 22 + 16);
		size_t w   = 0;
		if (res != NULL) {
			w = (size_t) sprintf(res, "{\"run_ids\":[");
			for (size_t i = 0; i < op->n_run_ids; i++)
				w += (size_t) sprintf(
				    res + w, "%s%lld", i ? "," : "",
				    (long long) op->run_ids[i]);
			strcpy(res + w, "]}");
		}
		if (res != NULL &&
		    cmd_finish(d, NULL, op->command_id, AX_CMD_APPLIED, res,
		               NULL))
			reload(d, op->run_ids, op->n_run_ids,
			       strcmp(op->mode, "parallel") == 0
			           ? M_BACKFILL_PARALLEL
			           : M_BACKFILL_SERIAL);
		free(res);
	} else
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "control op '%s' is not the dependency detector's: "
		        "dropped",
		        op->op);
}

static void
on_due(dd *d, const Ax__Command *cmd)
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
	if ((v = dver_get(d, due->dag_version_id)) == NULL)
		return;
	r = run_new(d, due->dag_run_id, v, due->logical_time_us,
	            due->due_at_us, cmd->trace_id);
	if (r == NULL) {
		oom("run");
		return;
	}
	admit(d, r);
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
		send_cmd(d, AX_A_PRE_HOOK, &cmd, NULL);
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
		send_cmd(d, AX_A_DEPENDENCY_DETECTOR, &cmd, NULL);
	}
	PQclear(d->live);
	d->live = NULL;
	wr_clear(d);
	d->nchg = d->nsup = d->nev = d->ndn = 0;
}

/* --- actor --------------------------------------------------------------
 */

static ax_err
dd_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	dd *d = state;

	spill_drain(d); /* older releases go first */
	if (!d->started && startup(d) != AX_OK) {
		/* PostgreSQL unreachable: the tick tries again */
		d->started = 0;
		ax_actor_set_deadline(self,
		                      ax_clock_mono_us() + AX_USEC_PER_SEC);
	}
	for (size_t i = 0; i < n; i++) {
		if (items[i].type != AX_ITEM_COMMAND)
			continue;
		Ax__Command *cmd = ax_pipeline_unpack(self, &items[i]);
		if (cmd == NULL)
			continue;
		switch (cmd->body_case) {
		case AX__COMMAND__BODY_DUE:
			on_due(d, cmd);
			break;
		case AX__COMMAND__BODY_INSTANCE_SUCCEEDED:
			on_succeeded(d, cmd->instance_succeeded);
			break;
		case AX__COMMAND__BODY_INSTANCE_FINISHED:
			on_finished(d, cmd->instance_finished);
			break;
		case AX__COMMAND__BODY_RUN_COMPLETED:
			on_run_completed(d, cmd->run_completed);
			break;
		case AX__COMMAND__BODY_CONTROL:
			on_control(d, cmd->control);
			break;
		case AX__COMMAND__BODY_TIMER_FIRED:
			on_timer(d, cmd->timer_fired);
			break;
		default:
			ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
			        "unexpected command %d from %s: dropped",
			        (int) cmd->body_case, items[i].from);
		}
		ax__command__free_unpacked(cmd, NULL);
	}
	flush(d);
	return AX_OK;
}

static ax_err
dd_tick(ax_actor *self, void *state, int64_t now_mono_us)
{
	dd *d = state;
	(void) self;

	spill_drain(d);
	if (d->started)
		return AX_OK;
	if (startup(d) != AX_OK) {
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
	run_free_mem(p);
}

static void
dd_fini(void *state)
{
	dd *d = state;
	if (d == NULL)
		return;
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
	ax_strmap_free(d->dqs, dq_free);
	ax_strmap_free(d->waiters, rvec_free);
	ax_strmap_free(d->vers, dver_free);
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
	free(d);
}

ax_err
ax_dependency_detector_add_ex(ax_actor_system *sys, const ax_pipeline_ctx *ctx,
                              ax_dependency_detector_stats *stats)
{
	static const ax_actor_ops ops = {
		.handle = dd_handle,
		.tick   = dd_tick,
		.fini   = dd_fini,
	};
	char   url[256];
	dd    *d = calloc(1, sizeof(*d));
	ax_err rv;

	if (d == NULL)
		return ax_err_set(AX_ENOMEM, "%s: out of memory", COMP);
	d->ctx   = ctx;
	d->stats = stats ? stats : &d->own;
	memset(d->stats, 0, sizeof(*d->stats));
	if ((rv = ax_strmap_new(&d->vers)) != AX_OK ||
	    (rv = ax_strmap_new(&d->runs)) != AX_OK ||
	    (rv = ax_strmap_new(&d->dqs)) != AX_OK ||
	    (rv = ax_strmap_new(&d->waiters)) != AX_OK ||
	    (rv = ax_store_open(ctx->dsn, &d->store)) != AX_OK) {
		dd_fini(d);
		return rv;
	}
	ax_actor_config cfg = {
		.name = AX_A_DEPENDENCY_DETECTOR,
		.url = ax_config_actor_addr(ctx->cfg, AX_A_DEPENDENCY_DETECTOR,
		                            url, sizeof(url)),
		/* RunCompleted goes to itself; InstanceReady is a forward
		 * edge but shares the outbox */
		.send_nonblock = 1,
	};
	if ((rv = ax_actor_system_add(sys, &cfg, &ops, d, &d->self)) != AX_OK)
		return rv;
	/* the rebuild runs as the first tick (or before the first batch) */
	ax_actor_set_deadline(d->self, ax_clock_mono_us());
	return AX_OK;
}

ax_err
ax_dependency_detector_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx)
{
	return ax_dependency_detector_add_ex(sys, ctx, NULL);
}
