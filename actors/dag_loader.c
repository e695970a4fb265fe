/*
 * dag_loader.c - the DAG loader actor (see dag_loader.h).
 *
 * One pass (load_dags) serves every trigger: all DAGs at start and on
 * resync, one DAG on dag_changed / paused / unpaused, each DAG of a submit
 * (a durable command is marked applied once they are loaded: loading
 * again is harmless, so a command sent twice only reloads). A pass reads
 * slices of LOAD_SLICE DAGs; per slice it upserts the schedules rows that do
 * not match their version in one statement, deletes those of DAGs that lost
 * their schedule in another, then tells the time detector what to arm or
 * disarm and flushes, so the time detector's inbox paces the pass and at
 * most one slice is in memory.
 *
 * The first pass at start (nothing armed yet) runs in two phases so that
 * the schedules due soon fire while the rest is still being written: the
 * first phase arms every DAG whose schedules row is current and writes
 * and arms those whose first fire is due within DEFER_US; the rows of
 * the others (the bulk of a first start, where no row exists) are left
 * out, and the second phase reads the slices again and writes and arms
 * only them. Each schedule is armed once, after its row is written, so
 * the time detector never fires a schedule without its row. First fires
 * count from the instant the pass began (pass_utc), so a schedule
 * deferred to the second phase, or due while the pass runs, keeps the
 * first fire it had when the pass began: none is skipped, none moves.
 */
#include "dag_loader.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dag_registry.h"
#include "dag_schedule.h"
#include "store.h"
#include "store_commands.h"
#include "store_sched.h"

#define LOAD_SLICE 5000 /* DAGs per slice (and per schedules upsert) */
#define COMP       AX_A_DAG_LOADER
/* warm-up: the DAGs due this soon are decoded right after the initial
 * pass; later ones on their first fire (prepared ahead, so off the
 * critical path) */
#define WARM_HORIZON_US (10 * 60 * AX_USEC_PER_SEC)
/* first pass: rows to write whose first fire is due later than this after
 * the pass began go to the second phase (the time detector's wheel
 * horizon: a later schedule only waits parked anyway) */
#define DEFER_US (10 * 60 * AX_USEC_PER_SEC)

/* How a pass treats the rows it must write (see the header comment). */
typedef enum pass_mode {
	PASS_ALL,  /* write every row that must be written, arm every DAG */
	PASS_SOON, /* first phase: defer the rows due later than DEFER_US */
	PASS_LATE, /* second phase: write what is left, arm only those */
} pass_mode;

typedef struct loader {
	const ax_pipeline_ctx *ctx;
	ax_actor              *self;
	ax_store              *store;
	ax_tz_cache           *tzc;
	int                    started;  /* initial load done */
	int                    passes;   /* full passes begun */
	int64_t                pass_utc; /* when the running pass began */
} loader;

/* What a pass read and decided for one DAG (strings point into the
 * slice's PGresult). */
typedef struct pass_dag {
	const char *name;
	int64_t     dag_id;
	int64_t     version_id;
	int         paused;
	const char *expr; /* the version's schedule; NULL: none */
	const char *tz;
	int         catchup;
	int64_t     start_us, end_us; /* resolved window; 0: open */
	int64_t     schedule_id;      /* schedules.id; 0: no row yet */
	int64_t     next_us;          /* schedules.next_fire_at; 0: none */
	int         usable;           /* 0: bad schedule, left alone */
	int         deferred;         /* row left to the second phase */
	long        row;              /* index into the upsert rows; -1 */
} pass_dag;

/* Counters of one pass. */
typedef struct pass_stats {
	size_t dags, armed, written, bad, deferred;
} pass_stats;

