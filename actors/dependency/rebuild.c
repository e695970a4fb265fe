/*
 * rebuild.c - the dependency detector's runs rebuilt from PostgreSQL.
 *
 * At start (the first tick, or the first batch, whichever comes first,
 * and so after a takeover) every unfinished run is read with its
 * instances in ONE query: the counters are rebuilt (SUCCESS counts as
 * met), InstanceReady is sent again for PENDING / READY instances whose
 * upstreams are met (the instance generator and resource detector are
 * idempotent) but for preempted ones (reason PREEMPTED: the result
 * handler's recovery throttle lets them back), the plan of a run with
 * missing instance rows is sent again, and runs that have none are
 * planned like a Due. After a control op (clear, mark, backfill) the
 * runs it touched are re-read the same way (modes M_*).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dependency_internal.h"
#include "state.h"
#include "store_deps.h"

enum {
	X_MISSING = 0,
	X_PENDING,
	X_RETRY,
	X_PREEMPTED,
	X_READY,
	X_LIVE,
	X_OK,
	X_FAIL
};

/* Rebuilds the active run r from its instance rows [from, to). */
static void
rebuild_active(dd *d, drun *r, PGresult *res, int from, int to, int mode)
{
	dver    *v       = r->v;
	uint8_t *x       = calloc(v->ninst + 1, 1);
	int      missing = 0;

	if (x == NULL || axdd_alloc_counters(r) != 0) {
		free(x);
		axdd_oom("rebuild");
		axdd_run_drop(d, r);
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
			    : why && strcmp(why, "PREEMPTED") == 0
			    ? X_PREEMPTED
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
	axdd_link_active(r);
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
			case X_PREEMPTED:
				/* the result handler holds its recovery
				 * and reads it again after a restart */
				r->ist[i] = I_SENT;
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
				axdd_send_ready(d, r, t, j);
		}
	}
	free(x);
	if (missing)
		axdd_send_plan(d, r); /* idempotent on the instance keys */
	d->stats->rebuilt++;
	axdd_check_done(d, r);
}

/* Remembers that the start-up rebuild read the run of key (d->rebuilt). */
static void
rebuilt_add(dd *d, const char *key)
{
	if (d->rebuilt == NULL) {
		if (ax_strmap_new(&d->rebuilt) != AX_OK) {
			axdd_oom("rebuilt runs");
			return;
		}
		d->rebuilt_until_us = ax_clock_mono_us() + DD_REBUILT_KEEP_US;
	}
	if (ax_strmap_put(d->rebuilt, key, d) != AX_OK)
		axdd_oom("rebuilt runs");
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
		axdd_oom("rebuild");
		return;
	}
	for (int row = 0; row < nrow;) {
		int64_t     id  = ax_store_cell_i64(res, row, AX_DEPS_C_RUN);
		int         end = row + 1;
		const char *state =
		    ax_store_cell(res, row, AX_DEPS_C_RUN_STATE);
		int has = ax_store_cell(res, row, AX_DEPS_C_TASK) != NULL;
		const char *rt;
		char        key[24];
		drun       *r;
		dver       *v;

		while (end < nrow &&
		       ax_store_cell_i64(res, end, AX_DEPS_C_RUN) == id)
			end++;
		snprintf(key, sizeof(key), "%lld", (long long) id);
		if (mode == M_RESTART)
			rebuilt_add(d, key);
		r = ax_strmap_get(d->runs, key);
		if (state != NULL && strcmp(state, "CANCELED") == 0)
			goto next;
		if (r != NULL) {
			if (mode != M_RELOAD || r->phase != R_ACTIVE)
				goto next;
			axdd_unlink_active(r);
			axdd_run_drop(d, r);
		}
		if (mode == M_RELOAD && !has)
			goto next;
		v = axdd_dver_get(
		    d, ax_store_cell_i64(res, row, AX_DEPS_C_VERSION));
		if (v == NULL)
			goto next;
		r = axdd_run_new(
		    d, id, v, ax_store_cell_i64(res, row, AX_DEPS_C_LOGICAL),
		    ax_store_cell_i64(res, row, AX_DEPS_C_DUE), NULL);
		if (r == NULL) {
			axdd_oom("run");
			goto next;
		}
		r->iv_start_us =
		    ax_store_cell_i64(res, row, AX_DEPS_C_IV_START);
		r->iv_end_us = ax_store_cell_i64(res, row, AX_DEPS_C_IV_END);
		/* a backfill re-does old periods on purpose: their deadlines
		 * passed long ago, and a miss per run would only be noise */
		rt = ax_store_cell(res, row, AX_DEPS_C_RUN_TYPE);
		if (rt == NULL || strcmp(rt, "backfill") != 0)
			axdd_deadline_arm(d, r);
		if (has) {
			if (state == NULL || strcmp(state, "RUNNING") != 0)
				axdd_chg(d, id, "RUNNING", NULL);
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
		axdd_admit(d, fresh[i]);
	free(fresh);
}

ax_err
axdd_startup(dd *d)
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
	d->stats->startups++;
	ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
	        "rebuilt %llu active run(s) from %d row(s); %zu in memory",
	        (unsigned long long) d->stats->rebuilt, PQntuples(res),
	        ax_strmap_count(d->runs));
	PQclear(res);
	return AX_OK;
}

/* Reloads the runs of ids from PostgreSQL (mode M_*). */
void
axdd_reload(dd *d, const int64_t *ids, size_t n, int mode)
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
