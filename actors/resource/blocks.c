/*
 * blocks.c - blocked items of the resource detector (see
 * resource_internal.h for its files): blocking an item (DAG_PAUSED, a
 * rule, an attempt held after admission), the recheck that moves it back
 * to its lane once nothing holds it, and the block reason written on its
 * task_instances row (and restored on release) so that `axctl instance
 * list` and the API say why it waits. Reason writes are one batched
 * statement per handler call, never on the admission path; an
 * unreachable database pauses them for a recheck period.
 */
#include "resource_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "store.h"
#include "store_instances.h"

/* Asks for the reason write "what" on its row (see rd_state.rewrite). */
static ax_err
want_reason(rd_state *st, rd_item *it, int what)
{
	it->reason_write = (uint8_t) what;
	if (what == RD_R_NONE || it->in_rewrite)
		return AX_OK;
	ax_err rv =
	    axrd_ptr_push(&st->rewrite, &st->nrewrite, &st->caprewrite, it);
	it->in_rewrite = rv == AX_OK;
	return rv;
}

/*
 * Announces why blocked item it waits (reason: its row's text, e.g.
 * "RULE_BLOCKED rule=12"; the event gets the code before the space and
 * the rule id in its payload) and asks for the row write.
 */
static ax_err
mark_blocked(ax_actor *self, rd_state *st, rd_item *it, const char *reason)
{
	char code[48], payload[64];

	snprintf(code, sizeof(code), "%.*s", (int) strcspn(reason, " "),
	         reason);
	snprintf(payload, sizeof(payload), "{\"rule_id\":%lld}",
	         (long long) it->rule_id);
	axrd_emit(self, it, "instance.blocked", code,
	          it->rule_id != 0 ? payload : NULL);
	it->announced = 1;
	if (it->reason_on && strcmp(it->block_reason, reason) == 0)
		return want_reason(st, it, RD_R_NONE); /* already shown */
	snprintf(it->block_reason, sizeof(it->block_reason), "%s", reason);
	it->reason_tries = 0;
	return want_reason(st, it, RD_R_BLOCK);
}

ax_err
axrd_block_item(ax_actor *self, rd_state *st, rd_item *it, const char *reason)
{
	ax_err rv =
	    axrd_ptr_push(&st->blocked, &st->nblocked, &st->capblocked, it);
	if (rv != AX_OK)
		return rv;
	it->state = RD_BLOCKED;
	st->blocked_count++;
	return mark_blocked(self, st, it, reason);
}

/*
 * Moves blocked items back to their lane once nothing holds them: their
 * DAG is no longer paused and no rule holds them. Items a rule holds are
 * checked again only after the rules in force changed (rules_dirty); one
 * that another rule now holds keeps waiting under that rule's reason.
 */
ax_err
axrd_recheck_blocked(ax_actor *self, rd_state *st)
{
	size_t  k     = 0;
	int     dirty = st->rules_dirty;
	int64_t now   = ax_clock_utc_us();
	char    buf[AX_RD_REASON_MAX];

	st->rules_dirty = 0;
	for (size_t i = 0; i < st->nblocked; i++) {
		rd_item    *it = st->blocked[i];
		const char *why;
		ax_err      rv = AX_OK;
		if (axrd_dag_paused(st, it->ready->instance->dag) ||
		    (it->rule_id != 0 && !dirty)) {
			st->blocked[k++] = it;
			continue;
		}
		if ((why = axrd_hold_reason(st, it, now, buf, sizeof(buf))) !=
		    NULL) {
			st->blocked[k++] = it;
			if (strcmp(why, it->block_reason) != 0)
				rv = mark_blocked(self, st, it, why);
			if (rv == AX_OK)
				continue;
			for (size_t j = i + 1; j < st->nblocked; j++)
				st->blocked[k++] = st->blocked[j];
			st->nblocked = k;
			return rv;
		}
		it->announced = 0;
		rv            = axrd_lane_push(st, it->lane, it);
		if (rv == AX_OK)
			rv = axrd_ptr_push(&st->fresh, &st->nfresh,
			                   &st->capfresh, it);
		if (rv == AX_OK) /* best effort: the row is only a display */
			(void) want_reason(
			    st, it, it->reason_on ? RD_R_RESTORE : RD_R_NONE);
		if (rv != AX_OK) {
			st->blocked[k++] = it;
			for (size_t j = i + 1; j < st->nblocked; j++)
				st->blocked[k++] = st->blocked[j];
			st->nblocked = k;
			return rv;
		}
	}
	st->nblocked = k;
	return AX_OK;
}

