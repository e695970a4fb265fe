/*
 * detector.c - the resource detector actor: admission of ready instances
 * against worker-group slots, named pools, the P0 reserves, paused DAGs
 * and Allow/Block rules, in tier order with aging, and the starvation
 * gauge (see resource_detector.h; its files by concept are listed in
 * resource_internal.h). This file holds the actor and the flow of one
 * instance; the invariants below hold across the files.
 *
 * Invariants:
 * - An instance key is in `items` from its first InstanceReady until the
 *   SlotReleased of its attempt: a duplicate InstanceReady meanwhile is
 *   ignored, so a replay never admits twice.
 * - group->used and pool->used are the sums of the slots of ADMITTED
 *   items, used_low those of the P1..P3 ones; they only change on admit,
 *   SlotReleased and AttemptHeld.
 * - A waiting item is in its lane heap and in rd_state.waiting (in order
 *   of since_us); the items before starve_edge are exactly those counted
 *   in rd_state.starving.
 * - Waiting items sit in exactly one lane heap; blocked ones in `blocked`.
 * - A blocked item's task_instances row shows its block reason
 *   (DAG_PAUSED, or "RULE_BLOCKED rule=12" for an item an Allow/Block
 *   rule holds, engine/rule.h), so `axctl instance list` and the API say
 *   why it waits; when it is released the row gets back the reason it had
 *   (WAIT_RESOURCE while PENDING, none once admitted). `rewrite` lists the
 *   items whose row still needs that write; after a handler call it holds
 *   only blocked items whose row did not exist yet (retried every
 *   recheck).
 * - Rules: the rules table is read before the first batch and before the
 *   batch after a ControlOp "rules" (the control thread forwards ax-api's
 *   NOTIFY). An arriving item is checked against them; the items already
 *   waiting or blocked are checked again only when the verdicts may have
 *   changed: after a reload, or when a rule's window opens or closes or
 *   it expires (a signature of the rules in force, computed after every
 *   batch and every second while a rule is timed). Admitted items are
 *   not recalled: a rule holds what has not been admitted yet.
 *
 * Workload: thousands of decisions per second; each is O(log n) in its
 * lane plus O(lanes) to pick the best lane head (a handful of lanes).
 * No database access after start on the admission path: only blocks and
 * their release write (one batched statement per handler call), and the
 * rules table is read once per change of it. A rule naming tier, owner or
 * tag reads the DAG's definition from the registry (memory; a miss costs
 * the registry's one round trip).
 */
#include "resource_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "dag_registry.h"
#include "flow_util.h"
#include "store_rules.h"

static void
item_free(void *p)
{
	rd_item *it = p;
	if (it == NULL)
		return;
	ax__instance_ready__free_unpacked(it->ready, NULL);
	free(it->trace);
	free(it->need);
	free(it);
}

/*
 * Adds one named resource it declares (of n in all; the array is made
 * for n at the first). A bad entry (no valid name, no positive amount,
 * past AX_RES_MAX, out of memory) is left out: the DAG loader and the
 * senders validate them, and a need left out only admits more eagerly.
 */
static void
need_add(rd_item *it, size_t n, const char *name, int64_t amount)
{
	if (n > AX_RES_MAX)
		n = AX_RES_MAX;
	if (name == NULL || !ax_res_name_ok(name) || amount <= 0 ||
	    it->nneed >= n)
		return;
	if (it->need == NULL && (it->need = calloc(n, sizeof(ax_res))) == NULL)
		return;
	ax_res *r = &it->need[it->nneed++];
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->amount = amount;
}

/*
 * The tier and declared resources (cpu, memory, named) of it, from its
 * ready: as sent when the sender knew them (impact set), else from its
 * DAG in the registry (retries and held attempts come from senders that
 * do not know them; the DAG of a live instance is cached, a miss costs
 * one read), else P2, the DAG format's default impact, and no resources.
 */
