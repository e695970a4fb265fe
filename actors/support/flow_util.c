/*
 * flow_util.c - instance keys, events and kept commands of the flow actors
 * (see flow_util.h).
 */
#include "flow_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "clock.h"
#include "log.h"

/* ---------------------------------------------------------------------- */
/* keys and events */

char *
ax_flow_key(const Ax__InstanceRef *ref, char *buf, size_t len)
{
	snprintf(buf, len, "%s\x1f%s\x1f%lld\x1f%d", ref->dag, ref->task,
	         (long long) ref->logical_time_us, ref->shard_index);
	return buf;
}

void
ax_flow_event_init(ax_flow_event *e, const char *source, const char *type,
                   const char *reason, const Ax__InstanceRef *ref,
                   const char *run_id, int32_t attempt, const char *trace,
                   const char *payload)
{
	Ax__Event init = AX__EVENT__INIT;

	e->ev         = init;
	e->ev.id      = ax_uuid_v7(e->id);
	e->ev.type    = (char *) type;
	e->ev.time_us = ax_clock_utc_us();
	e->ev.source  = (char *) source;
	if (reason != NULL)
		e->ev.reason = (char *) reason;
	if (ref != NULL) {
		e->ev.dag             = ref->dag;
		e->ev.dag_version_id  = ref->dag_version_id;
		e->ev.dag_run_id      = ref->dag_run_id;
		e->ev.task            = ref->task;
		e->ev.instance_id     = ref->instance_id;
		e->ev.logical_time_us = ref->logical_time_us;
		e->ev.shard_index     = ref->shard_index;
		e->ev.shard_total     = ref->shard_total;
	}
	if (run_id != NULL)
		e->ev.run_id = (char *) run_id;
	e->ev.attempt = attempt;
	if (trace != NULL)
		e->ev.trace_id = (char *) trace;
	if (payload != NULL)
		e->ev.payload_json = (char *) payload;
}

ax_err
ax_flow_event_send(ax_actor *self, ax_flow_event *e, int persisted)
{
	e->ev.persisted = persisted != 0;
	return ax_actor_send_pb(self, AX_A_EVENT_EMITTER, AX_ITEM_EVENT,
	                        (const ProtobufCMessage *) &e->ev);
}

void
ax_flow_event_row(const Ax__Event *ev, ax_store_event_row *row)
{
	*row = (ax_store_event_row) {
		.event_id        = ev->id,
		.type            = ev->type,
		.time_us         = ev->time_us,
		.dag             = ev->dag,
		.dag_run_id      = ev->dag_run_id,
		.instance_id     = ev->instance_id,
		.run_id          = ev->run_id,
		.attempt         = ev->attempt,
		.trace_id        = ev->trace_id,
		.reason          = ev->reason,
		.source          = ev->source,
		.task            = ev->task,
		.logical_time_us = ev->logical_time_us,
		.shard_index     = ev->shard_index,
		.shard_total     = ev->shard_total,
		.payload_json    = ev->payload_json,
	};
}

const char *
ax_flow_db_channel(const char *ch)
{
	if (ch == NULL || ch[0] == '\0')
		return "Px";
	if (strcasecmp(ch, "P0") == 0)
		return "P0";
	if (strcasecmp(ch, "k8s") == 0)
		return "k8s";
	if (strncasecmp(ch, "biz", 3) == 0)
		return "biz";
	return "Px";
}

/* ---------------------------------------------------------------------- */
/* pending commands */

void
ax_flow_pending_keep(ax_flow_pending *p, Ax__Command *cmd)
{
	size_t max = p->max ? p->max : 100000;

	if (p->n >= max) {
		p->dropped++;
		ax__command__free_unpacked(cmd, NULL);
		return;
	}
	if (p->n == p->cap) {
		size_t        c = p->cap ? p->cap * 2 : 256;
		Ax__Command **v = realloc(p->v, c * sizeof(*v));
		if (v == NULL) {
			p->dropped++;
			ax__command__free_unpacked(cmd, NULL);
			return;
		}
		p->v   = v;
		p->cap = c;
	}
	p->v[p->n++] = cmd;
}

Ax__Command **
ax_flow_pending_take(ax_flow_pending *p, size_t *n)
{
	Ax__Command **v = p->v;
	*n              = p->n;
	p->v            = NULL;
	p->n = p->cap = 0;
	return v;
}

ax_err
ax_flow_pending_collect(ax_flow_pending *p, ax_pipeline_msg *m)
{
	if (p->n > 0) {
		ax_pipeline_keep(m);
		ax_flow_pending_keep(p, m->cmd); /* keep order */
		return AX_OK;
	}
	if (AX_GROW(p->batch, p->capbatch, p->nbatch + 1) != AX_OK)
		return ax_err_set(AX_ENOMEM, "out of memory");
	ax_pipeline_keep(m);
	p->batch[p->nbatch++] = m->cmd;
	return AX_OK;
}

ax_err
ax_flow_pending_run(ax_actor *self, void *st, ax_flow_pending *p,
                    ax_flow_run_fn run)
{
	size_t n = p->nbatch;

	p->nbatch = 0; /* the commands are run's now */
	return run(self, st, p->batch, n);
}

ax_err
ax_flow_pending_retry(ax_actor *self, void *st, ax_flow_pending *p,
                      ax_flow_run_fn run)
{
	size_t        n;
	Ax__Command **v = ax_flow_pending_take(p, &n);
	ax_err        rv;

	rv = run(self, st, v, n);
	free(v);
	return rv;
}

void
ax_flow_pending_fini(ax_flow_pending *p)
{
	for (size_t i = 0; i < p->n; i++)
		ax__command__free_unpacked(p->v[i], NULL);
	for (size_t i = 0; i < p->nbatch; i++)
		ax__command__free_unpacked(p->batch[i], NULL);
	free(p->v);
	free(p->batch);
	p->v     = NULL;
	p->batch = NULL;
	p->n = p->cap = p->nbatch = p->capbatch = 0;
}

int
ax_flow_db_transient(ax_err rv)
{
	return rv == AX_EDBCONN || rv == AX_ERETRY || rv == AX_EDB ||
	    rv == AX_ETIMEDOUT;
}

/* ---------------------------------------------------------------------- */
/* warm-up */

void
ax_flow_store_warm(ax_store **store, const char *dsn, const char *comp,
                   const ax_flow_prepare_fn *prep, size_t n)
{
	int64_t t0 = ax_clock_mono_us();
	ax_err  rv = AX_OK;

	if (dsn == NULL || *dsn == '\0')
		return;
	if (*store == NULL)
		rv = ax_store_open(dsn, store);
	for (size_t i = 0; rv == AX_OK && i < n; i++)
		rv = prep[i](*store);
	if (rv == AX_OK)
		rv = ax_store_warm(*store);
	if (rv != AX_OK)
		ax_logf(AX_LOG_DEBUG, comp, NULL, NULL,
		        "statements not planned ahead (at first use "
		        "instead): %s",
		        ax_err_detail());
	else
		ax_logf(AX_LOG_DEBUG, comp, NULL, NULL,
		        "statements planned ahead in %lld us",
		        (long long) (ax_clock_mono_us() - t0));
}