static void
send_armed(loader *l, const pass_dag *p)
{
	Ax__Command       cmd = AX__COMMAND__INIT;
	Ax__ScheduleArmed sa  = AX__SCHEDULE_ARMED__INIT;

	sa.schedule_id     = p->schedule_id;
	sa.dag             = (char *) p->name;
	sa.dag_id          = p->dag_id;
	sa.dag_version_id  = p->version_id;
	sa.cron            = (char *) p->expr;
	sa.timezone        = (char *) p->tz;
	sa.next_fire_us    = p->next_us;
	sa.catchup         = p->catchup;
	sa.start_us        = p->start_us;
	sa.end_us          = p->end_us;
	cmd.issued_at_us   = ax_clock_utc_us();
	cmd.body_case      = AX__COMMAND__BODY_SCHEDULE_ARMED;
	cmd.schedule_armed = &sa;
	if (ax_pipeline_send(l->self, AX_A_TIME_DETECTOR, &cmd) != AX_OK)
		ax_logf(AX_LOG_ERROR, COMP, NULL,
		        &(ax_log_ids) { .dag = p->name },
		        "cannot arm the schedule: %s", ax_err_detail());
}

/* ScheduleDisarmed for dag, or the end-of-pass sweep marker (dag NULL). */
static void
send_disarmed(loader *l, const char *dag, const char *reason)
{
	Ax__Command          cmd = AX__COMMAND__INIT;
	Ax__ScheduleDisarmed sd  = AX__SCHEDULE_DISARMED__INIT;

	sd.dag                = (char *) (dag ? dag : "");
	sd.reason             = (char *) reason;
	sd.sweep              = dag == NULL;
	cmd.issued_at_us      = ax_clock_utc_us();
	cmd.body_case         = AX__COMMAND__BODY_SCHEDULE_DISARMED;
	cmd.schedule_disarmed = &sd;
	if (ax_pipeline_send(l->self, AX_A_TIME_DETECTOR, &cmd) != AX_OK)
		ax_logf(AX_LOG_ERROR, COMP, NULL,
		        dag ? &(ax_log_ids) { .dag = dag } : NULL,
		        "cannot disarm the schedule: %s", ax_err_detail());
}

/* An event about a DAG; no event emitter (tests) is not an error. */
static void
dag_event(loader *l, const char *type, const char *reason, const char *dag,
          int64_t version_id)
{
	char payload[64];
	snprintf(payload, sizeof(payload), "{\"dag_version_id\":%lld}",
	         (long long) version_id);
	ax_pipeline_event(l->self, type, reason, &(ax_log_ids) { .dag = dag },
	                  payload, 0);
}