static void
item_profile(const rd_state *st, rd_item *it, char *spec, size_t len)
{
	const Ax__InstanceReady *ready = it->ready;
	const char              *s     = ready->impact;

	it->tier = AX_IMPACT_P2;
	it->cpu = it->mem = 0;
	if (s != NULL && s[0] == 'P' && s[1] >= '0' && s[1] <= '3' &&
	    s[2] == '\0') {
		it->tier = (int8_t) (s[1] - '0');
		it->cpu  = ready->cpu_milli > 0 ? ready->cpu_milli : 0;
		it->mem  = ready->memory_bytes > 0 ? ready->memory_bytes : 0;
		for (size_t i = 0; i < ready->n_resources; i++)
			need_add(it, ready->n_resources,
			         ready->resources[i]->key,
			         ready->resources[i]->value);
		return;
	}
	if (st->ctx->registry == NULL)
		return;
	ax_dag_entry *e =
	    ax_dag_registry_current(st->ctx->registry, ready->instance->dag);
	if (e == NULL)
		return;
	const ax_task *k = ax_dag_entry_task(e, ready->instance->task);
	it->tier         = (int8_t) e->dag->impact;
	if (k != NULL && ax_group_spec_multi(k->eff.worker_group))
		/* a retry or a held attempt names the group it was admitted
		 * to: it may go to any of its task's groups again */
		snprintf(spec, len, "%s", k->eff.worker_group);
	if (k != NULL) {
		it->cpu = k->eff.cpu_milli;
		it->mem = k->eff.memory_bytes;
		for (size_t i = 0; i < k->eff.res.n; i++)
			need_add(it, k->eff.res.n, k->eff.res.v[i].key,
			         strtoll(k->eff.res.v[i].value, NULL, 10));
	}
	ax_dag_entry_release(e);
}

/*
 * Creates the item of ready (owned from now on, freed on failure) and
 * indexes it by key; NULL with *dup = 1 when the key is already known.
 */
static rd_item *
item_new(ax_actor *self, rd_state *st, Ax__InstanceReady *ready,
         const char *trace, int *dup)
{
	char     key[AX_FLOW_KEY_MAX];
	rd_item *it;

	*dup = 0;
	if (ready->instance == NULL || ready->instance->dag[0] == '\0' ||
	    ready->instance->task[0] == '\0') {
		ax_log_warn(ax_actor_name(self),
		            "dropped an InstanceReady without an instance");
		ax__instance_ready__free_unpacked(ready, NULL);
		return NULL;
	}
	ax_flow_key(ready->instance, key, sizeof(key));
	if ((it = ax_strmap_get(st->items, key)) != NULL &&
	    it->state == RD_ADMITTED && ready->after_attempt > 0 &&
	    ready->after_attempt >= it->ready->after_attempt + 1) {
		/* A retry after the attempt this admission produced: that
		 * attempt has ended, and its SlotReleased (sent by the result
		 * handler, which is not this message's sender) has not arrived
		 * yet. The admission is over: free its slot now; the late
		 * SlotReleased is then recognised as stale. */
		axrd_unuse(it);
		ax_strmap_del(st->items, key);
		item_free(it);
		it = NULL;
	}
	if (it != NULL) {
		*dup = 1;
		ax__instance_ready__free_unpacked(ready, NULL);
		return NULL;
	}
	size_t kl = strlen(key);
	if ((it = calloc(1, sizeof(*it) + kl + 1)) == NULL) {
		ax__instance_ready__free_unpacked(ready, NULL);
		return NULL;
	}
	memcpy(it->key, key, kl + 1);
	it->ready = ready;
	it->trace = trace != NULL && trace[0] != '\0' ? strdup(trace) : NULL;
	it->seq   = st->seq++;
	it->slots = ready->slots > 0 ? ready->slots : 1;
	char spec[AX_GSPEC_MAX * (2 * AX_LABEL_MAX + 2) + 1];
	spec[0] = '\0';
	item_profile(st, it, spec, sizeof(spec));
	it->lane =
	    axrd_lane_get(st,
	                  spec[0]                      ? spec
	                      : ready->worker_group[0] ? ready->worker_group
	                                               : "default",
	                  ready->pool, it->tier == AX_IMPACT_P0);
	if (it->lane == NULL ||
	    ax_strmap_put(st->items, it->key, it) != AX_OK) {
		item_free(it);
		return NULL;
	}
	return it;
}

