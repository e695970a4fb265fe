/*
 * result_handler.c - attempt results -> attempt rows, instance moves,
 * retries, releases (see result_handler.h).
 *
 * How a batch runs: the distinct run_ids of the batch are looked up and
 * their instances locked (one statement); the results are then applied
 * in arrival order to an in-memory copy of each attempt and instance
 * state, which yields per instance a chain of legal moves (at most
 * RH_CHAIN_MAX, e.g. READY -> RUNNING -> FAILED -> PENDING). A step
 * into RUNNING and the step out of it are written as one move through
 * RUNNING (one row write; both events stay). The k-th
 * moves of every chain go out as one batched guarded move, then one
 * attempt update and one event insert: a handful of round trips per
 * batch whatever its size. Messages leave only after the commit.
 *
 * When PostgreSQL is unreachable the batch is kept (bounded) and run
 * again from a tick: the queue acknowledged these results already, so
 * dropping them would lose outcomes.
 *
 * Preempted instances are held here, not in a retry timer: each is due
 * at the jittered instant fixed (and stored) at its preemption, and the
 * due ones leave through one throttle (ax_preempt_throttle: at most
 * preemption.recovery_rate in any second, highest tier first), released
 * from the tick at each turn. Memory: one rh_victim (about 120 bytes and
 * its InstanceReady) per instance waiting. The throttle lives in memory;
 * the next axd reads the waiting ones back (load_victims).
 *
 * Throughput: every committed outcome (instances finished by state,
 * retries scheduled) is counted in memory and published in
 * component_stats at most once a second (stats_publish), for ax-api's
 * ax_instances_finished_total and ax_instance_retries_total.
 */
#include "result_handler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dag.h"
#include "dag_registry.h"
#include "config.h"
#include "flow_util.h"
#include "hash.h"
#include "hmap.h"
#include "hooks.h"
#include "preempt.h"
#include "store.h"
#include "store_attempts.h"
#include "store_events.h"
#include "store_instances.h"
#include "store_stats.h"

#define COMP         AX_A_RESULT_HANDLER
#define RH_CHAIN_MAX 4
#define RH_EV_MAX    6 /* events per run_id and batch */
#define RH_RETRY_US  AX_USEC_PER_SEC
#define RH_STATS_US  AX_USEC_PER_SEC /* component_stats period */
#define RH_LOAD_MAX  256             /* preempted instances read at once */

/* Instance states counted as finished (ax_instances_finished_total) and
 * their component_stats keys; "retries" counts retries scheduled. */
static const ax_ti_state fin_states[] = { AX_TI_SUCCESS, AX_TI_FAILED,
	                                  AX_TI_TIMEOUT, AX_TI_CANCELED };
#define RH_NFIN (sizeof(fin_states) / sizeof(fin_states[0]))
static const char *const fin_keys[RH_NFIN + 1] = {
	"finished.SUCCESS",  "finished.FAILED", "finished.TIMEOUT",
	"finished.CANCELED", "retries",
};

typedef struct rh_state {
	const ax_pipeline_ctx *ctx;
	ax_store              *store;
	ax_flow_pending        pending;
	uint64_t results, succeeded, failed, retried, late, duplicates;
	uint64_t confirmed; /* ResultsCommitted sent up to this queue_seq */
	/* committed outcomes (fin_keys order), what was last published of
	 * them, and when the next publication may run (mono us) */
	int64_t fin[RH_NFIN + 1], fin_pub[RH_NFIN + 1];
	int64_t stats_due;
	int     stats_written;
	/* preempted instances: when each is due again (preemption.requeue_*,
	 * fixed at its preemption; UTC us), then the throttle that lets the
	 * due ones back in tier order (preemption.recovery_rate) */
	ax_preempt_recovery recovery;
	ax_preempt_throttle throttle;
	ax_strmap          *victims; /* instance id text -> rh_victim */
	int      victims_loaded;     /* those of an earlier axd are read */
	uint64_t recovered;          /* released by the throttle */
	int64_t  wake; /* the deadline asked for (mono); 0: none */
} rh_state;

/* One preempted instance waiting for its recovery (owned by victims). */
typedef struct rh_victim {
	ax_preempt_victim v;
	char              key[24];    /* instance id as text */
	char              run_id[40]; /* the preempted attempt */
	Ax__Command      *ready;      /* its InstanceReady (owned) */
} rh_victim;

typedef struct rh_ev {
	ax_flow_event e;
	char          payload[256];
} rh_ev;

/* One distinct run_id of the batch. */
typedef struct rh_run {
	const char           *run_id;
	const char           *trace;
	ax_store_attempt_info info;
	Ax__InstanceRef       ref;
	/* simulation */
	char                    att[16]; /* attempt state */
	ax_ti_state             ti;      /* instance state (current only) */
	ax_store_ti_move        chain[RH_CHAIN_MAX];
	int                     nchain;
	ax_store_attempt_update upd;
	int                     touched; /* upd is to be written */
	char                    worker[256];
	char                    reason[64];
	char                    log_path[1024];
	/* the payload of the event that carries the post hook's report */
	char report[2400];
	int  dup; /* the result being applied repeats one applied before */
	/* after the commit */
	int     release, succeeded, finished, retry, cancel_timer;
	int     requeue, tier; /* preempted: held by the throttle */
	int64_t fire_at_us;
	char    final[16];
	rh_ev   ev[RH_EV_MAX];
	int     nev;
} rh_run;

typedef struct rh_batch {
	rh_state                *st;
	Ax__Command            **cmds;
	size_t                   n;
	rh_run                  *runs;
	size_t                   nruns;
	ax_strmap               *by_id; /* run_id -> rh_run */
	const char             **ids;
	ax_store_ti_move        *moves;
	ax_store_attempt_update *upds;
	ax_store_event_row      *evrows;
} rh_batch;

/* ---------------------------------------------------------------------- */
/* simulation */

static int
att_terminal(const char *s)
{
	return strcmp(s, "SUCCESS") == 0 || strcmp(s, "FAILED") == 0 ||
	    strcmp(s, "TIMEOUT") == 0 || strcmp(s, "CANCELED") == 0;
}

static rh_ev *
add_ev(rh_run *x, const char *type, const char *reason)
{
	if (x->nev == RH_EV_MAX)
		return NULL;
	rh_ev *v = &x->ev[x->nev++];
	ax_flow_event_init(&v->e, AX_A_RESULT_HANDLER, type, reason, &x->ref,
	                   x->run_id, x->info.number, x->trace, NULL);
	return v;
}

