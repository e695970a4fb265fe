/*
 * pipeline.c - what every pipeline actor shares: sending commands,
 * emitting events, and the glue between an actor's definition table
 * (ax_pipeline_def) and the actor runtime: one allocation per actor (the
 * table's pointer, then the state), one unpack per item, dispatch by
 * command kind, one free per command the handler did not keep.
 */
#include "pipeline.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "uuid.h"

ax_err
ax_pipeline_send(ax_actor *self, const char *dest, const Ax__Command *cmd)
{
	return ax_actor_send_pb(self, dest, AX_ITEM_COMMAND,
	                        (const ProtobufCMessage *) cmd);
}

ax_err
ax_pipeline_event(ax_actor *self, const char *type, const char *reason,
                  const ax_log_ids *ids, const char *payload_json,
                  int persisted)
{
	Ax__Event ev = AX__EVENT__INIT;
	char      id[AX_UUID_LEN];

	ev.id      = ax_uuid_v7(id);
	ev.type    = (char *) type;
	ev.time_us = ax_clock_utc_us();
	ev.source  = (char *) ax_actor_name(self);
	if (reason != NULL)
		ev.reason = (char *) reason;
	if (ids != NULL) {
		if (ids->dag != NULL)
			ev.dag = (char *) ids->dag;
		ev.dag_run_id  = ids->run;
		ev.instance_id = ids->instance;
		if (ids->run_id != NULL)
			ev.run_id = (char *) ids->run_id;
		ev.attempt = ids->attempt;
	}
	if (payload_json != NULL)
		ev.payload_json = (char *) payload_json;
	ev.persisted = persisted != 0;
	return ax_actor_send_pb(self, AX_A_EVENT_EMITTER, AX_ITEM_EVENT,
	                        (const ProtobufCMessage *) &ev);
}

Ax__Command *
ax_pipeline_unpack(ax_actor *self, const ax_actor_item *item)
{
	Ax__Command *cmd;

	cmd =
	    ax__command__unpack(NULL, item->len, (const uint8_t *) item->data);
	if (cmd == NULL)
		ax_logf(AX_LOG_WARN, ax_actor_name(self), "BAD_MESSAGE", NULL,
		        "dropped %u bytes from %s that are not an ax.Command",
		        item->len, item->from);
	return cmd;
}

/* ---------------------------------------------------------------------- */
/* defining an actor */

/* What the runtime holds for a table-defined actor: the table, then the
 * actor's state (aligned for any type). */
typedef struct pl_actor {
	const ax_pipeline_def *def;
	ax_actor              *self;
	max_align_t            state[];
} pl_actor;

void
ax_pipeline_keep(ax_pipeline_msg *m)
{
	m->kept = 1;
}

/* Drops an item the actor has no handler for: logged with the actor's
 * name, then handed to on_drop. */
static void
refuse(pl_actor *a, ax_actor *self, const ax_actor_item *it, int kind)
{
	if (it->type == AX_ITEM_COMMAND)
		ax_logf(AX_LOG_WARN, ax_actor_name(self), NULL, NULL,
		        "unexpected command %d from %s: dropped", kind,
		        it->from);
	else
		ax_logf(AX_LOG_WARN, ax_actor_name(self), NULL, NULL,
		        "unexpected item of type %u from %s: dropped",
		        (unsigned) it->type, it->from);
	if (a->def->on_drop != NULL)
		a->def->on_drop(self, a->state, it);
}

/* Unpacks, dispatches and (unless kept) frees one command item. */
static ax_err
pl_command(pl_actor *a, ax_actor *self, const ax_actor_item *it)
{
	const ax_pipeline_def *def = a->def;
	ax_pipeline_msg        m   = { .from = it->from };
	ax_pipeline_fn         fn  = NULL;
	ax_err                 rv  = AX_OK;

	if ((m.cmd = ax_pipeline_unpack(self, it)) == NULL) {
		if (def->on_drop != NULL)
			def->on_drop(self, a->state, it);
		return AX_OK;
	}
	if ((unsigned) m.cmd->body_case < AX_PIPELINE_BODY_MAX)
		fn = def->on[m.cmd->body_case];
	if (fn == NULL)
		refuse(a, self, it, (int) m.cmd->body_case);
	else
		rv = fn(self, a->state, &m);
	if (!m.kept)
		ax__command__free_unpacked(m.cmd, NULL);
	return rv;
}