static int
same(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/*
 * The first fire of p's schedule, used only when its schedules row has
 * none: with catchup and a start, the end of the first period (the time
 * detector then creates the missed periods, capped); otherwise the next
 * fire after the instant the pass began (one due since fires at once).
 * -1 when the schedule does not compile (logged).
 */
static int64_t
first_fire(loader *l, const pass_dag *p)
{
	ax_schedule *sch;
	ax_period    first;
	int64_t      nf = 0;

	if (ax_dag_schedule_parse(p->expr, p->tz, p->catchup,
	                          p->start_us ? p->start_us
	                                      : AX_SCHED_NO_START,
	                          p->end_us ? p->end_us : AX_SCHED_NO_END,
	                          l->tzc, &sch) != AX_OK) {
		ax_logf(AX_LOG_ERROR, COMP, "BAD_SCHEDULE",
		        &(ax_log_ids) { .dag = p->name }, "version %lld: %s",
		        (long long) p->version_id, ax_err_detail());
		return -1;
	}
	if (p->catchup && p->start_us != 0 &&
	    ax_schedule_next_period(sch, INT64_MIN + 1, &first) == AX_OK)
		nf = first.end_us;
	else if (ax_schedule_next_fire(sch, l->pass_utc, &nf) != AX_OK)
		nf = 0;
	ax_schedule_free(sch);
	return nf;
}

/*
 * Reads row r of a slice into p. Returns 1 when the schedules row must be
 * written now (missing, or it no longer matches the version's schedule;
 * *row filled), else 0; under PASS_SOON a row whose first fire is due
 * later than DEFER_US after the pass began is not written now
 * (p->deferred).
 */
static int
read_row(loader *l, PGresult *res, int r, pass_dag *p, ax_store_sched_row *row,
         pass_mode mode)
{
	const char *start = ax_store_cell(res, r, AX_SCHED_C_START);
	const char *end   = ax_store_cell(res, r, AX_SCHED_C_END);
	int64_t     nf;

	memset(p, 0, sizeof(*p));
	p->row         = -1;
	p->dag_id      = ax_store_cell_i64(res, r, AX_SCHED_C_DAG_ID);
	p->name        = PQgetvalue(res, r, AX_SCHED_C_NAME);
	p->paused      = PQgetvalue(res, r, AX_SCHED_C_PAUSED)[0] == 't';
	p->version_id  = ax_store_cell_i64(res, r, AX_SCHED_C_VERSION_ID);
	p->expr        = ax_store_cell(res, r, AX_SCHED_C_EXPR);
	p->tz          = ax_store_cell(res, r, AX_SCHED_C_TZ);
	p->catchup     = PQgetvalue(res, r, AX_SCHED_C_CATCHUP)[0] == 't';
	p->schedule_id = ax_store_cell_i64(res, r, AX_SCHED_C_SCHED_ID);
	p->next_us     = ax_store_cell_i64(res, r, AX_SCHED_C_NEXT);
	if (p->expr == NULL)
		return 0;
	if (p->tz == NULL)
		p->tz = "UTC";
	if (ax_dag_schedule_instant(start, p->tz, l->tzc, 0, &p->start_us) !=
	        AX_OK ||
	    ax_dag_schedule_instant(end, p->tz, l->tzc, 0, &p->end_us) !=
	        AX_OK) {
		ax_logf(AX_LOG_ERROR, COMP, "BAD_SCHEDULE",
		        &(ax_log_ids) { .dag = p->name }, "version %lld: %s",
		        (long long) p->version_id, ax_err_detail());
		return 0;
	}
	/* a row that matches the version and has a next fire (or fired and
	 * ended) is current: an unchanged restart writes nothing */
	if (p->schedule_id != 0 &&
	    same(ax_store_cell(res, r, AX_SCHED_C_ROW_EXPR), p->expr) &&
	    same(ax_store_cell(res, r, AX_SCHED_C_ROW_TZ), p->tz) &&
	    (PQgetvalue(res, r, AX_SCHED_C_ROW_CATCHUP)[0] == 't') ==
	        p->catchup &&
	    ax_store_cell_i64(res, r, AX_SCHED_C_ROW_START) == p->start_us &&
	    ax_store_cell_i64(res, r, AX_SCHED_C_ROW_END) == p->end_us &&
	    (p->next_us != 0 ||
	     PQgetvalue(res, r, AX_SCHED_C_FIRED)[0] == 't')) {
		p->usable = 1;
		return 0;
	}
	if ((nf = first_fire(l, p)) < 0)
		return 0;
	p->usable = 1;
	if (mode == PASS_SOON && nf > l->pass_utc + DEFER_US) {
		p->deferred = 1;
		return 0;
	}
	row->dag_id        = p->dag_id;
	row->expression    = p->expr;
	row->tz            = p->tz;
	row->catchup       = p->catchup;
	row->start_us      = p->start_us;
	row->end_us        = p->end_us;
	row->first_fire_us = nf;
	return 1;
}

/*
 * Handles one slice (n rows of res): paused flags, schedules rows, then
 * the commands to the time detector. disarm: send ScheduleDisarmed for
 * DAGs that must not be armed (not needed on the first pass). one: a
 * single-DAG pass (events). mode: PASS_SOON arms none of the deferred
 * rows, PASS_LATE arms only the rows it wrote (the others were armed by
 * the first phase) and counts neither DAGs nor bad schedules again.
 * AX_OK or a store error.
 */
static ax_err
do_slice(loader *l, PGresult *res, int n, pass_dag *p,
         ax_store_sched_row *rows, int64_t *nosched, int disarm, int one,
         pass_mode mode, pass_stats *st)
{
	size_t nrows = 0, nnos = 0;
	ax_err rv;

	for (int i = 0; i < n; i++) {
		pass_dag *d = &p[i];
		if (read_row(l, res, i, d, &rows[nrows], mode))
			d->row = (long) nrows++;
		ax_dag_registry_set_paused(l->ctx->registry, d->name,
		                           d->paused);
		if (d->expr == NULL && d->schedule_id != 0)
			nosched[nnos++] = d->dag_id;
		if (d->expr != NULL && !d->usable && mode != PASS_LATE)
			st->bad++;
		st->deferred += (size_t) d->deferred;
	}
	if ((rv = ax_store_sched_upsert(l->store, rows, nrows)) != AX_OK ||
	    (rv = ax_store_sched_delete(l->store, nosched, nnos)) != AX_OK)
		return rv;
	st->written += nrows + nnos;
	for (int i = 0; i < n; i++) {
		pass_dag *d = &p[i];
		if (d->row >= 0) {
			d->schedule_id = rows[d->row].schedule_id;
			d->next_us     = rows[d->row].next_fire_us;
		}
		if (d->deferred || (mode == PASS_LATE && d->row < 0)) {
			/* armed by the other phase */
		} else if (d->expr == NULL) {
			if (disarm)
				send_disarmed(l, d->name, "UNSCHEDULED");
		} else if (!d->usable) {
			/* a schedule that does not compile: left as it was */
		} else if (d->paused || d->next_us == 0) {
			if (disarm)
				send_disarmed(l, d->name,
				              d->paused ? "PAUSED" : "ENDED");
		} else {
			send_armed(l, d);
			st->armed++;
		}
		if (one)
			dag_event(l, "dag.loaded", d->paused ? "PAUSED" : NULL,
			          d->name, d->version_id);
	}
	if (mode != PASS_LATE)
		st->dags += (size_t) n;
	/* out now: the time detector's inbox paces the pass, and the outbox
	 * never holds more than a slice */
	ax_actor_flush(l->self, 0);
	return AX_OK;
}

/* A DAG that no longer exists: forget it and stop its schedule. */
static void
forget(loader *l, const char *name)
{
	if (ax_dag_registry_remove(l->ctx->registry, name) == AX_OK)
		ax_logf(AX_LOG_INFO, COMP, NULL, &(ax_log_ids) { .dag = name },
		        "DAG removed");
	ax_dag_registry_set_paused(l->ctx->registry, name, 0);
	send_disarmed(l, name, "DELETED");
}

/* The slices of one pass (or phase) over all DAGs, or the one DAG name,
 * handled in mode. AX_OK or a store error. */
static ax_err
pass_slices(loader *l, const char *name, int first, pass_mode mode,
            pass_dag *p, ax_store_sched_row *rows, int64_t *nosched,
            pass_stats *st)
{
	int64_t after = 0;
	int     n;
	ax_err  rv;

	do {
		PGresult *res = NULL;
		if ((rv = ax_store_sched_dags(l->store, name, after,
		                              LOAD_SLICE, &res)) != AX_OK)
			break;
		n = PQntuples(res);
		if (n > 0)
			after =
			    ax_store_cell_i64(res, n - 1, AX_SCHED_C_DAG_ID);
		rv = do_slice(l, res, n, p, rows, nosched, !first,
		              name != NULL, mode, st);
		PQclear(res);
		memset(rows, 0, sizeof(*rows) * LOAD_SLICE);
	} while (rv == AX_OK && n == LOAD_SLICE);
	return rv;
}

/*
 * One pass over all DAGs (name NULL) or one DAG; the first full pass in
 * two phases (see the header comment). Returns a store error when
 * PostgreSQL could not be read or written (the caller retries), else
 * AX_OK.
 */
static ax_err
load_dags(loader *l, const char *name)
{
	pass_dag           *p       = calloc(LOAD_SLICE, sizeof(*p));
	ax_store_sched_row *rows    = calloc(LOAD_SLICE, sizeof(*rows));
	int64_t            *nosched = calloc(LOAD_SLICE, sizeof(*nosched));
	pass_stats          st      = { 0 };
	int64_t             t0      = ax_clock_mono_us();
	int                 first   = 0;
	ax_err              rv      = AX_OK;

	if (p == NULL || rows == NULL || nosched == NULL) {
		free(p);
		free(rows);
		free(nosched);
		return ax_err_set(AX_ENOMEM, "dag_loader: out of memory");
	}
	l->pass_utc = ax_clock_utc_us();
	if (name == NULL) {
		first = l->passes++ == 0;
		/* a resync: any DAG may have changed unnoticed */
		if (!first)
			ax_dag_registry_invalidate(l->ctx->registry, NULL);
	}
	rv = pass_slices(l, name, first, first ? PASS_SOON : PASS_ALL, p, rows,
	                 nosched, &st);
	if (rv == AX_OK && st.deferred > 0) {
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
		        "%zu schedule(s) armed in %.3f s; writing the "
		        "schedules rows of %zu due later",
		        st.armed,
		        (double) (ax_clock_mono_us() - t0) / AX_USEC_PER_SEC,
		        st.deferred);
		rv = pass_slices(l, NULL, first, PASS_LATE, p, rows, nosched,
		                 &st);
	}
	free(p);
	free(rows);
	free(nosched);
	if (rv != AX_OK)
		return rv;
	if (name != NULL && st.dags == 0)
		forget(l, name);
	if (name == NULL) {
		send_disarmed(l, NULL, "SWEEP");
		ax_actor_flush(l->self, 0); /* before the warm-up */
	}
	ax_logf(AX_LOG_INFO, COMP, NULL,
	        name ? &(ax_log_ids) { .dag = name } : NULL,
	        "loaded %zu DAG(s): %zu schedule(s) armed, %zu schedules "
	        "row(s) written, %zu bad schedule(s), in %.3f s",
	        st.dags, st.armed, st.written, st.bad,
	        (double) (ax_clock_mono_us() - t0) / AX_USEC_PER_SEC);
	return AX_OK;
}