static rh_ev *
move(rh_run *x, ax_ti_state to, const char *reason, const char *evtype)
{
	if (x->nchain == RH_CHAIN_MAX || !ax_state_legal(x->ti, to))
		return NULL;
	x->chain[x->nchain++] = (ax_store_ti_move) {
		.instance_id = x->info.instance_id,
		.from        = x->ti,
		.to          = to,
		.reason      = reason,
	};
	rh_ev *v = add_ev(x, evtype, reason);
	if (v != NULL) {
		snprintf(v->payload, sizeof(v->payload),
		         "{\"from\":\"%s\",\"to\":\"%s\"}",
		         ax_state_name(x->ti), ax_state_name(to));
		v->e.ev.payload_json = v->payload;
	}
	x->ti = to;
	return v;
}

/*
 * The DAG version x's attempt ran (a newer one may retry differently),
 * read from PostgreSQL when the registry does not hold it; the current
 * version when that one cannot be read; NULL without a registry. The
 * caller releases it (ax_dag_entry_release).
 */
static ax_dag_entry *
run_entry(rh_state *st, const ax_store_attempt_info *i)
{
	ax_dag_registry *reg = st->ctx->registry;

	if (reg == NULL)
		return NULL;
	ax_dag_entry *e = ax_dag_registry_version(reg, i->dag_version_id);
	if (e == NULL && st->store != NULL && i->dag_version_id > 0 &&
	    ax_dag_registry_load_version(reg, st->store, i->dag_version_id) ==
	        AX_OK)
		e = ax_dag_registry_version(reg, i->dag_version_id);
	if (e == NULL)
		e = ax_dag_registry_current(reg, i->dag);
	return e;
}

/* Backoff before the retry of attempt `number` (1-based). */
static int64_t
backoff_us(rh_state *st, const rh_run *x)
{
	ax_task_spec def;
	ax_retry     r;

	ax_task_spec_defaults(&def);
	r                = def.retries;
	ax_dag_entry  *e = run_entry(st, &x->info);
	const ax_task *t =
	    e != NULL ? ax_dag_entry_task(e, x->info.task) : NULL;
	if (t != NULL)
		r = t->eff.retries;
	ax_dag_entry_release(e);
	int64_t d = r.delay_us > 0 ? r.delay_us : 0;
	if (r.backoff == AX_BACKOFF_EXPONENTIAL)
		for (int i = 1; i < x->info.number && d < INT64_MAX / 4; i++)
			d *= 2;
	if (r.backoff == AX_BACKOFF_EXPONENTIAL && r.max_delay_us > 0 &&
	    d > r.max_delay_us)
		d = r.max_delay_us;
	return d;
}

static void
schedule_retry(rh_state *st, rh_run *x, int64_t now)
{
	int64_t d     = backoff_us(st, x);
	x->retry      = 1;
	x->fire_at_us = now + d;
	rh_ev *v = add_ev(x, "instance.retry_scheduled", "RETRY_SCHEDULED");
	if (v != NULL) {
		snprintf(
		    v->payload, sizeof(v->payload),
		    "{\"delay_us\":%lld,\"fire_at_us\":%lld,\"attempt\":%d,"
		    "\"max_tries\":%d}",
		    (long long) d, (long long) x->fire_at_us, x->info.number,
		    x->info.max_tries);
		v->e.ev.payload_json = v->payload;
	}
}

/* The tier (DAG impact, 0 = P0) of an instance; P2, the default, when
 * its DAG cannot be read. */
static int
tier_of(rh_state *st, const ax_store_attempt_info *i)
{
	ax_dag_entry *e    = run_entry(st, i);
	int           tier = e != NULL ? (int) e->dag->impact : AX_IMPACT_P2;
	ax_dag_entry_release(e);
	return tier;
}

/*
 * x's attempt was preempted (CANCELED, reason PREEMPTED) while its
 * instance ran: the instance goes back to PENDING, due again at its
 * jittered instant (ax_preempt_recovery_at: fixed now and stored in the
 * event), as a retry that uses up no try (the move raises max_tries,
 * migration 0017); after the commit the throttle holds it until its turn
 * (hold_victim). now: UTC us.
 */
static void
schedule_requeue(rh_state *st, rh_run *x, int64_t now)
{
	move(x, AX_TI_PENDING, "PREEMPTED", "instance.preempted");
	x->retry   = 1;
	x->requeue = 1;
	x->tier    = tier_of(st, &x->info);
	x->fire_at_us =
	    ax_preempt_recovery_at(&st->recovery, now, ax_hash_str(x->run_id));
	rh_ev *v = add_ev(x, "instance.retry_scheduled", "PREEMPTED");
	if (v != NULL) {
		snprintf(v->payload, sizeof(v->payload),
		         "{\"delay_us\":%lld,\"fire_at_us\":%lld,"
		         "\"attempt\":%d,\"preempted\":true,\"tier\":\"%s\","
		         "\"recovery_rate\":%d}",
		         (long long) (x->fire_at_us - now),
		         (long long) x->fire_at_us, x->info.number,
		         ax_impact_name((ax_impact) x->tier),
		         st->throttle.rate_per_s);
		v->e.ev.payload_json = v->payload;
	}
}

static const char *
status_name(Ax__AttemptStatus s)
{
	switch (s) {
	case AX__ATTEMPT_STATUS__ATTEMPT_SUCCESS:
		return "SUCCESS";
	case AX__ATTEMPT_STATUS__ATTEMPT_FAILED:
		return "FAILED";
	case AX__ATTEMPT_STATUS__ATTEMPT_TIMEOUT:
		return "TIMEOUT";
	case AX__ATTEMPT_STATUS__ATTEMPT_CANCELED:
		return "CANCELED";
	case AX__ATTEMPT_STATUS__ATTEMPT_UNKNOWN:
		return "UNKNOWN";
	case AX__ATTEMPT_STATUS__ATTEMPT_STARTED:
		return "RUNNING";
	case AX__ATTEMPT_STATUS__ATTEMPT_DISPATCHED:
		return "DISPATCHED";
	default:
		return NULL;
	}
}

