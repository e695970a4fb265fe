/*
 * graph.c - the dependency graph: the graph of a DAG version (computed
 * once per version, shared by its runs), the per-run counters of unmet
 * upstream instances, the release of downstream instances (InstanceReady
 * to the resource detector, spilled past the outbox budget), instance
 * results (InstanceSucceeded, InstanceFinished), and the DAG-to-DAG edges
 * (depends_on_dags: a run waits for its upstream DAGs' runs).
 *
 * Invariants: an instance is released at most once per clear (its
 * in-memory state moves WAIT -> SENT once); a duplicate InstanceSucceeded
 * or InstanceFinished changes nothing. Cost: O(1) per result plus
 * O(downstreams) per release.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "dependency_internal.h"
#include "resources.h"
#include "store_deps.h"

/* --- DAG versions -------------------------------------------------------
 */

void
axdd_dver_free(void *p)
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
		axdd_dver_free(v);
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
		axdd_dver_free(v);
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
dver *
axdd_dver_get(dd *d, int64_t version_id)
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
		axdd_dver_free(v);
		axdd_oom("DAG version");
		return NULL;
	}
	d->stats->versions++;
	return v;
}

/* Frees v once no run in memory uses it (the registry keeps the DAG). */
void
axdd_dver_unused(dd *d, dver *v)
{
	if (v == NULL || v->refs > 0)
		return;
	ax_strmap_del(d->vers, v->key);
	axdd_dver_free(v);
	d->stats->versions--;
}

/* --- releases -----------------------------------------------------------
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
		axdd_oom("release queue");
		return;
	}
	ax__command__pack(c, buf);
	d->spill[d->nspill++] = (dd_packed) { .data = buf, .len = len };
	ax_actor_set_deadline(d->self, ax_clock_mono_us() + DD_SPILL_RETRY);
}

/* Sends queued releases while the outbox has room; the tick continues. */
void
axdd_spill_drain(dd *d)
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

void
axdd_send_ready(dd *d, drun *r, size_t t, int32_t j)
{
	const ax_task                     *k   = &r->v->e->dag->tasks[t];
	Ax__Command                        cmd = AX__COMMAND__INIT;
	Ax__InstanceReady                  rd  = AX__INSTANCE_READY__INIT;
	Ax__InstanceRef                    ref;
	Ax__InstanceReady__ResourcesEntry  resv[AX_RES_MAX];
	Ax__InstanceReady__ResourcesEntry *resp[AX_RES_MAX];

	fill_ref(r, t, j, &ref);
	rd.instance = &ref;
	rd.priority = k->eff.priority;
	rd.channel =
	    (char *) ax_flow_db_channel(ax_channel_name(k->eff.channel));
	rd.worker_group =
	    (char *) (k->eff.worker_group ? k->eff.worker_group : "default");
	rd.pool         = (char *) (k->eff.pool ? k->eff.pool : "");
	rd.due_at_us    = r->due_us;
	rd.slots        = 1;
	rd.impact       = (char *) ax_impact_name(r->v->e->dag->impact);
	rd.cpu_milli    = k->eff.cpu_milli;
	rd.memory_bytes = k->eff.memory_bytes;
	/* named resources (validated by the DAG loader: at most AX_RES_MAX) */
	for (size_t i = 0; i < k->eff.res.n && i < AX_RES_MAX; i++) {
		Ax__InstanceReady__ResourcesEntry e =
		    AX__INSTANCE_READY__RESOURCES_ENTRY__INIT;
		e.key   = (char *) k->eff.res.v[i].key;
		e.value = strtoll(k->eff.res.v[i].value, NULL, 10);
		resv[i] = e;
		resp[i] = &resv[i];
		rd.n_resources++;
	}
	rd.resources       = resp;
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
		axdd_send_cmd(d, AX_A_RESOURCE_DETECTOR, &cmd, r->trace);
	d->stats->released++;
}

/* Releases every WAIT shard of task t. */
void
axdd_release_task(dd *d, drun *r, size_t t)
{
	for (int32_t j = 0; j < r->v->shards[t]; j++) {
		size_t i = r->v->off[t] + (size_t) j;
		if (r->ist[i] != I_WAIT)
			continue;
		r->ist[i] = I_SENT;
		r->n_sent++;
		axdd_send_ready(d, r, t, j);
	}
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

void
axdd_on_succeeded(dd *d, const Ax__InstanceSucceeded *s)
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
			axdd_release_task(d, r, dn);
	}
	axdd_check_done(d, r);
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
			axdd_wait_reason(d, r->id,
			                 r->v->e->dag->tasks[dn].name);
		}
	}
	free(que);
	free(seen);
}

void
axdd_on_finished(dd *d, const Ax__InstanceFinished *f)
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
	axdd_check_done(d, r);
}

/* --- DAG-to-DAG waits (depends_on_dags) ---------------------------------
 */

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

void
axdd_rvec_free(void *p)
{
	rvec *w = p;
	if (w != NULL)
		free(w->v);
	free(w);
}

/* depends_on_dags: checks PostgreSQL once, waits or goes to the axdd_gate. */
void
axdd_admit(dd *d, drun *r)
{
	const ax_dag          *g = r->v->e->dag;
	ax_store_dagdep_check *c;

	if (g->n_deps == 0) {
		axdd_gate(d, r);
		return;
	}
	if ((c = calloc(g->n_deps, sizeof(*c))) == NULL) {
		axdd_oom("dag deps");
		axdd_run_drop(d, r);
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
			axdd_oom("waiter");
			continue;
		}
		/* once per (run, upstream DAG) */
		if (w->n == 0 || w->v[w->n - 1] != r)
			w->v[w->n++] = r;
		r->ndep_wait++;
	}
	free(c);
	if (r->ndep_wait > 0)
		axdd_hold(d, r, "WAIT_DEPENDENCY", "run.waiting");
	else
		axdd_gate(d, r);
}

/* RunCompleted: releases the runs waiting for that upstream run. */
void
axdd_on_run_completed(dd *d, const Ax__RunCompleted *rc)
{
	rvec  *w = ax_strmap_get(d->waiters, rc->dag);
	drun **go;
	size_t ngo = 0, keep = 0;

	if (w == NULL || w->n == 0 || strcmp(rc->state, "SUCCESS") != 0)
		return;
	if ((go = calloc(w->n, sizeof(*go))) == NULL) {
		axdd_oom("waiters");
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
		axdd_gate(d, go[i]);
	}
	free(go);
}
