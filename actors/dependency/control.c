/*
 * control.c - the control commands the dependency detector applies
 * (ControlOp from the control thread): clear, mark and backfill.
 *
 *  - clear {instance_id, downstream}: the instance (and every transitive
 *    downstream when asked) goes back to PENDING with reason MANUAL_CLEAR
 *    and a fresh try budget (store_deps.h), in one transaction with its
 *    events; the run is rebuilt from PostgreSQL and what is ready is
 *    released. A run whose rows moved to history comes back first
 *    (history.h).
 *  - mark {instance_id, state}: the API already wrote the state; the run
 *    is re-read, so a SUCCESS releases its downstreams.
 *  - backfill {run_ids, mode}: the API created the runs; they are planned
 *    like Due ones, bypassing the DAG's overlap policy (run_life.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "dependency_internal.h"
#include "history.h"
#include "store_attempts.h"
#include "store_commands.h"
#include "store_deps.h"

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

	/* the run first: when a move took its rows to history since
	 * do_clear() brought them back, making it RUNNING brings them back
	 * again (the trigger of migration 0022), so the clear finds them */
	if ((rv = ax_store_deps_runs_update(s, &rc, 1)) != AX_OK ||
	    (rv = ax_store_deps_clear(s, c->ids, c->base, c->n,
	                              &c->cleared)) != AX_OK)
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

	/* an instance of a run whose rows moved to history: back to the
	 * hot tables first, where the run is loaded and cleared */
	ax_err rv =
	    ax_history_restore_instance_run(d->store, op->instance_id, NULL);
	if (rv == AX_OK)
		rv = ax_store_deps_instance_run(d->store, op->instance_id,
		                                &run);
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
	    (v = axdd_dver_get(
	         d, ax_store_cell_i64(res, 0, AX_DEPS_C_VERSION))) == NULL)
		goto out;
	v->refs++; /* pinned while axdd_reload() below may drop the run */
	uint8_t *sel = calloc(v->ntask + 1, 1);
	size_t  *que = calloc(v->ntask + 1, sizeof(*que));
	c.ids        = calloc((size_t) nrow + 1, sizeof(*c.ids));
	c.base       = calloc((size_t) nrow + 1, sizeof(*c.base));
	c.evs        = calloc((size_t) nrow + 1, sizeof(*c.evs));
	if (!sel || !que || !c.ids || !c.base || !c.evs) {
		axdd_oom("clear");
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
		axdd_emit(d, &tmp, "instance.cleared", "MANUAL_CLEAR", task,
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
	axdd_reload(d, &run, 1, M_RELOAD);
out:
	if (v != NULL) {
		v->refs--;
		axdd_dver_unused(d, v);
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
	axdd_reload(d, &run, 1, M_RELOAD);
}

/*
 * Backfill: the API created the runs (op->run_ids) and the command row;
 * the row is claimed with the run ids as its result, then the runs are
 * read and planned (serial: one at a time in logical order; parallel: up
 * to max_active_runs at once).
 */
static void
do_backfill(dd *d, const Ax__ControlOp *op)
{
	ax_buf res = { 0 }; /* {"run_ids":[...]} */

	ax_buf_puts(&res, "{\"run_ids\":[");
	for (size_t i = 0; i < op->n_run_ids; i++)
		ax_buf_printf(&res, "%s%lld", i ? "," : "",
		              (long long) op->run_ids[i]);
	ax_buf_puts(&res, "]}");
	if (ax_buf_err(&res) != AX_OK)
		axdd_oom("backfill result");
	else if (cmd_finish(d, NULL, op->command_id, AX_CMD_APPLIED,
	                    ax_buf_str(&res), NULL))
		axdd_reload(d, op->run_ids, op->n_run_ids,
		            strcmp(op->mode, "parallel") == 0
		                ? M_BACKFILL_PARALLEL
		                : M_BACKFILL_SERIAL);
	ax_buf_fini(&res);
}

void
axdd_on_control(dd *d, const Ax__ControlOp *op)
{
	if (strcmp(op->op, "clear") == 0)
		do_clear(d, op);
	else if (strcmp(op->op, "mark") == 0)
		do_mark(d, op);
	else if (strcmp(op->op, "backfill") == 0)
		do_backfill(d, op);
	else
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "control op '%s' is not the dependency detector's: "
		        "dropped",
		        op->op);
}