/* Decodes the DAGs due soonest so their first fires find them cached. */
static void
warm_registry(loader *l)
{
	ax_dag_registry_stats rs;
	int64_t               t0 = ax_clock_mono_us();
	size_t                n  = 0;

	ax_dag_registry_stats_get(l->ctx->registry, &rs);
	if (ax_dag_registry_warm(l->ctx->registry, rs.cache_max,
	                         WARM_HORIZON_US, &n) != AX_OK)
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "warming the DAG registry stopped after %zu: %s", n,
		        ax_err_detail());
	else
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
		        "DAG registry warmed with %zu version(s) in %.3f s", n,
		        (double) (ax_clock_mono_us() - t0) / AX_USEC_PER_SEC);
}

static ax_err
loader_tick(ax_actor *self, void *state, int64_t now_mono_us)
{
	loader *l = state;
	ax_err  rv;

	if (l->started)
		return AX_OK;
	if ((rv = load_dags(l, NULL)) != AX_OK) {
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
		        "initial load failed, retrying in 1 s: %s",
		        ax_err_detail());
		ax_actor_set_deadline(self, now_mono_us + AX_USEC_PER_SEC);
		return AX_OK;
	}
	l->started = 1;
	warm_registry(l);
	return AX_OK;
}

/*
 * Marks the control_command row of op applied once its DAGs are loaded
 * (the API wrote the change itself; loading again is harmless, so a
 * command forwarded twice only reloads). A store error leaves it pending:
 * the control thread sends it again.
 */