/* Takes ownership of ready. */
static ax_err
on_ready(ax_actor *self, rd_state *st, Ax__InstanceReady *ready,
         const char *trace)
{
	int      dup;
	rd_item *it = item_new(self, st, ready, trace, &dup);
	ax_err   rv;

	if (it == NULL) {
		if (!dup)
			return AX_OK;
		st->ignored++;
		ax_logf(AX_LOG_DEBUG, ax_actor_name(self), "DUPLICATE", NULL,
		        "InstanceReady ignored: the instance is already "
		        "admitted or waiting");
		return AX_OK;
	}
	char        buf[AX_RD_REASON_MAX];
	const char *why =
	    axrd_hold_reason(st, it, ax_clock_utc_us(), buf, sizeof(buf));
	if (why != NULL)
		return axrd_block_item(self, st, it, why);
	if (axrd_shave(self, st, it))
		return AX_OK; /* delayed, announced */
	if ((rv = axrd_lane_push(st, it->lane, it)) != AX_OK)
		return rv;
	return axrd_ptr_push(&st->fresh, &st->nfresh, &st->capfresh, it);
}

static void
on_released(ax_actor *self, rd_state *st, const Ax__SlotReleased *sr)
{
	char     key[AX_FLOW_KEY_MAX];
	rd_item *it;

	if (sr->instance == NULL)
		return;
	ax_flow_key(sr->instance, key, sizeof(key));
	it = ax_strmap_get(st->items, key);
	if (it != NULL && sr->attempt > 0 &&
	    sr->attempt <= it->ready->after_attempt) {
		/* the release of an attempt older than this admission: its
		 * slot was freed when the retry arrived (see item_new) */
		return;
	}
	if (it == NULL || it->state != RD_ADMITTED) {
		ax_logf(AX_LOG_DEBUG, ax_actor_name(self), NULL, NULL,
		        "SlotReleased for %s.%s: not admitted here, ignored",
		        sr->instance->dag, sr->instance->task);
		return;
	}
	axrd_unuse(it);
	ax_strmap_del(st->items, key);
	item_free(it);
}

/* Takes ownership of held->ready. */
static ax_err
on_held(ax_actor *self, rd_state *st, Ax__AttemptHeld *held)
{
	char     key[AX_FLOW_KEY_MAX];
	rd_item *it;

	if (held->ready == NULL || held->ready->instance == NULL)
		return AX_OK;
	ax_flow_key(held->ready->instance, key, sizeof(key));
	it = ax_strmap_get(st->items, key);
	if (it == NULL) {
		int dup;
		it          = item_new(self, st, held->ready, NULL, &dup);
		held->ready = NULL; /* owned by the item (or freed) */
		if (it == NULL)
			return AX_OK;
		it->held = 1; /* admitted, though not known here */
	} else if (it->state == RD_ADMITTED) {
		axrd_unuse(it);
		it->held = 1;
	} else {
		return AX_OK; /* already waiting or blocked */
	}
	it->announced = 0;
	it->rule_id   = 0;
	return axrd_block_item(self, st, it,
	                       held->reason[0] ? held->reason : "DAG_PAUSED");
}

void
axrd_emit(ax_actor *self, const rd_item *it, const char *type,
          const char *reason, const char *payload)
{
	ax_flow_event e;
	ax_flow_event_init(&e, ax_actor_name(self), type, reason,
	                   it->ready->instance, NULL, 0, it->trace, payload);
	(void) ax_flow_event_send(self, &e, 0);
}

