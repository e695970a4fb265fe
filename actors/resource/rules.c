/*
 * rules.c - what holds an item before capacity is looked at, for the
 * resource detector (see resource_internal.h for its files): a paused
 * DAG (the registry, memory) and the Allow/Block rules (engine/rule.h,
 * docs/rules.md). The rules table is read before the first batch and
 * after a ControlOp "rules"; a change of the rules in force (a reload, a
 * window opening or closing, an expiry) is noticed by a signature and
 * re-checks the waiting items here, the blocked ones in blocks.c.
 */
#include "resource_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dag_registry.h"
#include "hash.h"
#include "store_rules.h"

int
axrd_dag_paused(const rd_state *st, const char *dag)
{
	return st->ctx->registry != NULL &&
	    ax_dag_registry_paused(st->ctx->registry, dag);
}

/*
 * Reads the rules table into st, replacing the rules in force. A failure
 * keeps them and asks for another read at the next recheck (a second):
 * a rule change is never lost, only late while the database is away.
 */
void
axrd_rules_load(rd_state *st)
{
	ax_rule *v;
	size_t   n;

	st->rules_reload = 1;
	if (st->ctx->dsn == NULL) {
		st->rules_reload = 0;
		return;
	}
	if (axrd_store(st) == NULL ||
	    ax_store_rules_load(st->store, 0, &v, &n, NULL) != AX_OK) {
		ax_logf(AX_LOG_WARN, COMP, "DB_ERROR", NULL,
		        "rules not read (the rules in force stay; next try in "
		        "%lld ms): %s",
		        (long long) (RD_PAUSE_RECHECK / AX_USEC_PER_MSEC),
		        ax_err_detail());
		return;
	}
	ax_rules_free(st->rules, st->nrules);
	st->rules        = v;
	st->nrules       = n;
	st->rules_reload = 0;
	st->rules_gen++;
	st->rules_dag = st->rules_timed = 0;
	for (size_t i = 0; i < n; i++) {
		st->rules_dag |= ax_rule_needs_dag(&v[i]);
		st->rules_timed |= ax_rule_timed(&v[i]);
	}
	ax_logf(AX_LOG_INFO, COMP, NULL, NULL, "%zu rules loaded (load %llu)",
	        n, (unsigned long long) st->rules_gen);
}

/* Which rules are in force at now, with the load they came from: when
 * it changes, verdicts may have changed. */
static uint64_t
rules_signature(const rd_state *st, int64_t now)
{
	uint64_t h = ax_hash_u64(st->rules_gen);

	for (size_t i = 0; i < st->nrules; i++)
		if (ax_rule_applies(&st->rules[i], now))
			h = ax_hash_u64(h ^ (uint64_t) st->rules[i].id);
	return h;
}

/* The rule holding it at now, or NULL; *reason (may be NULL) gets its
 * code. The DAG's impact, owner and tags come from the registry only
 * when a rule names them. */
static const ax_rule *
rule_hold(rd_state *st, const rd_item *it, int64_t now, const char **reason)
{
	const Ax__InstanceReady *r = it->ready;
	ax_dag_entry            *e = NULL;
	const ax_rule           *rule;
	ax_rule_target           t = {
		          .channel      = r->channel,
		          .impact       = -1,
		          .priority     = r->priority,
		          .dag          = r->instance->dag,
		          .worker_group = r->worker_group,
	};

	if (st->nrules == 0)
		return NULL;
	if (st->rules_dag && st->ctx->registry != NULL &&
	    (e = ax_dag_registry_current(st->ctx->registry, t.dag)) != NULL) {
		t.impact = (int) e->dag->impact;
		t.owner  = e->dag->owner;
		t.tags   = (const char *const *) e->dag->tags;
		t.n_tags = e->dag->n_tags;
	}
	rule = ax_rules_decide(st->rules, st->nrules, &t, now, reason);
	ax_dag_entry_release(e);
	return rule;
}

/* Why it must not be admitted at now ("DAG_PAUSED", or "RULE_BLOCKED
 * rule=12" or "WAIT_RESOURCE unoffered=gpu" written into buf), or NULL;
 * sets it->rule_id. */
const char *
axrd_hold_reason(rd_state *st, rd_item *it, int64_t now, char *buf, size_t len)
{
	const char    *code = "RULE_BLOCKED", *res;
	const ax_rule *r;

	it->rule_id = 0;
	if (axrd_dag_paused(st, it->ready->instance->dag))
		return "DAG_PAUSED";
	if ((r = rule_hold(st, it, now, &code)) == NULL) {
		axrd_lane_cands(st, it->lane);
		if ((res = axrd_unoffered(st, it->lane, it)) == NULL)
			return NULL;
		snprintf(buf, len, "WAIT_RESOURCE unoffered=%s", res);
		return buf;
	}
	it->rule_id = r->id;
	snprintf(buf, len, "%s rule=%lld", code, (long long) r->id);
	return buf;
}

/* Blocks the waiting items the rules in force hold (after a change). */
static ax_err
rules_sweep(ax_actor *self, rd_state *st, int64_t now)
{
	rd_item **hit = NULL;
	size_t    n = 0, cap = 0;
	ax_err    rv = AX_OK;
	char      buf[AX_RD_REASON_MAX];

	for (rd_lane *l = st->lane_list; l != NULL && rv == AX_OK; l = l->next)
		for (size_t i = 0; rv == AX_OK && i < ax_heap_count(&l->heap);
		     i++) {
			rd_item *it = AX_HEAP_ENTRY(ax_heap_at(&l->heap, i),
			                            rd_item, hn);
			if (rule_hold(st, it, now, NULL) != NULL)
				rv = axrd_ptr_push(&hit, &n, &cap, it);
		}
	for (size_t i = 0; rv == AX_OK && i < n; i++) {
		const char *why =
		    axrd_hold_reason(st, hit[i], now, buf, sizeof(buf));
		axrd_lane_remove(st, hit[i]);
		if ((rv = axrd_block_item(self, st, hit[i], why)) != AX_OK)
			(void) axrd_lane_push(st, hit[i]->lane, hit[i]);
	}
	free(hit);
	return rv;
}

/*
 * Reads the rules when asked, and notices a change of the rules in force
 * (a reload, a window opening or closing, an expiry): then the waiting
 * items are checked again here, the blocked ones by the next
 * axrd_recheck_blocked. One signature per call: a few compares per rule.
 */
ax_err
axrd_rules_refresh(ax_actor *self, rd_state *st)
{
	int64_t  now = ax_clock_utc_us();
	uint64_t sig;

	if (st->rules_reload)
		axrd_rules_load(st);
	if ((sig = rules_signature(st, now)) == st->rules_sig)
		return AX_OK;
	st->rules_sig   = sig;
	st->rules_dirty = 1;
	return rules_sweep(self, st, now);
}