/* Merges the facts of res into the attempt update (never erases). */
static void
merge_facts(rh_run *x, const Ax__AttemptResult *res)
{
	ax_store_attempt_update *u = &x->upd;

	x->touched = 1;
	if (res->worker_id[0] != '\0') {
		snprintf(x->worker, sizeof(x->worker), "%s", res->worker_id);
		u->worker_id = x->worker;
	}
	if (res->dispatched_at_us != 0 && u->dispatched_at_us == 0)
		u->dispatched_at_us = res->dispatched_at_us;
	if (res->started_at_us != 0 && u->started_at_us == 0)
		u->started_at_us = res->started_at_us;
	if (res->log_path[0] != '\0') {
		snprintf(x->log_path, sizeof(x->log_path), "%s",
		         res->log_path);
		u->log_path = x->log_path;
	}
}

static void
apply_terminal(rh_state *st, rh_run *x, const Ax__AttemptResult *res,
               const char *s, int64_t now)
{
	int was_lost = strcmp(x->att, "UNKNOWN") == 0;

	snprintf(x->att, sizeof(x->att), "%s", s);
	x->upd.ended_at_us = res->ended_at_us != 0 ? res->ended_at_us : now;
	x->upd.has_exit = res->status != AX__ATTEMPT_STATUS__ATTEMPT_CANCELED;
	x->upd.exit_status =
	    res->term_signal != 0 ? 128 + res->term_signal : res->exit_code;
	if (res->reason[0] != '\0') {
		snprintf(x->reason, sizeof(x->reason), "%s", res->reason);
		x->upd.reason = x->reason;
	}
	if (!was_lost)
		x->release = 1;
	if (!x->info.is_current) {
		st->late++;
		ax_logf(
		    AX_LOG_INFO, AX_A_RESULT_HANDLER, "LATE_RESULT",
		    &(ax_log_ids) { .dag      = x->info.dag,
		                    .instance = x->info.instance_id,
		                    .run_id   = x->run_id,
		                    .attempt  = x->info.number },
		    "%s for attempt %d, which is no longer current: only the "
		    "attempt row is updated",
		    s, x->info.number);
		return;
	}
	const char *why       = x->reason[0] ? x->reason : NULL;
	int         is_ok     = strcmp(s, "SUCCESS") == 0;
	int         is_cancel = strcmp(s, "CANCELED") == 0;
	int         is_to     = strcmp(s, "TIMEOUT") == 0;
	/* preempted after its start (a kill before it is a cancel) */
	int is_pre = is_cancel && why != NULL &&
	    strcmp(why, "PREEMPTED") == 0 &&
	    (x->ti == AX_TI_RUNNING ||
	     (x->ti == AX_TI_READY && x->upd.started_at_us != 0));
	if (is_pre) {
		if (x->ti == AX_TI_READY)
			move(x, AX_TI_RUNNING, NULL, "instance.running");
		schedule_requeue(st, x, now);
		st->retried++;
		snprintf(x->final, sizeof(x->final), "PENDING");
		return;
	}
	if (x->ti == AX_TI_READY && is_cancel)
		move(x, AX_TI_CANCELED, why, "instance.canceled");
	else if (x->ti == AX_TI_READY)
		move(x, AX_TI_RUNNING, NULL, "instance.running");
	if (x->ti == AX_TI_RUNNING)
		move(x,
		     is_ok           ? AX_TI_SUCCESS
		         : is_cancel ? AX_TI_CANCELED
		         : is_to     ? AX_TI_TIMEOUT
		                     : AX_TI_FAILED,
		     is_to && why == NULL ? "TIMEOUT_EXEC" : why,
		     is_ok           ? "instance.succeeded"
		         : is_cancel ? "instance.canceled"
		         : is_to     ? "instance.timeout"
		                     : "instance.failed");
	else if (x->ti == AX_TI_UNKNOWN) {
		/* a late report settles the lost attempt; the retry armed
		 * when it was lost is no longer wanted */
		x->cancel_timer = 1;
		x->retry        = 0;
		move(x, is_ok ? AX_TI_SUCCESS : AX_TI_FAILED, why,
		     is_ok ? "instance.succeeded" : "instance.failed");
	}
	if (x->ti == AX_TI_SUCCESS) {
		x->succeeded = 1;
		st->succeeded++;
	} else if (x->ti == AX_TI_FAILED || x->ti == AX_TI_TIMEOUT) {
		int render = strcmp(x->reason, "RENDER_ERROR") == 0;
		if (x->info.number < x->info.max_tries && !render) {
			snprintf(x->final, sizeof(x->final), "%s",
			         ax_state_name(x->ti));
			move(x, AX_TI_PENDING, "RETRY_SCHEDULED",
			     "instance.pending");
			schedule_retry(st, x, now);
			x->cancel_timer = 0;
			st->retried++;
		} else {
			x->finished = 1;
			st->failed++;
		}
	} else if (x->ti == AX_TI_CANCELED) {
		x->finished = 1;
	}
	if (x->final[0] == '\0')
		snprintf(x->final, sizeof(x->final), "%s",
		         ax_state_name(x->ti));
}

static void
apply_unknown(rh_state *st, rh_run *x, const Ax__AttemptResult *res,
              int64_t now)
{
	snprintf(x->att, sizeof(x->att), "UNKNOWN");
	snprintf(x->reason, sizeof(x->reason), "%s",
	         res->reason[0] ? res->reason : "TIMEOUT_HEARTBEAT");
	x->upd.reason = x->reason;
	x->release    = 1;
	if (!x->info.is_current)
		return;
	if (x->ti == AX_TI_READY)
		move(x, AX_TI_RUNNING, NULL, "instance.running");
	if (x->ti != AX_TI_RUNNING)
		return;
	move(x, AX_TI_UNKNOWN, x->reason, "instance.unknown");
	if (x->info.number < x->info.max_tries) {
		schedule_retry(st, x, now);
		st->retried++;
	} else {
		move(x, AX_TI_FAILED, x->reason, "instance.failed");
		x->finished = 1;
		st->failed++;
	}
	snprintf(x->final, sizeof(x->final), "%s", ax_state_name(x->ti));
}

static void apply_result(rh_state *st, rh_run *x, const Ax__AttemptResult *res,
                         int64_t now);