static void
command_done(loader *l, const Ax__ControlOp *op)
{
	ax_store_cmd_done c = { .id     = op->command_id,
		                .status = AX_CMD_APPLIED };
	char              res[64];

	if (op->command_id <= 0)
		return;
	snprintf(res, sizeof(res), "{\"loaded\":%zu}",
	         op->n_dags > 0 ? op->n_dags : (size_t) (op->dag != NULL));
	c.result_json = res;
	if (ax_store_commands_finish(l->store, &c, 1, NULL) != AX_OK)
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "command %lld: outcome not written (sent again "
		        "later): %s",
		        (long long) op->command_id, ax_err_detail());
}

static void
control(loader *l, const Ax__ControlOp *op)
{
	ax_err rv = AX_OK;

	if (strcmp(op->op, "submit") == 0) {
		for (size_t i = 0; rv == AX_OK && i < op->n_dags; i++) {
			ax_dag_registry_invalidate(l->ctx->registry,
			                           op->dags[i]);
			rv = load_dags(l, op->dags[i]);
		}
	} else if (strcmp(op->op, "resync") == 0) {
		rv = load_dags(l, NULL);
		if (rv == AX_OK)
			l->started = 1;
	} else if (strcmp(op->op, "dag_changed") == 0 ||
	           strcmp(op->op, "paused") == 0 ||
	           strcmp(op->op, "unpaused") == 0) {
		if (op->dag == NULL || op->dag[0] == '\0') {
			ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
			        "control op %s without a dag: dropped",
			        op->op);
			return;
		}
		/* the next lookup reads the new active version */
		if (op->op[0] == 'd')
			ax_dag_registry_invalidate(l->ctx->registry, op->dag);
		rv = load_dags(l, op->dag);
	} else {
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "control op '%s' is not the loader's: dropped",
		        op->op);
		return;
	}
	if (rv != AX_OK) {
		/* the next resync or change reloads it; a full reload soon
		 * covers a lost change too */
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
		        "control op %s failed, full reload in 1 s: %s", op->op,
		        ax_err_detail());
		l->started = 0;
		ax_actor_set_deadline(l->self,
		                      ax_clock_mono_us() + AX_USEC_PER_SEC);
		return;
	}
	command_done(l, op);
}