/*
 * JSON payload describing why an item waits: its tier, what holds it
 * (axrd_lane_hold; "queue_order" when there is room but items ahead of it
 * took it first, "backpressure" when the instance generator lags) and
 * the counters behind that. *reason is BACKPRESSURE_DELAYED for those two
 * holds and a pushed water level ("pressure", with the level and the
 * instant "until" it expires), else WAIT_RESOURCE.
 */
static void
why_payload(const rd_state *st, const rd_item *it, char *buf, size_t len,
            const char **reason)
{
	const rd_lane  *l = it->lane;
	const rd_group *gr;
	rd_group       *hg = NULL;
	const char     *by;
	char            g[300], p[300], until[48];
	int64_t         now = ax_clock_utc_us(), u;

	g[0] = p[0] = '\0';
	by          = st->backpressured ? "backpressure"
	                                : axrd_lane_pick(st, l, it, &hg);
	gr          = hg != NULL ? hg : l->group;
	ax_json_escape(g, 0, sizeof(g), gr->name);
	ax_json_escape(p, 0, sizeof(p), l->pname);
	*reason = st->backpressured ? "BACKPRESSURE_DELAYED" : "WAIT_RESOURCE";
	until[0] = '\0';
	if (by != NULL && strcmp(by, "pressure") == 0 &&
	    (u = axrd_level_until(st, l, now)) > 0) {
		*reason  = "BACKPRESSURE_DELAYED";
		until[0] = '"';
		ax_clock_fmt_utc(u, until + 1, sizeof(until) - 2);
		strcat(until, "\"");
	}
	snprintf(buf, len,
	         "{\"tier\":\"%s\",\"held_by\":\"%s\",\"group\":\"%s\","
	         "\"group_used\":%lld,\"group_used_low\":%lld,"
	         "\"group_limit\":%lld,\"pool\":\"%s\",\"pool_used\":%lld,"
	         "\"pool_slots\":%lld,\"pool_reserve_p0\":%lld,\"slots\":%d,"
	         "\"cpu_milli\":%lld,\"group_cpu_used\":%lld,"
	         "\"memory_bytes\":%lld,\"group_memory_used\":%lld,"
	         "\"level_pct\":%d,\"until\":%s,\"calendar_slots\":%lld}",
	         ax_impact_name((ax_impact) it->tier),
	         by != NULL ? by : "queue_order", g, (long long) gr->used,
	         (long long) gr->used_low,
	         (long long) axrd_group_limit(st, gr), p,
	         (long long) (l->pool ? l->pool->used : 0),
	         (long long) (l->pool ? l->pool->slots : 0),
	         (long long) (l->pool ? l->pool->reserve_p0 : 0), it->slots,
	         (long long) it->cpu, (long long) gr->used_cpu,
	         (long long) it->mem, (long long) gr->used_mem,
	         axrd_level(st, l, now), until[0] ? until : "null",
	         (long long) axrd_calendar_slots(l, now));
}