/*
 * The post hooks' report (hooks.h) of a worker's result that ended (or
 * lost) an attempt goes into the first event that result caused other
 * than instance.running (e.g. instance.succeeded, or instance.failed
 * before its retry), under "report"; a result that caused no event (a late
 * one) gets an attempt.reported event of its own. One audit row per
 * report, written in this transaction. The hooks run here, as a function
 * call, on results the queue forwarded (queue_seq set); a result that
 * already carries a report keeps it; results from inside axd (render
 * errors, canceled before dispatch) have none.
 */
static void
attach_report(rh_run *x, const Ax__AttemptResult *res, int first_ev)
{
	char        rep[2048];
	const char *report_json = res->report_json;

	if ((report_json == NULL || report_json[0] != '{') &&
	    res->queue_seq > 0) {
		ax_hooks_post(res, rep, sizeof(rep));
		report_json = rep;
	}
	if (report_json == NULL || report_json[0] != '{')
		return;
	for (int k = first_ev; k < x->nev; k++) {
		rh_ev *v = &x->ev[k];
		if (strcmp(v->e.ev.type, "instance.running") == 0)
			continue;
		const char *pl = v->e.ev.payload_json;
		size_t      n  = pl != NULL ? strlen(pl) : 0;
		if (n >= 2 && pl[n - 1] == '}')
			snprintf(x->report, sizeof(x->report),
			         "%.*s,\"report\":%s}", (int) n - 1, pl,
			         report_json);
		else
			snprintf(x->report, sizeof(x->report),
			         "{\"report\":%s}", report_json);
		v->e.ev.payload_json = x->report;
		return;
	}
	rh_ev *v = add_ev(x, "attempt.reported",
	                  res->reason[0] != '\0' ? res->reason : NULL);
	if (v == NULL)
		return;
	snprintf(x->report, sizeof(x->report), "%s", report_json);
	v->e.ev.payload_json = x->report;
}

/* Applies one result to its run entry. */
static void
apply(rh_state *st, rh_run *x, const Ax__AttemptResult *res, int64_t now)
{
	int first_ev = x->nev;
	apply_result(st, x, res, now);
	if (res->status != AX__ATTEMPT_STATUS__ATTEMPT_STARTED &&
	    res->status != AX__ATTEMPT_STATUS__ATTEMPT_DISPATCHED && !x->dup)
		attach_report(x, res, first_ev);
	x->dup = 0;
}

static void
apply_result(rh_state *st, rh_run *x, const Ax__AttemptResult *res,
             int64_t now)
{
	const char *s = status_name(res->status);

	if (s == NULL)
		return;
	merge_facts(x, res);
	if (strcmp(s, "DISPATCHED") == 0) {
		if (strcmp(x->att, "QUEUED") == 0)
			snprintf(x->att, sizeof(x->att), "DISPATCHED");
		return;
	}
	if (strcmp(s, "RUNNING") == 0) {
		if (strcmp(x->att, "QUEUED") == 0 ||
		    strcmp(x->att, "DISPATCHED") == 0)
			snprintf(x->att, sizeof(x->att), "RUNNING");
		if (x->info.is_current && x->ti == AX_TI_READY)
			move(x, AX_TI_RUNNING, NULL, "instance.running");
		return;
	}
	if (att_terminal(x->att)) {
		/* a re-send adds nothing; a report that contradicts the
		 * stored end (FAILED, then SUCCESS) keeps its own event */
		st->duplicates++;
		x->dup = strcmp(s, x->att) == 0;
		if (x->upd.ended_at_us == 0 && res->ended_at_us != 0)
			x->upd.ended_at_us = res->ended_at_us;
		return;
	}
	if (strcmp(s, "UNKNOWN") == 0) {
		if (strcmp(x->att, "UNKNOWN") == 0) {
			st->duplicates++;
			x->dup = 1;
			return;
		}
		apply_unknown(st, x, res, now);
		return;
	}
	apply_terminal(st, x, res, s, now);
}

/* ---------------------------------------------------------------------- */
/* the transaction */

static rh_run *
run_of(rh_batch *b, const char *run_id)
{
	return ax_strmap_get(b->by_id, run_id);
}

static void
reset_run(rh_run *x)
{
	const char *id = x->run_id, *tr = x->trace;
	memset(x, 0, sizeof(*x));
	x->run_id = id;
	x->trace  = tr;
}

static void
init_run(rh_run *x)
{
	ax_store_attempt_info *i = &x->info;

	x->ref                 = (Ax__InstanceRef) AX__INSTANCE_REF__INIT;
	x->ref.dag             = i->dag;
	x->ref.dag_version_id  = i->dag_version_id;
	x->ref.dag_run_id      = i->dag_run_id;
	x->ref.task            = i->task;
	x->ref.instance_id     = i->instance_id;
	x->ref.logical_time_us = i->logical_time_us;
	x->ref.shard_index     = i->shard;
	x->ref.shard_total     = i->shard_total;
	snprintf(x->att, sizeof(x->att), "%s", i->state);
	x->ti         = i->ti_state;
	x->upd.run_id = x->run_id;
}

/* Joins each X -> RUNNING with the RUNNING -> Y after it into one move
 * X -> Y through RUNNING: the row is written once (a start and its end
 * often arrive in one batch); the chain's events are untouched. */
static void
fold_running(rh_run *x)
{
	int n = 0;
	for (int k = 0; k < x->nchain; k++) {
		ax_store_ti_move m = x->chain[k];
		if (m.to == AX_TI_RUNNING && !m.via_running &&
		    k + 1 < x->nchain) {
			m.to          = x->chain[k + 1].to;
			m.reason      = x->chain[k + 1].reason;
			m.via_running = 1;
			k++;
		}
		x->chain[n++] = m;
	}
	x->nchain = n;
}