static ax_err
on_control(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	control(state, m->cmd->control);
	return AX_OK;
}

static void
loader_fini(void *state)
{
	loader *l = state;
	ax_store_close(l->store);
	ax_tz_cache_free(l->tzc);
}

static ax_err
loader_init(void *state, const ax_pipeline_ctx *ctx, void *arg)
{
	loader *l = state;
	int64_t cache;
	ax_err  rv;

	(void) arg;
	l->ctx = ctx;
	cache  = ax_config_int(ctx->cfg, "registry.cache_dags");
	if ((rv = ax_tz_cache_new(&l->tzc)) != AX_OK ||
	    (rv = ax_store_open(ctx->dsn, &l->store)) != AX_OK ||
	    (rv = ax_dag_registry_set_source(ctx->registry, ctx->dsn)) !=
	        AX_OK)
		return rv;
	ax_dag_registry_set_cache_max(
	    ctx->registry,
	    cache >= 0 ? (size_t) cache : AX_DAG_REGISTRY_CACHE_DEFAULT);
	return AX_OK;
}

static ax_err
loader_added(ax_actor *self, void *state)
{
	loader *l = state;
	l->self   = self;
	return AX_OK;
}

/* The initial load runs as the first tick, once the system starts. */
static const ax_pipeline_def loader_def = {
	.name          = AX_A_DAG_LOADER,
	.state_size    = sizeof(loader),
	.init          = loader_init,
	.added         = loader_added,
	.fini          = loader_fini,
	.tick          = loader_tick,
	.tick_at_start = 1,
	.on            = { [AX__COMMAND__BODY_CONTROL] = on_control },
};

ax_err
ax_dag_loader_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx)
{
	return ax_pipeline_add(sys, ctx, &loader_def, NULL, NULL);
}