ax_err
axrd_admit(ax_actor *self, rd_state *st, rd_item *it)
{
	Ax__Command   cmd = AX__COMMAND__INIT;
	Ax__Admission adm = AX__ADMISSION__INIT;

	adm.instance      = it->ready->instance;
	adm.decision      = AX__ADMISSION_DECISION__ADMIT;
	adm.ready         = it->ready;
	adm.decided_at_us = ax_clock_utc_us();
	cmd.body_case     = AX__COMMAND__BODY_ADMISSION;
	cmd.admission     = &adm;
	cmd.issued_at_us  = adm.decided_at_us;
	if (it->trace != NULL)
		cmd.trace_id = it->trace;
	rd_group *g = NULL;
	if (it->lane->spec != NULL) {
		/* one of several groups: the admission names it, and so do
		 * the rows and the queue from here on */
		if (axrd_lane_pick(st, it->lane, it, &g) != NULL || g == NULL)
			g = it->lane->cand != NULL && it->lane->ncand > 0
			    ? it->lane->cand[0]
			    : it->lane->group;
		char *name = strdup(g->name);
		if (name == NULL)
			return AX_ENOMEM;
		if (it->ready->worker_group != NULL &&
		    it->ready->worker_group != protobuf_c_empty_string)
			free(it->ready->worker_group);
		it->ready->worker_group = name;
	} else {
		g = it->lane->group;
	}
	ax_err rv = ax_pipeline_send(self, AX_A_INSTANCE_GENERATOR, &cmd);
	if (rv != AX_OK)
		return rv;
	it->state = RD_ADMITTED;
	it->group = g;
	g->used += it->slots;
	g->used_cpu += it->cpu;
	g->used_mem += it->mem;
	for (int i = 0; i < it->nneed; i++) /* full: not accounted */
		(void) ax_res_add(&g->used_res, it->need[i].name,
		                  it->need[i].amount);
	if (it->lane->pool != NULL)
		it->lane->pool->used += it->slots;
	if (!it->lane->p0) {
		g->used_low += it->slots;
		if (it->lane->pool != NULL)
			it->lane->pool->used_low += it->slots;
	}
	st->admitted++;
	/* No event here: the instance generator writes the one row of this
	 * decision (instance.admitted) in the transaction that moves the
	 * instance to READY. Two rows for one decision were a sixth of the
	 * event_log writes of a run. */
	return AX_OK;
}

/*
 * Releases the delayed items shaving lets go (their instant came, or
 * their group drained) and drains, again while releases and admissions
 * make room: each round either releases nothing or admits. Bounded, so
 * a handler call stays short; the rest waits for the next settle.
 */
static ax_err
release_and_drain(ax_actor *self, rd_state *st)
{
	ax_err rv = AX_OK;
	int    released;

	for (int round = 0; round < 64; round++) {
		if ((rv = axrd_shave_release(self, st, &released)) != AX_OK)
			return rv;
		uint64_t before = st->admitted;
		if ((rv = axrd_drain(self, st)) != AX_OK)
			return rv;
		if (released == 0 || st->admitted == before)
			return AX_OK;
	}
	return rv;
}

/* After a batch: drain, then one DELAY event per item that must wait. */
static ax_err
settle(ax_actor *self, rd_state *st)
{
	ax_err rv = release_and_drain(self, st);
	for (size_t i = 0; i < st->nfresh; i++) {
		rd_item *it = st->fresh[i];
		if (it->state != RD_WAITING || it->announced)
			continue;
		char        payload[1200];
		const char *reason;
		why_payload(st, it, payload, sizeof(payload), &reason);
		axrd_emit(self, it, "instance.delayed", reason, payload);
		it->announced = 1;
		st->delayed++;
	}
	st->nfresh = 0;
	axrd_write_reasons(self, st);
	int64_t next = 0, now = ax_clock_mono_us();
	axrd_starve_advance(st, now);
	axrd_stats_persist(st, now);
	if (st->backpressured)
		next = now + RD_BACKPRESSURE_RETRY;
	else if (st->nblocked > 0 || st->rules_timed || st->rules_reload ||
	         st->pressure_reload || st->calendar_reload || st->ncals > 0)
		next =
		    now + RD_PAUSE_RECHECK; /* calendars: a window may turn */
	/* a delay's instant or a pushed level's expiry (utc to mono) */
	int64_t shave = axrd_shave_next(st);
	if (shave > 0) {
		int64_t at = now + (shave - ax_clock_utc_us()) + 1000;
		if (at < now + 1000)
			at = now + 1000;
		if (next == 0 || at < next)
			next = at;
	}
	/* the gauge moves with time alone: come back while anything waits,
	 * or until a drop to zero is written */
	if (st->ctx->dsn != NULL &&
	    (st->nwaiting > 0 || !st->stats_written ||
	     st->last_stats[AX_TIER_COUNT] != 0) &&
	    (next == 0 || st->stats_due < next))
		next = st->stats_due;
	ax_actor_set_deadline(self, next);
	return rv;
}