static ax_err
rh_tx(ax_store *s, void *arg)
{
	rh_batch *b   = arg;
	int64_t   now = ax_clock_utc_us();
	size_t    nu = 0, ne = 0;
	ax_err    rv;

	for (size_t i = 0; i < b->nruns; i++) {
		reset_run(&b->runs[i]);
		b->ids[i] = b->runs[i].run_id;
	}
	/* (b->runs[].info is zeroed by the lookup) */
	ax_store_attempt_info *infos = malloc(sizeof(*infos) * (b->nruns + 1));
	if (infos == NULL)
		return ax_err_set(AX_ENOMEM, COMP ": out of memory");
	rv = ax_store_lock_attempts(s, b->ids, b->nruns, infos);
	for (size_t i = 0; rv == AX_OK && i < b->nruns; i++) {
		b->runs[i].info = infos[i];
		if (infos[i].found)
			init_run(&b->runs[i]);
	}
	free(infos);
	if (rv != AX_OK)
		return rv;
	for (size_t i = 0; i < b->n; i++) {
		const Ax__AttemptResult *res = b->cmds[i]->result;
		rh_run                  *x   = run_of(b, res->run_id);
		if (x != NULL && x->info.found)
			apply(b->st, x, res, now);
	}
	for (size_t i = 0; i < b->nruns; i++)
		fold_running(&b->runs[i]);
	for (int k = 0; k < RH_CHAIN_MAX; k++) {
		size_t nm = 0;
		for (size_t i = 0; i < b->nruns; i++)
			if (b->runs[i].nchain > k)
				b->moves[nm++] = b->runs[i].chain[k];
		if (nm == 0)
			break;
		if ((rv = ax_store_move_instances(s, b->moves, nm, NULL)) !=
		    AX_OK)
			return rv;
	}
	for (size_t i = 0; i < b->nruns; i++) {
		rh_run *x = &b->runs[i];
		if (!x->info.found || !x->touched)
			continue;
		x->upd.state  = x->att;
		b->upds[nu++] = x->upd;
		for (int k = 0; k < x->nev; k++)
			ax_flow_event_row(&x->ev[k].e.ev, &b->evrows[ne++]);
	}
	if ((rv = ax_store_update_attempts(s, b->upds, nu, NULL)) != AX_OK)
		return rv;
	return ax_store_insert_events(s, b->evrows, ne, NULL, NULL);
}

/* ---------------------------------------------------------------------- */
/* after the commit */

static void
send(ax_actor *self, const char *dest, Ax__Command *c, const rh_run *x)
{
	c->issued_at_us = ax_clock_utc_us();
	if (x->trace != NULL)
		c->trace_id = (char *) x->trace;
	(void) ax_pipeline_send(self, dest, c);
}

/* ---------------------------------------------------------------------- */
/* the recovery of preempted instances */

/*
 * Asks for a tick at mono (or keeps an earlier one asked for): the
 * actor has one deadline and several reasons to wake (kept results,
 * statistics, the throttle's next turn).
 */
static void
wake(ax_actor *self, rh_state *st, int64_t mono)
{
	if (st->wake != 0 && st->wake <= mono)
		return;
	st->wake = mono;
	ax_actor_set_deadline(self, mono);
}

/* The InstanceReady of a retry of i's instance (ref: its InstanceRef)
 * due at due_us; its strings point into i and ref. */
static void
retry_ready(const ax_store_attempt_info *i, Ax__InstanceRef *ref,
            int64_t due_us, Ax__InstanceReady *rd)
{
	*rd               = (Ax__InstanceReady) AX__INSTANCE_READY__INIT;
	rd->instance      = ref;
	rd->priority      = i->priority;
	rd->channel       = (char *) i->channel;
	rd->worker_group  = (char *) i->worker_group;
	rd->pool          = (char *) i->pool;
	rd->due_at_us     = due_us;
	rd->slots         = 1;
	rd->after_attempt = i->number;
}

static void
victim_free(void *p)
{
	rh_victim *w = p;
	if (w == NULL)
		return;
	ax__command__free_unpacked(w->ready, NULL);
	free(w);
}

/*
 * Puts the preempted instance of i (its attempt run_id, trace may be
 * NULL) in the throttle, due at due_us (UTC), tier 0 = P0; replaces the
 * one held for that instance, if any. Keeps a copy of its InstanceReady
 * for the release. Out of memory: it is logged and the instance is sent
 * on at once (early beats lost).
 */
static void
hold_victim(ax_actor *self, rh_state *st, const ax_store_attempt_info *i,
            Ax__InstanceRef *ref, const char *run_id, const char *trace,
            int tier, int64_t due_us)
{
	Ax__Command       c = AX__COMMAND__INIT;
	Ax__InstanceReady rd;
	uint8_t           buf[4096];
	rh_victim        *w = calloc(1, sizeof(*w));

	retry_ready(i, ref, due_us, &rd);
	c.body_case      = AX__COMMAND__BODY_INSTANCE_READY;
	c.instance_ready = &rd;
	if (trace != NULL)
		c.trace_id = (char *) trace;
	size_t len = ax__command__get_packed_size(&c);
	if (w != NULL && len <= sizeof(buf)) {
		ax__command__pack(&c, buf);
		w->ready = ax__command__unpack(NULL, len, buf);
	}
	if (w == NULL)
		goto lost;
	snprintf(w->key, sizeof(w->key), "%lld", (long long) i->instance_id);
	rh_victim *old = ax_strmap_del(st->victims, w->key);
	if (old != NULL) {
		ax_preempt_throttle_remove(&st->throttle, &old->v);
		victim_free(old);
	}
	if (w->ready == NULL)
		goto lost;
	snprintf(w->run_id, sizeof(w->run_id), "%s", run_id);
	w->v = (ax_preempt_victim) { .id       = i->instance_id,
		                     .tier     = tier,
		                     .priority = i->priority,
		                     .due_us   = due_us };
	if (ax_strmap_put(st->victims, w->key, w) != AX_OK)
		goto lost;
	if (ax_preempt_throttle_add(&st->throttle, &w->v) == AX_OK)
		return;
	(void) ax_strmap_del(st->victims, w->key);
lost:
	victim_free(w);
	ax_logf(AX_LOG_ERROR, COMP, "RECOVERY_NOT_HELD",
	        &(ax_log_ids) { .instance = i->instance_id },
	        "preempted instance not held for its recovery: out of memory; "
	        "it is ready again at once");
	c.issued_at_us = ax_clock_utc_us();
	(void) ax_pipeline_send(self, AX_A_RESOURCE_DETECTOR, &c);
}

/* Sends w's InstanceReady on, with the event that explains the release:
 * its tier, how long it was held past its due instant, the throttle. */
