/*
 * hooks.c - pre_hook and post_hook: two actors over one const table of
 * hooks (see hooks.h).
 *
 * Invariants: a pre hook never changes the attempt; the first verdict
 * other than PASS wins. The set of canceled instances is bounded (the
 * oldest is forgotten first): a cancel matters only for the few attempts
 * in flight between admission and dispatch.
 *
 * Back edge: pre_hook's AttemptHeld to resource_detector and its
 * CANCELED result to result_handler close cycles, so it sends without
 * blocking; what it holds in its outbox is bounded by the admission
 * limit of the resource detector.
 */
#include "hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dag_registry.h"
#include "flow_util.h"
#include "hmap.h"

#define HK_CANCELED_MAX 65536

typedef enum hk_verdict {
	HK_PASS = 0,
	HK_HOLD, /* back to resource_detector until the rule lifts */
	HK_DROP, /* never dispatched: reported CANCELED */
} hk_verdict;

typedef struct hk_state {
	const ax_pipeline_ctx *ctx;
	int                    post;     /* 1: post_hook, 0: pre_hook */
	ax_strmap             *canceled; /* instance id -> (void *) 1 */
	int64_t               *ring;     /* ids in arrival order */
	size_t                 ring_n, ring_head;
	uint64_t               passed, held, dropped, results;
} hk_state;

/* Payload of a post event under construction. */
typedef struct hk_payload {
	char   buf[2048];
	size_t len;
} hk_payload;

typedef struct hk_ops {
	const char *name;
	/* pre: the verdict for r; *reason is the reason code when not PASS */
	hk_verdict (*pre)(hk_state *st, const Ax__AttemptRendered *r,
	                  const char **reason);
	/* post: adds "key":value members (with a leading comma) to p */
	void (*post)(hk_state *st, const Ax__AttemptResult *res,
	             hk_payload *p);
} hk_ops;

/* ---------------------------------------------------------------------- */
/* built-in hooks */

static hk_verdict
pre_dag_paused(hk_state *st, const Ax__AttemptRendered *r, const char **reason)
{
	if (st->ctx->registry == NULL ||
	    !ax_dag_registry_paused(st->ctx->registry, r->instance->dag))
		return HK_PASS;
	*reason = "DAG_PAUSED";
	return HK_HOLD;
}

static hk_verdict
pre_canceled(hk_state *st, const Ax__AttemptRendered *r, const char **reason)
{
	char id[24];
	snprintf(id, sizeof(id), "%lld", (long long) r->instance->instance_id);
	if (r->instance->instance_id == 0 ||
	    ax_strmap_get(st->canceled, id) == NULL)
		return HK_PASS;
	*reason = "CANCELED";
	return HK_DROP;
}

static void
post_log_location(hk_state *st, const Ax__AttemptResult *res, hk_payload *p)
{
	char esc[1024];

	(void) st;
	if (res->log_path == NULL || res->log_path[0] == '\0')
		return;
	esc[0] = '\0';
	ax_json_escape(esc, 0, sizeof(esc), res->log_path);
	int w = snprintf(p->buf + p->len, sizeof(p->buf) - p->len,
	                 ",\"log_path\":\"%s\"", esc);
	if (w > 0 && (size_t) w < sizeof(p->buf) - p->len)
		p->len += (size_t) w;
}

/* The hooks, in the order they run. */
static const hk_ops hk_table[] = {
	{ .name = "dag_paused", .pre = pre_dag_paused },
	{ .name = "canceled", .pre = pre_canceled },
	{ .name = "log_location", .post = post_log_location },
};

#define HK_N (sizeof(hk_table) / sizeof(hk_table[0]))

/* ---------------------------------------------------------------------- */
/* pre_hook */

static void
remember_cancel(hk_state *st, int64_t instance_id)
{
	char id[24];

	if (instance_id == 0)
		return;
	snprintf(id, sizeof(id), "%lld", (long long) instance_id);
	if (ax_strmap_get(st->canceled, id) != NULL)
		return;
	if (st->ring_n == HK_CANCELED_MAX) {
		char old[24];
		snprintf(old, sizeof(old), "%lld",
		         (long long) st->ring[st->ring_head]);
		ax_strmap_del(st->canceled, old);
		st->ring_n--;
		st->ring_head = (st->ring_head + 1) % HK_CANCELED_MAX;
	}
	if (ax_strmap_put(st->canceled, id, (void *) 1) != AX_OK)
		return;
	st->ring[(st->ring_head + st->ring_n++) % HK_CANCELED_MAX] =
	    instance_id;
}

