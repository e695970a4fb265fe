/*
 * hooks.c - the pre and post hooks: one const table of hooks, run as
 * function calls by the instance generator (pre) and the result handler
 * (post) inside their batches (see hooks.h).
 *
 * Invariants: a pre hook never changes the attempt; the first verdict
 * other than PASS wins. The set of canceled instances is bounded (the
 * oldest is forgotten first): a cancel matters only for the few attempts
 * in flight between admission and dispatch.
 */
#include "hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dag_registry.h"
#include "flow_util.h"
#include "hmap.h"

#define HK_CANCELED_MAX 65536

struct ax_hooks {
	const ax_pipeline_ctx *ctx;
	ax_strmap             *canceled; /* instance id -> (void *) 1 */
	int64_t               *ring;     /* ids in arrival order */
	size_t                 ring_n, ring_head;
};

typedef struct ax_hooks hk_state;

/* Payload of a post event under construction. */
typedef struct hk_payload {
	char  *buf;
	size_t len, cap;
} hk_payload;

typedef struct hk_ops {
	const char *name;
	/* pre: the verdict for r; *reason is the reason code when not PASS */
	ax_hook_verdict (*pre)(const hk_state            *st,
	                       const Ax__AttemptRendered *r,
	                       const char               **reason);
	/* post: adds "key":value members (with a leading comma) to p */
	void (*post)(const Ax__AttemptResult *res, hk_payload *p);
} hk_ops;

/* ---------------------------------------------------------------------- */
/* built-in hooks */

static ax_hook_verdict
pre_dag_paused(const hk_state *st, const Ax__AttemptRendered *r,
               const char **reason)
{
	if (st->ctx->registry == NULL ||
	    !ax_dag_registry_paused(st->ctx->registry, r->instance->dag))
		return AX_HOOK_PASS;
	*reason = "DAG_PAUSED";
	return AX_HOOK_HOLD;
}

static ax_hook_verdict
pre_canceled(const hk_state *st, const Ax__AttemptRendered *r,
             const char **reason)
{
	char id[24];
	snprintf(id, sizeof(id), "%lld", (long long) r->instance->instance_id);
	if (r->instance->instance_id == 0 ||
	    ax_strmap_get(st->canceled, id) == NULL)
		return AX_HOOK_PASS;
	*reason = "CANCELED";
	return AX_HOOK_DROP;
}

static void
post_log_location(const Ax__AttemptResult *res, hk_payload *p)
{
	char esc[1024];

	if (res->log_path == NULL || res->log_path[0] == '\0')
		return;
	esc[0] = '\0';
	ax_json_escape(esc, 0, sizeof(esc), res->log_path);
	int w = snprintf(p->buf + p->len, p->cap - p->len,
	                 ",\"log_path\":\"%s\"", esc);
	if (w > 0 && (size_t) w < p->cap - p->len)
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
/* pre hooks */

void
ax_hooks_cancel(ax_hooks *st, int64_t instance_id)
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

ax_hook_verdict
ax_hooks_pre(const ax_hooks *st, const Ax__AttemptRendered *r,
             const char **reason, const char **hook)
{
	ax_hook_verdict v = AX_HOOK_PASS;

	*reason = NULL;
	*hook   = NULL;
	for (size_t i = 0; i < HK_N && v == AX_HOOK_PASS; i++)
		if (hk_table[i].pre != NULL) {
			v     = hk_table[i].pre(st, r, reason);
			*hook = hk_table[i].name;
		}
	return v;
}

/* ---------------------------------------------------------------------- */
/* post hooks */

size_t
ax_hooks_post(const Ax__AttemptResult *res, char *buf, size_t cap)
{
	const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(
	    &ax__attempt_status__descriptor, (int) res->status);
	const char *status =
	    ev != NULL ? ev->name : "ATTEMPT_STATUS_UNSPECIFIED";
	hk_payload p = { .buf = buf, .cap = cap };
	int        w;

	if (cap < 4)
		return 0;
	if (strncmp(status, "ATTEMPT_", 8) == 0)
		status += 8;
	w = snprintf(p.buf, p.cap, "{\"status\":\"%s\",\"worker\":\"%.200s\"",
	             status, res->worker_id);
	p.len = w > 0 && (size_t) w < p.cap ? (size_t) w : 0;
	for (size_t i = 0; i < HK_N; i++)
		if (hk_table[i].post != NULL)
			hk_table[i].post(res, &p);
	if (p.len + 2 > p.cap)
		p.len = p.cap - 2;
	p.buf[p.len++] = '}';
	p.buf[p.len]   = '\0';
	return p.len;
}

/* ---------------------------------------------------------------------- */

void
ax_hooks_free(ax_hooks *st)
{
	if (st == NULL)
		return;
	ax_strmap_free(st->canceled, NULL);
	free(st->ring);
	free(st);
}

ax_err
ax_hooks_new(const ax_pipeline_ctx *ctx, ax_hooks **out)
{
	hk_state *st = calloc(1, sizeof(*st));

	*out = NULL;
	if (st == NULL || ax_strmap_new(&st->canceled) != AX_OK ||
	    (st->ring = calloc(HK_CANCELED_MAX, sizeof(*st->ring))) == NULL) {
		ax_hooks_free(st);
		return ax_err_set(AX_ENOMEM, "hooks: out of memory");
	}
	st->ctx = ctx;
	*out    = st;
	return AX_OK;
}