static void
release_victim(ax_actor *self, rh_state *st, rh_victim *w, int64_t utc)
{
	Ax__Command       *c  = w->ready;
	Ax__InstanceReady *rd = c->instance_ready;
	ax_flow_event      e;
	char               pl[256];

	c->issued_at_us = utc;
	(void) ax_pipeline_send(self, AX_A_RESOURCE_DETECTOR, c);
	snprintf(pl, sizeof(pl),
	         "{\"tier\":\"%s\",\"priority\":%d,\"due_at_us\":%lld,"
	         "\"held_us\":%lld,\"throttle\":\"preemption.recovery_rate\","
	         "\"recovery_rate\":%d,\"still_held\":%zu}",
	         ax_impact_name((ax_impact) w->v.tier), w->v.priority,
	         (long long) w->v.due_us, (long long) (utc - w->v.due_us),
	         st->throttle.rate_per_s,
	         ax_preempt_throttle_held(&st->throttle));
	ax_flow_event_init(&e, COMP, "instance.recovery_released", "PREEMPTED",
	                   rd->instance, w->run_id, rd->after_attempt,
	                   c->trace_id[0] != '\0' ? c->trace_id : NULL, pl);
	(void) ax_flow_event_send(self, &e, 0);
	st->recovered++;
}

/*
 * Releases every preempted instance whose turn has come (due, and the
 * throttle's gap passed: ax_preempt_throttle_pop) and asks for a tick at
 * the next turn. From the actor's thread (tick, batch end).
 */
static void
recover(ax_actor *self, rh_state *st)
{
	int64_t            utc = ax_clock_utc_us();
	ax_preempt_victim *v;

	while ((v = ax_preempt_throttle_pop(&st->throttle, utc)) != NULL) {
		rh_victim *w = (rh_victim *) v; /* v is its first member */
		(void) ax_strmap_del(st->victims, w->key);
		release_victim(self, st, w, utc);
		victim_free(w);
	}
	int64_t next = ax_preempt_throttle_next_us(&st->throttle);
	if (next == INT64_MAX)
		return;
	int64_t in = next - utc > 1000 ? next - utc : 1000;
	wake(self, st, ax_clock_mono_us() + in);
}

static void
after_commit(ax_actor *self, rh_state *st, rh_run *x)
{
	Ax__Command c = AX__COMMAND__INIT;

	for (int k = 0; k < x->nev; k++)
		(void) ax_flow_event_send(self, &x->ev[k].e, 1);
	if (x->release) {
		Ax__SlotReleased sr = AX__SLOT_RELEASED__INIT;
		sr.instance         = &x->ref;
		sr.run_id           = (char *) x->run_id;
		sr.attempt          = x->info.number;
		sr.worker_group     = x->info.worker_group;
		sr.pool             = x->info.pool;
		sr.slots            = 1;
		sr.state            = x->att;
		c.body_case         = AX__COMMAND__BODY_SLOT_RELEASED;
		c.slot_released     = &sr;
		send(self, AX_A_RESOURCE_DETECTOR, &c, x);
	}
	if (x->succeeded) {
		Ax__InstanceSucceeded is = AX__INSTANCE_SUCCEEDED__INIT;
		is.instance              = &x->ref;
		is.ended_at_us           = x->upd.ended_at_us;
		c.body_case          = AX__COMMAND__BODY_INSTANCE_SUCCEEDED;
		c.instance_succeeded = &is;
		send(self, AX_A_DEPENDENCY_DETECTOR, &c, x);
	}
	if (x->finished) {
		Ax__InstanceFinished f = AX__INSTANCE_FINISHED__INIT;
		f.instance             = &x->ref;
		f.state                = x->final;
		f.ended_at_us          = x->upd.ended_at_us;
		c.body_case            = AX__COMMAND__BODY_INSTANCE_FINISHED;
		c.instance_finished    = &f;
		send(self, AX_A_DEPENDENCY_DETECTOR, &c, x);
	}
	char key[24];
	snprintf(key, sizeof(key), "%lld", (long long) x->info.instance_id);
	if (x->retry && x->requeue) {
		hold_victim(self, st, &x->info, &x->ref, x->run_id, x->trace,
		            x->tier, x->fire_at_us);
	} else if (x->retry) {
		Ax__TimerSet      ts = AX__TIMER_SET__INIT;
		Ax__InstanceReady rd;
		retry_ready(&x->info, &x->ref, x->fire_at_us, &rd);
		ts.kind       = AX__TIMER_KIND__TIMER_RETRY;
		ts.key        = key;
		ts.fire_at_us = x->fire_at_us;
		ts.notify     = AX_A_RESOURCE_DETECTOR;
		ts.instance   = &x->ref;
		ts.run_id     = (char *) x->run_id;
		ts.ready      = &rd;
		c.body_case   = AX__COMMAND__BODY_TIMER_SET;
		c.timer_set   = &ts;
		send(self, AX_A_TIME_DETECTOR, &c, x);
	} else if (x->cancel_timer) {
		Ax__TimerCancel tc = AX__TIMER_CANCEL__INIT;
		tc.kind            = AX__TIMER_KIND__TIMER_RETRY;
		tc.key             = key;
		c.body_case        = AX__COMMAND__BODY_TIMER_CANCEL;
		c.timer_cancel     = &tc;
		send(self, AX_A_TIME_DETECTOR, &c, x);
	}
}

/* Counts x's committed outcome for the throughput counters. */
static void
count_outcome(rh_state *st, const rh_run *x)
{
	if (x->retry)
		st->fin[RH_NFIN]++;
	if (!x->succeeded && !x->finished)
		return;
	for (size_t k = 0; k < RH_NFIN; k++)
		if (x->ti == fin_states[k])
			st->fin[k]++;
}

/*
 * Publishes the throughput counters in component_stats (component
 * "result_handler", for ax-api's /metrics): at most once per RH_STATS_US,
 * only when a value changed, never while results wait for the database
 * (they share its connection). Arms the actor's deadline for the next
 * publication when a change is still to be written.
 */
static void
stats_publish(ax_actor *self, rh_state *st)
{
	ax_store_stat rows[RH_NFIN + 1];
	size_t        n   = 0;
	int64_t       now = ax_clock_mono_us();

	if (st->ctx->dsn == NULL || st->pending.n > 0)
		return;
	for (size_t k = 0; k <= RH_NFIN; k++)
		if (!st->stats_written || st->fin[k] != st->fin_pub[k])
			rows[n++] = (ax_store_stat) { .component = COMP,
				                      .key       = fin_keys[k],
				                      .value = st->fin[k] };
	if (n == 0)
		return;
	if (now < st->stats_due) {
		wake(self, st, st->stats_due);
		return;
	}
	st->stats_due = now + RH_STATS_US;
	if ((st->store == NULL &&
	     ax_store_open(st->ctx->dsn, &st->store) != AX_OK) ||
	    ax_store_stats_put(st->store, rows, n) != AX_OK) {
		ax_logf(AX_LOG_DEBUG, COMP, NULL, NULL,
		        "component_stats not written: %s", ax_err_detail());
		wake(self, st, st->stats_due);
		return;
	}
	memcpy(st->fin_pub, st->fin, sizeof(st->fin));
	st->stats_written = 1;
}