/* Unpacks, dispatches and (unless kept) frees one event item. */
static ax_err
pl_event(pl_actor *a, ax_actor *self, const ax_actor_item *it)
{
	const ax_pipeline_def *def = a->def;
	ax_pipeline_msg        m   = { .from = it->from };
	ax_err                 rv;

	m.ev = ax__event__unpack(NULL, it->len, (const uint8_t *) it->data);
	if (m.ev == NULL) {
		ax_logf(AX_LOG_WARN, ax_actor_name(self), "BAD_MESSAGE", NULL,
		        "dropped %u bytes from %s that are not an ax.Event",
		        it->len, it->from);
		if (def->on_drop != NULL)
			def->on_drop(self, a->state, it);
		return AX_OK;
	}
	rv = def->on_event(self, a->state, &m);
	if (!m.kept)
		ax__event__free_unpacked(m.ev, NULL);
	return rv;
}

/* Records r as the batch's result when it is the first error, with its
 * detail (a later error of the batch would overwrite the thread's). */
static void
first_error(ax_err r, ax_err *rv, char *detail, size_t len)
{
	if (r == AX_OK || *rv != AX_OK)
		return;
	*rv = r;
	snprintf(detail, len, "%s", ax_err_detail());
}

static ax_err
pl_handle(ax_actor *self, void *w, const ax_actor_item *items, size_t n)
{
	pl_actor              *a   = w;
	const ax_pipeline_def *def = a->def;
	ax_err                 rv  = AX_OK, r;
	char                   detail[512];

	if (def->batch_begin != NULL)
		def->batch_begin(self, a->state, n);
	for (size_t i = 0; i < n; i++) {
		const ax_actor_item *it = &items[i];
		r                       = AX_OK;
		if (it->type == AX_ITEM_COMMAND)
			r = pl_command(a, self, it);
		else if (def->wake_type != 0 && it->type == def->wake_type)
			continue; /* its batch is the point */
		else if (it->type == AX_ITEM_EVENT && def->on_event != NULL)
			r = pl_event(a, self, it);
		else if (it->type != AX_ITEM_EVENT && def->on_item != NULL)
			r = def->on_item(self, a->state, it);
		else
			refuse(a, self, it, 0);
		first_error(r, &rv, detail, sizeof(detail));
	}
	if (def->batch_end != NULL) {
		r = def->batch_end(self, a->state);
		first_error(r, &rv, detail, sizeof(detail));
	}
	return rv == AX_OK ? AX_OK : ax_err_set(rv, "%s", detail);
}

static ax_err
pl_tick(ax_actor *self, void *w, int64_t now_mono_us)
{
	pl_actor *a  = w;
	ax_err    rv = AX_OK;

	if (a->def->tick != NULL)
		rv = a->def->tick(self, a->state, now_mono_us);
	if (a->def->tick_period_us > 0)
		ax_actor_set_deadline(
		    self, ax_clock_mono_us() + a->def->tick_period_us);
	return rv;
}

static void
pl_fini(void *w)
{
	pl_actor *a = w;

	if (a == NULL)
		return;
	if (a->def->fini != NULL)
		a->def->fini(a->state);
	free(a);
}

static const ax_actor_ops pl_ops = {
	.handle = pl_handle,
	.tick   = pl_tick,
	.fini   = pl_fini,
};

ax_err
ax_pipeline_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx,
                const ax_pipeline_def *def, void *arg, void **out_state)
{
	char      url[256];
	pl_actor *a;
	ax_err    rv;

	if (out_state != NULL)
		*out_state = NULL;
	if (def == NULL || def->name == NULL)
		return ax_err_set(AX_EINVAL,
		                  "pipeline: an actor without a "
		                  "name");
	if ((a = calloc(1, sizeof(*a) + def->state_size)) == NULL)
		return ax_err_set(AX_ENOMEM, "%s: out of memory", def->name);
	a->def = def;
	if (def->init != NULL &&
	    (rv = def->init(a->state, ctx, arg)) != AX_OK) {
		pl_fini(a);
		return rv;
	}
	ax_actor_config cfg = {
		.name = def->name,
		.url  = ax_config_actor_addr(ctx != NULL ? ctx->cfg : NULL,
		                            def->name, url, sizeof(url)),
		.inbox_depth   = def->inbox_depth,
		.send_nonblock = def->nonblock,
	};
	if ((rv = ax_actor_system_add(sys, &cfg, &pl_ops, a, &a->self)) !=
	    AX_OK)
		return rv; /* a freed by the system (pl_fini) */
	if (def->added != NULL &&
	    (rv = def->added(a->self, a->state)) != AX_OK)
		return rv; /* a is the system's: freed with it */
	if (def->tick_at_start)
		ax_actor_set_deadline(a->self, ax_clock_mono_us());
	else if (def->tick_period_us > 0)
		ax_actor_set_deadline(
		    a->self, ax_clock_mono_us() + def->tick_period_us);
	if (out_state != NULL)
		*out_state = a->state;
	return AX_OK;
}