ax_store *
axrd_store(rd_state *st)
{
	if (st->store == NULL &&
	    ax_store_open(st->ctx->dsn, &st->store) == AX_OK)
		ax_store_set_reconnect_timeout(st->store, RD_REASON_RECONNECT);
	return st->store;
}

ax_err
axrd_ptr_push(rd_item ***v, size_t *n, size_t *cap, rd_item *it)
{
	if (ax_grow((void **) v, cap, *n + 1, sizeof(**v)) != AX_OK)
		return ax_err_set(AX_ENOMEM, COMP ": out of memory");
	(*v)[(*n)++] = it;
	return AX_OK;
}

/* The handlers of the resource detector's commands. A batch's decisions
 * are taken once its items are in (rd_batch_end). */
static ax_err
on_ready_cmd(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	Ax__Command *cmd = m->cmd;
	ax_err rv = on_ready(self, state, cmd->instance_ready, cmd->trace_id);
	cmd->instance_ready = NULL; /* owned by the item now */
	cmd->body_case      = AX__COMMAND__BODY__NOT_SET;
	return rv;
}

static ax_err
on_released_cmd(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	on_released(self, state, m->cmd->slot_released);
	return AX_OK;
}

static ax_err
on_capacity_cmd(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	axrd_on_capacity(state, m->cmd->worker_capacity);
	return AX_OK;
}

static ax_err
on_held_cmd(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	return on_held(self, state, m->cmd->attempt_held);
}

/* "rules": the rules table changed; "pressure": pool_pressure did;
 * read before the next batch. */
static ax_err
on_control_cmd(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	rd_state *st = state;
	(void) self;
	/* "rules" also follows a reconnect of the control thread: what
	 * changed meanwhile is read again, pressures included */
	if (strcmp(m->cmd->control->op, "rules") == 0)
		st->rules_reload = st->pressure_reload = st->calendar_reload =
		    1;
	else if (strcmp(m->cmd->control->op, "pressure") == 0)
		st->pressure_reload = 1;
	else if (strcmp(m->cmd->control->op, "calendar") == 0)
		st->calendar_reload = 1;
	return AX_OK;
}

/* Before a batch: the rules, read when asked (at the first batch, after
 * a change), so the batch's items meet the rules in force. */
static void
rd_batch_begin(ax_actor *self, void *state, size_t n)
{
	rd_state *st = state;
	(void) self;
	(void) n;
	if (st->rules_reload)
		axrd_rules_load(st);
	if (st->pressure_reload)
		axrd_pressure_load(st);
	if (st->calendar_reload)
		axrd_calendars_load(st);
}

/* After every batch: a change of the rules in force checks the waiting
 * items again; blocked items nothing holds any more go back to their
 * lane; then the batch's decisions. */
static ax_err
rd_batch_end(ax_actor *self, void *state)
{
	rd_state *st = state;
	ax_err    rv = axrd_rules_refresh(self, st);
	ax_err    r  = axrd_recheck_blocked(self, st);
	if (rv == AX_OK)
		rv = r;
	r = settle(self, st);
	return rv != AX_OK ? rv : r;
}

static ax_err
rd_tick(ax_actor *self, void *state, int64_t now)
{
	rd_state *st = state;
	ax_err    rv = axrd_rules_refresh(self, st);
	ax_err    r  = axrd_recheck_blocked(self, st);
	(void) now;
	if (st->pressure_reload)
		axrd_pressure_load(st);
	if (st->calendar_reload)
		axrd_calendars_load(st);
	if (rv == AX_OK)
		rv = r;
	r = settle(self, st);
	return rv != AX_OK ? rv : r;
}

/* Frees what the state holds (the pipeline frees the state); safe on a
 * state init left half-filled. */