/* Runs a batch of results (cmds owned by the caller). */
static ax_err
run_batch(ax_actor *self, rh_state *st, Ax__Command **cmds, size_t n)
{
	rh_batch b  = { .st = st, .cmds = cmds, .n = n };
	ax_err   rv = AX_OK;

	b.runs   = calloc(n, sizeof(*b.runs));
	b.ids    = calloc(n, sizeof(*b.ids));
	b.moves  = calloc(n, sizeof(*b.moves));
	b.upds   = calloc(n, sizeof(*b.upds));
	b.evrows = calloc(n * RH_EV_MAX, sizeof(*b.evrows));
	if (b.runs == NULL || b.ids == NULL || b.moves == NULL ||
	    b.upds == NULL || b.evrows == NULL ||
	    ax_strmap_new(&b.by_id) != AX_OK) {
		rv = ax_err_set(AX_ENOMEM, COMP ": out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const Ax__AttemptResult *res = cmds[i]->result;
		if (run_of(&b, res->run_id) != NULL)
			continue;
		rh_run *x = &b.runs[b.nruns];
		x->run_id = res->run_id;
		x->trace  = cmds[i]->trace_id[0] ? cmds[i]->trace_id : NULL;
		if ((rv = ax_strmap_put(b.by_id, x->run_id, x)) != AX_OK)
			goto out;
		b.nruns++;
	}
	if (st->store == NULL &&
	    (rv = ax_store_open(st->ctx->dsn, &st->store)) != AX_OK)
		goto out;
	/* Committed without waiting for the WAL flush: the downstream is
	 * released at once (after_commit), and the queue acknowledges the
	 * reports only once a durable commit of its own follows (confirm).
	 * What acts on this commit outside the database is a worker given
	 * an attempt it released, and that needs a dispatch record, a
	 * durable commit after this one in the WAL (docs/pipeline.md, 7). */
	if ((rv = ax_store_tx_relaxed(st->store, rh_tx, &b)) != AX_OK)
		goto out;
	for (size_t i = 0; i < b.nruns; i++) {
		if (!b.runs[i].info.found) {
			ax_logf(AX_LOG_WARN, ax_actor_name(self),
			        "UNKNOWN_RUN_ID",
			        &(ax_log_ids) { .run_id = b.runs[i].run_id },
			        "result for an attempt that does not exist; "
			        "dropped");
			continue;
		}
		after_commit(self, st, &b.runs[i]);
		count_outcome(st, &b.runs[i]);
	}
out:
	ax_strmap_free(b.by_id, NULL);
	free(b.runs);
	free(b.ids);
	free(b.moves);
	free(b.upds);
	free(b.evrows);
	return rv;
}

/*
 * Tells the queue service that every result it forwarded up to seq is in
 * PostgreSQL, committed relaxed, so it may acknowledge the worker reports
 * that carried them once a durable commit follows (see the
 * acknowledgement rule in actors/queue/queue_endpoint.c).
 * Results arrive in the queue's order and are committed in that order (a
 * kept batch keeps everything after it), so one watermark says it all.
 */
static void
confirm(ax_actor *self, rh_state *st, uint64_t seq)
{
	Ax__Command          c  = AX__COMMAND__INIT;
	Ax__ResultsCommitted rc = AX__RESULTS_COMMITTED__INIT;

	if (seq <= st->confirmed)
		return;
	st->confirmed       = seq;
	rc.up_to_seq        = seq;
	rc.relaxed          = 1; /* see run_batch */
	c.body_case         = AX__COMMAND__BODY_RESULTS_COMMITTED;
	c.results_committed = &rc;
	if (ax_pipeline_send(self, AX_A_QUEUE, &c) != AX_OK)
		ax_logf(AX_LOG_WARN, ax_actor_name(self), NULL, NULL,
		        "commit confirmation not sent (the worker will send "
		        "its results again): %s",
		        ax_err_detail());
}

/* Runs cmds (Results only: the one kind rh_def handles) in slices of one
 * transaction each; keeps them on a database failure. Takes ownership of
 * the commands of cmds[], not of the array. */
static ax_err
run_cmds(ax_actor *self, void *arg, Ax__Command **cmds, size_t n)
{
	rh_state *st   = arg;
	ax_err    rv   = AX_OK;
	size_t    k    = 0;
	uint64_t  done = 0;

	for (size_t i = 0; i < n; i++) {
		if (cmds[i]->result->run_id[0] != '\0') {
			cmds[k++] = cmds[i];
			st->results++;
			continue;
		}
		ax_log_warn(ax_actor_name(self),
		            "dropped a result without a run_id");
		ax__command__free_unpacked(cmds[i], NULL);
	}
	for (size_t off = 0; off < k; off += 512) {
		size_t m = k - off < 512 ? k - off : 512;
		ax_err r = st->pending.n > 0
		    ? AX_EDBCONN
		    : run_batch(self, st, cmds + off, m);
		if (ax_flow_db_transient(r)) {
			if (st->pending.n == 0)
				ax_logf(AX_LOG_WARN, ax_actor_name(self), NULL,
				        NULL, "results kept for a retry: %s",
				        ax_err_detail());
			for (size_t i = off; i < off + m; i++)
				ax_flow_pending_keep(&st->pending, cmds[i]);
			wake(self, st, ax_clock_mono_us() + RH_RETRY_US);
			continue;
		}
		/* committed, or refused for good (retrying cannot help):
		 * either way the worker need not send it again */
		for (size_t i = off; i < off + m; i++) {
			if (cmds[i]->result->queue_seq > done)
				done = cmds[i]->result->queue_seq;
			ax__command__free_unpacked(cmds[i], NULL);
		}
		if (r != AX_OK && rv == AX_OK)
			rv = r;
	}
	confirm(self, st, done);
	return rv;
}

/* A Result is collected for the batch's transaction (or queued behind
 * the kept ones while PostgreSQL is down): ax_flow_pending_collect. */
static ax_err
on_result(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	rh_state *st = state;
	(void) self;
	return ax_flow_pending_collect(&st->pending, m);
}

/*
 * The instances an earlier axd preempted and did not let back yet
 * (PENDING, reason PREEMPTED: the dependency detector's rebuild leaves
 * them to this actor) go into the throttle again, due at the instant
 * their instance.retry_scheduled event stored (now when it is gone).
 * Once, at the first tick; again at the next tick while PostgreSQL
 * cannot answer.
 */
static void
load_victims(ax_actor *self, rh_state *st)
{
	ax_store_preempted     ps[RH_LOAD_MAX];
	const char            *ids[RH_LOAD_MAX];
	ax_store_attempt_info *infos;
	int64_t                after = 0;
	size_t                 n, held = 0;

	if (st->ctx->dsn == NULL) {
		st->victims_loaded = 1;
		return;
	}
	if ((infos = malloc(sizeof(*infos) * RH_LOAD_MAX)) == NULL) {
		wake(self, st, ax_clock_mono_us() + RH_RETRY_US);
		return;
	}
	do {
		if ((st->store == NULL &&
		     ax_store_open(st->ctx->dsn, &st->store) != AX_OK) ||
		    ax_store_preempted_list(st->store, after, ps, RH_LOAD_MAX,
		                            &n) != AX_OK) {
			ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
			        "preempted instances not read yet, again in 1 "
			        "s: %s",
			        ax_err_detail());
			wake(self, st, ax_clock_mono_us() + RH_RETRY_US);
			free(infos);
			return;
		}
		for (size_t k = 0; k < n; k++)
			ids[k] = ps[k].run_id;
		if (n > 0 &&
		    ax_store_lock_attempts(st->store, ids, n, infos) !=
		        AX_OK) {
			wake(self, st, ax_clock_mono_us() + RH_RETRY_US);
			free(infos);
			return;
		}
		int64_t now = ax_clock_utc_us();
		for (size_t k = 0; k < n; k++) {
			rh_run x = { .run_id = ps[k].run_id };
			after    = ps[k].instance_id;
			x.info   = infos[k];
			if (!x.info.found || !x.info.is_current ||
			    x.info.ti_state != AX_TI_PENDING)
				continue;
			init_run(&x);
			hold_victim(self, st, &x.info, &x.ref, x.run_id, NULL,
			            tier_of(st, &x.info),
			            ps[k].fire_at_us > 0 ? ps[k].fire_at_us
			                                 : now);
			held++;
		}
	} while (n == RH_LOAD_MAX);
	free(infos);
	st->victims_loaded = 1;
	if (held > 0)
		ax_logf(
		    AX_LOG_INFO, COMP, NULL, NULL,
		    "%zu preempted instance(s) wait for their recovery again",
		    held);
}