static void
hold(ax_actor *self, const Ax__Command *cmd, const char *reason)
{
	const Ax__AttemptRendered *r   = cmd->attempt_rendered;
	Ax__Command                c   = AX__COMMAND__INIT;
	Ax__AttemptHeld            h   = AX__ATTEMPT_HELD__INIT;
	Ax__InstanceReady          rdy = AX__INSTANCE_READY__INIT;

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
	c.trace_id       = cmd->trace_id;
	c.issued_at_us   = ax_clock_utc_us();
	(void) ax_pipeline_send(self, AX_A_RESOURCE_DETECTOR, &c);
}

static void
drop(ax_actor *self, const Ax__Command *cmd, const char *reason)
{
	const Ax__AttemptRendered *r   = cmd->attempt_rendered;
	Ax__Command                c   = AX__COMMAND__INIT;
	Ax__AttemptResult          res = AX__ATTEMPT_RESULT__INIT;

	res.instance    = r->instance;
	res.run_id      = r->run_id;
	res.attempt     = r->attempt;
	res.status      = AX__ATTEMPT_STATUS__ATTEMPT_CANCELED;
	res.ended_at_us = ax_clock_utc_us();
	res.reason      = (char *) reason;
	res.error       = "canceled before dispatch";
	c.body_case     = AX__COMMAND__BODY_RESULT;
	c.result        = &res;
	c.trace_id      = cmd->trace_id;
	c.issued_at_us  = res.ended_at_us;
	(void) ax_pipeline_send(self, AX_A_RESULT_HANDLER, &c);
}

static void
pre_one(ax_actor *self, hk_state *st, Ax__Command *cmd)
{
	const Ax__AttemptRendered *r      = cmd->attempt_rendered;
	const char                *reason = NULL;
	hk_verdict                 v      = HK_PASS;
	const char                *by     = NULL;

	for (size_t i = 0; i < HK_N && v == HK_PASS; i++)
		if (hk_table[i].pre != NULL) {
			v  = hk_table[i].pre(st, r, &reason);
			by = hk_table[i].name;
		}
	if (v == HK_PASS) {
		st->passed++;
		(void) ax_pipeline_send(self, AX_A_QUEUE, cmd);
		return;
	}
	ax_flow_event e;
	char          pl[128];
	snprintf(pl, sizeof(pl), "{\"hook\":\"%s\"}", by);
	ax_flow_event_init(&e, ax_actor_name(self),
	                   v == HK_HOLD ? "attempt.held" : "attempt.dropped",
	                   reason, r->instance, r->run_id, r->attempt,
	                   cmd->trace_id, pl);
	(void) ax_flow_event_send(self, &e, 0);
	if (v == HK_HOLD) {
		st->held++;
		hold(self, cmd, reason);
	} else {
		st->dropped++;
		drop(self, cmd, reason);
	}
}

/* ---------------------------------------------------------------------- */
/* post_hook */

static void
post_one(ax_actor *self, hk_state *st, Ax__Command *cmd)
{
	Ax__AttemptResult *res = cmd->result;
	hk_payload         p;
	const char        *status =
            protobuf_c_enum_descriptor_get_value(
	               &ax__attempt_status__descriptor, (int) res->status) != NULL
	           ? protobuf_c_enum_descriptor_get_value(
	                 &ax__attempt_status__descriptor, (int) res->status)
                  ->name
	           : "ATTEMPT_STATUS_UNSPECIFIED";

	st->results++;
	if (strncmp(status, "ATTEMPT_", 8) == 0)
		status += 8;
	p.len = (size_t) snprintf(p.buf, sizeof(p.buf),
	                          "{\"status\":\"%s\",\"worker\":\"%.200s\"",
	                          status, res->worker_id);
	for (size_t i = 0; i < HK_N; i++)
		if (hk_table[i].post != NULL)
			hk_table[i].post(st, res, &p);
	if (p.len + 2 < sizeof(p.buf)) {
		p.buf[p.len++] = '}';
		p.buf[p.len]   = '\0';
	}
	/* The report's facts travel with it: the result handler writes them
	 * into the event of the move the report causes (one row, in its
	 * transaction), or as attempt.reported when it causes none. A row
	 * of our own here doubled the audit rows of every attempt. The
	 * field is restored before cmd is freed (it points at p.buf). */
	char *unpacked   = res->report_json;
	res->report_json = p.buf;
	(void) ax_pipeline_send(self, AX_A_RESULT_HANDLER, cmd);
	res->report_json = unpacked;
}