static void
rd_fini(void *state)
{
	rd_state *st = state;
	ax_log_info(COMP,
	            "stopped: %llu admitted, %llu delayed, %llu shaved, "
	            "%llu blocked, %llu duplicates ignored, %zu instances "
	            "held",
	            (unsigned long long) st->admitted,
	            (unsigned long long) st->delayed,
	            (unsigned long long) st->shaved,
	            (unsigned long long) st->blocked_count,
	            (unsigned long long) st->ignored,
	            st->items ? ax_strmap_count(st->items) : 0);
	axrd_calendars_free(st); /* before the groups and pools it names */
	ax_strmap_free(st->items, item_free);
	ax_strmap_free(st->groups, axrd_group_free);
	ax_strmap_free(st->pools, free);
	ax_strmap_free(st->workers, free);
	ax_strmap_free(st->lanes, NULL);
	for (rd_lane *l = st->lane_list, *nx; l != NULL; l = nx) {
		nx = l->next;
		axrd_lane_free(l);
	}
	free(st->blocked);
	free(st->fresh);
	free(st->rewrite);
	ax_rules_free(st->rules, st->nrules);
	ax_store_close(st->store);
	axrd_shave_fini(st);
}

static ax_err
rd_init(void *state, const ax_pipeline_ctx *ctx, void *arg)
{
	rd_state *st = state;

	(void) arg;
	st->ctx          = ctx;
	st->rules_reload = 1; /* read before the first batch */
	st->overcommit   = ax_config_int(ctx->cfg, "resources.overcommit");
	st->default_group =
	    ax_config_int(ctx->cfg, "resources.default_group_slots");
	st->default_pool =
	    ax_config_int(ctx->cfg, "resources.default_pool_slots");
	if (st->overcommit < 1)
		st->overcommit = 1;
	if (ax_res_parse(ax_config_str(ctx->cfg, "resources.group_cost"),
	                 "resources.group_cost", &st->costs) != AX_OK)
		return ax_err_set(AX_ECONFIG, COMP ": %s", ax_err_detail());
	st->aging_us =
	    ax_config_duration_us(ctx->cfg, "scheduler.aging_interval");
	st->starve_after_us =
	    ax_config_duration_us(ctx->cfg, "scheduler.starvation_after");
	if (ax_strmap_new(&st->items) != AX_OK ||
	    ax_strmap_new(&st->groups) != AX_OK ||
	    ax_strmap_new(&st->pools) != AX_OK ||
	    ax_strmap_new(&st->lanes) != AX_OK ||
	    ax_strmap_new(&st->workers) != AX_OK)
		return ax_err_set(AX_ENOMEM, COMP ": out of memory");
	axrd_shave_init(st);
	axrd_load_pools(st);
	st->calendar_reload = 1; /* read with the first batch or tick */
	return AX_OK;
}

/* The tick is the recheck of blocked items and the retry after
 * backpressure: the same as after a batch (settle sets the deadline). */
static const ax_pipeline_def rd_def = {
	.name       = AX_A_RESOURCE_DETECTOR,
	.state_size = sizeof(rd_state),
	.init       = rd_init,
	.fini       = rd_fini,
	.tick       = rd_tick,
	.batch_begin = rd_batch_begin,
	.batch_end  = rd_batch_end,
	.on = {
		[AX__COMMAND__BODY_INSTANCE_READY]   = on_ready_cmd,
		[AX__COMMAND__BODY_SLOT_RELEASED]    = on_released_cmd,
		[AX__COMMAND__BODY_WORKER_CAPACITY]  = on_capacity_cmd,
		[AX__COMMAND__BODY_ATTEMPT_HELD]     = on_held_cmd,
		[AX__COMMAND__BODY_CONTROL]          = on_control_cmd,
	},
};

ax_err
ax_resource_detector_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx)
{
	return ax_pipeline_add(sys, ctx, &rd_def, NULL, NULL);
}