static ax_err
rh_batch_end(ax_actor *self, void *state)
{
	rh_state *st = state;
	ax_err    rv = ax_flow_pending_run(self, st, &st->pending, run_cmds);
	if (!st->victims_loaded && st->pending.n == 0)
		load_victims(self, st);
	recover(self, st);
	stats_publish(self, st);
	return rv;
}

static ax_err
rh_tick(ax_actor *self, void *state, int64_t now)
{
	rh_state *st = state;
	ax_err    rv = AX_OK;
	(void) now;
	st->wake = 0; /* the runtime cleared the deadline */
	if (st->pending.n > 0)
		rv = ax_flow_pending_retry(self, st, &st->pending, run_cmds);
	if (!st->victims_loaded && st->pending.n == 0)
		load_victims(self, st);
	recover(self, st);
	stats_publish(self, st);
	return rv;
}

/* Frees what the state holds (the pipeline frees the state). */
static void
rh_fini(void *state)
{
	rh_state *st = state;
	ax_log_info(
	    COMP,
	    "stopped: %llu results, %llu succeeded, %llu failed, "
	    "%llu retries, %llu late, %llu duplicates, %zu pending, "
	    "%llu dropped, %llu preempted recovered, %zu waiting",
	    (unsigned long long) st->results,
	    (unsigned long long) st->succeeded,
	    (unsigned long long) st->failed, (unsigned long long) st->retried,
	    (unsigned long long) st->late, (unsigned long long) st->duplicates,
	    st->pending.n, (unsigned long long) st->pending.dropped,
	    (unsigned long long) st->recovered,
	    ax_preempt_throttle_count(&st->throttle));
	ax_flow_pending_fini(&st->pending);
	ax_preempt_throttle_fini(&st->throttle);
	ax_strmap_free(st->victims, victim_free);
	ax_store_close(st->store);
}

/* What a batch of results runs (ax_flow_store_warm). */
static const ax_flow_prepare_fn rh_prepare[] = {
	ax_store_results_prepare,
	ax_store_move_instances_prepare,
	ax_store_events_prepare,
};

static ax_err
rh_init(void *state, const ax_pipeline_ctx *ctx, void *arg)
{
	rh_state *st = state;
	(void) arg;
	st->ctx = ctx;
	st->recovery.delay_us =
	    ax_config_duration_us(ctx->cfg, "preemption.requeue_delay");
	st->recovery.jitter_us =
	    ax_config_duration_us(ctx->cfg, "preemption.requeue_jitter");
	ax_preempt_throttle_init(
	    &st->throttle,
	    (int) ax_config_int(ctx->cfg, "preemption.recovery_rate"));
	ax_flow_store_warm(&st->store, ctx->dsn, COMP, rh_prepare,
	                   sizeof(rh_prepare) / sizeof(rh_prepare[0]));
	return ax_strmap_new(&st->victims);
}

/* Non-blocking sends: its ResultsCommitted to the queue is a back edge
 * (the queue sends it results). */
static const ax_pipeline_def rh_def = {
	.name       = AX_A_RESULT_HANDLER,
	.state_size = sizeof(rh_state),
	.init       = rh_init,
	.fini       = rh_fini,
	.tick       = rh_tick,
	.tick_at_start = 1,
	.nonblock   = 1,
	.batch_end  = rh_batch_end,
	.on = {
		[AX__COMMAND__BODY_RESULT] = on_result,
	},
};

ax_err
ax_result_handler_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx)
{
	return ax_pipeline_add(sys, ctx, &rh_def, NULL, NULL);
}