/* ---------------------------------------------------------------------- */
/* actors */

static ax_err
hk_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	hk_state *st = state;

	for (size_t i = 0; i < n; i++) {
		if (items[i].type != AX_ITEM_COMMAND)
			continue;
		Ax__Command *cmd = ax_pipeline_unpack(self, &items[i]);
		if (cmd == NULL)
			continue;
		if (!st->post &&
		    cmd->body_case == AX__COMMAND__BODY_ATTEMPT_RENDERED &&
		    cmd->attempt_rendered->instance != NULL)
			pre_one(self, st, cmd);
		else if (!st->post &&
		         cmd->body_case == AX__COMMAND__BODY_CANCEL_INSTANCE &&
		         cmd->cancel_instance->instance != NULL) {
			remember_cancel(
			    st, cmd->cancel_instance->instance->instance_id);
			(void) ax_pipeline_send(self, AX_A_QUEUE, cmd);
		} else if (st->post &&
		           cmd->body_case == AX__COMMAND__BODY_RESULT &&
		           (cmd->result->instance != NULL ||
		            cmd->result->run_id[0] != '\0'))
			/* no instance: a result for an attempt the queue did
			 * not know (dispatched before an axd restart); the
			 * result handler finds it by run_id */
			post_one(self, st, cmd);
		else
			ax_log_warn(ax_actor_name(self),
			            "dropped a command of kind %d from %s",
			            (int) cmd->body_case, items[i].from);
		ax__command__free_unpacked(cmd, NULL);
	}
	return AX_OK;
}

static void
hk_fini(void *state)
{
	hk_state *st = state;
	if (st == NULL)
		return;
	if (st->post)
		ax_log_info("post_hook", "stopped: %llu results forwarded",
		            (unsigned long long) st->results);
	else
		ax_log_info("pre_hook",
		            "stopped: %llu passed, %llu held, %llu dropped",
		            (unsigned long long) st->passed,
		            (unsigned long long) st->held,
		            (unsigned long long) st->dropped);
	ax_strmap_free(st->canceled, NULL);
	free(st->ring);
	free(st);
}

static ax_err
hk_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx, int post)
{
	static const ax_actor_ops ops = {
		.handle = hk_handle,
		.fini   = hk_fini,
	};
	const char *name = post ? AX_A_POST_HOOK : AX_A_PRE_HOOK;
	char        url[256];
	hk_state   *st = calloc(1, sizeof(*st));

	if (st == NULL)
		return ax_err_set(AX_ENOMEM, "%s: out of memory", name);
	st->ctx  = ctx;
	st->post = post;
	if (!post &&
	    (ax_strmap_new(&st->canceled) != AX_OK ||
	     (st->ring = calloc(HK_CANCELED_MAX, sizeof(*st->ring))) ==
	         NULL)) {
		hk_fini(st);
		return ax_err_set(AX_ENOMEM, "%s: out of memory", name);
	}
	ax_actor_config cfg = {
		.name = name,
		.url  = ax_config_actor_addr(ctx->cfg, name, url, sizeof(url)),
		.send_nonblock = !post,
	};
	return ax_actor_system_add(sys, &cfg, &ops, st, NULL);
}

ax_err
ax_pre_hook_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx)
{
	return hk_add(sys, ctx, 0);
}

ax_err
ax_post_hook_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx)
{
	return hk_add(sys, ctx, 1);
}

ax_err
ax_hooks_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx)
{
	ax_err rv = ax_pre_hook_add(sys, ctx);
	return rv != AX_OK ? rv : ax_post_hook_add(sys, ctx);
}