/* Ends a write pass: keeps only the blocks whose row is still missing. */
static void
rewrite_compact(rd_state *st)
{
	size_t k = 0;
	for (size_t i = 0; i < st->nrewrite; i++) {
		rd_item *it = st->rewrite[i];
		if (it->reason_write == RD_R_BLOCK &&
		    it->state == RD_BLOCKED) {
			st->rewrite[k++] = it;
			continue;
		}
		it->reason_write = RD_R_NONE;
		it->in_rewrite   = 0;
	}
	st->nrewrite = k;
}

/* What the row of it gets: its block reason, or the one it had back. */
static void
reason_row(const rd_item *it, ax_store_ti_reason *r)
{
	const Ax__InstanceRef *ref = it->ready->instance;
	int                    blk = it->reason_write == RD_R_BLOCK;

	*r = (ax_store_ti_reason) {
		.dag             = ref->dag,
		.task            = ref->task,
		.logical_time_us = ref->logical_time_us,
		.shard           = ref->shard_index,
		.reason          = blk  ? it->block_reason
		             : it->held ? NULL
		                        : "WAIT_RESOURCE",
		.only_if         = blk ? NULL : it->block_reason,
	};
}

/* Records the outcome of row r of item it. */
static void
reason_done(ax_actor *self, rd_item *it, const ax_store_ti_reason *r)
{
	if (it->reason_write == RD_R_RESTORE) {
		it->reason_on    = 0;
		it->reason_write = RD_R_NONE;
	} else if (r->applied) {
		it->reason_on    = 1;
		it->reason_write = RD_R_NONE;
	} else if (++it->reason_tries >= RD_REASON_TRIES) {
		ax_logf(AX_LOG_WARN, ax_actor_name(self), NULL, NULL,
		        "%s.%s: no task_instances row to show %s on after %d "
		        "tries; given up",
		        r->dag, r->task, r->reason, RD_REASON_TRIES);
		it->reason_write = RD_R_NONE;
	}
}

/*
 * Writes the reasons asked by want_reason, one statement per call. The
 * admissions of this call go out first (a restore and the instance
 * generator's move to READY, which clears the reason, may land in either
 * order: only_if keeps the restore off a row that moved on). A failure
 * is logged: blocks are tried again at the next recheck, restores
 * dropped (the move to READY clears the reason anyway). A block whose
 * row was missing is tried again at most once per recheck period.
 */
void
axrd_write_reasons(ax_actor *self, rd_state *st)
{
	size_t              n = st->nrewrite, m = 0;
	ax_store_ti_reason *rows  = NULL;
	rd_item           **its   = NULL;
	ax_err              rv    = AX_OK;
	int64_t             now   = ax_clock_mono_us();
	int                 retry = now >= st->reason_retry_at;

	if (n == 0 || st->ctx->dsn == NULL || now < st->reason_down_until)
		goto out;
	rows = calloc(n, sizeof(*rows));
	its  = calloc(n, sizeof(*its));
	if (rows == NULL || its == NULL)
		rv = ax_err_set(AX_ENOMEM, "out of memory");
	for (size_t i = 0; rv == AX_OK && i < n; i++) {
		rd_item *it = st->rewrite[i];
		if (it->reason_write == RD_R_NONE ||
		    (it->reason_write == RD_R_BLOCK && it->reason_tries > 0 &&
		     !retry))
			continue;
		its[m] = it;
		reason_row(it, &rows[m++]);
	}
	if (retry)
		st->reason_retry_at = now + RD_PAUSE_RECHECK;
	if (m > 0)
		(void) ax_actor_flush(self, AX_ACTOR_NONBLOCK);
	if (rv == AX_OK && m > 0 && st->store == NULL &&
	    (rv = ax_store_open(st->ctx->dsn, &st->store)) == AX_OK)
		ax_store_set_reconnect_timeout(st->store, RD_REASON_RECONNECT);
	for (size_t off = 0; rv == AX_OK && off < m;
	     off += AX_STORE_BATCH_MAX) {
		size_t c = m - off < AX_STORE_BATCH_MAX ? m - off
		                                        : AX_STORE_BATCH_MAX;
		rv = ax_store_set_reasons(st->store, rows + off, c, NULL);
		for (size_t i = off; rv == AX_OK && i < off + c; i++)
			reason_done(self, its[i], &rows[i]);
	}
	if (rv != AX_OK) {
		ax_logf(AX_LOG_WARN, ax_actor_name(self), "DB_ERROR", NULL,
		        "reasons of blocked or released instances not "
		        "written (next try in %lld ms): %s",
		        (long long) (RD_PAUSE_RECHECK / AX_USEC_PER_MSEC),
		        ax_err_detail());
		st->reason_down_until = now + RD_PAUSE_RECHECK;
	}
out:
	free(rows);
	free(its);
	rewrite_compact(st);
}
